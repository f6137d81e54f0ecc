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

Opening inspects the file through read-only connections before anything writes to it
(:mod:`actors._eventlog._inspect`: the file, its write-ahead log, the session, the schema
and every row); a refused file keeps every byte. Each session writes ``open TOKEN`` to
the ``session`` meta key at start (checkpointed into the database file) and with every
commit, and ``closed TOKEN`` at a clean close, so the next open can tell a missing or
foreign ``-wal`` (design §6.12).

A commit that fails (disk full, an I/O error, a lock) never stops the writer: the batch
is kept and retried with capped backoff, the tickets not yet committed are *delayed*
(waiters get :class:`~actors.errors.LedgerUnavailable`), rows keep being staged, and the
``on_health`` callback of :meth:`Ledger.run_writer` hears when commits fail and when one
succeeds again (design §6.13). Reads go on meanwhile, from what is committed.

No wait on the disk is unbounded (design §6.19): a commit that runs longer than
``stall_timeout`` makes the watchdog (``Ledger.health.watch``) declare the ledger unavailable
(``cause`` ``commit stalled``) until it ends; a read gives up after ``read_timeout``
(``LedgerUnavailable``); cancellation abandons a worker thread instead of waiting for it
(the thread keeps the connection until it returns: the limiter is released only then).
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING, Any

import trio

from .._core import Backoff
from ..errors import LedgerError, LedgerUnavailable
from ._batch import Batch, Segment
from ._connection import classify_error, keep_log, open_connection
from ._health import LedgerHealth
from ._ledger_reads import LedgerReads
from ._ledger_schema import RUN_COLUMNS
from ._statistics import LedgerStatistics as LedgerStatistics

if TYPE_CHECKING:
    from ._health import HealthCallback
    from ._inspect import LedgerSnapshot
    from ._ticket import Ticket
    from ._types import Event, Receipt
    from ._wal import WalReport

__all__ = ["Ledger", "LedgerStatistics"]


class Ledger:
    """The SQLite ledger behind a durable event log (design §6.10).

    Args:
        path: The database file; created (atomically, with the schema) if missing.
        synchronous: ``PRAGMA synchronous`` (``FULL``, ``NORMAL`` or ``EXTRA``).
        commit_linger: Seconds (trio clock) the writer waits after the first staged row
            before committing, to grow the batch; 0 commits as soon as it is free.
        max_pending_rows: Staged rows above which :meth:`wait_writable` blocks.
        retry: The delays between attempts to commit a batch that failed (seconds).
        read_timeout: Seconds (trio clock) a read waits, for the commit before it and
            for SQLite, before it raises ``LedgerUnavailable`` (design §6.19).
        stall_timeout: Seconds (trio clock) a commit may run before the watchdog
            declares the ledger unavailable (design §6.19).
    """

    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "FULL",
        commit_linger: float = 0.0,
        max_pending_rows: int = 50_000,
        retry: Backoff | None = None,
        read_timeout: float = 5.0,
        stall_timeout: float = 5.0,
    ) -> None:
        self.path = path
        self._stall_timeout = stall_timeout
        self._synchronous = synchronous
        self._linger = commit_linger
        self._max_pending = max_pending_rows
        retry = retry or Backoff(base=0.05, cap=2.0)
        self._limiter = trio.CapacityLimiter(1)
        self._reads = LedgerReads(
            path,
            self._limiter,
            lambda: self._conn,
            timeout=read_timeout,
            retry_after=retry.base,
        )
        self._conn: sqlite3.Connection | None = None
        self._session = ""
        self._batch = Batch()
        self._dirty = trio.Event()
        self._last_ticket: Ticket | None = None
        self._orphans: list[Batch] = []
        self._failed: Batch | None = None  # its commit failed: retried before any other
        #: Failed and stalled commits; its ``watch`` is the commit watchdog (§6.19).
        self.health = LedgerHealth(path, retry, stall_timeout, lambda: self._batch)
        self._committed_seq = 0
        self._commits = 0
        self._rows = 0
        self._largest = 0
        #: What the write-ahead-log check found at open (None without a ``-wal``).
        self.wal_report: WalReport | None = None

    # -- opening and closing ----------------------------------------------------------

    async def open(self, *, keep_requests: int, keep_events: int | None = None) -> LedgerSnapshot:
        """Inspect the file, create or open the ledger, and load what boot needs.

        Args:
            keep_requests: How many of the most recent requests to load.
            keep_events: How many of the most recent events to keep; older ones are
                deleted now, in one transaction (None keeps them all).

        Raises:
            LedgerCorrupt: (``ledger_corrupt``) the file, its write-ahead log or a row is
                damaged, or the log is missing or foreign; nothing was written.
            LedgerVersionError: (``ledger_version_unsupported``) a schema we cannot open.
            LedgerError: (``ledger_error``) not a ledger, or SQLite failed.
        """
        return await self._reads.call(self._open_sync, keep_requests, keep_events)

    def _open_sync(self, keep_requests: int, keep_events: int | None) -> LedgerSnapshot:
        conn, self._session, inspection = open_connection(
            self.path,
            synchronous=self._synchronous,
            keep_requests=keep_requests,
            keep_events=keep_events,
        )
        self._conn = conn
        self._committed_seq = inspection.snapshot.head
        self.wal_report = inspection.wal
        return inspection.snapshot

    async def close(self) -> None:
        """Commit what is still staged, mark the session closed, close; idempotent.

        Call it after the writer stopped, under a deadline (``close_timeout``). The final
        commit runs in one worker thread, after any commit still running (an abandoned
        one); a cancellation abandons it (design §6.19): the thread may still finish, or
        hang on a stalled disk, and the write-ahead log is left for the next open, which
        finds the session unfinished, as after a crash (design §6.12). So does a failed
        final commit.

        Raises:
            LedgerUnavailable: (``ledger_unavailable``) the final commit failed; what was
                staged and not committed is lost (never acknowledged).
            LedgerError: (``ledger_error``) the same, for another SQLite error.
        """
        conn = self._conn
        if conn is None:
            await trio.lowlevel.checkpoint()
            return
        pending = (self._failed, *self._orphans, self._batch)
        batches = [b for b in pending if b is not None and (b.size or b.runs)]
        self._failed = None
        self._orphans = []
        self._batch = Batch()
        closed = "closed" + self._session.removeprefix("open")

        def final() -> None:
            try:
                for batch in batches:
                    if not batch.committed:  # an abandoned commit may have finished it
                        self._commit_sync(batch)
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('session', ?)", (closed,))
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                keep_log(self.path, conn)
                raise
            conn.close()  # the last connection: SQLite removes the -wal

        try:
            await trio.to_thread.run_sync(final, limiter=self._limiter, abandon_on_cancel=True)
        except sqlite3.Error as exc:
            raise classify_error(self.path, exc, "the final commit") from exc
        finally:
            self._conn = None
            for batch in batches:
                self._settled(batch)

    def abandon(self) -> None:
        """Fail every ticket not yet committed (the log stopped without a final commit)."""
        for batch in (self._failed, *self._orphans, self._batch):
            if batch is not None and not batch.ticket.done:
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
        self,
        request_id: str,
        content: str,
        run_id: int,
        receipt_json: str,
        position: int,
        actor: str | None = None,
    ) -> Ticket:
        """Stage a request row; return the ticket of its batch."""
        row = (request_id, content, run_id, receipt_json, position, actor)
        self._batch.requests.append(row)
        return self._staged(1)

    def stage_detach(self, request_id: str, cancelled_by: str) -> Ticket:
        """Stage that a request stopped waiting on its run, detached by ``cancelled_by``."""
        self._batch.detached.append((cancelled_by, request_id))
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

    @property
    def unavailable(self) -> LedgerUnavailable | None:
        """The error of the last failed commit while commits fail, else None (§6.13)."""
        return self.health.unavailable

    @property
    def committed_seq(self) -> int:
        """The highest event seq committed (the boot head before any commit)."""
        return self._committed_seq

    # -- the writer -----------------------------------------------------------------------

    async def run_writer(
        self,
        *,
        on_health: HealthCallback | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Commit staged batches, one transaction each, until cancelled (design §6.10).

        Cancellation abandons a commit in progress (its thread finishes it, or hangs on a
        stalled disk; :meth:`close` commits the batch if it did not, design §6.19).
        A failed commit never ends the writer (design §6.13): the batch is retried after
        the retry policy's delay, before anything staged later, until it commits.

        Args:
            on_health: Called (sync) with the :class:`LedgerUnavailable` of the first
                failed commit of an outage, and with None once a commit succeeds again.
        """
        task_status.started()
        while True:
            failed = self._failed
            if failed is not None:
                await trio.sleep(self.health.retry_delay())
                if await self._commit(failed, on_health):
                    self._failed = None
                continue
            await self._dirty.wait()
            if self._linger:
                await trio.sleep(self._linger)
            batch, self._batch = self._batch, self._new_batch()
            self._dirty = trio.Event()
            if not await self._commit(batch, on_health):
                self._failed = batch

    def _new_batch(self) -> Batch:
        batch = Batch()
        if self.health.unavailable is not None:
            batch.ticket._delay(self.health.unavailable)
        return batch

    async def _commit(self, batch: Batch, on_health: HealthCallback | None) -> bool:
        health = self.health
        health.moved(batch)
        try:
            await trio.to_thread.run_sync(
                self._commit_sync, batch, limiter=self._limiter, abandon_on_cancel=True
            )
        except sqlite3.Error as exc:
            health.failed(batch, exc, on_health)
            return False
        except BaseException:
            if not batch.committed:  # cancelled (abandoned): close() commits it
                self._orphans.append(batch)
            raise
        finally:
            health.moved(None)
        self._settled(batch)
        if health.unavailable is not None:  # after failed or stalled commits
            health.recovered(on_health)
        return True

    def _settled(self, batch: Batch) -> None:
        if batch.committed:
            self._commits += 1
            self._rows += batch.size
            self._largest = max(self._largest, batch.size)
            if batch.segments:
                self._committed_seq = batch.last_seq
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
                conn.executemany(
                    "INSERT INTO requests VALUES (?, ?, ?, ?, ?, ?, NULL)", batch.requests
                )
            if batch.detached:
                conn.executemany(
                    "UPDATE requests SET cancelled_by = ? WHERE request_id = ?", batch.detached
                )
            if batch.runs:
                conn.executemany(
                    f"INSERT OR REPLACE INTO runs VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
                    batch.runs.values(),
                )
            if batch.segments:
                conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", batch.event_rows())
            if batch.meta:
                conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", batch.meta.items())
            # Every commit carries this session's marker, so a log from another session
            # or ledger is told apart at the next open (design §6.12).
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('session', ?)", (self._session,))
            conn.execute("COMMIT")
            batch.committed = True
        except BaseException:
            # SQLite may have rolled back already (disk full): keep the first error.
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    async def flush(self) -> None:
        """Wait until everything staged so far is committed; always a checkpoint.

        Raises:
            LedgerUnavailable: (``ledger_unavailable``) commits fail now (§6.13).
            LedgerError: (``ledger_error``) the ledger closed first.
        """
        ticket = self._last_ticket
        if ticket is None:
            await trio.lowlevel.checkpoint()
        else:
            await ticket.wait()

    async def settle_for_read(self) -> None:
        """Wait until what is staged is committed, unless commits fail; a checkpoint.

        Reads that follow see everything decided so far, or, while commits fail, what
        is durable (design §6.13): they never wait for the ledger to recover.

        Raises:
            LedgerUnavailable: (``ledger_unavailable``) the commit did not end within
                ``read_timeout`` seconds (design §6.19); ``details`` has ``retry_after``.
        """
        with trio.move_on_after(self._reads.timeout) as scope, contextlib.suppress(LedgerError):
            await self.flush()
        if scope.cancelled_caught:
            raise self._reads.timed_out("waiting for the commit before it")

    async def wait_writable(self) -> None:
        """Wait while more than ``max_pending_rows`` rows are staged; always a checkpoint.

        This is the back-pressure point of the event log's writers (every channel
        bounded). It does not wait while commits fail: the log refuses new work then
        instead, and waiting here would stall the readers behind it (design §6.13).
        """
        await trio.lowlevel.checkpoint()
        while self._batch.size > self._max_pending and self.health.unavailable is None:
            try:
                await self._batch.ticket.wait()
            except LedgerUnavailable:
                return

    # -- reads (for what memory no longer holds): LedgerReads (design §6.11, §6.19) ----

    async def fetch_run(self, run_id: int) -> tuple[dict[str, Any], int] | None:
        """The committed run ``run_id``, checked; see :meth:`LedgerReads.run`."""
        return await self._reads.run(run_id)

    async def fetch_request(self, request_id: str) -> tuple[str, Receipt, str | None] | None:
        """A committed request; see :meth:`LedgerReads.request`."""
        return await self._reads.request(request_id)

    async def fetch_events(self, after: int, limit: int) -> list[Event]:
        """Committed events after ``after``; see :meth:`LedgerReads.events`."""
        return await self._reads.events(after, limit)

    async def fetch_decided_runs(
        self,
        after: int,
        limit: int,
        states: tuple[str, ...],
        verdict: str | None,
        since: float | None,
    ) -> list[tuple[Any, ...]]:
        """A page of decided runs' rows (§6.18); see :meth:`LedgerReads.decided_runs`."""
        return await self._reads.decided_runs(after, limit, states, verdict, since)

    def statistics(self) -> LedgerStatistics:
        """Return the ledger's counters."""
        unavailable = self.health.unavailable
        return LedgerStatistics(
            commits=self._commits,
            rows=self._rows,
            pending_rows=self._batch.size,
            largest_batch=self._largest,
            failed_commits=self.health.failed_commits,
            stalled_commits=self.health.stalled_commits,
            read_timeouts=self._reads.timeouts,
            unavailable=None if unavailable is None else unavailable.message,
        )
