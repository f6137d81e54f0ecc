"""The preview app's bridge from the scheduler's notices to the event log (design §4, §6.6).

One task reads the scheduler actor's notices, in order, and reports each measurement
run's lifecycle on its event-log run:

=================  ==============================================================
notice             what the app does
=================  ==============================================================
``RunStarted``     ``start(job, on_cancel=halt)`` (``job_started``)
``Published``      metadata: note the run's status; thumbnail/preview: keep the PNG
                   and push it to clients; then ``progress(job, kinds/3, kind)``
``Parked``         the run is being written: draw the partial read as live images,
                   ``progress(job, points/planned/3, "being written: ...")``
``Failed``         keep the error record for the verdict
``Invalidated``    the run changed: a new revision; a new event-log run if the old
                   one is finished
``Settled``        ``finish(job, verdict, result)`` (``job_finished``), unless a newer
                   revision was already asked for
=================  ==============================================================

An event-log call that fails (e.g. ``already_decided`` after a client cancelled the
run) is logged and skipped: a bad run never stops the bridge.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from actors import Failed, Invalidated, Parked, Published, Retrying, RunStarted, Settled
from actors.errors import ActorError
from examples.preview.push import StoredImage
from examples.preview.runs import KIND_COUNT, RunRecord, finish_result, verdict_of

if TYPE_CHECKING:
    import trio

    from actors import Runtime
    from examples.preview.push import ImageStore

__all__ = ["EventsMixin"]

LOGGER = logging.getLogger("examples.preview")


class EventsMixin:
    """The notice handlers of :class:`examples.preview.app.PreviewApp`."""

    runs: dict[int, RunRecord]
    images: ImageStore
    _list_dirty: bool

    @property
    def runtime(self) -> Runtime:  # provided by PreviewApp
        raise NotImplementedError

    async def _submit(self, record: RunRecord) -> None:  # provided by PreviewApp
        raise NotImplementedError

    def queue_live(self, record: RunRecord, observation: dict[str, Any]) -> None:
        raise NotImplementedError  # provided by PreviewApp

    def halt(self, run_id: int, job: int) -> bool:
        raise NotImplementedError  # provided by WorkMixin

    async def _pump_events(self, events: trio.MemoryReceiveChannel[Any]) -> None:
        """Read every notice until the scheduler stops (closing the channel after)."""
        with events:
            async for notice in events:
                try:
                    await self._on_notice(notice)
                except ActorError as exc:  # e.g. already_decided: a client cancelled it
                    log = LOGGER.debug if exc.code == "already_decided" else LOGGER.warning
                    log(
                        "run %s: %s while handling %s",
                        getattr(notice, "run_id", "?"),
                        exc.code,
                        type(notice).__name__,
                    )

    async def _on_notice(self, notice: Any) -> None:
        record = self.runs.get(getattr(notice, "run_id", -1))
        if record is None:
            return
        try:
            await self._apply(record, notice)
        finally:
            if record.relisted():  # its run_list row changed: push the list (≤ a poll)
                self._list_dirty = True

    async def _apply(self, record: RunRecord, notice: Any) -> None:
        if isinstance(notice, RunStarted):
            if notice.revision in record.halted:
                return  # cancelled while queued: no new event-log run for it
            if record.job is None or not record.job_open:
                await self._submit(record)
            if record.job is not None and record.job_open:
                on_cancel = functools.partial(self.halt, record.run_id, record.job)
                await self.runtime.eventlog.start(record.job, on_cancel=on_cancel)
        elif isinstance(notice, Published):
            await self._on_published(record, notice)
        elif isinstance(notice, Parked):
            await self._on_parked(record, notice)
        elif isinstance(notice, Failed):
            record.errors[notice.kind] = notice.error
            LOGGER.info("run %d: %s failed: %s", record.run_id, notice.kind, notice.error.message)
        elif isinstance(notice, Retrying):
            LOGGER.info(
                "run %d: %s retry %d: %s",
                record.run_id,
                notice.kind,
                notice.attempt,
                notice.error.code,
            )
        elif isinstance(notice, Invalidated):
            record.reset_revision(notice.revision)
            if not record.job_open:
                await self._submit(record)
        elif isinstance(notice, Settled):
            await self._on_settled(record, notice)

    async def _progress(self, record: RunRecord, fraction: float, note: str) -> None:
        if record.job is not None and record.job_open:
            await self.runtime.eventlog.progress(record.job, min(1.0, fraction), note)

    async def _on_published(self, record: RunRecord, notice: Published) -> None:
        record.published.add(notice.kind)
        if notice.kind == "metadata":
            record.parked = False
            if isinstance(notice.result, dict) and record.note_observation(notice.result):
                self._list_dirty = True
        else:
            self.images.put(
                StoredImage(
                    run_id=record.run_id,
                    kind=notice.kind,
                    revision=record.number(notice.revision),
                    data=bytes(notice.result),
                )
            )
        await self._progress(record, len(record.published) / KIND_COUNT, notice.kind)

    async def _on_parked(self, record: RunRecord, notice: Parked) -> None:
        record.parked = True
        observation = notice.result
        if not isinstance(observation, dict) or notice.revision in record.halted:
            return  # a page that found nothing new, or a cancelled run: nothing to draw
        if record.note_observation(observation):
            self._list_dirty = True
        token = str(observation.get("revision"))
        if token == record.live_token:
            return
        record.live_token = token
        self.queue_live(record, observation)
        points, planned = record.points()
        fraction = min(1.0, points / planned) / KIND_COUNT if planned else 0.0
        of = f" of {planned}" if planned else ""
        await self._progress(record, fraction, f"being written: {points}{of} points")

    async def _on_settled(self, record: RunRecord, notice: Settled) -> None:
        if notice.revision != record.requested:
            return  # a newer revision is on its way: the run is not done yet
        if record.job is None or not record.job_open:
            return
        verdict, error = verdict_of(record, notice.failed)
        result = finish_result(record, notice.failed)
        record.job_open = False
        await self.runtime.eventlog.finish(
            record.job, verdict, result, error=None if error is None else error.to_dict()
        )
        LOGGER.info("run %d: %s (job %d)", record.run_id, verdict, record.job)
