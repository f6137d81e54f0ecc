"""The scheduler with real helper processes (design §4.12, §4.13).

Real subprocesses, so the real clock with short configured timeouts (contributing §F.3),
and every test checks that no child process or zombie is left. The executors run their
jobs through :class:`actors.HelperPool`, whose ``run_job`` returns only once a
cancelled job's ladder has finished (design §3.5): the attempt's execution has then
really ended.
"""

from __future__ import annotations

from pathlib import Path

import trio
from helper_support import assert_no_children
from scheduler_support import running, settled

from actors import (
    Failed,
    HelperSpec,
    HelperTimeouts,
    Kind,
    Published,
    Retrying,
    RetryPolicy,
    RunInfo,
    SchedulerConfig,
    open_helper_pool,
)

HERE = Path(__file__).resolve().parent
SPEC = HelperSpec(entry="scheduler_helper_entry:main", cwd=str(HERE))
#: A cancel grace well above the handler's deaf spell: it stops cooperatively, late.
PATIENT = HelperTimeouts(startup=10, reply=10, cancel_grace=3.0, shutdown=1, terminate=1, kill=1)


def read_log(path: Path) -> dict[tuple[str, int], float]:
    entries = {}
    for line in path.read_text().splitlines():
        event, attempt, at = line.split()
        entries[event, int(attempt)] = float(at)
    return entries


async def test_the_retry_waits_until_a_deaf_attempt_has_really_stopped(tmp_path):
    log = tmp_path / "executions.log"
    policy = RetryPolicy(attempt_timeout=0.3, initial_interval=0, maximum_interval=0)
    config = SchedulerConfig(kinds=(Kind(name="job", helper=True, retry=policy),),
                             deadline_grace=0, workers=2)  # fmt: skip
    runs = [RunInfo(run_id=1, guid="g1", revision="r1")]
    with trio.fail_after(30):
        async with open_helper_pool(SPEC, size=2, timeouts=PATIENT) as pool:

            async def execute(job):
                payload = {"log": str(log), "attempt": job.claim.attempt, "ignore": 0.6}
                return await pool.run_job("stubborn", payload)

            async with running(execute, runs=runs, config=config) as (_a, _r, rec):
                await rec.until(settled(1), seconds=20)
            stats = pool.statistics()
    times = read_log(log)
    # Attempt 1 was cancelled at its 0.3 s deadline but went on for its deaf 0.6 s; the
    # retry (due at once, a second helper idle) started only after it had stopped.
    assert times["end", 1] - times["start", 1] >= 0.6
    assert times["start", 1] < times["end", 1] <= times["start", 2] < times["end", 2]
    (retry,) = rec.of(Retrying)
    assert (retry.attempt, retry.error.code) == (1, "deadline_exceeded")
    (published,) = rec.of(Published)
    assert (published.attempt, published.result) == (2, "attempt 2")
    assert stats.jobs_cancelled == 1
    assert stats.restarts == 0  # it stopped cooperatively: no helper was killed
    assert_no_children()


async def test_a_crash_loop_with_real_helpers_stays_local(tmp_path):
    policy = RetryPolicy(maximum_crashes=2, initial_interval=0.05)
    config = SchedulerConfig(kinds=(Kind(name="job", helper=True, retry=policy),), workers=2)
    runs = [RunInfo(run_id=i, guid=f"g{i}", revision="r1") for i in range(1, 9)]
    with trio.fail_after(60):
        async with open_helper_pool(
            SPEC, size=2, timeouts=PATIENT, max_restarts=3, restart_period=60
        ) as pool:

            async def execute(job):
                return await pool.run_job("job", {"run": job.claim.run_id, "crash": 3})

            async with running(execute, runs=runs, config=config) as (_a, _r, rec):
                await rec.until(settled(8), seconds=40)
            snapshot, stats = pool.snapshot(), pool.statistics()
    (failed,) = rec.of(Failed)
    assert (failed.run_id, failed.reason, failed.attempts) == (3, "crash_loop", 2)
    assert failed.error.code == "helper_exited"
    assert sorted(p.run_id for p in rec.of(Published)) == [1, 2, 4, 5, 6, 7, 8]
    assert not snapshot.failed  # two crashes: within the pool's intensity of 3
    assert stats.restarts <= 2
    assert_no_children()
