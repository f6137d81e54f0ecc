"""A pool of N helper processes, each running at most one job at a time (design §3).

Use :func:`~actors.open_helper_pool`::

    spec = HelperSpec(entry="my_pkg.helper:main")
    async with open_helper_pool(spec, size=2, timeouts=HelperTimeouts(reply=5)) as pool:
        result = await pool.run_job("scan", {"run_id": 3}, on_progress=print)
        summary = await pool.run_job("summary", 3, expect=dict)  # typed: dict

Each pool slot holds one helper incarnation at a time. A job takes a free slot (waiting
at most ``acquire_timeout`` seconds), spawns a fresh incarnation there if the slot has
none or its helper died (design §3.7), runs the job, and gives the slot back. A slot whose
helper is quarantined (design §3.5 step 4) is given back only once the helper is gone, so
no replacement is spawned before that. Replacements count against the restart intensity
(design §1.4; §3.7: not those the ladder caused for a caller): more than ``max_restarts``
within ``restart_period`` seconds and the pool fails every job with ``PoolFailed`` until
:meth:`HelperPool.restart` (or, under a supervisor that restarts it, with the transient
``PoolRestarting``). A failed job is never replayed (design §3.4).

The job path is lean on purpose (it is most of a short job's cost): with a free slot and
a ready helper a job takes no lock, allocates nothing of its own (unless it has a
``job_id``), opens a cancel scope only if it must wait for the reply, spawns no task,
builds no event unless someone listens, and yields only while it waits for the reply;
waiting for a slot, spawning and restarting are the slow path.
"""

from __future__ import annotations

import contextlib
import math
from collections import deque
from typing import TYPE_CHECKING, Any, Final, TypeVar, overload

import trio
from trio.lowlevel import enable_ki_protection

from ..._core import validate_duration
from ...errors import (
    ActorError,
    DeadlineExceeded,
    ForcedTermination,
    HelperAbandoned,
    HelperError,
    JobCancelled,
    PoolBusy,
    PoolClosed,
    PoolFailed,
    PoolRestarting,
)
from .._events import PoolEvents
from .._process import Zygote, available_mode, start_method
from ._calls import pool_map, pool_run_sync
from ._config import PoolConfig, PoolSnapshot, PoolStatistics
from ._spawner import Slot, Spawner

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable

    from .._process import HelperProcess, HelperSpec, ProgressCallback

__all__ = ["HelperPool", "PoolConfig", "PoolSnapshot", "PoolStatistics", "expected"]

_INF: Final = math.inf
T = TypeVar("T")


class PoolJob:
    """A job :meth:`HelperPool.cancel_job` or the close must reach off the fast path."""

    __slots__ = ("cancelled", "helper", "scope")

    def __init__(self) -> None:
        self.cancelled = False
        #: The helper running it, once the job frame may be out.
        self.helper: HelperProcess | None = None
        #: The scope of the slow path (waiting for a slot, spawning), while it runs.
        self.scope: trio.CancelScope | None = None


class SlotWaiter:
    """A job waiting for a free slot; ``HelperPool._release`` hands one over."""

    __slots__ = ("event", "slot")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.slot: Slot | None = None


@enable_ki_protection
async def close_helper(helper: HelperProcess, bound: float) -> None:
    """The close's end of one helper (design §3.8): wait up to ``bound`` seconds (trio's
    clock) for its job to stop (its ladder), then shut it down if it is still there."""
    with trio.move_on_after(bound):
        await helper.wait_job_done()
    if not helper.exited:
        await helper.shutdown()


def expected(result: Any, expect: type[T], operation: str) -> T:
    """``result`` if it is an instance of ``expect`` (``run_job(..., expect=)``).

    Raises:
        TypeError: it is not; the message names the operation and both types.
    """
    if isinstance(result, expect):
        return result
    raise TypeError(
        f"job {operation!r} returned {type(result).__name__}, not {expect.__name__} (expect=)"
    )


class HelperPool:
    """N supervised helper processes (design §3). Create with :func:`open_helper_pool`.

    Attributes:
        events: The pool's :class:`~actors.PoolEvents` (design §3.10).
        recovering: Set by a supervisor that restarts the pool when it fails: the
            failure then reads ``PoolRestarting`` (transient) instead of ``PoolFailed``.
    """

    def __init__(
        self,
        spec: HelperSpec,
        config: PoolConfig,
        nursery: trio.Nursery,
        *,
        events: PoolEvents | None = None,
    ) -> None:
        self.spec = spec
        self.config = config
        self.events = events if events is not None else PoolEvents(spec.name)
        self.recovering = False
        #: Called (sync, never waits) when an incarnation that had been ready has
        #: exited, but not during the close; the pool actor tells the scheduler (§4.8).
        self.on_helper_exit: Callable[[], None] | None = None
        self.containment = available_mode(spec.containment)
        #: The fork server its helpers start from (design §3.17), or None: spawned.
        self.zygote = (
            Zygote(spec, config.timeouts, self.events, nursery)
            if start_method(spec) == "zygote"
            else None
        )
        self._nursery = nursery
        self._slots = [Slot(index) for index in range(config.size)]
        # Free slots and the jobs waiting for one (FIFO; a released slot goes to the
        # first waiter directly). Bounded by construction: at most ``size`` slots.
        self._free: deque[Slot] = deque(self._slots)
        self._waiters: deque[SlotWaiter] = deque()
        self._jobs: dict[Hashable, PoolJob] = {}  # jobs with an id
        self._slow: set[PoolJob] = set()  # jobs waiting for a slot or a spawn
        self._no_jobs: trio.Event | None = None
        self._epoch = 0
        self._failed = False
        self._failed_event = trio.Event()
        self._closing = False
        self._retiring, self._retired = False, trio.Event()  # retire_idle() began, ended
        self._closed = False
        self._closed_event = trio.Event()
        self._succeeded = self._failures = self._cancelled = 0
        self._spawner = Spawner(
            self, nursery, epoch=lambda: self._epoch, closing=lambda: self._closing,
            closed_error=self._closed_error, on_exit=self._on_exit, release=self._release,
            fail=self._fail,
        )  # fmt: skip

    # --- jobs -----------------------------------------------------------------------

    run_sync = pool_run_sync  # any importable function, by reference (design §3.14)
    map = pool_map

    def _count_call_failed(self) -> None:  # a run_sync call whose function raised
        self._succeeded, self._failures = self._succeeded - 1, self._failures + 1

    @overload
    async def run_job(
        self, operation: str, payload: Any = None, *, job_id: Hashable | None = None,
        on_progress: ProgressCallback | None = None, deadline: float = _INF,
        stall: float | None = None, expect: None = None,
    ) -> Any: ...  # fmt: skip
    @overload
    async def run_job(
        self, operation: str, payload: Any = None, *, job_id: Hashable | None = None,
        on_progress: ProgressCallback | None = None, deadline: float = _INF,
        stall: float | None = None, expect: type[T],
    ) -> T: ...  # fmt: skip
    @enable_ki_protection
    async def run_job(
        self,
        operation: str,
        payload: Any = None,
        *,
        job_id: Hashable | None = None,
        on_progress: ProgressCallback | None = None,
        deadline: float = _INF,
        stall: float | None = None,
        expect: type[T] | None = None,
    ) -> Any:
        """Run one job on a free helper and return its result (design §3.4-3.7).

        Args:
            operation: The handler's name.
            payload: JSON-compatible arguments (at most ``spec.max_request`` bytes).
            job_id: Optional key for :meth:`cancel_job`; unique among running jobs.
            on_progress: Optional ``on_progress(fraction, note)`` per progress report
                (``fraction`` in ``[0, 1]``, ``note`` a str or None; a report sent with
                bytes adds them, ``on_progress(fraction, note, data)``, design §2.3):
                sync, on the event loop in this task, must not block; what it raises is
                logged and ignored.
            deadline: Absolute deadline of the whole job (waiting for a slot included),
                in seconds on trio's clock; none by default.
            stall: Seconds the job may go without a progress report before it is
                stopped (design §3.12); none by default. Each progress frame of the
                job resets it; so does a write to stderr if the spec's
                ``stderr_is_activity`` is set; nothing else does.
            expect: The type the result must be (e.g. ``dict``), checked with
                ``isinstance``; type checkers then see it as the return type.

        Returns:
            The handler's JSON result (of type ``expect``, when given); a
            :class:`~protocol.envelope.Blob` (its ``data`` a read-only ``memoryview``)
            when the handler returned bytes (design §2.3).

        Cancellation:
            Cancelling the caller runs this job's ladder (design §3.5; shielded, at most
            ``cancel_grace + terminate + kill`` seconds), then ``trio.Cancelled``.

        Raises:
            PoolClosed: (code ``pool_closed``) the pool is closing, or closed meanwhile.
            PoolFailed: (code ``pool_failed``) restart intensity exceeded (§3.7).
            PoolRestarting: (code ``pool_restarting``) failed, restarting (:attr:`recovering`).
            PoolBusy: (code ``pool_busy``) no helper free within ``acquire_timeout``.
            DeadlineExceeded: (code ``deadline_exceeded``) ``deadline`` passed; a job
                already sent was stopped through the ladder first.
            JobStalled: (code ``job_stalled``) no progress report within ``stall`` seconds.
            JobCancelled: (code ``job_cancelled``) :meth:`cancel_job` cancelled it.
            ForcedTermination: (code ``forced_termination``) cancelled or timed out, and
                its helper had to be SIGKILLed (``details["escalation"]``).
            SignalFailed: (code ``signal_failed``) the ladder could not signal the
                helper (``details``: ``pid``, ``errno``); its slot stays quarantined.
            ReplyTimeout: (code ``reply_timeout``) no reply within ``timeouts.reply``.
            HelperStartupFailed: (code ``helper_startup_failed``) no fresh helper ready.
            HelperExited: (code ``helper_exited``) the helper exited during the job
                (or its startup); ``details`` has ``exit_code`` and ``signal``.
            ProtocolViolation: (code ``protocol_violation``) a bad reply or progress
                frame; the helper was killed.
            FrameTooLarge: (code ``frame_too_large``) the job or reply is over the limit.
            JobFailed: (the handler's code) the handler reported an error.
            ValueError: a running ``job_id``, a bad ``stall``, or ``operation`` not a
                str of 1..128 characters.
            TypeError: the result is not an instance of ``expect``.
        """
        if self._closing or self._retiring or self._failed:
            self._check_accepting()
        if stall is not None:
            stall = validate_duration("stall", stall, allow_zero=False)
        free = self._free
        if free and job_id is None and not self._waiters:
            # The fast path: a free slot with a ready helper. No scope, no extra checkpoint
            # (the helper's run_job is one), nothing allocated, positional arguments.
            slot = free[0]
            helper = slot.helper
            if helper is not None and helper.idle and slot.epoch == self._epoch:
                free.popleft()
                try:
                    result = await helper.run_job(operation, payload, on_progress, deadline, stall)
                except BaseException as exc:
                    mapped = self._count_failure(exc, None, operation)
                    if mapped is not None:
                        raise mapped from None
                    raise
                finally:
                    if helper.idle and not self._waiters and not self._closed:
                        free.append(slot)  # the common case of _release
                    else:
                        self._release(slot)
                self._succeeded += 1
                return result if expect is None else expected(result, expect, operation)
        result = await self._run_slow(operation, payload, job_id, on_progress, deadline, stall)
        return result if expect is None else expected(result, expect, operation)

    async def _run_slow(
        self,
        operation: str,
        payload: Any,
        job_id: Hashable | None,
        on_progress: ProgressCallback | None,
        deadline: float,
        stall: float | None,
    ) -> Any:
        """:meth:`run_job` off the fast path: a job id, a wait, a spawn or a deadline."""
        job = PoolJob()
        if job_id is not None:
            if job_id in self._jobs:
                raise ValueError(f"job id {job_id!r} is already running")
            self._jobs[job_id] = job
        slot = None
        try:
            slot, helper = await self._prepare(job, operation, deadline)
            job.helper = helper
            try:
                result = await helper.run_job(operation, payload, on_progress, deadline, stall)
            except BaseException as exc:
                mapped = self._count_failure(exc, job, operation)
                if mapped is not None:
                    raise mapped from None
                raise
            self._succeeded += 1
            return result
        finally:
            if job_id is not None:
                del self._jobs[job_id]
            if slot is not None:
                self._release(slot)

    def _count_failure(
        self, exc: BaseException, job: PoolJob | None, operation: str
    ) -> BaseException | None:
        """Count a job that raised ``exc``; return what to raise instead, if anything."""
        if isinstance(exc, JobCancelled | ForcedTermination | DeadlineExceeded):
            deadline = isinstance(exc, DeadlineExceeded)
            if not (self._closing or deadline or (job is not None and job.cancelled)):
                self._failures += 1
                return None
            self._cancelled += 1  # cancel_job(), the deadline, or the close
            if self._closing and not deadline:
                return self._closed_error(f"while job {operation!r} ran")
        elif isinstance(exc, ActorError):
            self._failures += 1
        elif isinstance(exc, trio.Cancelled):
            self._cancelled += 1
        return None

    @enable_ki_protection
    async def _prepare(
        self, job: PoolJob, operation: str, deadline: float
    ) -> tuple[Slot, HelperProcess]:
        """The slow path: wait for a slot and (re)spawn its helper, cancellable by
        :meth:`cancel_job` and close, bounded by ``deadline``."""
        self._slow.add(job)
        scope = job.scope = trio.CancelScope(deadline=deadline)
        try:
            with scope:
                slot = await self._acquire()
                try:
                    helper = await self._spawner.ready_helper(slot)
                    if deadline <= trio.current_time():
                        raise DeadlineExceeded(f"job {operation!r} passed its deadline")
                except ActorError:
                    self._failures += 1
                    self._release(slot)
                    raise
                except BaseException:
                    self._release(slot)
                    raise
                return slot, helper
        finally:
            job.scope = None
            self._slow.discard(job)
            if not self._slow and self._no_jobs is not None:
                self._no_jobs.set()
        # Only reached when ``scope`` itself was cancelled: cancel_job(), close, deadline.
        self._cancelled += 1
        if self._closing:
            raise self._closed_error(f"while job {operation!r} waited")
        if not job.cancelled:
            raise DeadlineExceeded(f"job {operation!r} passed its deadline while it waited")
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
    def _cancel(job: PoolJob) -> None:
        job.cancelled = True
        if job.scope is not None:
            job.scope.cancel()
        if job.helper is not None:
            job.helper.cancel()

    def _failure(self) -> HelperError:
        text = (
            f"more than {self.config.max_restarts} helper restarts within "
            f"{self.config.restart_period:g} s"
        )
        if self.recovering:
            return PoolRestarting(f"{text}; the pool is being restarted")
        return PoolFailed(f"{text}; call restart()")

    def _fail(self) -> HelperError:
        # The restart intensity is exceeded (design §3.7): every job fails until restart().
        self._failed = True
        self._failed_event.set()
        return self._failure()

    def _closed_error(self, when: str) -> HelperError:
        if self.recovering and self._failed:
            return PoolRestarting(f"the helper pool failed and is being restarted ({when})")
        return PoolClosed(f"the helper pool closed {when}")

    def _check_accepting(self) -> None:
        if self._closing or self._retiring:
            raise self._closed_error("before the job")
        if self._failed:
            raise self._failure()

    @enable_ki_protection
    async def _acquire(self) -> Slot:
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

    @enable_ki_protection
    async def _wait_for_slot(self) -> Slot:
        if self._closing:
            raise self._closed_error("before the job")
        waiter = SlotWaiter()
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
            raise self._closed_error("while the job waited")
        raise PoolBusy(
            f"no helper became free within {self.config.acquire_timeout:g} s",
            size=self.config.size,
        )

    def _forget(self, waiter: SlotWaiter) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)
        slot, waiter.slot = waiter.slot, None
        if slot is not None:
            self._release(slot)

    def _release(self, slot: Slot) -> None:
        if slot.spawning:
            slot.release_pending = True  # the spawn gives the slot back when it ends
            return
        helper = slot.helper
        if helper is not None and helper.quarantined:
            slot.held = True  # design §3.5 step 4: back in the pool only once gone
            return
        if self._closed:
            return
        if self._waiters:
            waiter = self._waiters.popleft()
            waiter.slot = slot
            waiter.event.set()
        else:
            self._free.append(slot)

    def _on_exit(self, slot: Slot, helper: HelperProcess) -> None:
        if slot.held and slot.helper is helper:
            slot.held = False
            self._release(slot)
        stopping = self._closing or self._retiring  # an intended stop: no news
        if self.on_helper_exit is not None and helper.ready is not None and not stopping:
            self.on_helper_exit()

    @property
    def failed(self) -> bool:
        """True while the restart intensity is exceeded (until :meth:`restart`)."""
        return self._failed

    async def wait_failed(self) -> None:
        """Wait until the restart intensity is exceeded (design §3.7)."""
        await self._failed_event.wait()

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
            jobs_started=self._spawner.retired_jobs
            + sum(slot.helper.jobs_run for slot in self._slots if slot.helper is not None),
            jobs_succeeded=self._succeeded,
            jobs_failed=self._failures,
            jobs_cancelled=self._cancelled,
            spawns=self._spawner.spawns,
            restarts=self._spawner.restarts,
        )

    # --- open, restart, close -------------------------------------------------------

    @enable_ki_protection
    async def spawn_all(self) -> None:
        """Start every slot's helper at once (an eager open, design §3.3).

        Raises:
            HelperStartupFailed: (code ``helper_startup_failed``) a spawn failed; so may
                ``HelperExited`` (code ``helper_exited``).
        """
        await self._spawner.spawn(list(self._slots))

    @enable_ki_protection
    async def restart(self) -> None:
        """Clear a failed state and start over with fresh incarnations (design §3.7).

        Resets the restart-intensity window. Idle helpers are retired now (shutdown,
        then escalation) and, if the pool is eager, replaced at once; busy helpers are
        retired when they are next acquired. Results tied to old incarnations are the
        caller's to discard (design §4.8 ``helper_restarted``).

        Raises:
            PoolClosed: (code ``pool_closed``) the pool is closing or closed.
            HelperStartupFailed: (code ``helper_startup_failed``) an eager respawn
                failed; so may ``HelperExited`` (code ``helper_exited``).
        """
        if self._closing or self._retiring:
            raise PoolClosed("the helper pool is closing or closed")
        self._failed = False
        self._failed_event = trio.Event()
        self._spawner.restart_times.clear()
        self._epoch += 1
        for slot in self._slots:
            slot.spawned = False  # the next spawn of each slot is not a restart
        self.events.emit("pool_restarted", f"pool {self.spec.name!r} restarted", epoch=self._epoch)
        idle = list(self._free)
        self._free.clear()
        try:
            if self.config.eager:
                await self._spawner.spawn(idle)
            else:
                async with trio.open_nursery() as nursery:
                    for slot in idle:
                        if slot.helper is not None and not slot.helper.exited:
                            nursery.start_soon(slot.helper.shutdown)
        finally:
            for slot in idle:
                self._release(slot)

    def hurry(self) -> None:
        """Skip every grace left (a second Ctrl-C, design §3.13); never waits.

        Every helper's whole tree gets SIGKILL now; what still runs (jobs' ladders, the
        close) waits only the kill timeout for the reaps.
        """
        for slot in self._slots:
            if slot.helper is not None:
                slot.helper.hurry()

    @enable_ki_protection
    async def retire_idle(self) -> None:
        """Take no new job; shut the idle helpers down now (design §3.8).

        The pool actor's first half of a graceful close: running jobs go on until
        :meth:`aclose`, so a hung job's ladder does not delay the idle helpers' shutdown.
        A checkpoint, shielded, at most ``shutdown + terminate + kill`` seconds. Then
        :meth:`run_job` (waiting jobs too) and :meth:`restart` raise ``pool_closed``.
        """
        if self._retiring or self._closing:
            await trio.lowlevel.checkpoint()
            return
        self._retiring = True
        try:
            with trio.CancelScope(shield=True):
                async with trio.open_nursery() as nursery:
                    for slot in self._free:
                        if slot.helper is not None and not slot.helper.exited:
                            nursery.start_soon(slot.helper.shutdown)
        finally:
            self._retired.set()

    @enable_ki_protection
    async def aclose(self) -> None:
        """Close the pool now: cancel jobs, shut every helper down, reap (design §3.8).

        Idempotent; a second caller waits for the first close to finish. Runs
        shielded, so it completes even if the caller is cancelled, and takes at most
        ``timeouts.close_bound`` seconds (``cancel_grace + shutdown + terminate +
        kill``; only ``kill`` after :meth:`hurry`). Leaving the ``async with`` block
        does the same; call this to close earlier (e.g. from an actor's ``on_stop``).

        A helper whose signal was refused (design §3.5) has its SIGTERM and SIGKILL
        retried within its shutdown's bound, and is reaped if it dies.

        Raises:
            HelperAbandoned: (code ``helper_abandoned``) the close is done but had to
                leave a process alive (``details["helpers"]``: each one's ``helper``,
                ``pid``, refused ``signal`` and ``errno``, ``escaped``); each is also an
                ``abandoned`` event and an ERROR record. A second caller does not
                raise it again.
        """
        with trio.CancelScope(shield=True):
            if self._closing:
                await self._closed_event.wait()
                return
            try:
                await self._close()
            finally:
                self._closed_event.set()

    @enable_ki_protection
    async def _close(self) -> None:
        self._closing, timeouts = True, self.config.timeouts
        if self._retiring:
            await self._retired.wait()  # one shutdown at a time per helper
        for waiter in self._waiters:
            waiter.event.set()  # each finds no slot and raises PoolClosed
        for job in (*self._jobs.values(), *self._slow):
            self._cancel(job)
        for scope in self._spawner.spawning:
            scope.cancel()  # the spawn kills its helper (bounded by kill)
        # Every helper at once: a busy one's job runs its ladder in its own task
        # (cancelled just now); then it is shut down if it is still there.
        async with trio.open_nursery() as nursery:
            for slot in self._slots:
                if slot.helper is not None and not slot.helper.exited:
                    slot.helper.cancel()
                    nursery.start_soon(close_helper, slot.helper, timeouts.close_bound)
        # Killed starts (not abandoned: their reapers see the kill), slow jobs: kill bound.
        with trio.move_on_after(timeouts.kill):
            await self._spawner.wait_spawns_done()
            if self._slow:
                self._no_jobs = trio.Event()
                await self._no_jobs.wait()
        if self.zygote is not None:
            await self.zygote.aclose()
        left = []
        for slot in self._slots:
            if slot.helper is not None:
                if not slot.helper.exited:  # refused signals, or it outlived SIGKILL
                    left.append(slot.helper.abandon())
                slot.helper.discard()
        self._closed = True
        self._free.clear()
        if left:
            raise HelperAbandoned(
                f"the close left {len(left)} helper process(es) alive: "
                + ", ".join(f"{item['helper']} (pid {item['pid']})" for item in left),
                helpers=left,
            )
