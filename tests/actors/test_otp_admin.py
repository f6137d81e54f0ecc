"""Ports of OTP's ``supervisor_SUITE``: child administration, specs, stopping, trees.

Each test names the case it ports; all run on the autojump clock (design §1.10). OTP
answers ``{error, Reason}``; we raise the error of that condition (``ChildRunning`` for
``already_started``/``running``, ``ChildAlreadyPresent``, ``ChildNotFound``), each an
``ActorError`` with its code.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from otp_support import Board, child, settle

from actors import (
    INFINITY,
    Actor,
    ActorState,
    ActorStopped,
    ChildAlreadyPresent,
    ChildNotFound,
    ChildRunning,
    ChildSpec,
    ChildStartFailed,
    Reply,
    Supervisor,
    SupervisorRef,
)


def counts(ref: SupervisorRef) -> list[int]:
    """OTP's ``get_child_counts``: [specs, active, supervisors, workers]."""
    c = ref.count_children()
    return [c.specs, c.active, c.supervisors, c.workers]


def rows(ref: SupervisorRef) -> list[tuple[str, bool, str]]:
    """``which_children`` as OTP shows it: id, pid-or-undefined, type."""
    return [(r.id, r.running, r.type) for r in ref.which_children()]


async def test_child_adm(autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    """Ports supervisor_SUITE:child_adm (and extra_return's error answers)."""
    board = Board()
    spec = child("child1", board)
    ref: SupervisorRef = await nursery.start(Supervisor([spec], max_restarts=2).run)
    assert rows(ref) == [("child1", True, "worker")]
    assert counts(ref) == [1, 1, 0, 1]
    with pytest.raises(ChildRunning, match="'child1'") as running:
        await ref.start_child(spec)  # {error, {already_started, CPid}}
    assert running.value.code == "child_running"
    with pytest.raises(ChildNotFound) as missing:
        await ref.terminate_child("hej")
    assert missing.value.code == "child_not_found"
    await ref.terminate_child("child1")
    assert rows(ref) == [("child1", False, "worker")]
    assert counts(ref) == [1, 0, 0, 1]
    await ref.terminate_child("child1")  # like deleting what does not exist: fine
    with pytest.raises(ChildAlreadyPresent):
        await ref.start_child(spec)  # {error, already_present}
    live = await ref.restart_child("child1")
    assert await live.ask("ping", timeout=1) == ("ping", 2)
    assert counts(ref) == [1, 1, 0, 1]
    with pytest.raises(ChildRunning):
        await ref.restart_child("child1")
    with pytest.raises(ChildNotFound):
        await ref.restart_child("child2")
    with pytest.raises(ChildRunning):
        await ref.delete_child("child1")
    with pytest.raises(ChildNotFound):
        await ref.delete_child("hej")
    await ref.terminate_child("child1")
    await ref.delete_child("child1")
    with pytest.raises(ChildNotFound):
        await ref.restart_child("child1")
    assert rows(ref) == []
    assert counts(ref) == [0, 0, 0, 0]
    await ref.start_child(spec)
    assert rows(ref) == [("child1", True, "worker")]
    assert counts(ref) == [1, 1, 0, 1]
    await ref.stop()
    with pytest.raises(ActorStopped):  # OTP: noproc
        await ref.start_child(child("child9", board))
    assert ref.restarts == 0


def test_child_specs() -> None:
    """Ports supervisor_SUITE:child_specs: bad specs are refused, naming the field."""
    board = Board()
    with pytest.raises(ValueError, match="restart"):
        ChildSpec("child", lambda: None, restart="prmanent")  # type: ignore[arg-type, return-value]
    with pytest.raises(ValueError, match="shutdown"):
        ChildSpec("child", lambda: None, shutdown=-10)  # type: ignore[return-value]
    with pytest.raises(TypeError):
        ChildSpec("child", "mfa")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="id"):
        ChildSpec("", lambda: None)  # type: ignore[return-value]
    assert ChildSpec("child", lambda: None, shutdown=INFINITY).shutdown == "infinity"  # type: ignore[return-value]
    with pytest.raises(ValueError, match="duplicate child id 'child'"):
        Supervisor([child("child", board), child("child", board)])


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"strategy": "none_for_one"}, "strategy"),
        ({"max_restarts": -1}, "max_restarts"),
        ({"period": 0}, "period"),
        ({"period": float("inf")}, "period"),
        ({"auto_shutdown": "sometimes"}, "auto_shutdown"),
        ({"restart_wait": -1}, "restart_wait"),
    ],
)
def test_sup_flags(kwargs: dict[str, object], field: str) -> None:
    """Ports supervisor_SUITE:sup_flags: invalid flags are refused, naming the flag."""
    with pytest.raises(ValueError, match=field):
        Supervisor([], **kwargs)  # type: ignore[arg-type]


async def test_sup_start_fail_names_the_child(autojump_clock: trio.testing.MockClock) -> None:
    """Ports supervisor_SUITE:sup_start_fail: a child that fails its first start.

    OTP answers ``{error, {shutdown, {failed_to_start_child, Id, Reason}}}``; we raise
    ChildStartFailed naming the child and the reason, after stopping those started.
    """
    board = Board()
    sup = Supervisor([child("ok", board), child("bad", board, fail={1})], name="top")
    with pytest.RaisesGroup(ChildStartFailed) as caught:
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
    (error,) = caught.value.exceptions
    assert str(error) == "supervisor 'top': child 'bad' failed to start: OSError: bad cannot start"
    assert error.details == {"supervisor": "top", "child": "bad", "reason": "OSError"}
    assert isinstance(error.__cause__, OSError)
    assert board.entries == [
        (0, "start", "ok", 1),
        (0, "fail_start", "bad", 1),
        (0, "stop", "ok", 1),
    ]


async def test_start_child_failure_names_the_child_and_keeps_no_spec(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Ports supervisor_SUITE:sup_start_ignore_child's error half: start_child fails."""
    board = Board()
    ref: SupervisorRef = await nursery.start(Supervisor([]).run)
    with pytest.raises(ChildStartFailed, match="child 'bad' failed to start") as caught:
        await ref.start_child(child("bad", board, fail={1}))
    assert caught.value.details["child"] == "bad"
    assert rows(ref) == []
    live = await ref.start_child(child("bad", board))  # the id is free again
    assert await live.ask("ping", timeout=1) == ("ping", 1)


@pytest.mark.parametrize("strategy", ["one_for_one", "one_for_all", "rest_for_one"])
@pytest.mark.parametrize("how", ["crash", "exit", "terminate"])
async def test_do_not_save_child_specs_for_temporary_children(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, strategy: str, how: str
) -> None:
    """Ports supervisor_SUITE:do_not_save_child_specs_for_temporary_children.

    OTP's ``kill``/``abnormal`` is our crash, ``normal`` our exit, ``supervisor`` our
    terminate_child.
    """
    board = Board()
    sup = Supervisor([], strategy=strategy, max_restarts=2)  # type: ignore[arg-type]
    ref: SupervisorRef = await nursery.start(sup.run)

    async def end(cid: str) -> None:
        if how == "terminate":
            await ref.terminate_child(cid)
        elif how == "exit":
            await ref.child(cid).ask("exit", timeout=1)
        else:
            with pytest.raises(Exception, match="crash"):
                await ref.child(cid).ask("crash", timeout=1)
        await settle()

    permanent = child("child1", board)
    await ref.start_child(permanent)
    await end("child1")
    if how == "terminate":
        with pytest.raises(ChildAlreadyPresent):
            await ref.start_child(permanent)
        await ref.restart_child("child1")
    else:
        with pytest.raises(ChildRunning):  # restarted by the supervisor
            await ref.start_child(permanent)
    transient = child("child2", board, "transient")
    await ref.start_child(transient)
    await end("child2")
    if how == "crash":
        with pytest.raises(ChildRunning):
            await ref.start_child(transient)
    else:
        with pytest.raises(ChildAlreadyPresent):
            await ref.start_child(transient)
        await ref.restart_child("child2")
    temporary = child("child3", board, "temporary")
    await ref.start_child(temporary)
    await end("child3")
    await ref.start_child(temporary)  # the spec was not kept
    assert ref.state is ActorState.RUNNING


async def test_tree(autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    """Ports supervisor_SUITE:tree: supervisors as children, counts, a subtree restart.

    As in OTP, a restarted child supervisor comes back with its static children only:
    those added by ``start_child`` are not part of its spec.
    """
    board = Board()

    def sup1() -> Supervisor:
        return Supervisor([child("child1", board), child("child2", board)], name="sup1")

    def sup2() -> Supervisor:
        return Supervisor([], name="sup2", max_restarts=0)

    top = Supervisor([], strategy="one_for_all", max_restarts=4, name="top")
    ref: SupervisorRef = await nursery.start(top.run)
    await ref.start_child(ChildSpec("supchild1", sup1, shutdown=INFINITY))
    await ref.start_child(ChildSpec("supchild2", sup2, shutdown=INFINITY))
    assert counts(ref) == [2, 2, 2, 0]
    s1 = ref.child_supervisor("supchild1")
    s2 = ref.child_supervisor("supchild2")
    assert counts(s1) == [2, 2, 0, 2]
    assert counts(s2) == [0, 0, 0, 0]
    await s2.start_child(child("child3", board))
    await s2.start_child(child("child4", board))
    assert counts(s2) == [2, 2, 0, 2]
    with pytest.raises(Exception, match="crash"):
        await s2.child("child3").ask("crash", timeout=1)  # sup2 allows no restart
    await settle()
    new1, new2 = ref.child_supervisor("supchild1"), ref.child_supervisor("supchild2")
    assert new1 is not s1
    assert new2 is not s2
    assert counts(ref) == [2, 2, 2, 0]
    assert counts(new1) == [2, 2, 0, 2]
    assert counts(new2) == [0, 0, 0, 0]
    assert s1.state is ActorState.STOPPED
    assert s2.state is ActorState.FAILED
    assert ref.restarts == 1


@pytest.mark.parametrize(
    ("shutdown", "stopped_at"),
    [
        pytest.param(INFINITY, 5.0, id="sup_stop_infinity"),
        pytest.param(1.0, 1.0, id="sup_stop_timeout"),
        pytest.param("brutal_kill", 0.0, id="sup_stop_brutal_kill"),
    ],
)
async def test_sup_stop(
    autojump_clock: trio.testing.MockClock, shutdown: float | str, stopped_at: float
) -> None:
    """Ports supervisor_SUITE:sup_stop_infinity, sup_stop_timeout, sup_stop_brutal_kill.

    child2 is handling a 5 s message: ``infinity`` waits for it, a 1 s shutdown cuts it
    short (OTP's ``killed``), ``brutal_kill`` at once. child1 stops right after it.
    """
    board = Board()
    children = [child("child1", board), child("child2", board, shutdown=shutdown)]
    async with trio.open_nursery() as nursery:
        ref: SupervisorRef = await nursery.start(Supervisor(children).run)
        await ref.child("child2").send("slow")
        await trio.testing.wait_all_tasks_blocked()
        await ref.stop(grace=60)
    assert trio.current_time() == stopped_at
    finished = [("child2", 1)] if shutdown == INFINITY else []
    assert board.kinds("slow_done") == finished
    assert board.since(0)[-2:] == [
        (stopped_at, "stop", "child2", 1),
        (stopped_at, "stop", "child1", 1),
    ]


async def test_a_stop_while_the_children_start_fails_the_start_as_stopped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Not an OTP case: ``stop`` during the first starts (design §1.3's rule for actors).

    The starting supervisor's ``nursery.start`` fails with ``ActorStopped``, the child
    already started is stopped, the next is never started, and the state is
    ``stopped``, not ``failed``.
    """
    board = Board()

    class Stopper(Actor):
        async def on_start(self) -> None:
            sup.ref.stop_nowait()

        async def handle(self, message: object, reply: Reply[object]) -> None:
            reply.send(message)

    sup = Supervisor([child("a", board), ChildSpec("stopper", Stopper), child("b", board)])
    with pytest.RaisesGroup(ActorStopped):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
    assert board.entries == [(0, "start", "a", 1), (0, "stop", "a", 1)]
    assert sup.ref.state is ActorState.STOPPED
