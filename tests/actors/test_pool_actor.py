"""The pool actor and its handle (design §3, actors talk over mailboxes).

Real subprocesses on the real clock with short configured timeouts (contributing §F.3).
Every test checks afterwards that no child process and no zombie is left.
"""

from __future__ import annotations

import functools
import os
import signal

import pytest
import trio
import trio.testing
from helper_support import FAST, assert_no_children, spec

from actors import (
    ActorStopped,
    AskTimeout,
    Backoff,
    HelperExited,
    HelperStartupFailed,
    HelperTimeouts,
    InvalidCommand,
    JobFailed,
    PoolActor,
    PoolClosed,
    PoolConfig,
    PoolFailed,
    PoolHandle,
    PoolRestarting,
    RunJob,
)


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


async def _start(nursery, config: PoolConfig | None = None, **spec_fields) -> PoolHandle:
    config = config or PoolConfig(size=2, timeouts=FAST)
    ref = await nursery.start(PoolActor(spec(**spec_fields), config).run)
    return PoolHandle(ref)


async def test_run_job_snapshot_statistics_and_stop(nursery):
    supervisor = await _start(nursery)
    assert await supervisor.run_job("echo", {"a": 1}, timeout=5) == {"a": 1}
    snapshot = await supervisor.snapshot()
    assert [h.state for h in snapshot.helpers if h is not None] == ["idle", "idle"]
    stats = await supervisor.statistics()
    assert (stats.jobs_started, stats.jobs_succeeded) == (1, 1)
    await supervisor.ref.stop(grace=1.0)
    assert_no_children()
    with pytest.raises(ActorStopped):
        await supervisor.run_job("echo", 1, timeout=5)


async def test_jobs_run_concurrently_through_one_mailbox(nursery):
    supervisor = await _start(nursery)
    results: list[object] = []

    async def job(value: float) -> None:
        results.append(await supervisor.run_job("sleep", value, timeout=5))

    start = trio.current_time()
    async with trio.open_nursery() as jobs:
        jobs.start_soon(job, 0.4)
        jobs.start_soon(job, 0.4)
    assert results == [0.4, 0.4]
    assert trio.current_time() - start < 0.4 + 0.3
    await supervisor.ref.stop()


async def test_ask_timeout_cancels_the_job_and_the_helper_stays(nursery):
    supervisor = await _start(nursery, PoolConfig(size=1, timeouts=FAST))
    before = (await supervisor.snapshot()).helpers[0]
    with pytest.raises(AskTimeout):
        await supervisor.run_job("cooperative", 30, timeout=0.2)
    # The cancel message was try-sent; the ladder ends cooperatively within grace.
    assert await supervisor.run_job("echo", "next", timeout=5) == "next"
    after = (await supervisor.snapshot()).helpers[0]
    stats = await supervisor.statistics()
    assert before is not None
    assert after is not None
    assert (after.pid, after.incarnation) == (before.pid, 1)
    assert stats.jobs_cancelled == 1
    await supervisor.ref.stop()


async def test_caller_cancellation_sends_a_cancel(nursery):
    supervisor = await _start(nursery, PoolConfig(size=1, timeouts=FAST))
    with trio.move_on_after(0.2):
        await supervisor.run_job("cooperative", 30, timeout=10)
    assert await supervisor.run_job("echo", 1, timeout=5) == 1
    assert (await supervisor.statistics()).jobs_cancelled == 1
    await supervisor.ref.stop()


async def test_job_errors_reach_the_caller_as_data(nursery):
    supervisor = await _start(nursery)
    with pytest.raises(JobFailed) as failed:
        await supervisor.run_job(
            "fail",
            {"message": "m", "code": "source_unreadable", "category": "permanent"},
            timeout=5,
        )
    with pytest.raises(HelperExited) as exited:
        await supervisor.run_job("crash", 4, timeout=5)
    assert failed.value.code == "source_unreadable"
    assert failed.value.__cause__ is None
    assert exited.value.details["exit_code"] == 4
    await supervisor.ref.stop()


async def test_pool_failure_and_restart_through_the_actor(nursery):
    config = PoolConfig(size=1, timeouts=FAST, max_restarts=0)
    supervisor = await _start(nursery, config)
    with pytest.raises(HelperExited):
        await supervisor.run_job("crash", 4, timeout=5)
    with pytest.raises(PoolFailed):
        await supervisor.run_job("echo", 1, timeout=5)
    assert (await supervisor.snapshot()).failed
    await supervisor.restart()
    assert await supervisor.run_job("echo", 2, timeout=5) == 2
    await supervisor.ref.stop()


async def test_bad_messages_are_refused_without_crashing(nursery):
    supervisor = await _start(nursery, PoolConfig(size=1, timeouts=FAST))
    with pytest.raises(InvalidCommand):
        await supervisor.ref.ask("hello", timeout=5)
    async with trio.open_nursery() as jobs:
        request = RunJob(job_id="x", operation="sleep", payload=0.3)
        jobs.start_soon(functools.partial(supervisor.ref.ask, request, timeout=5))
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(InvalidCommand, match="already running"):
            await supervisor.ref.ask(RunJob(job_id="x", operation="echo"), timeout=5)
    assert await supervisor.cancel_job("x") is False
    await supervisor.ref.stop()


async def test_stop_during_a_job_runs_the_ladder_and_reaps(nursery):
    supervisor = await _start(nursery, PoolConfig(size=1, timeouts=FAST))
    outcome: list[BaseException] = []

    async def job() -> None:
        try:
            await supervisor.run_job("sleep", 30, timeout=10)
        except ActorStopped as exc:
            outcome.append(exc)

    nursery.start_soon(job)
    await trio.testing.wait_all_tasks_blocked()
    start = trio.current_time()
    await supervisor.ref.stop(grace=0.1)
    assert trio.current_time() - start < 0.1 + FAST.cancel_grace + FAST.terminate + 0.5
    await trio.testing.wait_all_tasks_blocked()
    assert [exc.code for exc in outcome] == ["actor_stopped"]
    assert_no_children()


async def test_stop_shuts_idle_helpers_down_while_a_hung_job_is_cancelled(nursery):
    # As in a server's shutdown: the caller gave up on a job whose helper hangs (it is
    # stopped, so the job's cancel ladder waits out cancel_grace). The idle helper is
    # shut down at once, not after that ladder (design §3.8).
    timeouts = HelperTimeouts(
        startup=10.0, reply=60.0, cancel_grace=30.0, shutdown=1.0, terminate=0.5, kill=0.5
    )
    actor = PoolActor(spec(), PoolConfig(size=2, timeouts=timeouts))
    supervisor = PoolHandle(await nursery.start(actor.run))
    asking = trio.CancelScope()

    async def job() -> None:
        with asking:
            await supervisor.run_job("cooperative", 60, timeout=60)

    nursery.start_soon(job)
    await trio.testing.wait_all_tasks_blocked()
    busy, idle = actor.pool.snapshot().helpers
    assert busy is not None
    assert idle is not None
    assert (busy.state, idle.state) == ("busy", "idle")
    os.kill(busy.pid, signal.SIGSTOP)
    asking.cancel()  # the caller gives up: a CancelJob goes to the actor
    await trio.testing.wait_all_tasks_blocked()
    assert actor.pool.snapshot().helpers[0].state == "cancelling"  # type: ignore[union-attr]
    async with trio.open_nursery() as stopping:
        stopping.start_soon(functools.partial(supervisor.ref.stop, grace=60.0))
        try:
            with trio.fail_after(10):  # not cancel_grace: only a failure waits this long
                while actor.pool.snapshot().helpers[1].alive:  # type: ignore[union-attr]  # noqa: ASYNC110
                    await trio.sleep(0.01)
            stuck = actor.pool.snapshot().helpers[0]
            assert stuck is not None
            assert (stuck.state, stuck.unreaped, stuck.active_operation) == (
                "cancelling", False, "cooperative",
            )  # fmt: skip
        finally:
            os.kill(busy.pid, signal.SIGCONT)  # it reads the cancel frame and stops
    helpers = actor.pool.snapshot().helpers
    assert [h.exit_code for h in helpers if h is not None] == [0, 0]


async def test_startup_failure_fails_nursery_start(nursery):
    timeouts = HelperTimeouts(startup=0.3, kill=0.5)
    with pytest.raises(HelperStartupFailed):
        await _start(nursery, PoolConfig(timeouts=timeouts), fault="hang_startup")


async def test_a_failed_pool_recovers_by_itself_with_on_failure_restart(nursery):
    told: list[float] = []

    async def on_helper_exit() -> None:
        told.append(trio.current_time())
        await trio.lowlevel.checkpoint()

    config = PoolConfig(size=1, timeouts=FAST, max_restarts=0)
    actor = PoolActor(
        spec(),
        config,
        on_failure="restart",
        recovery=Backoff(base=0.05, cap=0.1, reset_after=60.0),
        on_helper_exit=on_helper_exit,
    )
    kinds = {"intensity_exceeded", "restart_scheduled", "restart_failed", "pool_restarted"}
    with actor.events.subscribe(kinds=kinds) as events:
        handle = PoolHandle(await nursery.start(actor.run))
        with pytest.raises(HelperExited):
            await handle.run_job("crash", 4, timeout=5)
        with pytest.raises(PoolRestarting):  # transient: the actor restarts the pool itself
            await handle.run_job("echo", 1, timeout=5)
        # The pool's own restarter's events, as with PoolConfig(restart=...) (§3.15).
        with trio.fail_after(10):
            seen = [await events.receive() for _ in range(3)]
        assert [event.kind for event in seen] == [
            "intensity_exceeded", "restart_scheduled", "pool_restarted"
        ]  # fmt: skip
        assert seen[1].details["attempt"] == 1
        assert 0.05 <= seen[1].details["delay"] <= 0.1
        assert not (await handle.snapshot()).failed
        assert await handle.run_job("echo", 2, timeout=5) == 2
        with trio.fail_after(10):
            while not any(at >= seen[2].time for at in told):  # noqa: ASYNC110
                await trio.sleep(0.01)  # the restart is told to on_helper_exit too
        assert events.receive_nowait() is None
    await handle.ref.stop()


async def test_on_failure_is_validated():
    with pytest.raises(ValueError, match="on_failure"):
        PoolActor(spec(), on_failure="sometimes")


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"job_id": [1], "operation": "echo"}, "job_id must be hashable"),
        ({"job_id": 1, "operation": ""}, "operation must be a str of 1..128"),
        ({"job_id": 1, "operation": "x" * 129}, "operation must be a str of 1..128"),
        ({"job_id": 1, "operation": 7}, "operation must be a str of 1..128"),
        ({"job_id": 1, "operation": "echo", "stall": -1}, "stall"),
        ({"job_id": 1, "operation": "echo", "stall": 0}, "stall"),
    ],
)
def test_run_job_messages_are_checked_where_they_are_made(fields, words):
    with pytest.raises(ValueError, match=words):
        RunJob(**fields)


async def test_a_raising_on_helper_exit_is_logged_and_the_actor_goes_on(nursery, caplog):
    calls: list[int] = []

    async def on_helper_exit() -> None:
        calls.append(1)
        raise RuntimeError("embedder bug")

    actor = PoolActor(spec(), PoolConfig(size=1, timeouts=FAST), on_helper_exit=on_helper_exit)
    handle = PoolHandle(await nursery.start(actor.run))
    with pytest.raises(HelperExited):
        await handle.run_job("crash", 4, timeout=5)
    with trio.fail_after(10):
        while not calls:  # noqa: ASYNC110 (the exit is noticed by the pool's reaper)
            await trio.sleep(0.01)
    assert await handle.run_job("echo", 2, timeout=5) == 2  # the actor still serves
    assert any("on_helper_exit raised" in r.getMessage() for r in caplog.records)
    await handle.ref.stop()


async def test_retire_idle_shuts_idle_helpers_down_while_jobs_run_on(nursery):
    # A server's shutdown begins: the idle helper goes now, the running job finishes,
    # a new job is refused; the pool closes only when the actor stops (design §3.8).
    actor = PoolActor(spec(), PoolConfig(size=2, timeouts=FAST))
    supervisor = PoolHandle(await nursery.start(actor.run))
    results: list[object] = []

    async def job() -> None:
        results.append(await supervisor.run_job("sleep", 0.5, timeout=10))

    async with trio.open_nursery() as jobs:
        jobs.start_soon(job)
        await trio.testing.wait_all_tasks_blocked()
        busy, idle = actor.pool.snapshot().helpers
        assert busy is not None
        assert idle is not None
        assert (busy.state, idle.state) == ("busy", "idle")
        supervisor.retire_idle()
        with trio.fail_after(5):  # the shutdown frame: at once, not after the job
            while actor.pool.snapshot().helpers[1].alive:  # type: ignore[union-attr]  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert actor.pool.snapshot().helpers[0].state == "busy"  # type: ignore[union-attr]
        with pytest.raises(PoolClosed):
            await supervisor.run_job("echo", 1, timeout=5)
    assert results == [0.5]
    gone = actor.pool.snapshot().helpers[1]
    assert gone is not None
    assert gone.exit_code == 0  # it obeyed the shutdown frame: no signal was needed
    await supervisor.ref.stop()


async def test_the_handle_checks_expect_too(nursery):
    supervisor = await _start(nursery)
    assert await supervisor.run_job("echo", "x", timeout=5, expect=str) == "x"
    with pytest.raises(TypeError, match="returned int, not str"):
        await supervisor.run_job("echo", 3, timeout=5, expect=str)
    await supervisor.ref.stop(grace=1.0)
