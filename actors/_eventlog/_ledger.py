"""The event log's SQLite ledger: requests, runs and events on disk (design §6.10).

One :class:`Ledger` owns one ``sqlite3`` connection. Every SQLite call runs in a worker
thread through ``trio.to_thread.run_sync`` with a private ``CapacityLimiter(1)``, so the
connection is only ever used by one thread at a time and the event loop never blocks.

Writes are *staged* synchronously (``stage_*``) into the current batch and committed by a
single writer task (:meth:`Ledger.run_writer`): group commit. While one batch commits,
the next one fills, so a busy log commits many rows per transaction, and a quiet one
commits each row at once. Each batch has a :class:`Ticket`; ``await ticket.wait()``
returns once that batch is durable. The latency from staging to the start of its commit
is at most ``commit_linger`` (<= 10 ms) plus the duration of the commit in progress.

Event rows are the hot path (one per event): staging one appends to plain lists, no
object per row (see ``Batch``), and each transaction writes them with one
``executemany``. Their ``data`` arrives JSON-encoded by the log, or, for the commonest
event (``job_progress`` with data ``{"fraction": f}``), as the float, encoded by the
writer thread; either way once.

Opening checks the file before anything writes to it: an existing file must have the
SQLite header, pass ``PRAGMA quick_check`` through a read-only connection, carry our
``application_id`` and a ``user_version`` we know. Otherwise :class:`LedgerCorrupt`,
:class:`LedgerVersionError` or :class:`LedgerError` is raised and the file's bytes are
left unchanged.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import trio

from ..errors import LedgerError
from ._batch import Batch, Segment
from ._ledger_schema import (
    _SCHEMA,
    APPLICATION_ID,
    RUN_COLUMNS,
    SCHEMA_VERSION,
    check_ledger_file,
    prune_events,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._ticket import Ticket

_T = TypeVar("_T")

__all__ = [
    "APPLICATION_ID",
    "RUN_COLUMNS",
    "SCHEMA_VERSION",
    "Ledger",
    "LedgerSnapshot",
    "LedgerStatistics",
]


@attrs.frozen(kw_only=True)
class LedgerSnapshot:
    """What a ledger holds at boot, loaded by :meth:`Ledger.open`."""

    revision: int
    """The persisted revision (0 for a new ledger)."""
    head: int
    """The highest event seq (0 for none)."""
    next_run_no: int
    """The number for the next run id."""
    next_request_position: int
    """The position for the next stored request."""
    open_runs: tuple[dict[str, Any], ...]
    """Rows (as dicts keyed by :data:`RUN_COLUMNS`) of runs not finished nor cancelled."""
    requests: tuple[tuple[str, str, int, str], ...]
    """The most recent ``(request_id, content, run_id, receipt_json)`` rows, oldest first."""
    request_total: int
    """How many requests the ledger holds in all."""
    event_floor: int = 1
    """The lowest event seq the ledger still holds (``head + 1`` when it holds none):
    older events were pruned at open (``keep_events``)."""


@attrs.frozen(kw_only=True)
class LedgerStatistics:
    """Counters of a ledger (STYLE 16)."""

    commits: int
    """Transactions committed."""
    rows: int
    """Rows written in all."""
    pending_rows: int
    """Rows staged and not yet committed."""
    largest_batch: int
    """Most rows in one transaction."""


class Ledger:
    """The SQLite ledger behind a durable event log (design §6.10).

    Args:
        path: The database file; created with the schema if missing or empty.
        synchronous: ``PRAGMA synchronous`` (``FULL``, ``NORMAL`` or ``EXTRA``).
        commit_linger: Seconds (trio clock) the writer waits after the first staged row
            before committing, to grow the batch; 0 commits as soon as it is free.
        max_pending_rows: Staged rows above which :meth:`wait_writable` blocks.
    """

    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "FULL",
        commit_linger: float = 0.0,
        max_pending_rows: int = 50_000,
    ) -> None:
        self.path = path
        self._synchronous = synchronous
        self._linger = commit_linger
        self._max_pending = max_pending_rows
        self._limiter = trio.CapacityLimiter(1)
        self._conn: sqlite3.Connection | None = None
        self._batch = Batch()
        self._dirty = trio.Event()
        self._last_ticket: Ticket | None = None
        self._orphans: list[Batch] = []
        self._commits = 0
        self._rows = 0
        self._largest = 0

    # -- opening and closing ----------------------------------------------------------

    async def open(self, *, keep_requests: int, keep_events: int | None = None) -> LedgerSnapshot:
        """Check the file, create or open the schema, and load what boot needs.

        Args:
            keep_requests: How many of the most recent requests to load.
            keep_events: How many of the most recent events to keep; older ones are
                deleted now, in one transaction (None keeps them all).

        Raises:
            LedgerCorrupt: (``ledger_corrupt``) the file is damaged; it is untouched.
            LedgerVersionError: (``ledger_version_unsupported``) newer schema.
            LedgerError: (``ledger_error``) not a ledger, or SQLite failed.
        """
        return await self._call(self._open_sync, keep_requests, keep_events)

    def _open_sync(self, keep_requests: int, keep_events: int | None) -> LedgerSnapshot:
        existing = check_ledger_file(self.path)
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open ledger {self.path!r}: {exc}") from None
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            if not existing:
                conn.executescript("BEGIN;" + _SCHEMA + "COMMIT;")
            elif keep_events is not None:
                prune_events(conn, keep_events)
            snapshot = self._load(conn, keep_requests)
        except sqlite3.Error as exc:
            conn.close()
            raise LedgerError(f"cannot open ledger {self.path!r}: {exc}") from None
        self._conn = conn
        return snapshot

    @staticmethod
    def _load(conn: sqlite3.Connection, keep_requests: int) -> LedgerSnapshot:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        head = conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
        run_no = conn.execute("SELECT coalesce(max(run_id), 0) FROM runs").fetchone()[0]
        total, position = conn.execute(
            "SELECT count(*), coalesce(max(position), 0) FROM requests"
        ).fetchone()
        cols = ", ".join(RUN_COLUMNS)
        open_runs = tuple(
            dict(zip(RUN_COLUMNS, row, strict=True))
            for row in conn.execute(
                f"SELECT {cols} FROM runs WHERE state NOT IN ('finished', 'cancelled')"
                " ORDER BY run_id"
            )
        )
        requests = conn.execute(
            "SELECT request_id, content, run_id, receipt FROM requests"
            " ORDER BY position DESC LIMIT ?",
            (keep_requests,),
        ).fetchall()
        requests.reverse()
        floor = conn.execute("SELECT min(seq) FROM events").fetchone()[0]
        return LedgerSnapshot(
            revision=int(meta.get("revision", "0")),
            head=head,
            next_run_no=run_no + 1,
            next_request_position=position + 1,
            open_runs=open_runs,
            requests=tuple(requests),
            request_total=total,
            event_floor=head + 1 if floor is None else floor,
        )

    async def close(self) -> None:
        """Commit what is still staged, then close the connection; idempotent.

        Call it after the writer stopped. The final commit runs in one worker thread that
        cancellation does not interrupt once it started.

        Raises:
            LedgerError: (``ledger_error``) the final commit failed.
        """
        conn = self._conn
        if conn is None:
            await trio.lowlevel.checkpoint()
            return
        batches = [b for b in (*self._orphans, self._batch) if b.size or b.runs]
        self._orphans = []
        self._batch = Batch()

        def final() -> None:
            try:
                for batch in batches:
                    self._commit_sync(batch)
            finally:
                conn.close()

        try:
            await trio.to_thread.run_sync(final, limiter=self._limiter)
        except sqlite3.Error as exc:
            raise LedgerError(f"final ledger commit failed: {exc}") from None
        finally:
            self._conn = None
            for batch in batches:
                self._settled(batch)

    def abandon(self) -> None:
        """Fail every ticket not yet committed (the log stopped without a final commit)."""
        for batch in (*self._orphans, self._batch):
            if not batch.ticket.done:
                batch.ticket._settle("the ledger closed before this batch was committed")

    # -- staging (sync) -----------------------------------------------------------------

    def _staged(self, rows: int) -> Ticket:
        batch = self._batch
        batch.rows += rows
        if not self._dirty.is_set():
            self._dirty.set()
        self._last_ticket = batch.ticket
        return batch.ticket

    def stage_request(
        self, request_id: str, content: str, run_id: int, receipt_json: str, position: int
    ) -> Ticket:
        """Stage a request row; return the ticket of its batch."""
        self._batch.requests.append((request_id, content, run_id, receipt_json, position))
        return self._staged(1)

    def stage_run(self, row: tuple[Any, ...]) -> Ticket:
        """Stage a run row (values in :data:`RUN_COLUMNS` order, ``run_id`` first); later
        rows of a run in one batch replace earlier ones, so only its last state is written.
        """
        runs = self._batch.runs
        fresh = row[0] not in runs
        runs[row[0]] = row
        return self._staged(1 if fresh else 0)

    def stage_event(self, seq: int, kind: str, run_id: int | None, data_json: str) -> Ticket:
        """Stage an ``events`` row, its data already JSON-encoded (by the log, once).

        Events must be staged in seq order without a gap (the log stages every event);
        the batch's rows go to SQLite in one ``executemany`` per transaction.

        Raises:
            ValueError: ``seq`` does not follow the previous staged event's.
        """
        batch = self._batch
        tail = batch.text_tail
        if tail is not None and seq == batch.last_seq + 1:  # the hot path
            batch.last_seq = seq
            tail.kinds.append(kind)
            tail.run_ids.append(run_id)
            tail.values.append(data_json)
            return batch.ticket
        tail = self._next_event(seq, None)
        tail.kinds.append(kind)
        tail.run_ids.append(run_id)
        tail.values.append(data_json)
        return batch.ticket

    def stage_progress(self, seq: int, run_id: int, fraction: float) -> Ticket:
        """Stage the ``job_progress`` row whose data is ``{"fraction": fraction}``.

        The same row as ``stage_event(seq, "job_progress", run_id, text)``, staged with
        less work: one float appended to the run's progress segment; the writer thread
        makes the JSON text. ``fraction`` must be a finite float.

        Raises:
            ValueError: ``seq`` does not follow the previous staged event's.
        """
        batch = self._batch
        if run_id == batch.progress_run and seq == batch.last_seq + 1:  # the hot path
            batch.last_seq = seq
            batch.progress_values.append(fraction)
            return batch.ticket
        self._next_event(seq, run_id).values.append(fraction)
        return batch.ticket

    def _next_event(self, seq: int, progress_run: int | None) -> Segment:
        # The slow path of staging an event: the first of a batch, or a new segment.
        batch = self._batch
        if not batch.segments:
            batch.first_seq = seq
            self._staged(0)
        elif seq != batch.last_seq + 1:
            raise ValueError(f"event seq {seq} does not follow {batch.last_seq}")
        batch.last_seq = seq
        if progress_run is None and batch.text_tail is not None:
            return batch.text_tail
        segment = Segment(progress_run)
        batch.segments.append(segment)
        if progress_run is None:
            batch.text_tail = segment
            batch.progress_run = None
        else:
            batch.text_tail = None
            batch.progress_run = progress_run
            batch.progress_values = segment.values
        return segment

    def stage_meta(self, key: str, value: str) -> Ticket:
        """Stage a ``meta`` key (e.g. ``revision``)."""
        self._batch.meta[key] = value
        return self._staged(1)

    @property
    def pending_rows(self) -> int:
        """Rows staged and not yet committed (the batch being committed included)."""
        return self._batch.size

    # -- the writer -----------------------------------------------------------------------

    async def run_writer(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Commit staged batches, one transaction each, until cancelled (design §6.10).

        A commit in progress is never interrupted by cancellation (the thread finishes it).

        Raises:
            LedgerError: (``ledger_error``) a transaction failed; its ticket and every
                later one report the failure.
        """
        task_status.started()
        while True:
            await self._dirty.wait()
            if self._linger:
                await trio.sleep(self._linger)
            await self._commit_one()

    async def _commit_one(self) -> None:
        batch, self._batch = self._batch, Batch()
        self._dirty = trio.Event()
        try:
            await trio.to_thread.run_sync(self._commit_sync, batch, limiter=self._limiter)
        except sqlite3.Error as exc:
            batch.ticket._settle(str(exc))
            self._batch.ticket._settle(f"an earlier commit failed: {exc}")
            raise LedgerError(f"ledger commit failed: {exc}") from None
        except BaseException:
            if not batch.committed:  # cancelled before its thread ran: close() commits it
                self._orphans.append(batch)
            raise
        self._settled(batch)

    def _settled(self, batch: Batch) -> None:
        if batch.committed:
            self._commits += 1
            self._rows += batch.size
            self._largest = max(self._largest, batch.size)
            batch.ticket._settle()
        elif not batch.ticket.done:
            batch.ticket._settle("the batch was not committed")

    def _commit_sync(self, batch: Batch) -> None:
        conn = self._conn
        if conn is None:
            raise sqlite3.OperationalError("ledger is closed")
        conn.execute("BEGIN")
        try:
            if batch.requests:
                conn.executemany("INSERT INTO requests VALUES (?, ?, ?, ?, ?)", batch.requests)
            if batch.runs:
                conn.executemany(
                    f"INSERT OR REPLACE INTO runs VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
                    batch.runs.values(),
                )
            if batch.segments:
                conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", batch.event_rows())
            if batch.meta:
                conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", batch.meta.items())
            conn.execute("COMMIT")
            batch.committed = True
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    async def flush(self) -> None:
        """Wait until everything staged so far is committed; always a checkpoint.

        Raises:
            LedgerError: (``ledger_error``) a commit failed.
        """
        ticket = self._last_ticket
        if ticket is None:
            await trio.lowlevel.checkpoint()
        else:
            await ticket.wait()

    async def wait_writable(self) -> None:
        """Wait while more than ``max_pending_rows`` rows are staged; always a checkpoint.

        This is the back-pressure point of the event log's writers (every channel bounded).
        """
        await trio.lowlevel.checkpoint()
        while self._batch.size > self._max_pending:
            await self._batch.ticket.wait()

    # -- reads (for what memory no longer holds) -------------------------------------------

    async def fetch_run(self, run_id: int) -> dict[str, Any] | None:
        """Return the committed row of ``run_id`` (keys :data:`RUN_COLUMNS`) or None."""
        cols = ", ".join(RUN_COLUMNS)
        rows = await self._query(f"SELECT {cols} FROM runs WHERE run_id = ?", (run_id,))
        return dict(zip(RUN_COLUMNS, rows[0], strict=True)) if rows else None

    async def fetch_request(self, request_id: str) -> tuple[str, int, str] | None:
        """Return ``(content, run_id, receipt_json)`` of a committed request, or None."""
        rows = await self._query(
            "SELECT content, run_id, receipt FROM requests WHERE request_id = ?",
            (request_id,),
        )
        return tuple(rows[0]) if rows else None

    async def fetch_events(self, after: int, limit: int) -> list[tuple[int, str, int | None, str]]:
        """Return up to ``limit`` committed ``(seq, kind, run_id, data_json)`` after ``after``."""
        return await self._query(
            "SELECT seq, kind, run_id, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
            (after, limit),
        )

    async def _query(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        def run() -> list[Any]:
            if self._conn is None:
                raise LedgerError("ledger is closed")
            return self._conn.execute(sql, params).fetchall()

        return await self._call(run)

    async def _call(self, fn: Callable[..., _T], *args: object) -> _T:
        try:
            return await trio.to_thread.run_sync(fn, *args, limiter=self._limiter)
        except sqlite3.Error as exc:
            raise LedgerError(f"ledger {self.path!r}: {exc}") from None

    def statistics(self) -> LedgerStatistics:
        """Return the ledger's counters."""
        return LedgerStatistics(
            commits=self._commits,
            rows=self._rows,
            pending_rows=self._batch.size,
            largest_batch=self._largest,
        )
