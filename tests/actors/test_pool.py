"""The helper pool: parallelism, waiting, restarts, crash loops, close (design §3.1-3.8).

Real subprocesses on the real clock with short configured timeouts (contributing §F.3).
Every test checks afterwards that no child process and no zombie is left.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, assert_type

import pytest
import trio
import trio.testing
from helper_support import FAST, TINY_CRASHER, assert_no_children, open_fds, pid_gone, spec

from actors import (
    ForcedTermination,
    HelperExited,
    HelperSpec,
    HelperStartupFailed,
    HelperTimeouts,
    JobCancelled,
    PoolBusy,
    PoolClosed,
    PoolFailed,
    open_helper_pool,
)
from actors._helpers._process import _containment as containment_module


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


async def test_jobs_run_in_parallel_one_per_helper():
    async with open_helper_pool(spec(), size=2, timeouts=FAST) as pool:
        pids = {h.pid for h in pool.snapshot().helpers if h is not None}
        results: list[object] = []

        async def job(value: float) -> None:
            results.append(await pool.run_job("sleep", value))

        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(job, 0.4)
            nursery.start_soon(job, 0.4)
        elapsed = trio.current_time() - start
        stats = pool.statistics()
    assert len(pids) == 2
    assert results == [0.4, 0.4]
    assert elapsed < 0.4 + 0.3  # not 0.8: two helpers, one job each
    assert (stats.jobs_started, stats.jobs_succeeded, stats.spawns) == (2, 2, 2)


async def test_a_job_waits_for_a_free_helper_then_gives_up():
    async with (
        open_helper_pool(spec(), size=1, timeouts=FAST, acquire_timeout=0.3) as pool,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(pool.run_job, "sleep", 1.0)
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        with pytest.raises(PoolBusy) as caught:
            await pool.run_job("echo", 1)
        assert 0.3 <= trio.current_time() - start < 0.3 + 0.5
        assert pool.statistics().waiting == 0
    assert (caught.value.code, caught.value.category) == ("pool_busy", "transient")


async def test_a_job_waits_while_every_helper_is_busy():
    async with open_helper_pool(spec(), size=1, timeouts=FAST) as pool:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pool.run_job, "sleep", 0.3)
            await trio.testing.wait_all_tasks_blocked()
            assert pool.statistics().busy == 1
            nursery.start_soon(pool.run_job, "echo", 2)
            await trio.testing.wait_all_tasks_blocked()
            assert pool.statistics().waiting == 1
        stats = pool.statistics()
    assert (stats.jobs_succeeded, stats.spawns, stats.waiting) == (2, 1, 0)


async def test_cancelling_one_job_runs_the_ladder_for_that_job_only():
    async with open_helper_pool(spec(), size=2, timeouts=FAST) as pool:
        before = {h.pid for h in pool.snapshot().helpers if h is not None}
        results: list[object] = []

        async def other() -> None:
            results.append(await pool.run_job("sleep", 0.4))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other)
            with trio.move_on_after(0.1):
                await pool.run_job("cooperative", 30)
        after = {h.pid for h in pool.snapshot().helpers if h is not None}
        stats = pool.statistics()
    assert results == [0.4]
    assert after == before  # the cancelled helper stopped cooperatively and stays
    assert (stats.jobs_cancelled, stats.jobs_succeeded, stats.restarts) == (1, 1, 0)


async def test_restart_intensity_fails_the_pool_until_restart():
    config = {"size": 1, "timeouts": FAST, "max_restarts": 2, "restart_period": 30.0}
    async with open_helper_pool(spec(), **config) as pool:
        for _ in range(3):  # incarnations 1, 2, 3 crash: two restarts so far
            with pytest.raises(HelperExited):
                await pool.run_job("crash", 5)
        with pytest.raises(PoolFailed) as caught:  # a third restart is one too many
            await pool.run_job("echo", 1)
        with pytest.raises(PoolFailed):
            await pool.run_job("echo", 1)
        assert pool.snapshot().failed
        await pool.restart()
        assert not pool.snapshot().failed
        assert await pool.run_job("echo", 3) == 3
        helper = pool.snapshot().helpers[0]
        stats = pool.statistics()
    assert (caught.value.code, caught.value.category) == ("pool_failed", "permanent")
    assert helper is not None
    assert helper.incarnation == 4
    assert stats.restarts == 3  # the respawn after restart() is not counted


async def test_two_hundred_crash_restart_cycles_leave_no_zombie_and_no_fd():
    crasher = HelperSpec(argv=[sys.executable, "-I", "-S", "-c", TINY_CRASHER], name="tiny")
    fds_before = open_fds()
    async with open_helper_pool(
        crasher, size=2, timeouts=FAST, max_restarts=1000, restart_period=300.0
    ) as pool:

        async def crash_loop(cycles: int) -> None:
            for _ in range(cycles):
                with pytest.raises(HelperExited) as caught:
                    await pool.run_job("anything")
                assert caught.value.details == {"exit_code": 3, "signal": None}

        async with trio.open_nursery() as nursery:
            nursery.start_soon(crash_loop, 100)
            nursery.start_soon(crash_loop, 100)
        stats = pool.statistics()
        incarnations = sorted(h.incarnation for h in pool.snapshot().helpers if h is not None)
    assert stats.jobs_failed == 200
    # Two eager spawns, then a replacement before each job but the first of each slot.
    assert (stats.spawns, stats.restarts) == (200, 198)
    assert sum(incarnations) == 200  # each job met a fresh incarnation
    assert open_fds() == fds_before
    assert_no_children()


async def test_close_cancels_running_jobs_and_reaps_every_helper():
    outcome: list[BaseException] = []

    async def job(pool) -> None:
        try:
            await pool.run_job("sleep", 30)
        except PoolClosed as exc:
            outcome.append(exc)

    async with trio.open_nursery() as outer:
        async with open_helper_pool(spec(), size=2, timeouts=FAST) as pool:
            outer.start_soon(job, pool)
            await trio.testing.wait_all_tasks_blocked()
            pids = [h.pid for h in pool.snapshot().helpers if h is not None]
            assert pool.statistics().busy == 1
            start = trio.current_time()
        elapsed = trio.current_time() - start
    snapshot = pool.snapshot()
    assert (snapshot.closing, snapshot.closed) == (True, True)
    assert [h.alive for h in snapshot.helpers if h is not None] == [False, False]
    assert sorted(h.exit_code for h in snapshot.helpers if h is not None) == [-15, 0]
    assert [exc.code for exc in outcome] == ["pool_closed"]
    assert elapsed < FAST.cancel_grace + FAST.terminate + 0.5
    assert all(pid_gone(pid) for pid in pids)
    with pytest.raises(PoolClosed):
        await pool.run_job("echo", 1)


async def test_close_shuts_idle_helpers_down_while_a_hung_job_is_cancelled():
    # The busy helper is stopped: it cannot read the cancel frame, so its job's ladder
    # sits in cancel_grace until the test lets it go on. The idle helper must be gone
    # before that, or the close takes the sum of two ladders (design §3.8).
    timeouts = HelperTimeouts(
        startup=10.0, reply=60.0, cancel_grace=30.0, shutdown=1.0, terminate=0.5, kill=0.5
    )
    outcome: list[BaseException] = []

    async def job(pool) -> None:
        try:
            await pool.run_job("cooperative", 60)
        except PoolClosed as exc:
            outcome.append(exc)

    async with (
        trio.open_nursery() as outer,
        open_helper_pool(spec(), size=2, timeouts=timeouts) as pool,
    ):
        outer.start_soon(job, pool)
        await trio.testing.wait_all_tasks_blocked()
        busy, idle = pool.snapshot().helpers
        assert busy is not None
        assert idle is not None
        assert (busy.state, idle.state) == ("busy", "idle")
        os.kill(busy.pid, signal.SIGSTOP)
        try:
            outer.start_soon(pool.aclose)
            with trio.fail_after(10):  # not cancel_grace: only a failure waits this long
                while pool.snapshot().helpers[1].alive:  # type: ignore[union-attr]  # noqa: ASYNC110
                    await trio.sleep(0.01)
            stuck = pool.snapshot().helpers[0]
            assert stuck is not None
            assert (stuck.state, stuck.unreaped, stuck.active_operation) == (
                "cancelling", False, "cooperative",
            )  # fmt: skip
        finally:
            os.kill(busy.pid, signal.SIGCONT)  # it reads the cancel frame and stops
    helpers = pool.snapshot().helpers
    assert [h.exit_code for h in helpers if h is not None] == [0, 0]
    assert [exc.code for exc in outcome] == ["pool_closed"]


async def test_retire_idle_lets_running_jobs_finish_and_refuses_new_ones():
    results: list[object] = []
    async with open_helper_pool(spec(), size=2, timeouts=FAST) as pool:
        async with trio.open_nursery() as jobs:

            async def job() -> None:
                results.append(await pool.run_job("cooperative", 0.3))

            jobs.start_soon(job)
            await trio.testing.wait_all_tasks_blocked()
            await pool.retire_idle()
            busy, idle = pool.snapshot().helpers
            assert busy is not None
            assert idle is not None
            assert (busy.alive, idle.alive, idle.exit_code) == (True, False, 0)
            with pytest.raises(PoolClosed):
                await pool.run_job("echo", 1)
            with pytest.raises(PoolClosed):
                await pool.restart()
            await pool.retire_idle()  # again: nothing more to do
        assert results == ["finished"]
    assert [h.exit_code for h in pool.snapshot().helpers if h is not None] == [0, 0]


async def test_lazy_pool_spawns_at_the_first_job():
    async with open_helper_pool(spec(), size=2, timeouts=FAST, eager=False) as pool:
        assert pool.snapshot().helpers == (None, None)
        assert await pool.run_job("echo", 1) == 1
        helpers = pool.snapshot().helpers
        assert sum(h is not None for h in helpers) == 1
    lazy_fail = spec(fault="hang_startup")
    timeouts = HelperTimeouts(startup=0.3, kill=0.5)
    async with open_helper_pool(lazy_fail, timeouts=timeouts, eager=False) as pool:
        with pytest.raises(HelperStartupFailed):
            await pool.run_job("echo", 1)


async def test_quarantined_helper_blocks_its_slot_until_reaped(monkeypatch):
    # Make SIGKILL "not work" once, so the ladder quarantines the helper.
    blocked: list[int] = []
    real_killpg = containment_module._killpg

    def killpg(pgid: int, sig: int) -> None:
        if sig == signal.SIGKILL and not blocked:
            blocked.append(pgid)
            return
        real_killpg(pgid, sig)

    monkeypatch.setattr(containment_module, "_killpg", killpg)
    timeouts = HelperTimeouts(reply=0.2, cancel_grace=0.1, terminate=0.1, kill=0.2)
    async with open_helper_pool(
        spec(fault="ignore_sigterm", containment="group"), timeouts=timeouts, acquire_timeout=0.2
    ) as pool:
        with pytest.raises(ForcedTermination) as caught:
            await pool.run_job("sleep", 30)
        quarantined = pool.snapshot().helpers[0]
        assert quarantined is not None
        assert quarantined.quarantined
        with pytest.raises(PoolBusy):  # no replacement while it is unreaped
            await pool.run_job("echo", 1)
        os.kill(blocked[0], signal.SIGKILL)
        with trio.fail_after(2):
            while pool.statistics().idle == 0:  # noqa: ASYNC110 (the watcher frees it)
                await trio.sleep(0.01)
        assert await pool.run_job("echo", 2) == 2
        fresh = pool.snapshot().helpers[0]
    assert caught.value.details["escalation"] == "quarantined"
    assert fresh is not None
    assert fresh.incarnation == 2


async def test_waiting_jobs_get_a_slot_in_arrival_order_and_can_be_cancelled():
    order: list[str] = []
    outcome: list[BaseException] = []

    async def job(name: str) -> None:
        try:
            order.append(await pool.run_job("echo", name, job_id=name))
        except JobCancelled as exc:
            outcome.append(exc)

    async with open_helper_pool(spec(), size=1, timeouts=FAST) as pool:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pool.run_job, "sleep", 0.8)
            await trio.testing.wait_all_tasks_blocked()
            for name in ("first", "cancelled", "second"):
                nursery.start_soon(job, name)
                await trio.testing.wait_all_tasks_blocked()
            assert pool.statistics().waiting == 3
            assert pool.cancel_job("cancelled")  # while it waits for a slot
            await trio.testing.wait_all_tasks_blocked()
            assert pool.statistics().waiting == 2
        stats = pool.statistics()
    assert order == ["first", "second"]
    [error] = outcome
    assert error.code == "job_cancelled"
    assert error.details == {"escalation": None}
    assert (stats.jobs_succeeded, stats.jobs_cancelled, stats.waiting) == (3, 1, 0)


async def test_close_fails_a_job_that_waits_for_a_slot_with_pool_closed():
    outcome: list[BaseException] = []

    async def job(pool, operation: str) -> None:
        try:
            await pool.run_job(operation, 30)
        except PoolClosed as exc:
            outcome.append(exc)

    async with (
        trio.open_nursery() as outer,
        open_helper_pool(spec(), size=1, timeouts=FAST) as pool,
    ):
        outer.start_soon(job, pool, "cooperative")
        await trio.testing.wait_all_tasks_blocked()
        outer.start_soon(job, pool, "echo")
        await trio.testing.wait_all_tasks_blocked()
        assert pool.statistics().waiting == 1
    assert [exc.code for exc in outcome] == ["pool_closed", "pool_closed"]
    assert pool.statistics().waiting == 0


async def test_expect_types_and_checks_a_job_result():
    async with open_helper_pool(spec(), size=1, timeouts=FAST) as pool:
        result = await pool.run_job("echo", {"a": 1}, expect=dict)
        assert_type(result, dict[Any, Any])
        assert result == {"a": 1}
        with pytest.raises(TypeError, match="job 'echo' returned list, not dict"):
            await pool.run_job("echo", [1], expect=dict)
        assert await pool.run_job("echo", 5) == 5  # without expect: Any, unchecked
    assert_no_children()
