"""The preview server's measurement runs: each run's record, and their table (design §7.2).

No I/O, no trio.

One :class:`RunRecord` per run of the QCoDeS database. It links the three views of a run:

* the **database**: the run's summary (from the helper's ``list_runs``), its change
  token (``rows=N;completed=C;exc=E``, from ``list_runs`` or the ``probe``) and the time
  (trio clock, seconds) the token last changed;
* the **scheduler** (design §4): the revision the scheduler works on (a change token), and
  what it published or failed at that revision;
* the **event log** (design §6): the event-log run (``job``) that reports this
  measurement run's lifecycle to clients, and whether it is still open.

Client-facing revisions are small integers: :meth:`RunRecord.number` gives each change
token of a run the next integer the first time it is seen (tokens only ever grow as a
run is written, so the numbers grow with the data). ``image_ready`` notices carry them.

Verdicts (:func:`verdict_of`), as QCoDeS records the run: ``ok`` for a completed run
(whatever its points against a declared shape); ``empty`` (completed, no results),
``interrupted`` (completed, but the measurement ended with an exception) and
``incomplete`` (``is_completed`` is 0 and nothing was written for ``stall_after``
seconds: the writer is gone) make the status explicit; ``failed`` when any kind failed
(the error record goes with it).

**The table.** :class:`RunTable` holds the measurement runs that the preview app
knows. It holds one :class:`~examples.preview.app.runs.RunRecord` per run of the database, finds
the run that an event-log run (a *job*) reports, and remembers whether the clients'
run list changed since it was last pushed. Every other part of
:class:`~examples.preview.app.preview_app.PreviewApp` reads and updates runs through it; it
depends on no other part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs

from actors import RunInfo
from actors.errors import UnknownRun
from protocol import messages
from protocol.codec import unstructure_message

if TYPE_CHECKING:
    from collections.abc import Iterable

    from actors.errors import ErrorRecord

__all__ = [
    "IMAGE_KINDS",
    "KIND_COUNT",
    "RunRecord",
    "finish_result",
    "points_message",
    "row_inputs",
    "run_status",
    "summary_message",
    "verdict_of",
    "RunTable",
]

#: Kinds whose result is a PNG announced to clients by an ``image_ready`` notice.
IMAGE_KINDS: Final = ("thumbnail", "preview")
#: Kinds of work per run (metadata, thumbnail, preview): progress is published / 3.
KIND_COUNT: Final = 3
#: Measurement statuses that are also verdicts (``examples.preview.child.qcodes.source`` statuses).
_STATUS_VERDICTS: Final = frozenset({"ok", "empty", "interrupted", "incomplete"})
#: At most this many dependents' points are listed in a ``run_list`` row.
_MAX_POINTS: Final = 64
#: At most this many dependents are described in a ``job_finished`` result.
_MAX_DEPENDENTS: Final = 8


@attrs.define(eq=False, kw_only=True)
class RunRecord:
    """What the preview app knows about one measurement run (see the module docstring)."""

    run_id: int
    """The database's run id."""
    guid: str
    """The run's GUID (``run-<id>`` if the database has none, ``<guid>#<id>`` if an
    earlier run has the same one)."""
    summary: dict[str, Any]
    """The helper's run summary (``QcodesSource.list_runs``); updated by reads."""
    token: str
    """The newest change token seen by ``list_runs`` or the probe."""
    changed_at: float
    """When ``token`` last changed, seconds on the trio clock."""
    changed_wall: float | None = None
    """When ``token`` last changed, epoch seconds; None while it never changed since the
    run was listed (the file's modification time then bounds the run's last write)."""
    sched_revision: str = ""
    """The revision the scheduler works on now (a change token, or ``token~rN``)."""
    requested: str = ""
    """The revision the app last asked the scheduler for (``sched_revision`` follows it
    once the scheduler's ``Invalidated`` notice arrives)."""
    parked: bool = False
    """True while the run's metadata is parked: it is being written (design §4.5)."""
    job: int | None = None
    """The event-log run reporting this run's lifecycle, or None (not admitted yet)."""
    job_open: bool = False
    """True while ``job`` is queued or running (as far as the app knows)."""
    published: set[str] = attrs.field(factory=set)
    """Kinds published at ``sched_revision``."""
    errors: dict[str, ErrorRecord] = attrs.field(factory=dict)
    """Failure records by kind at ``sched_revision``."""
    observation_status: str | None = None
    """``status`` of the newest metadata read (``ok``, ``empty``, ...), or None."""
    live_token: str | None = None
    """Token of the newest partial (progressive) images drawn, or None."""
    dependents: list[dict[str, Any]] = attrs.field(factory=list)
    """Short descriptions of the dependents of the newest metadata read."""
    starred: bool = False
    """Starred by a user (kept beside the database, :mod:`~examples.preview.app.annotations`)."""
    note: str = ""
    """A user's note on the run, or ``""``."""
    halted: frozenset[str] = frozenset()
    """Scheduler revisions whose work a client cancelled (design §6.7): their claims end
    at once, without I/O. A new revision (new data, or a ``submit``) is not halted."""
    _listed: tuple[Any, ...] | None = attrs.field(default=None, init=False)
    _numbers: dict[str, int] = attrs.field(factory=dict, init=False)
    _next_number: int = attrs.field(default=1, init=False)

    def number(self, token: str) -> int:
        """The client revision (1, 2, ...) of change token ``token`` of this run."""
        found = self._numbers.get(token)
        if found is None:
            found = self._numbers[token] = self._next_number
            self._next_number += 1
        return found

    @property
    def status(self) -> str:
        """The run's status: ``ok``, ``empty``, ``interrupted`` or ``incomplete``."""
        return str(self.observation_status or self.summary.get("status") or "unknown")

    @property
    def completed(self) -> bool:
        """False while ``is_completed`` is 0 (a progressive source, design §4.5)."""
        return bool(self.summary.get("is_completed", False))

    def relisted(self) -> bool:
        """True if the run's ``run_list`` row (status, event-log run, completion) changed
        since the last call: the list is pushed again then (rows alone do not count)."""
        row = (run_status(self), self.job, self.completed)
        if row == self._listed:
            return False
        self._listed = row
        return True

    def reset_revision(self, revision: str) -> None:
        """The scheduler moved the run to ``revision``: forget published kinds and errors."""
        self.sched_revision = revision
        self.parked = False
        self.published.clear()
        self.errors.clear()

    def note_token(self, token: str, now: float, wall: float | None = None) -> bool:
        """Record the database's newest change token; True if it changed.

        Args:
            token: The change token.
            now: Seconds on the trio clock.
            wall: The same moment in epoch seconds, if known.
        """
        if token == self.token:
            return False
        self.token = token
        self.changed_at = now
        self.changed_wall = wall
        return True

    def idle_since(self) -> float | None:
        """For a run not completed: the latest time (epoch seconds) after which nothing
        was written to it, as far as the server knows; None for a completed run."""
        if self.completed:
            return None
        if self.changed_wall is not None:
            return self.changed_wall
        modified = self.summary.get("file_modified")
        return float(modified) if isinstance(modified, (int, float)) else None

    def dependent_points(self) -> tuple[messages.DependentPoints, ...]:
        """Points per dependent, and the planned ones, as last read (at most 64)."""
        return points_message(self.summary.get("points"), self.summary.get("planned_points"))

    def note_observation(self, observation: dict[str, Any]) -> bool:
        """Take status, rows and completion from a metadata read; True if status changed."""
        before = (self.status, self.completed)
        self.observation_status = str(observation.get("status", "unknown"))
        for key in ("status", "status_reason", "row_count", "is_completed", "shapes", "points",
                    "planned_points"):  # fmt: skip
            if key in observation:
                self.summary[key] = observation[key]
        self.dependents = [
            {
                "name": str(dep.get("name"))[:128],
                "label": str(dep.get("label") or "")[:128],
                "unit": str(dep.get("unit") or "")[:32],
                "shape": dep.get("source_shape"),
                "points": dep.get("points"),
                "planned": dep.get("planned_points"),
            }
            for dep in (observation.get("dependents") or [])[:_MAX_DEPENDENTS]
        ]
        return (self.status, self.completed) != before

    def points(self) -> tuple[int, int | None]:
        """Points read so far and planned points of the first dependent (or None)."""
        if not self.dependents:
            return 0, None
        first = self.dependents[0]
        points = first.get("points")
        planned = first.get("planned")
        return (
            int(points) if isinstance(points, int) else 0,
            int(planned) if isinstance(planned, int) and planned > 0 else None,
        )

    def note_probe(self, max_row_id: int, completed: bool) -> bool:
        """Take rows and completion from a probe entry; True if completion changed."""
        before = self.completed
        self.summary["row_count"] = max(int(self.summary.get("row_count") or 0), max_row_id)
        self.summary["is_completed"] = completed
        return before != completed


def points_message(points: object, planned: object) -> tuple[messages.DependentPoints, ...]:
    """The ``points`` of a ``run_list`` row or ``run_details_reply`` (at most 64).

    Args:
        points: A reader's ``points`` (dependent name → points so far); anything else
            gives ``()``. Counts the protocol cannot carry are left out.
        planned: Its ``planned_points`` (dependent name → planned points), or None.
    """
    if not isinstance(points, dict):
        return ()
    wanted = planned if isinstance(planned, dict) else {}
    found = []
    for name, count in list(points.items())[:_MAX_POINTS]:
        if not isinstance(count, int) or not 0 <= count <= messages.MAX_JSON_INT:
            continue
        want = wanted.get(name)
        fits = isinstance(want, int) and 0 <= want <= messages.MAX_JSON_INT
        found.append(messages.DependentPoints(
            name=str(name)[:4096] or "?", points=count, planned=want if fits else None
        ))  # fmt: skip
    return tuple(found)


def run_status(record: RunRecord) -> str | None:
    """The ``status`` of the run's ``run_list`` row (design §7.2).

    ``unreadable`` if its metadata failed (not by a cancel), the read's status (``ok``, ``empty``,
    ``interrupted``, ``incomplete``) once its metadata is published at the scheduler's
    revision, ``progressive`` while it is being written, else None (not read yet).
    """
    error = record.errors.get("metadata")
    if error is not None and error.code != "work_cancelled":
        return "unreadable"
    if "metadata" in record.published and record.observation_status in _STATUS_VERDICTS:
        return record.observation_status
    if record.parked or not record.completed:
        return "progressive"
    return None


def row_inputs(record: RunRecord) -> tuple[Any, ...]:
    """What :func:`summary_message` reads of ``record``: equal inputs, an equal row.

    The summary's values are compared, not copied: they are replaced when they change
    (reads and probes assign new values, never change one in place).
    """
    summary = record.summary
    return (
        run_status(record),
        record.job,
        record.completed,
        record.guid,
        summary.get("row_count"),
        summary.get("name"),
        summary.get("exp_name"),
        summary.get("sample_name"),
        summary.get("shapes"),
        summary.get("points"),
        record.idle_since(),
        record.starred,
        record.note,
    )


def summary_message(record: RunRecord) -> messages.RunSummary:
    """Return the ``run_list`` row of ``record`` (design §7.2)."""
    summary = record.summary
    shapes = summary.get("shapes") or {}
    shape: tuple[int, ...] = ()
    if isinstance(shapes, dict) and shapes:
        first = next(iter(shapes.values()))
        if isinstance(first, list) and all(
            isinstance(n, int) and 0 <= n <= messages.MAX_JSON_INT for n in first
        ):  # a planned size the protocol cannot carry leaves the shape unknown
            shape = tuple(first[:8])
    return messages.RunSummary(
        run_id=record.run_id,
        name=str(summary.get("name") or f"run {record.run_id}")[:4096],
        experiment=str(summary.get("exp_name") or "")[:4096],
        sample=None if summary.get("sample_name") is None else str(summary["sample_name"])[:4096],
        guid=record.guid[:4096] or None,
        shape=shape,
        completed=record.completed,
        rows=max(0, int(summary.get("row_count") or 0)),
        status=run_status(record),
        job_run_id=record.job,
        points=record.dependent_points(),
        idle_since=record.idle_since(),
        starred=record.starred,
        note=record.note[: messages.MAX_NOTE],
    )


def verdict_of(record: RunRecord, failed: tuple[str, ...]) -> tuple[str, ErrorRecord | None]:
    """The event-log verdict of a settled run and its error record, if any.

    Args:
        record: The run.
        failed: Kinds that failed at the settled revision.

    Returns:
        ``("failed", record)`` if a kind failed (metadata's error first), otherwise the
        measurement status as the verdict (``ok``/``empty``/``interrupted``/
        ``incomplete``) and None.
    """
    for kind in ("metadata", *IMAGE_KINDS):
        if kind in failed and kind in record.errors:
            return "failed", record.errors[kind]
    if failed:
        return "failed", None
    status = record.status
    return (status if status in _STATUS_VERDICTS else "ok"), None


def finish_result(record: RunRecord, failed: tuple[str, ...]) -> dict[str, Any]:
    """The JSON ``result`` of a run's ``job_finished`` event: its metadata, in short.

    ``run_id`` (the database's), ``status``, ``reason``, ``revision`` (client
    revision), ``name``, ``rows``, ``published`` and ``failed`` kinds, and up to eight
    ``dependents`` (``name``, ``label``, ``unit``, ``shape``, ``points``, ``planned``).
    """
    summary = record.summary
    status = "unreadable" if "metadata" in failed else record.status
    result: dict[str, Any] = {
        "run_id": record.run_id,
        "status": status,
        "reason": str(summary.get("status_reason") or "")[:512],
        "revision": record.number(record.sched_revision) if record.sched_revision else 0,
        "name": str(summary.get("name") or "")[:256],
        "rows": int(summary.get("row_count") or 0),
        "published": sorted(record.published),
        "failed": sorted(failed),
    }
    if record.dependents:
        result["dependents"] = record.dependents
    return result


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
        self._fields: dict[int, tuple[messages.RunSummary, dict[str, Any]]] = {}
        """Run id -> its last ``run_list`` row and that row as JSON fields."""

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

    def row_fields(self) -> list[dict[str, Any]]:
        """The rows of :meth:`summaries` as the JSON objects of a ``run_list`` message
        (:func:`protocol.codec.unstructure_message`'s), in run order.

        A row is unstructured again only when it was built again: a pushed run list
        then costs its changed rows and one JSON encoding, not a conversion of every row.
        """
        cached = self._fields
        listed: list[dict[str, Any]] = []
        for row in self.summaries():
            known = cached.get(row.run_id)
            if known is None or known[0] is not row:
                one = unstructure_message(messages.RunList(request_id=None, runs=(row,)))
                known = cached[row.run_id] = (row, one["runs"][0])
            listed.append(known[1])
        return listed

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
