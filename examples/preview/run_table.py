"""RunTable: the measurement runs that the preview app knows; no I/O (design §7.2).

It holds one :class:`~examples.preview.runs.RunRecord` per run of the database, finds
the run that an event-log run (a *job*) reports, and remembers whether the clients'
run list changed since it was last pushed. Every other part of
:class:`~examples.preview.app.PreviewApp` reads and updates runs through it; it
depends on no other part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors import RunInfo
from actors.errors import UnknownRun

from .runs import RunRecord, row_inputs, summary_message

if TYPE_CHECKING:
    from collections.abc import Iterable

    from protocol import messages

__all__ = ["RunTable"]

#: At most this many unknown run ids are named in an ``unknown_run`` error.
_NAMED = 10


class RunTable:
    """The runs of the database, by run id and by event-log run."""

    def __init__(self) -> None:
        self.runs: dict[int, RunRecord] = {}
        """Every known run, by the database's run id, in run order."""
        self.list_changed = False
        """True once a ``run_list`` row changed and until :meth:`take_list_change`."""
        self._jobs: dict[int, int] = {}
        self._guids: dict[str, int] = {}
        """GUID given to the scheduler -> its run (unique, design §4.8)."""
        self._rows: dict[int, tuple[tuple[Any, ...], messages.RunSummary]] = {}
        """Run id -> the inputs of its last ``run_list`` row and that row."""

    def register(self, summary: dict[str, Any], now: float) -> RunRecord:
        """Add the run of a helper's run summary (``list_runs``), seen at ``now``.

        Args:
            summary: The summary; ``run_id`` is required, ``guid`` and ``revision``
                (its change token) are used when present. A GUID that another run
                already has gets ``#<run_id>`` appended.
            now: Seconds on the trio clock.
        """
        run_id = int(summary["run_id"])
        token = str(summary.get("revision") or "new")
        guid = str(summary.get("guid") or f"run-{run_id}")
        # The scheduler fences and caches by GUID and refuses two runs sharing one (a
        # copied row): the later run gets its own, so the database is still served.
        while self._guids.get(guid, run_id) != run_id:
            guid = f"{guid}#{run_id}"
        self._guids[guid] = run_id
        record = RunRecord(
            run_id=run_id,
            guid=guid,
            summary=summary,
            token=token,
            changed_at=now,
            sched_revision=token,
            requested=token,
        )
        record.number(token)
        self.runs[run_id] = record
        self.list_changed = True
        return record

    def newest_run_id(self) -> int:
        """The highest known run id (0 if none): new runs are listed after it."""
        return max(self.runs, default=0)

    def check(self, run_ids: Iterable[int]) -> None:
        """Refuse run ids the database does not have.

        Raises:
            UnknownRun: (``unknown_run``) one or more ids are unknown; the first ten
                are named in the message and in ``run_ids``.
        """
        unknown = [r for r in run_ids if r not in self.runs]
        if unknown:
            named = unknown[:_NAMED]
            raise UnknownRun(f"no run {', '.join(map(str, named))} in this database", run_ids=named)

    def infos(self, changed: Iterable[RunRecord] = ()) -> list[RunInfo]:
        """The scheduler's view of every run (design §4.8 ``reconcile``).

        Runs in ``changed`` are given at their newest change token, the others at the
        revision last asked for.
        """
        moved = {r.run_id for r in changed}
        return [
            RunInfo(
                run_id=r.run_id, guid=r.guid, revision=r.token if r.run_id in moved else r.requested
            )
            for r in self.runs.values()
        ]

    def summaries(self) -> tuple[messages.RunSummary, ...]:
        """The rows of a ``run_list`` message, in run order.

        A row is built again only when what it shows changed (:func:`row_inputs`): the
        list is asked for at every push of a changed run list, with most rows as before.
        """
        rows = self._rows
        listed: list[messages.RunSummary] = []
        for record in self.runs.values():
            inputs = row_inputs(record)
            known = rows.get(record.run_id)
            if known is None or known[0] != inputs:
                known = rows[record.run_id] = (inputs, summary_message(record))
            listed.append(known[1])
        return tuple(listed)

    def track_job(self, record: RunRecord, job: int) -> None:
        """``job`` is the new event-log run reporting ``record`` (it is queued)."""
        if record.job is not None:
            self._jobs.pop(record.job, None)
        record.job, record.job_open = job, True
        self._jobs[job] = record.run_id
        self.list_changed = self.list_changed or record.relisted()

    def run_of_job(self, job: int) -> RunRecord | None:
        """The run whose current event-log run is ``job``, or None."""
        run_id = self._jobs.get(job)
        return None if run_id is None else self.runs.get(run_id)

    def note_row(self, record: RunRecord) -> None:
        """Note that ``record``'s ``run_list`` row may have changed."""
        if record.relisted():
            self.list_changed = True

    def take_list_change(self) -> bool:
        """True (once) if the run list changed since the last call: push it then."""
        changed, self.list_changed = self.list_changed, False
        return changed
