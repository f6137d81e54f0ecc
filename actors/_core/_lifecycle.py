"""State machines as data: transition tables plus one ``process_event`` (design §1.3).

Modelled on h11's ``_state.py``: every legal move is a row in a table, and everything
else is refused. A machine is a :class:`StateMachine` built from a table of the form
``{state: {event: new_state}}`` and an initial state; :meth:`StateMachine.process_event`
looks the move up and raises :class:`~actors.errors.InvalidTransition` when the table has
no row for it. The machine does no I/O and knows nothing of trio.

Theory of operation
===================

The actor lifecycle (design §1.3) is::

    STARTING --STARTED--> RUNNING --STOP--> STOPPING --FINISHED--> STOPPED
        |                                      ^   \\
        +-----------------STOP-----------------+    +--CRASHED--> FAILED

* ``STARTED``: ``on_start`` returned; the actor now handles messages.
* ``STOP``: the mailbox was closed (``stop()`` was called, the actor crashed, or it was
  cancelled from outside). Every way out passes through ``STOPPING``, so "the mailbox is
  closed" and "the state is not STARTING/RUNNING" always agree.
* ``FINISHED`` / ``CRASHED``: ``run`` is about to return normally (or by cancellation)
  or to raise. Only then is a terminal state reached, so a terminal state means the
  actor's task has done all its work.
* ``STOP`` is accepted (and changes nothing) in ``STOPPING`` and in both terminal states,
  so concurrent or repeated stops are harmless.

The helper table (design §3.8) lives at the end of this module; it reuses
:class:`StateMachine`.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Mapping
from typing import Generic, TypeVar

from ..errors import InvalidTransition

__all__ = [
    "ACTOR_TRANSITIONS",
    "ActorEvent",
    "ActorState",
    "StateMachine",
    "new_actor_lifecycle",
]

StateT = TypeVar("StateT", bound=Hashable)
EventT = TypeVar("EventT", bound=Hashable)


def _label(value: object) -> str:
    # Enum members are reported by their value ("running"), anything else by str().
    return str(value.value) if isinstance(value, enum.Enum) else str(value)


class StateMachine(Generic[StateT, EventT]):
    """A finite state machine driven by a transition table (h11 ``_state.py`` style).

    Args:
        table: ``{state: {event: new_state}}``. Every state that can be reached must
            have a row (an empty mapping for a state with no way out).
        initial: The starting state; it must have a row in ``table``.
        name: What the machine describes (e.g. ``"actor 'cache'"``), used in errors.

    Raises:
        ValueError: ``initial`` or a target state has no row in ``table``.
    """

    __slots__ = ("_name", "_state", "_table")

    def __init__(
        self,
        table: Mapping[StateT, Mapping[EventT, StateT]],
        initial: StateT,
        *,
        name: str = "state machine",
    ) -> None:
        if initial not in table:
            raise ValueError(f"initial state {_label(initial)} has no row in the table")
        for state, row in table.items():
            for event, target in row.items():
                if target not in table:
                    raise ValueError(
                        f"{_label(state)} --{_label(event)}--> {_label(target)}: "
                        f"target state has no row in the table"
                    )
        self._table = table
        self._state = initial
        self._name = name

    @property
    def state(self) -> StateT:
        """The current state."""
        return self._state

    @property
    def name(self) -> str:
        """What the machine describes, as given at construction."""
        return self._name

    def can_process(self, event: EventT) -> bool:
        """Return True if ``event`` is legal in the current state (nothing changes)."""
        return event in self._table[self._state]

    def process_event(self, event: EventT) -> StateT:
        """Apply ``event`` and return the new state.

        Args:
            event: One of the events of the table.

        Returns:
            The state after the move (possibly the same state, for idempotent rows).

        Raises:
            InvalidTransition: (code ``invalid_transition``) the table has no row for
                ``event`` in the current state; the state is left unchanged. ``details``
                has ``machine``, ``state`` and ``event``.
        """
        try:
            new_state = self._table[self._state][event]
        except KeyError:
            raise InvalidTransition(
                f"{self._name}: can't handle event {_label(event)} in state {_label(self._state)}",
                machine=self._name,
                state=_label(self._state),
                event=_label(event),
            ) from None
        self._state = new_state
        return new_state

    def __repr__(self) -> str:
        return f"<StateMachine {self._name!r} state={_label(self._state)}>"


class _Enum(enum.Enum):
    """An enum hashed by identity, in C: its members key the transition tables, looked
    up on every move (``Enum.__hash__`` is a Python function hashing the name)."""

    __hash__ = object.__hash__


# --- actor lifecycle (design §1.3) ------------------------------------------------------


class ActorState(_Enum):
    """Where an actor is in its life (design §1.3)."""

    STARTING = "starting"
    """``run`` was entered; ``on_start`` is running. The mailbox already takes messages."""
    RUNNING = "running"
    """Handling messages one at a time, in order."""
    STOPPING = "stopping"
    """The mailbox is closed: sends raise ``ActorStopped``; the rest is being drained."""
    STOPPED = "stopped"
    """``run`` finished normally (drained, or cancelled after the grace period)."""
    FAILED = "failed"
    """``run`` raised: the actor crashed and failed to its parent."""

    @property
    def accepts_messages(self) -> bool:
        """True in ``STARTING`` and ``RUNNING``: the mailbox is open."""
        return self is ActorState.STARTING or self is ActorState.RUNNING

    @property
    def terminal(self) -> bool:
        """True in ``STOPPED`` and ``FAILED``: the actor's task is done."""
        return self is ActorState.STOPPED or self is ActorState.FAILED


class ActorEvent(_Enum):
    """What can happen to an actor: the inputs of its lifecycle table (design §1.3)."""

    STARTED = "started"
    """``on_start`` returned."""
    STOP = "stop"
    """The mailbox was closed (stop requested, crash, or outside cancellation)."""
    FINISHED = "finished"
    """``run`` is returning without an error (drained, or cancelled)."""
    CRASHED = "crashed"
    """``run`` is raising an exception other than cancellation."""


_S = ActorState
_E = ActorEvent

#: The actor lifecycle table: ``{state: {event: new_state}}`` (design §1.3).
ACTOR_TRANSITIONS: Mapping[ActorState, Mapping[ActorEvent, ActorState]] = {
    _S.STARTING: {_E.STARTED: _S.RUNNING, _E.STOP: _S.STOPPING},
    _S.RUNNING: {_E.STOP: _S.STOPPING},
    _S.STOPPING: {_E.STOP: _S.STOPPING, _E.FINISHED: _S.STOPPED, _E.CRASHED: _S.FAILED},
    _S.STOPPED: {_E.STOP: _S.STOPPED},
    _S.FAILED: {_E.STOP: _S.FAILED},
}


def new_actor_lifecycle(name: str) -> StateMachine[ActorState, ActorEvent]:
    """Return a fresh lifecycle machine in ``STARTING`` for the actor called ``name``."""
    return StateMachine(ACTOR_TRANSITIONS, ActorState.STARTING, name=f"actor {name!r}")


# --- helper states (design §3.8) ------------------------------------------------------

# The states of one helper process incarnation and of the job it runs (design §3.3-3.8).
# A helper runs at most one job at a time, so the job's state *is* the helper's state.
#
#     STARTING --READY--> IDLE --JOB_SENT--> BUSY --REPLIED--> IDLE
#                          |                  |
#                          |             CANCEL_SENT (step 1)
#                          |                  v
#                          |              CANCELLING --REPLIED--> IDLE
#                    SHUTDOWN_SENT            |
#                          v             SIGTERM_SENT (step 2)
#                    SHUTTING_DOWN            v
#                          |             TERMINATING --SIGKILL_SENT (3)--> KILLING
#                          +------------------------------------------------^  |
#                                                              KILL_TIMED_OUT (4)
#                                                                              v
#                                                                         QUARANTINED
#
# SIGTERM_SENT and SIGKILL_SENT are legal from every live state (a startup failure, a
# protocol violation or a close may escalate at any point), and REAPED (the process was
# waited for) is legal from every state but EXITED: a helper can die at any moment.
# SIGNAL_FAILED (a signal could not be delivered) and ESCAPED (the leader is reaped but
# part of its tree outlived the kill timeout) quarantine it from any live state.


class HelperState(_Enum):
    """Where a helper incarnation, and the job it runs, is (design §3)."""

    STARTING = "starting"
    """Spawned; the startup frame is sent and *ready* is awaited (design §3.3)."""
    IDLE = "idle"
    """Ready, and running no job."""
    BUSY = "busy"
    """A job frame was sent; its reply is awaited (design §3.4)."""
    CANCELLING = "cancelling"
    """A cancel frame for the job's generation was sent; grace runs (design §3.5 step 1)."""
    SHUTTING_DOWN = "shutting_down"
    """A shutdown frame was sent; the exit is awaited (design §3.8)."""
    TERMINATING = "terminating"
    """SIGTERM went to the helper's process tree (design §3.5 step 2, §3.11)."""
    KILLING = "killing"
    """SIGKILL went to the helper's process tree (design §3.5 step 3, §3.11)."""
    QUARANTINED = "quarantined"
    """Not reaped within the kill timeout; no replacement until it is (design §3.5 step 4)."""
    EXITED = "exited"
    """Reaped: the process is gone, and so is its process tree (design §3.11)."""

    @property
    def live(self) -> bool:
        """True until the process is reaped."""
        return self is not HelperState.EXITED


class HelperEvent(_Enum):
    """What can happen to a helper: the inputs of its state table (design §3.8)."""

    READY = "ready"
    """The helper answered the startup frame with *ready*."""
    JOB_SENT = "job_sent"
    """A job frame (the next generation) was written."""
    REPLIED = "replied"
    """A terminal reply for the active job arrived and passed the envelope checks."""
    CANCEL_SENT = "cancel_sent"
    """A cancel frame for the active job was written."""
    SHUTDOWN_SENT = "shutdown_sent"
    """A shutdown frame was written."""
    SIGTERM_SENT = "sigterm_sent"
    """SIGTERM was sent to the helper's process tree."""
    SIGKILL_SENT = "sigkill_sent"
    """SIGKILL was sent to the helper's process tree."""
    KILL_TIMED_OUT = "kill_timed_out"
    """The kill timeout passed without the process being reaped."""
    REAPED = "reaped"
    """The process was waited for and nothing of its tree is left (design §3.11)."""
    SIGNAL_FAILED = "signal_failed"
    """A signal of the ladder could not be delivered (e.g. EPERM): quarantined until the
    process is gone."""
    ESCAPED = "escaped"
    """The leader was reaped but part of its tree outlived the kill timeout: quarantined
    until that part is gone too (design §3.11)."""


def _build_helper_table() -> dict[HelperState, dict[HelperEvent, HelperState]]:
    h, e = HelperState, HelperEvent
    table: dict[HelperState, dict[HelperEvent, HelperState]] = {
        h.STARTING: {e.READY: h.IDLE},
        h.IDLE: {e.JOB_SENT: h.BUSY, e.SHUTDOWN_SENT: h.SHUTTING_DOWN},
        h.BUSY: {e.REPLIED: h.IDLE, e.CANCEL_SENT: h.CANCELLING},
        h.CANCELLING: {e.REPLIED: h.IDLE},
        h.SHUTTING_DOWN: {},
        h.TERMINATING: {},
        h.KILLING: {e.KILL_TIMED_OUT: h.QUARANTINED},
        h.QUARANTINED: {},
        # A reply read before the watcher reaped the process still counts (the helper
        # may exit right after answering); the helper stays exited.
        h.EXITED: {e.REPLIED: h.EXITED},
    }
    for state, row in table.items():
        if state.live:
            row[e.REAPED] = h.EXITED
            row[e.SIGNAL_FAILED] = h.QUARANTINED
            row[e.ESCAPED] = h.QUARANTINED
            row[e.SIGKILL_SENT] = h.KILLING
            if state not in (h.KILLING, h.QUARANTINED):
                row[e.SIGTERM_SENT] = h.TERMINATING
    return table


#: The helper table: ``{state: {event: new_state}}`` (design §3.3-3.8).
HELPER_TRANSITIONS: Mapping[HelperState, Mapping[HelperEvent, HelperState]] = _build_helper_table()


def new_helper_lifecycle(name: str) -> StateMachine[HelperState, HelperEvent]:
    """Return a fresh helper machine in ``STARTING`` for the incarnation called ``name``."""
    return StateMachine(HELPER_TRANSITIONS, HelperState.STARTING, name=f"helper {name!r}")


__all__ += ["HELPER_TRANSITIONS", "HelperEvent", "HelperState", "new_helper_lifecycle"]
