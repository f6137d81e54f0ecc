"""References that survive restarts: ``SupervisorRef.child`` (design §1.9).

On the autojump clock with the default backoff, so a crashed child's new incarnation
starts exactly 25 ms later. What is checked: a message sent or asked while the child
restarts waits for the new incarnation (bounded) or fails with the retryable
``ActorRestarting``; ``ActorStopped`` only once the child is gone for good.
"""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing
from otp_support import Board, child, settle

from actors import (
    ActorCrashed,
    ActorRestarting,
    ActorState,
    ActorStopped,
    LiveRef,
    RestartIntensityExceeded,
    Supervisor,
    SupervisorEvent,
    SupervisorRef,
)


async def crashed(live: LiveRef) -> None:
    with pytest.raises(ActorCrashed):
        await live.ask("crash", timeout=1)


async def test_the_registry_gives_one_live_ref_per_child(nursery: trio.Nursery) -> None:
    board = Board()
    ref: SupervisorRef = await nursery.start(Supervisor([child("cache", board)]).run)
    live = ref.child("cache")
    assert live is ref.child("cache")
    assert (live.name, live.incarnation, live.state) == ("cache", 1, ActorState.RUNNING)
    assert repr(live) == "<LiveRef 'cache' running>"
    assert live.statistics().capacity == 16
    await ref.stop()
    assert live.state is ActorState.STOPPED


async def test_ask_during_restart_waits_for_the_new_incarnation(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    board = Board()
    ref: SupervisorRef = await nursery.start(Supervisor([child("cache", board)]).run)
    live = ref.child("cache")
    await crashed(live)
    assert live.current() is None  # the crashed incarnation takes no more messages
    await trio.testing.wait_all_tasks_blocked()
    assert live.state is ActorState.STARTING
    assert await live.ask("ping", timeout=1) == ("ping", 2)
    assert trio.current_time() == 0.025  # the restart's backoff, not the ask's timeout
    assert live.incarnation == 2


async def test_send_during_restart_reaches_the_new_incarnation(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    board = Board()
    ref: SupervisorRef = await nursery.start(Supervisor([child("cache", board)]).run)
    live = ref.child("cache")
    await crashed(live)
    with trio.testing.assert_checkpoints():
        await live.send("slow")
    assert trio.current_time() == 0.025
    await trio.sleep(6)
    assert board.kinds("slow_done") == [("cache", 2)]


async def test_a_send_refused_by_a_stopping_incarnation_goes_to_the_next(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    board = Board()
    sup = Supervisor([child("cache", board)], restart_wait=10)
    ref: SupervisorRef = await nursery.start(sup.run)
    live = ref.child("cache")
    first = live.current()
    assert first is not None
    await first.send("slow")  # the handler is busy for 5 s
    await trio.testing.wait_all_tasks_blocked()
    first.stop_nowait(10)  # closes its mailbox now; a permanent child is restarted
    await live.send("slow")
    assert trio.current_time() == 5.025
    await trio.sleep(6)
    assert board.kinds("slow_done") == [("cache", 1), ("cache", 2)]


async def test_ask_shorter_than_the_restart_fails_retryably(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    board = Board()
    ref: SupervisorRef = await nursery.start(Supervisor([child("cache", board)]).run)
    live = ref.child("cache")
    await crashed(live)
    with pytest.raises(ActorRestarting) as caught:
        await live.ask("ping", timeout=0.01)
    assert trio.current_time() == 0.01
    assert (caught.value.code, caught.value.retryable) == ("actor_restarting", True)
    assert caught.value.details == {"actor": "cache", "supervisor": "supervisor"}
    with pytest.raises(ActorRestarting):
        live.try_send("ping")
    with pytest.raises(ActorRestarting):
        live.statistics()
    assert await live.ask("ping", timeout=1) == ("ping", 2)


async def test_send_waits_at_most_restart_wait(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    board = Board()
    sup = Supervisor(
        [child("cache", board, fail={2, 3, 4, 5, 6})], restart_wait=0.1, max_restarts=9
    )
    ref: SupervisorRef = await nursery.start(sup.run)
    live = ref.child("cache")
    await crashed(live)
    with pytest.raises(ActorRestarting):
        await live.send("ping")
    assert trio.current_time() == 0.1


async def test_an_ask_taken_by_an_incarnation_that_crashes_is_restarting_not_stopped(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    board = Board()
    ref: SupervisorRef = await nursery.start(Supervisor([child("cache", board)]).run)
    live = ref.child("cache")
    first = live.current()
    assert first is not None
    await first.send("slow")
    await first.send("crash")  # queued after the slow one: the actor crashes at 5 s

    async def asker() -> None:
        with pytest.raises(ActorRestarting):
            await live.ask("ping", timeout=60)  # queued behind the crash
        assert trio.current_time() == 5

    async with trio.open_nursery() as inner:
        inner.start_soon(asker)
    assert await live.ask("ping", timeout=1) == ("ping", 2)


@pytest.mark.parametrize("how", ["temporary", "transient_normal", "terminate", "delete", "stop"])
async def test_actor_stopped_only_once_the_child_is_gone_for_good(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, how: str
) -> None:
    board = Board()
    restart = {"temporary": "temporary", "transient_normal": "transient"}.get(how, "permanent")
    ref: SupervisorRef = await nursery.start(Supervisor([child("c", board, restart)]).run)
    live = ref.child("c")
    if how == "temporary":
        await crashed(live)
    elif how == "transient_normal":
        await live.ask("exit", timeout=1)
    elif how == "terminate":
        await ref.terminate_child("c")
    elif how == "delete":
        await ref.terminate_child("c")
        await ref.delete_child("c")
    else:
        await ref.stop()
    await settle()
    with pytest.raises(ActorStopped, match="will not be restarted"):
        await live.ask("ping", timeout=1)
    with pytest.raises(ActorStopped):
        await live.send("ping")
    with pytest.raises(ActorStopped):
        live.try_send("ping")
    assert live.state is ActorState.STOPPED


async def test_a_waiting_asker_learns_when_the_supervisor_gives_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    board = Board()
    sup = Supervisor([child("c", board, fail={2, 3, 4})], max_restarts=1)
    outcome: list[tuple[float, str]] = []

    async def asker(live: LiveRef) -> None:
        with pytest.raises(ActorStopped):
            await live.ask("ping", timeout=60)
        outcome.append((trio.current_time(), "stopped"))

    with pytest.RaisesGroup(RestartIntensityExceeded):
        async with trio.open_nursery() as nursery:
            ref: SupervisorRef = await nursery.start(sup.run)
            live = ref.child("c")
            await crashed(live)
            nursery.start_soon(asker, live)
            await trio.sleep_forever()
    # The restart at 0.025 fails; the retry counts the second restart: too many.
    assert outcome == [(0.025, "stopped")]


async def test_subscribers_learn_a_child_crashed_and_logs_say_so(
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    caplog: pytest.LogCaptureFixture,
) -> None:
    board = Board()
    events: list[SupervisorEvent] = []
    caplog.set_level(logging.DEBUG, logger="actors.supervisor")
    sup = Supervisor([child("c", board, fail={2})], on_event=events.append, name="app")
    ref: SupervisorRef = await nursery.start(sup.run)
    await crashed(ref.child("c"))
    await settle()
    assert [(e.kind, e.incarnation, e.reason, round(e.time, 9)) for e in events] == [
        ("child_started", 1, None, 0),
        ("child_exited", 1, "ValueError", 0),
        ("child_restarting", 2, None, 0),
        ("restart_failed", 2, "OSError", 0.025),
        ("child_restarting", 3, None, 0.025),
        ("child_started", 3, None, 0.075),
    ]
    assert events[1].message == "ValueError: c crashed"
    records = [(r.levelname, r.__dict__["event"]) for r in caplog.records]
    assert records == [
        ("DEBUG", "child_started"),
        ("WARNING", "child_exited"),
        ("WARNING", "child_restarting"),
        ("WARNING", "restart_failed"),
        ("WARNING", "child_restarting"),
        ("DEBUG", "child_started"),
    ]
    failed = caplog.records[3]
    assert failed.__dict__["supervisor"] == "app"
    assert failed.__dict__["child"] == "c"
    assert failed.__dict__["child_reason"] == "OSError"


async def test_intensity_exceeded_is_an_error_record(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    board = Board()
    caplog.set_level(logging.INFO, logger="actors.supervisor")
    with pytest.RaisesGroup(RestartIntensityExceeded):
        async with trio.open_nursery() as nursery:
            ref: SupervisorRef = await nursery.start(
                Supervisor([child("c", board)], max_restarts=0).run
            )
            await crashed(ref.child("c"))
            await trio.sleep_forever()
    (error,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert error.__dict__["event"] == "intensity_exceeded"
    assert "more than 0 restarts within 5 s" in error.getMessage()


async def test_a_supervisor_child_is_reached_through_child_supervisor(
    nursery: trio.Nursery,
) -> None:
    board = Board()
    inner = child("w", board)
    top = Supervisor([type(inner)("sub", lambda: Supervisor([inner]))])
    ref: SupervisorRef = await nursery.start(top.run)
    with pytest.raises(TypeError, match="is a supervisor"):
        await ref.child("sub").send("ping")
    sub = ref.child_supervisor("sub")
    assert await sub.child("w").ask("ping", timeout=1) == ("ping", 1)
    with pytest.raises(TypeError, match="not a supervisor"):
        sub.child_supervisor("w")
