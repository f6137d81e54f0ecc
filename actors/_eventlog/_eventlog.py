"""The event log and front door: receipts, admission, lifecycle, cursors (design §6).

:class:`EventLog` is the state of the event-log actor, usable on its own:

* the **front door** (:meth:`EventLog.submit`): validation (§6.2), idempotent request ids
  (§6.3), coalescing (§6.4) and admission (§6.5); it returns a :class:`Receipt` once the
  request is durable and never runs anything itself;
* the **lifecycle API** for an external executor (:meth:`~EventLog.start`,
  :meth:`~EventLog.progress`, :meth:`~EventLog.finish`) and a built-in **drain** that runs
  the async runner registered for an operation, with bounded concurrency, each run under
  its own cancel scope (§6.6); :meth:`~EventLog.cancel` is truthful (§6.7);
* the **log**: one global seq, a bounded window for :meth:`~EventLog.watch` (§6.8) and
  bounded subscriber ports (§6.9, :mod:`actors._eventlog._ports`);
* **durability** in a SQLite ledger when a path is configured (§6.10,
  :mod:`actors._eventlog._ledger`), with :meth:`~EventLog.boot_report`, :meth:`~EventLog.resume`,
  :meth:`~EventLog.discard` and :meth:`~EventLog.check_drift`.

With a ledger, ``watch`` below the in-memory window reads the older events from SQLite,
so a cursor is only ever expired when it is beyond the head (or, without a ledger, below
the window's floor). Memory holds every unfinished run, the last ``retain_runs`` finished
ones and the last ``retain_requests`` request ids; older ones are read from the ledger
(without a ledger they are forgotten: ``status`` says ``unknown_run``).

The class is assembled from mixins, one module per concept: :mod:`actors._eventlog._admission`
(submit, admission, revision), :mod:`actors._eventlog._runs` (lifecycle, cancel, drain),
:mod:`actors._eventlog._recovery` (boot report, resume, discard, drift); the records are in
:mod:`actors._eventlog._types`. Everything runs on the event loop except SQLite, which runs
in one worker thread at a time (:mod:`actors._eventlog._ledger`).

Event kinds and their ``data``:

=====================  ================================================================
``job_queued``         operation, arguments, revision, snapshot_id, request_id
                       (+ ``resumed``, ``interruptions`` after ``resume``)
``job_started``        {}
``job_progress``       fraction (0..1), note? (+ ``synthetic: true`` for the 0.0 one)
``job_finished``       verdict, result?, error? ({category, code, message})
``job_cancelled``      by (the actor), was (queued/running/held), reason?
``job_interrupted``    interruptions, quarantined (emitted at boot)
``admission_paused``   depth, bound
``admission_resumed``  depth, bound
``revision_bumped``    revision
=====================  ================================================================
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..errors import (
    ActorStopped,
    CursorExpired,
    InvalidCommand,
    UnknownRun,
)
from ._admission import Admission, FrontDoorMixin, _is_run_id, _Request
from ._ledger import Ledger, LedgerStatistics
from ._ports import Port, PortHub, PortStatistics
from ._recovery import DurabilityMixin
from ._runs import Run, RunLifecycleMixin
from ._types import (
    Event,
    EventLogConfig,
    OperationSpec,
    RunStatus,
    WatchResult,
    encode_json,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Mapping

    from ._runs import Runner

__all__ = ["Admission", "EventLog", "EventLogStatistics", "open_event_log"]

_make_event = Event._make


@attrs.frozen(kw_only=True)
class EventLogStatistics:
    """Counters of an event log (STYLE 16)."""

    head: int
    """The newest seq."""
    floor: int
    """The oldest seq in the in-memory window (``head + 1`` when empty)."""
    queued: int
    """Runs waiting for an executor."""
    running: int
    """Runs started and not decided."""
    held: int
    """Runs found at boot, waiting for ``resume``/``discard``."""
    bound: int
    """``max_inflight``."""
    paused: bool
    """True between ``admission_paused`` and ``admission_resumed``."""
    revision: int
    """The current revision."""
    ports: tuple[PortStatistics, ...]
    """One entry per open subscriber port."""
    ledger: LedgerStatistics | None
    """The ledger's counters, or None in memory."""


class EventLog(FrontDoorMixin, RunLifecycleMixin, DurabilityMixin):
    """The event log and front door (design §6); see the module docstring.

    Use :func:`open_event_log`, or ``await nursery.start(log.run)`` then
    ``await log.aclose()`` (the event-log actor does the latter).

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
        self._ops: dict[str, OperationSpec] = {}
        self._runners: dict[str, Runner] = {}
        for spec in operations:
            self.register(spec)
        for name, runner in (runners or {}).items():
            self.register(self._ops[name], runner)
        self._ledger = (
            Ledger(
                config.ledger_path,
                synchronous=config.synchronous,
                commit_linger=config.commit_linger,
                max_pending_rows=config.max_pending_rows,
            )
            if config.ledger_path
            else None
        )
        # The window holds ``(seq, kind, run_id, data)`` entries; an Event object is made
        # from one only when someone reads it (watch, a port's replay) or a port listens.
        self._window: deque[tuple[int, str, int | None, dict[str, Any]]] = deque(
            maxlen=config.window
        )
        self._head = 0
        #: The lowest event seq the ledger holds (older ones were pruned at open).
        self._ledger_floor = 1
        self._revision = 0
        self._requests: dict[str, _Request] = {}
        self._ledger_has_more_requests = False
        self._next_position = 1
        self._inflight: dict[tuple[str, str, int], int] = {}
        self._paused = False
        self._hub = PortHub(
            self._replay, default_bound=config.subscriber_bound, head=lambda: self._head
        )
        self._init_runs()
        self._open = False
        self._started = False
        self._closing = trio.Event()
        self._closed = trio.Event()

    def register(self, spec: OperationSpec, runner: Runner | None = None) -> None:
        """Add (or replace) an operation and, optionally, its built-in runner (design §6.2)."""
        self._ops[spec.name] = spec
        if runner is not None:
            self._runners[spec.name] = runner
        else:
            self._runners.pop(spec.name, None)

    @property
    def revision(self) -> int:
        """The current revision (design §6.4)."""
        return self._revision

    @property
    def head(self) -> int:
        """The newest event seq (0 before any event)."""
        return self._head

    # -- running ------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Open the ledger, boot, then run the ledger writer and the drain until closed.

        ``task_status.started()`` is called once ``submit`` may be used. On close, runners
        still running are cancelled (they are *interrupted* and held at the next boot),
        then what is still staged is committed and the ledger closed (one worker-thread
        call, shielded, started within ``close_timeout`` seconds).

        Raises:
            LedgerCorrupt: (``ledger_corrupt``) the ledger file is damaged (untouched).
            LedgerVersionError: (``ledger_version_unsupported``) newer schema.
            LedgerError: (``ledger_error``) SQLite failed.
        """
        if self._started:
            raise RuntimeError("EventLog.run() may be called once")
        self._started = True
        ledger = self._ledger
        try:
            if ledger is not None:
                snapshot = await ledger.open(
                    keep_requests=self.config.retain_requests,
                    keep_events=self.config.ledger_retain_events,
                )
                self._ledger_floor = snapshot.event_floor
                self._boot(snapshot)
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if ledger is not None:
                    await nursery.start(ledger.run_writer)
                nursery.start_soon(self._drain)
                self._open = True
                task_status.started()
                await self._closing.wait()
                self._open = False
                nursery.cancel_scope.cancel()
        finally:
            self._open = False
            self._hub.close()
            if ledger is not None:
                try:
                    with trio.move_on_after(self.config.close_timeout, shield=True):
                        await ledger.close()  # commits what is still staged
                finally:
                    ledger.abandon()
            self._closed.set()

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

    # -- the log (design §6.8, §6.9) ------------------------------------------------------

    def _emit(
        self, kind: str, run_id: int | None, data: dict[str, Any], text: str | None = None
    ) -> int:
        """Append one event to the log; return its seq (design §6.8).

        O(1) and never waits: the window gets a plain tuple, the ledger's batch the row
        with ``data``'s JSON text (encoded here exactly once, unless the caller built it
        alongside ``data``), and the ports an :class:`Event` only while one listens.
        :meth:`progress` inlines this body on its fast path; keep the two in step.
        """
        ledger = self._ledger
        if ledger is not None and text is None:
            # Before any change, so that a failure (not expected: the log checked or
            # built this data) leaves the log as it was.
            text = encode_json(data)
        self._head = seq = self._head + 1
        self._window.append((seq, kind, run_id, data))
        if ledger is not None and text is not None:
            ledger.stage_event(seq, kind, run_id, text)
        if self._hub._active:  # hub.listening, inlined
            self._hub.publish(_make_event(seq, kind, run_id, data))
        return seq

    def _floor(self) -> int:
        return self._window[0][0] if self._window else self._head + 1

    def _replay(self, cursor: int, limit: int | None = None) -> list[Event]:
        if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
            raise InvalidCommand(f"cursor must be an int >= 0, got {cursor!r}", fields=["cursor"])
        if cursor > self._head:
            raise CursorExpired(
                f"cursor {cursor} is beyond the head {self._head}", resume_from=self._head
            )
        floor = self._floor()
        if cursor < floor - 1:
            raise CursorExpired(
                f"cursor {cursor} is below the retained floor {floor}", resume_from=floor - 1
            )
        start = cursor - floor + 1
        stop = None if limit is None else start + limit
        make = _make_event
        return [make(*entry) for entry in itertools.islice(self._window, start, stop)]

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
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidCommand(f"limit must be an int >= 1, got {limit!r}", fields=["limit"])
        head = self._head
        try:
            events = self._replay(cursor, limit)
        except CursorExpired:
            if self._ledger is None or cursor > head:
                raise
            floor = self._ledger_floor
            if cursor < floor - 1:  # pruned at open (ledger_retain_events)
                raise CursorExpired(
                    f"cursor {cursor} is below the ledger's retained floor {floor}",
                    resume_from=floor - 1,
                ) from None
            await self._ledger.flush()
            rows = await self._ledger.fetch_events(cursor, limit)
            events = [Event(seq=s, kind=k, run_id=r, data=json.loads(d)) for s, k, r, d in rows]
        else:
            await trio.lowlevel.checkpoint()
        return WatchResult(
            events=tuple(events), cursor=events[-1].seq if events else cursor, head=head
        )

    def subscribe(
        self,
        name: str | None = None,
        *,
        cursor: int | None = None,
        bound: int | None = None,
        local: bool = True,
        listener: Callable[[Event], object] | None = None,
    ) -> Port:
        """Open a bounded subscriber port (design §6.9); see :meth:`PortHub.open_port`.

        Raises:
            CursorExpired: (``cursor_expired``) ``cursor`` is outside the window.
            InvalidCommand: (``invalid_command``) the name is taken or ``bound`` < 1.
        """
        return self._hub.open_port(name, cursor=cursor, bound=bound, local=local, listener=listener)

    def set_port_enabled(self, name: str, enabled: bool, *, local: bool) -> PortStatistics:
        """Enable or disable a port; local callers only (design §6.9).

        Raises:
            RemoteToggleDenied: (``remote_toggle_denied``) ``local`` is False.
            InvalidCommand: (``invalid_command``) no port has that name.
        """
        return self._hub.set_enabled(name, enabled, local=local)

    async def status(self, run_id: int) -> RunStatus:
        """Return the state of a run; needs no capacity (design §6.5).

        Raises:
            UnknownRun: (``unknown_run``) no such run (or, without a ledger, forgotten).
        """
        run = self._find(run_id)
        if run is not None:
            await trio.lowlevel.checkpoint()
            return run.status(self.config.quarantine_after)
        row = None
        if self._ledger is not None and _is_run_id(run_id):
            await self._ledger.flush()
            row = await self._ledger.fetch_run(run_id)
        if row is None:
            raise UnknownRun(f"no run {run_id!r}", run_id=run_id)
        return Run.from_row(row).status(self.config.quarantine_after)

    def statistics(self) -> EventLogStatistics:
        """Return the event log's counters."""
        return EventLogStatistics(
            head=self._head,
            floor=self._floor(),
            queued=self._queued,
            running=self._running,
            held=sum(1 for _ in self._held()),
            bound=self.config.max_inflight,
            paused=self._paused,
            revision=self._revision,
            ports=tuple(self._hub.ports()),
            ledger=None if self._ledger is None else self._ledger.statistics(),
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
        LedgerCorrupt, LedgerVersionError, LedgerError: see :meth:`EventLog.run`.
    """
    log = EventLog(config, operations=operations, runners=runners)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(log.run)
            try:
                yield log
            finally:
                log._closing.set()
    except BaseExceptionGroup as group:
        leaf = single_leaf(group)
        if leaf is None:
            raise
        raise leaf from None


def single_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """Return the one exception inside nested one-item groups, or None if there are more.

    The log runs beside its user in one nursery; like ``Actor.run``, we report a single
    failure bare (``LedgerCorrupt``, not an ``ExceptionGroup`` holding it).
    """
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
        leaf = leaf.exceptions[0]
    return None if isinstance(leaf, BaseExceptionGroup) else leaf
