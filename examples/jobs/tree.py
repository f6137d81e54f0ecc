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

Each actor is followed across its restarts by an :class:`actors.LiveChild` (the job
server's handles are built on it). Every decision of either supervisor is a log record
of ``actors.supervisor`` and is fed to the metrics
(:meth:`actors.metrics.RuntimeMetrics.on_supervisor_event`), whose
:class:`~actors.metrics.Lifecycle` the Observer shows.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Final, Literal

from actors import ChildSpec, Supervisor
from actors.errors import ChildStartFailed

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from actors import Backoff, SupervisorEvent

__all__ = ["STRATEGIES", "build_tree", "started_or_root_cause"]

#: Each supervisor of the job server's tree and its strategy (see the module docstring).
STRATEGIES: Final[Mapping[str, Literal["one_for_one"]]] = {
    "runtime": "one_for_one",
    "services": "one_for_one",
}


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

    def supervisor(name: str, children: Sequence[ChildSpec]) -> Supervisor:
        return Supervisor(
            children,
            strategy=STRATEGIES[name],
            max_restarts=max_restarts,
            period=period,
            backoff=backoff,
            name=name,
            on_event=on_event,
        )

    services = ChildSpec(
        "services",
        lambda: supervisor("services", [pool]),
        shutdown=pool.shutdown,
        start_timeout=pool.start_timeout,
    )
    return supervisor("runtime", [services, event_log])


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
