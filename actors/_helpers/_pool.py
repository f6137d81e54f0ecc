"""A pool of N helper processes, each running at most one job at a time (design §3).

Use :func:`open_helper_pool`::

    spec = HelperSpec(entry="my_pkg.helper:main")
    async with open_helper_pool(spec, size=2, timeouts=HelperTimeouts(reply=5)) as pool:
        result = await pool.run_job("metadata", {"run_id": 3})
        # progress reports (ctx.progress in the helper) go to a sync callback:
        result = await pool.run_job("scan", {"run_id": 3}, on_progress=print)

Each pool slot holds one helper incarnation at a time. A job takes a free slot (waiting
at most ``acquire_timeout`` seconds), spawns a fresh incarnation there if the slot has
none or its helper died (design §3.7), runs the job, and gives the slot back. A slot whose
helper is quarantined (design §3.5 step 4) is given back only once the helper is reaped, so
no replacement is spawned before that. Replacements count against the restart intensity
(design §1.4): more than ``max_restarts`` within ``restart_period`` seconds and the pool
fails every job with :class:`~actors.errors.PoolFailed` until :meth:`HelperPool.restart`.
A failed job is never replayed (design §3.4).

The job path is lean on purpose (it is most of a short job's cost): with a free slot and
a ready helper a job takes no lock, opens one cancel scope (the reply deadline), spawns
no task, and yields only while it waits for the reply; waiting for a slot, spawning and
restarting are the slow path.
"""

from __future__ import annotations

import contextlib
import functools
from collections import deque
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..errors import (
    ActorError,
    ForcedTermination,
    HelperError,
    JobCancelled,
    PoolBusy,
    PoolClosed,
    PoolFailed,
)
from ._pool_config import PoolConfig, PoolSnapshot, PoolStatistics
from ._process import HelperProcess

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Hashable

    from ._process import ProgressCallback
    from ._spec import HelperSpec

__all__ = ["HelperPool", "PoolConfig", "PoolSnapshot", "PoolStatistics", "open_helper_pool"]


@attrs.define(eq=False)
class _Slot:
    index: int
    helper: HelperProcess | None = None
    incarnation: int = 0
    spawned: bool = False  # a first incarnation exists since open/restart()
    epoch: int = 0
    held: bool = False  # kept out of the free channel until its helper is reaped


class _Job:
    """A running job's registration: what :meth:`HelperPool.cancel_job` must reach."""

    __slots__ = ("cancelled", "helper", "scope")

    def __init__(self) -> None:
        self.cancelled = False
        #: The helper running it, once the job frame may be out.
        self.helper: HelperProcess | None = None
        #: The scope of the slow path (waiting for a slot, spawning), while it runs.
        self.scope: trio.CancelScope | None = None


class _Waiter:
    """A job waiting for a free slot; :meth:`HelperPool._release` hands one over."""

    __slots__ = ("event", "slot")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.slot: _Slot | None = None


class HelperPool:
    """N supervised helper processes (design §3). Create with :func:`open_helper_pool`."""

    def __init__(self, spec: HelperSpec, config: PoolConfig, nursery: trio.Nursery) -> None:
        self.spec = spec
        self.config = config
        self._nursery = nursery
        self._slots = [_Slot(index) for index in range(config.size)]
        # Free slots and the jobs waiting for one (FIFO; a released slot goes to the
        # first waiter directly). Bounded by construction: at most ``size`` slots.
        self._free: deque[_Slot] = deque(self._slots)
        self._waiters: deque[_Waiter] = deque()
        self._jobs: dict[Hashable, _Job] = {}
        self._no_jobs: trio.Event | None = None
        self._restart_times: deque[float] = deque()
        self._epoch = 0
        self._failed = False
        self._closing = False
        self._closed = False
        self._closed_event = trio.Event()
        self._started = self._succeeded = self._failures = self._cancelled = 0
        self._spawns = self._restarts = 0

    # --- jobs -----------------------------------------------------------------------

    async def run_job(
        self,
        operation: str,
        payload: Any = None,
        *,
        job_id: Hashable | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """Run one job on a free helper and return its result (design §3.4-3.7).

        Args:
            operation: The handler's name.
            payload: JSON-compatible arguments (at most ``spec.max_request`` bytes of
                JSON).
            job_id: Optional key for :meth:`cancel_job`; unique among running jobs.
            on_progress: Optional ``on_progress(fraction, note)``, called for each
                progress report of the job (``ctx.progress`` in the helper; ``fraction``
                a float in ``[0, 1]``, ``note`` a str or None). It is called
                synchronously on the event loop, in this task, and must not block; an
                exception from it is logged and ignored, never fails the job.

        Returns:
            The handler's JSON result.

        Cancellation:
            Cancelling the caller runs the escalation ladder of design §3.5 for this job
            only (shielded, at most ``cancel_grace + terminate + kill`` seconds), then
            ``trio.Cancelled`` propagates.

        Raises:
            PoolClosed: (code ``pool_closed``) the pool is closing, or closed while the
                job ran.
            PoolFailed: (code ``pool_failed``) restart intensity was exceeded (design
                §3.7); nothing runs until :meth:`restart`.
            PoolBusy: (code ``pool_busy``) no helper was free within
                ``acquire_timeout`` seconds.
            JobCancelled: (code ``cancelled``) :meth:`cancel_job` cancelled it and the
                helper stopped without SIGKILL.
            ForcedTermination: (code ``forced_termination``) the job was cancelled or
                timed out and its helper had to be SIGKILLed (``details["escalation"]``).
            ReplyTimeout: (code ``reply_timeout``) no reply within ``timeouts.reply``.
            HelperStartupError: (code ``helper_startup_failed``) a fresh helper did not
                become ready.
            HelperExitedError: (code ``helper_exited``) the helper exited during the job
                (or its startup); ``details`` has ``exit_code`` and ``signal``.
            ProtocolViolation: (code ``protocol_violation``) the reply or a progress
                frame broke the envelope rules; the helper was killed.
            FrameTooLarge: (code ``frame_too_large``) the job or its reply is over the
                size limit.
            HelperJobFailed: (the handler's code) the handler reported an error.
            ValueError: ``job_id`` is already running, or ``operation`` is not a str of
                1..128 characters.
        """
        if self._closing or self._failed:
            self._check_accepting()
        job = _Job()
        key: Hashable = job if job_id is None else job_id
        jobs = self._jobs
        if key in jobs:
            raise ValueError(f"job id {job_id!r} is already running")
        jobs[key] = job
        try:
            # Fast path: a free slot with a ready helper; no scope, no extra checkpoint
            # (the helper's run_job is the checkpoint).
            slot = helper = None
            if self._free and not self._waiters:
                slot = self._free.popleft()
                helper = slot.helper
                if helper is None or not helper.usable or slot.epoch != self._epoch:
                    helper = None
            if helper is None:
                slot, helper = await self._prepare(job, slot, operation)
            assert slot is not None
            job.helper = helper
            self._started += 1
            try:
                result = await helper.run_job(operation, payload, on_progress=on_progress)
            except trio.Cancelled:
                self._cancelled += 1
                raise
            except (JobCancelled, ForcedTermination):
                if not job.cancelled:
                    self._failures += 1
                    raise
                self._cancelled += 1  # cancel_job() or close
                if self._closing:
                    raise PoolClosed(f"the pool closed while job {operation!r} ran") from None
                raise
            except ActorError:
                self._failures += 1
                raise
            finally:
                self._release(slot)
            self._succeeded += 1
            return result
        finally:
            del jobs[key]
            if not jobs and self._no_jobs is not None:
                self._no_jobs.set()

    async def _prepare(
        self, job: _Job, slot: _Slot | None, operation: str
    ) -> tuple[_Slot, HelperProcess]:
        """The slow path: wait for a slot and (re)spawn its helper, cancellable by
        :meth:`cancel_job` and close."""
        scope = job.scope = trio.CancelScope()
        with scope:
            if slot is None:
                slot = await self._acquire()
            try:
                helper = await self._ready_helper(slot)
            except ActorError:
                self._failures += 1
                self._release(slot)
                raise
            except BaseException:
                self._release(slot)
                raise
            job.scope = None
            return slot, helper
        job.scope = None
        # Only reached when ``scope`` itself was cancelled: cancel_job() or close.
        self._cancelled += 1
        if self._closing:
            raise PoolClosed(f"the pool closed while job {operation!r} waited")
        raise JobCancelled(f"job {operation!r} was cancelled", escalation=None)

    def cancel_job(self, job_id: Hashable) -> bool:
        """Cancel the running job ``job_id``; never waits (design §3.5).

        The job's own task runs the escalation ladder and raises
        :class:`~actors.errors.JobCancelled` (or ``ForcedTermination``).

        Returns:
            True if such a job was running.
        """
        job = self._jobs.get(job_id)
        if job is None:
            return False
        self._cancel(job)
        return True

    @staticmethod
    def _cancel(job: _Job) -> None:
        job.cancelled = True
        if job.scope is not None:
            job.scope.cancel()
        if job.helper is not None:
            job.helper.cancel()

    def _check_accepting(self) -> None:
        if self._closing:
            raise PoolClosed("the helper pool is closing or closed")
        if self._failed:
            raise PoolFailed(
                f"more than {self.config.max_restarts} helper restarts within "
                f"{self.config.restart_period:g} s; call restart()"
            )

    async def _acquire(self) -> _Slot:
        # Not a checkpoint when a slot is free (run_job checkpoints when it writes the
        # job frame); this saves a scheduler pass per job.
        slot = self._free.popleft() if self._free and not self._waiters else None
        if slot is None:
            slot = await self._wait_for_slot()
        try:
            self._check_accepting()
        except ActorError:
            self._release(slot)
            raise
        return slot

    async def _wait_for_slot(self) -> _Slot:
        if self._closing:
            raise PoolClosed("the helper pool is closed")
        waiter = _Waiter()
        self._waiters.append(waiter)
        try:
            with trio.move_on_after(self.config.acquire_timeout):
                await waiter.event.wait()
        except BaseException:  # cancelled: hand on a slot given to us meanwhile
            self._forget(waiter)
            raise
        slot = waiter.slot
        if slot is not None:
            return slot
        self._forget(waiter)
        if self._closing:
            raise PoolClosed("the helper pool closed while the job waited")
        raise PoolBusy(
            f"no helper became free within {self.config.acquire_timeout:g} s",
            size=self.config.size,
        )

    def _forget(self, waiter: _Waiter) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)
        slot, waiter.slot = waiter.slot, None
        if slot is not None:
            self._release(slot)

    def _release(self, slot: _Slot) -> None:
        helper = slot.helper
        if helper is not None and helper.quarantined:
            slot.held = True  # design §3.5 step 4: back in the pool only once reaped
            return
        if self._closed:
            return
        if self._waiters:
            waiter = self._waiters.popleft()
            waiter.slot = slot
            waiter.event.set()
        else:
            self._free.append(slot)

    def _on_exit(self, slot: _Slot, helper: HelperProcess) -> None:
        if slot.held and slot.helper is helper:
            slot.held = False
            self._release(slot)

    async def _ready_helper(self, slot: _Slot) -> HelperProcess:
        """Return the slot's usable helper, retiring and (re)spawning as needed."""
        helper = slot.helper
        if helper is not None and helper.usable and slot.epoch == self._epoch:
            return helper
        if helper is not None:
            if not helper.exited:
                with trio.CancelScope(shield=True):
                    await helper.shutdown()
            if not helper.exited:  # pragma: no cover (needs an unkillable process)
                raise ForcedTermination(
                    f"{helper.label} could not be retired; it is quarantined",
                    escalation="quarantined",
                    parent_timeout=False,
                )
            helper.discard()
            slot.helper = None
        if slot.spawned:
            self._note_restart()
        slot.spawned = True
        slot.incarnation += 1
        slot.epoch = self._epoch
        helper = HelperProcess(
            self.spec,
            self.config.timeouts,
            incarnation=slot.incarnation,
            label=f"{self.spec.name}#{slot.index}.{slot.incarnation}",
            on_exit=functools.partial(self._on_exit, slot),
        )
        slot.helper = helper
        self._spawns += 1
        await helper.start(self._nursery)
        return helper

    def _note_restart(self) -> None:
        """Count one replacement; fail the pool past the intensity (design §1.4, §3.7)."""
        now = trio.current_time()
        window = self._restart_times
        while window and window[0] <= now - self.config.restart_period:
            window.popleft()
        window.append(now)
        self._restarts += 1
        if len(window) > self.config.max_restarts:
            self._failed = True
            raise PoolFailed(
                f"more than {self.config.max_restarts} helper restarts within "
                f"{self.config.restart_period:g} s; call restart()",
                restarts=len(window),
                period=self.config.restart_period,
            )

    # --- state ----------------------------------------------------------------------

    def snapshot(self) -> PoolSnapshot:
        """Return every helper's liveness and the pool's state, without waiting (§3.8)."""
        return PoolSnapshot(
            size=self.config.size,
            closing=self._closing,
            closed=self._closed,
            failed=self._failed,
            helpers=tuple(
                None if slot.helper is None else slot.helper.snapshot() for slot in self._slots
            ),
        )

    def statistics(self) -> PoolStatistics:
        """Return the pool's counters (never waits)."""
        return PoolStatistics(
            size=self.config.size,
            idle=len(self._free),
            busy=sum(1 for slot in self._slots if slot.helper is not None and slot.helper.busy),
            waiting=len(self._waiters),
            jobs_started=self._started,
            jobs_succeeded=self._succeeded,
            jobs_failed=self._failures,
            jobs_cancelled=self._cancelled,
            spawns=self._spawns,
            restarts=self._restarts,
        )

    # --- open, restart, close -------------------------------------------------------

    async def _spawn_all(self, slots: list[_Slot]) -> None:
        errors: list[HelperError] = []

        async def spawn(slot: _Slot) -> None:
            try:
                await self._ready_helper(slot)
            except HelperError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            for slot in slots:
                nursery.start_soon(spawn, slot)
        if errors:
            raise errors[0]

    async def restart(self) -> None:
        """Clear a failed state and start over with fresh incarnations (design §3.7).

        Resets the restart-intensity window. Idle helpers are retired now (shutdown,
        then escalation) and, if the pool is eager, replaced at once; busy helpers are
        retired when they are next acquired. Results tied to old incarnations are the
        caller's to discard (design §4.8 ``helper_restarted``).

        Raises:
            PoolClosed: (code ``pool_closed``) the pool is closing or closed.
            HelperStartupError: (code ``helper_startup_failed``) an eager respawn
                failed; so may ``HelperExitedError`` (code ``helper_exited``).
        """
        if self._closing:
            raise PoolClosed("the helper pool is closing or closed")
        self._failed = False
        self._restart_times.clear()
        self._epoch += 1
        for slot in self._slots:
            slot.spawned = False  # the next spawn of each slot is not a restart
        idle = list(self._free)
        self._free.clear()
        try:
            if self.config.eager:
                await self._spawn_all(idle)
            else:
                async with trio.open_nursery() as nursery:
                    for slot in idle:
                        if slot.helper is not None and not slot.helper.exited:
                            nursery.start_soon(slot.helper.shutdown)
        finally:
            for slot in idle:
                self._release(slot)

    async def aclose(self) -> None:
        """Close the pool now: cancel jobs, shut every helper down, reap (design §3.8).

        Idempotent; a second caller waits for the first close to finish. Runs
        shielded, so it completes even if the caller is cancelled, and is bounded as
        described in :func:`open_helper_pool`. Leaving the ``async with`` block does
        the same; call this to close earlier (e.g. from an actor's ``on_stop``).
        """
        with trio.CancelScope(shield=True):
            if self._closing:
                await self._closed_event.wait()
                return
            try:
                await self._close()
            finally:
                self._closed_event.set()

    async def _close(self) -> None:
        self._closing = True
        for waiter in self._waiters:
            waiter.event.set()  # each finds no slot and raises PoolClosed
        timeouts = self.config.timeouts
        if self._jobs:
            self._no_jobs = trio.Event()
            for job in self._jobs.values():
                self._cancel(job)
            with trio.move_on_after(timeouts.ladder + timeouts.shutdown + 1.0):
                await self._no_jobs.wait()
        async with trio.open_nursery() as nursery:
            for slot in self._slots:
                if slot.helper is not None and not slot.helper.exited:
                    nursery.start_soon(slot.helper.shutdown)
        for slot in self._slots:
            if slot.helper is not None:
                if not slot.helper.exited:  # pragma: no cover (an unkillable process)
                    slot.helper.abandon()
                slot.helper.discard()
        self._closed = True
        self._free.clear()


@asynccontextmanager
async def open_helper_pool(
    spec: HelperSpec, config: PoolConfig | None = None, **fields: Any
) -> AsyncIterator[HelperPool]:
    """Open a pool of helper processes; close it on exit (design §3.1, §3.8).

    Args:
        spec: What each helper runs.
        config: The pool's configuration; or give its fields as keywords instead
            (``size=2, timeouts=HelperTimeouts(reply=5)``), not both.

    Yields:
        The :class:`HelperPool`.

    Entering is a checkpoint; with ``eager`` (the default) it returns once every
    helper is ready. Exiting is a checkpoint that runs shielded: it cancels running jobs
    (design §3.5 ladder each), sends every helper a shutdown frame, waits up to
    ``timeouts.shutdown`` seconds, escalates (SIGTERM, SIGKILL), and returns when every
    helper is reaped, so no child and no zombie remains; it takes at most about
    ``cancel_grace + terminate + kill + shutdown + 1`` plus ``shutdown + terminate +
    kill`` seconds.

    Raises:
        HelperStartupError: (code ``helper_startup_failed``) an eager spawn failed
            (the helpers already started are closed).
        HelperExitedError: (code ``helper_exited``) an eager helper exited in startup.
        ValueError: a configuration field is out of range.
        TypeError: both ``config`` and keyword fields were given.
    """
    if config is None:
        config = PoolConfig(**fields)
    elif fields:
        raise TypeError("give either config or its fields as keywords, not both")
    try:
        async with trio.open_nursery() as nursery:
            pool = HelperPool(spec, config, nursery)
            try:
                if config.eager:
                    await pool._spawn_all(list(pool._slots))
                yield pool
            finally:
                await pool.aclose()
    except BaseExceptionGroup as group:
        # The nursery holds only watcher tasks, which never raise: a group carries the
        # body's (or the spawn's) exception. Re-raise a lone one bare, so that
        # ``except HelperStartupError`` around the ``async with`` works.
        leaf = _sole_exception(group)
        if leaf is None:
            raise
        raise leaf from None


def _sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
        leaf = leaf.exceptions[0]
    return None if isinstance(leaf, BaseExceptionGroup) else leaf
