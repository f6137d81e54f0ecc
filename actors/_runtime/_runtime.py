"""``open_runtime``: the four system actors as a supervision tree (design §1.1, §1.7).

The runtime starts, in this order, the **event log** (§6), the **pool actor** with its
helper pool (§3), the **renderer** (§5) and the **scheduler** (§4), as children of the
project's OTP :class:`~actors.Supervisor` (the tree and why it has that shape:
:mod:`actors._runtime._tree`). They talk only through their mailboxes and the
:class:`Runtime`'s handles, which follow each actor across its restarts. A helper pool
that exceeds its restart intensity fails its actor, and the tree restarts it after a
capped backoff; the pool actor then tells the scheduler ``HelperRestarted``. Every step
of the pool and every decision of the tree is a log record and an event in the event
log. Leaving the block stops the tree in reverse order within ``shutdown_grace``
seconds; the nursery does not exit before every task has ended and every helper
process (and its tree) is gone (§3.8, §3.11)::

    config = RuntimeConfig(
        helper=HelperSpec(entry="myapp.helper:main"),
        render_fn=my_render,
        execute=my_execute,          # async my_execute(job, runtime) -> result
        operations=[OperationSpec(name="index", fields=("run_id",))],
    )
    async with open_runtime(config) as runtime:
        receipt = await runtime.eventlog.submit("index", {"run_id": 1})
        async for notice in runtime.scheduler_events:
            ...

**Shutdown bound** (design §3.13): leaving the block takes at most
:attr:`RuntimeConfig.shutdown_bound` seconds, ``shutdown_grace + cancel_grace +
shutdown + terminate + kill`` (the helper timeouts): the actors drain within the grace,
and the pool's close, which runs shielded, may take its own bound after it. A Ctrl-C
during that shutdown skips every grace that is left: the actors are cancelled and every
helper tree gets SIGKILL, so the rest takes at most ``kill`` seconds; then
``KeyboardInterrupt`` is raised. A ``KeyboardInterrupt`` leaves ``open_runtime`` bare,
never in an exception group.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio
from trio.lowlevel import enable_ki_protection

from .._core import (
    MAX_DURATION,
    Backoff,
    ChildSpec,
    count_field,
    duration_field,
    unwrap_sole_exception,
)
from .._eventlog import EventLogActor, EventLogClient, EventLogConfig, OperationSpec
from .._helpers import (
    POOL_EVENT_KINDS,
    HelperSpec,
    PoolActor,
    PoolConfig,
    PoolEvents,
    PoolEventStream,
    PoolHandle,
    second_interrupt,
)
from .._metrics import Lifecycle
from .._renderer import Renderer, RendererConfig, RenderFn
from .._scheduler import HelperRestarted, RunInfo, SchedulerActor, SchedulerConfig
from ..errors import ChildStartFailed, RenderFailed, UnsupportedOperation
from ._eventlog_sink import EventLogSink
from ._tree import STRATEGIES, SYSTEM_START_TIMEOUT, LiveChild, build_tree, route

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

    import prometheus_client

    from .._core import ActorRef, Supervisor, SupervisorEvent, SupervisorRef
    from .._eventlog import Runner
    from .._helpers import HelperPool
    from .._metrics import RuntimeMetrics
    from .._scheduler import PayloadCache, SchedulerStatistics

__all__ = ["Runtime", "RuntimeConfig", "open_runtime"]

_log = logging.getLogger("actors.runtime")
#: Seconds (trio clock) the pool actor's notice to the scheduler may wait for room.
_NOTICE_TIMEOUT = 2.0


def _callable(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not callable(value):
        raise ValueError(f"{attribute.name} must be callable, got {value!r}")


def no_render_fn(observation: Any, kind: str, options: Any, check_cancel: Any) -> bytes:
    """The default ``render_fn``: this runtime draws nothing (design §5.1)."""
    raise RenderFailed(
        f"this runtime has no render_fn (asked for a {kind!r} render); "
        "give RuntimeConfig(render_fn=...)"
    )


async def no_execute(job: Any, runtime: Any) -> Any:
    """The default ``execute``: this runtime schedules nothing (design §4)."""
    raise UnsupportedOperation(
        "this runtime has no execute (the scheduler got a claim); give RuntimeConfig(execute=...)"
    )


def _render_fn(value: RenderFn | None) -> RenderFn:
    return no_render_fn if value is None else value


def _execute(value: Callable[..., Awaitable[Any]] | None) -> Callable[..., Awaitable[Any]]:
    return no_execute if value is None else value


def _default_restart() -> Backoff:
    return Backoff(base=1.0, cap=30.0, reset_after=60.0)


def _kinds(value: Any) -> frozenset[str]:
    kinds = frozenset(value)
    unknown = kinds - POOL_EVENT_KINDS
    if unknown:
        raise ValueError(f"pool_events has unknown kinds {sorted(unknown)}")
    return kinds


@attrs.frozen(kw_only=True)
class RuntimeConfig:
    """Everything :func:`open_runtime` needs; validated at construction (design §1.6).

    Raises:
        ValueError: a duration or count is out of range, a callable is not callable,
            or ``pool_events`` names an unknown kind; the message names the field.
    """

    helper: HelperSpec = attrs.field(validator=attrs.validators.instance_of(HelperSpec))
    """The helper program the helper pool runs (design §3.1)."""
    render_fn: RenderFn = attrs.field(default=None, converter=_render_fn, validator=_callable)
    """``render_fn(observation, kind, options, check_cancel) -> bytes``, run in a worker
    thread by the renderer (design §5.1). None (the default): a render fails with
    ``RenderFailed`` (code ``render_failed``) saying so."""
    execute: Callable[..., Awaitable[Any]] = attrs.field(
        default=None, converter=_execute, validator=_callable
    )
    """``async execute(job: SchedulerJob, runtime: Runtime) -> result``: does one claim
    of the scheduler (design §4), typically through ``runtime.pool`` and
    ``runtime.renderer``. None (the default): a claim fails with
    ``UnsupportedOperation`` (code ``unsupported_operation``) saying so."""
    pool: PoolConfig = attrs.field(factory=PoolConfig)
    """Pool size, helper timeouts, restart intensity (design §3.2, §3.7)."""
    renderer: RendererConfig = attrs.field(factory=RendererConfig)
    """Threads, payload bounds, render deadline (design §5.1)."""
    scheduler: SchedulerConfig = attrs.field(factory=SchedulerConfig)
    """K workers, job deadline, pacing, backoff (design §4)."""
    runs: Sequence[RunInfo] = ()
    """The scheduler's initial runs, in table order (more come with ``Reconcile``)."""
    source: str = ""
    """Identity of the scheduler's source (e.g. a database path)."""
    payload_cache: PayloadCache | None = None
    """Cache of rendered payloads (design §4.10), or None."""
    renderer_version: str = ""
    """Part of every payload cache key: bump it when drawing changes (design §4.10)."""
    eventlog: EventLogConfig = attrs.field(factory=EventLogConfig)
    """Ledger path, window, admission bound (design §6)."""
    operations: Sequence[OperationSpec] = ()
    """The front door's operations (design §6.2)."""
    runners: Mapping[str, Runner] | None = None
    """Operations the event log runs itself (design §6.6), by name."""
    shutdown_grace: float = duration_field(5.0)
    """Seconds the actors get, all together, to drain when the runtime closes (trio
    clock); the pool's close may take its own bound after it (design §3.13)."""
    restart: Backoff = attrs.field(
        factory=_default_restart, validator=attrs.validators.instance_of(Backoff)
    )
    """The tree's backoff before restarting a system actor (design §1.4, §1.7): by
    default 1 s doubling to 30 s, back to 1 s after a quiet minute. A failed helper
    pool is recovered with it."""
    max_restarts: int = count_field(10, minimum=0)
    """Restarts each supervisor of the tree allows within ``restart_period``; one more
    and the runtime fails (``RestartIntensityExceeded``). With the default backoff a
    pool that keeps failing is retried every 30 s without ever exceeding it."""
    restart_period: float = duration_field(60.0, allow_zero=False)
    """The intensity window of the tree's supervisors, in seconds."""
    metrics: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    """True: measure the runtime for Prometheus (:attr:`Runtime.metrics_registry`, the
    metric list: :mod:`actors.metrics`). Needs ``prometheus_client`` (the
    ``metrics`` extra); False (the default) imports nothing and measures nothing."""
    pool_events: frozenset[str] = attrs.field(default=POOL_EVENT_KINDS, converter=_kinds)
    """Kinds of :class:`~actors.PoolEvent` also written to the event log (as
    ``helper_<kind>``); leave out ``job_started`` to keep one event per job out."""

    @property
    def shutdown_bound(self) -> float:
        """Longest the close of the runtime takes, in seconds (design §3.13)."""
        return self.shutdown_grace + self.pool.timeouts.close_bound


class Runtime:
    """The handles of a running runtime; made by :func:`open_runtime` only.

    Each handle follows its actor across restarts (design §1.7): read ``runtime.x``
    each time rather than keeping what it returned.
    """

    def __init__(self, config: RuntimeConfig, nursery: trio.Nursery) -> None:
        self.config = config
        self.nursery = nursery
        """The runtime's nursery: an embedder may start its own tasks here (they are
        cancelled when the runtime closes)."""
        self.pool_events = PoolEvents(config.helper.name)
        """The helper pool's events, across its restarts (design §3.10)."""
        self._eventlog: LiveChild[EventLogActor] = LiveChild("event_log")
        self._pool: LiveChild[PoolActor] = LiveChild("pool")
        self._renderer: LiveChild[Renderer] = LiveChild("renderer")
        self._scheduler: LiveChild[SchedulerActor] = LiveChild("scheduler")
        self._children = {
            child.name: child
            for child in (self._eventlog, self._pool, self._renderer, self._scheduler)
        }
        self._client: EventLogClient | None = None
        self.pool = PoolHandle(self._pool)
        """The pool actor's handle: ``run_job``, ``snapshot``, ``restart`` (design §3)."""
        self.sink = EventLogSink(lambda: self._eventlog.instance)
        """Where the pool's and the tree's events are appended to the event log."""
        self._events_send, self._events_receive = trio.open_memory_channel[Any](64)
        self.metrics: RuntimeMetrics | None = None
        """The runtime's metrics when ``config.metrics`` is True, else None."""
        if config.metrics:
            self.metrics = self._new_metrics()
        grace = config.shutdown_grace
        # The pool starts once its eager helpers are ready, each within the helpers'
        # startup timeout (all at once); the others get the system children's bound.
        pool_start = min(MAX_DURATION, config.pool.timeouts.startup + SYSTEM_START_TIMEOUT)
        self.tree: Supervisor = build_tree(
            ChildSpec(
                "event_log", self._new_event_log, shutdown=grace, start_timeout=SYSTEM_START_TIMEOUT
            ),
            [
                ChildSpec("pool", self._new_pool, shutdown=grace, start_timeout=pool_start),
                ChildSpec(
                    "renderer",
                    self._new_renderer,
                    shutdown=grace,
                    start_timeout=SYSTEM_START_TIMEOUT,
                ),
                ChildSpec(
                    "scheduler",
                    self._new_scheduler,
                    shutdown=grace,
                    start_timeout=SYSTEM_START_TIMEOUT,
                ),
            ],
            max_restarts=config.max_restarts,
            period=config.restart_period,
            backoff=config.restart,
            grace=grace,
            on_event=self._on_event,
        )

    def _new_metrics(self) -> RuntimeMetrics:
        from .._metrics import RuntimeMetrics  # only now: an optional dependency

        lifecycle = Lifecycle(strategies=STRATEGIES, window=self.config.restart_period)
        metrics = RuntimeMetrics(lifecycle=lifecycle)
        metrics.watch(
            event_log=lambda: None if (log := self._eventlog.instance) is None else log.log,
            pool=self._live_pool,
            scheduler=self._scheduler_statistics,
            mailboxes=lambda: {
                name: child.ref for name, child in self._children.items() if child.ref is not None
            },
        )  # fmt: skip
        return metrics

    def _scheduler_statistics(self) -> SchedulerStatistics | None:
        actor = self._scheduler.instance
        return None if actor is None else actor.scheduler.statistics()

    def _live_pool(self) -> HelperPool | None:
        actor = self._pool.instance
        try:
            return None if actor is None else actor.pool
        except RuntimeError:  # between its start and its pool's
            return None

    # --- the children ---------------------------------------------------------------

    def _new_event_log(self) -> EventLogActor:
        config = self.config
        actor = EventLogActor(config.eventlog, operations=config.operations, runners=config.runners)
        return self._eventlog.made(actor)

    def _new_pool(self) -> PoolActor:
        actor = PoolActor(
            self.config.helper,
            self.config.pool,
            events=self.pool_events,
            on_failure="escalate",
            on_helper_exit=self._tell_scheduler,
        )
        return self._pool.made(actor)

    def _new_renderer(self) -> Renderer:
        return self._renderer.made(Renderer(self.config.render_fn, self.config.renderer))

    def _new_scheduler(self) -> SchedulerActor:
        config = self.config
        actor = SchedulerActor(
            config.execute,
            self,
            runs=config.runs,
            source=config.source,
            config=config.scheduler,
            payload_cache=config.payload_cache,
            renderer_version=config.renderer_version,
        )
        return self._scheduler.made(actor)

    @enable_ki_protection
    async def _tell_scheduler(self) -> None:
        """A helper incarnation ended: results tied to it are invalid (design §4.8)."""
        ref = self._scheduler.ref
        if ref is not None:
            with trio.move_on_after(_NOTICE_TIMEOUT):
                await ref.send(HelperRestarted())

    def _on_event(self, event: SupervisorEvent) -> None:
        route(self._children, event)
        if self.metrics is not None:
            self.metrics.on_supervisor_event(event)
            log = self._eventlog.instance
            if event.kind == "child_started" and event.child == "event_log" and log is not None:
                self.metrics.attach_event_log(log.log)
        if event.kind == "child_started" and event.child == "scheduler":
            actor = self._scheduler.instance
            if actor is not None:
                self.nursery.start_soon(self._pump, actor, self._events_send.clone())
        self.sink.append(f"actor_{event.kind.removeprefix('child_')}", event.to_dict())

    @enable_ki_protection
    async def _pump(self, actor: SchedulerActor, send: trio.MemorySendChannel[Any]) -> None:
        """Pass one scheduler incarnation's events on to :attr:`scheduler_events`."""
        async with send:
            async for notice in actor.events:
                if self.metrics is not None:
                    self.metrics.on_scheduler_event(notice)
                try:
                    await send.send(notice)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return  # nobody reads any more

    @enable_ki_protection
    async def _forward_pool_events(self, stream: PoolEventStream) -> None:
        """Write the pool's events to the event log (design §3.10)."""
        with stream:
            async for event in stream:
                self.sink.append(f"helper_{event.kind}", event.to_dict())

    # --- the handles ----------------------------------------------------------------

    @property
    def supervisor(self) -> SupervisorRef:
        """The root of the tree (design §1.7): ``which_children``, ``restarts``."""
        return self.tree.ref

    @property
    def metrics_registry(self) -> prometheus_client.CollectorRegistry | None:
        """The runtime's own Prometheus registry (``config.metrics``), else None.

        Serve it with ``prometheus_client.generate_latest(registry)`` or push it; the
        metrics are listed in :mod:`actors.metrics`.
        """
        return None if self.metrics is None else self.metrics.registry

    @property
    def eventlog(self) -> EventLogClient:
        """The event log's client (design §6), for its current incarnation."""
        ref = self.eventlog_ref
        if self._client is None or self._client.ref is not ref:
            self._client = EventLogClient(ref)
        return self._client

    @property
    def eventlog_ref(self) -> ActorRef:
        """The event log's ref (its current incarnation, or its last one)."""
        return self._ref(self._eventlog)

    @property
    def pool_ref(self) -> ActorRef:
        """The pool actor's ref (its current incarnation, or its last one)."""
        return self._ref(self._pool)

    @property
    def renderer(self) -> ActorRef:
        """The renderer's ref: ask it ``Render(...)`` (design §5)."""
        return self._ref(self._renderer)

    @property
    def scheduler(self) -> ActorRef:
        """The scheduler's ref: send it ``SetPriority``, ``SourceChanged``, ... (§4)."""
        return self._ref(self._scheduler)

    @property
    def scheduler_actor(self) -> SchedulerActor:
        """The scheduler's current actor object (for in-process inspection).

        Raises:
            RuntimeError: the scheduler is being restarted.
        """
        actor = self._scheduler.instance
        if actor is None:
            raise RuntimeError("the scheduler is not running")
        return actor

    @property
    def scheduler_events(self) -> trio.MemoryReceiveChannel[Any]:
        """The scheduler's published/parked/failed notices, in order (one reader).

        Someone must read it: a reader that stops reading holds back the scheduler's
        workers (never its mailbox). It goes on across restarts of the scheduler and
        ends when the runtime closes.
        """
        return self._events_receive

    def refs(self) -> list[ActorRef]:
        """The four actors' refs in start order."""
        return [self.eventlog_ref, self.pool_ref, self.renderer, self.scheduler]

    @staticmethod
    def _ref(child: LiveChild[Any]) -> ActorRef:
        ref = child.ref or child.last_ref
        if ref is None:
            raise RuntimeError(f"the {child.name} has not started")
        return ref

    # --- closing --------------------------------------------------------------------

    def _hurry(self) -> None:
        """A second Ctrl-C: cancel the actors now, SIGKILL every helper tree."""
        _log.warning("Ctrl-C during the shutdown: stopping at once")
        self.tree.ref.stop_nowait(0.0)
        actor = self._pool.instance or self._pool.pending
        if actor is not None:
            actor.hurry()

    @enable_ki_protection
    async def _close(self) -> None:
        for child in self._children.values():
            child.close()  # no restart is coming: callers waiting for one give up
        await self.tree.ref.stop(self.config.shutdown_grace)
        self.pool_events.close()
        self._events_send.close()


@asynccontextmanager
@enable_ki_protection
async def open_runtime(config: RuntimeConfig) -> AsyncIterator[Runtime]:
    """Start the four system actors under their supervisors; stop them all at the end.

    Entering is a checkpoint and waits until every actor is running and every eager
    helper replied *ready* (so a helper that cannot start fails here, not later).
    Exiting (shielded) stops the scheduler, renderer, pool actor and event log in that
    order, all within ``config.shutdown_grace`` seconds, then waits for the nursery:
    no task and no helper process is left (design §3.8); it takes at most
    ``config.shutdown_bound`` seconds, or ``kill`` seconds after a Ctrl-C during it
    (design §3.13). See the module docstring.

    Raises:
        HelperStartupFailed: (code ``helper_startup_failed``) a helper did not get ready.
        HelperExited: (code ``helper_exited``) a helper exited during startup.
        LedgerCorrupt: (code ``ledger_corrupt``) the ledger file is damaged.
        LedgerVersionUnsupported: (code ``ledger_version_unsupported``) newer ledger schema.
        RestartIntensityExceeded: (code ``restart_intensity_exceeded``) a supervisor of
            the tree gave up: a system actor kept failing.
        KeyboardInterrupt: Ctrl-C, bare.
    """
    with unwrap_sole_exception():
        async with trio.open_nursery() as nursery:
            runtime = Runtime(config, nursery)
            if config.pool_events:  # before the first spawn
                stream = runtime.pool_events.subscribe(bound=1024, kinds=config.pool_events)
                nursery.start_soon(runtime._forward_pool_events, stream)
            if runtime.metrics is not None:
                kinds = POOL_EVENT_KINDS - {"job_started"}  # the job path stays free
                stream = runtime.pool_events.subscribe(bound=1024, kinds=kinds)
                nursery.start_soon(runtime.metrics.follow_pool, stream)
            try:
                await nursery.start(runtime.tree.run)
            except ChildStartFailed as exc:
                # The tree names the system actor that failed; callers match the cause.
                root = exc.root_cause
                root.add_note(str(exc))
                raise root from None
            try:
                yield runtime
            finally:
                # Shielded: closing must finish even when the block was cancelled; it
                # is bounded (see the module docstring).
                with trio.CancelScope(shield=True):
                    async with second_interrupt(runtime._hurry):
                        await runtime._close()
                nursery.cancel_scope.cancel()
