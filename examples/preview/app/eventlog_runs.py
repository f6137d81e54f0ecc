"""EventLogRuns: the event-log run that reports each measurement run (design §6.6, §7.2).

Each measurement run is reported to clients by one event-log run (operation
``preview``, arguments ``{"run_id": <database run id>, "db": <database id>}``: the id
tells apart the runs of a server of several databases, design §7.5;
:attr:`RunRecord.job <examples.preview.app.runs.RunRecord.job>`): opened (``job_queued``)
when the run is registered and whenever its data changes after the last one finished, then
``job_started``, ``job_progress`` and ``job_finished`` with the verdict of the settled
revision (:func:`~examples.preview.app.runs.verdict_of`) and a short metadata result
(:func:`~examples.preview.app.runs.finish_result`). A run the event log refuses
(``admission_full``) is opened again after the next change probe.

At startup the runs that a previous session left in the ledger are discarded (they are
opened afresh); at shutdown the open ones are cancelled (:meth:`EventLogRuns.cancel_open`)
and no new one is opened. A run is started with ``on_cancel`` =
:meth:`ClaimRunner.halt <examples.preview.app.claim_runner.ClaimRunner.halt>`, so a
client's ``cancel`` stops its work (design §6.7).

Depends on the running runtime (its event log, or a shared one), the
:class:`~examples.preview.app.runs.RunTable` and the
:class:`~examples.preview.app.claim_runner.ClaimRunner`.
"""

from __future__ import annotations

import functools
import logging
from contextlib import suppress
from typing import TYPE_CHECKING

from actors.errors import ActorError

from .runs import finish_result, verdict_of

if TYPE_CHECKING:
    from actors import Decision, EventLogClient, Runtime, Survivor

    from .claim_runner import ClaimRunner
    from .runs import RunRecord, RunTable

__all__ = ["OPERATION", "EventLogRuns"]

LOGGER = logging.getLogger("examples.preview")
#: The event-log operation of one measurement run.
OPERATION = "preview"
#: The ``actor`` named when a previous session's runs are discarded.
_DISCARDER = "preview_server"


class EventLogRuns:
    """Opens, reports and closes each run's event-log run (see the module docstring).

    Args:
        runtime: The running runtime (its event log).
        table: The runs.
        db: The database id, in each run's arguments (design §7.5).
        claims: Halts a run's work when its event-log run is cancelled.
        eventlog: Where the runs are reported; None: the runtime's own (a server of
            several databases shares one, design §7.5).
    """

    def __init__(
        self,
        runtime: Runtime,
        table: RunTable,
        claims: ClaimRunner,
        *,
        db: str,
        eventlog: EventLogClient | None = None,
    ) -> None:
        self._runtime = runtime
        self._shared = eventlog
        self._db = db
        self._table = table
        self._claims = claims
        self._closing = False

    @property
    def _eventlog(self) -> EventLogClient:
        # The runtime's event log in its current incarnation (it may have restarted).
        return self._shared if self._shared is not None else self._runtime.eventlog

    async def submit(self, record: RunRecord) -> None:
        """Open the event-log run of ``record`` (left for the next probe if refused)."""
        if self._closing:
            return
        run_id = record.run_id
        try:
            arguments = {"run_id": run_id, "db": self._db}
            receipt = await self._eventlog.submit(OPERATION, arguments)
        except ActorError as exc:
            LOGGER.warning(
                "run %d: submit failed: %s", run_id, exc, extra={"run_id": run_id, "code": exc.code}
            )
            return
        if receipt.run_id is not None:  # admitted (a refusal has no run)
            self._table.track_job(record, receipt.run_id)
        else:
            LOGGER.warning(
                "run %d: not admitted (%s); retrying later",
                run_id,
                receipt.code,
                extra={"run_id": run_id, "code": receipt.code},
            )

    async def submit_unadmitted(self) -> None:
        """:meth:`submit` every run that has no event-log run yet."""
        for record in self._table.runs.values():
            if record.job is None:
                await self.submit(record)

    async def start(self, record: RunRecord) -> None:
        """``job_started`` for ``record`` (its event-log run is opened first if none is).

        Raises:
            ActorError: the event log refused (e.g. ``already_decided``).
        """
        if record.job is None or not record.job_open:
            await self.submit(record)
        if record.job is not None and record.job_open:
            on_cancel = functools.partial(self._claims.halt, record.run_id, record.job)
            await self._eventlog.start(record.job, on_cancel=on_cancel)

    async def progress(self, record: RunRecord, fraction: float, note: str) -> None:
        """``job_progress`` (``fraction`` capped at 1) if ``record``'s run is open.

        Raises:
            ActorError: the event log refused (e.g. ``already_decided``).
        """
        if record.job is not None and record.job_open:
            await self._eventlog.progress(record.job, min(1.0, fraction), note)

    async def finish(self, record: RunRecord, failed: tuple[str, ...]) -> None:
        """``job_finished`` with the verdict of ``record``'s settled revision, if open.

        Args:
            record: The run.
            failed: Kinds that failed at the settled revision.

        Raises:
            ActorError: the event log refused (e.g. ``already_decided``).
        """
        if record.job is None or not record.job_open:
            return
        verdict, error = verdict_of(record, failed)
        result = finish_result(record, failed)
        record.job_open = False
        await self._eventlog.finish(
            record.job, verdict, result, error=None if error is None else error.to_dict()
        )
        LOGGER.info(
            "run %d: %s (job %d)",
            record.run_id,
            verdict,
            record.job,
            extra={"run_id": record.run_id, "job": record.job, "verdict": verdict},
        )

    async def discard_held(self) -> None:
        """Discard the ``preview`` runs that a previous session left in the ledger.

        They are opened afresh from the database; runs of other operations stay held
        for whoever owns them (design §6.17).
        """

        async def decide(survivor: Survivor) -> Decision:
            return "discard" if survivor.status.operation == OPERATION else "keep"

        outcomes = await self._eventlog.recover(decide, actor=_DISCARDER)
        discarded = [o.run_id for o in outcomes if o.decision == "discard" and o.ok]
        if discarded:
            LOGGER.info(
                "discarded %d unfinished runs of a previous session",
                len(discarded),
                extra={"discarded": len(discarded)},
            )

    async def cancel_open(self, *, actor: str, waiting_only: bool = False) -> int:
        """Cancel the open event-log runs (all, or those that would hold up a shutdown).

        Used at shutdown, so every run ends with ``job_finished`` or ``job_cancelled``;
        from then on no new event-log run is opened. With ``waiting_only``, only the runs
        that cannot finish promptly are cancelled: those waiting on a writer (parked, or
        not completed: they end only when the writer does, design §4.5) and those still
        queued (no work of theirs started, so nothing is lost); the running rest may
        finish. Returns how many were cancelled.
        """
        self._closing = True
        eventlog = self._eventlog
        count = 0
        for record in self._table.runs.values():
            if record.job is None or not record.job_open:
                continue
            job = record.job
            if waiting_only and record.completed and not record.parked:
                with suppress(ActorError):
                    if (await eventlog.status(job)).state != "queued":
                        continue
                if not record.job_open or record.job != job:  # decided meanwhile
                    continue
            record.job_open = False
            with suppress(ActorError):
                status = await eventlog.cancel(job, actor)
                count += 1
                if status.state == "cancelled":
                    self._claims.halt(record.run_id, job)  # a queued run has no on_cancel yet
        return count
