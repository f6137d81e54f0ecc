"""Every step of the pool is an event, in order, and a log record (design §3.10).

Real helpers on the real clock with short timeouts (contributing §F.3); each test checks
the events of one path, then that no child and no zombie is left.
"""

from __future__ import annotations

import errno
import logging
import os
import signal

import pytest
import trio
from helper_support import FAST, assert_no_children, wait_gone
from helper_support import spec as base_spec

from actors import (
    DeadlineExceeded,
    ForcedTermination,
    HelperExited,
    HelperSpec,
    HelperStartupFailed,
    HelperTimeouts,
    JobCancelled,
    PoolBusy,
    PoolEvent,
    PoolEvents,
    PoolFailed,
    SignalFailed,
    open_helper_pool,
)
from actors._helpers import _events as events_module
from actors._helpers._process import _containment as containment_module


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


def spec(**fields: object) -> HelperSpec:
    """A spawned helper's spec: these tests count its exact steps and sequence numbers
    (a forked helper's pool also reports its fork server's: see test_zygote.py)."""
    fields.setdefault("start_method", "spawn")
    return base_spec(**fields)


def drain(stream) -> list[PoolEvent]:
    events = []
    while (event := stream.receive_nowait()) is not None:
        events.append(event)
    return events


def steps(events: list[PoolEvent]) -> list[str]:
    return [event.kind for event in events]


async def test_a_clean_job_spawned_ready_job_started_reaped():
    hub = PoolEvents("helper")
    with hub.subscribe() as stream:
        async with open_helper_pool(spec(), timeouts=FAST, events=hub) as pool:
            assert await pool.run_job("echo", 1) == 1
            pid = pool.snapshot().helpers[0].pid
        events = drain(stream)
    assert steps(events) == ["spawned", "ready", "job_started", "reaped"]
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert {(e.helper, e.slot, e.incarnation, e.pid) for e in events} == {("helper#0.1", 0, 1, pid)}
    assert events[2].generation == 1
    assert events[3].details["exit_code"] == 0
    times = [e.time for e in events]
    assert times == sorted(times)
    assert events[0].to_dict()["kind"] == "spawned"


async def test_a_cooperative_cancel_is_one_cancel_sent():
    hub = PoolEvents("helper")
    with hub.subscribe() as stream:
        async with open_helper_pool(spec(), timeouts=FAST, events=hub) as pool:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_expect, pool, JobCancelled, "cooperative", 30, "j")
                await trio.testing.wait_all_tasks_blocked()
                pool.cancel_job("j")
            events = drain(stream)
    assert steps(events) == ["spawned", "ready", "job_started", "cancel_sent"]
    assert events[3].details == {"operation": "cooperative", "reason": "cancelled"}
    assert events[3].generation == 1


async def test_grace_expired_then_sigterm_then_reaped():
    hub = PoolEvents("helper")
    timeouts = HelperTimeouts(cancel_grace=0.1, terminate=1.0, kill=1.0)
    with hub.subscribe() as stream:
        async with open_helper_pool(spec(), timeouts=timeouts, events=hub) as pool:
            with trio.move_on_after(0.1):
                await pool.run_job("sleep", 30)
            events = drain(stream)
    assert steps(events) == [
        "spawned",
        "ready",
        "job_started",
        "cancel_sent",
        "grace_expired",
        "sigterm_sent",
        "reaped",
    ]
    assert events[3].details["reason"] == "caller_cancelled"
    assert events[-1].details["signal"] == "SIGTERM"


async def test_sigterm_ignored_then_sigkill_then_reaped():
    hub = PoolEvents("helper")
    timeouts = HelperTimeouts(reply=0.1, cancel_grace=0.1, terminate=0.1, kill=1.0)
    with hub.subscribe() as stream:
        async with open_helper_pool(
            spec(fault="ignore_sigterm"), timeouts=timeouts, events=hub
        ) as pool:
            with pytest.raises(ForcedTermination):
                await pool.run_job("sleep", 30)
            events = drain(stream)
    assert steps(events) == [
        "spawned",
        "ready",
        "job_started",
        "cancel_sent",
        "grace_expired",
        "sigterm_sent",
        "sigkill_sent",
        "reaped",
    ]
    assert events[3].details["reason"] == "reply_timeout"
    assert events[-1].details["signal"] == "SIGKILL"


async def test_a_crash_is_reaped_and_the_replacement_is_a_restart(caplog):
    caplog.set_level(logging.DEBUG, logger="actors.helpers")
    hub = PoolEvents("helper")
    with hub.subscribe() as stream:
        async with open_helper_pool(spec(), timeouts=FAST, events=hub) as pool:
            with pytest.raises(HelperExited):
                await pool.run_job("crash", 4)
            assert await pool.run_job("echo", 2) == 2
            events = drain(stream)
    assert steps(events) == [
        "spawned",
        "ready",
        "job_started",
        "reaped",
        "spawned",
        "ready",
        "job_started",
    ]
    assert events[3].details["exit_code"] == 4
    assert (events[4].incarnation, events[4].details["replaces"]) == (2, True)
    levels = {
        (r.event, r.incarnation): r.levelno for r in caplog.records if r.name == "actors.helpers"
    }
    assert levels["reaped", 1] == logging.WARNING  # not asked to exit
    assert levels["spawned", 2] == logging.WARNING  # a restart
    assert levels["spawned", 1] == logging.DEBUG
    record = next(r for r in caplog.records if getattr(r, "event", None) == "reaped")
    assert (record.helper, record.slot, record.exit_code) == ("helper#0.1", 0, 4)


@pytest.mark.parametrize(
    ("fault", "reason", "error"),
    [
        ("exit_at_startup", "exited", HelperExited),
        ("hang_startup", "startup_timeout", HelperStartupFailed),
        ("bad_ready", "bad_ready", HelperStartupFailed),
    ],
)
async def test_a_startup_that_fails_says_how(fault, reason, error):
    hub = PoolEvents("helper")
    timeouts = HelperTimeouts(startup=0.5, kill=1.0)
    with hub.subscribe() as stream:
        with pytest.raises(error) as caught:
            async with open_helper_pool(spec(fault=fault), timeouts=timeouts, events=hub):
                pytest.fail("the pool must not open")  # pragma: no cover
        events = drain(stream)
    failed = [e for e in events if e.kind == "startup_failed"]
    assert [e.details["reason"] for e in failed] == [reason]
    if fault == "exit_at_startup":
        assert steps(events) == ["spawned", "reaped", "startup_failed"]
        assert caught.value.details["exit_code"] == 17
        assert "giving up before ready" in caught.value.details["stderr"]
        assert "stderr: fault exit_at_startup: giving up before ready" in caught.value.message
    else:
        assert steps(events) == ["spawned", "startup_failed", "sigkill_sent", "reaped"]
        assert caught.value.details["reason"] == reason


async def test_the_last_4_kib_of_stderr_explain_a_startup_death():
    options = {"stderr_bytes": 10_000, "exit_code": 9}
    with pytest.raises(HelperExited) as caught:
        async with open_helper_pool(spec(options=options), timeouts=FAST):
            pytest.fail("the pool must not open")  # pragma: no cover
    stderr = caught.value.details["stderr"]
    assert caught.value.details["exit_code"] == 9
    assert len(stderr.encode()) == 4096
    assert stderr.endswith("x\nthe last words\n")
    assert caught.value.message.endswith("stderr: the last words")
    assert len(caught.value.message.encode()) < 1024


async def test_stderr_lines_go_to_logging_with_the_helpers_id(caplog):
    caplog.set_level(logging.WARNING, logger="actors.helpers.stderr")
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        assert await pool.run_job("noisy", 5) == 5
        pid = pool.snapshot().helpers[0].pid
        with trio.fail_after(5):  # the reader task gets the lines soon after
            while len([r for r in caplog.records if r.name == "actors.helpers.stderr"]) < 2:  # noqa: ASYNC110
                await trio.sleep(0.01)
    lines = [r for r in caplog.records if r.name == "actors.helpers.stderr"]
    assert [r.line for r in lines] == [
        "this goes to stderr, not into the frame stream",
        "raw bytes on fd 1 go to stderr too",
    ]
    assert {(r.helper, r.pid, r.incarnation) for r in lines} == {("helper#0.1", pid, 1)}


async def test_quarantined_then_released_when_sigkill_finally_works(monkeypatch):
    blocked: list[int] = []
    real_killpg = containment_module._killpg

    def killpg(pgid: int, sig: int) -> None:
        if sig == signal.SIGKILL and not blocked:
            blocked.append(pgid)
            return
        real_killpg(pgid, sig)

    monkeypatch.setattr(containment_module, "_killpg", killpg)
    hub = PoolEvents("helper")
    timeouts = HelperTimeouts(reply=0.1, cancel_grace=0.1, terminate=0.1, kill=0.2)
    with hub.subscribe() as stream:
        async with open_helper_pool(
            spec(fault="ignore_sigterm", containment="group"), timeouts=timeouts, events=hub
        ) as pool:
            with pytest.raises(ForcedTermination) as caught:
                await pool.run_job("sleep", 30)
            assert caught.value.details["escalation"] == "quarantined"
            os.kill(blocked[0], signal.SIGKILL)
            await wait_gone(blocked[0])
        events = drain(stream)
    assert steps(events)[-5:] == [
        "sigterm_sent",
        "sigkill_sent",
        "quarantined",
        "reaped",
        "released",
    ]


async def test_a_signal_that_cannot_be_delivered_ends_the_job_with_its_own_code(monkeypatch):
    # EPERM from every signal to the helper: the ladder stops at its first signal.
    def refuse(pid: int, sig: int) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    hub = PoolEvents("helper")
    timeouts = HelperTimeouts(cancel_grace=0.1, terminate=0.2, kill=0.2)
    with hub.subscribe() as stream:
        async with open_helper_pool(
            spec(containment="tree"), timeouts=timeouts, events=hub, acquire_timeout=0.2
        ) as pool:
            pid = pool.snapshot().helpers[0].pid
            monkeypatch.setattr(containment_module, "_kill", refuse)
            monkeypatch.setattr(containment_module, "_killpg", refuse)
            try:
                with pytest.raises(SignalFailed) as caught:
                    await pool.run_job("sleep", 30, deadline=trio.current_time() + 0.05)
                snapshot = pool.snapshot().helpers[0]
                assert (snapshot.quarantined, snapshot.alive) == (True, True)
                with pytest.raises(PoolBusy):  # no replacement while the pid lives
                    await pool.run_job("echo", 1)
            finally:
                monkeypatch.undo()
                os.kill(pid, signal.SIGKILL)  # the pid goes: the slot comes back
            with trio.fail_after(5):
                while pool.statistics().idle == 0:  # noqa: ASYNC110 (the reaper frees it)
                    await trio.sleep(0.01)
            assert await pool.run_job("echo", 3) == 3
        events = drain(stream)
    assert caught.value.code == "signal_failed"
    assert caught.value.details["pid"] == pid
    assert caught.value.details["errno"] == errno.EPERM
    assert caught.value.details["signal"] == "SIGTERM"
    assert caught.value.details["cause"] == "deadline"
    assert steps(events)[2:6] == ["job_started", "cancel_sent", "grace_expired", "signal_failed"]
    failed = [e for e in events if e.kind == "signal_failed"]
    assert [(e.pid, e.details["error"]) for e in failed] == [(pid, "EPERM")]
    assert steps(events)[6:8] == ["reaped", "released"]


async def test_a_reply_after_the_cancel_is_dropped():
    # ``sleep`` never checks for a cancel: it answers "ok" within the grace.
    hub = PoolEvents("helper")
    timeouts = HelperTimeouts(cancel_grace=2.0)
    with hub.subscribe() as stream:
        async with open_helper_pool(spec(), timeouts=timeouts, events=hub) as pool:
            with pytest.raises(DeadlineExceeded) as caught:
                await pool.run_job("sleep", 0.3, deadline=trio.current_time() + 0.1)
            assert await pool.run_job("echo", 1) == 1  # the same helper goes on
            events = drain(stream)
    assert caught.value.details["escalation"] == "cooperative"
    assert steps(events)[3:6] == ["cancel_sent", "late_reply_dropped", "job_started"]
    assert events[4].details["status"] == "ok"


async def test_intensity_exceeded_and_pool_restarted():
    hub = PoolEvents("helper")
    with hub.subscribe() as stream:
        async with open_helper_pool(spec(), timeouts=FAST, max_restarts=0, events=hub) as pool:
            with pytest.raises(HelperExited):
                await pool.run_job("crash", 4)
            with pytest.raises(PoolFailed):
                await pool.run_job("echo", 1)
            await pool.restart()
            events = drain(stream)
    kinds = steps(events)
    assert kinds[kinds.index("intensity_exceeded") :] == [
        "intensity_exceeded",
        "pool_restarted",
        "spawned",
        "ready",
    ]
    exceeded = events[kinds.index("intensity_exceeded")]
    assert exceeded.details == {"restarts": 1, "period": 10.0, "max_restarts": 0}
    assert exceeded.helper is None


async def test_a_slow_subscriber_loses_its_oldest_events_never_slows_the_pool():
    hub = PoolEvents("helper")
    with hub.subscribe(bound=2) as slow, hub.subscribe() as fast:
        async with open_helper_pool(spec(), timeouts=FAST, events=hub) as pool:
            for i in range(3):
                await pool.run_job("echo", i)
        assert [e.seq for e in drain(slow)] == [5, 6]  # the job_started of job 3, reaped
        assert slow.dropped == 4
        assert len(drain(fast)) == 6
    assert not hub.active


async def test_nothing_is_built_when_nobody_listens(monkeypatch):
    # No subscriber and the logger above DEBUG: no PoolEvent and no record per job.
    built: list[object] = []
    monkeypatch.setattr(events_module, "PoolEvent", lambda **fields: built.append(fields))
    logging.getLogger("actors.helpers").setLevel(logging.INFO)
    try:
        async with open_helper_pool(spec(), timeouts=FAST) as pool:
            before = len(built)
            for i in range(20):
                await pool.run_job("echo", i)
            assert len(built) == before == 0
            assert not pool.events.wanted(logging.DEBUG)
    finally:
        logging.getLogger("actors.helpers").setLevel(logging.NOTSET)


async def test_subscriptions_end_when_the_pool_closes():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        stream = pool.events.subscribe()
        await pool.run_job("echo", 1)
    seen = [event.kind async for event in stream]
    assert seen == ["job_started", "reaped"]


async def _expect(pool, error, operation, payload, job_id):
    with pytest.raises(error):
        await pool.run_job(operation, payload, job_id=job_id)
