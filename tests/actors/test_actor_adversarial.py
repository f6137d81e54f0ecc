"""Adversarial tests of the actor core (design §1.1-§1.3, §1.5, §1.6).

Cancellation at every step of send/ask/stop, fencing of late replies, askers never
hanging, self-stop, error codes and duration validation. All on the autojump clock with
exact virtual times.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
import trio
import trio.testing

from actors import (
    Actor,
    ActorCrashed,
    ActorError,
    ActorRef,
    ActorState,
    ActorStopped,
    AskTimeout,
    MailboxFull,
    Reply,
)
from actors._core import _actor as ref_module


class Gatekeeper(Actor):
    """Each message names what to do; replies can be held and answered later."""

    mailbox_capacity = 1

    def __init__(self) -> None:
        self.held: list[Reply] = []
        self.seen: list[Any] = []
        self.stop_returned: list[float] = []
        self.on_stop_at: list[float] = []

    async def handle(self, message: Any, reply: Reply) -> None:
        kind, arg = message if isinstance(message, tuple) else (message, None)
        self.seen.append(message)
        if kind == "sleep":
            await trio.sleep(arg)
            reply.send(("slept", arg))
        elif kind == "forever":
            await trio.sleep_forever()
        elif kind == "hold":
            self.held.append(reply)
        elif kind == "release":
            for held in self.held:
                held.send(arg)
            self.held.clear()
            reply.send("released")
        elif kind == "crash":
            raise RuntimeError("boom")
        elif kind == "self_stop":
            await self.ref.stop(grace=arg)
            self.stop_returned.append(trio.current_time())
            reply.send("stopping")
        elif kind == "task_stop":
            self.nursery.start_soon(self._stop_from_task, arg)
            reply.send("spawned")
        else:
            reply.send(message)

    async def _stop_from_task(self, grace: float) -> None:
        await trio.sleep(1)
        await self.ref.stop(grace=grace)
        self.stop_returned.append(trio.current_time())

    async def on_stop(self) -> None:
        self.on_stop_at.append(trio.current_time())


# --- cancellation at every step ---------------------------------------------------------


async def test_cancelled_ask_mid_handle_drops_the_late_reply(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    actor = Gatekeeper()
    ref: ActorRef = await nursery.start(actor.run)
    with trio.move_on_after(1) as scope:
        await ref.ask(("sleep", 3), timeout=10)
    assert scope.cancelled_caught
    assert trio.current_time() == 1
    # The handler is still mid-handle; its reply (at t=3) goes nowhere, and the next
    # ask, queued behind it, gets its own answer.
    assert await ref.ask("next", timeout=10) == "next"
    assert trio.current_time() == 3
    assert actor.seen == [("sleep", 3), "next"]


async def test_cancelled_send_on_a_full_mailbox_delivers_nothing(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    actor = Gatekeeper()
    ref: ActorRef = await nursery.start(actor.run)
    await ref.send(("sleep", 5))  # being handled
    await trio.testing.wait_all_tasks_blocked()
    await ref.send("queued")  # fills the 1-slot mailbox
    with trio.move_on_after(1):
        await ref.send("cancelled")
    assert ref.statistics().senders_waiting == 0
    with pytest.raises(MailboxFull) as info:
        ref.try_send("refused")
    assert (info.value.code, info.value.category) == ("mailbox_full", "transient")
    assert await ref.ask("last", timeout=10) == "last"
    assert trio.current_time() == 5
    assert actor.seen == [("sleep", 5), "queued", "last"]


async def test_stop_racing_with_senders_and_askers_leaves_nobody_hanging(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    actor = Gatekeeper()
    ref: ActorRef = await nursery.start(actor.run)
    outcomes: dict[str, tuple[float, str]] = {}

    async def ask(label: str, message: Any) -> None:
        try:
            value = await ref.ask(message, timeout=100)
            outcomes[label] = (trio.current_time(), f"ok {value}")
        except ActorError as exc:
            outcomes[label] = (trio.current_time(), exc.code)

    async def send(label: str, message: Any) -> None:
        try:
            await ref.send(message)
            outcomes[label] = (trio.current_time(), "sent")
        except ActorError as exc:
            outcomes[label] = (trio.current_time(), exc.code)

    nursery.start_soon(ask, "handled", ("sleep", 2))
    await trio.testing.wait_all_tasks_blocked()
    nursery.start_soon(ask, "queued", ("sleep", 2))
    await trio.testing.wait_all_tasks_blocked()
    nursery.start_soon(ask, "blocked_ask", "x")
    nursery.start_soon(send, "blocked_send", "y")
    await trio.testing.wait_all_tasks_blocked()
    assert ref.statistics().senders_waiting == 2
    await ref.stop(grace=3)
    await trio.testing.wait_all_tasks_blocked()
    assert trio.current_time() == 3
    assert outcomes == {
        "blocked_ask": (0, "actor_stopped"),  # woken at once by the close
        "blocked_send": (0, "actor_stopped"),
        "handled": (2, "ok ('slept', 2)"),
        "queued": (3, "actor_stopped"),  # cut at the grace deadline mid-handle
    }
    with trio.testing.assert_checkpoints(), pytest.raises(ActorStopped) as info:
        await ref.ask("late", timeout=1)
    assert (info.value.code, info.value.category) == ("actor_stopped", "permanent")
    assert trio.current_time() == 3
    assert actor.on_stop_at == [3]


async def test_handler_that_never_returns_is_cut_at_exactly_the_grace(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    actor = Gatekeeper()
    ref: ActorRef = await nursery.start(actor.run)
    await ref.send("forever")
    await trio.sleep(0.5)
    await ref.stop(grace=2.25)
    assert trio.current_time() == 2.75
    assert ref.state is ActorState.STOPPED
    assert actor.on_stop_at == [2.75]


async def test_two_concurrent_stops_both_return_at_the_earliest_deadline(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    actor = Gatekeeper()
    ref: ActorRef = await nursery.start(actor.run)
    await ref.send("forever")
    returned: list[tuple[float, float]] = []

    async def stop(grace: float, after: float) -> None:
        await trio.sleep(after)
        await ref.stop(grace=grace)
        returned.append((grace, trio.current_time()))

    async with trio.open_nursery() as inner:
        inner.start_soon(stop, 10.0, 0.0)
        inner.start_soon(stop, 1.0, 2.0)  # later call, earlier deadline: wins
        inner.start_soon(stop, 5.0, 2.5)  # later deadline: does not extend it
    assert sorted(returned) == [(1.0, 3.0), (5.0, 3.0), (10.0, 3.0)]
    assert actor.on_stop_at == [3.0]


async def test_stop_from_inside_the_handler_does_not_wait_for_itself(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    # Awaiting stop() from the actor's own handler used to wait for the handler itself
    # to finish: a self-deadlock, broken only when the grace ran out and cancelled the
    # handler (its ask then failed with ActorStopped instead of getting the answer).
    actor = Gatekeeper()
    ref: ActorRef = await nursery.start(actor.run)
    assert await ref.ask(("self_stop", 5.0), timeout=10) == "stopping"
    assert actor.stop_returned == [0.0]
    await ref.wait_stopped()
    assert trio.current_time() == 0.0
    assert ref.state is ActorState.STOPPED
    assert actor.on_stop_at == [0.0]


async def test_stop_from_a_task_in_the_actors_nursery_does_not_wait_for_itself(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    actor = Gatekeeper()
    ref: ActorRef = await nursery.start(actor.run)
    assert await ref.ask(("task_stop", 5.0), timeout=10) == "spawned"
    await ref.wait_stopped()
    assert actor.stop_returned == [1.0]
    assert trio.current_time() == 1.0
    assert actor.on_stop_at == [1.0]


async def test_self_stop_with_zero_grace_cancels_the_handler_at_once(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    actor = Gatekeeper()
    ref: ActorRef = await nursery.start(actor.run)
    with pytest.raises(ActorStopped):
        await ref.ask(("self_stop", 0.0), timeout=10)
    assert actor.stop_returned == []  # the checkpoint in stop() was cancelled
    assert trio.current_time() == 0.0
    assert ref.state is ActorState.STOPPED


async def test_stop_while_on_start_runs_fails_start_with_actor_stopped(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    # It used to surface as trio's bare RuntimeError("child exited without calling
    # task_status.started()").
    class SlowStart(Gatekeeper):
        async def on_start(self) -> None:
            await trio.sleep(10)

    actor = SlowStart()

    async def stopper() -> None:
        await trio.sleep(1)
        await actor.ref.stop(grace=0.5)

    nursery.start_soon(stopper)
    with pytest.raises(ActorStopped, match="stopped while starting"):
        await nursery.start(actor.run)
    assert trio.current_time() == 1.5
    assert actor.state is ActorState.STOPPED
    assert actor.on_stop_at == []  # on_stop runs only after a finished on_start


async def test_crash_with_queued_and_blocked_askers_answers_everyone(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    actor = Gatekeeper()
    crashed: list[BaseException] = []
    outcomes: dict[str, str] = {}

    async def run_actor(task_status: trio.TaskStatus[ActorRef]) -> None:
        try:
            await actor.run(task_status=task_status)
        except RuntimeError as exc:
            crashed.append(exc)

    ref: ActorRef = await nursery.start(run_actor)

    async def ask(label: str, message: Any) -> None:
        try:
            await ref.ask(message, timeout=100)
            outcomes[label] = "ok"
        except ActorError as exc:
            outcomes[label] = exc.code

    await ref.send(("hold", None))  # a held reply of a send: nothing to fail
    nursery.start_soon(ask, "held", "hold")
    await trio.testing.wait_all_tasks_blocked()
    nursery.start_soon(ask, "crasher", ("sleep", 1))
    await trio.testing.wait_all_tasks_blocked()
    nursery.start_soon(ask, "queued", "crash")
    await trio.testing.wait_all_tasks_blocked()
    nursery.start_soon(ask, "blocked", "never")
    await trio.testing.wait_all_tasks_blocked()
    await ref.wait_stopped()
    await trio.testing.wait_all_tasks_blocked()
    assert outcomes == {
        "blocked": "actor_stopped",
        "held": "actor_stopped",
        "crasher": "ok",
        "queued": "actor_crashed",
    }
    assert ref.state is ActorState.FAILED
    assert [type(e) for e in crashed] == [RuntimeError]
    assert trio.current_time() == 1


async def test_outside_cancel_with_work_in_flight_leaves_no_task(
    autojump_clock: trio.testing.MockClock,
) -> None:
    actors = [Gatekeeper() for _ in range(3)]
    refs: list[ActorRef] = []
    failures: list[str] = []

    async def ask(ref: ActorRef) -> None:
        try:
            await ref.ask(("sleep", 100), timeout=200)
        except ActorStopped as exc:
            failures.append(exc.code)

    with trio.move_on_after(1):
        async with trio.open_nursery() as outer, trio.open_nursery() as actor_nursery:
            for actor in actors:
                refs.append(await actor_nursery.start(actor.run))
            for ref in refs:
                outer.start_soon(ask, ref)
                await ref.ask(("task_stop", 100), timeout=1)
    task = trio.lowlevel.current_task()
    assert all(not n.child_tasks for n in task.child_nurseries)
    assert [ref.state for ref in refs] == [ActorState.STOPPED] * 3
    assert all(ref.statistics().closed for ref in refs)
    assert trio.current_time() == 1


# --- fencing ----------------------------------------------------------------------------


async def test_fencing_does_not_depend_on_ask_ids(
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Even if every ask got the same id (as if the counter wrapped), a late reply goes
    # to the abandoned reply cell of its own ask, never to a later one.
    monkeypatch.setattr(ref_module, "_ask_ids", itertools.repeat(7))
    actor = Gatekeeper()
    ref: ActorRef = await nursery.start(actor.run)
    for _ in range(3):
        with pytest.raises(AskTimeout):
            await ref.ask("hold", timeout=1)
    got: list[Any] = []

    async def later() -> None:
        got.append(await ref.ask("hold", timeout=10))

    nursery.start_soon(later)
    await trio.testing.wait_all_tasks_blocked()
    assert [r.ask_id for r in actor.held] == [7, 7, 7, 7]
    assert [r.wanted for r in actor.held] == [False, False, False, True]
    first = actor.held[0]
    assert await ref.ask(("release", "late"), timeout=1) == "released"
    await trio.testing.wait_all_tasks_blocked()
    assert got == ["late"]  # only the live ask saw an answer, once
    first.send("again")  # answering twice is a no-op, never an error
    assert first.answered


async def test_abandoned_asks_leave_nothing_behind(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    # Internals: the actor keeps only live unanswered asks (to fail them when it
    # stops). An asker that gives up takes its cell out at once, so the held replies of
    # timed-out asks never pile up, and a live one is still failed on stop.
    actor = Gatekeeper()
    ref: ActorRef = await nursery.start(actor.run)
    cell = actor._cell
    assert cell is not None
    for _ in range(100):
        with pytest.raises(AskTimeout):
            await ref.ask("hold", timeout=1)
    assert cell.parked == set()
    assert not any(r.wanted or r.answered for r in actor.held)
    outcome: list[str] = []

    async def live() -> None:
        try:
            await ref.ask("hold", timeout=10)
        except ActorStopped as exc:
            outcome.append(exc.code)

    nursery.start_soon(live)
    await trio.testing.wait_all_tasks_blocked()
    assert cell.parked == {actor.held[-1]}
    await ref.stop(grace=1)
    await trio.testing.wait_all_tasks_blocked()
    assert outcome == ["actor_stopped"]
    assert cell.parked == set()
    assert trio.current_time() == 100


async def test_ask_timeout_and_cancel_race_with_the_answer(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    actor = Gatekeeper()
    ref: ActorRef = await nursery.start(actor.run)
    # The answer and the deadline fall on the same instant: the deadline wins (its
    # cancellation is delivered as the clock jumps), and the answer is dropped.
    with pytest.raises(AskTimeout) as info:
        await ref.ask(("sleep", 1), timeout=1)
    assert (info.value.code, info.value.category) == ("ask_timeout", "transient")
    assert trio.current_time() == 1
    for i in range(50):
        with trio.move_on_after(0.5 if i % 2 else 1.5):
            await ref.ask(("sleep", 1), timeout=10)
    assert await ref.ask("ok", timeout=100) == "ok"
    assert ref.state is ActorState.RUNNING


# --- validation ---------------------------------------------------------------------------

BAD_DURATIONS = [
    (math.nan, "finite"),
    (math.inf, "finite"),
    (-math.inf, "finite"),
    (-1e-320, "0 seconds"),
    (True, "number"),
    (False, "number"),
    ("1", "number"),
    (None, "number"),
    (301, "<= 300"),
    (300.0000001, "<= 300"),
    (1e308, "<= 300"),
    (10**400, "<= 300"),  # used to raise OverflowError from float(), naming nothing
    (-(10**400), "0 seconds"),
]


@pytest.mark.parametrize(
    ("value", "why"), BAD_DURATIONS, ids=[f"bad{i}" for i in range(len(BAD_DURATIONS))]
)
async def test_durations_are_validated_and_named(
    nursery: trio.Nursery, value: object, why: str
) -> None:
    ref: ActorRef = await nursery.start(Gatekeeper().run)
    with pytest.raises(ValueError, match=r"^timeout .*" + why.replace(">= 0", "> 0")):
        await ref.ask("x", timeout=value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^grace .*" + why):
        await ref.stop(grace=value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^grace .*" + why):
        ref.stop_nowait(grace=value)  # type: ignore[arg-type]
    assert ref.state is ActorState.RUNNING


async def test_huge_int_error_message_is_bounded(nursery: trio.Nursery) -> None:
    ref: ActorRef = await nursery.start(Gatekeeper().run)
    with pytest.raises(ValueError, match=r"^grace ") as info:
        await ref.stop(grace=10**5000)  # repr() of it alone would raise ValueError
    assert len(str(info.value)) < 200


async def test_zero_and_negative_zero(nursery: trio.Nursery) -> None:
    ref: ActorRef = await nursery.start(Gatekeeper().run)
    for bad in (0, 0.0, -0.0):
        with pytest.raises(ValueError, match=r"^timeout must be > 0"):
            await ref.ask("x", timeout=bad)
    await ref.stop(grace=-0.0)  # zero grace is legal, even spelled -0.0
    assert ref.state is ActorState.STOPPED


async def test_error_codes_and_categories_are_stable() -> None:
    table = {
        ActorStopped: ("actor_stopped", "permanent"),
        ActorCrashed: ("actor_crashed", "transient"),
        MailboxFull: ("mailbox_full", "transient"),
        AskTimeout: ("ask_timeout", "transient"),
    }
    for cls, (code, category) in table.items():
        assert issubclass(cls, ActorError)
        assert (cls.code, cls.category) == (code, category)
        record = cls("x" * 5000).to_record()
        assert (record.code, record.category) == (code, category)
        assert len(record.message.encode()) <= 1024


class Unprintable(RuntimeError):
    def __str__(self) -> str:
        raise ValueError("no str for you")


async def test_a_crash_whose_error_cannot_be_printed_still_answers_the_asker(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Building the ActorCrashed message used to raise inside the crash handler, so the
    # asker got ActorStopped (not ActorCrashed) and the parent saw the ValueError.
    class Crasher(Actor):
        async def handle(self, message: Any, reply: Reply) -> None:
            raise Unprintable

    failures: list[BaseException] = []

    async def run(task_status: trio.TaskStatus[ActorRef]) -> None:
        try:
            await Crasher().run(task_status=task_status)
        except Unprintable as exc:
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        ref: ActorRef = await nursery.start(run)
        with pytest.raises(ActorCrashed) as info:
            await ref.ask("x", timeout=1)
    assert "Unprintable: <unprintable>" in info.value.message
    assert info.value.details["error_type"] == "Unprintable"
    assert [type(e) for e in failures] == [Unprintable]


async def test_stop_from_a_task_the_actor_spawned_elsewhere_still_waits(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    # A task the handler started in an outer nursery is not inside the actor: the
    # actor can stop without it, so its stop() must wait for the actor as usual.
    returned: list[float] = []

    class Spawner(Gatekeeper):
        async def handle(self, message: Any, reply: Reply) -> None:
            if message == "spawn_outside":
                nursery.start_soon(self._stop_me)
                await trio.sleep(3)  # still busy when the stop comes
                reply.send("ok")
            else:
                await super().handle(message, reply)

        async def _stop_me(self) -> None:
            await self.ref.stop(grace=5)
            returned.append(trio.current_time())

    actor = Spawner()
    ref: ActorRef = await nursery.start(actor.run)
    assert await ref.ask("spawn_outside", timeout=10) == "ok"
    await ref.wait_stopped()
    await trio.testing.wait_all_tasks_blocked()
    assert returned == [3.0]  # waited until the actor had drained and stopped
    assert actor.on_stop_at == [3.0]
