"""How a helper job or incarnation ended, as the error the caller sees (design §3.4-3.7).

Pure functions from what happened (an answer, a ladder step, an exit status) to the
:mod:`actors.errors` class, code and details that ``HelperProcess`` raises. Kept
apart so each outcome's wording and details live in one place.
"""

from __future__ import annotations

import errno as errno_module
import signal
from typing import TYPE_CHECKING, Any

from protocol import Blob

from ...errors import (
    ActorError,
    DeadlineExceeded,
    ErrorRecord,
    ForcedTermination,
    HelperError,
    HelperExited,
    HelperLost,
    JobCancelled,
    JobFailed,
    JobStalled,
    ReplyTimeout,
    SignalFailed,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

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


def exited_error(
    what: str,
    returncode: int | None,
    state: str,
    stderr: str | None = None,
    escaped: Sequence[int] = (),
    *,
    lost: bool = False,
) -> HelperExited:
    """The helper exited (or closed its pipe) during ``what`` (design §3.3, §3.7).

    ``details`` has ``exit_code`` and ``signal``; ``escaped`` (pids of its tree that
    outlived it, design §3.11) when there are any; and, when given, ``stderr`` (its
    tail, at most 4 KiB), whose last line also ends the message. ``lost``: the link
    to a remote helper died, so nobody saw it exit: :class:`HelperLost` (§3.16).
    """
    details = exit_details(returncode)
    if lost:
        details["cause"] = "link_lost"
        return HelperLost(
            f"{what}: the link to its host was lost (the warden kills its tree)", **details
        )
    if details["signal"]:
        how = f"killed by {details['signal']}"
    elif returncode is None:
        how = f"not reaped ({state})"
    else:
        how = f"exit code {returncode}"
    message = f"{what}: {how}"
    if escaped:
        details["escaped"] = list(escaped)
        message += f"; {len(escaped)} process(es) of its tree escaped: {list(escaped)}"
    if stderr is not None:
        details["stderr"] = stderr
        last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "")
        if last:
            message += f"; stderr: {last[:400]}"
    return HelperExited(message, **details)


def stopped_error(
    label: str,
    generation: int,
    operation: str,
    *,
    escalation: str,
    cause: str,
    reply_timeout: float,
    stall: float | None = None,
    signal_failure: tuple[int, int, str] | None = None,
) -> ActorError:
    """A job stopped by the ladder, and why (design §3.5, §3.6, §3.12).

    ``cause`` is ``cancelled`` (by request), ``reply_timeout``, ``stalled`` or
    ``deadline`` (the caller's). A signal that could not be delivered gives
    ``SignalFailed`` whatever the cause. Otherwise: ``JobStalled`` and
    ``DeadlineExceeded`` say their cause whatever the last step; a cancel is
    ``JobCancelled`` and a missed reply deadline ``ReplyTimeout``, unless SIGKILL was
    needed (``ForcedTermination``). ``details`` has ``escalation`` (the last step)
    and, for the reply deadline and forced ends, ``parent_timeout``.
    """
    job = f"{label}: job {generation} ({operation})"
    if signal_failure is not None:
        pid, code, sig = signal_failure
        name = errno_module.errorcode.get(code, str(code))
        return SignalFailed(
            f"{job} could not be stopped: {sig} to pid {pid} failed ({name}); the helper "
            f"is quarantined until it is gone",
            escalation=escalation,
            pid=pid,
            signal=sig,
            errno=code,
            error=name,
            cause=cause,
        )
    if cause == "stalled":
        return JobStalled(
            f"{job} sent no progress for {stall:g} s; stopped by {escalation}",
            escalation=escalation,
            stall=stall,
        )
    if cause == "deadline":
        return DeadlineExceeded(
            f"{job} passed its deadline; stopped by {escalation}", escalation=escalation
        )
    killed = escalation in _KILLED
    if cause == "cancelled":
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
    payload = reply.payload  # the bytes of ``JobError(..., data=...)``, if any (§2.3)
    data = payload.data if isinstance(payload, Blob) else None
    return JobFailed(ErrorRecord(**reply.error), data=data, **where)  # type: ignore[arg-type]  # validated by attrs
