"""ChangeProbe: finds new and changed runs in the database (design §4.8, §7.2).

**New runs.** :meth:`ChangeProbe.add_new` lists the runs after the newest known one
through helper jobs (``list_runs``, a page of 500 at a time), registers them in the
:class:`~examples.preview.app.runs.RunTable` and opens their event-log runs; the app
calls it at startup, and the probe whenever it sees a run it does not know. A run
whose id is beyond what clients can address (2**53-1) is left out, with one warning.

**Change detection.** Every ``poll_interval`` seconds a helper runs the cheap ``probe``
(``PRAGMA data_version``, and per run the highest row id, completion and exception
flags: no result data is read). A run whose change token moved gets ``SourceChanged``
(so its images are redrawn at a new revision); new runs are added and the scheduler
gets ``Reconcile``; a run that became complete is read again and finishes. After each
probe, runs the event log refused before are submitted again, and a changed run list
is pushed to the clients. A probe that fails is logged once per distinct failure (a
database that stays broken must not log a line at every poll).

Depends on the :class:`~examples.preview.app.runs.RunTable`,
:class:`~examples.preview.app.helper_jobs.HelperJobs`,
:class:`~examples.preview.app.revisions.Revisions`,
:class:`~examples.preview.app.eventlog_runs.EventLogRuns` and
:class:`~examples.preview.app.connected_clients.Clients` (the run-list push).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import trio

from actors.errors import ActorError
from protocol import messages

from ..child.qcodes.cells import revision

if TYPE_CHECKING:
    from .connected_clients import Clients
    from .eventlog_runs import EventLogRuns
    from .helper_jobs import HelperJobs
    from .revisions import Revisions
    from .runs import RunRecord, RunTable

__all__ = ["ChangeProbe"]

LOGGER = logging.getLogger("examples.preview")
#: Run summaries per ``list_runs`` helper job.
_PAGE = 500


class ChangeProbe:
    """Adds new runs and notices changed ones (see the module docstring).

    Args:
        table: The runs.
        helpers: Runs the ``list_runs`` and ``probe`` helper jobs.
        revisions: Asks the scheduler for the changed runs' new revisions.
        jobs: Opens the new runs' event-log runs.
        clients: Receives the changed run list.
        poll_interval: Seconds (trio clock) between two probes.
    """

    def __init__(
        self,
        table: RunTable,
        helpers: HelperJobs,
        revisions: Revisions,
        jobs: EventLogRuns,
        clients: Clients,
        *,
        poll_interval: float,
    ) -> None:
        self._table = table
        self._helpers = helpers
        self._revisions = revisions
        self._jobs = jobs
        self._clients = clients
        self._poll_interval = poll_interval
        self._failure: str | None = None  # the last failure logged, until one succeeds
        self.probes = 0
        """Probes that succeeded."""
        self._left_out: set[int] = set()  # run ids beyond what clients can address
        self._stopped = trio.CancelScope()  # cancelled by stop(): no probe from then on

    async def add_new(self, now: float) -> list[RunRecord]:
        """Register the runs after the newest known one, seen at ``now``; open their
        event-log runs. Returns the new runs.

        Raises:
            ActorError: a ``list_runs`` helper job failed (e.g. ``SourceUnreadable``).
        """
        runs: list[dict[str, Any]] = []
        cursor: int | None = self._table.newest_run_id()
        while cursor is not None and self._addressable(cursor):
            page = await self._helpers.run_job("list_runs", {"after": cursor, "limit": _PAGE})
            runs.extend(s for s in page["runs"] if self._addressable(s["run_id"]))
            cursor = page["next_after"]
        added = [self._table.register(summary, now) for summary in runs]
        for record in added:
            await self._jobs.submit(record)
        return added

    def _addressable(self, run_id: int) -> bool:
        # Clients name runs by JSON ints of at most 2**53-1 (SQLite allows 2**63-1):
        # a run beyond that could never be listed, selected or drawn, and one in the
        # table would make every run_list fail. It is left out, with one warning.
        if 0 <= run_id <= messages.MAX_JSON_INT:
            return True
        if run_id not in self._left_out:
            self._left_out.add(run_id)
            LOGGER.warning(
                "run %d: clients cannot address its id; it is left out", run_id,
                extra={"run_id": run_id},
            )  # fmt: skip
        return False

    def stop(self) -> None:
        """Stop probing now (at shutdown): a probe in flight is cancelled, so its job's
        cancel ladder runs beside the others rather than after them (design §3.8)."""
        self._stopped.cancel()

    async def run(self) -> None:
        """Probe every ``poll_interval`` seconds until cancelled or :meth:`stop` (a task)."""
        with self._stopped:
            await self._probe_forever()

    async def _probe_forever(self) -> None:
        while True:
            await trio.sleep(self._poll_interval)
            try:
                probe = await self._helpers.run_job("probe", None)
                self.probes += 1
                if self._failure is not None:
                    LOGGER.warning("change probe works again")
                    self._failure = None
                await self.apply(probe)
                await self._jobs.submit_unadmitted()
            except ActorError as exc:
                if str(exc) != self._failure:
                    LOGGER.warning("change probe failed: %s", exc, extra={"code": exc.code})
                    self._failure = str(exc)
            if self._table.take_list_change():
                self._clients.push_run_list()

    async def apply(self, probe: dict[str, Any]) -> None:
        """Act on one probe result: new runs, changed runs, completed runs.

        Raises:
            ActorError: listing the new runs or telling the scheduler failed.
        """
        now, wall = trio.current_time(), time.time()  # the probe's moment, on both clocks
        changed: list[RunRecord] = []
        new = False
        runs = self._table.runs
        for entry in probe.get("runs", ()):  # every run, at every probe: kept lean
            record = runs.get(entry[0])
            if record is None:
                new = new or self._addressable(entry[0])
                continue
            if record.note_probe(int(entry[1]), bool(entry[2])):
                self._table.list_changed = True
            token = revision(entry)
            if record.note_token(token, now, wall):
                record.number(token)
                changed.append(record)
        if new:
            added = await self.add_new(now)
            await self._revisions.reconcile(changed)
            LOGGER.info(
                "new runs: %s",
                [r.run_id for r in added],
                extra={"run_ids": [r.run_id for r in added]},
            )
            return
        for record in changed:
            await self._revisions.source_changed(record)
