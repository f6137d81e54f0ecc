"""Resuming after a crash in one call: each held run decided by the caller (design §6.17).

After a restart every run the ledger held unfinished is *held* (design §6.10). Deciding
them took five requests (``boot_report``, ``status``, ``check_drift``, ``resume``,
``discard``); :func:`recover_survivors` is that loop, written once: it hands each survivor
with what is known about it (its status and its drift) to the caller's ``decide`` and
carries the decision out, one run at a time, oldest first. A decision the log refuses
(a quarantined run resumed without override, no capacity, the run decided meanwhile) is
reported for that run, never raised, so one bad survivor never blocks the others.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any, Literal, get_args

import attrs

from ..errors import ActorError, ActorStopped, AskTimeout, InvalidCommand
from ._checks import check_text

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Mapping

    from ..errors import ErrorRecord
    from ._types import Drift, RunStatus

__all__ = ["Decision", "Recovered", "Survivor", "recover_survivors"]

_log = logging.getLogger("actors.eventlog")

#: What to do with a survivor: ``resume`` queues it again (refused for a quarantined
#: run), ``override`` resumes it even if quarantined, ``discard`` decides it cancelled,
#: ``keep`` leaves it held for later (design §6.17).
Decision = Literal["resume", "override", "discard", "keep"]
_DECISIONS: tuple[str, ...] = get_args(Decision)


@attrs.frozen(kw_only=True)
class Survivor:
    """A run held after a restart, and what is known about it (design §6.17)."""

    status: RunStatus
    """Its state (``held``), operation, arguments, ``interruptions`` and ``quarantined``."""
    drift: Drift
    """Which of its pinned ingredients differ from the current ones."""

    @property
    def run_id(self) -> int:
        """The run's id."""
        return self.status.run_id


@attrs.frozen(kw_only=True)
class Recovered:
    """What became of one survivor (design §6.17)."""

    run_id: int
    """The run."""
    decision: Decision
    """What ``decide`` chose."""
    status: RunStatus
    """Its state after the decision (still ``held`` when kept or refused)."""
    error: ErrorRecord | None = None
    """Why the log refused the decision (e.g. ``run_quarantined``, ``admission_full``), or
    None when it was carried out."""

    @property
    def ok(self) -> bool:
        """True when the decision was carried out."""
        return self.error is None


#: Errors that concern the caller's connection to the log, not one survivor: raised.
_NOT_PER_RUN = (ActorStopped, AskTimeout)


async def recover_survivors(
    survivors: Iterable[RunStatus],
    decide: Callable[[Survivor], Awaitable[Decision]],
    *,
    check_drift: Callable[[int, Mapping[str, Any] | None], Awaitable[Drift]],
    resume: Callable[[int, bool], Awaitable[RunStatus]],
    discard: Callable[[int, str], Awaitable[RunStatus]],
    current: Mapping[str, Any] | None = None,
    actor: str = "local",
) -> tuple[Recovered, ...]:
    """Decide each survivor with ``decide`` and carry the decision out (design §6.17).

    The log's requests are passed in, so the same loop serves
    :meth:`actors.EventLog.recover` and :meth:`actors.EventLogClient.recover`.

    Raises:
        InvalidCommand: (``invalid_command``) ``decide`` is not an async function or
            returned something that is not a :data:`Decision` (``details["fields"] ==
            ["decide"]``), ``actor`` is not a
            name, or ``current`` is not a mapping of known ingredients (``check_drift``).
        ActorStopped, AskTimeout: the log went away; the undecided runs stay held.
        Exception: whatever ``decide`` raised; the runs not yet decided stay held.
    """
    check_text("actor", actor)
    if not callable(decide):
        raise InvalidCommand(f"decide must be an async function, got {decide!r:.60}",
                             fields=["decide"])  # fmt: skip
    outcomes = []
    for status in survivors:
        run_id = status.run_id
        drift = await check_drift(run_id, current)
        pending = decide(Survivor(status=status, drift=drift))
        if not inspect.isawaitable(pending):
            # A sync function: say so, instead of the TypeError of awaiting its result.
            raise InvalidCommand(
                f"decide must be an async function; it returned {pending!r:.60} for run"
                f" {run_id} without awaiting",
                fields=["decide"],
            )
        decision = await pending
        if decision not in _DECISIONS:
            raise InvalidCommand(
                f"decide returned {decision!r:.60} for run {run_id}; expected one of"
                f" {', '.join(_DECISIONS)}",
                fields=["decide"],
            )
        outcome = await _carry_out(run_id, decision, status, resume, discard, actor)
        _log.info(
            "survivor %d: %s%s",
            run_id,
            decision,
            "" if outcome.error is None else f" refused ({outcome.error.code})",
            extra={
                "run_id": run_id,
                "decision": decision,
                "state": outcome.status.state,
                "code": None if outcome.error is None else outcome.error.code,
                "drifted": drift.changed,
            },
        )
        outcomes.append(outcome)
    return tuple(outcomes)


async def _carry_out(
    run_id: int,
    decision: Decision,
    status: RunStatus,
    resume: Callable[[int, bool], Awaitable[RunStatus]],
    discard: Callable[[int, str], Awaitable[RunStatus]],
    actor: str,
) -> Recovered:
    try:
        if decision == "keep":
            after = status
        elif decision == "discard":
            after = await discard(run_id, actor)
        else:
            after = await resume(run_id, decision == "override")
    except _NOT_PER_RUN:
        raise
    except ActorError as exc:
        return Recovered(run_id=run_id, decision=decision, status=status, error=exc.to_record())
    return Recovered(run_id=run_id, decision=decision, status=after)
