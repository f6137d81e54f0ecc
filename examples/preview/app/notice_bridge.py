"""NoticeBridge: the scheduler's notices drive the preview app (design §4, §6.6).

One task (:meth:`NoticeBridge.run`) reads the scheduler actor's notices, in order, and
for each measurement run updates its record, keeps its images and reports its lifecycle
on its event-log run:

=================  ==============================================================
notice             what the app does
=================  ==============================================================
``RunStarted``     ``job_started`` (an event-log run is opened first if none is),
                   unless the revision was cancelled while queued
``Published``      metadata: note the run's status, and keep the thumbnail the
                   read drew (design §5.4); thumbnail/preview: keep the PNG
                   (it is pushed to clients); then ``progress(kinds/3, kind)``
``Parked``         the run is being written: keep the live images its helper drew
                   with the partial read, ``progress(points/planned/3,
                   "being written: ...")``
``Failed``         keep the error record for the verdict
``Retrying``       logged
``Invalidated``    the run changed: a new revision; a new event-log run if the old
                   one is finished
``Settled``        ``job_finished`` with the verdict, unless a newer revision was
                   already asked for
=================  ==============================================================

An event-log call that fails (e.g. ``already_decided`` after a client cancelled the
run) is logged and skipped: a bad run never stops the bridge. A notice that changed a
run's ``run_list`` row marks the list for the next push.

Depends on the :class:`~examples.preview.app.runs.RunTable`,
:class:`~examples.preview.app.eventlog_runs.EventLogRuns`, the
:class:`~examples.preview.app.images.ImageStore` and
:class:`~examples.preview.app.live_images.LiveImages`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from actors import Failed, Invalidated, Parked, Published, Retrying, RunStarted, Settled
from actors.errors import ActorError

from ..child.draw import png_of
from .images import StoredImage
from .runs import KIND_COUNT

if TYPE_CHECKING:
    import trio

    from .eventlog_runs import EventLogRuns
    from .images import ImageStore
    from .live_images import LiveImages
    from .runs import RunRecord, RunTable

__all__ = ["NoticeBridge"]

LOGGER = logging.getLogger("examples.preview")


class NoticeBridge:
    """Applies the scheduler's notices to the runs (see the module docstring).

    Args:
        table: The runs.
        jobs: The runs' event-log runs.
        images: Where the drawn images are kept (and pushed from).
        live: Keeps the live images of runs being written.
    """

    def __init__(
        self, table: RunTable, jobs: EventLogRuns, images: ImageStore, live: LiveImages
    ) -> None:
        self._table = table
        self._jobs = jobs
        self._images = images
        self._live = live

    async def run(self, events: trio.MemoryReceiveChannel[Any]) -> None:
        """Handle every notice until the scheduler stops (closing ``events`` after)."""
        with events:
            async for notice in events:
                try:
                    await self.handle(notice)
                except ActorError as exc:  # e.g. already_decided: a client cancelled it
                    log = LOGGER.debug if exc.code == "already_decided" else LOGGER.warning
                    run_id = getattr(notice, "run_id", "?")
                    log(
                        "run %s: %s while handling %s",
                        run_id,
                        exc.code,
                        type(notice).__name__,
                        extra={"run_id": run_id, "code": exc.code},
                    )

    async def handle(self, notice: Any) -> None:
        """Apply one notice; a notice of an unknown run is ignored.

        Raises:
            ActorError: an event-log call failed (the record is updated as far as it got).
        """
        record = self._table.runs.get(getattr(notice, "run_id", -1))
        if record is None:
            return
        try:
            await self._apply(record, notice)
        finally:
            self._table.note_row(record)  # its run_list row may have changed

    async def _apply(self, record: RunRecord, notice: Any) -> None:
        if isinstance(notice, RunStarted):
            if notice.revision not in record.halted:  # else: cancelled while queued
                await self._jobs.start(record)
        elif isinstance(notice, Published):
            await self._on_published(record, notice)
        elif isinstance(notice, Parked):
            await self._on_parked(record, notice)
        elif isinstance(notice, Failed):
            record.errors[notice.kind] = notice.error
            LOGGER.info(
                "run %d: %s failed: %s",
                record.run_id,
                notice.kind,
                notice.error.message,
                extra={"run_id": record.run_id, "kind": notice.kind, "code": notice.error.code},
            )
        elif isinstance(notice, Retrying):
            LOGGER.info(
                "run %d: %s retry %d: %s",
                record.run_id,
                notice.kind,
                notice.attempt,
                notice.error.code,
                extra={"run_id": record.run_id, "kind": notice.kind, "code": notice.error.code},
            )
        elif isinstance(notice, Invalidated):
            record.reset_revision(notice.revision)
            if not record.job_open:
                await self._jobs.submit(record)
        elif isinstance(notice, Settled) and notice.revision == record.requested:
            await self._jobs.finish(record, notice.failed)  # else: a newer one is on its way

    async def _on_published(self, record: RunRecord, notice: Published) -> None:
        record.published.add(notice.kind)
        if notice.kind == "metadata":
            record.parked = False
            if isinstance(notice.result, dict) and record.note_observation(notice.result):
                self._table.list_changed = True
            # Pushed now, not when its own claim comes after every run's read; that
            # claim then publishes the same bytes, which the store ignores.
            thumbnail = png_of(notice.result, "thumbnail")
            if thumbnail is not None:
                self._images.put(
                    StoredImage(run_id=record.run_id, kind="thumbnail",
                                revision=record.number(notice.revision), data=thumbnail)
                )  # fmt: skip
        else:
            self._images.put(
                StoredImage(
                    run_id=record.run_id,
                    kind=notice.kind,
                    revision=record.number(notice.revision),
                    data=bytes(notice.result),
                )
            )
        await self._jobs.progress(record, len(record.published) / KIND_COUNT, notice.kind)

    async def _on_parked(self, record: RunRecord, notice: Parked) -> None:
        record.parked = True
        observation = notice.result
        if not isinstance(observation, dict) or notice.revision in record.halted:
            return  # a page that found nothing new, or a cancelled run: nothing to draw
        if record.note_observation(observation):
            self._table.list_changed = True
        token = str(observation.get("revision"))
        if token == record.live_token:
            return
        record.live_token = token
        self._live.keep(record, observation)
        points, planned = record.points()
        fraction = min(1.0, points / planned) / KIND_COUNT if planned else 0.0
        of = f" of {planned}" if planned else ""
        await self._jobs.progress(record, fraction, f"being written: {points}{of} points")
