"""A pool that restarts itself: ``PoolConfig(restart=Backoff(...))`` (design §3.15).

The backoff schedule on the MockClock with a fake pool (exact virtual times); the whole
path with real helpers on the real clock.
"""

from __future__ import annotations

import pytest
import run_sync_functions as fns
import trio
import trio.testing
from helper_support import FAST, assert_no_children

from actors import (
    Backoff,
    HelperExited,
    HelperSpec,
    PoolActor,
    PoolClosed,
    PoolConfig,
    PoolEvents,
    PoolRestarting,
    RetryPolicy,
    open_helper_pool,
)
from actors._helpers._events import holding
from actors._helpers._pool._restart import restart_when_failed
from actors.errors import HelperStartupFailed

CALLS = HelperSpec(entry="actors.helper:serve_calls", name="calls")


class FakePool:
    """A pool that fails when told and whose restarts fail ``failing`` times first."""

    def __init__(self, failing: int) -> None:
        self.spec = CALLS
        self.events = PoolEvents("calls")
        self.recovering = False
        self.failing = failing
        self.restarts: list[tuple[float, bool]] = []
        self._failed = trio.Event()

    def fail(self) -> None:
        self._failed.set()

    async def wait_failed(self) -> None:
        await self._failed.wait()

    async def restart(self) -> None:
        await trio.lowlevel.checkpoint()
        ok = self.failing == 0
        self.restarts.append((trio.current_time(), ok))
        if not ok:
            self.failing -= 1
            raise HelperStartupFailed("calls#0.2: no ready frame within 10 s")
        self._failed = trio.Event()


def scheduled(stream) -> list[tuple[float, dict]]:
    found = []
    while (event := stream.receive_nowait()) is not None:
        found.append((event.time, event.details))
    return found


async def test_the_backoff_schedule_doubles_to_its_cap_and_resets_when_quiet(
    autojump_clock, nursery
):
    pool = FakePool(failing=3)
    backoff = Backoff(base=1.0, cap=4.0, reset_after=30.0)
    with pool.events.subscribe(kinds={"restart_scheduled"}) as stream:
        nursery.start_soon(restart_when_failed, pool, backoff)
        await trio.testing.wait_all_tasks_blocked()
        assert pool.recovering
        pool.fail()  # at t=0
        await trio.sleep(20)
        assert pool.restarts == [(1.0, False), (3.0, False), (7.0, False), (11.0, True)]
        assert scheduled(stream) == [
            (0.0, {"delay": 1.0, "attempt": 1, "last_failure": None}),
            (1.0, {"delay": 2.0, "attempt": 2, "last_failure": "helper_startup_failed"}),
            (3.0, {"delay": 4.0, "attempt": 3, "last_failure": "helper_startup_failed"}),
            (7.0, {"delay": 4.0, "attempt": 4, "last_failure": "helper_startup_failed"}),
        ]
        pool.fail()  # t=20: 13 s after the last failure, within reset_after: attempt 5
        await trio.sleep(10)
        pool.fail()  # t=30: only 6 s later, but a success came between: still counting
        await trio.sleep(50)
        pool.fail()  # t=80: 46 s of quiet since the last one: attempt 1 again
        await trio.sleep(5)
        assert [details["attempt"] for _, details in scheduled(stream)] == [5, 6, 1]
        assert pool.restarts[4:] == [(24.0, True), (34.0, True), (81.0, True)]


async def test_a_pool_restarts_itself_after_its_intensity_is_exceeded():
    config = PoolConfig(
        size=1,
        timeouts=FAST,
        max_restarts=0,
        restart=Backoff(base=0.3, cap=1.0, reset_after=60.0),
    )
    async with open_helper_pool(CALLS, config) as pool:
        with pool.events.subscribe(
            kinds={"intensity_exceeded", "restart_scheduled", "pool_restarted"}
        ) as stream:
            with pytest.raises(HelperExited):
                await pool.run_sync(fns.crash, 4)
            with pytest.raises(PoolRestarting) as caught:  # the replacement is one too many
                await pool.run_sync(fns.square, 2)
            assert pool.failed
            failed_at = trio.current_time()
            with pytest.raises(PoolRestarting):  # fails at once while it waits
                await pool.run_sync(fns.square, 2)
            # A policy rides the wait out: PoolRestarting is transient.
            retry = RetryPolicy(
                initial_interval=0.05,
                maximum_interval=0.1,
                maximum_attempts=None,
                overall_timeout=10.0,  # a loaded machine may take a while to respawn
            )
            assert await pool.run_sync(fns.square, 3, retry=retry) == 9
            back_at = trio.current_time()
            events = []
            while (event := stream.receive_nowait()) is not None:
                events.append((event.kind, event.details))
        statistics = pool.statistics()
    assert caught.value.retryable
    assert [kind for kind, _ in events] == [
        "intensity_exceeded",
        "restart_scheduled",
        "pool_restarted",
    ]
    assert events[1][1] == {"delay": 0.3, "attempt": 1, "last_failure": None}
    assert 0.3 <= back_at - failed_at < 0.3 + 10.0
    assert statistics.spawns == 2  # the first and the restart's (the replacement was refused)
    assert_no_children()


async def test_by_default_a_failed_pool_stays_failed():
    config = PoolConfig(size=1, timeouts=FAST, max_restarts=0)
    async with open_helper_pool(CALLS, config) as pool:
        assert not pool.recovering
        with pytest.raises(HelperExited):
            await pool.run_sync(fns.crash, 4)
        with pytest.raises(Exception, match="call restart") as caught:
            await pool.run_sync(fns.square, 2)
        assert caught.value.code == "pool_failed"
    assert_no_children()


def test_a_pool_actor_takes_one_restart_policy_not_two():
    config = PoolConfig(restart=Backoff())
    PoolActor(CALLS, config)  # the pool's own policy alone is fine
    with pytest.raises(ValueError, match="two restart policies"):
        PoolActor(CALLS, config, on_failure="restart")


def test_restart_must_be_a_backoff():
    with pytest.raises(TypeError, match="restart"):
        PoolConfig(restart=1.0)  # type: ignore[arg-type]


async def test_the_restarter_ends_when_the_pool_closed_meanwhile(autojump_clock):
    pool = FakePool(failing=0)

    async def closed() -> None:
        await trio.lowlevel.checkpoint()
        raise PoolClosed("the helper pool is closing or closed")

    pool.restart = closed  # type: ignore[method-assign]
    pool.fail()
    await restart_when_failed(pool, Backoff(base=1.0, cap=4.0))  # returns: no loop
    assert trio.current_time() == 1.0


class EagerFakePool(FakePool):
    """Like ``HelperPool.restart`` with an eager respawn: ``pool_restarted`` is emitted
    before the respawn, and a respawn that fails its startup fails the pool again just
    after the restart raised (its helper's exit is counted by another task)."""

    def __init__(self, failing: int, nursery: trio.Nursery) -> None:
        super().__init__(failing)
        self.nursery = nursery

    def fail(self) -> None:
        self._failed.set()
        self.events.emit("intensity_exceeded", "more than 0 helper restarts within 10 s")

    async def restart(self) -> None:
        self._failed = trio.Event()
        self.events.emit("pool_restarted", "pool 'calls' restarted", epoch=len(self.restarts))
        try:
            await super().restart()
        except HelperStartupFailed:
            self.nursery.start_soon(self.fail_soon)
            raise

    async def fail_soon(self) -> None:
        await trio.lowlevel.checkpoint()
        self.fail()


async def test_a_failed_restart_is_restart_failed_and_pool_restarted_only_a_success(
    autojump_clock, nursery, caplog
):
    pool = EagerFakePool(failing=2, nursery=nursery)
    backoff = Backoff(base=1.0, cap=4.0, reset_after=30.0)
    with pool.events.subscribe() as stream:
        nursery.start_soon(restart_when_failed, pool, backoff)
        await trio.testing.wait_all_tasks_blocked()
        pool.fail()  # at t=0
        await trio.sleep(20)
        events = []
        while (event := stream.receive_nowait()) is not None:
            events.append((event.time, event.kind, event.details.get("attempt")))
    assert events == [
        (0.0, "intensity_exceeded", None),
        (0.0, "restart_scheduled", 1),
        (1.0, "restart_failed", 1),
        (1.0, "intensity_exceeded", None),  # the pool failed again: before the next try
        (1.0, "restart_scheduled", 2),
        (3.0, "restart_failed", 2),
        (3.0, "intensity_exceeded", None),
        (3.0, "restart_scheduled", 3),
        (7.0, "pool_restarted", None),  # once, for the restart that succeeded
    ]
    assert pool.restarts == [(1.0, False), (3.0, False), (7.0, True)]
    failed = [r for r in caplog.records if getattr(r, "event", None) == "restart_failed"]
    assert failed[0].getMessage() == (
        "pool 'calls': restart attempt 1 failed: calls#0.2: no ready frame within 10 s"
    )
    assert failed[0].code == "helper_startup_failed"
    again = [r for r in caplog.records if getattr(r, "event", None) == "intensity_exceeded"]
    assert again[1].getMessage() == (
        "pool 'calls' is still failed: its helpers do not start (helper_startup_failed)"
    )


def test_holding_refuses_an_unknown_kind():
    with (
        pytest.raises(ValueError, match="unknown event kinds"),
        holding(PoolEvents("calls"), "pool_restartd"),
    ):
        pass
