"""What a server tells its operator about held runs, at start and at shutdown (design §6.10).

With a ledger, runs that a previous process left unfinished are *held* at the next
start: nothing runs by itself until ``resume`` or ``discard`` decides each one. A
person starting the server should not have to ask ``boot_report`` to learn that, and
one stopping it should learn which runs it leaves behind:

* :func:`held_at_start`: the lines printed once the server is ready, e.g.
  ``held from before: 2 runs (4, 7); decide each: python -m examples.jobs.client
  resume ID, or ... discard ID``;
* :func:`left_held`: the lines printed after a graceful shutdown's grace, e.g.
  ``leaving 1 run unfinished: 9 (running); held at the next start with this ledger:
  resume or discard it then``.

Each is also an ``INFO`` record of ``examples.frontdoor`` with the run ids as ``extra``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from actors.errors import ActorStopped, AskTimeout

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actors import EventLogClient, RunStatus

__all__ = ["held_at_start", "left_held", "run_list"]

LOGGER = logging.getLogger("examples.frontdoor")
#: Most run ids a line names; the rest are counted ("... and 12 more").
MAX_LISTED = 20


def run_list(run_ids: Sequence[int], *, limit: int = MAX_LISTED) -> str:
    """``4, 7, 9`` (at most ``limit`` ids, then ``... and N more``)."""
    shown = ", ".join(str(run_id) for run_id in run_ids[:limit])
    rest = len(run_ids) - limit
    return f"{shown} ... and {rest} more" if rest > 0 else shown


def _runs(count: int) -> str:
    return f"{count} run" if count == 1 else f"{count} runs"


async def held_at_start(eventlog: EventLogClient, *, client: str) -> list[str]:
    """The lines that tell how many runs are held from before, and how to decide them.

    Args:
        eventlog: The event log, just started with its ledger.
        client: The command that decides a run, e.g. ``python -m examples.jobs.client``
            (with ``--url`` if the server is not at the client's default address).

    Returns:
        One line (``held from before: none`` when nothing is held), or two when some
        held runs are quarantined (interrupted twice: ``resume --override``).

    Raises:
        AskTimeout: (``ask_timeout``) the event log did not answer in its timeout.
    """
    report = await eventlog.boot_report()
    held = [run.run_id for run in report.survivors]
    LOGGER.info(
        "held from before: %d runs", len(held),
        extra={"event": "held_at_start", "run_ids": held[:MAX_LISTED], "count": len(held)},
    )  # fmt: skip
    if not held:
        return ["held from before: none"]
    lines = [
        f"held from before: {_runs(len(held))} ({run_list(held)}); nothing runs until you "
        f"decide each: {client} resume ID, or {client} discard ID"
    ]
    quarantined = [run.run_id for run in report.quarantined]
    if quarantined:
        lines.append(
            f"interrupted twice (quarantined): {run_list(quarantined)}; resume one only "
            f"if it is safe: {client} resume --override ID"
        )
    return lines


async def left_held(eventlog: EventLogClient, *, ledger: str | None) -> list[str]:
    """The lines that name the runs a graceful shutdown leaves unfinished.

    Called after the grace, while the event log still runs. A run queued or running now
    is cancelled when the event log stops; with a ``ledger`` it is held at the next
    start, without one it is lost. Runs still held from before stay held.

    Returns:
        One line, or none if every run was decided (or the event log is gone).
    """
    try:
        taken = await eventlog.snapshot()
    except (AskTimeout, ActorStopped):
        return []  # nothing to tell: the event log already stopped
    runs: list[RunStatus] = list(taken.runs)
    if not runs:
        return []
    ids = [run.run_id for run in runs]
    LOGGER.info(
        "leaving %d runs unfinished", len(runs),
        extra={"event": "left_held", "run_ids": ids[:MAX_LISTED], "count": len(runs)},
    )  # fmt: skip
    limit = MAX_LISTED
    named = ", ".join(f"{run.run_id} ({run.state})" for run in runs[:limit])
    if len(runs) > limit:
        named += f" ... and {len(runs) - limit} more"
    it = "it" if len(runs) == 1 else "each"
    if ledger is None:
        fate = "no ledger: they are lost" if len(runs) > 1 else "no ledger: it is lost"
    else:
        fate = f"held at the next start with this ledger: resume or discard {it} then"
    return [f"leaving {_runs(len(runs))} unfinished: {named}; {fate}"]
