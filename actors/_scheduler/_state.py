"""Data of the scheduler core: kinds, tiers, the slot table, claims, events (design §4).

Pure: no trio, no I/O. :mod:`actors._scheduler._scheduler` holds the :class:`~actors.Scheduler`
state machine that uses these; :mod:`actors._scheduler._actor` drives it with trio.

Theory of operation
===================

Every run has one **slot** per kind (``metadata``, ``thumbnail``, ``preview``). A slot
moves through a small table, like h11's ``_state.py``: every legal move is a row in
:data:`SLOT_TRANSITIONS` and anything else raises
:class:`~actors.errors.InvalidTransition` (a bug, never a user error)::

    BLOCKED --unblock--> PENDING --claim--> ACTIVE --succeed--> DONE
                            ^                 |  \\--fail------> FAILED
                            +----requeue------+   \\--retry----> BACKOFF --wake--> PENDING
                                                   \\--park----> PARKED --claim--> ACTIVE

* ``BLOCKED``: a thumbnail or preview whose run's metadata is not conclusive yet
  (design §4.1).
* ``PARKED``: metadata of a progressive run: the source is still being written; the
  result was handed out as a :class:`Parked` notice, not published (design §4.5).
* ``BACKOFF``: a transient failure; ``wake`` (or ``wake_parked`` for a progressive page)
  fires when ``min(1 s, 25 ms * 2**(attempt-1))`` seconds have passed, the attempt
  capped at 8 (design §4.6): 0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, ... seconds.
* ``reset`` / ``reset_blocked`` from any state but ``ACTIVE``: the run's source changed
  or the format changed, so the work is pending again (design §4.6, §4.8).

Slots are plain ``__slots__`` objects (not one :class:`actors._core._lifecycle.StateMachine`
each) because 100 000 runs x 3 kinds must fit in well under 1 KiB per run (design §4.3).
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from .._core._backoff import Backoff
from .._core._config import count_field, duration_field
from ..errors import ErrorRecord, InvalidTransition

__all__ = [
    "KINDS",
    "TIERS",
    "Claim",
    "Dropped",
    "Failed",
    "Invalidated",
    "Parked",
    "Progressive",
    "Published",
    "Retrying",
    "RunInfo",
    "SchedulerConfig",
    "SchedulerEvent",
    "SchedulerStatistics",
    "Settled",
]

#: The kinds of work per run, in priority order (design §4.1).
KINDS: Final = ("metadata", "thumbnail", "preview")
#: Priority tiers, best first (design §4.2).
TIERS: Final = ("selected", "visible", "remaining")

METADATA: Final = 0
SELECTED: Final = 0
VISIBLE: Final = 1
REMAINING: Final = 2

#: Highest attempt number used in the backoff formula (design §4.6).
MAX_ATTEMPT: Final = 8

# Slot statuses (small ints: a slot is a few machine words).
BLOCKED: Final = 0
PENDING: Final = 1
ACTIVE: Final = 2
BACKOFF: Final = 3
PARKED: Final = 4
DONE: Final = 5
FAILED: Final = 6
STATUS_NAMES: Final = ("blocked", "pending", "active", "backoff", "parked", "done", "failed")

_RESETTABLE = (BLOCKED, PENDING, BACKOFF, PARKED, DONE, FAILED)

#: ``{(status, event): new_status}``: every legal slot move (see the module docstring).
SLOT_TRANSITIONS: Final[dict[tuple[int, str], int]] = {
    (BLOCKED, "unblock"): PENDING,
    (BLOCKED, "fail"): FAILED,  # its run's metadata failed for good
    (PENDING, "claim"): ACTIVE,
    (PARKED, "claim"): ACTIVE,  # a progressive page
    (ACTIVE, "succeed"): DONE,
    (ACTIVE, "fail"): FAILED,
    (ACTIVE, "retry"): BACKOFF,
    (ACTIVE, "park"): PARKED,
    (ACTIVE, "requeue"): PENDING,  # a stale completion of work that is still wanted
    (BACKOFF, "wake"): PENDING,
    (BACKOFF, "wake_parked"): PARKED,
    **{(status, "reset"): PENDING for status in _RESETTABLE},
    **{(status, "reset_blocked"): BLOCKED for status in _RESETTABLE},
}


class _Slot:
    """One (run, kind) work item: status, retry state and the live heap entry."""

    __slots__ = ("attempt", "done_revision", "not_before", "queued", "status")

    def __init__(self, status: int) -> None:
        self.status = status
        self.attempt = 0
        """Consecutive transient failures, capped at :data:`MAX_ATTEMPT`."""
        self.not_before = 0.0
        """End of the current backoff, seconds on the caller's clock."""
        self.queued = -1
        """Tier of the ready heap holding this slot's live entry, or -1."""
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
        "order",
        "progressive",
        "revision",
        "run_id",
        "slots",
        "started",
        "tier",
    )

    def __init__(self, run_id: int, guid: str, revision: str, order: int) -> None:
        self.run_id = run_id
        self.guid = guid
        self.revision = revision
        self.order = order
        """Position in the append-only table: the tie-break within a tier and kind."""
        self.tier = REMAINING
        self.slots = (_Slot(PENDING), _Slot(BLOCKED), _Slot(BLOCKED))
        self.active = 0
        """Number of active claims of this run."""
        self.deferred: str | None = None
        """New revision waiting for the active claims to end (design §4.8)."""
        self.progressive = False
        """True while the metadata at this revision says "still being written"."""
        self.started: str | None = None
        """Revision of this run's first claim (for :attr:`Claim.first`)."""


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
    """Stable id of the run (e.g. the QCoDeS ``run_id``)."""
    guid: str = attrs.field(validator=_check_revision)
    """Globally unique id of the run; fences results across sources (design §4.8)."""
    revision: str = attrs.field(validator=_check_revision)
    """Content hash or version of the run's source data."""


def _check_backoff(instance: object, attribute: attrs.Attribute[Backoff], value: object) -> None:
    if not isinstance(value, Backoff) or value.jitter:
        raise ValueError(f"{attribute.name} must be a Backoff without jitter, got {value!r}")


@attrs.frozen(kw_only=True)
class SchedulerConfig:
    """Settings of the scheduler core and actor (design §4.3-§4.7).

    Raises:
        ValueError: a field is out of range; the message names it (design §1.6).
    """

    workers: int = count_field(1, minimum=1, maximum=1024)
    """K: how many claims may be active at once (design §4.3)."""
    job_deadline: float = duration_field(15.0, allow_zero=False)
    """Seconds from claim to the job's absolute deadline (design §4.7); at most 300."""
    page_interval: float = duration_field(0.010)
    """Least seconds between two progressive pages (design §4.5)."""
    backoff: Backoff = attrs.field(
        factory=lambda: Backoff(max_attempt=MAX_ATTEMPT), validator=_check_backoff
    )
    """Retry policy per (run, kind) slot: ``min(1 s, 25 ms * 2**(attempt-1))`` with the
    attempt capped at 8 by default (design §4.6; :class:`actors._core._backoff.Backoff`, whose
    ``jitter`` must stay 0 here: the core is deterministic)."""
    aging_after: int = count_field(8, minimum=1)
    """Consecutive foreground claims before one remaining metadata item (design §4.4)."""
    page_after: int = count_field(3, minimum=0)
    """Same-tier ordinary claims before a due progressive page goes first (design §4.4)."""
    helper_kinds: frozenset[str] = attrs.field(
        default=frozenset({"metadata"}),
        converter=frozenset,
        validator=attrs.validators.deep_iterable(attrs.validators.in_(KINDS)),
    )
    """Kinds whose results come from a helper process: ``helper_restarted`` fences them."""


@attrs.frozen(kw_only=True)
class Claim:
    """One unit of work handed out by :meth:`Scheduler.claim` (design §4.3).

    Report its end with exactly one of :meth:`Scheduler.complete` or
    :meth:`Scheduler.fail`, passing :attr:`claim_id`.
    """

    claim_id: int
    """Unique per scheduler; fences the completion."""
    run_id: int
    guid: str
    kind: str
    """``metadata``, ``thumbnail`` or ``preview``."""
    revision: str
    """Source revision the work is for."""
    source: str
    """Identity of the source (set by ``switch_source``)."""
    generation: int
    """Source generation at claim time (design §4.8)."""
    incarnation: int
    """Helper incarnation at claim time (design §4.8)."""
    attempt: int
    """1 for a first try, n+1 after n consecutive transient failures (n capped at 8)."""
    deadline: float
    """Absolute deadline, seconds on the caller's clock (design §4.7)."""
    tier: str
    """Tier of the run when claimed."""
    page: bool
    """True for a re-poll of a progressive source (design §4.5)."""
    first: bool
    """True for the run's first claim at this revision."""


@attrs.frozen
class Progressive:
    """Wrap a metadata result to say "the run is still being written" (design §4.5).

    ``execute`` returns ``Progressive(partial)`` instead of a conclusive result; the
    scheduler parks it: a :class:`Parked` notice carries ``value``, nothing is published
    or cached, and the run is re-polled. For other kinds it counts as a transient
    failure (``source_not_ready``).
    """

    value: Any = None
    """The partial result (e.g. the rows read so far), or None."""


# --- events: what the core returns and the actor forwards ----------------------------


@attrs.frozen(kw_only=True)
class Published:
    """A conclusive result, published exactly once per (run, kind, revision) (§4.9)."""

    run_id: int
    guid: str
    kind: str
    revision: str
    result: Any
    """The payload (thumbnail/preview bytes) or the metadata result."""
    generation: int


@attrs.frozen(kw_only=True)
class Parked:
    """A progressive run's metadata said "still being written" (design §4.5)."""

    run_id: int
    guid: str
    revision: str
    result: Any
    """The partial result, or None; never cached."""


@attrs.frozen(kw_only=True)
class Retrying:
    """A transient failure; the slot is retried at ``not_before`` (design §4.6)."""

    run_id: int
    guid: str
    kind: str
    revision: str
    attempt: int
    """Consecutive transient failures so far (capped at 8)."""
    not_before: float
    """Seconds on the caller's clock."""
    error: ErrorRecord


@attrs.frozen(kw_only=True)
class Failed:
    """A permanent failure; not retried until the source or format changes (§4.6)."""

    run_id: int
    guid: str
    kind: str
    revision: str
    error: ErrorRecord
    cause_kind: str | None = None
    """``"metadata"`` when this kind failed only because its metadata did."""


@attrs.frozen(kw_only=True)
class Dropped:
    """A stale completion was dropped unpublished (design §4.6, §4.8); for tests and logs."""

    run_id: int
    guid: str
    kind: str
    revision: str
    reason: str
    """``generation``, ``incarnation``, ``revision`` or ``stale`` (stale category)."""


@attrs.frozen(kw_only=True)
class Invalidated:
    """The run's source changed: its work is pending again at ``revision`` (§4.8)."""

    run_id: int
    guid: str
    old_revision: str
    revision: str


@attrs.frozen(kw_only=True)
class Settled:
    """Every kind of the run is decided (published or failed) at ``revision``."""

    run_id: int
    guid: str
    revision: str
    published: tuple[str, ...]
    failed: tuple[str, ...]


SchedulerEvent = Published | Parked | Retrying | Failed | Dropped | Invalidated | Settled


@attrs.frozen(kw_only=True)
class SchedulerStatistics:
    """A snapshot of the scheduler core (design §4), returned by ``statistics()``."""

    source: str
    generation: int
    incarnation: int
    runs: int
    active: int
    """Claims handed out and not yet reported (all generations)."""
    ready: tuple[int, int, int]
    """Claimable slots per tier (selected, visible, remaining)."""
    blocked: int
    backoff: int
    parked: int
    done: int
    failed: int
    claims: int
    """Claims handed out since construction."""
    published: int
    dropped: int
    priority_pending: bool
    """A ``set_priority`` is waiting for the next work boundary."""
