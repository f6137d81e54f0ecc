"""Starts that hang or are cut short: start timeouts, stops during starts (design §1.4).

Also the calls that race a start: ``max_children`` under concurrent ``start_child``,
and a live ref's ask while the old incarnation still ends (design §1.9, §1.10). All on
the autojump clock, with exact virtual times.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from actors import (
    Actor,
    ActorRestarting,
    ActorState,
    ActorStopped,
    Backoff,
    ChildSpec,
    ChildStartFailed,
    DynamicSupervisor,
    MaxChildren,
    Reply,
    RestartIntensityExceeded,
    Supervisor,
    SupervisorEvent,
)


class Hangs(Actor):
    """Its ``on_start`` never returns."""

    async def on_start(self) -> None:
        await trio.sleep_forever()

    async def handle(self, message: Any, reply: Reply[Any]) -> None:
        reply.send(message)


class Echo(Actor):
    """Answers every message with itself; ``"crash"`` raises."""

    async def handle(self, message: Any, reply: Reply[Any]) -> None:
        if message == "crash":
            raise ValueError("crash")
        reply.send(message)


class SlowStop(Actor):
    """``"crash"`` raises after 0.5 s; its ``on_stop`` then takes 4 s."""

    async def handle(self, message: Any, reply: Reply[Any]) -> None:
        if message == "crash":
            await trio.sleep(0.5)
            raise ValueError("crash")
        reply.send("ok")

    async def on_stop(self) -> None:
        await trio.sleep(4)


def test_start_timeout_is_validated() -> None:
    assert ChildSpec("a", Echo).start_timeout == 5.0
    assert ChildSpec("a", Echo, start_timeout=2).start_timeout == 2.0
    for bad in (0, -1, float("nan"), "5", True, 301):
        with pytest.raises(ValueError, match="start_timeout"):
            ChildSpec("a", Echo, start_timeout=bad)


@pytest.mark.parametrize(("shutdown", "ends"), [(5.0, 3.0), (0.5, 1.5), ("brutal_kill", 1.0)])
async def test_stop_during_first_start_cancels_the_start(
    autojump_clock: trio.testing.MockClock, shutdown: Any, ends: float
) -> None:
    # The stop's grace (2 s) or the child's shorter shutdown grace bounds the start.
    sup = Supervisor([ChildSpec("a", Hangs, shutdown=shutdown, start_timeout=60)])

    async def run() -> None:
        with pytest.raises(ActorStopped):
            await sup.run()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.sleep(1)
        await sup.ref.stop(2)
        assert trio.current_time() == ends
    assert sup.ref.state is ActorState.STOPPED


async def test_first_start_that_hangs_fails_at_its_start_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    events: list[SupervisorEvent] = []
    sup = Supervisor(
        [ChildSpec("ok", Echo), ChildSpec("a", Hangs, start_timeout=2)], on_event=events.append
    )
    async with trio.open_nursery() as nursery:
        with pytest.raises(ChildStartFailed, match="'a'") as caught:
            await nursery.start(sup.run)
    assert trio.current_time() == 2.0
    assert caught.value.details == {"supervisor": "supervisor", "child": "a",
                                    "reason": "start_timeout"}  # fmt: skip
    assert isinstance(caught.value.__cause__, TimeoutError)
    assert [(e.kind, e.child) for e in events] == [("child_started", "ok"), ("child_stopped", "ok")]


async def test_start_child_that_hangs_frees_the_calls_behind_it(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    ref = await nursery.start(Supervisor([ChildSpec("a", Echo)]).run)
    failed: list[ChildStartFailed] = []

    async def start() -> None:
        with pytest.raises(ChildStartFailed) as caught:
            await ref.start_child(ChildSpec("h", Hangs, start_timeout=3))
        failed.append(caught.value)

    nursery.start_soon(start)
    await trio.testing.wait_all_tasks_blocked()
    await ref.terminate_child("a")  # waits its turn behind the start, no longer
    assert trio.current_time() == 3.0
    assert failed[0].details["reason"] == "start_timeout"
    assert [c.id for c in ref.which_children()] == ["a"]  # the failed spec is not kept
    await ref.stop()


async def test_restart_that_hangs_is_a_failed_restart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    starts = [0]

    def make() -> Actor:
        starts[0] += 1
        return Echo() if starts[0] == 1 else Hangs()

    events: list[SupervisorEvent] = []
    sup = Supervisor(
        [ChildSpec("a", make, start_timeout=1)],
        backoff=Backoff(base=0.5, cap=0.5),
        max_restarts=1,
        on_event=events.append,
    )

    async def run(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        with pytest.raises(RestartIntensityExceeded):
            await sup.run(task_status=task_status)

    async with trio.open_nursery() as nursery:
        ref = await nursery.start(run)
        ref.child("a").try_send("crash")
    # Crash at 0, backoff 0.5, the start hangs until its timeout at 1.5; the retry is
    # the second restart within the period: more than max_restarts.
    assert [(e.kind, e.incarnation, e.reason, e.time) for e in events[1:]] == [
        ("child_exited", 1, "ValueError", 0.0),
        ("child_restarting", 2, None, 0.0),
        ("restart_failed", 2, "start_timeout", 1.5),
        ("intensity_exceeded", 2, None, 1.5),
    ]
    assert sup.ref.state is ActorState.FAILED


async def test_start_child_cut_short_by_stop_raises_actor_stopped(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    ref = await nursery.start(Supervisor([ChildSpec("a", Echo)]).run)
    errors: list[BaseException] = []

    async def start() -> None:
        try:
            await ref.start_child(ChildSpec("h", Hangs, start_timeout=60))
        except ActorStopped as exc:
            errors.append(exc)

    nursery.start_soon(start)
    await trio.sleep(1)
    await ref.stop(2)
    # The start under way is cancelled at the stop's grace (shorter than its shutdown).
    assert trio.current_time() == 3.0
    assert len(errors) == 1
    assert type(errors[0]) is ActorStopped
    assert ref.state is ActorState.STOPPED


async def test_max_children_holds_against_concurrent_starts(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    ref = await nursery.start(DynamicSupervisor(ChildSpec("w", Echo), max_children=2).run)
    refused: list[MaxChildren] = []

    async def start() -> None:
        try:
            await ref.start_child()
        except MaxChildren as exc:
            refused.append(exc)

    async with trio.open_nursery() as starters:
        for _ in range(10):
            starters.start_soon(start)
    assert ref.count_children().active == 2
    assert len(refused) == 8
    assert refused[0].details["max_children"] == 2
    await ref.stop()


async def test_live_ask_while_the_old_incarnation_still_ends_is_restarting(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    ref = await nursery.start(Supervisor([ChildSpec("a", SlowStop)]).run)
    live = ref.child("a")
    live.try_send("crash")
    await trio.sleep(0.1)
    # Queued behind the crash; failed when the crash ends the loop at 0.5, while
    # on_stop runs until 4.5: the supervisor has not decided by the deadline (2.1).
    with pytest.raises(ActorRestarting):
        await live.ask("hi", timeout=2)
    assert trio.current_time() == pytest.approx(2.1)
    await trio.sleep(3)
    assert await live.ask("hi", timeout=1) == "ok"
    assert live.incarnation == 2
