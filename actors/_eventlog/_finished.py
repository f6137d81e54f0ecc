"""Querying finished runs and their results, a page at a time (design §6.18).

:class:`FinishedRuns` answers ``finished_runs``: the decided runs (``finished`` or
``cancelled``) by run id after a cursor, at most a page of them. With a ledger the page is
read from SQLite after what is staged has committed, so it covers every run ever decided,
also before a restart and beyond ``retain_runs``; without one, the decided runs memory
still holds. Each row is checked like every ledger read (design §6.11): a damaged row is
reported in the page as that run's error and the rows around it are served. Both the
wait for what is staged and the read itself take at most ``ledger_read_timeout`` seconds
each (design §6.19): a stalled disk answers ``ledger_unavailable``, never a hang.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..errors import InvalidCommand, LedgerCorrupt
from ._checks import MAX_ROW_ID, check_text
from ._ledger import decode_run
from ._types import TERMINAL_STATES

if TYPE_CHECKING:
    from ..errors import ErrorRecord
    from ._ledger import Ledger
    from ._run import Run
    from ._runs import Runs
    from ._types import EventLogConfig, RunState

__all__ = ["DamagedRun", "FinishedRun", "FinishedRuns", "FinishedRunsPage"]

_log = logging.getLogger("actors.eventlog")
_DECIDED = tuple(sorted(TERMINAL_STATES))


@attrs.frozen(kw_only=True)
class FinishedRun:
    """One decided run and its outcome, as ``finished_runs`` lists it (design §6.18)."""

    run_id: int
    """The run's id (the page's cursor)."""
    operation: str
    """The operation it ran."""
    arguments: dict[str, Any]
    """Its arguments, as pinned at submit."""
    revision: int
    """The revision it was pinned to."""
    request_id: str
    """The request that created it."""
    state: RunState
    """``finished`` or ``cancelled``."""
    verdict: str | None
    """``ok``, ``NOT_RUN`` or the executor's verdict; None when cancelled."""
    result: Any
    """The JSON-compatible result, or None."""
    error: dict[str, str] | None
    """``{"category", "code", "message"}`` when it failed."""
    cancelled_by: str | None
    """Who cancelled or discarded it."""
    finished_at: float | None
    """When it was decided: seconds since the epoch (wall clock); None for a run decided
    before the ledger recorded it (a ledger of schema version 2 or older)."""

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-compatible dict."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class DamagedRun:
    """A ledger row that could not be read: the run is named, the page goes on (§6.11)."""

    run_id: int
    """The run whose row is damaged."""
    error: ErrorRecord
    """The ``ledger_corrupt`` record naming the table, row and column."""


@attrs.frozen(kw_only=True)
class FinishedRunsPage:
    """One page of :meth:`actors.EventLogClient.finished_runs` (design §6.18)."""

    runs: tuple[FinishedRun, ...]
    """The decided runs of the page, by run id."""
    damaged: tuple[DamagedRun, ...]
    """Rows of the page that are damaged, by run id (each one is left out of ``runs``)."""
    cursor: int
    """Pass as ``after`` for the next page: the last run id of this one (or ``after``)."""
    more: bool
    """True when runs after ``cursor`` match too (ask again); False at the end."""


class FinishedRuns:
    """The ``finished_runs`` query over the ledger, or memory without one (design §6.18).

    Args:
        config: ``finished_runs_limit`` bounds a page.
        runs: The runs in memory (served when there is no ledger).
        ledger: Where decided runs are read from, or None.
    """

    def __init__(self, config: EventLogConfig, *, runs: Runs, ledger: Ledger | None) -> None:
        self._config = config
        self._runs = runs
        self._ledger = ledger

    async def query(
        self,
        after: int = 0,
        limit: int | None = None,
        state: str | None = None,
        verdict: str | None = None,
        since: float | None = None,
    ) -> FinishedRunsPage:
        """One page of decided runs; see :meth:`actors.EventLog.finished_runs`."""
        maximum = self._config.finished_runs_limit
        # Checked against SQLite's range too, so the answer is the same with a ledger.
        if type(after) is not int or not 0 <= after <= MAX_ROW_ID:
            raise InvalidCommand(
                f"after must be a run id in [0, 2**63 - 1], got {after!r:.40}", fields=["after"]
            )
        if limit is None:
            limit = maximum
        elif type(limit) is not int or not 1 <= limit <= maximum:
            raise InvalidCommand(
                f"limit must be an int in [1, {maximum}], got {limit!r:.40}", fields=["limit"]
            )
        if state is not None and state not in TERMINAL_STATES:
            raise InvalidCommand(
                f"state must be one of {', '.join(_DECIDED)}, got {state!r:.40}", fields=["state"]
            )
        if verdict is not None:
            check_text("verdict", verdict, 64)
        if since is not None and (
            isinstance(since, bool)
            or not isinstance(since, int | float)
            or not math.isfinite(since)
            or since < 0
        ):
            raise InvalidCommand(
                f"since must be a time >= 0 in seconds since the epoch, got {since!r:.40}",
                fields=["since"],
            )
        states = _DECIDED if state is None else (state,)
        ledger = self._ledger
        if ledger is None:
            await trio.lowlevel.checkpoint()
            return self._from_memory(after, limit, states, verdict, since)
        await ledger.settle_for_read()
        rows = await ledger.fetch_decided_runs(after, limit + 1, states, verdict, since)
        found: list[FinishedRun] = []
        damaged: list[DamagedRun] = []
        for row in rows[:limit]:
            try:
                found.append(_finished(decode_run(ledger.path, row)))
            except LedgerCorrupt as exc:
                _log.error("%s", exc.message, extra={"ledger": ledger.path, **exc.details})
                damaged.append(DamagedRun(run_id=row[0], error=exc.to_record()))
        cursor = rows[min(len(rows), limit) - 1][0] if rows else after
        return FinishedRunsPage(
            runs=tuple(found), damaged=tuple(damaged), cursor=cursor, more=len(rows) > limit
        )

    def _from_memory(
        self,
        after: int,
        limit: int,
        states: tuple[str, ...],
        verdict: str | None,
        since: float | None,
    ) -> FinishedRunsPage:
        matching = [
            run
            for run in self._runs.decided(after)
            if run.state in states
            and (verdict is None or run.verdict == verdict)
            and (since is None or (run.finished_at is not None and run.finished_at >= since))
        ]
        page = [_finished(_fields(run)) for run in matching[:limit]]
        return FinishedRunsPage(
            runs=tuple(page),
            damaged=(),
            cursor=page[-1].run_id if page else after,
            more=len(matching) > limit,
        )


def _fields(run: Run) -> dict[str, Any]:
    return {name: getattr(run, name) for name in _FIELDS}


_FIELDS = tuple(attrs.fields_dict(FinishedRun))


def _finished(fields: dict[str, Any]) -> FinishedRun:
    return FinishedRun(**{name: fields[name] for name in _FIELDS})
