"""The helper-pool actor: the helper pool behind a mailbox (design §3, §1.7).

Other actors talk to it through its bounded mailbox and through
:class:`~actors.PoolHandle`. It owns one
:class:`~actors.HelperPool`, opened around the actor's whole life (so the
pool is ready before ``nursery.start`` returns the ref, and closed, every helper reaped,
before ``run`` returns). A :class:`RunJob` message runs in its own task in the actor's
nursery, so the mailbox stays responsive: a :class:`CancelJob` reaches the pool while
the job runs and triggers the escalation ladder for that job only (design §3.5).

Callers normally use :class:`~actors.PoolHandle`, whose jobs run
in the caller's own task (see there: the mailbox hop would cost more than a short job)::

    ref = await nursery.start(PoolActor(spec, PoolConfig(size=2)).run)
    pool = PoolHandle(ref)
    result = await pool.run_job("metadata", {"run_id": 3}, timeout=15)

**When the pool fails** (its restart intensity is exceeded, design §3.7),
``on_failure`` decides:

``"hold"`` (the default)
    jobs fail with :class:`~actors.errors.PoolFailed` until :class:`RestartPool`;
``"restart"``
    the actor restarts the pool itself after a capped exponential backoff
    (``recovery``), with the pool's own restarter (``restart_scheduled``,
    ``restart_failed`` and ``pool_restarted`` events, design §3.15); meanwhile jobs fail
    with the transient :class:`~actors.errors.PoolRestarting`;
``"escalate"``
    the actor fails (``run`` raises ``PoolFailed``) so that its supervisor restarts it
    with its own policy; this is what the runtime does (design §1.7).

Whenever a helper incarnation that had been ready ends (but not at the close), and when
the pool restarts, the actor awaits ``on_helper_exit`` (coalesced, in its nursery): the
runtime passes one that tells the scheduler ``HelperRestarted`` (design §4.8).
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any, Final

import trio
from trio.lowlevel import enable_ki_protection

from ..._core import Actor, Backoff, validate_count
from ...errors import ActorError, HelperAbandoned, InvalidCommand, PoolBusy, PoolFailed
from .._events import PoolEvents
from ._config import PoolConfig
from ._open import open_helper_pool
from ._requests import (
    POOL_REQUESTS,
    CancelJob,
    GetLease,
    GetPoolStatistics,
    GetSnapshot,
    RestartPool,
    RetireIdle,
    RunJob,
    handler_name,
)
from ._restart import restart_when_failed

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Hashable

    from ..._core import ActorRef, Reply
    from .._process import HelperSpec
    from ._pool import HelperPool

__all__ = ["ON_FAILURE", "PoolActor", "PoolLease"]

#: Values of ``PoolActor(on_failure=...)``.
ON_FAILURE: Final = ("hold", "restart", "escalate")
#: Seconds ``on_helper_exit`` may take each time (trio clock).
NOTIFY_TIMEOUT: Final = 5.0

_log = logging.getLogger("actors.helpers")


def _default_recovery() -> Backoff:
    return Backoff(base=1.0, cap=30.0, reset_after=60.0)


class PoolLease:
    """What a handle needs to run jobs on the pool actor's pool in its own task.

    Made by the actor when its pool is open; one per actor incarnation. Every job, of
    the mailbox or of a handle, counts in :attr:`in_flight` (bounded by ``max_jobs``).
    """

    __slots__ = ("escalates", "idle", "in_flight", "max_jobs", "pool", "ref")

    def __init__(self, ref: ActorRef, pool: HelperPool, *, max_jobs: int, escalates: bool) -> None:
        self.ref = ref
        self.pool = pool
        self.max_jobs = max_jobs
        self.escalates = escalates
        self.in_flight = 0
        self.idle: trio.Event | None = None  # set when in_flight drops to 0, if waited on

    def room(self) -> None:
        """Raise ``PoolBusy`` (code ``pool_busy``) if ``max_jobs`` jobs are in flight."""
        if self.in_flight >= self.max_jobs:
            raise PoolBusy(f"{self.max_jobs} jobs are already in flight")

    def ended(self) -> None:
        """One job has ended."""
        self.in_flight -= 1
        if self.idle is not None and not self.in_flight:
            self.idle.set()


class PoolActor(Actor):
    """The system actor that supervises helper processes (design §3).

    Args:
        spec: What each helper runs.
        config: Pool size, timeouts and restart intensity (default :class:`PoolConfig`).
        max_jobs: Most jobs at once (running or waiting for a helper, through the
            mailbox or a handle); past it a job fails at once with ``PoolBusy`` (code
            ``pool_busy``).
        events: The event hub of its pools (design §3.10); give one to keep a
            subscription across restarts of the actor. Default: a hub of its own.
        on_failure: ``"hold"``, ``"restart"`` or ``"escalate"`` (see the module
            docstring).
        recovery: The backoff before each restart when ``on_failure="restart"``
            (default: 1 s doubling to 30 s, reset after 60 quiet seconds).
        on_helper_exit: Awaited (coalesced, at most ``NOTIFY_TIMEOUT`` (5) seconds
            each time) after a ready helper incarnation ended or the pool restarted.

    Raises:
        ValueError: ``max_jobs`` is not an int in ``[1, 4096]``, ``on_failure`` is
            unknown, or ``on_failure`` is not ``"hold"`` while ``config.restart`` is set
            (the pool's own restart policy, design §3.15).
    """

    name = "pool"

    def __init__(
        self,
        spec: HelperSpec,
        config: PoolConfig | None = None,
        *,
        max_jobs: int = 64,
        events: PoolEvents | None = None,
        on_failure: str = "hold",
        recovery: Backoff | None = None,
        on_helper_exit: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        if on_failure not in ON_FAILURE:
            raise ValueError(f"on_failure must be one of {ON_FAILURE}, got {on_failure!r}")
        if on_failure != "hold" and config is not None and config.restart is not None:
            # Two restart policies would race for the same failed pool.
            raise ValueError(
                f"on_failure={on_failure!r} and config.restart are two restart policies; give one"
            )
        self.spec = spec
        self.config = PoolConfig() if config is None else config
        self.max_jobs = validate_count("max_jobs", max_jobs, minimum=1, maximum=4096)
        self.events = events if events is not None else PoolEvents(spec.name)
        self.on_failure = on_failure
        self._recovery = recovery or _default_recovery()
        self._notify = on_helper_exit
        self._pool: HelperPool | None = None
        self._running: set[Hashable] = set()
        self._lease: PoolLease | None = None
        self._exit_seen = trio.Event()
        self._services: list[trio.CancelScope] = []  # the failure watch, the notifier

    async def run(
        self, *, task_status: trio.TaskStatus[ActorRef] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Open the pool, then run the actor; close the pool when it stops (design §3.8).

        ``task_status.started(ref)`` comes once every (eager) helper is ready. When
        ``run`` returns, no helper process and no zombie remains.

        Raises:
            HelperStartupFailed: (code ``helper_startup_failed``) an eager helper did
                not start; ``HelperExited`` (code ``helper_exited``) likewise.
            PoolFailed: (code ``pool_failed``) with ``on_failure="escalate"``: the
                pool's restart intensity was exceeded.
            RuntimeError: this instance already ran.
        """
        if self._pool is not None:
            raise RuntimeError(f"actor {self.name!r} already ran; make a new instance")
        async with open_helper_pool(self.spec, self.config, events=self.events) as pool:
            pool.recovering = self.on_failure != "hold" or self.config.restart is not None
            pool.on_helper_exit = self._helper_exited
            self._pool = pool
            if self.events.pools_opened > 1:
                self._exit_seen.set()  # a pool again: every old incarnation has ended
            await super().run(task_status=task_status)

    async def on_start(self) -> None:
        """Make the lease; start the failure watch and the notifier (§1.7, §4.8)."""
        self._lease = PoolLease(
            self.ref, self.pool, max_jobs=self.max_jobs, escalates=self.on_failure == "escalate"
        )
        if self.on_failure != "hold":
            self.nursery.start_soon(self._service, self._watch_failure)
        if self._notify is not None:
            self.nursery.start_soon(self._service, self._notify_exits)

    @enable_ki_protection
    async def on_drained(self) -> None:
        """Shut the idle helpers down, give running jobs the stop's grace, then let the
        pool close (design §3.8).

        The idle helpers go first, while jobs (of the direct path too) run on: a hung
        job's cancel ladder and the idle helpers' shutdown run side by side.
        """
        if self._pool is not None:
            await self._pool.retire_idle()
        lease = self._lease
        while lease is not None and lease.in_flight:
            lease.idle = trio.Event()
            await lease.idle.wait()
        for scope in self._services:
            scope.cancel()

    @enable_ki_protection
    async def on_stop(self) -> None:
        """Close the pool before the actor reports stopped (design §3.8).

        So once ``ref.stop()`` returns, no helper process remains.
        """
        if self._pool is not None:
            # What the close had to leave alive is an event and an ERROR record
            # already; the actor's stop goes on.
            with contextlib.suppress(HelperAbandoned):
                await self._pool.aclose()

    @property
    def pool(self) -> HelperPool:
        """The pool (for in-process inspection; other actors send messages instead)."""
        if self._pool is None:
            raise RuntimeError("the pool actor is not running")
        return self._pool

    def hurry(self) -> None:
        """Skip every grace left (a second Ctrl-C, design §3.13); never waits."""
        if self._pool is not None:
            self._pool.hurry()

    async def handle(self, message: Any, reply: Reply) -> None:
        """Dispatch one message to its ``_on_...`` method (the requests of ``_requests``).

        Raises:
            InvalidCommand: (code ``invalid_command``) an unknown message, or a
                ``RunJob`` whose id is already running.
            PoolBusy: (code ``pool_busy``) ``max_jobs`` jobs are already in flight.
        """
        handler = _HANDLERS.get(type(message))
        if handler is None:
            raise InvalidCommand(
                f"the pool actor does not handle {type(message).__name__}", fields=["type"]
            )
        handler(self, message, reply)

    def _on_run_job(self, message: RunJob, reply: Reply) -> None:
        if message.job_id in self._running:
            raise InvalidCommand(f"job id {message.job_id!r} is already running", fields=["job_id"])
        lease = self._lease
        assert lease is not None
        lease.room()
        lease.in_flight += 1
        self._running.add(message.job_id)
        self.nursery.start_soon(self._run_job, message, reply)

    def _on_cancel_job(self, message: CancelJob, reply: Reply) -> None:
        reply.send(self.pool.cancel_job(message.job_id))

    def _on_get_snapshot(self, message: GetSnapshot, reply: Reply) -> None:
        reply.send(self.pool.snapshot())

    def _on_get_pool_statistics(self, message: GetPoolStatistics, reply: Reply) -> None:
        reply.send(self.pool.statistics())

    def _on_restart_pool(self, message: RestartPool, reply: Reply) -> None:
        self.nursery.start_soon(self._restart, reply)

    def _on_retire_idle(self, message: RetireIdle, reply: Reply) -> None:
        self.nursery.start_soon(self._retire_idle, reply)

    def _on_get_lease(self, message: GetLease, reply: Reply) -> None:
        reply.send(self._lease)

    @enable_ki_protection
    async def _run_job(self, message: RunJob, reply: Reply) -> None:
        try:
            result = await self.pool.run_job(
                message.operation,
                message.payload,
                job_id=message.job_id,
                on_progress=message.on_progress,
                stall=message.stall,
            )
        except ActorError as exc:
            reply.fail(exc)
        except (ValueError, TypeError) as exc:  # one job's bad arguments stay its own
            reply.fail(InvalidCommand(f"the job could not run: {exc}", fields=["payload"]))
        else:
            reply.send(result)
        finally:
            self._running.discard(message.job_id)
            assert self._lease is not None
            self._lease.ended()

    @enable_ki_protection
    async def _restart(self, reply: Reply) -> None:
        try:
            await self.pool.restart()
        except ActorError as exc:
            reply.fail(exc)
        else:
            reply.send(None)
            self._exit_seen.set()

    async def _retire_idle(self, reply: Reply) -> None:
        await self.pool.retire_idle()  # shielded, bounded by shutdown + terminate + kill
        reply.send(None)

    def _helper_exited(self) -> None:
        self._exit_seen.set()

    async def _service(self, fn: Callable[[], Awaitable[None]]) -> None:
        scope = trio.CancelScope()
        self._services.append(scope)
        with scope:
            await fn()

    @enable_ki_protection
    async def _watch_failure(self) -> None:
        pool = self.pool
        if self.on_failure == "restart":
            # The pool's own restarter: the same events, logs and backoff as
            # ``PoolConfig(restart=...)`` (design §3.15); each restart tells
            # ``on_helper_exit`` too.
            await restart_when_failed(pool, self._recovery, on_restarted=self._helper_exited)
            return
        await pool.wait_failed()
        # The actor fails; its supervisor restarts it (design §1.7).
        raise PoolFailed(
            f"pool {self.spec.name!r} exceeded its restart intensity "
            f"({self.config.max_restarts} within {self.config.restart_period:g} s)",
            max_restarts=self.config.max_restarts,
            period=self.config.restart_period,
        )

    @enable_ki_protection
    async def _notify_exits(self) -> None:
        assert self._notify is not None
        while True:
            await self._exit_seen.wait()
            self._exit_seen = trio.Event()
            with trio.move_on_after(NOTIFY_TIMEOUT):
                try:
                    await self._notify()
                except ActorError as exc:
                    _log.warning(
                        "pool %r: telling of an ended helper failed: %s",
                        self.spec.name,
                        exc,
                        extra={"pool": self.spec.name, "code": exc.code},
                    )
                except Exception as exc:  # the embedder's callback: logged, never fatal
                    _log.error(
                        "pool %r: on_helper_exit raised %r",
                        self.spec.name,
                        exc,
                        exc_info=exc,
                        extra={"pool": self.spec.name, "code": "callback_failed"},
                    )


#: Message class → the pool actor's method that answers it, one per declared request.
_HANDLERS: Final[dict[type[Any], Callable[[PoolActor, Any, Reply], None]]] = {
    request.message: getattr(PoolActor, handler_name(request.message)) for request in POOL_REQUESTS
}
