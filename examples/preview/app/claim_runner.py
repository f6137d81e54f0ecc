"""ClaimRunner: does the scheduler's claims for the preview app, and halts cancelled runs.

**Claims** (design §4). :meth:`ClaimRunner.execute` is the runtime's ``execute``: one
claim of the scheduler. ``metadata`` is a helper job ``read_run`` (the database is only
opened in helper processes), or :class:`~actors.Progressive` for a run still being
written (design §4.5: a page that finds no new rows does no I/O; a run unchanged for
``stall_after`` seconds is published as it is). The images are drawn in the helper
processes, on every core (design §5.4): the metadata read of a finished run draws its
thumbnail too and comes back without its values, so ``thumbnail`` only takes that PNG;
``preview`` (and a thumbnail the read did not draw) is a helper job ``draw``, which
takes the read the thumbnail's helper left in the helpers' handoff folder (or reads
the run again): the values never cross the pipe. A read of a run still being written
is drawn in its helper too, as its live images (thumbnail and preview), and comes back
without its values (:mod:`examples.preview.app.live_images` keeps them).

**Cancellation** (design §6.7). The event-log run of a measurement run is started with
``on_cancel`` = :meth:`ClaimRunner.halt` (and a client's ``cancel`` goes through
:meth:`ClaimRunner.halt_job` too, so a run cancelled while still queued stops as well).
Halting a run marks the scheduler revisions it was at as *halted* (its parked reads
are no longer shown) and cancels its claims in flight: a helper job gets the pool's cancel
ladder (design §3.5). Each such claim,
and every later claim of a halted revision, ends with
:class:`~actors.errors.WorkCancelled` at once, without I/O: a permanent failure, so the
scheduler stops the run's remaining kinds and settles it. Nothing more is reported on
the cancelled event-log run (its ``job_cancelled`` is the event log's, design §6.6).
New data, or a ``submit`` of ``preview``, starts a new revision and a new event-log run
as usual.

Depends on the :class:`~examples.preview.app.runs.RunTable` and
:class:`~examples.preview.app.helper_jobs.HelperJobs` (the reads).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from actors import Produced, Progressive
from actors.errors import SourceUnreadable, WorkCancelled

from ..child.draw import IMAGES_KEY, observation_of, png_of
from ..child.drawing.png import check_png
from .live_images import LIVE_KINDS

if TYPE_CHECKING:
    from actors import Runtime, SchedulerJob

    from .helper_jobs import HelperJobs
    from .runs import RunRecord, RunTable

__all__ = ["ClaimRunner"]

LOGGER = logging.getLogger("examples.preview")
#: The kind a metadata read draws at once: cheap, and wanted first (design §5.4).
_DRAWN_WITH_READ = "thumbnail"


class ClaimRunner:
    """The preview app's claims and their cancellation (see the module docstring).

    Args:
        table: The runs.
        helpers: Runs the ``read_run`` and ``draw`` helper jobs.
        stall_after: Seconds (trio clock) an unfinished run may stay unchanged before
            its read is published as it is (status ``incomplete``).
    """

    def __init__(
        self,
        table: RunTable,
        helpers: HelperJobs,
        *,
        stall_after: float,
    ) -> None:
        self._table = table
        self._helpers = helpers
        self._stall_after = stall_after
        self._inflight: dict[int, set[trio.CancelScope]] = {}

    async def execute(self, job: SchedulerJob, runtime: Runtime) -> Any:
        """Do one claim: read the run (metadata) or draw it (thumbnail, preview).

        Returns:
            The observation (metadata; without its values once drawn), or
            :class:`~actors.Progressive` for a run still being written, or
            :class:`~actors.Produced` PNG bytes.

        Raises:
            WorkCancelled: (``work_cancelled``) a client cancelled the run (see
                :meth:`halt`).
            SourceUnreadable: (``source_unreadable``) the helper's answer has no observation
                or no PNG of the kind.
            PayloadInvalid: (``payload_invalid``) the helper's PNG has no valid header.
            ActorError: the helper job (the read or the drawing) failed (classified,
                design §1.5; e.g. ``JobFailed`` with code ``render_failed``).
        """
        claim = job.claim
        record = self._table.runs.get(claim.run_id)
        if record is not None and claim.revision in record.halted:
            raise WorkCancelled(f"run {claim.run_id}: its preview was cancelled")
        scopes = self._inflight.setdefault(claim.run_id, set())
        with trio.CancelScope() as scope:
            scopes.add(scope)
            try:
                return await self._claim(job, record)
            finally:
                scopes.discard(scope)
                if not scopes:
                    self._inflight.pop(claim.run_id, None)
        raise WorkCancelled(f"run {claim.run_id}: its preview was cancelled while running")

    async def _claim(self, job: SchedulerJob, record: RunRecord | None) -> Any:
        claim = job.claim
        if claim.kind == "metadata":
            if claim.page and record is not None and not self._stalled(record):
                return Progressive(None)  # a page with no new rows: no I/O at all
            observation = await self._read(claim.run_id)
            if observation.get("status") == "incomplete" and (
                record is None or not self._stalled(record)
            ):
                return Progressive(observation)
            return observation
        # Drawn with the read (the thumbnail), else drawn now by a helper (design §5.4).
        png = png_of(job.observation, claim.kind)
        if png is None:
            # The read that drew the thumbnail was left for this job in the helpers'
            # handoff folder, at its revision.
            read = job.observation if isinstance(job.observation, dict) else {}
            revision = read.get("revision")
            payload = {"run_id": claim.run_id, "kinds": [claim.kind],
                       "revision": revision if isinstance(revision, str) else None}  # fmt: skip
            png = png_of(await self._helpers.run_job("draw", payload), claim.kind)
            if png is None:
                raise SourceUnreadable(f"run {claim.run_id}: the helper drew no {claim.kind}")
        check_png(png)  # as the renderer checks its drawings: nothing invalid is published
        return Produced(png, at=trio.current_time())

    async def _read(self, run_id: int) -> dict[str, Any]:
        payload = {"run_id": run_id, "draw": [_DRAWN_WITH_READ], "live": list(LIVE_KINDS)}
        observation = observation_of(await self._helpers.run_job("read_run", payload))
        if not isinstance(observation, dict):
            raise SourceUnreadable(f"run {run_id}: the helper returned no observation")
        images = observation.get(IMAGES_KEY)
        if images:
            # Each PNG copied out of the reply once, here: that one copy is what the image
            # store keeps and what the kind's claim publishes (png_of copies bytes no
            # more); a view would pin the whole reply, its head's bytes too, for as long
            # as the scheduler keeps the read for the run's other kinds.
            observation[IMAGES_KEY] = {kind: bytes(png) for kind, png in images.items()}
        return observation

    def _stalled(self, record: RunRecord) -> bool:
        return trio.current_time() - record.changed_at >= self._stall_after

    def halt(self, run_id: int, job: int) -> bool:
        """Stop the work of ``run_id`` for its cancelled event-log run ``job`` (sync).

        The ``on_cancel`` of the event-log run (design §6.7); idempotent. Returns False
        (and does nothing) if ``job`` is not the run's current event-log run.
        """
        record = self._table.runs.get(run_id)
        if record is None or record.job != job:
            return False
        record.job_open = False  # nothing more is reported on it
        record.halted = frozenset({record.sched_revision, record.requested})
        for scope in self._inflight.get(run_id, ()):
            scope.cancel()
        LOGGER.info("run %d: cancelled (job %d)", run_id, job, extra={"run_id": run_id, "job": job})
        return True

    def halt_job(self, job: int) -> bool:
        """:meth:`halt` the measurement run whose event-log run is ``job``, if any."""
        record = self._table.run_of_job(job)
        return record is not None and self.halt(record.run_id, job)
