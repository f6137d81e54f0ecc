"""Ports of OTP's ``supervisor_SUITE``: restart types, strategies, restart failures.

Each test names the case it ports. All run on the autojump clock with exact virtual
times. Where our semantics differ from OTP's the docstring says so; the differences
that hold throughout (design §1.4):

* no links, no trapping exits: a child "exits" by raising from its handler (abnormal)
  or stopping itself (normal); ``exit(Pid, shutdown)`` from outside is our
  ``LiveRef.stop``, a normal exit;
* a capped backoff (25 ms doubling) before every restart round, where OTP restarts at
  once; rounds and their order are OTP's;
* periods are at most 300 s (design §1.6): OTP's 3600 s becomes 300 s.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from otp_support import Board, child, settle

from actors import (
    ActorCrashed,
    ActorState,
    ChildCounts,
    ChildRunning,
    RestartIntensityExceeded,
    Supervisor,
    SupervisorEvent,
    SupervisorRef,
)


def counts(ref: SupervisorRef) -> list[int]:
    """OTP's ``get_child_counts``: [specs, active, supervisors, workers]."""
    c = ref.count_children()
    return [c.specs, c.active, c.supervisors, c.workers]


async def crash(ref: SupervisorRef, cid: str) -> None:
    with pytest.raises(ActorCrashed):
        await ref.child(cid).ask("crash", timeout=1)


async def test_sup_start_normal(autojump_clock: trio.testing.MockClock) -> None:
    """Ports supervisor_SUITE:sup_start_normal: no children, starts and stops."""
    async with trio.open_nursery() as nursery:
        ref: SupervisorRef = await nursery.start(Supervisor([], max_restarts=2).run)
        assert ref.count_children() == ChildCounts(specs=0, active=0, supervisors=0, workers=0)
        await ref.stop()
    assert ref.state is ActorState.STOPPED
    assert trio.current_time() == 0


# --- restart types: normal, shutdown and abnormal exits ---------------------------------


@pytest.mark.parametrize(
    ("restart", "how", "restarted", "kept"),
    [
        pytest.param("permanent", "exit", True, True, id="permanent_normal"),
        pytest.param("transient", "exit", False, True, id="transient_normal"),
        pytest.param("temporary", "exit", False, False, id="temporary_normal"),
        pytest.param("permanent", "stop", True, True, id="permanent_shutdown"),
        pytest.param("transient", "stop", False, True, id="transient_shutdown"),
        pytest.param("temporary", "stop", False, False, id="temporary_shutdown"),
        pytest.param("permanent", "crash", True, True, id="permanent_abnormal"),
        pytest.param("transient", "crash", True, True, id="transient_abnormal"),
        pytest.param("temporary", "crash", False, False, id="temporary_abnormal"),
    ],
)
async def test_restart_type_after_exit(
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    restart: str,
    how: str,
    restarted: bool,
    kept: bool,
) -> None:
    """Ports supervisor_SUITE's permanent/transient/temporary _normal, _shutdown, _abnormal.

    OTP's ``shutdown`` exit reason is our outside ``stop`` (a normal exit): a transient
    child is not restarted after either. ``which_children`` and ``count_children`` as in
    OTP: a temporary child is forgotten, a transient one kept as not running.
    """
    board = Board()
    ref: SupervisorRef = await nursery.start(Supervisor([], max_restarts=2, period=300).run)
    await ref.start_child(child("child1", board, restart))
    live = ref.child("child1")
    if how == "crash":
        with pytest.raises(ActorCrashed):
            await live.ask("crash", timeout=1)
    elif how == "exit":
        assert await live.ask("exit", timeout=1) == "exiting"
    else:
        await live.stop()
    await settle()
    rows = ref.which_children()
    if restarted:
        assert [(r.id, r.running, r.incarnation) for r in rows] == [("child1", True, 2)]
        assert counts(ref) == [1, 1, 0, 1]
        assert board.kinds("start") == [("child1", 1), ("child1", 2)]
    elif kept:
        assert [(r.id, r.running, r.incarnation) for r in rows] == [("child1", False, 1)]
        assert counts(ref) == [1, 0, 0, 1]
    else:
        assert rows == []
        assert counts(ref) == [0, 0, 0, 0]
    assert ref.restarts == (1 if restarted else 0)


async def test_transient_shutdown_then_restart_child(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Ports supervisor_SUITE:transient_shutdown (its restart_child step)."""
    board = Board()
    ref: SupervisorRef = await nursery.start(Supervisor([]).run)
    await ref.start_child(child("child1", board, "transient"))
    await ref.child("child1").stop()
    await settle()
    assert counts(ref) == [1, 0, 0, 1]
    live = await ref.restart_child("child1")
    assert await live.ask("ping", timeout=1) == ("ping", 2)
    await live.stop()
    await settle()
    assert counts(ref) == [1, 0, 0, 1]
    assert ref.restarts == 0  # restart_child is not a restart of the intensity


@pytest.mark.parametrize("strategy", ["one_for_all", "rest_for_one"])
async def test_temporary_bystander(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, strategy: str
) -> None:
    """Ports supervisor_SUITE:temporary_bystander.

    A temporary child stopped by a sibling's restart round is not restarted, and
    forgotten: the supervisor lives on with the permanent child only.
    """
    board = Board()
    sup = Supervisor([], strategy=strategy, max_restarts=2, period=300)  # type: ignore[arg-type]
    ref: SupervisorRef = await nursery.start(sup.run)
    await ref.start_child(child("child1", board, shutdown=0.1))
    await ref.start_child(child("child2", board, "temporary", shutdown=0.1))
    assert await ref.child("child1").ask("exit", timeout=1) == "exiting"
    await settle()
    assert ref.state is ActorState.RUNNING
    assert [r.id for r in ref.which_children()] == ["child1"]
    assert board.since(0) == [
        (0, "start", "child1", 1),
        (0, "start", "child2", 1),
        (0, "stop", "child1", 1),
        (0, "stop", "child2", 1),
        (0.025, "start", "child1", 2),
    ]


async def test_multiple_restarts(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Ports supervisor_SUITE:multiple_restarts: intensity 1 per 1 s, crashes 2.1 s apart."""
    board = Board()
    ref: SupervisorRef = await nursery.start(Supervisor([], max_restarts=1, period=1).run)
    await ref.start_child(child("child1", board, shutdown="brutal_kill"))
    await crash(ref, "child1")
    for _ in range(3):
        await trio.sleep(2.1)
        await crash(ref, "child1")
    await settle()
    assert ref.state is ActorState.RUNNING
    assert [t for t, what, _, _ in board.entries if what == "start"] == pytest.approx(
        [0, 0.025, 2.15, 4.3, 6.5]  # the backoff doubles: its quiet period is 5 s
    )
    await ref.terminate_child("child1")
    await ref.delete_child("child1")
    assert ref.which_children() == []


# --- strategies -------------------------------------------------------------------------


async def test_one_for_one(autojump_clock: trio.testing.MockClock) -> None:
    """Ports supervisor_SUITE:one_for_one: only the crashed child restarts; then escalation."""
    board = Board()
    with pytest.RaisesGroup(RestartIntensityExceeded):
        async with trio.open_nursery() as nursery:
            sup = Supervisor([], max_restarts=2, period=300)
            ref: SupervisorRef = await nursery.start(sup.run)
            await ref.start_child(child("child1", board))
            await ref.start_child(child("child2", board))
            await crash(ref, "child1")
            await settle()
            assert [(r.id, r.incarnation) for r in ref.which_children()] == [
                ("child1", 2),
                ("child2", 1),
            ]
            assert counts(ref) == [2, 2, 0, 2]
            await crash(ref, "child2")
            await settle()
            await crash(ref, "child1")  # the third restart within the hour: too many
            await settle()
    assert trio.current_time() == 2.0
    assert sup.ref.state is ActorState.FAILED


async def test_one_for_one_escalation(autojump_clock: trio.testing.MockClock) -> None:
    """Ports supervisor_SUITE:one_for_one_escalation: every restart fails; each counts.

    Intensity 4: four rounds that fail to start child1 (each one more restart, with
    the backoff doubling between them), and the fifth exceeds it; child2 is stopped.
    """
    board = Board()
    events: list[SupervisorEvent] = []
    with pytest.RaisesGroup(RestartIntensityExceeded):
        async with trio.open_nursery() as nursery:
            sup = Supervisor([], max_restarts=4, period=300, on_event=events.append)
            ref: SupervisorRef = await nursery.start(sup.run)
            await ref.start_child(child("child1", board, fail={2, 3, 4, 5, 6}))
            await ref.start_child(child("child2", board))
            await crash(ref, "child1")
            await settle()
    assert board.since(0) == [
        (0, "start", "child1", 1),
        (0, "start", "child2", 1),
        (0, "stop", "child1", 1),
        (0.025, "fail_start", "child1", 2),
        (0.075, "fail_start", "child1", 3),
        (0.175, "fail_start", "child1", 4),
        (0.375, "fail_start", "child1", 5),
        (0.375, "stop", "child2", 1),
    ]
    assert [e.kind for e in events if e.kind not in ("child_started", "child_stopped")] == [
        "child_exited",
        *["child_restarting", "restart_failed"] * 4,
        "intensity_exceeded",
    ]


async def test_one_for_all(autojump_clock: trio.testing.MockClock) -> None:
    """Ports supervisor_SUITE:one_for_all: the sibling is stopped and both restart."""
    board = Board()
    with pytest.RaisesGroup(RestartIntensityExceeded):
        async with trio.open_nursery() as nursery:
            sup = Supervisor([], strategy="one_for_all", max_restarts=2, period=300)
            ref: SupervisorRef = await nursery.start(sup.run)
            await ref.start_child(child("child1", board))
            await ref.start_child(child("child2", board))
            await crash(ref, "child1")
            await settle()
            assert board.since(0)[2:] == [
                (0, "stop", "child1", 1),
                (0, "stop", "child2", 1),  # the bystander, stopped by the round
                (0.025, "start", "child1", 2),
                (0.025, "start", "child2", 2),
            ]
            assert counts(ref) == [2, 2, 0, 2]
            await crash(ref, "child1")
            await settle()
            await crash(ref, "child2")
            await settle()
    assert sup.ref.state is ActorState.FAILED


async def test_one_for_all_escalation(autojump_clock: trio.testing.MockClock) -> None:
    """Ports supervisor_SUITE:one_for_all_escalation: child2 never restarts; both end."""
    board = Board()
    with pytest.RaisesGroup(RestartIntensityExceeded):
        async with trio.open_nursery() as nursery:
            sup = Supervisor([], strategy="one_for_all", max_restarts=4, period=300)
            ref: SupervisorRef = await nursery.start(sup.run)
            await ref.start_child(child("child1", board))
            await ref.start_child(child("child2", board, fail={2, 3, 4, 5, 6}))
            await crash(ref, "child1")
            await settle()
    assert board.kinds("fail_start") == [("child2", 2), ("child2", 3), ("child2", 4), ("child2", 5)]
    assert board.entries[-1][1:] == ("stop", "child1", 5)
    assert sup.ref.state is ActorState.FAILED


async def test_one_for_all_other_child_fails_restart(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Ports supervisor_SUITE:one_for_all_other_child_fails_restart.

    child2 fails its restart: the round is aborted, and the next round (from child2,
    one_for_all: all of them) first stops the child1 it had started, then starts both.
    """
    board = Board()
    sup = Supervisor(
        [child("child1", board), child("child2", board, fail={2})],
        strategy="one_for_all",
        max_restarts=3,
        period=300,
    )
    ref: SupervisorRef = await nursery.start(sup.run)
    await crash(ref, "child1")
    await settle()
    assert board.since(0)[2:] == [
        (0, "stop", "child1", 1),
        (0, "stop", "child2", 1),
        (0.025, "start", "child1", 2),
        (0.025, "fail_start", "child2", 2),
        (0.025, "stop", "child1", 2),  # terminated by the retried round
        (0.05, "start", "child1", 3),  # child2's own backoff: its first, 25 ms
        (0.05, "start", "child2", 3),
    ]
    assert ref.restarts == 2  # the retried round counts
    assert counts(ref) == [2, 2, 0, 2]


async def test_rest_for_one(autojump_clock: trio.testing.MockClock) -> None:
    """Ports supervisor_SUITE:rest_for_one: child2's crash restarts child2 and child3."""
    board = Board()
    with pytest.RaisesGroup(RestartIntensityExceeded):
        async with trio.open_nursery() as nursery:
            sup = Supervisor([], strategy="rest_for_one", max_restarts=2, period=300)
            ref: SupervisorRef = await nursery.start(sup.run)
            for cid in ("child1", "child2", "child3"):
                await ref.start_child(child(cid, board))
            assert counts(ref) == [3, 3, 0, 3]
            await crash(ref, "child2")
            await settle()
            assert board.since(0)[3:] == [
                (0, "stop", "child2", 1),
                (0, "stop", "child3", 1),
                (0.025, "start", "child2", 2),
                (0.025, "start", "child3", 2),
            ]
            assert [(r.id, r.incarnation) for r in ref.which_children()] == [
                ("child1", 1),
                ("child2", 2),
                ("child3", 2),
            ]
            await crash(ref, "child3")
            await settle()
            await crash(ref, "child2")
            await settle()
    assert sup.ref.state is ActorState.FAILED


async def test_rest_for_one_escalation(autojump_clock: trio.testing.MockClock) -> None:
    """Ports supervisor_SUITE:rest_for_one_escalation: child2 never restarts; both end."""
    board = Board()
    with pytest.RaisesGroup(RestartIntensityExceeded):
        async with trio.open_nursery() as nursery:
            sup = Supervisor([], strategy="rest_for_one", max_restarts=4, period=300)
            ref: SupervisorRef = await nursery.start(sup.run)
            await ref.start_child(child("child1", board))
            await ref.start_child(child("child2", board, fail={2, 3, 4, 5, 6}))
            await crash(ref, "child1")
            await settle()
    assert board.kinds("fail_start") == [("child2", 2), ("child2", 3), ("child2", 4), ("child2", 5)]
    # Each retried round is from child2: child1 was started once more, and stopped last.
    assert board.kinds("start") == [("child1", 1), ("child2", 1), ("child1", 2)]
    assert board.entries[-1][1:] == ("stop", "child1", 2)


async def test_rest_for_one_other_child_fails_restart(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Ports supervisor_SUITE:rest_for_one_other_child_fails_restart.

    The round retried from child2 restarts child2 (and those after it), not child1.
    """
    board = Board()
    sup = Supervisor(
        [child("child1", board), child("child2", board, fail={2})],
        strategy="rest_for_one",
        max_restarts=3,
        period=300,
    )
    ref: SupervisorRef = await nursery.start(sup.run)
    await crash(ref, "child1")
    await settle()
    assert board.since(0)[2:] == [
        (0, "stop", "child1", 1),
        (0, "stop", "child2", 1),
        (0.025, "start", "child1", 2),
        (0.025, "fail_start", "child2", 2),
        (0.05, "start", "child2", 3),  # child2's own backoff: its first, 25 ms
    ]
    assert ref.restarts == 2
    assert [(r.id, r.incarnation) for r in ref.which_children()] == [
        ("child1", 2),
        ("child2", 3),
    ]


async def test_one_for_one_restart_failure_is_retried(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Ports the one_for_one half of supervisor_SUITE's restart-failure cases.

    A failed restart is retried (OTP's try_again_restart) and each attempt counts.
    """
    board = Board()
    ref: SupervisorRef = await nursery.start(Supervisor([child("a", board, fail={2, 3})]).run)
    await crash(ref, "a")
    await settle()
    assert board.since(0)[1:] == [
        (0, "stop", "a", 1),
        (0.025, "fail_start", "a", 2),
        (0.075, "fail_start", "a", 3),
        (0.175, "start", "a", 4),
    ]
    assert ref.restarts == 3
    assert ref.restart_count("a") == 3


async def test_child_unlink_terminate_child_does_not_hang(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Ports supervisor_SUITE:child_unlink: terminating a busy child is bounded.

    No links here: the child's handler is busy; terminate_child waits its shutdown
    (1 s) and then cancels it, and the supervisor keeps taking calls.
    """
    board = Board()
    ref: SupervisorRef = await nursery.start(Supervisor([child("naughty", board)]).run)
    await ref.child("naughty").send("busy")
    await ref.terminate_child("naughty")
    assert trio.current_time() == 1.0
    assert counts(ref) == [1, 0, 0, 1]
    live = await ref.restart_child("naughty")
    assert await live.ask("ping", timeout=1) == ("ping", 2)
    with pytest.raises(ChildRunning):
        await ref.restart_child("naughty")


async def test_hanging_restart_loop(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Ports supervisor_SUITE:hanging_restart_loop: calls are served between two tries.

    child1's restarts keep failing; the supervisor still answers, and a terminate_child
    taken between two tries ends the loop (the retry is dropped), as OTP's
    try_again_restart message does. Ours waits for the round under way: each round
    holds its backoff (25, 50, 100 ms ...).
    """
    board = Board()
    sup = Supervisor([child("child1", board, fail=set(range(2, 99)))], max_restarts=50)
    ref: SupervisorRef = await nursery.start(sup.run)
    await crash(ref, "child1")
    await trio.sleep(0.1)  # the rounds at 0.025 and 0.075 failed; the third is under way
    assert [r.running for r in ref.which_children()] == [False]
    await ref.terminate_child("child1")
    assert trio.current_time() == pytest.approx(0.175)  # the third round's end
    await settle()
    assert board.kinds("fail_start") == [("child1", 2), ("child1", 3), ("child1", 4)]
    assert ref.restarts == 3
    assert counts(ref) == [1, 0, 0, 1]
    assert ref.state is ActorState.RUNNING
