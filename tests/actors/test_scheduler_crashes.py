"""Crash loops stay local to their item (design §4.12), under ``autojump_clock``.

A fake helper pool with the real pool's restart intensity (more than ``max_restarts``
replacements within ``period`` seconds and every later job fails ``pool_failed``) runs
the jobs; run 3 kills its helper at every attempt. With the default crash budget
(``maximum_crashes=2``) run 3 ends ``failed`` (``crash_loop``) after two crashes and the
pool, and every other run, stay healthy; without a budget the same item exhausts the
pool's intensity and takes the healthy work down with it.
"""

from __future__ import annotations

import pytest
import trio
from scheduler_support import running, settled

from actors import Failed, Kind, Published, RetryPolicy, RunInfo, SchedulerConfig
from actors.errors import HelperExited, PoolFailed

WORK = 0.125  # seconds a healthy job takes
CRASH_AFTER = 0.0625  # seconds before the bad job kills its helper
CRASHER = 3
RUNS = 12


class FakePool:
    """Restart intensity as in the real pool (design §3.7): a crash costs one restart."""

    def __init__(self, max_restarts: int, period: float) -> None:
        self.max_restarts = max_restarts
        self.period = period
        self.restarts: list[float] = []
        self.failed = False

    async def run_job(self, run_id: int) -> bytes:
        if self.failed:
            raise PoolFailed(f"more than {self.max_restarts} helper restarts")
        if run_id == CRASHER:
            await trio.sleep(CRASH_AFTER)
            now = trio.current_time()
            self.restarts.append(now)
            recent = [t for t in self.restarts if t > now - self.period]
            self.failed = len(recent) > self.max_restarts
            raise HelperExited("helper exited during the job", exit_code=-9)
        await trio.sleep(WORK)
        return f"run {run_id}".encode()


@pytest.mark.parametrize("budget", [2, None])
async def test_a_crash_loop_uses_up_its_own_attempts_and_the_pool_survives(autojump_clock, budget):
    pool = FakePool(max_restarts=3, period=10.0)
    starts: dict[int, list[float]] = {}

    async def execute(job):
        starts.setdefault(job.claim.run_id, []).append(trio.current_time())
        return await pool.run_job(job.claim.run_id)

    policy = RetryPolicy(maximum_crashes=budget, initial_interval=CRASH_AFTER,
                         backoff_coefficient=1, maximum_interval=CRASH_AFTER)  # fmt: skip
    config = SchedulerConfig(kinds=(Kind(name="job", helper=True, retry=policy),), workers=2)
    runs = [RunInfo(run_id=i, guid=f"g{i}", revision="r") for i in range(1, RUNS + 1)]
    async with running(execute, runs=runs, config=config) as (_a, _r, rec):
        t0 = trio.current_time()
        await rec.until(settled(RUNS))
    failed = {e.run_id: e for e in rec.of(Failed)}
    published = {e.run_id for e in rec.of(Published)}
    if budget == 2:
        # Runs 1 and 2 at 0; 3 and 4 at 0.125; 3 crashes at 0.1875 (its worker takes
        # run 5), is due again at 0.25 when run 4 ends, and crashes for good at 0.3125.
        assert [t - t0 for t in starts[CRASHER]] == [0.125, 0.25]
        assert (failed[CRASHER].reason, failed[CRASHER].attempts) == ("crash_loop", 2)
        assert failed[CRASHER].error.code == "helper_exited"
        assert set(failed) == {CRASHER}
        assert published == set(range(1, RUNS + 1)) - {CRASHER}
        assert len(pool.restarts) == 2
        assert not pool.failed
    else:
        # No budget: the crash loop uses up the pool's intensity (4 restarts > 3) and
        # healthy runs that had not started yet fail with it.
        assert pool.failed
        assert len(pool.restarts) == 4
        assert failed[CRASHER].error.code == "pool_failed"
        assert {e.error.code for run, e in failed.items() if run != CRASHER} == {"pool_failed"}
        assert len(failed) > 1
