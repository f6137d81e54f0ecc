"""Adversarial tests of the in-process OTP supervisor (design §1.4), on the autojump clock.

Restart intensity exactly at its edge, transient exits of every kind, restart order of
one_for_all / rest_for_one with simultaneous crashes, brutal_kill against a slow
``on_stop``, and a child that stops its own supervisor.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from actors import (
    Actor,
    ActorError,
    ActorState,
    Backoff,
    ChildSpec,
    Reply,
    RestartIntensityExceeded,
    Supervisor,
    SupervisorRef,
    UnknownRun,
)

Log = list[tuple[float, str, str]]

# A flat 0.125 s backoff: exact in binary, so virtual times compare exactly.
FLAT = Backoff(base=0.125, cap=0.125)


class Child(Actor):
    """Logs its life; ``plan`` maps an incarnation number to what it does at start."""

    def __init__(self, cid: str, log: Log, plan: dict[int, tuple[str, float]], k: int) -> None:
        self.cid = cid
        self.log = log
        self.k = k
        self.what, self.after = plan.get(k, ("live", 0.0))
        self.name = f"{cid}{k}"
        self.sup: SupervisorRef | None = None

    def note(self, what: str) -> None:
        self.log.append((trio.current_time(), what, f"{self.cid}{self.k}"))

    async def on_start(self) -> None:
        self.note("start")
        if self.what != "live":
            self.nursery.start_soon(self._act)

    async def _act(self) -> None:
        await trio.sleep(self.after)
        self.note(self.what)
        if self.what == "crash":
            raise ValueError("crash")
        if self.what == "exit":
            self.ref.stop_nowait(0)
        if self.what == "cancel_self":
            self.ref.stop_nowait(0)
            await trio.sleep_forever()

    async def handle(self, message: Any, reply: Reply) -> None:
        if message == "actor_error":
            raise UnknownRun("no such run")
        if message == "slow":
            await trio.sleep(100)
        if isinstance(message, tuple) and message[0] == "stop_supervisor":
            await message[1].stop(grace=message[2])
            self.note("stop_supervisor returned")
        reply.send(message)

    async def on_stop(self) -> None:
        if self.what == "slow_on_stop":
            await trio.sleep(3)
        self.note("stop")


def child(cid: str, log: Log, restart: str = "permanent", **kw: Any) -> ChildSpec:
    plan: dict[int, tuple[str, float]] = kw.pop("plan", {})
    made = [0]

    def start() -> Child:
        made[0] += 1
        return Child(cid, log, plan, made[0])

    return ChildSpec(cid, start, restart=restart, **kw)  # type: ignore[arg-type]


def crashes(log: Log) -> list[float]:
    return [t for t, what, _ in log if what == "crash"]


async def test_intensity_exactly_at_the_period_edge_gives_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # max 2 restarts within 1 s (inclusive): crashes at 0.25, 0.75 and 1.25 are three
    # restarts in a closed 1 s window, so the third one escalates.
    log: Log = []
    plan = {1: ("crash", 0.25), 2: ("crash", 0.375), 3: ("crash", 0.375)}
    sup = Supervisor([child("a", log, plan=plan)], max_restarts=2, period=1.0, backoff=FLAT)
    with pytest.RaisesGroup(RestartIntensityExceeded):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
    assert crashes(log) == [0.25, 0.75, 1.25]
    assert trio.current_time() == 1.25
    assert sup.ref.state is ActorState.FAILED


async def test_intensity_just_past_the_period_edge_keeps_going(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    plan = {1: ("crash", 0.25), 2: ("crash", 0.375), 3: ("crash", 0.5)}
    sup = Supervisor([child("a", log, plan=plan)], max_restarts=2, period=1.0, backoff=FLAT)
    ref: SupervisorRef = await nursery.start(sup.run)
    await trio.sleep(5)
    # 0.25 + 0.125 + 0.375 = 0.75; 0.75 + 0.125 + 0.5 = 1.375 > 0.25 + 1.0
    assert crashes(log) == [0.25, 0.75, 1.375]
    assert ref.state is ActorState.RUNNING
    assert ref.restarts == 3
    assert ref.restart_count("a") == 3


async def test_zero_max_restarts_gives_up_on_the_first_exit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: Log = []
    sup = Supervisor([child("a", log), child("b", log, plan={1: ("exit", 2.0)})], max_restarts=0)
    with pytest.RaisesGroup(RestartIntensityExceeded):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
    # a permanent child's normal exit counts too; a is stopped (reverse order) at once
    assert log == [
        (0.0, "start", "a1"),
        (0.0, "start", "b1"),
        (2.0, "exit", "b1"),
        (2.0, "stop", "b1"),
        (2.0, "stop", "a1"),
    ]


@pytest.mark.parametrize(
    ("plan", "restarted"),
    [
        ({1: ("exit", 1.0)}, False),  # stop_nowait(0) from inside: normal
        ({1: ("cancel_self", 1.0)}, False),  # cancelled by its own stop: normal
        ({1: ("crash", 1.0)}, True),  # an exception in a nursery task: abnormal
    ],
)
async def test_transient_child_exit_kinds(
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    plan: dict[int, tuple[str, float]],
    restarted: bool,
) -> None:
    log: Log = []
    sup = Supervisor([child("t", log, "transient", plan=plan)], backoff=FLAT)
    ref: SupervisorRef = await nursery.start(sup.run)
    await trio.sleep(5)
    starts = [t for t, what, _ in log if what == "start"]
    assert starts == ([0.0, 1.125] if restarted else [0.0])
    assert ref.restarts == int(restarted)


async def test_transient_child_answering_with_an_actor_error_is_not_an_exit(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    ref: SupervisorRef = await nursery.start(Supervisor([child("t", log, "transient")]).run)
    with pytest.raises(ActorError, match="no such run"):
        await ref.child("t").ask("actor_error", timeout=1)
    assert ref.child("t").state is ActorState.RUNNING
    assert ref.restarts == 0


async def test_one_for_all_with_two_simultaneous_crashes_restarts_once_in_order(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    children = [
        child("a", log),
        child("b", log, plan={1: ("crash", 1.0)}),
        child("c", log, plan={1: ("crash", 1.0)}),
        child("d", log),
    ]
    sup = Supervisor(children, strategy="one_for_all", backoff=FLAT)
    ref: SupervisorRef = await nursery.start(sup.run)
    await trio.sleep(5)
    after = [e for e in log if e[0] >= 1.0]
    # b and c crash at the same instant, in trio's (deliberately random) task order
    assert sorted(after[:4]) == [
        (1.0, "crash", "b1"),
        (1.0, "crash", "c1"),
        (1.0, "stop", "b1"),
        (1.0, "stop", "c1"),
    ]
    assert after[4:] == [
        (1.0, "stop", "d1"),  # the others, in reverse start order
        (1.0, "stop", "a1"),
        (1.125, "start", "a2"),  # all of them, in start order, once
        (1.125, "start", "b2"),
        (1.125, "start", "c2"),
        (1.125, "start", "d2"),
    ]
    assert ref.restarts == 1


async def test_rest_for_one_leaves_earlier_children_alone(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    children = [
        child("a", log),
        child("b", log, plan={1: ("crash", 1.0)}),
        child("c", log, "temporary"),
        child("d", log, "transient"),
    ]
    sup = Supervisor(children, strategy="rest_for_one", backoff=FLAT)
    ref: SupervisorRef = await nursery.start(sup.run)
    await trio.sleep(5)
    assert [e for e in log if e[0] >= 1.0] == [
        (1.0, "crash", "b1"),
        (1.0, "stop", "b1"),
        (1.0, "stop", "d1"),
        (1.0, "stop", "c1"),
        (1.125, "start", "b2"),
        (1.125, "start", "d2"),  # transient: stopped by the supervisor, so restarted
    ]  # c is temporary: never restarted, and forgotten as OTP does
    states = {row.id: row.state for row in ref.which_children()}
    assert states == {
        "a": ActorState.RUNNING,
        "b": ActorState.RUNNING,
        "d": ActorState.RUNNING,
    }


async def test_brutal_kill_skips_a_slow_on_stop_but_grace_waits_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: Log = []
    slow = {1: ("slow_on_stop", 1000.0)}
    children = [
        child("gentle", log, plan=slow, shutdown=10.0),
        child("brutal", log, plan=slow, shutdown="brutal_kill"),
    ]
    async with trio.open_nursery() as nursery:
        ref: SupervisorRef = await nursery.start(Supervisor(children).run)
        await ref.child("gentle").send("slow")
        await ref.child("brutal").send("slow")
        await trio.testing.wait_all_tasks_blocked()
        await ref.stop(grace=60)
        # brutal: cancelled at once, on_stop included; gentle: handler cut at its
        # 10 s grace, then on_stop takes its 3 s (outside the grace, design §1.3)
        assert trio.current_time() == 13.0
    assert [e for e in log if e[1] == "stop"] == [(13.0, "stop", "gentle1")]


async def test_a_child_can_stop_its_own_supervisor(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    # It used to wait for the supervisor, which waited for the child's stop, which
    # waited for the handler: a deadlock broken only by the child's 5 s shutdown grace.
    log: Log = []
    ref: SupervisorRef = await nursery.start(Supervisor([child("a", log), child("b", log)]).run)
    answer = await ref.child("b").ask(("stop_supervisor", ref, 30.0), timeout=60)
    assert answer[0] == "stop_supervisor"
    await ref.wait_stopped()
    assert trio.current_time() == 0.0
    assert log[-3:] == [
        (0.0, "stop_supervisor returned", "b1"),
        (0.0, "stop", "b1"),
        (0.0, "stop", "a1"),
    ]
    assert ref.state is ActorState.STOPPED


@pytest.mark.parametrize(
    "value",
    [10**400, -(10**400), 10**5000, float("nan"), True, "1"],
    ids=["huge", "-huge", "unprintable", "nan", "bool", "str"],
)
def test_every_configured_duration_names_itself_even_for_huge_ints(value: object) -> None:
    # ChildSpec's converter used to call float() first: OverflowError, naming nothing.
    makers = {
        "shutdown": lambda: ChildSpec("a", Child, shutdown=value),  # type: ignore[arg-type]
        "period": lambda: Supervisor([], period=value),  # type: ignore[arg-type]
        "base": lambda: Backoff(base=value),  # type: ignore[arg-type]
        "reset_after": lambda: Backoff(reset_after=value),  # type: ignore[arg-type]
        "jitter": lambda: Backoff(jitter=value),  # type: ignore[arg-type]
    }
    for name, make in makers.items():
        with pytest.raises(ValueError, match=f"^{name} ") as info:
            make()
        assert len(str(info.value)) < 200
