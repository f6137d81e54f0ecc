"""The stall timeout: a job must report progress at least every ``stall`` seconds (§3.12).

Like the heartbeat timeout of a Temporal activity: any progress frame resets it, and a
job that falls silent is stopped through the ladder and ends with its own code
(``job_stalled``), not ``reply_timeout``. Real helpers, real clock, short timeouts.
"""

from __future__ import annotations

import math

import pytest
import trio
from helper_support import FAST, assert_no_children, spec

from actors import (
    HelperTimeouts,
    JobStalled,
    PoolActor,
    PoolConfig,
    PoolHandle,
    RunJob,
    open_helper_pool,
)


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


async def test_a_silent_job_stalls_and_its_helper_is_stopped_by_the_ladder():
    timeouts = HelperTimeouts(reply=10.0, cancel_grace=0.1, terminate=0.5, kill=0.5)
    async with open_helper_pool(spec(), timeouts=timeouts) as pool:
        start = trio.current_time()
        with pytest.raises(JobStalled) as caught:
            await pool.run_job("sleep", 30, stall=0.2)  # never reports, never checks
        elapsed = trio.current_time() - start
        helper = pool.snapshot().helpers[0]
        assert await pool.run_job("echo", 1) == 1  # a fresh incarnation serves
    assert (caught.value.code, caught.value.category) == ("job_stalled", "transient")
    assert caught.value.details == {"escalation": "sigterm", "stall": 0.2}
    assert 0.2 + 0.1 <= elapsed < 0.2 + 0.1 + 0.5 + 0.5  # stall, grace, SIGTERM's reap
    assert (helper.alive, helper.exit_code) == (False, -15)


async def test_progress_keeps_a_long_job_alive():
    # A report every 60 ms for 0.5 s: far longer than the stall timeout, never silent.
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        assert await pool.run_job("progress_stubborn", 0.5, stall=0.25) == "done"


@pytest.mark.parametrize("counts", [True, False])
async def test_stderr_counts_as_activity_only_when_the_spec_says_so(counts):
    # A line on stderr every 50 ms for 1.5 s, no progress report: alive with
    # ``stderr_is_activity``, stalled after 0.5 s of "silence" without it.
    timeouts = HelperTimeouts(reply=10.0, cancel_grace=0.1, terminate=0.5, kill=0.5)
    async with open_helper_pool(spec(stderr_is_activity=counts), timeouts=timeouts) as pool:
        if counts:
            assert await pool.run_job("stderr_ticks", 1.5, stall=0.5) == "done"
        else:
            with pytest.raises(JobStalled) as caught:
                await pool.run_job("stderr_ticks", 1.5, stall=0.5)
            assert caught.value.details["stall"] == 0.5


async def test_a_job_that_stops_reporting_stalls_and_a_cooperative_helper_stays():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        before = pool.snapshot().helpers[0]
        reports: list[float] = []
        payload = {"reports": [[0.1, "started"]], "work": 30}
        with pytest.raises(JobStalled) as caught:
            await pool.run_job(
                "progress_then",
                payload,
                stall=0.2,
                on_progress=lambda fraction, note: reports.append(fraction),
            )
        after = pool.snapshot().helpers[0]
    assert reports == [0.1]
    assert caught.value.details["escalation"] == "cooperative"
    assert (after.pid, after.incarnation) == (before.pid, 1)  # it answered the cancel


async def test_the_stall_is_not_the_reply_deadline():
    timeouts = HelperTimeouts(reply=0.2, cancel_grace=0.1)
    async with open_helper_pool(spec(), timeouts=timeouts) as pool:
        with pytest.raises(Exception) as caught:  # noqa: PT011 (the class is the point)
            await pool.run_job("cooperative", 30, stall=5.0)
    assert caught.value.code == "reply_timeout"


async def test_the_stall_through_the_pool_actor(nursery):
    ref = await nursery.start(PoolActor(spec(), PoolConfig(size=1, timeouts=FAST)).run)
    handle = PoolHandle(ref)
    with pytest.raises(JobStalled):
        await handle.run_job("cooperative", 30, timeout=10, stall=0.2)
    with pytest.raises(JobStalled):
        await ref.ask(
            RunJob(job_id="m", operation="cooperative", payload=30, stall=0.2), timeout=10
        )
    assert await handle.run_job("echo", 2, timeout=5) == 2
    await ref.stop()


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, True, "1", 301])
async def test_a_bad_stall_is_refused_naming_it(bad):
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        with pytest.raises(ValueError, match="stall"):
            await pool.run_job("echo", 1, stall=bad)
        assert await pool.run_job("echo", 1) == 1
