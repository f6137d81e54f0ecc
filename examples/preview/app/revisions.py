"""Revisions: the preview app asks the scheduler to work on a run at a new revision.

A run's revision (design §4.1, §4.8) moves when the database changes (the change probe
saw a new change token: ``SourceChanged``, or ``Reconcile`` when runs were added) and
when its images are to be drawn again although the data did not change (a client's
``submit`` of ``preview``, or a helper pool restarted after work failed with
``pool_restarting``): such a *redraw* asks for the revision ``<token>~r<N>``, N
counting up per app.

Each run's ``requested`` revision is set before the ask: the scheduler's notices of the
old revision may be read while the ask is in flight, and must already see the new one
as wanted (so an old ``Settled`` does not finish the run). Depends on the
:class:`~examples.preview.app.runs.RunTable` and the
running runtime (its scheduler).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors import Reconcile, SourceChanged
from actors.errors import ActorError

if TYPE_CHECKING:
    from actors import Runtime

    from .runs import RunRecord, RunTable

__all__ = ["Revisions"]


class Revisions:
    """Asks the scheduler for new revisions of runs (see the module docstring).

    Args:
        table: The runs.
        runtime: The running runtime (its scheduler is asked).
        ask_timeout: Seconds (trio clock) an ask of the scheduler may take.
    """

    def __init__(self, table: RunTable, runtime: Runtime, *, ask_timeout: float) -> None:
        self._table = table
        self._runtime = runtime
        self._ask_timeout = ask_timeout
        self._redraws = 0

    async def reconcile(self, changed: list[RunRecord]) -> None:
        """Give the scheduler the whole run table (``Reconcile``, design §4.8).

        Args:
            changed: Runs whose change token moved: they are asked for at it.

        Raises:
            ActorError: the ask failed; the runs' revisions are as before.
        """
        await self._ask_for(changed, Reconcile(runs=self._table.infos(changed)))

    async def source_changed(self, record: RunRecord) -> None:
        """``record``'s data changed: ask for its newest change token (design §4.8).

        Raises:
            ActorError: the ask failed; the run's revision is as before.
        """
        await self._ask_for([record], SourceChanged(run_id=record.run_id, revision=record.token))

    async def redraw(self, record: RunRecord) -> None:
        """Draw ``record`` again at a new revision although its data did not change.

        Raises:
            ActorError: the ask failed.
        """
        self._redraws += 1
        record.requested = f"{record.token}~r{self._redraws}"
        await self._ask(SourceChanged(run_id=record.run_id, revision=record.requested))

    async def redraw_failed(self, code: str) -> int:
        """:meth:`redraw` every run whose work failed with error ``code``; how many.

        Raises:
            ActorError: an ask failed (the runs after it are not asked).
        """
        count = 0
        for record in list(self._table.runs.values()):
            if any(error.code == code for error in record.errors.values()):
                await self.redraw(record)
                count += 1
        return count

    async def _ask_for(self, records: list[RunRecord], message: object) -> None:
        old = [(r, r.requested, r.changed_at) for r in records]
        for record in records:
            record.requested = record.token
        try:
            await self._ask(message)
        except ActorError:
            for record, requested, changed_at in old:  # the next probe tries again
                record.requested = record.token = requested
                record.changed_at = changed_at
            raise

    async def _ask(self, message: object) -> None:
        await self._runtime.scheduler.ask(message, timeout=self._ask_timeout)
