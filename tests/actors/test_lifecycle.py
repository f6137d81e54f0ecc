"""The lifecycle table and the generic state machine (design §1.3, contributing §B.3)."""

from __future__ import annotations

import enum

import pytest

from actors import ActorEvent, ActorState, InvalidTransition, StateMachine
from actors._core._lifecycle import ACTOR_TRANSITIONS, new_actor_lifecycle


def test_happy_path_starting_running_stopping_stopped() -> None:
    machine = new_actor_lifecycle("cache")
    assert machine.state is ActorState.STARTING
    assert machine.process_event(ActorEvent.STARTED) is ActorState.RUNNING
    assert machine.process_event(ActorEvent.STOP) is ActorState.STOPPING
    assert machine.process_event(ActorEvent.FINISHED) is ActorState.STOPPED
    assert machine.state.terminal
    assert not machine.state.accepts_messages


def test_failure_path_goes_through_stopping() -> None:
    machine = new_actor_lifecycle("cache")
    machine.process_event(ActorEvent.STARTED)
    with pytest.raises(InvalidTransition):
        machine.process_event(ActorEvent.CRASHED)  # must close the mailbox first
    machine.process_event(ActorEvent.STOP)
    assert machine.process_event(ActorEvent.CRASHED) is ActorState.FAILED


def test_stop_before_running() -> None:
    machine = new_actor_lifecycle("cache")
    assert machine.process_event(ActorEvent.STOP) is ActorState.STOPPING
    with pytest.raises(InvalidTransition):
        machine.process_event(ActorEvent.STARTED)


@pytest.mark.parametrize("terminal", [ActorEvent.FINISHED, ActorEvent.CRASHED])
def test_stop_is_idempotent_everywhere_after_starting(terminal: ActorEvent) -> None:
    machine = new_actor_lifecycle("x")
    machine.process_event(ActorEvent.STOP)
    assert machine.process_event(ActorEvent.STOP) is ActorState.STOPPING
    end = machine.process_event(terminal)
    assert machine.process_event(ActorEvent.STOP) is end
    for event in (ActorEvent.STARTED, ActorEvent.FINISHED, ActorEvent.CRASHED):
        assert not machine.can_process(event)


def test_invalid_transition_names_machine_state_and_event() -> None:
    machine = new_actor_lifecycle("cache")
    with pytest.raises(InvalidTransition) as info:
        machine.process_event(ActorEvent.FINISHED)
    err = info.value
    assert err.code == "invalid_transition"
    assert err.category == "permanent"
    assert err.details == {"machine": "actor 'cache'", "state": "starting", "event": "finished"}
    assert "can't handle event finished in state starting" in str(err)
    assert machine.state is ActorState.STARTING  # unchanged


def test_every_state_has_a_row_and_only_terminal_states_are_dead_ends() -> None:
    assert set(ACTOR_TRANSITIONS) == set(ActorState)
    for state, row in ACTOR_TRANSITIONS.items():
        assert ActorEvent.STOP in row
        if state.terminal:
            assert row == {ActorEvent.STOP: state}


class Light(enum.Enum):
    RED = "red"
    GREEN = "green"


class Go(enum.Enum):
    GO = "go"
    HALT = "halt"


def test_generic_machine_is_reusable() -> None:
    table = {Light.RED: {Go.GO: Light.GREEN}, Light.GREEN: {Go.HALT: Light.RED}}
    machine = StateMachine(table, Light.RED, name="light")
    assert machine.can_process(Go.GO)
    assert not machine.can_process(Go.HALT)
    machine.process_event(Go.GO)
    assert machine.state is Light.GREEN
    assert "light" in repr(machine)
    with pytest.raises(InvalidTransition, match="light: can't handle event go in state green"):
        machine.process_event(Go.GO)


def test_machine_rejects_incomplete_tables() -> None:
    with pytest.raises(ValueError, match="initial state red"):
        StateMachine({Light.GREEN: {}}, Light.RED)
    with pytest.raises(ValueError, match="target state has no row"):
        StateMachine({Light.RED: {Go.GO: Light.GREEN}}, Light.RED)
