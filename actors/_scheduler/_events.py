"""What the scheduler core reports: its events and its statistics (design §4).

Pure data (attrs frozen classes). Every end of a work item is one event:
:class:`Published` (success), :class:`Failed` (with the ``reason`` it ended),
:class:`Dropped` (a stale attempt; the work itself goes on) or :class:`Interrupted`
(an attempt cut off by the shutdown; the work is still to do). :class:`Retrying`,
:class:`Parked`, :class:`Invalidated` and :class:`Settled` report the decisions between.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..errors import ErrorRecord

__all__ = [
    "FAILURE_REASONS",
    "Dropped",
    "Failed",
    "Interrupted",
    "Invalidated",
    "Parked",
    "Published",
    "Retrying",
    "SchedulerEvent",
    "SchedulerStatistics",
    "Settled",
]

#: Why a work item ended ``failed`` (:attr:`Failed.reason`, design §4.12).
FAILURE_REASONS: Final = (
    "permanent",  # the error's category is permanent
    "non_retryable",  # its code is one of the policy's non_retryable_codes
    "attempts_exhausted",  # maximum_attempts reached; the error is the last one
    "crash_loop",  # maximum_crashes reached; the error is the last crash
    "overall_deadline",  # the next attempt could not start in time (deadline_exceeded)
    "needs_failed",  # a kind it needs failed (cause_kind)
)


@attrs.frozen(kw_only=True)
class Published:
    """A conclusive result, published exactly once per (run, kind, revision) (§4.9)."""

    run_id: int
    guid: str
    kind: str
    revision: str
    result: Any
    """The payload or the result the executor returned."""
    generation: int
    attempt: int = 1
    """The attempt that produced it (design §4.12)."""


@attrs.frozen(kw_only=True)
class Parked:
    """A progressive run's source said "still being written" (design §4.5)."""

    run_id: int
    guid: str
    revision: str
    result: Any
    """The partial result, or None; never cached."""
    kind: str = "metadata"
    """The progressive kind."""


@attrs.frozen(kw_only=True)
class Retrying:
    """A transient failure; the slot is retried at ``not_before`` (design §4.12)."""

    run_id: int
    guid: str
    kind: str
    revision: str
    attempt: int
    """The attempt that failed (1 for the first)."""
    not_before: float
    """Seconds on the caller's clock."""
    error: ErrorRecord


@attrs.frozen(kw_only=True)
class Failed:
    """A work item ended without a result; not retried until the source or format
    changes (design §4.6, §4.12)."""

    run_id: int
    guid: str
    kind: str
    revision: str
    error: ErrorRecord
    """The error that ended it: the last attempt's, or ``deadline_exceeded`` for
    ``reason == "overall_deadline"``."""
    cause_kind: str | None = None
    """The kind whose failure ended this one (``reason == "needs_failed"``), else None."""
    reason: str = "permanent"
    """One of :data:`FAILURE_REASONS`."""
    attempts: int = 0
    """Attempts made (0 when a kind it needs failed)."""


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
class Interrupted:
    """An attempt was cut off by the scheduler's shutdown before it reported (§4.13).

    Its slot is ``interrupted``: neither published nor failed, the work is still to
    do, so an embedder redoes it (or a reset of the run's source or format makes it
    pending again). Distinct from :class:`Failed`, which is a verdict on the work.
    """

    run_id: int
    guid: str
    kind: str
    revision: str
    """Source revision the cut-off attempt was for."""
    attempt: int
    """The attempt that was cut off (1 for the first)."""
    at: float
    """When it was cut off, seconds on the caller's clock."""


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


SchedulerEvent = (
    Published | Parked | Retrying | Failed | Dropped | Interrupted | Invalidated | Settled
)


@attrs.frozen(kw_only=True)
class SchedulerStatistics:
    """A snapshot of the scheduler core (design §4), returned by ``statistics()``."""

    source: str
    generation: int
    incarnation: int
    runs: int
    active: int
    """Claims handed out and not yet reported (all generations)."""
    ready: tuple[int, ...]
    """Claimable slots per tier, best tier first."""
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
    held: int = 0
    """Runs waiting for an older generation's execution of their GUID (design §4.13)."""
    interrupted: int = 0
    """Slots whose attempt a shutdown cut off (:class:`Interrupted`): still to do."""
    ready_by_kind: Mapping[tuple[int, str], int] = attrs.field(factory=dict)
    """Claimable slots per (tier, kind name), every pair (zeros too); sums to ``ready``."""
