"""A pool of N helper processes, each running at most one job at a time (SPEC §3).

Use :func:`open_helper_pool`::

    spec = HelperSpec(entry="my_pkg.helper:main")
    async with open_helper_pool(spec, size=2, timeouts=HelperTimeouts(reply=5)) as pool:
        result = await pool.run_job("metadata", {"run_id": 3})

Each pool slot holds one helper incarnation at a time. A job takes a free slot (waiting
at most ``acquire_timeout`` seconds), spawns a fresh incarnation there if the slot has
none or its helper died (SPEC §3.7), runs the job, and gives the slot back. A slot whose
helper is quarantined (SPEC §3.5 step 4) is given back only once the helper is reaped, so
no replacement is spawned before that. Replacements count against the restart intensity
(SPEC §1.4): more than ``max_restarts`` within ``restart_period`` seconds and the pool
fails every job with :class:`~actors.errors.PoolFailed` until :meth:`HelperPool.restart`.
A failed job is never replayed (SPEC §3.4).
"""

from __future__ import annotations

import contextlib
import functools
from collections import deque
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ._config import count_field, duration_field
from ._helper_process import HelperProcess
from ._helper_spec import HelperSnapshot, HelperSpec, HelperTimeouts
from .errors import (
    ActorError,
    ForcedTermination,
    HelperError,
    JobCancelled,
    PoolBusy,
    PoolClosed,
    PoolFailed,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Hashable

__all__ = ["HelperPool", "PoolConfig", "PoolSnapshot", "PoolStatistics", "open_helper_pool"]


@attrs.frozen(kw_only=True)
class PoolConfig:
    """How many helpers, their deadlines, and the restart intensity (SPEC §3.1, §1.4).

    Durations are seconds on trio's clock, validated at construction (SPEC §1.6).

    Raises:
        ValueError: a field is out of range; the message names it.
    """

    size: int = count_field(1, minimum=1, maximum=256)
    """Number of helpers (N), each running at most one job at a time."""
    timeouts: HelperTimeouts = attrs.field(
        factory=HelperTimeouts, validator=attrs.validators.instance_of(HelperTimeouts)
    )
    """Every helper deadline (SPEC §3.2)."""
    max_restarts: int = count_field(5, minimum=0)
    """Replacements allowed within ``restart_period`` before the pool fails."""
    restart_period: float = duration_field(10.0, allow_zero=False)
    """Sliding window of the restart intensity, in seconds."""
    acquire_timeout: float = duration_field(10.0)
    """Longest a job waits for a free helper, in seconds."""
    eager: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
    """Spawn every helper when the pool opens (startup errors surface at once); if
    False, a slot spawns its helper at its first job."""


@attrs.frozen(kw_only=True)
class PoolSnapshot:
    """The pool's liveness, taken without waiting (SPEC §3.8)."""

    size: int
    """Number of slots."""
    closing: bool
    """Close has begun: no new job is accepted."""
    closed: bool
    """Close has finished: every helper is reaped (or was given up on)."""
    failed: bool
    """Restart intensity was exceeded; jobs fail with ``PoolFailed`` until restarted."""
    helpers: tuple[HelperSnapshot | None, ...]
    """Per slot: its current (or last) incarnation, None if it never had one."""


@attrs.frozen(kw_only=True)
class PoolStatistics:
    """Counters of a :class:`HelperPool` (STYLE rule 16)."""

    size: int
    """Number of slots."""
    idle: int
    """Slots free for a job."""
    busy: int
    """Jobs holding a slot."""
    waiting: int
    """Jobs waiting for a free slot."""
    jobs_started: int
    """Jobs sent to a helper."""
    jobs_succeeded: int
    """Jobs that returned a result."""
    jobs_failed: int
    """Jobs that raised an error other than cancellation."""
    jobs_cancelled: int
    """Jobs cancelled by their caller, by ``cancel_job`` or by close."""
    spawns: int
    """Helper processes started."""
    restarts: int
    """Spawns that replaced an earlier incarnation (counted for restart intensity)."""


@attrs.define(eq=False)
class _Slot:
    index: int
    helper: HelperProcess | None = None
    incarnation: int = 0
    spawned: bool = False  # a first incarnation exists since open/restart()
    epoch: int = 0
    held: bool = False  # kept out of the free channel until its helper is reaped


class HelperPool:
    """N supervised helper processes (SPEC §3). Create with :func:`open_helper_pool`."""

    def __init__(self, spec: HelperSpec, config: PoolConfig, nursery: trio.Nursery) -> None:
        self.spec = spec
        self.config = config
        self._nursery = nursery
        self._slots = [_Slot(index) for index in range(config.size)]
        self._free_send, self._free_receive = trio.open_memory_channel[_Slot](config.size)
        for slot in self._slots:
            self._free_send.send_nowait(slot)
        self._jobs: dict[Hashable, trio.CancelScope] = {}
        self._no_jobs: trio.Event | None = None
        self._restart_times: deque[float] = deque()
        self._epoch = 0
        self._failed = False
        self._closing = False
        self._closed = False
        self._closed_event = trio.Event()
        self._counts = dict.fromkeys(
            ("started", "succeeded", "failed", "cancelled", "spawns", "restarts"), 0
        )

    # --- jobs -----------------------------------------------------------------------

    async def run_job(
        self, operation: str, payload: Any = None, *, job_id: Hashable | None = None
    ) -> Any:
        """Run one job on a free helper and return its result (SPEC §3.4-3.7).

        Args:
            operation: The handler's name.
            payload: JSON-compatible arguments (at most ``spec.max_request`` bytes of
                JSON).
            job_id: Optional key for :meth:`cancel_job`; unique among running jobs.

        Returns:
            The handler's JSON result.

        Cancellation:
            Cancelling the caller runs the escalation ladder of SPEC §3.5 for this job
            only (shielded, at most ``cancel_grace + terminate + kill`` seconds), then
            ``trio.Cancelled`` propagates.

        Raises:
            PoolClosed: (code ``pool_closed``) the pool is closing, or closed while the
                job ran.
            PoolFailed: (code ``pool_failed``) restart intensity was exceeded (SPEC
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
            ProtocolViolation: (code ``protocol_violation``) the reply broke the
                envelope rules; the helper was killed.
            FrameTooLarge: (code ``frame_too_large``) the job or its reply is over the
                size limit.
            HelperJobFailed: (the handler's code) the handler reported an error.
            ValueError: ``job_id`` is already running.
        """
        self._check_accepting()
        key: Hashable = object() if job_id is None else job_id
        if key in self._jobs:
            raise ValueError(f"job id {job_id!r} is already running")
        scope = trio.CancelScope()
        self._jobs[key] = scope
        helper: HelperProcess | None = None
        try:
            with scope:
                slot = await self._acquire()
                try:
                    helper = await self._ready_helper(slot)
                    self._counts["started"] += 1
                    result = await helper.run_job(operation, payload)
                except ActorError:
                    self._counts["failed"] += 1
                    raise
                except trio.Cancelled:
                    self._counts["cancelled"] += 1
                    raise
                finally:
                    self._release(slot)
                self._counts["succeeded"] += 1
                return result
            # Only reached when ``scope`` itself was cancelled: cancel_job() or close.
            if self._closing:
                raise PoolClosed(f"the pool closed while job {operation!r} ran")
            escalation = None if helper is None else helper.last_escalation
            if escalation in ("sigkill", "quarantined"):
                raise ForcedTermination(
                    f"job {operation!r} was cancelled; its helper was stopped by {escalation}",
                    escalation=escalation,
                    parent_timeout=False,
                )
            raise JobCancelled(f"job {operation!r} was cancelled", escalation=escalation)
        finally:
            del self._jobs[key]
            if not self._jobs and self._no_jobs is not None:
                self._no_jobs.set()

    def cancel_job(self, job_id: Hashable) -> bool:
        """Cancel the running job ``job_id``; never waits (SPEC §3.5).

        The job's own task runs the escalation ladder and raises
        :class:`~actors.errors.JobCancelled` (or ``ForcedTermination``).

        Returns:
            True if such a job was running.
        """
        scope = self._jobs.get(job_id)
        if scope is None:
            return False
        scope.cancel()
        return True

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
        try:
            slot = self._free_receive.receive_nowait()
        except trio.WouldBlock:
            slot = await self._wait_for_slot()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise PoolClosed("the helper pool is closed") from None
        try:
            self._check_accepting()
        except ActorError:
            self._release(slot)
            raise
        return slot

    async def _wait_for_slot(self) -> _Slot:
        with trio.move_on_after(self.config.acquire_timeout):
            try:
                return await self._free_receive.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                raise PoolClosed("the helper pool is closed") from None
        raise PoolBusy(
            f"no helper became free within {self.config.acquire_timeout:g} s",
            size=self.config.size,
        )

    def _release(self, slot: _Slot) -> None:
        helper = slot.helper
        if helper is not None and helper.quarantined:
            slot.held = True  # SPEC §3.5 step 4: back in the pool only once reaped
            return
        with contextlib.suppress(trio.ClosedResourceError):  # a reap after close
            self._free_send.send_nowait(slot)

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
        self._counts["spawns"] += 1
        await helper.start(self._nursery)
        return helper

    def _note_restart(self) -> None:
        """Count one replacement; fail the pool past the intensity (SPEC §1.4, §3.7)."""
        now = trio.current_time()
        window = self._restart_times
        while window and window[0] <= now - self.config.restart_period:
            window.popleft()
        window.append(now)
        self._counts["restarts"] += 1
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
        channel = self._free_receive.statistics()
        return PoolStatistics(
            size=self.config.size,
            idle=channel.current_buffer_used,
            busy=sum(1 for slot in self._slots if slot.helper is not None and slot.helper.busy),
            waiting=channel.tasks_waiting_receive,
            jobs_started=self._counts["started"],
            jobs_succeeded=self._counts["succeeded"],
            jobs_failed=self._counts["failed"],
            jobs_cancelled=self._counts["cancelled"],
            spawns=self._counts["spawns"],
            restarts=self._counts["restarts"],
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
        """Clear a failed state and start over with fresh incarnations (SPEC §3.7).

        Resets the restart-intensity window. Idle helpers are retired now (shutdown,
        then escalation) and, if the pool is eager, replaced at once; busy helpers are
        retired when they are next acquired. Results tied to old incarnations are the
        caller's to discard (SPEC §4.8 ``helper_restarted``).

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
        idle: list[_Slot] = []
        while True:
            try:
                idle.append(self._free_receive.receive_nowait())
            except trio.WouldBlock:
                break
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
        """Close the pool now: cancel jobs, shut every helper down, reap (SPEC §3.8).

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
        timeouts = self.config.timeouts
        if self._jobs:
            self._no_jobs = trio.Event()
            for scope in self._jobs.values():
                scope.cancel()
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
        self._free_send.close()
        self._free_receive.close()


@asynccontextmanager
async def open_helper_pool(
    spec: HelperSpec, config: PoolConfig | None = None, **fields: Any
) -> AsyncIterator[HelperPool]:
    """Open a pool of helper processes; close it on exit (SPEC §3.1, §3.8).

    Args:
        spec: What each helper runs.
        config: The pool's configuration; or give its fields as keywords instead
            (``size=2, timeouts=HelperTimeouts(reply=5)``), not both.

    Yields:
        The :class:`HelperPool`.

    Entering is a checkpoint; with ``eager`` (the default) it returns once every
    helper is ready. Exiting is a checkpoint that runs shielded: it cancels running jobs
    (SPEC §3.5 ladder each), sends every helper a shutdown frame, waits up to
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
