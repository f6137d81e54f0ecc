"""The helper-job state table of ``_core._lifecycle`` (design §3.3-3.8, contributing §B.3)."""

from __future__ import annotations

import pytest

from actors import HelperEvent, HelperState, InvalidTransition
from actors._core._lifecycle import HELPER_TRANSITIONS, new_helper_lifecycle

E = HelperEvent
S = HelperState


@pytest.mark.parametrize(
    ("events", "final"),
    [
        ([E.READY, E.JOB_SENT, E.REPLIED], S.IDLE),
        ([E.READY, E.JOB_SENT, E.CANCEL_SENT, E.REPLIED], S.IDLE),
        ([E.READY, E.JOB_SENT, E.CANCEL_SENT, E.SIGTERM_SENT, E.REAPED], S.EXITED),
        (
            [E.READY, E.JOB_SENT, E.CANCEL_SENT, E.SIGTERM_SENT, E.SIGKILL_SENT, E.REAPED],
            S.EXITED,
        ),
        ([E.READY, E.JOB_SENT, E.SIGKILL_SENT, E.KILL_TIMED_OUT], S.QUARANTINED),
        ([E.READY, E.JOB_SENT, E.SIGKILL_SENT, E.KILL_TIMED_OUT, E.REAPED], S.EXITED),
        ([E.READY, E.SHUTDOWN_SENT, E.REAPED], S.EXITED),
        ([E.SIGKILL_SENT, E.REAPED], S.EXITED),
        ([E.READY, E.JOB_SENT, E.REAPED], S.EXITED),
        # design §3.5: a signal that cannot be delivered quarantines until it is gone
        ([E.READY, E.JOB_SENT, E.CANCEL_SENT, E.SIGNAL_FAILED], S.QUARANTINED),
        ([E.READY, E.JOB_SENT, E.CANCEL_SENT, E.SIGNAL_FAILED, E.REAPED], S.EXITED),
        # design §3.11: the leader is reaped but part of its tree outlived the sweep
        ([E.READY, E.JOB_SENT, E.ESCAPED], S.QUARANTINED),
        ([E.READY, E.SHUTDOWN_SENT, E.ESCAPED, E.SIGKILL_SENT, E.REAPED], S.EXITED),
    ],
)
def test_the_ladder_and_the_happy_paths(events, final):
    machine = new_helper_lifecycle("h")
    for event in events:
        machine.process_event(event)
    assert machine.state is final


@pytest.mark.parametrize(
    ("events", "bad"),
    [
        ([], E.JOB_SENT),  # no job before ready
        ([E.READY, E.JOB_SENT], E.JOB_SENT),  # one job at a time
        ([E.READY], E.REPLIED),  # no reply without a job
        ([E.READY], E.CANCEL_SENT),
        ([E.READY, E.JOB_SENT, E.CANCEL_SENT], E.CANCEL_SENT),
        ([E.READY, E.SIGKILL_SENT], E.SIGTERM_SENT),  # never back down the ladder
        ([E.READY, E.REAPED], E.REAPED),
        ([E.READY, E.REAPED], E.SIGKILL_SENT),  # never signal a reaped process
    ],
)
def test_illegal_moves_raise_and_leave_the_state(events, bad):
    machine = new_helper_lifecycle("h")
    for event in events:
        machine.process_event(event)
    before = machine.state
    with pytest.raises(InvalidTransition) as caught:
        machine.process_event(bad)
    assert machine.state is before
    assert caught.value.details["event"] == bad.value


def test_every_live_state_can_be_reaped_and_exited_is_terminal():
    for state, row in HELPER_TRANSITIONS.items():
        if state is S.EXITED:
            # Terminal: the only row is a reply read before the reap, which stays EXITED.
            assert row == {E.REPLIED: S.EXITED}
        else:
            assert row[E.REAPED] is S.EXITED
            assert row[E.SIGKILL_SENT] is S.KILLING
