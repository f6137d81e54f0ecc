"""Progress frames: ``ctx.progress`` in the helper, ``on_progress`` in the parent (§3.9).

Real subprocesses, real clock (contributing §F.3); every test checks that no child remains.
"""

from __future__ import annotations

import logging

import pytest
import trio
from helper_support import FAST, assert_no_children, spec

from actors import (
    AskTimeout,
    JobFailed,
    PoolActor,
    PoolConfig,
    PoolHandle,
    ProtocolViolation,
    RunJob,
    open_helper_pool,
)

Reports = list[tuple[float, "str | None"]]


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


def recorder() -> tuple[Reports, object]:
    reports: Reports = []

    def on_progress(fraction: float, note: str | None) -> None:
        reports.append((fraction, note))

    return reports, on_progress


async def test_progress_reaches_the_callback_in_order_before_the_result():
    reports, on_progress = recorder()
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        result = await pool.run_job(
            "progress", {"steps": 3, "pause": 0.06}, on_progress=on_progress
        )
        # Progress does not disturb the helper: the next job runs on it as usual.
        assert await pool.run_job("echo", 1) == 1
        helper = pool.snapshot().helpers[0]
    assert result == "done"
    assert reports == [(1 / 3, "step 1"), (2 / 3, "step 2"), (1.0, "step 3")]
    assert all(type(fraction) is float for fraction, _ in reports)
    assert helper is not None
    assert helper.incarnation == 1


async def test_progress_is_rate_limited_in_the_helper_but_the_final_report_is_sent():
    reports, on_progress = recorder()
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        sent = await pool.run_job("progress_burst", 200, on_progress=on_progress)
    # What the helper sent is exactly what the callback got; the burst took far less
    # than 200 x 50 ms, so most reports were dropped; the first and the 1.0 were not.
    assert [fraction for fraction, _ in reports] == sent
    assert sent[0] == 0.0
    assert sent[-1] == 1.0
    assert reports[-1] == (1.0, "all done")
    assert len(sent) < 20


async def test_a_job_without_a_callback_ignores_progress():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        assert await pool.run_job("progress", {"steps": 2, "pause": 0.06}) == "done"


async def test_a_failing_callback_is_logged_and_never_fails_the_job(caplog):
    calls: list[float] = []

    def on_progress(fraction: float, note: str | None) -> None:
        calls.append(fraction)
        raise RuntimeError("the callback is broken")

    caplog.set_level(logging.ERROR, logger="actors.helpers")
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        result = await pool.run_job(
            "progress", {"steps": 2, "pause": 0.06}, on_progress=on_progress
        )
    assert result == "done"
    assert calls == [0.5, 1.0]
    messages = [r.getMessage() for r in caplog.records if r.name == "actors.helpers"]
    assert len(messages) == 2
    assert all("on_progress raised" in m for m in messages)


async def test_a_bad_fraction_fails_the_job_in_the_helper():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        with pytest.raises(JobFailed) as caught:
            await pool.run_job("progress_bad", 1.5)
        assert await pool.run_job("echo", 2) == 2
    assert caught.value.code == "handler_failed"
    assert "fraction" in caught.value.record.message


async def test_fault_stale_progress_is_a_protocol_violation_and_retires_the_helper():
    reports, on_progress = recorder()
    async with open_helper_pool(spec(fault="stale_progress"), timeouts=FAST) as pool:
        with pytest.raises(ProtocolViolation) as caught:
            await pool.run_job("echo", 1, on_progress=on_progress)
        helper = pool.snapshot().helpers[0]
    assert caught.value.code == "protocol_violation"
    assert caught.value.details["field"] == "generation"
    assert reports == []  # never delivered
    assert helper is not None
    assert (helper.alive, helper.exit_code) == (False, -9)  # retired by force


async def test_progress_through_the_supervisor_actor(nursery):
    ref = await nursery.start(PoolActor(spec(), PoolConfig(size=1, timeouts=FAST)).run)
    supervisor = PoolHandle(ref)
    reports, on_progress = recorder()
    result = await supervisor.run_job(
        "progress", {"steps": 2, "pause": 0.06}, timeout=10, on_progress=on_progress
    )
    assert result == "done"
    assert reports == [(0.5, "step 1"), (1.0, "step 2")]
    await ref.stop()


async def test_no_progress_is_delivered_once_the_caller_gave_up():
    # The helper ignores the cancel frame and keeps reporting through the grace period
    # (0.5 s, ~8 reports): none of them reaches the callback of the cancelled caller.
    reports, on_progress = recorder()
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        with trio.move_on_after(0.3):
            await pool.run_job("progress_stubborn", 30, on_progress=on_progress)
        seen = len(reports)
        helper = pool.snapshot().helpers[0]
    assert 1 <= seen <= 5
    assert len(reports) == seen
    assert helper is not None
    assert helper.exit_code == -15  # the ladder went on to SIGTERM


async def test_the_handle_runs_the_job_in_the_callers_task(nursery):
    # The handle's direct path: progress comes in the caller's own task, so none can
    # come once run_job has returned.
    ref = await nursery.start(PoolActor(spec(), PoolConfig(size=1, timeouts=FAST)).run)
    handle = PoolHandle(ref)
    tasks: list[object] = []
    result = await handle.run_job(
        "progress",
        {"steps": 2, "pause": 0.06},
        timeout=10,
        on_progress=lambda fraction, note: tasks.append(trio.lowlevel.current_task()),
    )
    assert result == "done"
    assert tasks == [trio.lowlevel.current_task()] * 2
    await ref.stop()


async def test_a_run_job_message_relays_progress_from_the_actors_task(nursery):
    ref = await nursery.start(PoolActor(spec(), PoolConfig(size=1, timeouts=FAST)).run)
    reports, on_progress = recorder()
    message = RunJob(
        job_id="m",
        operation="progress",
        payload={"steps": 2, "pause": 0.06},
        on_progress=on_progress,
    )
    assert await ref.ask(message, timeout=10) == "done"
    assert reports == [(0.5, "step 1"), (1.0, "step 2")]
    await ref.stop()


async def test_a_caller_that_gave_up_gets_no_progress_and_the_job_is_cancelled(nursery):
    ref = await nursery.start(PoolActor(spec(), PoolConfig(size=1, timeouts=FAST)).run)
    supervisor = PoolHandle(ref)
    reports, on_progress = recorder()
    with pytest.raises(AskTimeout):
        await supervisor.run_job(
            "progress", {"steps": 20, "pause": 0.05}, timeout=0.3, on_progress=on_progress
        )
    seen = len(reports)
    assert seen <= 7  # at most one report per 50 ms of the 0.3 s
    # The job's ladder ran before AskTimeout was raised.
    assert (await supervisor.statistics()).jobs_cancelled == 1
    assert len(reports) == seen
    assert await supervisor.run_job("echo", 1, timeout=5) == 1  # the helper stayed
    await ref.stop()
