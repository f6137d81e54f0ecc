"""One child of a supervisor, across its incarnations (design §1.4, §1.9).

A :class:`Child` is the supervisor's record of one child spec: its current
:class:`Incarnation` (one actor instance in its own cancel scope) and its *status*, which
says what a :class:`~actors._core._live_ref.LiveRef` to it may expect:

``starting``
    its first start (or a ``restart_child``) is under way: wait for it;
``running``
    an incarnation runs;
``restarting``
    it ended (or a sibling's restart stopped it) and its supervisor means to start it
    again: wait for the new incarnation (bounded), or fail with ``ActorRestarting``;
``stopped``
    not running, and its supervisor will not start it by itself (a transient child's
    normal exit, ``terminate_child``): only ``restart_child`` brings it back;
``gone``
    deleted, a temporary child that ended, or its supervisor stopped: ``ActorStopped``.

Each status change sets the child's ``changed`` event (and makes a fresh one), which is
what waiting refs sleep on.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

import trio

from ..errors import ActorRestarting, ActorStopped
from ._supervisor_spec import BRUTAL_KILL, INFINITY, exit_reason

if TYPE_CHECKING:
    from ._backoff import BackoffTracker
    from ._supervisor_spec import ChildRef, ChildSpec, ChildType, Runnable

__all__ = [
    "GONE",
    "RESTARTING",
    "RUNNING",
    "STARTING",
    "STOPPED",
    "Child",
    "Incarnation",
    "StartedRelay",
    "start_failure",
]

STARTING: Final = "starting"
RUNNING: Final = "running"
RESTARTING: Final = "restarting"
STOPPED: Final = "stopped"
GONE: Final = "gone"


class Incarnation:
    """One run of a child: one actor instance, in its own cancel scope."""

    __slots__ = (
        "actor",
        "done",
        "error",
        "number",
        "ref",
        "scope",
        "stopping",
        "timed_out",
    )

    def __init__(self, number: int, actor: Runnable | None) -> None:
        self.number = number
        self.actor = actor
        self.ref: ChildRef | None = None
        self.scope = trio.CancelScope()
        self.done = trio.Event()
        self.error: BaseException | None = None
        self.stopping = False  # the supervisor stopped it: its exit is not reported
        self.timed_out = False  # its start took longer than ``ChildSpec.start_timeout``

    @property
    def started(self) -> bool:
        """True once its start reported its ref (``task_status.started``)."""
        return self.ref is not None


class Child:
    """The supervisor's record of one child spec (see the module docstring)."""

    __slots__ = (
        "changed",
        "current",
        "live",
        "restart_wait",
        "restarts",
        "spec",
        "status",
        "supervisor",
        "tracker",
        "type",
    )

    def __init__(
        self,
        spec: ChildSpec,
        tracker: BackoffTracker,
        *,
        supervisor: str,
        restart_wait: float,
    ) -> None:
        self.spec = spec
        self.tracker = tracker
        self.supervisor = supervisor
        self.restart_wait = restart_wait
        """Seconds (trio clock) a send through a live ref waits for a new incarnation."""
        self.restarts = 0
        self.current: Incarnation | None = None
        self.status: str = STARTING
        self.changed = trio.Event()
        self.type: ChildType = "worker"
        self.live: object | None = None  # the child's LiveRef, made on first use

    @property
    def id(self) -> str:
        """The child's id."""
        return self.spec.id

    @property
    def running(self) -> bool:
        """True while an incarnation has started and not ended."""
        inc = self.current
        return self.status == RUNNING and inc is not None and not inc.done.is_set()

    def cut_start(self, grace: float) -> None:
        """Cancel a start under way in ``grace`` seconds, or its shutdown grace if shorter."""
        inc = self.current
        if inc is None or inc.started or inc.done.is_set():
            return
        inc.stopping = True  # its start raises ActorStopped: not a failure
        shutdown = self.spec.shutdown
        own = grace if shutdown == INFINITY else 0.0 if shutdown == BRUTAL_KILL else shutdown
        inc.scope.deadline = min(inc.scope.deadline, trio.current_time() + min(grace, float(own)))

    def set_status(self, status: str) -> None:
        """Move to ``status`` and wake every ref waiting for a change."""
        self.status = status
        self.changed.set()
        self.changed = trio.Event()

    def running_ref(self) -> ChildRef | None:
        """The running incarnation's ref if it takes messages, else None."""
        inc = self.current
        if self.status != RUNNING or inc is None or inc.ref is None or inc.done.is_set():
            return None
        return inc.ref if inc.ref.state.accepts_messages else None

    def replaced(self, ref: ChildRef) -> bool:
        """True if the supervisor started, or means to start, another incarnation than ``ref``'s."""
        if self.status in (STARTING, RESTARTING):
            return True
        inc = self.current
        return self.status == RUNNING and inc is not None and inc.ref is not ref

    def absent_error(self) -> ActorStopped | ActorRestarting:
        """The error for a message that finds no incarnation: stopped for good, or restarting."""
        if self.status in (STOPPED, GONE):
            return ActorStopped(
                f"child {self.id!r} of supervisor {self.supervisor!r} is not running "
                f"and will not be restarted ({self.status})",
                actor=self.id,
                supervisor=self.supervisor,
            )
        return self.restarting_error()

    def restarting_error(self) -> ActorRestarting:
        """The error for a message sent while the supervisor starts it again."""
        return ActorRestarting(
            f"child {self.id!r} of supervisor {self.supervisor!r} is restarting",
            actor=self.id,
            supervisor=self.supervisor,
        )


class StartedRelay:
    """A ``task_status`` that records the child's ref before passing it on."""

    __slots__ = ("_inc", "_status")

    def __init__(self, inc: Incarnation, status: trio.TaskStatus[ChildRef]) -> None:
        self._inc = inc
        self._status = status

    def started(self, value: ChildRef | None = None) -> None:
        assert value is not None
        inc = self._inc
        inc.ref = value
        if not inc.stopping:
            inc.scope.deadline = math.inf  # the start timeout bounds only the start
        self._status.started(value)


def start_failure(inc: Incarnation | None) -> tuple[str, str | None]:
    """Why a start failed: ``start_timeout``, or the error's code (or type); and its text."""
    error = None if inc is None else inc.error
    reason, message = exit_reason(error)
    if inc is not None and inc.timed_out:
        reason = "start_timeout"
    return reason, message
