"""One attempt of the scheduler actor: run ``execute``, then judge it truthfully (§4.14).

:func:`run_attempt` runs ``execute`` under the attempt's stop scope (its deadline plus
the configured grace) and records what happened; :func:`judge` turns that into the
outcome reported to the core. The rule (design §4.14): a result is a success when it
was *produced* by the attempt's deadline, judged by the time the worker side recorded
(:class:`~actors.Produced`), else by when ``execute`` returned, never by when the loop
got round to noticing; ``deadline_exceeded`` labels only attempts that were stopped or
whose result came too late.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import trio

from protocol.errors import describe_exception

from ..errors import ActorError, DeadlineExceeded, ErrorRecord, JobCancelled
from ._state import Produced

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ._messages import SchedulerJob
    from ._state import Claim

__all__ = ["UNEXPECTED_ERROR", "Attempt", "judge", "run_attempt"]

#: Code of the record made from an exception that is not an ActorError.
UNEXPECTED_ERROR = "unexpected_error"


@attrs.frozen(kw_only=True)
class Attempt:
    """What one execution of ``execute`` did."""

    returned: bool
    """``execute`` returned (a result, possibly after its deadline)."""
    value: Any = None
    """The result (unwrapped from :class:`~actors.Produced`)."""
    produced_at: float = 0.0
    """When the result was produced, seconds on trio's clock."""
    error: ErrorRecord | None = None
    """What ``execute`` raised, classified (design §1.5), if it raised."""
    stopped: bool = False
    """The stop scope was cancelled (deadline plus grace, or stale) before it ended."""


async def run_attempt(
    execute: Callable[..., Awaitable[Any]],
    job: SchedulerJob,
    args: tuple[Any, ...],
    scope: trio.CancelScope,
) -> Attempt:
    """Run ``execute(job, *args)`` inside ``scope`` until it has really ended.

    ``execute`` is awaited to its end even after ``scope`` is cancelled: an executor
    that keeps running after a cancel keeps the attempt (and its slot) active, so no
    other attempt of the slot starts meanwhile (design §4.13).
    """
    error: ErrorRecord | None = None
    try:
        with scope:
            result = await execute(job, *args)
            at = trio.current_time()
            if isinstance(result, Produced):
                # Never later than its return (a stamp from another clock would be).
                result, at = result.value, min(result.at, at)
            return Attempt(returned=True, value=result, produced_at=at, stopped=scope.cancel_called)
    except ActorError as exc:
        error = exc.to_record()
    except trio.TooSlowError as exc:  # execute's own timeout: worth a retry
        error = ErrorRecord(
            category="transient", code=DeadlineExceeded.code, message=str(exc) or "timeout"
        )
    except Exception as exc:
        text = describe_exception(exc)  # never raises, even for a broken __str__
        error = ErrorRecord(category="permanent", code=UNEXPECTED_ERROR, message=text)
    return Attempt(returned=False, error=error, stopped=scope.cancel_called)


def judge(claim: Claim, attempt: Attempt, *, stale: bool) -> tuple[Any, ErrorRecord | None]:
    """The outcome to report: ``(result, None)`` or ``(None, error)`` (design §4.14).

    Args:
        claim: The attempt's claim (its ``deadline`` is the judge).
        attempt: What :func:`run_attempt` recorded.
        stale: The actor cancelled the attempt because it became stale.
    """
    if attempt.returned and (stale or attempt.produced_at <= claim.deadline):
        return attempt.value, None  # a stale result is fenced by the core
    what = f"{claim.kind} of run {claim.run_id} (attempt {claim.attempt})"
    if attempt.returned:
        late = attempt.produced_at - claim.deadline
        error = DeadlineExceeded(f"{what}: its result came {late:.3g} s after its deadline")
        return None, error.to_record()
    if stale:
        return None, JobCancelled(f"{what} became stale").to_record()
    if attempt.stopped:
        error = DeadlineExceeded(f"{what} was stopped: it passed its deadline")
        return None, error.to_record()
    assert attempt.error is not None
    return None, attempt.error
