"""The scheduler's and the renderer's errors: deadlines, stale results, sources (design §4, §5).

Defined here and re-exported by :mod:`actors.errors`, like every error of the runtime.
"""

from __future__ import annotations

from protocol.errors import ActorError

__all__ = [
    "DeadlineExceeded",
    "StaleResult",
    "RenderFailed",
    "PayloadInvalid",
    "SourceUnreadable",
    "SourceNotReady",
    "WorkCancelled",
    "ScheduleRejected",
]


class DeadlineExceeded(ActorError):
    """A job passed its absolute deadline (design §4.7); a transient failure."""

    code = "deadline_exceeded"
    category = "transient"


class StaleResult(ActorError):
    """A completion no longer matches the current generation, GUID or revision (design §4.8).

    Never published; the scheduler drops it silently.
    """

    code = "stale_result"
    category = "stale"


class RenderFailed(ActorError):
    """The renderer could not draw the payload from the observation (design §5.1)."""

    code = "render_failed"
    category = "permanent"


class PayloadInvalid(RenderFailed):
    """A rendered payload failed validation (type or size bounds) (design §5.1).

    Unlike :class:`RenderFailed`, drawing succeeded but the result may not be cached.
    """

    code = "payload_invalid"


class SourceUnreadable(ActorError):
    """A data source could not be read: missing, damaged, or not in the format expected."""

    code = "source_unreadable"
    category = "permanent"


class SourceNotReady(ActorError):
    """The source is still being written (a progressive source, design §4.5).

    Transient: the scheduler parks the result and re-polls.
    """

    code = "source_not_ready"
    category = "transient"


class WorkCancelled(ActorError):
    """A client cancelled the run this work was for (design §6.7); raised by an executor.

    Permanent: the scheduler marks the work failed and does not retry it until the
    source changes. Unlike :class:`JobCancelled` (``stale``: the work is still wanted
    and queued again), nobody wants this result any more.
    """

    code = "work_cancelled"
    category = "permanent"


class ScheduleRejected(ActorError, ValueError):
    """The scheduler refused a request; its state is unchanged (design §4.2, §4.8).

    Raised by the scheduler core (``set_priority`` or ``source_changed`` naming an
    unknown run id, a ``reconcile`` that reorders or removes runs) and passed to the
    asker by the scheduler actor. A :class:`ValueError` too, as design §4.2/§4.8 say.
    Unlike :class:`UnknownRun` (run ids of the event log), it concerns the
    scheduler's run table.
    """

    code = "schedule_rejected"
    category = "permanent"
