"""The ledger's durable commit: group commit, tickets, outages, close (§6.10).

One :class:`BatchLedger` owns one :class:`Store`: the engine's connections and the SQL of
its transactions (:class:`~actors._eventlog._ledger._connection.SQLiteStore`, one
``sqlite3`` connection; :class:`~actors._eventlog._ledger._postgres.PostgresStore`, psycopg
connections to a PostgreSQL server). Every engine call runs in a worker thread through
``trio.to_thread.run_sync`` with the store's ``CapacityLimiter(1)``, so a connection is
only ever used by one thread at a time and the event loop never blocks.
:class:`~actors._eventlog._ledger._connection.SQLiteLedger` is this ledger on the SQLite
store; the PostgreSQL ledger is a :class:`BatchLedger` on a ``PostgresStore``.

Writes are *staged* synchronously (``stage_*``) into the current :class:`Batch` and
committed by a single writer task (:meth:`BatchLedger.run_writer`): group commit. While
one batch commits, the next one fills, so a busy log commits many rows per transaction,
and a quiet one commits each row at once. Each batch has a :class:`Ticket`;
``await ticket.wait()`` returns once that batch is durable. The latency from staging to
the start of its commit is at most ``commit_linger`` (<= 10 ms) plus the duration of the
commit in progress.

Event rows are the hot path (one per event): staging one appends to plain lists, no
object per row (see :class:`Batch`), and each transaction writes them with one
``executemany``. Their ``data`` arrives JSON-encoded by the log, or, for the commonest
event (``job_progress`` with data ``{"fraction": f}``), as the float, encoded by the
writer thread; either way once.

Opening inspects the file through read-only connections before anything writes to it
(:mod:`actors._eventlog._ledger._inspect`: the file, its write-ahead log, the session,
the schema and every row); a refused file keeps every byte. Each session writes
``open TOKEN`` to the ``session`` meta key at start (checkpointed into the database file)
and with every commit, and ``closed TOKEN`` at a clean close, so the next open can tell a
missing or foreign ``-wal`` (design §6.12).

A commit that fails (disk full, an I/O error, a lock) never stops the writer: the batch
is kept and retried with capped backoff, the tickets not yet committed are *delayed*
(waiters get :class:`~actors.errors.LedgerUnavailable`), rows keep being staged, and the
``on_health`` callback of :meth:`BatchLedger.run_writer` hears when commits fail and
when one succeeds again (design §6.13). :class:`LedgerHealth` keeps that outage state.
Reads go on meanwhile, from what is committed (:mod:`actors._eventlog._ledger._reads`).

No wait on the disk is unbounded (design §6.19): a commit that runs longer than
``stall_timeout`` makes the watchdog (:meth:`BatchLedger.run_watchdog`) declare the
ledger unavailable (``cause`` ``commit stalled``) until it ends; a read gives up after
``read_timeout`` (``LedgerUnavailable``); cancellation abandons a worker thread instead of
waiting for it (the thread keeps the connection until it returns: the limiter is released
only then); closing gives the final commit ``close_timeout`` seconds
(:meth:`BatchLedger.close_within`).

The ledger, its batches, their tickets and its health share private state (a ticket is
settled, delayed and undelayed by the writer and the watchdog), so they live here together.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from ..._core import Backoff
from ...errors import LedgerError, LedgerUnavailable
from ._reads import StoreErrors

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from .._types import Event, Receipt
    from ._inspect import LedgerSnapshot
    from ._reads import LedgerReads
    from ._wal import WalReport

    #: ``on_health(error)``: commits fail (``error``), or succeed again (None).
    HealthCallback = Callable[[LedgerUnavailable | None], None]

__all__ = [
    "Batch",
    "BatchLedger",
    "LedgerHealth",
    "LedgerStatistics",
    "Segment",
    "Store",
    "Ticket",
    "wait_durable",
]

_log = logging.getLogger("actors.eventlog")


# -- statistics ------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class LedgerStatistics:
    """Counters of a ledger, taken without waiting."""

    commits: int
    """Transactions committed."""
    rows: int
    """Rows written in all."""
    pending_rows: int
    """Rows staged and not yet committed."""
    largest_batch: int
    """Most rows in one transaction."""
    failed_commits: int = 0
    """Commit attempts that failed (each was retried)."""
    stalled_commits: int = 0
    """Commits that ran longer than ``stall_timeout`` (design §6.19)."""
    read_timeouts: int = 0
    """Reads that gave up after ``read_timeout`` (design §6.19)."""
    unavailable: str | None = None
    """The cause while commits fail (design §6.13), else None."""


# -- durability tickets ----------------------------------------------------------------


class Ticket:
    """Durability of one batch: :meth:`wait` returns once it is committed (design §6.10).

    While the ledger cannot commit (disk full, an I/O error), a ticket not yet committed
    is *delayed*: its batch is kept and retried, :meth:`wait` raises
    :class:`~actors.errors.LedgerUnavailable` at once, and :meth:`wait_committed` goes
    on waiting (design §6.13).
    """

    __slots__ = ("_delayed", "_done", "_error", "_signal")

    def __init__(self) -> None:
        self._done = trio.Event()
        self._signal = trio.Event()  # set when done, or when delayed
        self._error: str | None = None
        self._delayed: LedgerUnavailable | None = None

    @property
    def done(self) -> bool:
        """True once the batch committed or failed for good."""
        return self._done.is_set()

    async def wait(self) -> None:
        """Wait until the batch is committed; always a checkpoint.

        Raises:
            LedgerUnavailable: (``ledger_unavailable``) the ledger cannot commit now; the
                batch is kept and will be committed when it can (``details`` has
                ``retry_after`` in seconds and ``cause``).
            LedgerError: (``ledger_error``) the batch will never be committed (the log
                closed first).
        """
        if self._done.is_set() or self._delayed is not None:
            await trio.lowlevel.checkpoint()
        else:
            await self._signal.wait()
        self._raise_if_failed()
        delayed = self._delayed
        if delayed is not None and not self._done.is_set():
            raise LedgerUnavailable(delayed.message, **delayed.details)

    async def wait_committed(self) -> None:
        """Wait until the batch is committed, through any delay; always a checkpoint.

        Raises:
            LedgerError: (``ledger_error``) the batch will never be committed.
        """
        await self._done.wait()
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise LedgerError(f"ledger commit failed: {self._error}")

    def _settle(self, error: str | None = None) -> None:
        self._error = error
        self._done.set()
        self._signal.set()

    def _delay(self, error: LedgerUnavailable) -> None:
        if not self._done.is_set():
            self._delayed = error
            self._signal.set()

    def _undelay(self) -> None:
        if self._delayed is not None and not self._done.is_set():
            self._delayed = None
            self._signal = trio.Event()


async def wait_durable(ticket: Ticket | None) -> None:
    """Wait for ``ticket`` (None: nothing was staged, as in memory); always a checkpoint.

    Raises:
        LedgerUnavailable: (``ledger_unavailable``) see :meth:`Ticket.wait`.
        LedgerError: (``ledger_error``) the ticket's batch will never be committed.
    """
    if ticket is None:
        await trio.lowlevel.checkpoint()
    else:
        await ticket.wait()


# -- the rows of one transaction -------------------------------------------------------


def _progress_texts(fractions: list[float]) -> list[str]:
    """The ``data`` JSON of ``job_progress`` events whose data is ``{"fraction": f}``.

    The JSON of a finite float is its repr, as ``json.dumps`` writes it.
    """
    return [f'{{"fraction":{fraction!r}}}' for fraction in fractions]


class Segment:
    """Consecutive event rows of a batch, in seq order: their data JSON texts, and
    their kinds and run ids, or (``progress_run`` set) all ``job_progress`` events of
    that run, the commonest case: one list append per row while staging."""

    __slots__ = ("kinds", "progress_run", "run_ids", "values")

    def __init__(self, progress_run: int | None) -> None:
        self.progress_run = progress_run
        self.kinds: list[str] = []
        self.run_ids: list[int | None] = []
        self.values: list[Any] = []  # JSON texts, or fractions (floats)


class Batch:
    """The rows staged for one transaction, and the ticket that reports it durable."""

    __slots__ = (
        "committed",
        "detached",
        "first_seq",
        "last_seq",
        "meta",
        "progress_run",
        "progress_values",
        "requests",
        "rows",
        "runs",
        "segments",
        "text_tail",
        "ticket",
    )

    def __init__(self, ticket: Ticket | None = None) -> None:
        self.committed = False
        #: ``(request_id, content, run_id, receipt_json, position, actor)`` rows.
        self.requests: list[tuple[str, str, int, str, int, str | None]] = []
        #: ``(cancelled_by, request_id)`` of requests detached from their run.
        self.detached: list[tuple[str, str]] = []
        self.runs: dict[int, tuple[Any, ...]] = {}
        self.meta: dict[str, str] = {}
        self.rows = 0  # rows staged other than events
        # Event rows: their seqs run from first_seq to last_seq without a gap (staging
        # checks), the other columns are kept in segments of plain lists. A batch of
        # 100 000 events then holds no per-row tuple: such tuples, alive until the
        # commit, set off the cyclic GC again and again (measured: ~0.25 us per event).
        # The writer chains the segments back into rows inside one executemany.
        self.first_seq = -1
        self.last_seq = -2
        self.segments: list[Segment] = []
        self.text_tail: Segment | None = None  # the last segment if it holds texts
        self.progress_run: int | None = None  # its run if it holds fractions
        self.progress_values: list[Any] = []  # ... and then its fractions
        self.ticket = Ticket() if ticket is None else ticket

    @property
    def events(self) -> int:
        """Event rows staged."""
        return self.last_seq - self.first_seq + 1 if self.segments else 0

    @property
    def size(self) -> int:
        """Rows staged in all."""
        return self.rows + self.events

    def event_rows(self) -> Iterator[tuple[int, str, int | None, str]]:
        """The ``(seq, kind, run_id, data)`` rows, in seq order, for ``executemany``.

        Runs in the writer thread: chained C iterators over the segments' lists, plus one
        list comprehension per progress segment that makes its JSON texts.
        """
        kinds: list[Iterable[str]] = []
        run_ids: list[Iterable[int | None]] = []
        texts: list[Iterable[str]] = []
        for segment in self.segments:
            if segment.progress_run is None:
                kinds.append(segment.kinds)
                run_ids.append(segment.run_ids)
                texts.append(segment.values)
            else:
                count = len(segment.values)
                kinds.append(itertools.repeat("job_progress", count))
                run_ids.append(itertools.repeat(segment.progress_run, count))
                texts.append(_progress_texts(segment.values))
        chain = itertools.chain.from_iterable
        seqs = range(self.first_seq, self.last_seq + 1)
        return zip(seqs, chain(kinds), chain(run_ids), chain(texts), strict=True)


# -- failed and stalled commits --------------------------------------------------------


class LedgerHealth:
    """The outage state of one ledger's commits (design §6.13, §6.19).

    Owned by the :class:`BatchLedger`. A commit that fails (disk full, an I/O error)
    starts an *outage*; so does a commit that hangs without raising (a stalled ``fsync``)
    once it has run ``stall_timeout`` seconds, which :meth:`watch` notices. During an
    outage every ticket not yet committed is *delayed* (its waiters get
    :class:`~actors.errors.LedgerUnavailable` at once), and the ``on_health`` callback
    hears the first failure; the first commit that succeeds ends the outage and tells
    ``on_health`` (None).

    Args:
        store: Names the ledger and classifies the engine's errors.
        retry: The delays between attempts to commit a batch that failed (seconds).
        stall_timeout: Seconds (trio clock) a commit may run before it counts as stalled.
        staging: Returns the batch being staged now (its ticket is delayed too).
    """

    def __init__(
        self,
        store: StoreErrors,
        retry: Backoff,
        stall_timeout: float,
        staging: Callable[[], Batch],
    ) -> None:
        self._store = store
        self._path = store.path
        self._retry = retry
        self._stall_timeout = stall_timeout
        self._staging = staging
        #: The error of the outage in progress, else None.
        self.unavailable: LedgerUnavailable | None = None
        self._attempt = 0
        #: Commit attempts that failed, and commits that stalled.
        self.failed_commits = 0
        self.stalled_commits = 0
        # The commit in progress: its batch, when it began, an event set whenever one
        # begins or ends (for the watchdog), and whether it was found stalled.
        self._committing: Batch | None = None
        self._began: float | None = None
        self._changed = trio.Event()
        self._stalled = False

    def retry_delay(self) -> float:
        """Seconds before the next attempt to commit a batch that failed."""
        return self._retry.delay(max(1, self._attempt))

    def moved(self, batch: Batch | None) -> None:
        """A commit of ``batch`` begins, or (None) the commit in progress ended."""
        self._committing = batch
        self._began = None if batch is None else trio.current_time()
        if batch is None:
            self._stalled = False
        self._changed.set()
        self._changed = trio.Event()

    def failed(self, batch: Batch, exc: Exception, on_health: HealthCallback | None) -> None:
        """The commit of ``batch`` failed with ``exc``: the outage starts or goes on."""
        self.failed_commits += 1
        self._attempt += 1
        error = self._store.classify(exc, "commit")
        cause = str(error.details.get("cause", exc))
        unavailable = LedgerUnavailable(
            f"ledger {self._path!r} cannot commit: {cause}; decisions are kept and committed"
            " once it can",
            cause=cause,
            retry_after=self.retry_delay(),
        )
        first = self.unavailable is None
        self.unavailable = unavailable
        batch.ticket._delay(unavailable)
        self._staging().ticket._delay(unavailable)
        if first:
            _log.warning(
                "ledger %s cannot commit: %s",
                self._path,
                cause,
                extra={"ledger": self._path, "cause": cause, "rows": batch.size},
            )
            if on_health is not None:
                on_health(unavailable)

    def recovered(self, on_health: HealthCallback | None) -> None:
        """A commit succeeded during an outage: it ends."""
        failures, self._attempt = self._attempt, 0
        self.unavailable = None
        self._staging().ticket._undelay()
        _log.info(
            "ledger %s commits again after %d failed attempts",
            self._path,
            failures,
            extra={"ledger": self._path, "failed_attempts": failures},
        )
        if on_health is not None:
            on_health(None)

    async def watch(
        self,
        *,
        on_health: HealthCallback | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Declare an outage once a commit has run ``stall_timeout`` seconds (§6.19).

        Runs until cancelled. The outage ends as any other: when a commit succeeds.
        """
        task_status.started()
        while True:
            began, changed = self._began, self._changed
            if began is None or self._stalled:
                await changed.wait()
                continue
            with trio.move_on_at(began + self._stall_timeout):
                await changed.wait()
                continue
            self._stall(on_health)

    def _stall(self, on_health: HealthCallback | None) -> None:
        batch, began = self._committing, self._began
        assert batch is not None
        assert began is not None
        self._stalled = True
        self.stalled_commits += 1
        elapsed = trio.current_time() - began
        _log.warning(
            "ledger %s: a commit has run for %.3f s (limit %g s); the ledger is unavailable"
            " until it ends",
            self._path,
            elapsed,
            self._stall_timeout,
            extra={
                "ledger": self._path,
                "cause": "commit stalled",
                "seconds": elapsed,
                "stall_timeout": self._stall_timeout,
                "rows": batch.size,
            },
        )
        if self.unavailable is not None:
            return  # a retry of a failed commit: the outage is declared already
        unavailable = LedgerUnavailable(
            f"ledger {self._path!r} cannot commit: commit stalled for over"
            f" {self._stall_timeout:g} s; decisions are kept and committed once it can",
            cause="commit stalled",
            retry_after=self._stall_timeout,
        )
        self.unavailable = unavailable
        batch.ticket._delay(unavailable)
        self._staging().ticket._delay(unavailable)
        if on_health is not None:
            on_health(unavailable)


# -- the ledger ------------------------------------------------------------------------


class Store(StoreErrors, Protocol):
    """An engine's storage under a :class:`BatchLedger`: its connections and its SQL.

    Every method but :meth:`cancel` runs in a worker thread under :attr:`limiter` (the
    writer's connection); :attr:`reads` are the store's bounded reads.
    """

    @property
    def limiter(self) -> trio.CapacityLimiter:
        """One thread at a time on the writer's connection."""
        ...

    @property
    def reads(self) -> LedgerReads:
        """The bounded, checked reads (design §6.11, §6.19)."""
        ...

    @property
    def wal_report(self) -> WalReport | None:
        """What the check of a write-ahead log found at open (None without one)."""
        ...

    def open(self, keep_requests: int, keep_events: int | None) -> LedgerSnapshot:
        """Check, create or open the ledger, and load what boot needs."""
        ...

    def commit(self, batch: Batch) -> None:
        """Write ``batch`` in one transaction; set ``batch.committed`` once durable."""
        ...

    def close(self, batches: list[Batch], commit: Callable[[Batch], None]) -> None:
        """Commit ``batches`` not yet committed with ``commit``, mark the session closed
        and close the connections."""
        ...

    async def cancel(self) -> None:
        """Cancel the statement an abandoned writer thread runs (bounded; never raises)."""
        ...

    def release(self) -> None:
        """The ledger let go of the store (closed, or its close abandoned): a commit a
        worker thread starts later fails. Called from the trio side; never blocks."""
        ...


class BatchLedger:
    """A durable event log's ledger on a :class:`Store` (design §6.10).

    Implements :class:`~actors._eventlog._ledger.Ledger`: staging, group commit, tickets,
    outages and the close, whatever the engine.

    Args:
        store: The engine's connections and SQL.
        commit_linger: Seconds (trio clock) the writer waits after the first staged row
            before committing, to grow the batch; 0 commits as soon as it is free.
        max_pending_rows: Staged rows above which :meth:`wait_writable` blocks.
        retry: The delays between attempts to commit a batch that failed (seconds).
        stall_timeout: Seconds (trio clock) a commit may run before the watchdog
            declares the ledger unavailable (design §6.19).
    """

    def __init__(
        self,
        store: Store,
        *,
        commit_linger: float = 0.0,
        max_pending_rows: int = 50_000,
        retry: Backoff | None = None,
        stall_timeout: float = 5.0,
    ) -> None:
        self._store = store
        self.path = store.path
        self._stall_timeout = stall_timeout
        self._linger = commit_linger
        self._max_pending = max_pending_rows
        retry = retry or Backoff(base=0.05, cap=2.0)
        self._limiter = store.limiter
        self._reads = store.reads
        self._opened = False
        self._batch = Batch()
        self._dirty = trio.Event()
        self._last_ticket: Ticket | None = None
        self._orphans: list[Batch] = []
        self._failed: Batch | None = None  # its commit failed: retried before any other
        # Failed and stalled commits; its ``watch`` is the commit watchdog (§6.19).
        self._health = LedgerHealth(store, retry, stall_timeout, lambda: self._batch)
        self._committed_seq = 0
        self._commits = 0
        self._rows = 0
        self._largest = 0
        self.on_commit: Callable[[int, float], None] | None = None
        """Called (sync) after each successful commit with its rows and the seconds
        (trio clock) the transaction took; set by the metrics, None otherwise."""

    @property
    def wal_report(self) -> WalReport | None:
        """What the write-ahead-log check found at open (None without a ``-wal``)."""
        return self._store.wal_report

    # -- opening and closing ----------------------------------------------------------

    async def open(self, *, keep_requests: int, keep_events: int | None = None) -> LedgerSnapshot:
        """Check, create or open the ledger, and load what boot needs.

        Args:
            keep_requests: How many of the most recent requests to load.
            keep_events: How many of the most recent events to keep; older ones are
                deleted now, in one transaction (None keeps them all).

        Raises:
            LedgerCorrupt: (``ledger_corrupt``) the ledger (a file, its write-ahead log or
                a row) is damaged, or the log is missing or foreign; nothing was written.
            LedgerVersionUnsupported: (``ledger_version_unsupported``) a schema we cannot open.
            LedgerError: (``ledger_error``) not a ledger, or the engine failed.
            LedgerUnavailable: (``ledger_unavailable``) the database cannot be reached.
        """
        return await self._reads.call(self._open_sync, keep_requests, keep_events)

    def _open_sync(self, keep_requests: int, keep_events: int | None) -> LedgerSnapshot:
        snapshot = self._store.open(keep_requests, keep_events)
        self._opened = True
        self._committed_seq = snapshot.head
        return snapshot

    async def close(self) -> None:
        """Commit what is still staged, mark the session closed, close; idempotent.

        Call it after the writer stopped, under a deadline (``close_timeout``). The final
        commit runs in one worker thread, after any commit still running (an abandoned
        one); a cancellation abandons it (design §6.19): the thread may still finish, or
        hang on a stalled disk; for SQLite the write-ahead log is left for the next open,
        which finds the session unfinished, as after a crash (design §6.12). So does a
        failed final commit.

        Raises:
            LedgerUnavailable: (``ledger_unavailable``) the final commit failed; what was
                staged and not committed is lost (never acknowledged).
            LedgerError: (``ledger_error``) the same, for another engine error.
        """
        if not self._opened:
            await trio.lowlevel.checkpoint()
            return
        self._opened = False
        pending = (self._failed, *self._orphans, self._batch)
        batches = [b for b in pending if b is not None and (b.size or b.runs)]
        self._failed = None
        self._orphans = []
        self._batch = Batch()
        store = self._store
        try:
            await trio.to_thread.run_sync(
                store.close,
                batches,
                self._commit_sync,
                limiter=self._limiter,
                abandon_on_cancel=True,
            )
        except store.errors as exc:
            error = store.classify(exc, "the final commit")
            if error is exc:
                raise
            raise error from exc
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await store.cancel()
            raise
        finally:
            store.release()
            for batch in batches:
                self._settled(batch)

    async def close_within(self, close_timeout: float) -> None:
        """Commit what is staged and close, shielded, for ``close_timeout`` seconds.

        Never raises for the ledger: a final commit that fails, or that does not end within
        ``close_timeout`` (trio clock; a stalled disk), is logged and abandoned, and every
        ticket not committed is failed. The write-ahead log is left as it is then, so the next
        start finds the session unfinished and holds the runs it decided (design §6.12).
        Call it after the writer stopped.
        """
        try:
            with trio.move_on_after(close_timeout, shield=True) as scope:
                await self.close()
            if scope.cancelled_caught:
                _log.error(
                    "the ledger did not close within %g s: its final commit is abandoned;"
                    " the next start finds the session unfinished",
                    close_timeout,
                    extra={"ledger": self.path, "close_timeout": close_timeout},
                )
        except LedgerError as exc:
            _log.error(
                "the ledger's final commit failed: %s",
                exc.message,
                extra={"ledger": self.path, "cause": exc.details.get("cause")},
            )
        finally:
            self.abandon()

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
        batch = self._batch  # Batch.size, inlined: read once per progress report
        return batch.rows + (batch.last_seq - batch.first_seq + 1 if batch.segments else 0)

    @property
    def unavailable(self) -> LedgerUnavailable | None:
        """The error of the last failed commit while commits fail, else None (§6.13)."""
        return self._health.unavailable

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
                await trio.sleep(self._health.retry_delay())
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

    async def run_watchdog(
        self,
        *,
        on_health: HealthCallback | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Declare an outage once a commit has run ``stall_timeout`` seconds (§6.19).

        Runs until cancelled, beside :meth:`run_writer`; ``on_health`` is the same
        callback. The outage ends as any other: when a commit succeeds.
        """
        await self._health.watch(on_health=on_health, task_status=task_status)

    def _new_batch(self) -> Batch:
        batch = Batch()
        if self._health.unavailable is not None:
            batch.ticket._delay(self._health.unavailable)
        return batch

    async def _commit(self, batch: Batch, on_health: HealthCallback | None) -> bool:
        health = self._health
        health.moved(batch)
        on_commit = self.on_commit
        began = 0.0 if on_commit is None else trio.current_time()
        try:
            await trio.to_thread.run_sync(
                self._commit_sync, batch, limiter=self._limiter, abandon_on_cancel=True
            )
        except self._store.errors as exc:
            health.failed(batch, exc, on_health)
            return False
        except BaseException as exc:
            if not batch.committed:  # cancelled (abandoned): close() commits it
                self._orphans.append(batch)
            if isinstance(exc, trio.Cancelled):
                # Stop the statement the abandoned thread runs (PostgreSQL can).
                with trio.CancelScope(shield=True):
                    await self._store.cancel()
            raise
        finally:
            health.moved(None)
        self._settled(batch)
        if on_commit is not None:
            on_commit(batch.size, trio.current_time() - began)
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
        # In the writer's thread; a seam the tests use to stall a commit.
        self._store.commit(batch)

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
        while self._batch.size > self._max_pending and self._health.unavailable is None:
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
        unavailable = self._health.unavailable
        return LedgerStatistics(
            commits=self._commits,
            rows=self._rows,
            pending_rows=self._batch.size,
            largest_batch=self._largest,
            failed_commits=self._health.failed_commits,
            stalled_commits=self._health.stalled_commits,
            read_timeouts=self._reads.timeouts,
            unavailable=None if unavailable is None else unavailable.message,
        )
