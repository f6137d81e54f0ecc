"""Ports of OTP's ``supervisor_SUITE``: simple_one_for_one and significant children.

The dynamic supervisor is OTP's ``simple_one_for_one`` (and Elixir's
``DynamicSupervisor``); children get ids of their own (``"<template id>-<n>"``) where
OTP lists ``undefined`` and addresses them by pid. ``auto_shutdown`` is OTP 24's.
All on the autojump clock (design §1.10).
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from otp_support import Board, child, settle

from actors import (
    ActorCrashed,
    ActorState,
    ActorStopped,
    ChildNotFound,
    ChildStartFailed,
    DynamicSupervisor,
    DynamicSupervisorRef,
    MaxChildren,
    RestartIntensityExceeded,
    Supervisor,
    SupervisorEvent,
    SupervisorRef,
)


def counts(ref: SupervisorRef | DynamicSupervisorRef) -> list[int]:
    """OTP's ``get_child_counts``: [specs, active, supervisors, workers]."""
    c = ref.count_children()
    return [c.specs, c.active, c.supervisors, c.workers]


async def test_child_adm_simple(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Ports supervisor_SUITE:child_adm_simple.

    OTP's ``restart_child``/``delete_child`` answer ``simple_one_for_one``: a dynamic
    supervisor's ref has no such methods. Terminating a child forgets it; terminating
    it again names an id that no longer exists (OTP: a dead pid is fine).
    """
    board = Board()
    ref: DynamicSupervisorRef = await nursery.start(DynamicSupervisor(child("child", board)).run)
    assert ref.which_children() == []
    assert counts(ref) == [1, 0, 0, 0]
    first = await ref.start_child()
    assert first.name == "child-1"
    assert counts(ref) == [1, 1, 0, 1]
    second = await ref.start_child()
    assert sorted(r.id for r in ref.which_children()) == ["child-1", "child-2"]
    assert counts(ref) == [1, 2, 0, 2]
    await ref.terminate_child(first.name)
    assert [r.id for r in ref.which_children()] == [second.name]
    assert counts(ref) == [1, 1, 0, 1]
    with pytest.raises(ActorStopped):
        await first.send("ping")
    with pytest.raises(ChildNotFound):
        await ref.terminate_child(first.name)
    assert not hasattr(ref, "restart_child")
    assert not hasattr(ref, "delete_child")


async def test_simple_one_for_one(autojump_clock: trio.testing.MockClock) -> None:
    """Ports supervisor_SUITE:simple_one_for_one: one child restarts alone; escalation."""
    board = Board()
    with pytest.RaisesGroup(RestartIntensityExceeded):
        async with trio.open_nursery() as nursery:
            dyn = DynamicSupervisor(child("child", board), max_restarts=2, period=300)
            ref: DynamicSupervisorRef = await nursery.start(dyn.run)
            c1 = await ref.start_child()
            c2 = await ref.start_child()
            with pytest.raises(ActorCrashed):
                await c1.ask("crash", timeout=1)
            await settle()
            assert [(r.id, r.incarnation) for r in ref.which_children()] == [
                ("child-1", 2),
                ("child-2", 1),
            ]
            assert counts(ref) == [1, 2, 0, 2]
            with pytest.raises(ActorCrashed):
                await c2.ask("crash", timeout=1)
            await settle()
            with pytest.raises(ActorCrashed):
                await c1.ask("crash", timeout=1)
            await settle()
    assert trio.current_time() == 2.0
    assert ref.state is ActorState.FAILED


async def test_simple_one_for_one_extra_arguments(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Ports supervisor_SUITE:simple_one_for_one_extra: start_child's arguments.

    Each child is ``template.start(*args)``, and a restart uses the same arguments.
    """
    made: list[tuple[object, ...]] = []
    board = Board()
    template = child("child", board)

    def start(*args: object) -> object:
        made.append(args)
        return template.start()

    dyn = DynamicSupervisor(
        type(template)("child", start)  # type: ignore[arg-type]
    )
    ref: DynamicSupervisorRef = await nursery.start(dyn.run)
    live = await ref.start_child("extra", 7)
    with pytest.raises(ActorCrashed):
        await live.ask("crash", timeout=1)
    await settle()
    assert made == [("extra", 7), ("extra", 7)]


async def test_simple_one_for_one_shutdown(autojump_clock: trio.testing.MockClock) -> None:
    """Ports supervisor_SUITE:simple_one_for_one_shutdown: children stop all at once.

    Two children handle a 5 s message, one is idle; their shutdown is 2 s. As in OTP
    the dynamic children are stopped in parallel, so the stop takes 2 s, not 4.
    """
    board = Board()
    async with trio.open_nursery() as nursery:
        dyn = DynamicSupervisor(child("child", board, shutdown=2.0))
        ref: DynamicSupervisorRef = await nursery.start(dyn.run)
        slow = [await ref.start_child() for _ in range(2)]
        await ref.start_child()
        for live in slow:
            await live.send("slow")
        await trio.testing.wait_all_tasks_blocked()
        await ref.stop(grace=60)
    assert trio.current_time() == 2.0
    assert sorted(board.kinds("stop")) == [("child", 1), ("child", 2), ("child", 3)]


async def test_simple_one_for_one_escalation(autojump_clock: trio.testing.MockClock) -> None:
    """Ports supervisor_SUITE:simple_one_for_one_escalation.

    The first child's restarts fail (OTP starts it with ``error``; our template's
    Plan, shared by both children, fails every start after the first two) until the
    intensity is exceeded, and the other child is stopped.
    """
    board = Board()
    with pytest.RaisesGroup(RestartIntensityExceeded):
        async with trio.open_nursery() as nursery:
            dyn = DynamicSupervisor(child("child", board, fail={3, 4, 5, 6, 7}), max_restarts=4)
            ref: DynamicSupervisorRef = await nursery.start(dyn.run)
            c1 = await ref.start_child()
            await ref.start_child()
            with pytest.raises(ActorCrashed):
                await c1.ask("crash", timeout=1)
            await settle()
    assert board.kinds("fail_start") == [("child", 3), ("child", 4), ("child", 5), ("child", 6)]
    assert board.entries[-1][1:] == ("stop", "child", 2)


async def test_start_child_error_argument_fails_start(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Ports supervisor_SUITE:sup_start_ignore_permanent_child_start_child_simple.

    OTP's child may return ``ignore``; ours fails its start, named, and is not kept.
    """
    board = Board()
    ref: DynamicSupervisorRef = await nursery.start(DynamicSupervisor(child("child", board)).run)
    with pytest.raises(ChildStartFailed, match="child 'child-1' failed to start"):
        await ref.start_child("error")
    live = await ref.start_child()
    assert [r.id for r in ref.which_children()] == [live.name]
    assert counts(ref) == [1, 1, 0, 1]


async def test_count_children(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Ports supervisor_SUITE:count_children (100 temporary children, not 1000)."""
    board = Board()
    ref: DynamicSupervisorRef = await nursery.start(
        DynamicSupervisor(child("child", board, "temporary")).run
    )
    lives = [await ref.start_child() for _ in range(100)]
    assert len(ref.which_children()) == 100
    assert counts(ref) == [1, 100, 0, 100]
    lives += [await ref.start_child() for _ in range(100)]
    assert counts(ref) == [1, 200, 0, 200]
    for live in lives:
        with pytest.raises(ActorCrashed):
            await live.ask("crash", timeout=1)
    await settle()
    assert counts(ref) == [1, 0, 0, 0]


async def test_max_children(autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    """Elixir's DynamicSupervisor ``max_children``: a retryable refusal, then room."""
    board = Board()
    ref: DynamicSupervisorRef = await nursery.start(
        DynamicSupervisor(child("child", board), max_children=2).run
    )
    first = await ref.start_child()
    await ref.start_child()
    with pytest.raises(MaxChildren) as caught:
        await ref.start_child()
    assert (caught.value.code, caught.value.retryable) == ("max_children", True)
    await ref.terminate_child(first.name)
    await ref.start_child()
    assert counts(ref) == [1, 2, 0, 2]
    with pytest.raises(ValueError, match="max_children"):
        DynamicSupervisor(child("child", board), max_children=-1)


# --- significant children and auto_shutdown (OTP 24) -----------------------------------


@pytest.mark.parametrize(
    ("restart", "how", "shuts_down"),
    [
        pytest.param("temporary", "exit", True, id="significant_temporary-normal"),
        pytest.param("temporary", "crash", True, id="significant_temporary-abnormal"),
        pytest.param("transient", "exit", True, id="significant_transient-normal"),
        pytest.param("transient", "crash", False, id="significant_transient-abnormal"),
    ],
)
async def test_significant_any(
    autojump_clock: trio.testing.MockClock, restart: str, how: str, shuts_down: bool
) -> None:
    """Ports supervisor_SUITE:significant_temporary and significant_transient.

    With ``any_significant``, a significant child that ends by itself and is not
    restarted shuts the supervisor down (normally: ``run`` returns), stopping the
    others in reverse order; a restarted one does not.
    """
    board = Board()
    events: list[SupervisorEvent] = []
    children = [child("child1", board), child("child2", board, restart, significant=True)]
    sup = Supervisor(children, auto_shutdown="any_significant", on_event=events.append)
    async with trio.open_nursery() as nursery:
        ref: SupervisorRef = await nursery.start(sup.run)
        live = ref.child("child2")
        if how == "exit":
            await live.ask("exit", timeout=1)
        else:
            with pytest.raises(ActorCrashed):
                await live.ask("crash", timeout=1)
        if shuts_down:
            await ref.wait_stopped()
            assert trio.current_time() == 0
        else:
            await settle()
            assert ref.state is ActorState.RUNNING
            await ref.stop()
    assert ref.state is ActorState.STOPPED
    kinds = [e.kind for e in events if e.time == 0 and e.kind != "child_started"]
    if shuts_down:
        assert kinds[-3:] == ["auto_shutdown", "shutdown", "child_stopped"]  # child1's stop
        assert board.since(0)[-1] == (0, "stop", "child1", 1)
    else:
        assert "auto_shutdown" not in kinds


async def test_significant_all(autojump_clock: trio.testing.MockClock) -> None:
    """Ports supervisor_SUITE's all_significant case: the last significant child ends it."""
    board = Board()
    children = [
        child("worker", board),
        child("sig1", board, "temporary", significant=True),
        child("sig2", board, "transient", significant=True),
    ]
    sup = Supervisor(children, auto_shutdown="all_significant")
    async with trio.open_nursery() as nursery:
        ref: SupervisorRef = await nursery.start(sup.run)
        await ref.child("sig1").ask("exit", timeout=1)
        await settle()
        assert ref.state is ActorState.RUNNING
        await ref.child("sig2").ask("exit", timeout=1)
        await ref.wait_stopped()
    assert trio.current_time() == 1.0
    assert ref.state is ActorState.STOPPED
    assert board.since(0)[-1] == (1.0, "stop", "worker", 1)


async def test_significant_terminated_by_supervisor_does_not_shut_down(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Ports supervisor_SUITE:significant_bystander: only an end *by itself* counts.

    terminate_child of a significant child, and auto_shutdown ``never``, leave the
    supervisor running; a permanent child cannot be significant.
    """
    board = Board()
    children = [child("child1", board), child("sig", board, "transient", significant=True)]
    ref: SupervisorRef = await nursery.start(
        Supervisor(children, auto_shutdown="any_significant").run
    )
    await ref.terminate_child("sig")
    await settle()
    assert ref.state is ActorState.RUNNING
    never: SupervisorRef = await nursery.start(
        Supervisor([child("sig", board, "temporary", significant=True)]).run
    )
    await never.child("sig").ask("exit", timeout=1)
    await settle()
    assert never.state is ActorState.RUNNING
    with pytest.raises(ValueError, match="significant"):
        child("x", board, "permanent", significant=True)
