"""How the pool's helpers are (re)spawned, and how often (design §3.3, §3.7).

:class:`Spawner` is the part of a :class:`~actors.HelperPool` that gives a
slot a usable helper: it retires the slot's old incarnation (shutdown, then the
ladder), counts the replacement against the restart intensity (design §1.4: past it the
pool fails) unless the old one was stopped by the ladder for a caller's cancel or
deadline (design §3.7), and starts the new incarnation. The start runs in the pool's nursery, not
in the job's task: a job cancelled while its helper starts does not kill that helper (a
restart wasted, and counted against the intensity); the helper serves the next job.
"""

from __future__ import annotations

import functools
from collections import deque
from typing import TYPE_CHECKING, Protocol

import attrs
import trio
from trio.lowlevel import enable_ki_protection

from ...errors import ForcedTermination, HelperError
from .._process import HelperProcess

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._events import PoolEvents
    from .._process import HelperSpec, Zygote
    from ._config import PoolConfig

__all__ = ["Slot", "SpawningPool", "Spawner"]


class SpawningPool(Protocol):
    """What the spawner reads of its pool (its public face)."""

    @property
    def spec(self) -> HelperSpec: ...

    @property
    def config(self) -> PoolConfig: ...

    @property
    def events(self) -> PoolEvents: ...

    @property
    def containment(self) -> str: ...

    @property
    def zygote(self) -> Zygote | None: ...

    def hurry(self) -> None: ...


@attrs.define(eq=False)
class Slot:
    """One place of the pool: its current helper incarnation and what it is doing."""

    index: int
    helper: HelperProcess | None = None
    incarnation: int = 0
    spawned: bool = False  # a first incarnation exists since open/restart()
    epoch: int = 0
    held: bool = False  # kept out of the free channel until its helper is gone
    spawning: bool = False  # a spawn runs in the pool's nursery; it releases the slot
    release_pending: bool = False  # the job that began that spawn has gone


class Spawner:
    """The spawning part of a pool (see the module docstring).

    Args:
        pool: The pool it spawns for.
        nursery: The pool's nursery: the starts, and the helpers' reapers, run there.
        epoch: The pool's restart count now (a helper of an older epoch is replaced).
        closing: Whether the pool's close has begun.
        closed_error: ``closed_error(when)``: the error of a job the close ended.
        on_exit: ``on_exit(slot, helper)``: called once a helper has exited.
        release: Gives a slot back to the pool.
        fail: Marks the pool failed (the restart intensity is exceeded) and returns
            the error for the job that found it.
    """

    def __init__(
        self,
        pool: SpawningPool,
        nursery: trio.Nursery,
        *,
        epoch: Callable[[], int],
        closing: Callable[[], bool],
        closed_error: Callable[[str], HelperError],
        on_exit: Callable[[Slot, HelperProcess], None],
        release: Callable[[Slot], None],
        fail: Callable[[], HelperError],
    ) -> None:
        self._pool = pool
        self._nursery = nursery
        self._epoch = epoch
        self._closing = closing
        self._closed_error = closed_error
        self._on_exit = on_exit
        self._release = release
        self._fail = fail
        self.retired_jobs = 0
        """Jobs run by the incarnations replaced so far."""
        self.restart_times: deque[float] = deque()
        """When each replacement within the intensity window happened (trio clock)."""
        self.spawning: set[trio.CancelScope] = set()
        """Starts under way (the pool's close cancels them)."""
        self._spawns_done: trio.Event | None = None
        self.spawns = 0
        """Helper processes started."""
        self.restarts = 0
        """Spawns that replaced an earlier incarnation."""

    @enable_ki_protection
    async def ready_helper(self, slot: Slot) -> HelperProcess:
        """Return the slot's usable helper, retiring and (re)spawning as needed."""
        pool = self._pool
        helper = slot.helper
        if helper is not None and helper.usable and slot.epoch == self._epoch():
            return helper
        excused = helper is not None and helper.stopped_on_request
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
            self.retired_jobs += helper.jobs_run
            slot.helper = None
            if self._closing():  # the close began while the old one was retired
                raise self._closed_error("while a helper was replaced")
        replaces = slot.spawned
        if replaces and excused:
            self.restarts += 1  # the pool stopped it itself: not a crash (design §3.7)
        elif replaces:
            self.note_restart()
        slot.spawned = True
        slot.incarnation += 1
        slot.epoch = self._epoch()
        helper = HelperProcess(
            pool.spec,
            pool.config.timeouts,
            incarnation=slot.incarnation,
            label=f"{pool.spec.name}#{slot.index}.{slot.incarnation}",
            slot=slot.index,
            events=pool.events,
            containment=pool.containment,
            replaces=replaces,
            on_exit=functools.partial(self._on_exit, slot),
            on_hurry=pool.hurry,
            zygote=pool.zygote,
        )
        slot.helper = helper
        self.spawns += 1
        # The spawn runs in the pool's nursery: a job cancelled while its helper
        # starts does not kill that helper (a restart wasted, and counted against the
        # intensity); the helper serves the next job instead.
        started = trio.Event()
        failure: list[HelperError] = []
        slot.spawning = True
        self._nursery.start_soon(self._spawn, slot, helper, started, failure)
        await started.wait()
        if failure:
            raise failure[0]
        return helper

    @enable_ki_protection
    async def _spawn(
        self, slot: Slot, helper: HelperProcess, started: trio.Event, failure: list[HelperError]
    ) -> None:
        scope = trio.CancelScope()
        self.spawning.add(scope)
        try:
            with scope:
                await helper.start(self._nursery)
        except HelperError as exc:
            failure.append(exc)
        finally:
            self.spawning.discard(scope)
            if not self.spawning and self._spawns_done is not None:
                self._spawns_done.set()
                self._spawns_done = None
            if scope.cancelled_caught and not failure:
                failure.append(self._closed_error("while a helper started"))
            slot.spawning = False
            started.set()
            if slot.release_pending:
                slot.release_pending = False
                self._release(slot)

    @enable_ki_protection
    async def wait_spawns_done(self) -> None:
        """Wait until no start is under way (a cancelled one kills its helper and waits
        for the reaper, bounded by ``kill``); the close waits so before it abandons
        the reapers, or a late start's kill would look unreaped (design §3.8)."""
        while self.spawning:
            if self._spawns_done is None:  # one event for every waiter
                self._spawns_done = trio.Event()
            await self._spawns_done.wait()
        await trio.lowlevel.checkpoint()

    def note_restart(self) -> None:
        """Count one replacement; fail the pool past the intensity (design §1.4, §3.7)."""
        pool = self._pool
        now = trio.current_time()
        window = self.restart_times
        while window and window[0] <= now - pool.config.restart_period:
            window.popleft()
        window.append(now)
        self.restarts += 1
        if len(window) > pool.config.max_restarts:
            error = self._fail()
            pool.events.emit(
                "intensity_exceeded",
                f"pool {pool.spec.name!r}: {error.message}",
                restarts=len(window),
                period=pool.config.restart_period,
                max_restarts=pool.config.max_restarts,
            )
            raise error

    @enable_ki_protection
    async def spawn(self, slots: list[Slot]) -> None:
        """Start the helpers of ``slots`` at once; raise the first failure."""
        errors: list[HelperError] = []

        async def spawn(slot: Slot) -> None:
            try:
                await self.ready_helper(slot)
            except HelperError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            for slot in slots:
                nursery.start_soon(spawn, slot)
        if errors:
            raise errors[0]
