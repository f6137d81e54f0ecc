"""The runtime as a supervision tree (design §1.7).

::

    runtime        Supervisor, rest_for_one
    ├── event_log  EventLogActor
    └── services   Supervisor, one_for_one
        ├── pool       PoolActor (the helper pool; its failure escalates here)
        ├── renderer   Renderer
        └── scheduler  SchedulerActor

Why this shape. The event log is the system of record: the runs it holds are what the
services work for, and after it restarts its unfinished runs are *held* (design §6.10)
and nothing may keep working for them. So ``rest_for_one`` at the top: a restarted
event log restarts the services after it, and everything starts afresh from its boot
report. Among the services nothing else depends on an incarnation: each reaches the
others through the runtime's handles, which follow restarts (:class:`LiveChild`), and
the one piece of state tied to a helper incarnation, the scheduler's claims, is fenced
by ``HelperRestarted``, which the pool actor tells the scheduler itself. So
``one_for_one`` below: a failed helper pool is restarted alone (the recovery of design
§3.7, with the supervisor's capped backoff) and the scheduler keeps its run table. The
start order is the dependency order (the event log first, the scheduler last) and the
stop order its reverse, so the scheduler drains while the pool still serves it.

Every decision of either supervisor is a log record, a :class:`SupervisorEvent`, and an
``actor_*`` event in the event log (:class:`~actors._runtime._eventlog_sink.EventLogSink`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar

import trio

from .._core import MAX_DURATION, ActorRef, ChildSpec, Supervisor
from ..errors import ActorStopped, AskTimeout

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from .._core import Backoff, SupervisorEvent

__all__ = ["SYSTEM_START_TIMEOUT", "LiveChild", "build_tree"]

#: Seconds (trio clock) a system actor's start may take (design §1.4, §1.7): generous,
#: as the event log's boot reads its ledger and a loaded machine is slow, but bounded.
SYSTEM_START_TIMEOUT = 60.0

_log = logging.getLogger("actors.runtime")

InstanceT = TypeVar("InstanceT")


class LiveChild(Generic[InstanceT]):
    """One supervised actor across its restarts: its current ref and instance (§1.7).

    A :class:`~actors.RefSource`: a handle built on it follows the
    actor, and a call that comes while the actor restarts waits for it. The child's
    ``ChildSpec.start`` passes each actor it makes through :meth:`made`, and the
    supervisor's ``on_event`` hands every decision to :meth:`on_event`.

    Args:
        name: The child's id in the tree.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.ref: ActorRef | None = None
        """The running incarnation's ref (None while it restarts)."""
        self.last_ref: ActorRef | None = None
        """The ref of the last incarnation that started."""
        self.instance: InstanceT | None = None
        """The running incarnation's actor object."""
        self.pending: InstanceT | None = None
        self.closed = False
        self._changed = trio.Event()

    def made(self, instance: InstanceT) -> InstanceT:
        """Note the instance ``ChildSpec.start`` just made; return it."""
        self.pending = instance
        return instance

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def started(self, ref: ActorRef) -> None:
        """The tree started a new incarnation."""
        self.ref = self.last_ref = ref
        self.instance = self.pending
        self._notify()

    def exited(self) -> None:
        """The running incarnation ended; the tree may restart it."""
        self.ref = None
        self.instance = None
        self._notify()

    def on_event(self, event: SupervisorEvent) -> None:
        """Follow one decision of the tree; those about other children are ignored."""
        if event.child != self.name:
            return
        if event.kind == "child_started" and isinstance(event.ref, ActorRef):
            self.started(event.ref)
        elif event.kind in ("child_exited", "child_stopped"):
            self.exited()

    def close(self) -> None:
        """The tree stops: no incarnation will come any more."""
        self.closed = True
        self._notify()

    def current(self) -> ActorRef | None:
        """The running incarnation's ref, or None while it restarts."""
        ref = self.ref
        return ref if ref is not None and ref.state.accepts_messages else None

    async def wait(self, deadline: float, *, other_than: ActorRef | None = None) -> ActorRef:
        """Wait until ``deadline`` (trio clock) for a running incarnation.

        Args:
            deadline: Seconds on trio's clock.
            other_than: Wait for another incarnation than this one (it is failing).

        Raises:
            ActorStopped: (code ``actor_stopped``) the runtime is closing.
            AskTimeout: (code ``ask_timeout``) none started before ``deadline``.
        """
        with trio.move_on_at(deadline):
            while True:
                ref = self.current()
                if ref is not None and ref is not other_than:
                    await trio.lowlevel.checkpoint()
                    return ref
                if self.closed:
                    raise ActorStopped(
                        f"actor {self.name!r} stopped: the runtime closes", actor=self.name
                    )
                await self._changed.wait()
        raise AskTimeout(
            f"actor {self.name!r} was not running before the deadline", actor=self.name
        )


#: Each supervisor of the tree and its strategy (design §1.7).
STRATEGIES: Final[Mapping[str, Literal["one_for_one", "rest_for_one"]]] = {
    "runtime": "rest_for_one",
    "services": "one_for_one",
}


def build_tree(
    event_log: ChildSpec,
    services: list[ChildSpec],
    *,
    max_restarts: int,
    period: float,
    backoff: Backoff,
    grace: float,
    on_event: Callable[[SupervisorEvent], object],
) -> Supervisor:
    """The supervisor of the runtime (see the module docstring)."""

    def make_services() -> Supervisor:
        return Supervisor(
            services,
            strategy=STRATEGIES["services"],
            max_restarts=max_restarts,
            period=period,
            backoff=backoff,
            name="services",
            on_event=on_event,
        )

    # The services start one after the other: their bounds add up.
    services_start = min(MAX_DURATION, sum(spec.start_timeout for spec in services))
    return Supervisor(
        [
            event_log,
            ChildSpec("services", make_services, shutdown=grace, start_timeout=services_start),
        ],
        strategy=STRATEGIES["runtime"],
        max_restarts=max_restarts,
        period=period,
        backoff=backoff,
        name="runtime",
        on_event=on_event,
    )


def route(children: dict[str, LiveChild[Any]], event: SupervisorEvent) -> None:
    """Keep each :class:`LiveChild` in step with the tree's decisions."""
    child = children.get(event.child)
    if child is not None:
        child.on_event(event)
