"""The preview app's work: the scheduler's claims, their cancellation, helper restarts.

Part of :class:`examples.preview.app.PreviewApp` (design §4, §6.7, §7.2).

**Claims.** :meth:`WorkMixin.execute` does one claim of the scheduler: ``metadata`` is a
helper job ``read_run`` (the database is only opened in helper processes), or
:class:`~actors.Progressive` for a run still being written; ``thumbnail`` and
``preview`` ask the renderer to draw the cached observation.

**Cancellation** (design §6.7). The event-log run of a measurement run is started with
``on_cancel`` (and a client's ``cancel`` goes through :meth:`WorkMixin.halt` too, so a
run cancelled while still queued stops as well). Halting a run marks the scheduler
revisions it was at as *halted* and cancels the run's claims in flight: a helper read
gets the supervisor's cancel ladder (design §3.5), a drawing gets
:class:`~actors.CancelRender`. Each such claim, and every later claim of a halted
revision, ends with :class:`~actors.errors.WorkCancelled` at once, without I/O: a
permanent failure, so the scheduler stops the run's remaining kinds and settles it.
Nothing more is reported on the cancelled event-log run (its ``job_cancelled`` is the
event log's, design §6.6). New data, or a ``submit`` of ``preview``, starts a new revision
and a new event-log run as usual.

**Helper restarts** (design §3.7, §4.8). Every helper job goes through
:meth:`WorkMixin.helper_job`. When one fails or is cancelled, the helper watch task
takes the pool's snapshot and compares it with the last one (:class:`HelperWatch`): a
helper incarnation that exited, or was replaced by a newer one, is a restart, and the
scheduler is told :class:`~actors.HelperRestarted` so that results claimed under the old
incarnation are fenced (dropped and claimed again, never published). Nothing polls: the
watch sleeps until a helper job fails.

**A failed pool** (design §1.4, §3.7). A helper job failing with
:class:`~actors.errors.PoolFailed` is noted by the app's
:class:`~examples.web.pool_recovery.PoolRecovery`, which restarts the pool once per failure
episode after a capped exponential backoff. After the restart the helper watch takes
the pool's snapshot (the retired incarnations are counted, not told twice), the
scheduler is told ``HelperRestarted`` once, and every run whose work failed with
``pool_failed`` is asked again at a new revision (as a client's ``submit`` would), so
its images are drawn once the database reads work again.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import trio

from actors import CancelRender, HelperRestarted, Progressive, Render, SourceChanged
from actors.errors import ActorError, SourceError, WorkCancelled

if TYPE_CHECKING:
    from actors import PoolSnapshot, Runtime, SchedulerJob
    from examples.preview.app import PreviewConfig
    from examples.preview.runs import RunRecord
    from examples.web.pool_recovery import PoolRecovery

__all__ = ["HelperWatch", "WorkMixin"]

LOGGER = logging.getLogger("examples.preview")


class HelperWatch:
    """Counts helper incarnations that ended, from successive pool snapshots (no I/O).

    Per pool slot it remembers the newest incarnation seen and whether its end was
    counted. The first snapshot is the baseline: nothing in it counts.
    """

    def __init__(self) -> None:
        self._slots: dict[int, tuple[int, bool]] = {}

    def update(self, snapshot: PoolSnapshot) -> int:
        """Take a snapshot; return how many incarnations ended since the last one.

        An incarnation ends when its process is seen exited, or when a newer
        incarnation of its slot is seen first; each end is counted once.
        """
        ended = 0
        for index, helper in enumerate(snapshot.helpers):
            if helper is None:
                continue
            seen = self._slots.get(index)
            if seen is None:
                self._slots[index] = (helper.incarnation, not helper.alive)
                continue
            incarnation, counted = seen
            if helper.incarnation > incarnation:
                ended += not counted  # it ended between two snapshots
                incarnation, counted = helper.incarnation, False
            if not helper.alive and not counted:
                ended += 1
                counted = True
            self._slots[index] = (incarnation, counted)
        return ended


class WorkMixin:
    """Claims, cancellation and helper restarts of :class:`~examples.preview.app.PreviewApp`."""

    config: PreviewConfig
    runs: dict[int, RunRecord]
    _live: dict[int, dict[str, Any]]
    _list_dirty: bool
    _jobs: dict[int, int]
    _inflight: dict[int, set[trio.CancelScope]]
    _helper_watch: HelperWatch
    _helper_wake: trio.Event
    helper_restarts: int
    """Helper incarnations seen ending (each one told to the scheduler)."""
    pool_recovery: PoolRecovery
    """Restarts the pool after it failed (see the module docstring)."""
    _refreshes: int

    @property
    def runtime(self) -> Runtime:  # provided by PreviewApp
        raise NotImplementedError

    async def _ask(self, message: object) -> Any:  # provided by PreviewApp
        raise NotImplementedError

    # -- claims (design §4) -----------------------------------------------------------------

    async def execute(self, job: SchedulerJob, runtime: Runtime) -> Any:
        """Do one claim: read the run (metadata) or draw it (thumbnail, preview).

        Returns:
            The observation (metadata), :class:`~actors.Progressive` for a run still
            being written, or PNG bytes.

        Raises:
            WorkCancelled: (``work_cancelled``) a client cancelled the run (see
                :meth:`halt`).
            ActorError: the helper job or the drawing failed (classified, design §1.5).
        """
        claim = job.claim
        record = self.runs.get(claim.run_id)
        if record is not None and claim.revision in record.halted:
            raise WorkCancelled(f"run {claim.run_id}: its preview was cancelled")
        scopes = self._inflight.setdefault(claim.run_id, set())
        with trio.CancelScope() as scope:
            scopes.add(scope)
            try:
                return await self._claim(job, runtime, record)
            finally:
                scopes.discard(scope)
                if not scopes:
                    self._inflight.pop(claim.run_id, None)
        raise WorkCancelled(f"run {claim.run_id}: its preview was cancelled while running")

    async def _claim(self, job: SchedulerJob, runtime: Runtime, record: RunRecord | None) -> Any:
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
        observation = job.observation
        if observation is None:  # evicted from the observation cache: read again
            observation = await self._read(claim.run_id)
        job_id = ("preview-claim", claim.claim_id)
        try:
            rendered = await runtime.renderer.ask(
                Render(observation=observation, kind=claim.kind, deadline=claim.deadline,
                       job_id=job_id),
                timeout=self.config.job_timeout + 1.0,
            )  # fmt: skip
        except trio.Cancelled:  # halted, stale or past its deadline: stop the drawing
            with suppress(ActorError):
                runtime.renderer.try_send(CancelRender(job_id=job_id))
            raise
        return rendered.data

    async def _read(self, run_id: int) -> dict[str, Any]:
        observation = await self.helper_job("read_run", {"run_id": run_id})
        if not isinstance(observation, dict):
            raise SourceError(f"run {run_id}: the helper returned no observation")
        return observation

    def _stalled(self, record: RunRecord) -> bool:
        return trio.current_time() - record.changed_at >= self.config.stall_after

    async def helper_job(self, operation: str, payload: Any) -> Any:
        """Run one helper job (within ``job_timeout`` seconds); watch for restarts.

        Raises:
            ActorError: as :meth:`actors.PoolHandle.run_job`.
        """
        done = False
        try:
            result = await self.runtime.pool.run_job(
                operation, payload, timeout=self.config.job_timeout
            )
            done = True
            return result
        except ActorError as exc:
            self.pool_recovery.note(exc)  # a PoolFailed starts a recovery episode
            raise
        finally:
            if not done:  # failed or cancelled: its helper may be gone
                self._helper_wake.set()

    # -- cancellation (design §6.7) -----------------------------------------------------------

    def track_job(self, record: RunRecord, job: int) -> None:
        """``job`` is the new event-log run reporting ``record`` (it is queued)."""
        if record.job is not None:
            self._jobs.pop(record.job, None)
        record.job, record.job_open = job, True
        self._jobs[job] = record.run_id
        self._list_dirty = self._list_dirty or record.relisted()

    def halt(self, run_id: int, job: int) -> bool:
        """Stop the work of ``run_id`` for its cancelled event-log run ``job`` (sync).

        The ``on_cancel`` of the event-log run (design §6.7); idempotent. Returns False
        (and does nothing) if ``job`` is not the run's current event-log run.
        """
        record = self.runs.get(run_id)
        if record is None or record.job != job:
            return False
        record.job_open = False  # nothing more is reported on it
        record.halted = frozenset({record.sched_revision, record.requested})
        self._live.pop(run_id, None)
        for scope in self._inflight.get(run_id, ()):
            scope.cancel()
        LOGGER.info("run %d: cancelled (job %d)", run_id, job)
        return True

    def halt_job(self, job: int) -> bool:
        """:meth:`halt` the measurement run whose event-log run is ``job``, if any."""
        run_id = self._jobs.get(job)
        return run_id is not None and self.halt(run_id, job)

    # -- helper restarts (design §3.7, §4.8) ----------------------------------------------------

    async def _watch_helpers(self) -> None:
        """Tell the scheduler about every helper incarnation that ended (see module doc)."""
        while True:
            await self._helper_wake.wait()
            self._helper_wake = trio.Event()
            try:
                snapshot = await self.runtime.pool.snapshot(timeout=self.config.ask_timeout)
                ended = self._helper_watch.update(snapshot)
                if ended:
                    self.helper_restarts += ended
                    LOGGER.info("%d helper incarnation(s) ended: fencing their results", ended)
                    await self._ask(HelperRestarted())
            except ActorError as exc:
                LOGGER.warning("helper watch: %s", exc)

    async def _restart_pool(self, *, timeout: float) -> None:  # noqa: ASYNC109
        await self.runtime.pool.restart(timeout=timeout)

    async def _after_pool_restart(self) -> None:
        """The pool was restarted: fence old results, draw ``pool_failed`` runs again.

        Raises:
            ActorError: the snapshot or an ask of the scheduler failed.
        """
        snapshot = await self.runtime.pool.snapshot(timeout=self.config.ask_timeout)
        self.helper_restarts += self._helper_watch.update(snapshot)
        await self._ask(HelperRestarted())
        for record in list(self.runs.values()):
            if not any(error.code == "pool_failed" for error in record.errors.values()):
                continue
            self._refreshes += 1
            record.requested = f"{record.token}~r{self._refreshes}"
            await self._ask(SourceChanged(run_id=record.run_id, revision=record.requested))
        LOGGER.info("helper pool restarted: results fenced, failed runs asked again")
