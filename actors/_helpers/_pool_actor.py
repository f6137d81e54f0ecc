"""The system *supervisor* actor: the helper pool behind a mailbox (design §3, intro).

Other actors talk to it only through its bounded mailbox. It owns one
:class:`~actors._helpers._pool.HelperPool`, opened around the actor's whole life (so the pool is
ready before ``nursery.start`` returns the ref, and closed, every helper reaped, before
``run`` returns). Each :class:`RunJob` runs in its own task in the actor's nursery, so
the mailbox stays responsive: a :class:`CancelJob` reaches the pool while the job runs
and triggers the escalation ladder for that job only (design §3.5).

Callers normally use :class:`PoolHandle`::

    ref = await nursery.start(PoolActor(spec, PoolConfig(size=2)).run)
    supervisor = PoolHandle(ref)
    result = await supervisor.run_job("metadata", {"run_id": 3}, timeout=15)

Progress (``ctx.progress(fraction, note)`` in the helper) reaches the caller through a
callback carried by the :class:`RunJob` message: the job's task in the supervisor's
nursery calls it for each progress frame, so progress never passes through (or blocks)
the mailbox. The callback is sync, runs on the event loop, and must not block; an
exception from it is logged and ignored.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._core._actor import Actor
from .._core._config import validate_count
from ..errors import ActorError, ActorStopped, AskTimeout, InvalidCommand, MailboxFull, PoolBusy
from ._pool import HelperPool, PoolConfig, PoolSnapshot, PoolStatistics, open_helper_pool

if TYPE_CHECKING:
    from collections.abc import Hashable

    from .._core._ref import ActorRef, Reply
    from ._process import ProgressCallback
    from ._spec import HelperSpec

__all__ = [
    "CancelJob",
    "GetSnapshot",
    "GetStatistics",
    "RestartPool",
    "RunJob",
    "PoolActor",
    "PoolHandle",
]

_job_ids = itertools.count(1)


@attrs.frozen(kw_only=True)
class RunJob:
    """Ask: run one job on a helper; the answer is its result (design §3.4)."""

    job_id: Hashable
    """Key for :class:`CancelJob`; unique among the supervisor's running jobs."""
    operation: str = attrs.field(validator=attrs.validators.instance_of(str))
    """The handler's name."""
    payload: Any = None
    """JSON-compatible arguments."""
    on_progress: ProgressCallback | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.is_callable())
    )
    """``on_progress(fraction, note)`` for the job's progress reports, or None. Called
    in the job's task in the pool actor's nursery (never in ``handle``): sync, must not
    block; an exception from it is logged and ignored (design §3.9)."""


@attrs.frozen(kw_only=True)
class CancelJob:
    """Send (or ask, answered with a bool): cancel a running job (design §3.5)."""

    job_id: Hashable
    """The :attr:`RunJob.job_id` to cancel; an unknown or finished id is ignored."""


@attrs.frozen(kw_only=True)
class GetSnapshot:
    """Ask: the pool's liveness snapshot (:class:`~actors._helpers._pool.PoolSnapshot`, §3.8)."""


@attrs.frozen(kw_only=True)
class GetStatistics:
    """Ask: the pool's counters (:class:`~actors._helpers._pool.PoolStatistics`)."""


@attrs.frozen(kw_only=True)
class RestartPool:
    """Ask: clear a failed pool and start fresh incarnations (design §3.7)."""


class PoolActor(Actor):
    """The system actor that supervises helper processes (design §3).

    Args:
        spec: What each helper runs.
        config: Pool size, timeouts and restart intensity (default :class:`PoolConfig`).
        max_jobs: Most :class:`RunJob` tasks at once (running or waiting for a helper);
            past it a ``RunJob`` fails at once with ``PoolBusy`` (code ``pool_busy``).

    Raises:
        ValueError: ``max_jobs`` is not an int in ``[1, 4096]``.
    """

    name = "pool"

    def __init__(
        self, spec: HelperSpec, config: PoolConfig | None = None, *, max_jobs: int = 64
    ) -> None:
        self.spec = spec
        self.config = PoolConfig() if config is None else config
        self.max_jobs = validate_count("max_jobs", max_jobs, minimum=1, maximum=4096)
        self._pool: HelperPool | None = None
        self._running: set[Hashable] = set()

    async def run(
        self, *, task_status: trio.TaskStatus[ActorRef] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Open the pool, then run the actor; close the pool when it stops (design §3.8).

        ``task_status.started(ref)`` comes once every (eager) helper is ready. When
        ``run`` returns, no helper process and no zombie remains.

        Raises:
            HelperStartupError: (code ``helper_startup_failed``) an eager helper did
                not start; ``HelperExitedError`` (code ``helper_exited``) likewise.
            RuntimeError: this instance already ran.
        """
        if self._pool is not None:
            raise RuntimeError(f"actor {self.name!r} already ran; make a new instance")
        async with open_helper_pool(self.spec, self.config) as pool:
            self._pool = pool
            await super().run(task_status=task_status)

    async def on_stop(self) -> None:
        """Close the pool before the actor reports stopped (design §3.8).

        So once ``ref.stop()`` returns, no helper process remains.
        """
        if self._pool is not None:
            await self._pool.aclose()

    @property
    def pool(self) -> HelperPool:
        """The pool (for in-process inspection; other actors send messages instead)."""
        if self._pool is None:
            raise RuntimeError("the pool actor is not running")
        return self._pool

    async def handle(self, message: Any, reply: Reply) -> None:
        """Dispatch one message (see the message classes of this module).

        Raises:
            InvalidCommand: (code ``invalid_command``) an unknown message, or a
                ``RunJob`` whose id is already running.
            PoolBusy: (code ``pool_busy``) ``max_jobs`` jobs are already in flight.
        """
        pool = self.pool
        if isinstance(message, RunJob):
            if message.job_id in self._running:
                raise InvalidCommand(
                    f"job id {message.job_id!r} is already running", fields=["job_id"]
                )
            if len(self._running) >= self.max_jobs:
                raise PoolBusy(f"{self.max_jobs} jobs are already in flight")
            self._running.add(message.job_id)
            self.nursery.start_soon(self._run_job, message, reply)
        elif isinstance(message, CancelJob):
            reply.send(pool.cancel_job(message.job_id))
        elif isinstance(message, GetSnapshot):
            reply.send(pool.snapshot())
        elif isinstance(message, GetStatistics):
            reply.send(pool.statistics())
        elif isinstance(message, RestartPool):
            self.nursery.start_soon(self._restart, reply)
        else:
            raise InvalidCommand(
                f"the pool actor does not handle {type(message).__name__}", fields=["type"]
            )

    async def _run_job(self, message: RunJob, reply: Reply) -> None:
        try:
            result = await self.pool.run_job(
                message.operation,
                message.payload,
                job_id=message.job_id,
                on_progress=message.on_progress,
            )
        except ActorError as exc:
            reply.fail(exc)
        else:
            reply.send(result)
        finally:
            self._running.discard(message.job_id)

    async def _restart(self, reply: Reply) -> None:
        try:
            await self.pool.restart()
        except ActorError as exc:
            reply.fail(exc)
        else:
            reply.send(None)


class _ProgressRelay:
    """Forwards progress to the caller's callback while the caller still waits."""

    __slots__ = ("callback", "live")

    def __init__(self, callback: ProgressCallback) -> None:
        self.callback = callback
        self.live = True

    def __call__(self, fraction: float, note: str | None) -> None:
        if self.live:
            self.callback(fraction, note)


class PoolHandle:
    """A thin facade over the supervisor's :class:`~actors.ActorRef` (design §3).

    Args:
        ref: The ref returned by ``nursery.start(PoolActor(...).run)``.
    """

    def __init__(self, ref: ActorRef) -> None:
        self.ref = ref

    async def run_job(
        self,
        operation: str,
        payload: Any = None,
        *,
        timeout: float,  # noqa: ASYNC109
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """Run one job and return its result, within ``timeout`` seconds (trio clock).

        If the caller is cancelled or the timeout passes, a :class:`CancelJob` is
        try-sent so the job's escalation ladder runs (design §3.5); the late result is
        dropped (ask fencing). If the mailbox is full at that moment the cancel is lost
        and the job ends at its own reply deadline (design §3.6). To see the pool's own
        ``ReplyTimeout`` rather than ``AskTimeout``, give a ``timeout`` above
        ``timeouts.reply + timeouts.ladder``.

        Args:
            operation: The handler's name.
            payload: JSON-compatible arguments.
            timeout: Longest wait for the result, in seconds (trio clock).
            on_progress: Optional ``on_progress(fraction, note)``: called for each
                progress report of the job (``fraction`` a float in ``[0, 1]``, ``note``
                a str or None), from the job's task in the pool actor's nursery. It is
                sync and must not block; an exception from it is logged and ignored.
                It is never called after this method has returned or raised.

        Raises:
            AskTimeout: (code ``ask_timeout``) no result within ``timeout``.
            ValueError: ``timeout`` is invalid (design §1.6).
            ActorStopped: (code ``actor_stopped``) the pool actor is stopped.
            ActorError: whatever the job failed with, as in
                :meth:`actors._helpers._pool.HelperPool.run_job` (``JobCancelled``,
                ``ReplyTimeout``, ``ForcedTermination``, ``HelperExitedError``,
                ``ProtocolViolation``, ``PoolFailed``, ``PoolBusy``, ...).
        """
        job_id = ("job", next(_job_ids))
        relay = None if on_progress is None else _ProgressRelay(on_progress)
        request = RunJob(job_id=job_id, operation=operation, payload=payload, on_progress=relay)
        try:
            return await self.ref.ask(request, timeout=timeout)
        except (AskTimeout, trio.Cancelled):
            self._cancel_nowait(job_id)
            raise
        finally:
            if relay is not None:
                relay.live = False

    def _cancel_nowait(self, job_id: Hashable) -> None:
        with contextlib.suppress(MailboxFull, ActorStopped):
            self.ref.try_send(CancelJob(job_id=job_id))

    async def cancel_job(self, job_id: Hashable, *, timeout: float = 5.0) -> bool:  # noqa: ASYNC109
        """Cancel a job by id; True if it was running. ``timeout`` in seconds.

        Raises:
            AskTimeout: (code ``ask_timeout``) no answer within ``timeout``.
            ActorStopped: (code ``actor_stopped``) the pool actor is stopped.
        """
        result: bool = await self.ref.ask(CancelJob(job_id=job_id), timeout=timeout)
        return result

    async def snapshot(self, *, timeout: float = 5.0) -> PoolSnapshot:  # noqa: ASYNC109
        """Return the pool's liveness snapshot (design §3.8); ``timeout`` in seconds.

        Raises:
            AskTimeout: (code ``ask_timeout``) no answer within ``timeout``.
            ActorStopped: (code ``actor_stopped``) the pool actor is stopped.
        """
        result: PoolSnapshot = await self.ref.ask(GetSnapshot(), timeout=timeout)
        return result

    async def statistics(self, *, timeout: float = 5.0) -> PoolStatistics:  # noqa: ASYNC109
        """Return the pool's counters; ``timeout`` in seconds.

        Raises:
            AskTimeout: (code ``ask_timeout``) no answer within ``timeout``.
            ActorStopped: (code ``actor_stopped``) the pool actor is stopped.
        """
        result: PoolStatistics = await self.ref.ask(GetStatistics(), timeout=timeout)
        return result

    async def restart(self, *, timeout: float = 30.0) -> None:  # noqa: ASYNC109
        """Restart the pool (design §3.7); ``timeout`` in seconds.

        Raises:
            AskTimeout: (code ``ask_timeout``) not done within ``timeout``.
            PoolClosed: (code ``pool_closed``) the pool is closing.
            HelperStartupError: (code ``helper_startup_failed``) an eager respawn failed.
        """
        await self.ref.ask(RestartPool(), timeout=timeout)
