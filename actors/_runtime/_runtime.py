"""``open_runtime``: the four system actors in one nursery (design §1.1).

The runtime starts, in this order, the **event log** (§6), the **pool actor** with its
helper pool (§3), the **renderer** (§5) and the **scheduler** (§4), each as an actor task
in one nursery that the ``async with`` block owns. They talk only through their bounded
mailboxes; the :class:`Runtime` object holds the handles. Leaving the block stops them
in reverse order, each within its shutdown grace, and the nursery does not exit before
every task has ended and every helper process is reaped (§3.8)::

    config = RuntimeConfig(
        helper=HelperSpec(entry="myapp.helper:main"),
        render_fn=my_render,
        execute=my_execute,          # async my_execute(job, runtime) -> result
        operations=[OperationSpec(name="preview", fields=("run_id",))],
    )
    async with open_runtime(config) as runtime:
        receipt = await runtime.eventlog.submit("preview", {"run_id": 1})
        async for notice in runtime.scheduler_events:
            ...
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._core._config import duration_field
from .._eventlog._actor import EventLogActor, EventLogClient
from .._eventlog._types import EventLogConfig, OperationSpec
from .._helpers._pool import PoolConfig
from .._helpers._pool_actor import PoolActor
from .._helpers._pool_handle import PoolHandle
from .._helpers._spec import HelperSpec
from .._renderer._renderer import Renderer, RendererConfig, RenderFn
from .._scheduler._actor import SchedulerActor
from .._scheduler._state import RunInfo, SchedulerConfig

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

    from .._core._ref import ActorRef
    from .._eventlog._runs import Runner
    from .._scheduler._cache import PayloadCache

__all__ = ["Runtime", "RuntimeConfig", "open_runtime"]


def _callable(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not callable(value):
        raise ValueError(f"{attribute.name} must be callable, got {value!r}")


@attrs.frozen(kw_only=True)
class RuntimeConfig:
    """Everything :func:`open_runtime` needs; validated at construction (design §1.6).

    Raises:
        ValueError: a duration or count is out of range, or a callable is not callable;
            the message names the field.
    """

    helper: HelperSpec = attrs.field(validator=attrs.validators.instance_of(HelperSpec))
    """The helper program the helper pool runs (design §3.1)."""
    render_fn: RenderFn = attrs.field(validator=_callable)
    """``render_fn(observation, kind, options, check_cancel) -> bytes``, run in a worker
    thread by the renderer (design §5.1)."""
    execute: Callable[..., Awaitable[Any]] = attrs.field(validator=_callable)
    """``async execute(job: SchedulerJob, runtime: Runtime) -> result``: does one claim
    of the scheduler (design §4), typically through ``runtime.pool`` and
    ``runtime.renderer``."""
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
    """Seconds each actor gets to drain when the runtime closes (trio clock)."""


@attrs.define(eq=False)
class Runtime:
    """The handles of a running runtime; made by :func:`open_runtime` only."""

    config: RuntimeConfig
    nursery: trio.Nursery
    """The runtime's nursery: an embedder may start its own tasks here (they are
    cancelled when the runtime closes)."""
    eventlog: EventLogClient = attrs.field(init=False)
    """The event log's facade (design §6)."""
    eventlog_ref: ActorRef = attrs.field(init=False)
    pool: PoolHandle = attrs.field(init=False)
    """The pool actor's facade: ``run_job``, ``snapshot``, ``restart`` (design §3)."""
    pool_ref: ActorRef = attrs.field(init=False)
    renderer: ActorRef = attrs.field(init=False)
    """The renderer's ref: ask it ``Render(...)`` (design §5)."""
    scheduler: ActorRef = attrs.field(init=False)
    """The scheduler's ref: send it ``SetPriority``, ``SourceChanged``, ... (design §4)."""
    scheduler_actor: SchedulerActor = attrs.field(init=False)

    @property
    def scheduler_events(self) -> trio.MemoryReceiveChannel[Any]:
        """The scheduler's published/parked/failed notices, in order (one reader).

        Someone must read it: a reader that stops reading holds back the scheduler's
        workers (never its mailbox).
        """
        return self.scheduler_actor.events

    def refs(self) -> list[ActorRef]:
        """The four actors' refs in start order."""
        return [self.eventlog_ref, self.pool_ref, self.renderer, self.scheduler]


@asynccontextmanager
async def open_runtime(config: RuntimeConfig) -> AsyncIterator[Runtime]:
    """Start the four system actors; stop them all when the block ends (design §1).

    Entering is a checkpoint and waits until every actor is running and every eager
    helper replied *ready* (so a helper that cannot start fails here, not later).
    Exiting stops the scheduler, renderer, pool actor and event log in that order, each
    within ``config.shutdown_grace`` seconds, then waits for the nursery: no task and no
    helper process is left (design §3.8).

    Raises:
        HelperStartupError: (code ``helper_startup_failed``) a helper did not get ready.
        HelperExitedError: (code ``helper_exited``) a helper exited during startup.
        LedgerCorrupt: (code ``ledger_corrupt``) the ledger file is damaged.
        LedgerVersionError: (code ``ledger_version_unsupported``) newer ledger schema.
    """
    async with trio.open_nursery() as nursery:
        runtime = Runtime(config, nursery)
        runtime.eventlog_ref = await nursery.start(
            EventLogActor(config.eventlog, operations=config.operations, runners=config.runners).run
        )
        runtime.eventlog = EventLogClient(runtime.eventlog_ref)
        runtime.pool_ref = await nursery.start(PoolActor(config.helper, config.pool).run)
        runtime.pool = PoolHandle(runtime.pool_ref)
        runtime.renderer = await nursery.start(Renderer(config.render_fn, config.renderer).run)
        runtime.scheduler_actor = SchedulerActor(
            config.execute,
            runtime,
            runs=config.runs,
            source=config.source,
            config=config.scheduler,
            payload_cache=config.payload_cache,
            renderer_version=config.renderer_version,
        )
        runtime.scheduler = await nursery.start(runtime.scheduler_actor.run)
        try:
            yield runtime
        finally:
            # Shielded: closing must finish even when the block was cancelled; every
            # stop is itself bounded by the grace, so this cannot hang.
            with trio.CancelScope(shield=True):
                for ref in reversed(runtime.refs()):
                    await ref.stop(config.shutdown_grace)
            nursery.cancel_scope.cancel()
