"""The live measurement-preview app: the logic of the flagship example (design §7.2).

:class:`PreviewApp` ties the four system actors of :func:`actors.open_runtime` to one
QCoDeS database. It is the part of :mod:`examples.preview.server` that needs no
websocket, so tests drive it directly::

    identity = open_database("qcodes.db")             # SourceError if unusable
    app = PreviewApp(PreviewConfig(db="qcodes.db"), identity)
    async with open_runtime(app.runtime_config()) as runtime, app.running(runtime):
        app.handlers            # select / visible / list_runs / submit for a front door
        app.images              # the newest PNG per (run, kind)

**Runs and jobs.** Each measurement run is one event-log run (operation ``preview``,
arguments ``{"run_id": <database run id>}``), submitted at startup and for every run
that appears later. The scheduler (design §4) does the run's ``metadata`` (a helper job
``read_run``: the database is only ever opened inside helper processes, read-only),
then ``thumbnail`` (160 x 120) and ``preview`` (640 x 480) (the renderer draws them from
the cached observation in a worker thread, design §5). Its notices drive the event log
(design §6.6): ``RunStarted`` → ``start``; each ``Published`` kind → ``progress``
(1/3, 2/3, 1, with the kind as note); ``Settled`` → ``finish`` with the verdict
``ok``, ``empty``, ``interrupted``, ``incomplete`` or ``failed`` (with the error record)
and a short metadata result (:func:`examples.preview.runs.finish_result`). A run whose
data changes after its event-log run finished gets a new event-log run.

**Progressive runs** (design §4.5, issue 6). ``is_completed = 0`` means the run is being
written: its metadata read returns :class:`actors.Progressive`, so the scheduler parks
it (nothing published or cached) and pages it every ``poll_interval`` seconds. Each
parked read with new rows is drawn at once as *live* images (with the renderer's status
band) and pushed with a new revision; its progress is ``points / planned / 3``. A
page finds nothing new without any I/O; a run that stays unchanged for ``stall_after``
seconds is published as it is, with verdict ``incomplete`` (the writer is gone).

**Change detection.** Every ``poll_interval`` seconds a helper runs the cheap
``probe`` (``PRAGMA data_version``, and per run the highest row id, completion and
exception flags: no result data is read). A run whose change token moved gets
``SourceChanged`` (so its images are redrawn at a new revision); new runs are listed,
submitted and appended with ``Reconcile``; a run that became complete is read again
and finishes.

**Cancel and helper crashes** (design §6.7, §4.8; :mod:`examples.preview.work`). A
cancelled event-log run stops its measurement run's work in flight (helper read,
drawing) and the kinds still to do at that revision. A helper incarnation that ends
(crash, kill) is told to the scheduler (``HelperRestarted``), which fences the results
claimed under it. A pool that failed (restart intensity exceeded, ``pool_failed``) is
restarted after a backoff (:mod:`examples.web.pool_recovery`); the scheduler is then told
``HelperRestarted`` and the runs that failed with ``pool_failed`` are drawn again.

**Clients** (with :class:`examples.web.frontdoor.FrontDoor`): see :attr:`PreviewApp.handlers`.
``list_runs`` answers ``run_list`` and then pushes a ``payload`` for every image
already drawn, then each new one (:mod:`examples.preview.push`); ``select`` and
``visible`` become one atomic ``SetPriority`` (an unknown run id is an
``unknown_run`` error and changes nothing); ``submit`` of ``preview`` redraws a run.
"""

from __future__ import annotations

import logging
import os
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors import (
    EventLogConfig,
    HelperSpec,
    HelperTimeouts,
    OperationSpec,
    PayloadCache,
    PoolConfig,
    Reconcile,
    Render,
    RendererConfig,
    RunInfo,
    RuntimeConfig,
    SchedulerConfig,
    SourceChanged,
    count_field,
    duration_field,
)
from actors.errors import ActorError
from examples.preview.clients import OPERATION, ClientsMixin
from examples.preview.drawing.render import RENDERER_VERSION, render
from examples.preview.events import EventsMixin
from examples.preview.kinds import PNG_PAYLOADS, PREVIEW_KINDS
from examples.preview.push import ImageStore, StoredImage
from examples.preview.qcodes.source import open_source, revision
from examples.preview.runs import IMAGE_KINDS, RunRecord
from examples.preview.work import HelperWatch, WorkMixin
from examples.web.pool_recovery import PoolRecovery, RecoveryConfig
from protocol import messages

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from actors import Runtime


__all__ = ["OPERATION", "OPERATIONS", "PreviewApp", "PreviewConfig", "open_database"]

LOGGER = logging.getLogger("examples.preview")
ROOT = Path(__file__).resolve().parents[2]
#: The operations the preview server's event log accepts (design §6.2).
OPERATIONS = (
    OperationSpec(name=OPERATION, fields=frozenset({"run_id"}), required=frozenset({"run_id"})),
)
#: Run summaries per ``list_runs`` helper job.
_PAGE = 500


def _path(value: str | os.PathLike[str]) -> str:
    return os.fspath(value)


def _optional_path(value: str | os.PathLike[str] | None) -> str | None:
    return None if value is None else os.fspath(value)


@attrs.frozen(kw_only=True)
class PreviewConfig:
    """Settings of the preview app; validated at construction (design §1.6).

    Raises:
        ValueError: a count or duration is out of range; the message names it.
    """

    db: str = attrs.field(converter=_path)
    """The QCoDeS database (opened read-only, in helper processes only)."""
    helpers: int = count_field(2, minimum=1, maximum=32)
    """Helper processes reading the database (the scheduler runs helpers + 1 jobs)."""
    cache_dir: str | None = attrs.field(default=None, converter=_optional_path)
    """Folder of the on-disk payload cache (design §4.10); None: memory only."""
    ledger: str | None = attrs.field(default=None, converter=_optional_path)
    """SQLite ledger of the event log (design §6.10); None: in memory."""
    poll_interval: float = duration_field(0.5, allow_zero=False)
    """Seconds (trio clock) between change probes, and between pages of a parked run."""
    stall_after: float = duration_field(30.0, allow_zero=False)
    """Seconds (trio clock) an unfinished run may stay unchanged before it is reported
    as ``incomplete`` (its writer is gone); it is still watched."""
    job_timeout: float = duration_field(15.0, allow_zero=False)
    """Seconds (trio clock) a helper read or a drawing may take (design §4.7)."""
    ask_timeout: float = duration_field(5.0, allow_zero=False)
    """Seconds (trio clock) an ask of the scheduler may take."""
    push_timeout: float = duration_field(10.0, allow_zero=False)
    """Seconds (trio clock) an image push waits for room in a client's queue."""
    preview_bytes: int = count_field(64 * 1024 * 1024, minimum=0)
    """Previews kept for late clients, in bytes (thumbnails are all kept)."""
    render_threads: int = count_field(2, minimum=1, maximum=16)
    """Worker threads of the renderer (design §5.1)."""
    stop_grace: float = duration_field(2.0)
    """Seconds (trio clock) each actor gets to drain when the runtime closes."""
    max_inflight: int = count_field(4096, minimum=1)
    """Admission bound of the event log (design §6.5): at least the run count."""
    helper_timeouts: HelperTimeouts = attrs.field(
        factory=lambda: HelperTimeouts(
            startup=30.0, reply=15.0, cancel_grace=0.5, shutdown=0.4, terminate=0.3, kill=0.5
        )
    )
    """Helper deadlines (design §3.2); the startup imports numpy, so it is generous. The
    shutdown steps are short: a hung (e.g. stopped) helper is killed within about
    0.7 s, so the server still exits within its grace + 1 s."""
    pool_recovery: RecoveryConfig = attrs.field(
        factory=RecoveryConfig, validator=attrs.validators.instance_of(RecoveryConfig)
    )
    """How a failed helper pool is restarted (backoff 1 s doubling to 30 s, design §1.4,
    §3.7; :mod:`examples.web.pool_recovery`)."""
    helper_faults: dict[str, Any] | None = None
    """For tests only: the helpers' ``faults`` startup option (see
    :mod:`examples.preview.helper`), e.g. a read that crashes its helper once."""


def open_database(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Check that ``path`` is a readable QCoDeS database; return its identity.

    Opens it read-only in this process for a moment (a validation only: runs are read
    by helper processes).

    Returns:
        ``path``, ``size_bytes``, ``run_count``, ``user_version``, ``source_id``.

    Raises:
        SourceError: (code ``source_unreadable``) missing, not SQLite, or no QCoDeS
            ``runs`` table; ``details["reason"]`` says which.
    """
    with open_source(path) as source:
        return source.identity()


class PreviewApp(WorkMixin, EventsMixin, ClientsMixin):
    """The preview server's logic (see the module docstring).

    Args:
        config: The settings.
        identity: :func:`open_database`'s answer for ``config.db``.
    """

    def __init__(self, config: PreviewConfig, identity: dict[str, Any]) -> None:
        self.config = config
        self.push_timeout = config.push_timeout
        self.identity = identity
        self.runs: dict[int, RunRecord] = {}
        self.images = ImageStore(preview_bytes=config.preview_bytes)
        self.selected: int | None = None
        self.visible: frozenset[int] = frozenset()
        self._runtime: Runtime | None = None
        self._nursery: trio.Nursery | None = None
        self._live: dict[int, dict[str, Any]] = {}
        self._live_wake = trio.Event()
        self._list_dirty = False
        self._refreshes = 0
        self._closing = False
        self._priority_lock = trio.Lock()
        self.probes = 0
        self._probe_error: str | None = None  # the last failure logged, until one succeeds
        self._jobs: dict[int, int] = {}
        self._inflight: dict[int, set[trio.CancelScope]] = {}
        self._helper_watch = HelperWatch()
        self._helper_wake = trio.Event()
        self.helper_restarts = 0
        self.pool_recovery = PoolRecovery(
            self._restart_pool, config.pool_recovery, on_restarted=self._after_pool_restart
        )

    # -- wiring -----------------------------------------------------------------------

    def runtime_config(self) -> RuntimeConfig:
        """The :class:`actors.RuntimeConfig` of this app (builds the disk cache folder)."""
        config = self.config
        cache = None
        if config.cache_dir is not None:
            cache = PayloadCache(directory=Path(config.cache_dir) / "payloads")
        options: dict[str, Any] = {"db": str(Path(config.db).resolve())}
        if config.helper_faults:
            options["faults"] = config.helper_faults
        return RuntimeConfig(
            helper=HelperSpec(
                entry="examples.preview.helper:main",
                options=options,
                cwd=str(ROOT),
                name="preview-helper",
            ),
            render_fn=render,
            execute=self.execute,
            pool=PoolConfig(size=config.helpers, timeouts=config.helper_timeouts),
            renderer=RendererConfig(threads=config.render_threads, **PNG_PAYLOADS),
            scheduler=SchedulerConfig(
                kinds=PREVIEW_KINDS,
                workers=config.helpers + 1,
                job_deadline=config.job_timeout,
                page_interval=config.poll_interval,
            ),
            source=str(self.identity["source_id"]),
            payload_cache=cache,
            renderer_version=RENDERER_VERSION,
            eventlog=EventLogConfig(ledger_path=config.ledger, max_inflight=config.max_inflight),
            operations=OPERATIONS,
            shutdown_grace=config.stop_grace,
        )

    @property
    def runtime(self) -> Runtime:
        """The running runtime.

        Raises:
            RuntimeError: outside :meth:`running`.
        """
        if self._runtime is None:
            raise RuntimeError("the preview app is not running")
        return self._runtime

    @asynccontextmanager
    async def running(self, runtime: Runtime) -> AsyncIterator[PreviewApp]:
        """Serve the database with ``runtime`` for the duration of the block.

        Entering (a checkpoint) discards event-log runs of a previous session that the
        ledger held (they are submitted afresh), lists the runs through a helper,
        submits one event-log run per measurement run and hands the runs to the
        scheduler. Leaving cancels the app's tasks (the runtime is the caller's).

        Raises:
            ActorError: the run list could not be read (e.g. ``SourceError``).
        """
        self._runtime = runtime
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._pump_events, runtime.scheduler_events)
            self._helper_watch.update(await runtime.pool.snapshot())  # the baseline
            nursery.start_soon(self._watch_helpers)
            nursery.start_soon(self.pool_recovery.run)
            await self._discard_held()
            now = trio.current_time()
            for summary in await self._list_runs(after=0):
                self._register(summary, now)
            for record in self.runs.values():
                await self._submit(record)
            await self._ask(Reconcile(runs=self._infos()))
            nursery.start_soon(self._probe_loop)
            nursery.start_soon(self._live_renderer)
            try:
                yield self
            finally:
                nursery.cancel_scope.cancel()

    async def _ask(self, message: object) -> Any:
        return await self.runtime.scheduler.ask(message, timeout=self.config.ask_timeout)

    # -- the run table ------------------------------------------------------------------

    async def _list_runs(self, *, after: int) -> list[dict[str, Any]]:
        runs: list[dict[str, Any]] = []
        cursor: int | None = after
        while cursor is not None:
            page = await self.helper_job("list_runs", {"after": cursor, "limit": _PAGE})
            runs.extend(page["runs"])
            cursor = page["next_after"]
        return runs

    def _register(self, summary: dict[str, Any], now: float) -> RunRecord:
        run_id = int(summary["run_id"])
        token = str(summary.get("revision") or "new")
        record = RunRecord(
            run_id=run_id,
            guid=str(summary.get("guid") or f"run-{run_id}"),
            summary=summary,
            token=token,
            changed_at=now,
            sched_revision=token,
            requested=token,
        )
        record.number(token)
        self.runs[run_id] = record
        self._list_dirty = True
        return record

    def _infos(self, changed: Iterable[RunRecord] = ()) -> list[RunInfo]:
        moved = {r.run_id for r in changed}
        return [
            RunInfo(
                run_id=r.run_id, guid=r.guid, revision=r.token if r.run_id in moved else r.requested
            )
            for r in self.runs.values()
        ]

    async def _submit(self, record: RunRecord) -> None:
        """Open the event-log run of ``record`` (left for the next probe if refused)."""
        if self._closing:
            return
        try:
            receipt = await self.runtime.eventlog.submit(OPERATION, {"run_id": record.run_id})
        except ActorError as exc:
            LOGGER.warning("run %d: submit failed: %s", record.run_id, exc)
            return
        if receipt.run_id is not None:  # admitted (a refusal has no run)
            self.track_job(record, receipt.run_id)
        else:
            LOGGER.warning("run %d: not admitted (%s); retrying later", record.run_id, receipt.code)

    async def _discard_held(self) -> None:
        report = await self.runtime.eventlog.boot_report()
        for held in report.survivors:
            if held.operation == OPERATION:
                with suppress(ActorError):
                    await self.runtime.eventlog.discard(held.run_id, actor="preview_server")
        if report.survivors:
            LOGGER.info("discarded %d unfinished runs of a previous session", len(report.survivors))

    # -- change detection (issue 6) ------------------------------------------------------

    async def _probe_loop(self) -> None:
        while True:
            await trio.sleep(self.config.poll_interval)
            try:
                probe = await self.helper_job("probe", None)
                self.probes += 1
                if self._probe_error is not None:
                    LOGGER.warning("change probe works again")
                    self._probe_error = None
                await self.apply_probe(probe)
                for record in self.runs.values():
                    if record.job is None:
                        await self._submit(record)
            except ActorError as exc:
                # Logged once per distinct failure: a database that stays broken must not
                # print a line at every poll.
                if str(exc) != self._probe_error:
                    LOGGER.warning("change probe failed: %s", exc)
                    self._probe_error = str(exc)
            if self._list_dirty:
                self._list_dirty = False
                self._broadcast(messages.RunList(request_id=None, runs=self._summaries()))

    async def apply_probe(self, probe: dict[str, Any]) -> None:
        """Act on one probe result: new runs, changed runs, completed runs.

        Raises:
            ActorError: listing the new runs or telling the scheduler failed.
        """
        now = trio.current_time()
        changed: list[RunRecord] = []
        new = False
        for entry in probe.get("runs", ()):
            record = self.runs.get(entry[0])
            if record is None:
                new = True
                continue
            if record.note_probe(int(entry[1]), bool(entry[2])):
                self._list_dirty = True
            token = revision(entry)
            if record.note_token(token, now):
                record.number(token)
                changed.append(record)
        if new:
            known = max(self.runs, default=0)
            added = [self._register(s, now) for s in await self._list_runs(after=known)]
            for record in added:
                await self._submit(record)
            await self._ask_revisions(changed, Reconcile(runs=self._infos(changed)))
            LOGGER.info("new runs: %s", [r.run_id for r in added])
            return
        for record in changed:
            await self._ask_revisions(
                [record], SourceChanged(run_id=record.run_id, revision=record.token)
            )

    async def _ask_revisions(self, records: list[RunRecord], message: object) -> None:
        # ``requested`` is set before the ask: the notices of the old revision may be
        # read while the ask is in flight, and must already see the new one as wanted.
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

    # -- live images of runs being written (design §4.5) ------------------------------------

    def queue_live(self, record: RunRecord, observation: dict[str, Any]) -> None:
        """Draw ``observation`` (a parked read) as live images, newest read only."""
        self._live[record.run_id] = observation
        self._live_wake.set()

    async def _live_renderer(self) -> None:
        while True:
            if not self._live:
                self._live_wake = trio.Event()
                await self._live_wake.wait()
                continue
            run_id = self.selected if self.selected in self._live else next(iter(self._live))
            assert run_id is not None
            observation = self._live.pop(run_id)
            record = self.runs[run_id]
            number = record.number(str(observation.get("revision")))
            for kind in IMAGE_KINDS:
                deadline = trio.current_time() + self.config.job_timeout
                try:
                    rendered = await self.runtime.renderer.ask(
                        Render(observation=observation, kind=kind, deadline=deadline),
                        timeout=self.config.job_timeout + 1.0,
                    )
                except ActorError as exc:
                    LOGGER.warning("run %d: live %s failed: %s", run_id, kind, exc)
                    continue
                self.images.put(
                    StoredImage(
                        run_id=run_id, kind=kind, revision=number, data=rendered.data, live=True
                    )
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
        count = 0
        for record in self.runs.values():
            if record.job is None or not record.job_open:
                continue
            job = record.job
            if waiting_only and record.completed and not record.parked:
                with suppress(ActorError):
                    if (await self.runtime.eventlog.status(job)).state != "queued":
                        continue
                if not record.job_open or record.job != job:  # decided meanwhile
                    continue
            record.job_open = False
            with suppress(ActorError):
                status = await self.runtime.eventlog.cancel(job, actor)
                count += 1
                if status.state == "cancelled":
                    self.halt(record.run_id, job)  # a queued run has no on_cancel yet
        return count
