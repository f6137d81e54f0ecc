"""The job server's supervision tree, built with the runtime's public API (design §1.7, §7.1).

::

    runtime        Supervisor, one_for_one
    ├── services   Supervisor, one_for_one
    │   └── pool       PoolActor (on_failure="escalate")
    └── event_log  EventLogActor (its runners run each job on the pool)

The supervisors carry the names of :func:`actors.open_runtime`'s tree, so the Observer
and the ``supervisor`` label of the metrics read the same on both example servers: a
helper pool past its restart intensity (its escalation, ``intensity_exceeded``) fails
its actor, and ``services`` restarts it after the tree's capped backoff
(``trio_actors_supervisor_restarts_total{supervisor="services"}``).

Why this shape, and not the preview server's ``rest_for_one``. There the services work
for the event log's runs and must start afresh when it restarts. Here the dependency
runs the other way: the event log's runners run jobs on the pool, through a
:class:`~actors.PoolHandle` that follows the pool across its restarts (a job that comes
while the pool restarts waits for it, within its own timeout), and the pool depends on
nothing. So neither needs the other restarted: ``one_for_one`` at the top too; a pool
that fails never costs the event log its runs (in memory, they would be lost). The pool
starts first, as the event log's runners need it, and stops last: the event log stops
first, so runs still running at a shutdown are cut off as unfinished (held at the next
start with a ledger, design §6.10), not failed by a closing pool. The pool has a
supervisor of its own so its failures count against an intensity of their own: past
``services``' intensity (``max_restarts`` within ``period``), ``services`` gives up
(``trio_actors_supervisor_escalations_total{supervisor="services"}``) and ``runtime``
starts a fresh one; past ``runtime``'s, the server fails.

Every decision of either supervisor is a log record of ``actors.supervisor`` and is fed
to the runtime's metrics (:meth:`actors.metrics.RuntimeMetrics.on_supervisor_event`),
whose :class:`~actors.metrics.Lifecycle` the Observer shows.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Final, Generic, Literal, TypeVar

import trio

from actors import ActorRef, ChildSpec, Supervisor
from actors.errors import ActorStopped, AskTimeout, ChildStartFailed

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from actors import Backoff, SupervisorEvent

__all__ = ["STRATEGIES", "Incarnations", "build_tree", "started_or_root_cause"]

#: Each supervisor of the job server's tree and its strategy (see the module docstring).
STRATEGIES: Final[Mapping[str, Literal["one_for_one"]]] = {
    "runtime": "one_for_one",
    "services": "one_for_one",
}

ActorT = TypeVar("ActorT")


class Incarnations(Generic[ActorT]):
    """One supervised actor across its restarts: its running ref and actor object.

    A :class:`~actors.RefSource` (a :class:`~actors.PoolHandle` built on it follows the
    actor). :meth:`made` wraps the child's factory; :meth:`on_event` is fed the tree's
    decisions.

    Args:
        child: The child's id in the tree.
    """

    def __init__(self, child: str) -> None:
        self.child = child
        self.ref: ActorRef | None = None
        """The running incarnation's ref, or None while it restarts."""
        self.last_ref: ActorRef | None = None
        """The ref of the last incarnation that started."""
        self.actor: ActorT | None = None
        """The running incarnation's actor object, or None while it restarts."""
        self._made: ActorT | None = None
        self._closed = False
        self._changed = trio.Event()

    def made(self, factory: Callable[[], ActorT]) -> Callable[[], ActorT]:
        """``factory`` as a ``ChildSpec.start`` that notes each actor it makes."""

        def start() -> ActorT:
            self._made = factory()
            return self._made

        return start

    def on_event(self, event: SupervisorEvent) -> None:
        """Follow one decision of the tree (those about other children are ignored)."""
        if event.child != self.child:
            return
        if event.kind == "child_started" and isinstance(event.ref, ActorRef):
            self.ref = self.last_ref = event.ref
            self.actor = self._made
        elif event.kind in ("child_exited", "child_stopped"):
            self.ref = self.actor = None
        else:
            return
        self._wake()

    def close(self) -> None:
        """The tree stops: no incarnation comes any more."""
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def current(self) -> ActorRef | None:
        """The running incarnation's ref, or None while it restarts."""
        ref = self.ref
        return ref if ref is not None and ref.state.accepts_messages else None

    async def wait(self, deadline: float, *, other_than: ActorRef | None = None) -> ActorRef:
        """Wait until ``deadline`` (trio clock, seconds) for a running incarnation.

        Args:
            deadline: Seconds on trio's clock.
            other_than: Wait for another incarnation than this one (it is failing).

        Raises:
            ActorStopped: (code ``actor_stopped``) the tree is stopping.
            AskTimeout: (code ``ask_timeout``) none started before ``deadline``.
        """
        with trio.move_on_at(deadline):
            while True:
                ref = self.current()
                if ref is not None and ref is not other_than:
                    await trio.lowlevel.checkpoint()
                    return ref
                if self._closed:
                    message = f"{self.child!r} stopped: the server closes"
                    raise ActorStopped(message, actor=self.child)
                await self._changed.wait()
        raise AskTimeout(f"{self.child!r} was not running before the deadline", actor=self.child)


def build_tree(
    *,
    pool: ChildSpec,
    event_log: ChildSpec,
    max_restarts: int,
    period: float,
    backoff: Backoff,
    on_event: Callable[[SupervisorEvent], object],
) -> Supervisor:
    """The job server's root supervisor (see the module docstring).

    Args:
        pool: The pool actor's child spec (id ``pool``).
        event_log: The event log's child spec (id ``event_log``).
        max_restarts: Restarts each supervisor allows within ``period``.
        period: Seconds (trio clock) of each supervisor's intensity window.
        backoff: Delay before each restart round (design §1.4).
        on_event: Fed every decision of both supervisors.
    """

    def make_services() -> Supervisor:
        return Supervisor(
            [pool],
            strategy=STRATEGIES["services"],
            max_restarts=max_restarts,
            period=period,
            backoff=backoff,
            name="services",
            on_event=on_event,
        )

    return Supervisor(
        [
            ChildSpec(
                "services", make_services, shutdown=pool.shutdown, start_timeout=pool.start_timeout
            ),
            event_log,
        ],
        strategy=STRATEGIES["runtime"],
        max_restarts=max_restarts,
        period=period,
        backoff=backoff,
        name="runtime",
        on_event=on_event,
    )


@contextlib.contextmanager
def started_or_root_cause() -> Iterator[None]:
    """Around the tree's first start: raise the error that failed it, not the wrapper.

    A child that cannot start (a helper that does not get ready, a damaged ledger)
    fails the tree's start with ``ChildStartFailed``, nested once per supervisor; the
    caller wants the cause (``HelperStartupFailed``, ``LedgerCorrupt``, ...), with the
    tree's account of it as a note.
    """
    try:
        yield
    except ChildStartFailed as exc:
        root = exc.root_cause
        root.add_note(str(exc))
        raise root from None
