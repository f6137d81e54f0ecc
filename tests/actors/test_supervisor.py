"""In-process OTP supervision (design §1.4), all on the autojump clock with exact times."""

from __future__ import annotations

import math
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from actors import (
    Actor,
    ActorRef,
    ActorState,
    Backoff,
    ChildNotFound,
    ChildSpec,
    ChildStartFailed,
    LiveRef,
    Reply,
    RestartIntensityExceeded,
    Supervisor,
    SupervisorRef,
)

Log = list[tuple[float, str, str, int]]


class Worker(Actor):
    """A child that logs its life; it can crash or exit on a timer, or fail to start."""

    def __init__(
        self,
        cid: str,
        log: Log,
        incarnation: int,
        *,
        crash_after: float | None = None,
        exit_after: float | None = None,
        fail_start: bool = False,
    ) -> None:
        self.cid = cid
        self.log = log
        self.k = incarnation
        self.crash_after = crash_after
        self.exit_after = exit_after
        self.fail_start = fail_start
        self.name = f"{cid}{incarnation}"

    def note(self, what: str) -> None:
        self.log.append((trio.current_time(), what, self.cid, self.k))

    async def on_start(self) -> None:
        if self.fail_start:
            self.note("fail_start")
            raise OSError(f"{self.cid} cannot start")
        self.note("start")
        if self.crash_after is not None:
            self.nursery.start_soon(self._crash, self.crash_after)
        if self.exit_after is not None:
            self.nursery.start_soon(self._exit, self.exit_after)

    async def _crash(self, delay: float) -> None:
        await trio.sleep(delay)
        self.note("crash")
        raise ValueError(f"{self.cid} crashed")

    async def _exit(self, delay: float) -> None:
        await trio.sleep(delay)
        self.note("exit")
        self.ref.stop_nowait(0)  # a normal exit

    async def handle(self, message: Any, reply: Reply) -> None:
        if message == "busy":
            await trio.sleep(100)
        reply.send(message)

    async def on_stop(self) -> None:
        self.note("stop")


@attrs.define
class Factory:
    """``ChildSpec.start``: makes incarnation k with the behaviour planned for k."""

    cid: str
    log: Log
    crash_after: dict[int, float] = attrs.field(factory=dict)
    exit_after: dict[int, float] = attrs.field(factory=dict)
    fail_start: set[int] = attrs.field(factory=set)
    made: int = 0

    def __call__(self) -> Worker:
        self.made += 1
        k = self.made
        return Worker(
            self.cid,
            self.log,
            k,
            crash_after=self.crash_after.get(k),
            exit_after=self.exit_after.get(k),
            fail_start=k in self.fail_start,
        )


def spec(cid: str, log: Log, restart: str = "permanent", **plan: Any) -> ChildSpec:
    shutdown = plan.pop("shutdown", 5.0)
    return ChildSpec(cid, Factory(cid, log, **plan), restart=restart, shutdown=shutdown)  # type: ignore[arg-type]


def events(log: Log, since: float = 0.0) -> list[tuple[float, str, str, int]]:
    return [entry for entry in log if entry[0] >= since]


# --- strategies ---------------------------------------------------------------------


async def test_one_for_one_restarts_only_the_failed_child(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    children = [spec("a", log), spec("b", log, crash_after={1: 1.0}), spec("c", log)]
    ref: SupervisorRef = await nursery.start(Supervisor(children).run)
    assert log == [(0, "start", "a", 1), (0, "start", "b", 1), (0, "start", "c", 1)]
    await trio.sleep(2)
    assert events(log, 1) == [
        (1.0, "crash", "b", 1),
        (1.0, "stop", "b", 1),
        (1.025, "start", "b", 2),
    ]
    assert [(c.id, c.incarnation, c.restarts, c.state) for c in ref.which_children()] == [
        ("a", 1, 0, ActorState.RUNNING),
        ("b", 2, 1, ActorState.RUNNING),
        ("c", 1, 0, ActorState.RUNNING),
    ]
    assert ref.restarts == 1
    assert ref.restart_count("b") == 1
    assert ref.child("b").name == "b"
    current = ref.child("b").current()
    assert current is not None
    assert current.name == "b2"
    assert await ref.child("b").ask("ping", timeout=1) == "ping"


async def test_one_for_all_stops_others_in_reverse_then_restarts_all(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    children = [spec("a", log), spec("b", log, crash_after={1: 1.0}), spec("c", log)]
    sup = Supervisor(children, strategy="one_for_all")
    ref: SupervisorRef = await nursery.start(sup.run)
    await trio.sleep(2)
    assert events(log, 1) == [
        (1.0, "crash", "b", 1),
        (1.0, "stop", "b", 1),
        (1.0, "stop", "c", 1),
        (1.0, "stop", "a", 1),
        (1.025, "start", "a", 2),
        (1.025, "start", "b", 2),
        (1.025, "start", "c", 2),
    ]
    assert ref.restarts == 1  # one restart decision, whatever the strategy
    assert [c.restarts for c in ref.which_children()] == [1, 1, 1]


async def test_rest_for_one_restarts_the_child_and_those_after_it(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    children = [
        spec("a", log),
        spec("b", log, crash_after={1: 1.0}),
        spec("c", log),
        spec("d", log),
    ]
    await nursery.start(Supervisor(children, strategy="rest_for_one").run)
    await trio.sleep(2)
    assert events(log, 1) == [
        (1.0, "crash", "b", 1),
        (1.0, "stop", "b", 1),
        (1.0, "stop", "d", 1),
        (1.0, "stop", "c", 1),
        (1.025, "start", "b", 2),
        (1.025, "start", "c", 2),
        (1.025, "start", "d", 2),
    ]


# --- restart types --------------------------------------------------------------------


async def test_permanent_is_restarted_even_after_a_normal_exit(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    await nursery.start(Supervisor([spec("p", log, exit_after={1: 1.0})]).run)
    await trio.sleep(2)
    assert events(log, 1) == [
        (1.0, "exit", "p", 1),
        (1.0, "stop", "p", 1),
        (1.025, "start", "p", 2),
    ]


async def test_transient_restarted_only_after_abnormal_exit(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    children = [spec("t", log, "transient", crash_after={1: 1.0}, exit_after={2: 1.0})]
    ref: SupervisorRef = await nursery.start(Supervisor(children).run)
    await trio.sleep(5)
    assert events(log, 1) == [
        (1.0, "crash", "t", 1),
        (1.0, "stop", "t", 1),
        (1.025, "start", "t", 2),
        (2.025, "exit", "t", 2),
        (2.025, "stop", "t", 2),  # normal exit: not restarted
    ]
    (info,) = ref.which_children()
    assert (info.state, info.incarnation, info.restarts) == (ActorState.STOPPED, 2, 1)


async def test_transient_stopped_from_outside_is_a_normal_exit(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    ref: SupervisorRef = await nursery.start(Supervisor([spec("t", log, "transient")]).run)
    await ref.child("t").stop()
    await trio.sleep(1)
    assert [e[1] for e in log] == ["start", "stop"]
    assert ref.restarts == 0


async def test_temporary_is_never_restarted(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    children = [spec("a", log), spec("tmp", log, "temporary", crash_after={1: 1.0})]
    ref: SupervisorRef = await nursery.start(Supervisor(children, strategy="one_for_all").run)
    await trio.sleep(3)
    assert events(log, 1) == [(1.0, "crash", "tmp", 1), (1.0, "stop", "tmp", 1)]
    assert [row.id for row in ref.which_children()] == ["a"]  # forgotten, as in OTP
    assert ref.restarts == 0


async def test_temporary_sibling_stopped_by_a_restart_is_not_restarted(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    children = [spec("tmp", log, "temporary"), spec("b", log, crash_after={1: 1.0})]
    await nursery.start(Supervisor(children, strategy="one_for_all").run)
    await trio.sleep(3)
    assert events(log, 1) == [
        (1.0, "crash", "b", 1),
        (1.0, "stop", "b", 1),
        (1.0, "stop", "tmp", 1),
        (1.025, "start", "b", 2),
    ]


# --- intensity and backoff ------------------------------------------------------------


async def test_intensity_exceeded_stops_children_in_reverse_and_escalates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: Log = []
    crashing = {1: 1.0, 2: 0.0, 3: 0.0}
    children = [spec("a", log), spec("b", log, crash_after=crashing), spec("c", log)]
    sup = Supervisor(children, max_restarts=2, period=5.0)
    with pytest.RaisesGroup(RestartIntensityExceeded) as info:
        async with trio.open_nursery() as nursery:
            ref: SupervisorRef = await nursery.start(sup.run)
            await trio.sleep_forever()
    assert events(log, 1) == [
        (1.0, "crash", "b", 1),
        (1.0, "stop", "b", 1),
        (1.025, "start", "b", 2),
        (1.025, "crash", "b", 2),
        (1.025, "stop", "b", 2),
        (1.075, "start", "b", 3),
        (1.075, "crash", "b", 3),
        (1.075, "stop", "b", 3),
        (1.075, "stop", "c", 1),  # reverse start order
        (1.075, "stop", "a", 1),
    ]
    assert trio.current_time() == 1.075
    (err,) = info.value.exceptions
    assert err.code == "restart_intensity_exceeded"
    assert err.details == {
        "supervisor": "supervisor",
        "child": "b",
        "max_restarts": 2,
        "period": 5.0,
    }
    assert ref.state is ActorState.FAILED
    assert all(c.state.terminal for c in ref.which_children())


async def test_restarts_outside_the_period_do_not_count(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    children = [spec("a", log, crash_after={1: 1.0, 2: 2.0, 3: 2.0})]
    sup = Supervisor(children, max_restarts=1, period=1.5)
    ref: SupervisorRef = await nursery.start(sup.run)
    await trio.sleep(10)
    starts = [e[0] for e in log if e[1] == "start"]
    # crash at 1.0 -> +0.025; then 2 s after each start -> +0.05, +0.1 (less than the
    # 5 s quiet period since the previous failure, so the backoff keeps growing)
    third = (1.025 + 2.0) + 0.05
    assert starts == [0.0, 1.025, third, (third + 2.0) + 0.1]
    assert ref.state is ActorState.RUNNING
    assert ref.restarts == 3


async def test_exact_backoff_values_and_quiet_period_reset(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    plan = {1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0, 5: 0.0, 6: 0.0, 7: 0.0, 8: 6.0}
    children = [spec("a", log, crash_after=plan)]
    sup = Supervisor(children, max_restarts=20, period=1.0, backoff=Backoff(reset_after=5.0))
    await nursery.start(sup.run)
    await trio.sleep(20)
    starts = [e[0] for e in log if e[1] == "start"]
    expected = [0.0]
    for delay in (0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.0):
        expected.append(expected[-1] + delay)
    expected.append(expected[-1] + 6.0 + 0.025)  # 6 s quiet: attempt 1 again
    assert starts == expected
    assert len(starts) == 9


async def test_custom_backoff_policy_is_used(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    children = [spec("a", log, crash_after={1: 0.0, 2: 0.0})]
    sup = Supervisor(children, backoff=Backoff(base=0.5, cap=0.75))
    await nursery.start(sup.run)
    await trio.sleep(5)
    assert [e[0] for e in log if e[1] == "start"] == [0.0, 0.5, 1.25]


async def test_failed_restart_counts_and_is_retried(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    children = [spec("a", log, crash_after={1: 1.0}, fail_start={2})]
    ref: SupervisorRef = await nursery.start(Supervisor(children).run)
    old = ref.child("a")
    await trio.sleep(1.03)
    assert ref.which_children()[0].state is ActorState.FAILED
    assert ref.child("a") is old  # the last ref until a new incarnation starts
    await trio.sleep(2)
    assert events(log, 1) == [
        (1.0, "crash", "a", 1),
        (1.0, "stop", "a", 1),
        (1.025, "fail_start", "a", 2),
        (1.075, "start", "a", 3),
    ]
    assert ref.restart_count("a") == 2
    assert ref.restarts == 2


async def test_first_start_failure_stops_started_children_and_raises(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: Log = []
    children = [spec("a", log), spec("b", log), spec("c", log, fail_start={1}), spec("d", log)]
    sup = Supervisor(children)
    async with trio.open_nursery() as nursery:
        with pytest.raises(ChildStartFailed, match="child 'c' failed to start") as caught:
            await nursery.start(sup.run)
    assert caught.value.details == {"supervisor": "supervisor", "child": "c", "reason": "OSError"}
    assert isinstance(caught.value.__cause__, OSError)
    assert log == [
        (0, "start", "a", 1),
        (0, "start", "b", 1),
        (0, "fail_start", "c", 1),
        (0, "stop", "b", 1),
        (0, "stop", "a", 1),
    ]
    assert sup.ref.state is ActorState.FAILED


# --- shutdown -------------------------------------------------------------------------


async def test_grace_versus_brutal_kill(autojump_clock: trio.testing.MockClock) -> None:
    log: Log = []
    children = [
        spec("gentle", log, shutdown=2.0),
        spec("brutal", log, shutdown="brutal_kill"),
    ]
    async with trio.open_nursery() as nursery:
        ref: SupervisorRef = await nursery.start(Supervisor(children).run)
        await ref.child("gentle").send("busy")
        await ref.child("brutal").send("busy")
        await trio.testing.wait_all_tasks_blocked()
        await ref.stop(grace=10.0)
        assert trio.current_time() == 2.0
    # reverse start order: brutal is cancelled at once, gentle gets its full grace
    assert events(log, 0.0)[-2:] == [(0.0, "stop", "brutal", 1), (2.0, "stop", "gentle", 1)]
    assert ref.state is ActorState.STOPPED


async def test_supervisor_stop_grace_bounds_the_whole_shutdown(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: Log = []
    children = [spec("a", log, shutdown=30.0), spec("b", log, shutdown=30.0)]
    async with trio.open_nursery() as nursery:
        ref: SupervisorRef = await nursery.start(Supervisor(children).run)
        await ref.child("a").send("busy")
        await ref.child("b").send("busy")
        await trio.testing.wait_all_tasks_blocked()
        returned: list[float] = []

        async def stop(grace: float) -> None:
            await ref.stop(grace)
            returned.append(trio.current_time())

        nursery.start_soon(stop, 4.0)
        nursery.start_soon(stop, 1.5)  # concurrent: the earliest deadline wins
    assert returned == [1.5, 1.5]
    assert [e for e in log if e[1] == "stop"] == [(1.5, "stop", "b", 1), (1.5, "stop", "a", 1)]


async def test_stop_during_restart_backoff_does_not_restart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: Log = []
    children = [spec("a", log, crash_after={1: 1.0}), spec("b", log)]
    async with trio.open_nursery() as nursery:
        ref: SupervisorRef = await nursery.start(Supervisor(children).run)
        await trio.sleep(1.01)  # a crashed at 1.0; its restart is due at 1.025
        await ref.stop()
        assert trio.current_time() == 1.01
    assert [e[1:] for e in log if e[0] >= 1] == [
        ("crash", "a", 1),
        ("stop", "a", 1),
        ("stop", "b", 1),
    ]
    with trio.testing.assert_checkpoints():
        await ref.stop()  # idempotent


async def test_supervisor_misc_api(nursery: trio.Nursery) -> None:
    log: Log = []
    sup = Supervisor([spec("a", log)], name="root")
    ref: SupervisorRef = await nursery.start(sup.run)
    assert ref is sup.ref
    assert (ref.name, ref.state) == ("root", ActorState.RUNNING)
    assert repr(ref) == "<SupervisorRef 'root' running>"
    assert isinstance(ref.child("a"), LiveRef)
    assert isinstance(ref.child("a").current(), ActorRef)
    with pytest.raises(ChildNotFound, match="no child 'nope'"):
        ref.child("nope")
    with pytest.raises(KeyError):
        ref.child("nope")
    with pytest.raises(RuntimeError, match="already ran"):
        await sup.run()
    await ref.stop()
    await ref.wait_stopped()
    assert ref.state is ActorState.STOPPED


# --- validation (design §1.6) -----------------------------------------------------------


def _make() -> Actor:  # pragma: no cover - never started
    return Actor()


@pytest.mark.parametrize(
    ("shutdown", "why"),
    [
        (math.nan, "finite"),
        (math.inf, "finite"),
        (-1, ">= 0"),
        (True, "number of seconds"),
        (301, "<= 300"),
        ("kill", "number of seconds"),
    ],
)
def test_child_spec_shutdown_is_validated(shutdown: object, why: str) -> None:
    with pytest.raises(ValueError, match=rf"^shutdown must .*{why}"):
        ChildSpec("a", _make, shutdown=shutdown)  # type: ignore[arg-type]


def test_child_spec_other_fields() -> None:
    assert ChildSpec("a", _make, shutdown=2).shutdown == 2.0
    assert ChildSpec("a", _make, shutdown="brutal_kill").shutdown == "brutal_kill"
    with pytest.raises(ValueError, match="id"):
        ChildSpec("", _make)
    with pytest.raises(ValueError, match="restart"):
        ChildSpec("a", _make, restart="sometimes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ChildSpec("a", "not callable")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"strategy": "one_for_some"}, "strategy"),
        ({"max_restarts": -1}, "^max_restarts"),
        ({"max_restarts": True}, "^max_restarts"),
        ({"period": 0}, r"^period must be > 0"),
        ({"period": math.nan}, "^period must be finite"),
        ({"period": 301}, r"^period must be <= 300"),
    ],
)
def test_supervisor_arguments_are_validated(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Supervisor([ChildSpec("a", _make)], **kwargs)


def test_supervisor_rejects_duplicate_ids_and_non_specs() -> None:
    with pytest.raises(ValueError, match="duplicate child id 'a'"):
        Supervisor([ChildSpec("a", _make), ChildSpec("a", _make)])
    with pytest.raises(TypeError, match="ChildSpec"):
        Supervisor([_make])  # type: ignore[list-item]
