"""How a helper job or incarnation ended, as the error the caller sees (design §3.4-3.7).

Pure functions from what happened (an answer, a ladder step, an exit status) to the
:mod:`actors.errors` class, code and details that :class:`~actors._helpers._process.
HelperProcess` raises. Kept apart so each outcome's wording and details live in one
place.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

from ..errors import (
    ErrorRecord,
    ForcedTermination,
    HelperError,
    HelperExitedError,
    HelperJobFailed,
    JobCancelled,
    ReplyTimeout,
)

if TYPE_CHECKING:
    from protocol.envelope import Envelope

__all__ = ["answer_error", "exit_details", "exited_error", "stopped_error"]

#: Ladder steps after which the job counts as killed (design §3.5 steps 3-4).
_KILLED = ("sigkill", "quarantined")


def exit_details(returncode: int | None) -> dict[str, Any]:
    """``{"exit_code": ..., "signal": ...}`` for a reaped (or unreaped: None) process."""
    name = None
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
    return {"exit_code": returncode, "signal": name}


def exited_error(what: str, returncode: int | None, state: str) -> HelperExitedError:
    """The helper exited (or closed its pipe) during ``what`` (design §3.3, §3.7)."""
    details = exit_details(returncode)
    if details["signal"]:
        how = f"killed by {details['signal']}"
    elif returncode is None:
        how = f"not reaped ({state})"
    else:
        how = f"exit code {returncode}"
    return HelperExitedError(f"{what}: {how}", **details)


def stopped_error(
    label: str,
    generation: int,
    operation: str,
    *,
    escalation: str,
    cancelled: bool,
    reply_timeout: float,
) -> HelperError:
    """A job stopped by the ladder: cancelled by request, or past its reply deadline.

    ``JobCancelled`` (cancelled, no SIGKILL), ``ReplyTimeout`` (deadline, no SIGKILL),
    otherwise ``ForcedTermination``; ``details`` has ``escalation`` (the last step) and,
    but for ``JobCancelled``, ``parent_timeout`` (design §3.5, §3.6).
    """
    job = f"{label}: job {generation} ({operation})"
    killed = escalation in _KILLED
    if cancelled:
        if not killed:
            return JobCancelled(f"{job} was cancelled", escalation=escalation)
        return ForcedTermination(
            f"{job} was cancelled; its helper was stopped by {escalation}",
            escalation=escalation,
            parent_timeout=False,
        )
    return (ForcedTermination if killed else ReplyTimeout)(
        f"{job}: no reply within {reply_timeout:g} s; stopped by {escalation}",
        escalation=escalation,
        parent_timeout=True,
    )


def answer_error(label: str, reply: Envelope) -> HelperError:
    """The error of a reply whose status is not ``ok``: ``cancelled`` or ``error``."""
    where = {"operation": reply.operation, "generation": reply.generation}
    if reply.status == "cancelled":
        return JobCancelled(f"{label}: job {reply.generation} was cancelled", **where)
    assert reply.error is not None
    return HelperJobFailed(ErrorRecord(**reply.error), **where)  # type: ignore[arg-type]  # validated by attrs
