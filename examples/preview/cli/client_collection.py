"""What a session of the preview's command-line client saw, and when it is done
(design §7.2): :class:`Collection`, :class:`SavedImage`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from pathlib import Path

    from protocol import messages

__all__ = ["IMAGE_KINDS", "Collection", "SavedImage"]

#: The image kinds the preview server draws for each run.
IMAGE_KINDS = ("thumbnail", "preview")


@attrs.frozen(kw_only=True)
class SavedImage:
    """One PNG written by the client."""

    run_id: int
    kind: str
    revision: int
    width: int
    height: int
    size: int
    """Bytes of PNG."""
    path: Path


@attrs.define(kw_only=True)
class Collection:
    """What a session saw."""

    runs: dict[int, messages.RunSummary] = attrs.field(factory=dict)
    """The run list, by database run id."""
    images: dict[tuple[int, str], SavedImage] = attrs.field(factory=dict)
    """The newest image per (run, kind)."""
    events: list[messages.Event] = attrs.field(factory=list)
    """Every event-log event, in ``seq`` order."""
    jobs: dict[int, int] = attrs.field(factory=dict)
    """Event-log run id → database run id (from ``job_queued``)."""
    finished: dict[int, dict[str, Any]] = attrs.field(factory=dict)
    """Database run id → the ``data`` of its newest ``job_finished`` or ``job_cancelled``
    event, with ``kind`` (which of the two) and ``job`` (its event-log run)."""
    db: str | None = None
    """The database the session's runs are of (``database_list``'s ``current``); the
    events and notices of other databases' runs are skipped (design §7.5)."""
    errors: list[messages.ErrorReply] = attrs.field(factory=list)
    """Error answers received."""
    complete: bool = False
    """True when every run was settled (:meth:`missing` was empty)."""
    resumed: int = 0
    """The cursor of the newest ``snapshot_reply``: the events before it that the
    session did not see are lost (its cursor had expired, design §6.15); 0 if none."""
    decided: set[int] = attrs.field(factory=set)
    """Database runs whose event-log run ended among those lost events: their finish is
    unknown, so a thumbnail and a preview of any revision settle them."""
    _newest_job: dict[int, int] = attrs.field(factory=dict, init=False, repr=False, eq=False)
    # Database run id -> its newest event-log run in :attr:`jobs` (kept by _note_event):
    # :meth:`job` is asked for every run at every message, so no scan of every job.

    def missing(self) -> list[tuple[int, str]]:
        """What is still expected, as (run, ``thumbnail``/``preview``/``job_finished``).

        For each run of the newest run list, in run order (design §7.2):

        * its current event-log run ended with ``job_finished``: each image kind the
          result lists as ``published``, at the result's ``revision`` or newer (the
          finish can overtake the last image: they are pushed by different tasks);
          ended with ``job_cancelled``: nothing more;
        * still being written (``completed`` false) and not ended: a thumbnail and a
          preview of any revision once it has rows (its newest live images: the run
          may be written for hours);
        * its end was among the events lost to an expired cursor (:attr:`decided`): a
          thumbnail and a preview of any revision;
        * otherwise its ``job_finished``: only the finish tells which images will come
          (an empty run has images too; a kind that failed has none).
        """
        wanted: list[tuple[int, str]] = []
        for run_id, run in sorted(self.runs.items()):
            finish = self._finish(run_id)
            if finish is not None:
                kinds, revision = _published(finish)
            elif not run.completed:
                kinds, revision = (IMAGE_KINDS if run.rows > 0 else ()), 0
            elif run_id in self.decided:
                kinds, revision = IMAGE_KINDS, 0
            else:
                wanted.append((run_id, "job_finished"))
                continue
            for kind in kinds:
                image = self.images.get((run_id, kind))
                if image is None or image.revision < revision:
                    wanted.append((run_id, kind))
        return wanted

    def _finish(self, run_id: int) -> dict[str, Any] | None:
        """The end (``job_finished``/``job_cancelled`` data) of the run's newest
        event-log run, or None while it is open (or unknown)."""
        data = self.finished.get(run_id)
        if data is not None and data.get("job") == self.job(run_id):
            return data
        return None

    def job(self, run_id: int) -> int | None:
        """The run's newest event-log run (from ``run_list`` or the events), or None."""
        run = self.runs.get(run_id)
        listed = None if run is None else run.job_run_id
        found = (self._newest_job.get(run_id), listed)
        return max((job for job in found if job is not None), default=None)

    def status(self, run_id: int) -> str:
        """The run's status, or ``-`` if unknown.

        The ``job_finished`` (or ``job_cancelled``) event of the run's newest event-log
        run when it came, else the newest ``run_list``'s ``status`` (so a client that
        connects late needs no old events).
        """
        data = self._finish(run_id)
        if data is not None:
            if data["kind"] == "job_cancelled":
                return "cancelled"
            result = _result(data)
            return str(result.get("status") or data.get("verdict"))
        run = self.runs.get(run_id)
        if run is not None and run.status is not None:
            return run.status
        return "-"

    @property
    def cursor(self) -> int:
        """The ``seq`` of the newest event seen or resumed at (0 if none): where to
        subscribe again."""
        return max(self.events[-1].seq if self.events else 0, self.resumed)

    def _note_event(self, event: messages.Event) -> int:
        """Take in ``event``; 1 if it was new, 0 if it was seen already."""
        if event.seq <= self.cursor:
            return 0  # already seen (a subscription again after resync_required)
        self.events.append(event)
        if event.run_id is None:
            return 1
        if event.kind == "job_queued":
            arguments = event.data.get("arguments", {})
            run = arguments.get("run_id")
            db = arguments.get("db")
            if isinstance(run, int) and (db is None or self.db is None or db == self.db):
                self.jobs[event.run_id] = run
                self._newest_job[run] = max(event.run_id, self._newest_job.get(run, event.run_id))
        elif event.kind in ("job_finished", "job_cancelled") and event.run_id in self.jobs:
            self.finished[self.jobs[event.run_id]] = {
                **event.data, "kind": event.kind, "job": event.run_id,
            }  # fmt: skip
        return 1

    def _resume_at(self, snapshot: messages.SnapshotReply) -> None:
        """Go on from ``snapshot``: the runs not live in it, whose end this session has
        not seen, ended among the events it lost (design §6.15)."""
        live = {run.run_id for run in snapshot.runs}
        for run_id in self.runs:
            job = self.job(run_id)
            if job is not None and job not in live and self._finish(run_id) is None:
                self.decided.add(run_id)
        self.resumed = max(self.resumed, snapshot.cursor)


def _result(finish: dict[str, Any]) -> dict[str, Any]:
    """The ``result`` object of a ``job_finished`` event's data ({} if absent or not one)."""
    result = finish.get("result")
    return result if isinstance(result, dict) else {}


def _published(finish: dict[str, Any]) -> tuple[tuple[str, ...], int]:
    """The image kinds a run's ended event-log run published, and their revision.

    A ``job_cancelled`` published nothing more. A ``job_finished`` whose result has no
    ``published`` list (not this server's) is taken to have published both kinds.
    """
    if finish.get("kind") == "job_cancelled":
        return (), 0
    result = _result(finish)
    published = result.get("published")
    kinds: tuple[str, ...] = IMAGE_KINDS
    if isinstance(published, list):
        kinds = tuple(kind for kind in IMAGE_KINDS if kind in published)
    revision = result.get("revision")
    if isinstance(revision, bool) or not isinstance(revision, int):
        revision = 0
    return kinds, revision
