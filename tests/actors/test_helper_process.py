"""One helper incarnation: fault modes, the escalation ladder, reply deadlines (design §3).

Real subprocesses on the real clock with short configured timeouts (contributing §F.3).
Every test checks afterwards that no child process and no zombie is left.
"""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing
from helper_support import FAST, assert_no_children, pid_gone, spec, wait_gone

from actors import (
    ForcedTermination,
    FrameTooLarge,
    HelperExited,
    HelperStartupFailed,
    HelperTimeouts,
    JobCancelled,
    ProtocolError,
    ProtocolViolation,
    ReplyTimeout,
    open_helper_pool,
)
from actors._helpers._process import HelperProcess
from actors._helpers._process import _containment as containment_module
from protocol import PROTOCOL_VERSION


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


# --- fault modes (design §3.9), one test each -------------------------------------------


async def test_fault_hang_during_startup():
    timeouts = HelperTimeouts(startup=0.5, kill=0.5)
    start = trio.current_time()
    with pytest.raises(HelperStartupFailed) as caught:
        async with open_helper_pool(spec(fault="hang_startup"), timeouts=timeouts):
            pytest.fail("the pool must not open")  # pragma: no cover
    assert caught.value.code == "helper_startup_failed"
    assert caught.value.details["reason"] == "startup_timeout"
    assert 0.5 <= trio.current_time() - start < 0.5 + 0.5 + 0.5


async def test_fault_crash_before_reply():
    async with open_helper_pool(spec(fault="crash_before_reply"), timeouts=FAST) as pool:
        with pytest.raises(HelperExited) as caught:
            await pool.run_job("echo", 1)
        helper = pool.snapshot().helpers[0]
    assert caught.value.code == "helper_exited"
    assert caught.value.details == {"exit_code": 17, "signal": None}
    assert helper is not None
    assert (helper.alive, helper.exit_code) == (False, 17)


async def test_exit_by_signal_names_the_signal():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        with pytest.raises(HelperExited) as caught:
            await pool.run_job("kill_self")
    assert caught.value.details == {"exit_code": -9, "signal": "SIGKILL"}


async def _violation(fault: str) -> tuple[ProtocolError, int | None]:
    async with open_helper_pool(spec(fault=fault), timeouts=FAST) as pool:
        with pytest.raises(ProtocolError) as caught:
            await pool.run_job("echo", 1)
        helper = pool.snapshot().helpers[0]
        assert helper is not None
        # Retired by force: SIGKILL at once, no grace, no replacement yet.
        assert (helper.alive, helper.exit_code) == (False, -9)
    return caught.value, helper.exit_code


async def test_fault_malformed_reply():
    error, _ = await _violation("malformed_reply")
    assert type(error) is ProtocolViolation
    assert error.code == "protocol_violation"
    assert error.details["field"] == "<frame>"


async def test_fault_oversized_reply():
    error, _ = await _violation("oversized_reply")
    assert type(error) is FrameTooLarge
    assert error.code == "frame_too_large"
    assert error.details["size"] == error.details["limit"] + 1


async def test_fault_stale_generation():
    error, _ = await _violation("stale_generation")
    assert type(error) is ProtocolViolation
    assert error.code == "protocol_violation"
    assert (error.details["field"], error.details["expected"]) == ("generation", 1)


async def test_fault_stale_session():
    error, _ = await _violation("stale_session")
    assert type(error) is ProtocolViolation
    assert error.details["field"] == "session"


async def test_fault_wrong_version():
    error, _ = await _violation("wrong_version")
    assert type(error) is ProtocolViolation
    assert error.details == {
        "field": "version",
        "expected": PROTOCOL_VERSION,
        "got": PROTOCOL_VERSION + 1,
    }


async def test_fault_partial_frame_then_hang():
    timeouts = HelperTimeouts(reply=0.3, cancel_grace=0.2, terminate=0.5, kill=0.5)
    async with open_helper_pool(spec(fault="partial_frame"), timeouts=timeouts) as pool:
        start = trio.current_time()
        with pytest.raises(ReplyTimeout) as caught:
            await pool.run_job("echo", "a reply long enough to be cut in half")
        elapsed = trio.current_time() - start
        helper = pool.snapshot().helpers[0]
    assert caught.value.code == "reply_timeout"
    assert caught.value.details == {"escalation": "sigterm", "parent_timeout": True}
    assert helper is not None
    assert helper.exit_code == -15
    assert 0.3 + 0.2 <= elapsed < 0.3 + 0.2 + 0.5 + 0.3


async def test_fault_ignore_sigterm_is_reaped_within_the_ladder_bound():
    # design §3.5 with grace 0.2 s, terminate 0.2 s, kill 0.5 s: reaped within 0.9 + 0.3 s.
    timeouts = HelperTimeouts(cancel_grace=0.2, terminate=0.2, kill=0.5)
    async with open_helper_pool(spec(fault="ignore_sigterm"), timeouts=timeouts) as pool:
        async with trio.open_nursery() as nursery:
            outcome: list[BaseException] = []

            async def job() -> None:
                try:
                    await pool.run_job("sleep", 30, job_id="stuck")
                except ForcedTermination as exc:
                    outcome.append(exc)

            nursery.start_soon(job)
            await _wait_busy(pool)
            start = trio.current_time()
            assert pool.cancel_job("stuck")
        elapsed = trio.current_time() - start
        helper = pool.snapshot().helpers[0]
    assert helper is not None
    assert (helper.alive, helper.exit_code) == (False, -9)
    [error] = outcome
    assert error.code == "forced_termination"
    assert error.details == {"escalation": "sigkill", "parent_timeout": False}
    assert 0.2 + 0.2 <= elapsed <= 0.2 + 0.2 + 0.5 + 0.3


async def test_fault_grandchild_ignoring_sigterm_is_gone_too():
    timeouts = HelperTimeouts(cancel_grace=0.2, terminate=0.5, kill=0.5)
    async with open_helper_pool(
        spec(fault="grandchild_ignores_sigterm"), timeouts=timeouts
    ) as pool:
        helper = pool.snapshot().helpers[0]
        assert helper is not None
        grandchild = helper.ready["grandchild_pid"]
        assert not pid_gone(grandchild)
        with trio.move_on_after(0.1):  # the caller gives up: the ladder runs shielded
            await pool.run_job("sleep", 30)
        after = pool.snapshot().helpers[0]
    assert after is not None
    assert after.exit_code == -15  # the helper itself obeyed SIGTERM
    await wait_gone(grandchild, within=1.0)  # the group sweep SIGKILLed the grandchild


# --- cancellation and the reply deadline (design §3.5, §3.6) ---------------------------


async def test_cooperative_cancel_keeps_the_helper():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        before = pool.snapshot().helpers[0]
        start = trio.current_time()
        with trio.move_on_after(0.1) as scope:
            await pool.run_job("cooperative", 30)
        assert scope.cancelled_caught
        assert trio.current_time() - start < 0.1 + FAST.cancel_grace
        after = pool.snapshot().helpers[0]
        assert await pool.run_job("echo", "still here") == "still here"
    assert before is not None
    assert after is not None
    assert (after.pid, after.incarnation, after.state) == (before.pid, 1, "idle")


async def test_a_job_cancelled_before_it_is_sent_needs_no_ladder():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        before = pool.snapshot().helpers[0]
        with trio.CancelScope() as scope:
            scope.cancel()
            await pool.run_job("sleep", 30)
        after = pool.snapshot().helpers[0]
        assert await pool.run_job("echo", 1) == 1
    assert before is not None
    assert after is not None
    assert (after.pid, after.state, after.jobs_run) == (before.pid, "idle", 0)


async def test_cancel_job_by_id_raises_job_cancelled():
    async with open_helper_pool(spec(), timeouts=FAST) as pool, trio.open_nursery() as nursery:
        outcome: list[BaseException] = []

        async def job() -> None:
            try:
                await pool.run_job("cooperative", 30, job_id=7)
            except JobCancelled as exc:
                outcome.append(exc)

        nursery.start_soon(job)
        await _wait_busy(pool)
        assert pool.cancel_job(7)
        assert not pool.cancel_job("unknown")
    [error] = outcome
    assert (error.code, error.category) == ("job_cancelled", "stale")
    assert error.details == {"escalation": "cooperative"}


async def test_late_reply_after_the_parent_deadline_is_never_returned():
    # The handler answers at 0.5 s, after the 0.2 s reply deadline but within grace:
    # the reply ends the ladder, yet it is not a result and the helper is retired.
    timeouts = HelperTimeouts(reply=0.2, cancel_grace=1.0, shutdown=1.0)
    async with open_helper_pool(spec(), timeouts=timeouts) as pool:
        with pytest.raises(ReplyTimeout) as caught:
            await pool.run_job("sleep", 0.5)
        retired = pool.snapshot().helpers[0]
        assert await pool.run_job("echo", "fresh") == "fresh"
        fresh = pool.snapshot().helpers[0]
    assert caught.value.details == {"escalation": "cooperative", "parent_timeout": True}
    assert retired is not None
    assert fresh is not None
    assert (retired.alive, retired.exit_code) == (False, 0)  # shut down politely
    assert fresh.incarnation == 2
    assert fresh.pid != retired.pid


async def test_reply_timeout_that_needs_sigkill_is_forced_termination():
    timeouts = HelperTimeouts(reply=0.2, cancel_grace=0.1, terminate=0.1, kill=0.5)
    async with open_helper_pool(spec(fault="ignore_sigterm"), timeouts=timeouts) as pool:
        with pytest.raises(ForcedTermination) as caught:
            await pool.run_job("sleep", 30)
    assert caught.value.details == {"escalation": "sigkill", "parent_timeout": True}


async def test_unkillable_helper_is_quarantined_until_reaped(monkeypatch, nursery):
    # Make SIGKILL "not work" so step 4 of the ladder is reached, then let it through.
    # (Process-group containment: the group is the only way a signal goes.)
    blocked: list[int] = []
    real_killpg = containment_module._killpg

    def killpg(pgid: int, sig: int) -> None:
        if sig == 9 and not blocked:
            blocked.append(pgid)
            return
        real_killpg(pgid, sig)

    monkeypatch.setattr(containment_module, "_killpg", killpg)
    timeouts = HelperTimeouts(reply=0.2, cancel_grace=0.1, terminate=0.1, kill=0.2)
    helper = HelperProcess(spec(fault="ignore_sigterm", containment="group"), timeouts)
    await helper.start(nursery)
    with pytest.raises(ForcedTermination) as caught:
        await helper.run_job("sleep", 30)
    assert caught.value.details["escalation"] == "quarantined"
    assert helper.quarantined
    snapshot = helper.snapshot()
    assert (snapshot.quarantined, snapshot.unreaped, snapshot.alive) == (True, True, True)
    assert await helper.shutdown() == "sigkill"  # the close path retries SIGKILL
    assert helper.exited
    helper.discard()


async def test_job_frame_over_the_request_limit_sends_nothing():
    async with open_helper_pool(spec(max_request=4096), timeouts=FAST) as pool:
        with pytest.raises(FrameTooLarge):
            await pool.run_job("echo", "x" * 5000)
        with pytest.raises(ProtocolError) as not_json:
            await pool.run_job("echo", math.nan)
        assert await pool.run_job("echo", "ok") == "ok"
        helper = pool.snapshot().helpers[0]
    assert not_json.value.code == "protocol_error"
    assert helper is not None
    assert helper.incarnation == 1


async def test_helper_state_machine_follows_the_job():
    async with open_helper_pool(spec(), timeouts=FAST) as pool, trio.open_nursery() as nursery:
        nursery.start_soon(pool.run_job, "sleep", 0.3)
        await _wait_busy(pool)
        busy = pool.snapshot().helpers[0]
        assert busy is not None
        assert (busy.state, busy.active_operation, busy.active_generation) == ("busy", "sleep", 1)
    done = pool.snapshot()
    assert done.closed
    assert done.helpers[0] is not None
    assert done.helpers[0].state == "exited"
    assert done.helpers[0].exit_code == 0


async def _wait_busy(pool) -> None:
    # The job's task is blocked reading the reply once the job frame is written.
    await trio.testing.wait_all_tasks_blocked()
    assert any(h is not None and h.active_generation for h in pool.snapshot().helpers)
