"""Data of the scheduler core: slots, runs, claims (design §4).

Pure: no trio, no I/O. :mod:`actors._scheduler._scheduler` holds the :class:`~actors.Scheduler`
state machine that uses these; :mod:`actors._scheduler._actor` drives it with trio. The
events live in :mod:`actors._scheduler._events`, the settings in
:mod:`actors._scheduler._config`.

Theory of operation
===================

Every run has one **slot** per declared kind (design §4.11). A slot moves through a
small table, like h11's ``_state.py``: every legal move is a row in
:data:`SLOT_TRANSITIONS` and anything else raises
:class:`~actors.errors.InvalidTransition` (a bug, never a user error)::

    BLOCKED --unblock--> PENDING --claim--> ACTIVE --succeed--> DONE
                            ^                 |  \\--fail------> FAILED
                            +----requeue------+  |\\--retry----> BACKOFF --wake--> PENDING
                                                 | \\--park----> PARKED --claim--> ACTIVE
                                                 +--interrupt--> INTERRUPTED

* ``BLOCKED``: a kind whose needs are not all conclusive (published) at the run's
  revision yet (design §4.11).
* ``PARKED``: the progressive kind of a run whose source is still being written; the
  result was handed out as a :class:`Parked` notice, not published (design §4.5).
* ``BACKOFF``: a transient failure; ``wake`` (or ``wake_parked`` for a progressive page)
  fires when the kind's retry policy says (design §4.12).
* ``INTERRUPTED``: the attempt was cut off by the actor's shutdown (its stop grace
  ended, or it crashed) before it reported: not a verdict on the work, which is still
  to do (design §4.13).
* ``reset`` / ``reset_blocked`` from any state but ``ACTIVE``: the run's source changed
  or the format changed, so the work is pending again (design §4.6, §4.8).

Slots are plain ``__slots__`` objects (not one :class:`actors._core._lifecycle.StateMachine`
each) because 100 000 runs x 5 kinds must fit in well under 1 KiB per run (design §4.3);
the retry state of a slot (:class:`_Retry`) exists only while it is being attempted.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

import attrs

from ..errors import InvalidTransition
from ._config import DEFAULT_TIERS, SchedulerConfig

if TYPE_CHECKING:
    from ._kinds import KindGraph

__all__ = [
    "TIERS",
    "Claim",
    "Produced",
    "Progressive",
    "RunInfo",
    "SchedulerConfig",
]

#: The default priority tiers, best first (design §4.2).
TIERS: Final = DEFAULT_TIERS

# Slot statuses (small ints: a slot is a few machine words).
BLOCKED: Final = 0
PENDING: Final = 1
ACTIVE: Final = 2
BACKOFF: Final = 3
PARKED: Final = 4
DONE: Final = 5
FAILED: Final = 6
INTERRUPTED: Final = 7
STATUS_NAMES: Final = (
    "blocked",
    "pending",
    "active",
    "backoff",
    "parked",
    "done",
    "failed",
    "interrupted",
)

_RESETTABLE = (BLOCKED, PENDING, BACKOFF, PARKED, DONE, FAILED, INTERRUPTED)

#: ``{(status, event): new_status}``: every legal slot move (see the module docstring).
SLOT_TRANSITIONS: Final[dict[tuple[int, str], int]] = {
    (BLOCKED, "unblock"): PENDING,
    (BLOCKED, "fail"): FAILED,  # a kind it needs failed for good
    (PENDING, "claim"): ACTIVE,
    (PARKED, "claim"): ACTIVE,  # a progressive page
    (ACTIVE, "succeed"): DONE,
    (ACTIVE, "fail"): FAILED,
    (ACTIVE, "retry"): BACKOFF,
    (ACTIVE, "park"): PARKED,
    (ACTIVE, "requeue"): PENDING,  # a stale completion of work that is still wanted
    (ACTIVE, "interrupt"): INTERRUPTED,  # cut off by a shutdown: still to do
    (BACKOFF, "wake"): PENDING,
    (BACKOFF, "wake_parked"): PARKED,
    **{(status, "reset"): PENDING for status in _RESETTABLE},
    **{(status, "reset_blocked"): BLOCKED for status in _RESETTABLE},
}


class _Retry:
    """Retry state of one slot while it is being attempted (design §4.12)."""

    __slots__ = ("attempts", "crashes", "first_at", "not_before")

    def __init__(self, first_at: float) -> None:
        self.attempts = 0
        """Attempts claimed in this sequence (stale and fenced ones are given back)."""
        self.crashes = 0
        """Attempts that ended with one of the policy's crash codes."""
        self.first_at = first_at
        """When the first attempt was claimed: the overall deadline counts from here."""
        self.not_before = 0.0
        """End of the current backoff, seconds on the caller's clock."""


class _Slot:
    """One (run, kind) work item: status, the live heap entry, retry state."""

    __slots__ = ("done_revision", "queued", "retry", "status")

    def __init__(self, status: int) -> None:
        self.status = status
        self.queued = -1
        """Tier of the ready heap holding this slot's live entry, or -1."""
        self.retry: _Retry | None = None
        """Retry state from the first attempt until success, park or reset."""
        self.done_revision: str | None = None
        """Revision last published for this slot (design §4.9)."""


def move(slot: _Slot, event: str) -> None:
    """Apply one row of :data:`SLOT_TRANSITIONS` to ``slot``.

    Raises:
        InvalidTransition: (code ``invalid_transition``) the table has no such row.
    """
    try:
        slot.status = SLOT_TRANSITIONS[slot.status, event]
    except KeyError:
        raise InvalidTransition(
            f"slot in state {STATUS_NAMES[slot.status]} cannot {event}",
            state=STATUS_NAMES[slot.status],
            event=event,
        ) from None


class _Run:
    """One row of the run table (current generation only)."""

    __slots__ = (
        "active",
        "deferred",
        "guid",
        "held",
        "order",
        "progressive",
        "revision",
        "run_id",
        "slots",
        "started",
        "tier",
    )

    def __init__(
        self, run_id: int, guid: str, revision: str, order: int, graph: KindGraph, tier: int
    ) -> None:
        self.run_id = run_id
        self.guid = guid
        self.revision = revision
        self.order = order
        """Position in the append-only table: the tie-break within a tier and kind."""
        self.tier = tier
        self.slots = tuple(_Slot(BLOCKED if needs else PENDING) for needs in graph.needs)
        self.active = 0
        """Number of active claims of this run."""
        self.deferred: str | None = None
        """New revision waiting for the active claims to end (design §4.8)."""
        self.held = 0
        """Claims of an older generation for this run's GUID still executing: none of
        this run's work starts before they end (design §4.13)."""
        self.progressive = False
        """True while the progressive kind at this revision says "still being written"."""
        self.started: str | None = None
        """Revision of this run's first claim (for :attr:`Claim.first`)."""

    @property
    def waiting(self) -> bool:
        """No claim may start now: a deferred change or an older execution (§4.8, §4.13)."""
        return self.deferred is not None or self.held > 0


def _check_revision(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a non-empty str, got {value!r}")


def _check_run_id(instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{attribute.name} must be an int, got {value!r}")


@attrs.frozen(kw_only=True)
class RunInfo:
    """One run as the source lists it (design §4.1)."""

    run_id: int = attrs.field(validator=_check_run_id)
    """Stable id of the run (e.g. a database row id)."""
    guid: str = attrs.field(validator=_check_revision)
    """Globally unique id of the run; fences results across sources (design §4.8)."""
    revision: str = attrs.field(validator=_check_revision)
    """Content hash or version of the run's source data."""


@attrs.frozen(kw_only=True)
class Claim:
    """One unit of work (an attempt) handed out by :meth:`Scheduler.claim` (design §4.3).

    Report its end with exactly one of :meth:`Scheduler.complete` or
    :meth:`Scheduler.fail`, passing :attr:`claim_id`, once the attempt's execution has
    really ended (design §4.13).
    """

    claim_id: int
    """Unique per scheduler; fences the completion."""
    run_id: int
    guid: str
    kind: str
    """The declared kind's name (design §4.11)."""
    revision: str
    """Source revision the work is for."""
    source: str
    """Identity of the source (set by ``switch_source``)."""
    generation: int
    """Source generation at claim time (design §4.8)."""
    incarnation: int
    """Helper incarnation at claim time (design §4.8)."""
    attempt: int
    """1 for a first try, n+1 after n counted failed attempts (design §4.12)."""
    deadline: float
    """Absolute deadline of this attempt, seconds on the caller's clock: the per-attempt
    deadline, cut to the overall deadline (design §4.7, §4.12)."""
    tier: str
    """Tier of the run when claimed."""
    page: bool
    """True for a re-poll of a progressive source (design §4.5)."""
    first: bool
    """True for the run's first claim at this revision."""
    overall_deadline: float | None = None
    """End of the overall deadline across attempts (seconds, caller's clock), or None."""


@attrs.frozen
class Progressive:
    """Wrap a result to say "the run is still being written" (design §4.5).

    ``execute`` returns ``Progressive(partial)`` instead of a conclusive result; for the
    kind declared ``progressive`` the scheduler parks it: a :class:`Parked` notice
    carries ``value``, nothing is published or cached, and the run is re-polled. For
    other kinds it counts as a transient failure (``source_not_ready``).
    """

    value: Any = None
    """The partial result (e.g. the rows read so far), or None."""


def _check_time(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)  # -inf would make any result "in time"
    ):
        raise ValueError(f"{attribute.name} must be a finite time in seconds, got {value!r:.80}")


@attrs.frozen
class Produced:
    """A result with the time its worker side completed it (design §4.14).

    ``execute`` may return ``Produced(value, at)`` when the result was made elsewhere (a
    worker thread, a helper process, another actor) and reached the executor later:
    the attempt's deadline is then judged by ``at``, not by when the loop noticed.
    """

    value: Any
    """The result itself."""
    at: float = attrs.field(validator=_check_time)
    """When it was complete, seconds on the scheduler's clock (trio's), finite. A time
    after ``execute`` returned (e.g. another clock's) counts as the return time."""
