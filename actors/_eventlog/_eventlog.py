"""The event log: receipts, admission, lifecycle, cursors (design §6).

:class:`EventLog` is the state of the event-log actor, usable on its own:

* **submit** (:meth:`EventLog.submit`): validation (§6.2), idempotent request ids
  (§6.3), coalescing (§6.4) and admission (§6.5); it returns a :class:`Receipt` once the
  request is durable and never runs anything itself;
* the **lifecycle API** for an external executor (:meth:`~EventLog.start`,
  :meth:`~EventLog.progress`, :meth:`~EventLog.finish`) and a built-in **drain** that runs
  the async runner registered for an operation, with bounded concurrency, each run under
  its own cancel scope (§6.6); :meth:`~EventLog.cancel` is truthful (§6.7) and detaches
  one waiter of a coalesced run at a time (§6.14);
* the **log**: one global seq, a bounded window for :meth:`~EventLog.watch` (§6.8),
  bounded subscriber ports (§6.9, :mod:`actors._eventlog._ports`) and
  :meth:`~EventLog.snapshot`, the way back for a client that lost its place (§6.15);
* **durability** in a SQLite ledger when a path is configured (§6.10,
  :mod:`actors._eventlog._ledger`), with :meth:`~EventLog.boot_report`,
  :meth:`~EventLog.resume`, :meth:`~EventLog.discard` and :meth:`~EventLog.check_drift`;
  damage is an error, never a crash (§6.11, §6.12), and a ledger that cannot commit
  pauses admission, never the log (§6.13). Refusals carry ``retry_after`` (§6.16).

With a ledger, ``watch`` below the in-memory window reads the older events from SQLite,
so a cursor is only ever expired when it is beyond the head (or, without a ledger, below
the window's floor). Memory holds every unfinished run, the last ``retain_runs`` finished
ones and the last ``retain_requests`` request ids (and every request not yet durable);
older ones are read from the ledger (without a ledger they are forgotten: ``status`` says
``unknown_run``, and idempotency covers the ids memory keeps).

The log is a composition of owned parts, each in its own module, built by
:func:`~actors._eventlog._parts.build_parts` with their dependencies passed explicitly.
Everything runs on the event loop except SQLite, which runs in one worker thread at a
time (:mod:`actors._eventlog._ledger`). The event kinds are listed with
:class:`~actors._eventlog._types.Event`.
"""

from __future__ import annotations

import functools
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from .._core import unwrap_sole_exception
from ..errors import ActorStopped, InvalidCommand
from ._admission import Admission
from ._checks import check_kind, check_text, json_mapping
from ._cluster import ClusterNode
from ._parts import build_parts
from ._statistics import EventLogStatistics
from ._types import EventLogConfig, EventLogSnapshot

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
    from typing import Unpack

    from ..errors import ErrorRecord
    from ._finished import FinishedRunsPage
    from ._operations import Runner
    from ._ports import Port, PortHub, PortOptions, PortStatistics
    from ._survivors import Decision, Recovered, Survivor
    from ._types import BootReport, Drift, OperationSpec, Receipt, RunStatus, WatchResult

__all__ = ["EventLog", "EventLogStatistics", "open_event_log"]


class EventLog:
    """The event log (design §6); see the module docstring.

    Use :func:`open_event_log`, or ``await nursery.start(log.run)`` then
    ``await log.aclose()`` (the event-log actor does the latter).

    Methods that may wait (for durability, a ledger read or capacity) are async and
    always a checkpoint: ``submit``, ``cancel``, ``status``, ``watch``, ``resume``,
    ``discard``, ``check_drift``, ``recover``, ``finished_runs``, ``flush``. Those that
    decide in memory and never wait are sync (trio's rule: only what may block is
    async), so the event-log actor serves them in mailbox order without a task:
    ``admit``, ``refuse``, ``start``, ``progress``, ``finish``, ``record``,
    ``subscribe``, ``snapshot``, ``set_port_enabled``, ``apply_edit``, ``boot_report``,
    ``statistics``.
    :class:`~actors.EventLogClient`, for everyone else, is async throughout: each of
    its methods is an ``ask``.

    Args:
        config: Settings; ``config.ledger_path`` turns durability on.
        operations: The operations ``submit`` accepts.
        runners: Async runners by operation name, executed by the built-in drain:
            ``await runner(run_status, report_progress)`` returns the JSON-compatible
            result; ``report_progress(fraction, note=None)`` is sync. Operations without
            a runner wait for an external executor (``start``/``progress``/``finish``).
    """

    def __init__(
        self,
        config: EventLogConfig | None = None,
        *,
        operations: Iterable[OperationSpec] = (),
        runners: Mapping[str, Runner] | None = None,
    ) -> None:
        self.config = config = config or EventLogConfig()
        parts = build_parts(config, operations, runners, check_open=self._check_open)
        self._operations = parts.operations
        self._ledger = parts.ledger
        self._journal = parts.journal
        self._gate = parts.gate
        self._runs = parts.runs
        self._intake = parts.intake
        self._recovery = parts.recovery
        self._finished = parts.finished
        #: In cluster mode, the node that decides in the shared ledger (docs/cluster.rst).
        self._cluster = (
            ClusterNode(config, parts.operations, parts.intake.check) if config.cluster else None
        )
        self._open = False
        self._started = False
        self._closing = trio.Event()
        self._closed = trio.Event()

    @property
    def _hub(self) -> PortHub:
        return self._journal.hub if self._cluster is None else self._cluster.hub

    @property
    def node(self) -> str | None:
        """This node's incarnation id in cluster mode (random per start), else None."""
        return None if self._cluster is None else self._cluster.node

    def register(self, spec: OperationSpec, runner: Runner | None = None) -> None:
        """Add (or replace) an operation and, optionally, its built-in runner (design §6.2)."""
        self._operations.register(spec, runner)

    @property
    def revision(self) -> int:
        """The current revision (design §6.4)."""
        return self._intake.revision

    @property
    def head(self) -> int:
        """The newest event seq (0 before any event; a cluster node: the newest its
        follower delivered)."""
        return self._journal.head if self._cluster is None else self._cluster.head

    # -- running ------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Open the ledger, boot, then run the ledger writer and the drain until closed.

        ``task_status.started()`` is called once ``submit`` may be used. On close, runners
        still running are cancelled (they are *interrupted* and held at the next boot),
        then what is still staged is committed and the ledger closed, within
        ``close_timeout`` seconds: a commit that does not end by then (a stalled disk) is
        abandoned and logged, and the write-ahead log left for the next boot (§6.19).

        A ledger whose commits fail never ends it (design §6.13): admission pauses until
        a commit succeeds again. A final commit that fails at close is logged (what it
        held was never acknowledged; the runs it decided are held at the next boot).

        Raises:
            LedgerCorrupt: (``ledger_corrupt``) the ledger file, its write-ahead log or a
                row is damaged, or the log is missing or foreign (files untouched).
            LedgerVersionUnsupported: (``ledger_version_unsupported``) a schema we cannot open.
            LedgerError: (``ledger_error``) not a ledger, or SQLite failed at open.
        """
        if self._started:
            raise RuntimeError("EventLog.run() may be called once")
        self._started = True
        if self._cluster is not None:
            await self._run_cluster(self._cluster, task_status)
            return
        ledger = self._ledger
        try:
            if ledger is not None:
                snapshot = await ledger.open(
                    keep_requests=self.config.retain_requests,
                    keep_events=self.config.ledger_retain_events,
                )
                self._journal.boot(snapshot.head, snapshot.event_floor)
                self._runs.boot(snapshot.next_run_no)
                self._intake.boot(snapshot)
                self._recovery.boot(snapshot)
                self._recovery.log_boot(ledger.path, ledger.wal_report)
            async with trio.open_nursery() as nursery:
                if ledger is not None:
                    health = self._gate.ledger_health
                    await nursery.start(functools.partial(ledger.run_writer, on_health=health))
                    await nursery.start(functools.partial(ledger.run_watchdog, on_health=health))
                nursery.start_soon(self._runs.drain, nursery)
                self._open = True
                task_status.started()
                await self._closing.wait()
                self._open = False
                nursery.cancel_scope.cancel()
        finally:
            self._open = False
            self._journal.hub.close()
            if ledger is not None:
                await ledger.close_within(self.config.close_timeout)  # commits what is staged
                self._recovery.log_left(ledger.path)
            self._closed.set()

    async def _run_cluster(self, node: ClusterNode, task_status: trio.TaskStatus[None]) -> None:
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(node.run, self._closing)
                self._open = True
                task_status.started()
        finally:
            self._open = False
            self._closed.set()

    def _not_in_cluster(self, what: str) -> None:
        if self._cluster is not None:
            raise InvalidCommand(
                f"{what} is not available in cluster mode (docs/cluster.rst)", fields=["cluster"]
            )

    async def aclose(self) -> None:
        """Stop taking requests, flush the ledger and wait for :meth:`run` to return."""
        self._closing.set()
        if self._started:
            await self._closed.wait()
        else:
            await trio.lowlevel.checkpoint()

    def _check_open(self) -> None:
        if not self._open:
            raise ActorStopped("the event log is not running")

    @property
    def writable(self) -> bool:
        """False while the ledger has more than ``max_pending_rows`` staged rows."""
        return self._ledger is None or self._ledger.pending_rows <= self.config.max_pending_rows

    async def wait_writable(self) -> None:
        """Wait while the ledger has too many staged rows (back-pressure); a checkpoint."""
        if self._ledger is None:
            await trio.lowlevel.checkpoint()
        else:
            await self._ledger.wait_writable()

    async def flush(self) -> None:
        """Wait until everything so far is durable (a no-op in memory); a checkpoint."""
        if self._ledger is None:
            await trio.lowlevel.checkpoint()
        else:
            await self._ledger.flush()

    # -- submit (design §6.1-6.5) ---------------------------------------------------------

    async def submit(
        self,
        operation: str,
        arguments: Mapping[str, Any],
        request_id: str | None = None,
        *,
        actor: str | None = None,
    ) -> Receipt:
        """Admit a request and return its receipt once the request is durable (design §6.1).

        Never runs anything and never waits for a verdict. A refusal for lack of capacity
        is a receipt too (``admitted=False``, ``code="admission_full"``, ``retry_after``), not
        an exception. Same as ``await log.admit(...).wait()``.

        Args:
            operation: A registered operation's name.
            arguments: A mapping whose keys are within the operation's ``fields``.
            request_id: The caller's id for idempotent retries (1..128 chars); None makes
                one up. Deduplicated against the ledger, whatever ``retain_requests``.
            actor: Who submits (e.g. a connection's name): a later ``cancel`` by the same
                actor detaches only its own requests from a run others joined (§6.14).

        Raises:
            UnsupportedOperation: (``unsupported_operation``) unknown operation (§6.2).
            InvalidCommand: (``invalid_command``) arguments not a mapping, fields outside
                the schema or missing (``details["fields"]`` names them), not JSON, or too
                large; or a bad request id or actor.
            RequestConflict: (``request_conflict``) ``request_id`` was used with other
                content (§6.3).
            ActorStopped: (``actor_stopped``) the event log is not running.
            LedgerUnavailable: (``ledger_unavailable``) the ledger cannot commit now
                (§6.13); ``details`` has ``retry_after`` and ``cause``. If the request was
                decided before, it is kept: retry with the same ``request_id``.
            LedgerCorrupt: (``ledger_corrupt``) the stored request is damaged (§6.11).
        """
        return await self.admit(operation, arguments, request_id, actor=actor).wait()

    def admit(
        self,
        operation: str,
        arguments: Mapping[str, Any],
        request_id: str | None = None,
        *,
        actor: str | None = None,
    ) -> Admission:
        """Decide a request now, without waiting; ``await .wait()`` for its receipt.

        The synchronous half of :meth:`submit`, so the event-log actor admits requests in
        mailbox order while their durability is awaited concurrently. (Only a request id
        that memory does not hold is decided later, after a ledger look-up.)

        Raises:
            UnsupportedOperation, InvalidCommand, RequestConflict, ActorStopped,
            LedgerUnavailable: as :meth:`submit`.
        """
        node = self._cluster
        if node is not None:
            self._check_open()

            async def decide() -> tuple[Receipt, None]:
                return await node.submit(operation, arguments, request_id, actor), None

            return Admission(None, None, decide)
        return self._intake.admit(operation, arguments, request_id, actor)

    def refuse(
        self,
        operation: str,
        arguments: Mapping[str, Any],
        request_id: str | None = None,
        *,
        actor: str | None = None,
        retry_after: float,
    ) -> Receipt:
        """Check a request as :meth:`admit` does and refuse it, deciding nothing: a
        ``admission_full`` receipt with ``retry_after`` (seconds) (design §6.19).

        Raises:
            UnsupportedOperation, InvalidCommand, ActorStopped: as :meth:`submit`.
        """
        return self._intake.refuse(operation, arguments, request_id, actor, retry_after)

    def apply_edit(self) -> int:
        """Bump the revision: later submissions run fresh instead of coalescing (§6.4).

        Emits ``revision_bumped``; returns the new revision.
        """
        self._not_in_cluster("apply_edit")
        return self._intake.apply_edit()

    # -- the lifecycle API for an external executor (design §6.6, §6.7) -------------------

    def start(self, run_id: int, *, on_cancel: Callable[[], object] | None = None) -> RunStatus:
        """Mark a queued run started: ``job_started``, then its buffered progress (§6.6).

        Starting a running run again only records ``on_cancel`` (idempotent).

        Args:
            run_id: The run.
            on_cancel: Called (sync) if the run is cancelled while running, e.g. the
                executor's ``cancel_scope.cancel``; an exception from it is contained.

        Raises:
            AlreadyDecided: (``already_decided``) the run is finished or cancelled.
            UnknownRun: (``unknown_run``) no such run in memory.
            InvalidCommand: (``invalid_command``) the run is held after a restart.
        """
        self._not_in_cluster("start")
        return self._runs.start(run_id, on_cancel=on_cancel)

    def progress(self, run_id: int, fraction: float, note: str | None = None) -> None:
        """Report progress of a run; buffered while it is queued (design §6.6), coalesced
        while the ledger is backlogged (design §6.19).

        Args:
            run_id: The run.
            fraction: Done so far, in [0, 1].
            note: Optional text (cut to 256 chars).

        Raises:
            AlreadyDecided: (``already_decided``) the run is finished or cancelled.
            InvalidCommand: (``invalid_command``) bad fraction, or the run is held.
            UnknownRun: (``unknown_run``) no such run in memory.
        """
        if self._cluster is not None:
            self._not_in_cluster("progress")
        self._runs.progress(run_id, fraction, note)

    def finish(
        self,
        run_id: int,
        verdict: str,
        result: Any = None,
        *,
        error: ErrorRecord | Mapping[str, str] | None = None,
    ) -> RunStatus:
        """Decide a run with ``verdict`` (``job_finished``); a queued run is started first.

        Args:
            run_id: The run.
            verdict: e.g. ``ok``, ``empty``, ``interrupted``, ``failed``, ``NOT_RUN``.
            result: JSON-compatible, at most ``max_result_bytes`` bytes as JSON.
            error: A record ``{"category", "code", "message"}`` for a failed run.

        Raises:
            AlreadyDecided: (``already_decided``) the run is already finished or cancelled.
            InvalidCommand: (``invalid_command``) bad verdict, result or error; run held.
            UnknownRun: (``unknown_run``) no such run in memory.
        """
        self._not_in_cluster("finish")
        return self._runs.finish(run_id, verdict, result, error)

    async def cancel(
        self, run_id: int, actor: str = "local", *, request_id: str | None = None
    ) -> RunStatus:
        """Cancel a run, or detach requests from it; its true state (design §6.7, §6.14).

        Every request joined to a run (by coalescing) is one of its *waiters*. A cancel
        detaches the waiter named by ``request_id``; without one, the waiters ``actor``
        submitted; if ``actor`` submitted none of them (a cancel from outside), all of
        them. A detached waiter's status is ``cancelled`` by ``actor`` while the run goes
        on for the others (``request_detached`` event); when its last waiter leaves, the
        run is cancelled: a queued run at once, a running one by its cancel scope
        (built-in runner) or ``on_cancel`` (external executor). A finished or cancelled
        run is returned as it is, never faked. Needs no capacity; returns once durable.

        Args:
            run_id: The run.
            actor: Who cancels (kept in ``cancelled_by`` and the event's ``by``).
            request_id: The one request to detach.

        Returns:
            The status as one request sees it. That is ``request_id``'s, else the first
            detached request's, else the run's.

        Raises:
            UnknownRun: (``unknown_run``) no such run.
            InvalidCommand: (``invalid_command``) bad actor name, or ``request_id`` did not
                join that run.
            LedgerUnavailable: (``ledger_unavailable``) the decision stands but is not
                durable yet (§6.13); asking again returns the true state.
        """
        if self._cluster is not None:
            self._check_open()
            return await self._cluster.cancel(run_id, actor)
        return await self._runs.cancel(run_id, actor, request_id)

    async def status(self, run_id: int, *, request_id: str | None = None) -> RunStatus:
        """Return the state of a run, or of one request joined to it (design §6.5, §6.14).

        Needs no capacity. With ``request_id``, a request that left the run reads
        ``cancelled`` (by whoever detached it) even while the run goes on.

        Raises:
            UnknownRun: (``unknown_run``) no such run (or, without a ledger, forgotten).
            InvalidCommand: (``invalid_command``) ``request_id`` did not join that run.
            LedgerCorrupt: (``ledger_corrupt``) its ledger row is damaged (§6.11).
            LedgerUnavailable: (``ledger_unavailable``) its row is not durable yet.
        """
        if self._cluster is not None:
            return await self._cluster.status(run_id)
        return await self._runs.status(run_id, request_id)

    # -- the log (design §6.8, §6.9) ------------------------------------------------------

    async def watch(self, cursor: int, *, limit: int | None = None) -> WatchResult:
        """Return the events after ``cursor`` (at most ``limit``) and the new cursor (§6.8).

        Never waits for new events (use :meth:`subscribe` for push); never skips one.
        With a ledger, events older than the window are read from SQLite.

        Raises:
            CursorExpired: (``cursor_expired``) ``cursor`` is beyond the head, or below
                the window's floor (without a ledger) or the ledger's (events pruned at
                open, ``ledger_retain_events``); ``details["resume_from"]`` is the head,
                respectively the oldest cursor still served.
            InvalidCommand: (``invalid_command``) ``cursor`` or ``limit`` is not an int.
        """
        limit = self.config.window if limit is None else limit
        if self._cluster is not None:
            return await self._cluster.watch(cursor, limit)
        return await self._journal.watch(cursor, limit)

    def record(self, kind: str, data: Mapping[str, Any]) -> int:
        """Append a log-wide event that belongs to no run; return its seq (design §6.8).

        For what the runtime's other parts did (a helper spawned or killed, a supervisor
        restarting a child: design §3.10, §1.7), so subscribers see it in the same ordered
        log as the runs. O(1), never waits; with a ledger the event is durable like any
        other.

        Args:
            kind: snake_case, at most 64 characters, and none of the log's own kinds
                (those starting ``job_``, ``admission_``, ``request_`` or ``revision_``).
            data: A JSON-compatible mapping (no NaN or infinity).

        Raises:
            ValueError: ``kind`` malformed or reserved, or ``data`` not JSON-compatible.
            ActorStopped: (code ``actor_stopped``) the event log is not running.
        """
        self._check_open()
        if self._cluster is not None:
            return self._cluster.record(check_kind(kind), json_mapping(data))
        return self._journal.emit(check_kind(kind), None, json_mapping(data))

    def subscribe(self, name: str | None = None, **options: Unpack[PortOptions]) -> Port:
        """Open a bounded subscriber port (design §6.9); it receives every event from now on.

        Args:
            name: Unique name of the port (generated when None).
            **options: ``cursor`` (queue the retained events after it first), ``bound``
                (queue bound in events; default ``subscriber_bound``), ``local`` (False
                for a remote client, which may not toggle ports) and ``listener`` (a
                sync callback instead of a queue; contained if it raises).

        Raises:
            CursorExpired: (``cursor_expired``) ``cursor`` is outside the window.
            InvalidCommand: (``invalid_command``) the name is taken or ``bound`` < 1.
        """
        return self._hub.open_port(name, **options)

    def snapshot(self) -> EventLogSnapshot:
        """Every live run and the cursor it is consistent with, atomically (design §6.15).

        The way back for a client that lost its place: take a snapshot, then follow the
        events after its ``cursor`` (``subscribe(cursor=...)`` or ``port.resync(...)``).
        Never waits; needs no capacity.
        """
        if self._cluster is not None:
            return self._cluster.snapshot()
        quarantine_after = self.config.quarantine_after
        return EventLogSnapshot(
            cursor=self._journal.head,
            revision=self._intake.revision,
            runs=tuple(run.status(quarantine_after) for run in self._runs.live()),
        )

    def set_port_enabled(self, name: str, enabled: bool, *, local: bool) -> PortStatistics:
        """Enable or disable a port; local callers only (design §6.9).

        Raises:
            RemoteToggleDenied: (``remote_toggle_denied``) ``local`` is False.
            InvalidCommand: (``invalid_command``) no port has that name.
        """
        return self._hub.set_enabled(name, enabled, local=local)

    # -- after a restart (design §6.10) ---------------------------------------------------

    def boot_report(self) -> BootReport:
        """List the runs found unfinished at boot and still undecided (design §6.10)."""
        if self._cluster is not None:
            return self._cluster.boot_report()
        return self._recovery.boot_report()

    async def resume(self, run_id: int, *, override: bool = False) -> RunStatus:
        """Queue a held run again; it restarts its lifecycle with ``job_queued`` (§6.10).

        Raises:
            RunQuarantined: (``run_quarantined``) interrupted too often and no override.
            AdmissionFull: (``admission_full``) no capacity; retry later.
            AlreadyDecided: (``already_decided``) the run is finished or cancelled.
            InvalidCommand: (``invalid_command``) the run is queued or running.
            UnknownRun: (``unknown_run``) no such run.
            UnsupportedOperation: (``unsupported_operation``) its operation is unknown now.
        """
        if self._cluster is not None:
            self._check_open()
            return await self._cluster.resume(run_id, override)
        return await self._recovery.resume(run_id, override=override)

    async def discard(self, run_id: int, *, actor: str = "local") -> RunStatus:
        """Decide a held run as cancelled by ``actor`` (``job_cancelled``) (design §6.10).

        Raises:
            AlreadyDecided: (``already_decided``) the run is finished or cancelled.
            InvalidCommand: (``invalid_command``) the run is queued or running.
            UnknownRun: (``unknown_run``) no such run.
        """
        if self._cluster is not None:
            self._check_open()
            check_text("actor", actor)
            return await self._cluster.discard(run_id, actor)
        return await self._recovery.discard(run_id, actor=actor)

    async def check_drift(self, run_id: int, current: Mapping[str, Any] | None = None) -> Drift:
        """Report which pinned ingredients of a run differ from ``current`` (design §6.10).

        Args:
            run_id: The run.
            current: Any of ``revision``, ``operation``, ``arguments``; default: the log's
                current revision only.

        Raises:
            UnknownRun: (``unknown_run``) no such run.
            InvalidCommand: (``invalid_command``) ``current`` has other keys, or values
                that are not JSON.
        """
        self._not_in_cluster("check_drift")
        return await self._recovery.check_drift(run_id, current)

    async def recover(
        self,
        decide: Callable[[Survivor], Awaitable[Decision]],
        *,
        current: Mapping[str, Any] | None = None,
        actor: str = "local",
    ) -> tuple[Recovered, ...]:
        """Decide every held run with ``decide`` and carry it out (design §6.17).

        The in-process twin of :meth:`actors.EventLogClient.recover` (see there).
        """
        self._not_in_cluster("recover")
        return await self._recovery.recover(decide, current=current, actor=actor)

    async def finished_runs(
        self,
        *,
        after: int = 0,
        limit: int | None = None,
        state: str | None = None,
        verdict: str | None = None,
        since: float | None = None,
    ) -> FinishedRunsPage:
        """One page of finished or cancelled runs and their results (design §6.18).

        Served from the ledger (so it lists runs decided before a restart and beyond
        ``retain_runs``), once what is staged has committed; without a ledger, from the
        decided runs memory still holds. Pages go by run id: pass the page's ``cursor``
        as ``after`` while ``more``::

            after = 0
            while True:
                page = await log.finished_runs(after=after, limit=100, state="finished")
                for run in page.runs:
                    print(run.run_id, run.operation, run.verdict, run.result)
                for damaged in page.damaged:  # a damaged row, named, never a crash
                    print(damaged.run_id, damaged.error.code)
                if not page.more:
                    break
                after = page.cursor

        Args:
            after: Run id after which to list (0: from the first run).
            limit: The most runs in the page, 1..``finished_runs_limit`` (default: that).
            state: ``finished`` or ``cancelled`` only; None for both.
            verdict: Only runs with this verdict (e.g. ``ok``).
            since: Only runs decided at or after this time, in seconds since the epoch
                (wall clock, like ``time.time()``; ``finished_at``).

        Raises:
            InvalidCommand: (``invalid_command``) a bad ``after``, ``limit``, ``state``,
                ``verdict`` or ``since`` (``details["fields"]`` names it).
            LedgerUnavailable: (``ledger_unavailable``) the ledger did not answer within
                ``ledger_read_timeout`` seconds (design §6.19); ``details["retry_after"]``
                says when to ask again. Through the actor also when the log did not
                answer within ``request_timeout`` seconds.
            LedgerError: (``ledger_error``) SQLite failed.
        """
        self._not_in_cluster("finished_runs")
        return await self._finished.query(after, limit, state, verdict, since)

    def observe_commits(self, callback: Callable[[int, float], None] | None) -> bool:
        """Have ``callback(rows, seconds)`` called after each ledger commit (design §1.7).

        ``rows`` is the batch's row count and ``seconds`` (trio clock) how long its
        transaction took. None stops it. Returns False when there is no ledger.
        """
        if self._ledger is None:
            return False
        self._ledger.on_commit = callback
        return True

    def statistics(self) -> EventLogStatistics:
        """Return the event log's counters."""
        if self._cluster is not None:
            return self._cluster.statistics()
        return EventLogStatistics(
            head=self._journal.head,
            floor=self._journal.floor(),
            queued=self._runs.queued,
            running=self._runs.running,
            held=len(self._runs.held()),
            bound=self._gate.bound,
            paused=self._gate.paused or self._gate.unavailable is not None,
            revision=self._intake.revision,
            ports=tuple(self._journal.hub.ports()),
            ledger=None if self._ledger is None else self._ledger.statistics(),
            progress_folded=self._runs.progress_folded,
            subscribers_left=self._journal.hub.leaves(),
            refusals=dict(self._intake.refusals),
        )


@asynccontextmanager
async def open_event_log(
    config: EventLogConfig | None = None,
    *,
    operations: Iterable[OperationSpec] = (),
    runners: Mapping[str, Runner] | None = None,
) -> AsyncIterator[EventLog]:
    """Run an :class:`EventLog` in a nursery of its own for the body's duration.

    Entering is a checkpoint (it opens the ledger and boots); leaving flushes the ledger
    (within ``close_timeout`` seconds), cancels runners still running and closes it.

    Raises:
        LedgerCorrupt, LedgerVersionUnsupported, LedgerError: see :meth:`EventLog.run`.
    """
    log = EventLog(config, operations=operations, runners=runners)
    # The log runs beside its user in one nursery: a single failure (or a Ctrl-C)
    # leaves bare, like from ``Actor.run``.
    with unwrap_sole_exception():
        async with trio.open_nursery() as nursery:
            await nursery.start(log.run)
            try:
                yield log
            finally:
                log._closing.set()
