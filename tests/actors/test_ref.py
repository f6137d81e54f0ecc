"""ActorRef send / try_send / ask / stop and Reply (design §1.2, §1.3, §1.6)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.testing

from actors import (
    Actor,
    ActorRef,
    ActorState,
    ActorStopped,
    AskTimeout,
    MailboxFull,
    Reply,
    UnknownRun,
)


class Keeper(Actor):
    """Echoes, but can hold replies to answer later and can block on a gate."""

    mailbox_capacity = 2

    def __init__(self) -> None:
        self.held: list[Reply] = []
        self.gate = trio.Event()
        self.seen: list[Any] = []

    async def handle(self, message: Any, reply: Reply) -> None:
        self.seen.append(message)
        if message == "hold":
            self.held.append(reply)
        elif message == "answer_held":
            for i, held in enumerate(self.held):
                held.send(f"held-{i}")
            self.held.clear()
            reply.send("ok")
        elif message == "gate":
            await self.gate.wait()
            reply.send("through")
        elif message == "sleep":
            await trio.sleep(10)
            reply.send("slept")
        elif message == "unknown":
            raise UnknownRun("no such run", run_id=7)
        else:
            reply.send(message)


async def test_send_and_ask_are_checkpoints(nursery: trio.Nursery) -> None:
    ref: ActorRef = await nursery.start(Keeper().run)
    with trio.testing.assert_checkpoints():
        await ref.send("x")
    with trio.testing.assert_checkpoints():
        assert await ref.ask("y", timeout=1) == "y"
    await ref.stop()
    with trio.testing.assert_checkpoints(), pytest.raises(ActorStopped):
        await ref.send("z")
    with trio.testing.assert_checkpoints():
        await ref.stop()  # already stopped: still a checkpoint


class Rendezvous(Keeper):
    """Keeper with a zero-capacity mailbox: every send meets the actor in person."""

    mailbox_capacity = 0


@pytest.mark.parametrize("actor_cls", [Keeper, Rendezvous])
async def test_ask_is_a_checkpoint_on_every_path(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, actor_cls: type[Keeper]
) -> None:
    actor = actor_cls()
    ref: ActorRef = await nursery.start(actor.run)
    # Fast path: the mailbox takes the message at once, the asker parks on its cell.
    with trio.testing.assert_checkpoints():
        assert await ref.ask("fast", timeout=1) == "fast"
    # An error answer.
    with trio.testing.assert_checkpoints(), pytest.raises(UnknownRun):
        await ref.ask("unknown", timeout=1)
    # Slow path: the actor is busy, so the ask waits for mailbox space (capacity 2:
    # filled; capacity 0: nobody receiving). The answer may then be in the cell before
    # the asker runs again, so it never parks on the cell; still a checkpoint.
    await ref.send("gate")
    await trio.testing.wait_all_tasks_blocked()
    for i in range(actor.mailbox_capacity):
        ref.try_send(f"fill-{i}")
    results: list[Any] = []

    async def slow_ask() -> None:
        with trio.testing.assert_checkpoints():
            results.append(await ref.ask("slow", timeout=5))

    nursery.start_soon(slow_ask)
    await trio.testing.wait_all_tasks_blocked()
    assert ref.statistics().senders_waiting == 1
    actor.gate.set()
    await trio.testing.wait_all_tasks_blocked()
    assert results == ["slow"]
    # Timeout path.
    with trio.testing.assert_checkpoints(), pytest.raises(AskTimeout):
        await ref.ask("hold", timeout=1)
    assert trio.current_time() == 1


async def test_already_cancelled_send_and_ask_queue_nothing(nursery: trio.Nursery) -> None:
    actor = Keeper()
    ref: ActorRef = await nursery.start(actor.run)
    with trio.CancelScope() as scope:
        scope.cancel()
        await ref.ask("never asked", timeout=1)
    assert scope.cancelled_caught
    with trio.CancelScope() as scope:
        scope.cancel()
        await ref.send("never sent")
    assert scope.cancelled_caught
    assert await ref.ask("after", timeout=1) == "after"
    assert actor.seen == ["after"]  # the cancelled calls delivered nothing


async def test_answer_before_the_cancel_wins(nursery: trio.Nursery) -> None:
    # The handler answers, then cancels the asker's scope before the asker runs again:
    # the answer was already delivered to the cell, so ask returns it (the cancel hits
    # the asker's next checkpoint instead).
    scopes: list[trio.CancelScope] = []

    class AnswerThenCancel(Actor):
        async def handle(self, message: Any, reply: Reply) -> None:
            reply.send(message)
            scopes[0].cancel()

    ref: ActorRef = await nursery.start(AnswerThenCancel().run)
    got: list[Any] = []
    with trio.CancelScope() as scope:
        scopes.append(scope)
        got.append(await ref.ask("first", timeout=1))
        await trio.lowlevel.checkpoint()
        got.append("not reached")
    assert scope.cancelled_caught
    assert got == ["first"]


async def test_send_backpressure_waits_for_space(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    actor = Keeper()
    ref: ActorRef = await nursery.start(actor.run)
    await ref.send("gate")  # the actor blocks on it
    await trio.testing.wait_all_tasks_blocked()
    await ref.send(1)
    await ref.send(2)  # mailbox (capacity 2) is now full
    sent_at: list[float] = []

    async def third() -> None:
        await ref.send(3)
        sent_at.append(trio.current_time())

    nursery.start_soon(third)
    await trio.testing.wait_all_tasks_blocked()
    assert ref.statistics().senders_waiting == 1
    with pytest.raises(MailboxFull) as info:
        ref.try_send(4)
    assert info.value.retryable
    await trio.sleep(5)
    assert sent_at == []
    actor.gate.set()
    await trio.testing.wait_all_tasks_blocked()
    assert sent_at == [5.0]
    assert actor.seen == ["gate", 1, 2, 3]


async def test_stopped_actor_refuses_at_once(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ref: ActorRef = await nursery.start(Keeper().run)
    await ref.stop()
    assert ref.state is ActorState.STOPPED
    start = trio.current_time()
    with pytest.raises(ActorStopped) as info:
        await ref.send(1)
    assert info.value.code == "actor_stopped"
    with pytest.raises(ActorStopped):
        ref.try_send(1)
    with pytest.raises(ActorStopped):
        await ref.ask(1, timeout=5)
    assert trio.current_time() == start


async def test_stopping_actor_refuses_and_wakes_blocked_senders(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    actor = Keeper()
    ref: ActorRef = await nursery.start(actor.run)
    await ref.send("gate")
    await trio.testing.wait_all_tasks_blocked()
    ref.try_send(1)
    ref.try_send(2)
    outcome: list[tuple[str, float]] = []

    async def blocked() -> None:
        try:
            await ref.send(3)
        except ActorStopped:
            outcome.append(("stopped", trio.current_time()))

    nursery.start_soon(blocked)
    await trio.testing.wait_all_tasks_blocked()
    nursery.start_soon(ref.stop, 10.0)
    await trio.testing.wait_all_tasks_blocked()
    assert ref.state is ActorState.STOPPING
    assert outcome == [("stopped", 0.0)]
    with pytest.raises(ActorStopped):
        ref.try_send(9)
    actor.gate.set()
    await ref.wait_stopped()
    assert actor.seen == ["gate", 1, 2]  # queued messages were drained


async def test_ask_timeout_at_exact_time(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ref: ActorRef = await nursery.start(Keeper().run)
    with pytest.raises(AskTimeout) as info:
        await ref.ask("hold", timeout=1.5)
    assert trio.current_time() == 1.5
    assert info.value.code == "ask_timeout"
    assert info.value.retryable
    assert not isinstance(info.value, trio.TooSlowError)
    assert info.value.details == {"actor": "Keeper", "timeout": 1.5}


async def test_ask_timeout_covers_waiting_for_mailbox_space(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    actor = Keeper()
    ref: ActorRef = await nursery.start(actor.run)
    await ref.send("gate")
    await trio.testing.wait_all_tasks_blocked()
    ref.try_send(1)
    ref.try_send(2)
    with pytest.raises(AskTimeout):
        await ref.ask("never queued", timeout=0.5)
    assert trio.current_time() == 0.5
    actor.gate.set()
    assert await ref.ask("after", timeout=1) == "after"
    assert "never queued" not in actor.seen


async def test_late_reply_never_reaches_a_later_ask(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    actor = Keeper()
    ref: ActorRef = await nursery.start(actor.run)
    with pytest.raises(AskTimeout):
        await ref.ask("hold", timeout=1)
    first = actor.held[0]
    assert not first.wanted  # the asker left
    result: list[Any] = []

    async def second_ask() -> None:
        result.append(await ref.ask("hold", timeout=5))

    nursery.start_soon(second_ask)
    await trio.testing.wait_all_tasks_blocked()
    second = actor.held[1]
    assert second.wanted
    assert second.ask_id != first.ask_id
    assert await ref.ask("answer_held", timeout=1) == "ok"
    await trio.testing.wait_all_tasks_blocked()
    # held-0 (the late reply) went nowhere; the second ask got its own answer.
    assert result == ["held-1"]
    assert first.answered
    assert second.answered


async def test_handler_actor_error_goes_to_asker_and_actor_continues(
    nursery: trio.Nursery,
) -> None:
    ref: ActorRef = await nursery.start(Keeper().run)
    with pytest.raises(UnknownRun) as info:
        await ref.ask("unknown", timeout=1)
    assert info.value.details == {"run_id": 7}
    # data, not the handler's traceback chain (design §1.5)
    assert info.value.__cause__ is None
    await ref.send("unknown")  # for a plain send it is dropped
    assert ref.state is ActorState.RUNNING
    assert await ref.ask("still here", timeout=1) == "still here"


async def test_reply_semantics(nursery: trio.Nursery) -> None:
    replies: list[Reply] = []

    class Capture(Actor):
        async def handle(self, message: Any, reply: Reply) -> None:
            replies.append(reply)
            assert reply.wanted == (message == "ask")
            reply.send(1)
            reply.send(2)  # dropped: the first answer wins
            reply.fail(UnknownRun("dropped too"))
            assert not reply.wanted

    ref: ActorRef = await nursery.start(Capture().run)
    await ref.send("send")
    assert await ref.ask("ask", timeout=1) == 1
    no_reply, ask_reply = replies
    assert no_reply.answered
    assert no_reply.ask_id == 0
    assert ask_reply.ask_id > 0
    with pytest.raises(TypeError, match="ActorError"):
        ask_reply.fail(ValueError("nope"))  # type: ignore[arg-type]
    assert repr(no_reply) == "<Reply to a send>"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (math.nan, "finite"),
        (math.inf, "finite"),
        (-1, "> 0"),
        (0, "> 0"),
        (True, "number of seconds"),
        (300.5, "<= 300"),
    ],
)
async def test_ask_timeout_is_validated(nursery: trio.Nursery, value: object, why: str) -> None:
    ref: ActorRef = await nursery.start(Keeper().run)
    with pytest.raises(ValueError, match=rf"^timeout must .*{why}"):
        await ref.ask("x", timeout=value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "why"),
    [(math.nan, "finite"), (math.inf, "finite"), (-0.1, ">= 0"), (False, "number"), (301, "<=")],
)
async def test_stop_grace_is_validated(nursery: trio.Nursery, value: object, why: str) -> None:
    ref: ActorRef = await nursery.start(Keeper().run)
    with pytest.raises(ValueError, match=rf"^grace must .*{why}"):
        await ref.stop(value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^grace must"):
        ref.stop_nowait(value)  # type: ignore[arg-type]
    assert ref.state is ActorState.RUNNING


async def test_ref_identity_and_repr(nursery: trio.Nursery) -> None:
    actor = Keeper()
    ref: ActorRef = await nursery.start(actor.run)
    assert actor.ref is ref
    assert ref.name == "Keeper"
    assert repr(ref) == "<ActorRef 'Keeper' running>"
    assert ref.statistics().capacity == 2


class _Doubler(Actor[int, int]):
    """A typed actor (design §1.8): takes ints, answers ints."""

    async def handle(self, message: int, reply: Reply[int]) -> None:
        reply.send(message * 2)


async def test_typed_actors_and_refs_work_at_run_time(nursery: trio.Nursery) -> None:
    # The parameters are for type checkers (tests/test_packaging.py runs mypy on them);
    # at run time a parameterized class is the class, and its refs behave as ever.
    ref: ActorRef[int, int] = await nursery.start(_Doubler().run)
    assert await ref.ask(21, timeout=1) == 42
    assert type(ref) is ActorRef
    assert ActorRef[int, int].__origin__ is ActorRef  # type: ignore[attr-defined]
    assert Reply[int].__origin__ is Reply  # type: ignore[attr-defined]
    await ref.stop()
