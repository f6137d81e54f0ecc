"""What counts toward a pool's restart intensity (design §3.7), and a failed pool's close
(design §3.8).

Real helpers, real clock, short timeouts; no child or zombie may be left.
"""

from __future__ import annotations

import logging

import attrs
import pytest
import run_sync_functions as fns
import trio
from helper_support import FAST, assert_no_children

from actors import (
    DeadlineExceeded,
    HelperExited,
    HelperSpec,
    JobStalled,
    PoolConfig,
    PoolFailed,
    open_helper_pool,
)

CALLS = HelperSpec(entry="actors.helper:serve_calls", name="calls")
SIZE = 8
LONG_KILL = attrs.evolve(FAST, kill=2.0)
#: A run_sync call cannot stop cooperatively: its grace always runs out, so keep it short.
SHORT_GRACE = attrs.evolve(FAST, cancel_grace=0.05)


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


async def _cancelled_calls(pool, count: int) -> None:
    """``count`` calls that never return, each cancelled by its caller after 0.3 s
    (a run_sync function cannot stop cooperatively: each ends through SIGTERM)."""

    async def one() -> None:
        with trio.move_on_after(0.3):
            await pool.run_sync(fns.block)

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)


async def test_cancelled_calls_do_not_use_up_the_restart_intensity():
    async with open_helper_pool(CALLS, size=SIZE, timeouts=SHORT_GRACE) as pool:
        await _cancelled_calls(pool, SIZE)
        assert await pool.map(fns.identity, range(SIZE)) == list(range(SIZE))
        await _cancelled_calls(pool, SIZE)  # twice over the intensity, in one window
        assert await pool.map(fns.identity, range(SIZE)) == list(range(SIZE))
        statistics = pool.statistics()
        assert not pool.failed
    # Every replacement is still a spawn and a restart in the statistics.
    assert statistics.spawns == 3 * SIZE
    assert statistics.restarts == 2 * SIZE
    assert statistics.jobs_cancelled == 2 * SIZE


async def test_a_cancelled_map_does_not_use_up_the_restart_intensity():
    async with open_helper_pool(CALLS, size=SIZE, timeouts=SHORT_GRACE) as pool:
        with trio.move_on_after(0.3):
            await pool.map(fns.block, range(SIZE), limit=SIZE)
        assert await pool.map(fns.identity, range(SIZE)) == list(range(SIZE))
        assert not pool.failed


async def test_replacements_after_a_deadline_do_not_count():
    async with open_helper_pool(CALLS, size=1, timeouts=SHORT_GRACE) as pool:
        for _ in range(7):  # more than max_restarts (5), each needing a replacement
            # A job's deadline also bounds the spawn of its helper, which a loaded
            # machine can make longer than 0.2 s; then the job never starts, the helper
            # serves the next one, and no replacement happens. A call without a
            # deadline readies the helper first, so each deadline stops a running job.
            assert await pool.run_sync(fns.identity, 1) == 1
            with pytest.raises(DeadlineExceeded):
                await pool.run_sync(fns.block, deadline=trio.current_time() + 0.2)
        assert await pool.run_sync(fns.identity, 1) == 1
        statistics = pool.statistics()
        assert not pool.failed
    # Each of the seven deadlines stopped a job that ran, and each replacement (the
    # first spawn is none) is still a spawn and a restart in the statistics.
    assert (statistics.jobs_started, statistics.jobs_cancelled) == (7 + 8, 7)
    assert (statistics.spawns, statistics.restarts) == (8, 7)


async def test_stalled_helpers_still_use_up_the_restart_intensity():
    # A helper that misses its own stall deadline did hang: its replacement counts.
    config = PoolConfig(max_restarts=1, restart_period=10.0, timeouts=FAST)
    async with open_helper_pool(CALLS, config) as pool:
        for _ in range(2):
            with pytest.raises(JobStalled):
                await pool.run_sync(fns.block, stall=0.2)
        with pytest.raises(PoolFailed, match="more than 1 helper restarts within 10 s"):
            await pool.run_sync(fns.block, stall=0.2)


async def test_crashes_still_use_up_the_restart_intensity():
    config = PoolConfig(max_restarts=5, restart_period=10.0, timeouts=FAST)
    async with open_helper_pool(CALLS, config) as pool:
        for _ in range(6):  # the first spawn is not a restart; 5 replacements are allowed
            with pytest.raises(Exception, match="exit") as caught:
                await pool.run_sync(fns.crash, 3)
            assert caught.value.code == "helper_exited"
        with pytest.raises(PoolFailed, match="more than 5 helper restarts within 10 s"):
            await pool.run_sync(fns.crash, 3)
        assert pool.failed


async def test_a_failed_pool_reaps_its_late_spawns_without_a_false_quarantine(caplog):
    caplog.set_level(logging.WARNING, logger="actors")
    pool_cm = open_helper_pool(CALLS, size=SIZE, timeouts=LONG_KILL)
    pool = await pool_cm.__aenter__()
    try:
        # Every helper crashes at once: five replacements start (the intensity allows
        # five), the sixth fails the pool while they are still starting.
        async with trio.open_nursery() as nursery:
            for _ in range(SIZE):
                nursery.start_soon(_crash_until_failed, pool)
            await pool.wait_failed()
            nursery.cancel_scope.cancel()  # and close now, the replacements under way
        assert pool.failed
    finally:
        start = trio.current_time()
        await pool_cm.__aexit__(None, None, None)
        took = trio.current_time() - start
    assert [r.getMessage() for r in caplog.records if "quarantined" in r.getMessage()] == []
    # The late starts are killed and reaped at once: a reap missed would show as
    # the whole kill timeout (2 s) spent waiting.
    assert took < LONG_KILL.kill / 2


async def _crash_until_failed(pool) -> None:
    for _ in range(2):
        with pytest.raises((PoolFailed, HelperExited)):
            await pool.run_sync(fns.crash, 3)
