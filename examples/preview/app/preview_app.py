"""PreviewApp: the live measurement-preview app, wired from its parts (design §7.2).

:class:`PreviewApp` ties the four system actors of :func:`actors.open_runtime` to one
QCoDeS database. It is the part of :mod:`examples.preview.server` that needs no
websocket, so tests drive it directly::

    identity = open_database("qcodes.db")             # SourceUnreadable if unusable
    app = PreviewApp(PreviewConfig(db="qcodes.db"), identity)
    async with open_runtime(app.runtime_config()) as runtime, app.running(runtime):
        app.handlers            # select / visible / list_runs / submit for a front door
        app.images              # the newest PNG per (run, kind)

**Runs and jobs.** Each measurement run is one event-log run (operation ``preview``,
arguments ``{"run_id": <database run id>}``), submitted at startup and for every run
that appears later. The scheduler (design §4) does the run's ``metadata`` (a helper job
``read_run``: the database is only ever opened inside helper processes, read-only),
then ``thumbnail`` (160 x 120) and ``preview`` (640 x 480), drawn in the helper
processes (design §5.4): the read draws the thumbnail, and a ``draw`` job the preview
from the read the first helper left in a handoff folder private to the app. Its
notices drive the event log (design §6.6): ``RunStarted`` → ``start``; each
``Published`` kind → ``progress`` (1/3, 2/3, 1, with the kind as note); ``Settled``
→ ``finish`` with the verdict ``ok``, ``empty``, ``interrupted``, ``incomplete`` or
``failed`` (with the error record) and a short metadata result
(:func:`examples.preview.app.runs.finish_result`). A run whose data changes after its
event-log run finished gets a new event-log run.

**Progressive runs** (design §4.5). ``is_completed = 0`` means the run is being
written: its metadata read returns :class:`actors.Progressive`, so the scheduler parks
it (nothing published or cached) and pages it every ``poll_interval`` seconds. Each
parked read with new rows is drawn at once by its helper as *live* images (with a status
band) and pushed with a new revision; its progress is ``points / planned / 3``. A
page finds nothing new without any I/O; a run that stays unchanged for ``stall_after``
seconds is published as it is, with verdict ``incomplete`` (the writer is gone).

**The parts.** Each part is one class, holding only what it needs. The runtime-free
ones are built with the app; the ones that talk to the runtime are built by
:meth:`PreviewApp.running`, where the runtime exists, each handed the runtime itself
(its actors' current incarnations) and the parts it depends on. From the bottom up,
each depends only on parts listed before it:

* :mod:`~examples.preview.app.config`: :class:`~examples.preview.app.config.PreviewConfig`,
  the settings;
* :mod:`~examples.preview.app.runs`: :class:`~examples.preview.app.runs.RunRecord`, one
  run's bookkeeping, its ``run_list`` row and its verdict, and the
  :class:`~examples.preview.app.runs.RunTable` of every run (no I/O);
* :mod:`~examples.preview.app.images`: :class:`~examples.preview.app.images.ImageStore`,
  the newest PNG per (run, kind), a :class:`~examples.preview.app.images.ClientPusher`
  per client, and the :class:`~examples.preview.app.images.DrawnViews` of ``draw``;
* :mod:`~examples.preview.app.selection`:
  :class:`~examples.preview.app.selection.Selection`, the selected and visible runs
  (``SetPriority``);
* :mod:`~examples.preview.app.revisions`:
  :class:`~examples.preview.app.revisions.Revisions`, asks the scheduler for new
  revisions (changed data, redraws);
* :mod:`~examples.preview.app.helper_jobs`:
  :class:`~examples.preview.app.helper_jobs.HelperJobs`, helper jobs, and the redraws
  after the runtime restarted a failed pool;
* :mod:`~examples.preview.app.live_images`:
  :class:`~examples.preview.app.live_images.LiveImages`, keeps the live images of runs
  being written;
* :mod:`~examples.preview.app.claim_runner`:
  :class:`~examples.preview.app.claim_runner.ClaimRunner`, the scheduler's claims, and
  halts cancelled runs;
* :mod:`~examples.preview.app.eventlog_runs`:
  :class:`~examples.preview.app.eventlog_runs.EventLogRuns`, each run's event-log run,
  from ``job_queued`` to ``job_finished``;
* :mod:`~examples.preview.app.notice_bridge`:
  :class:`~examples.preview.app.notice_bridge.NoticeBridge`, the scheduler's notices
  applied to records, images and event-log runs;
* :mod:`~examples.preview.app.run_views`:
  :class:`~examples.preview.app.run_views.RunViews`, the requests that look into one run,
  and :class:`~examples.preview.app.run_views.DataView`, a run's data to explore in the
  browser (design §7.7);
* :mod:`~examples.preview.app.connected_clients`:
  :class:`~examples.preview.app.connected_clients.Clients`, the connected clients'
  requests and image pushes;
* :mod:`~examples.preview.app.change_probe`:
  :class:`~examples.preview.app.change_probe.ChangeProbe`, new and changed runs in the
  database.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from actors import (
    POOL_EVENT_KINDS,
    EventLogConfig,
    HelperSpec,
    OperationSpec,
    PayloadCache,
    PoolConfig,
    RuntimeConfig,
    SchedulerConfig,
)

from ..child.drawing.image_kinds import RENDERER_VERSION
from ..child.qcodes.errors import SourceUnreadable
from ..child.qcodes.source import open_source
from .annotations import Annotations
from .change_probe import ChangeProbe
from .claim_runner import ClaimRunner
from .config import PreviewConfig
from .connected_clients import Clients
from .eventlog_runs import OPERATION, EventLogRuns
from .helper_jobs import HelperJobs
from .image_urls import database_id
from .images import DrawnViews, ImageRoute, ImageStore
from .live_images import LiveImages
from .notice_bridge import NoticeBridge
from .revisions import Revisions
from .run_views import DataView, RunViews
from .runs import RunTable
from .runtime_kinds import PREVIEW_KINDS
from .selection import Selection

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from actors import EventLogClient, Runtime, SchedulerJob

    from ...web.api import Handler
    from ...web.connection import Connection
    from ...web.routes import Route
    from .runs import RunRecord


__all__ = [
    "HELPER_PACKAGE",
    "OPERATION",
    "OPERATIONS",
    "POOL_EVENTS",
    "PreviewApp",
    "PreviewConfig",
    "helper_env",
    "open_database",
]

ROOT = Path(__file__).resolve().parents[3]
#: The helper child's package, under the name this package is imported by.
HELPER_PACKAGE = f"{__name__.rsplit('.', 2)[0]}.child"
#: The operations the preview server's event log accepts (design §6.2).
OPERATIONS = (
    OperationSpec(
        name=OPERATION, fields=frozenset({"run_id", "db"}), required=frozenset({"run_id"})
    ),
)

#: The helper pool's events the event log records (design §3.10): all but
#: ``job_started``, one per helper job (two per run), which no client of the preview
#: reads and which cost the server about 0.1 ms each to record and push.
POOL_EVENTS = POOL_EVENT_KINDS - {"job_started"}


def helper_env() -> dict[str, str]:
    """The helpers' variables on top of the server's environment.

    Their BLAS (numpy's OpenBLAS) runs on one thread unless the server's environment
    says otherwise: the pool is the parallelism, and a BLAS thread pool started at
    numpy's import would keep the helpers from being forked warm (design §3.17).

    Returns:
        ``OPENBLAS_NUM_THREADS`` and ``OMP_NUM_THREADS``: the server's values, else "1".
    """
    return {name: os.environ.get(name, "1") for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}


def open_database(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Check that ``path`` is a readable QCoDeS database; return its identity.

    Opens it read-only in this process for a moment (a validation only: runs are read
    by helper processes).

    Returns:
        ``path``, ``size_bytes``, ``run_count``, ``user_version``, ``source_id``.

    Raises:
        SourceUnreadable: (code ``source_unreadable``) missing, not SQLite, or no QCoDeS
            ``runs`` table; or its absolute path is not UTF-8 (reason ``path_not_utf8``:
            the helpers get it in JSON, design §3.9); ``details["reason"]`` says which.
    """
    try:
        os.fsencode(os.path.realpath(path)).decode("utf-8")  # what the helpers open
    except UnicodeDecodeError:
        raise SourceUnreadable(
            "the database's path is not UTF-8 (rename it)",
            path=os.fsencode(path).decode("utf-8", "replace"),
            reason="path_not_utf8",
        ) from None
    with open_source(path) as source:
        return source.identity()


class PreviewApp:
    """The preview server's logic: builds and wires the parts (see the module docstring).

    Args:
        config: The settings.
        identity: :func:`open_database`'s answer for ``config.db``.
    """

    def __init__(self, config: PreviewConfig, identity: dict[str, Any]) -> None:
        self.config = config
        self.identity = identity
        self.db_id = database_id(config.db)
        """The database's id in URLs and notices (design §7.5)."""
        self.images = ImageStore(db=self.db_id, preview_bytes=config.preview_bytes)
        """The newest image per (run, kind)."""
        self.views = DrawnViews()
        """The newest pictures of ``draw``, held for their URLs (design §7.6)."""
        self._handoff: Path | None = None
        self._table = RunTable()
        self._parts: _Parts | None = None

    # -- wiring -----------------------------------------------------------------------

    def runtime_config(self) -> RuntimeConfig:
        """The :class:`actors.RuntimeConfig` of this app.

        Builds the disk cache folder, and the helpers' handoff folder (a new private
        temporary folder, in ``cache_dir`` if set; :meth:`running` removes it).
        """
        config = self.config
        cache = None
        if config.cache_dir is not None:
            cache = PayloadCache(directory=Path(config.cache_dir) / "payloads")
            Path(config.cache_dir).mkdir(parents=True, exist_ok=True)
        if self._handoff is None:
            self._handoff = Path(tempfile.mkdtemp(prefix="handoff-", dir=config.cache_dir))
        options: dict[str, Any] = {
            "db": str(Path(config.db).resolve()),
            "handoff": str(self._handoff),
        }
        if config.helper_faults:
            options["faults"] = config.helper_faults
        return RuntimeConfig(
            helper=HelperSpec(
                entry=f"{HELPER_PACKAGE}.helper:main",
                options=options,
                cwd=str(ROOT),
                name="preview-helper",
                env=helper_env(),
            ),
            execute=self.execute,
            pool=PoolConfig(size=config.helpers, timeouts=config.helper_timeouts),
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
            pool_events=POOL_EVENTS,
            shutdown_grace=config.stop_grace,
        )

    @property
    def runtime(self) -> Runtime:
        """The running runtime.

        Raises:
            RuntimeError: before :meth:`running`.
        """
        return self._running.runtime

    @property
    def _running(self) -> _Parts:
        if self._parts is None:
            raise RuntimeError("the preview app is not running")
        return self._parts

    def _build(self, runtime: Runtime, eventlog: EventLogClient | None = None) -> _Parts:
        """Build the parts that talk to ``runtime`` (where the runtime exists)."""
        self._parts = _Parts(self, runtime, eventlog)
        return self._parts

    @asynccontextmanager
    async def running(
        self, runtime: Runtime, *, eventlog: EventLogClient | None = None
    ) -> AsyncIterator[PreviewApp]:
        """Serve the database with ``runtime`` for the duration of the block.

        Its runs are reported to ``eventlog``, default the runtime's own (a server of
        several databases shares one event log, design §7.5).

        Entering (a checkpoint) builds the parts that talk to the runtime, discards
        event-log runs of a previous session that the ledger held (they are submitted
        afresh), lists the runs through a helper, submits one event-log run per
        measurement run and hands the runs to the scheduler. Leaving cancels the app's
        tasks (the runtime is the caller's).

        Raises:
            ActorError: the run list could not be read (e.g. ``SourceUnreadable``).
        """
        parts = self._build(runtime, eventlog)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(parts.bridge.run, runtime.scheduler_events)
            await nursery.start(parts.clients.run)
            # One pending restart is enough: each one redraws every affected run.
            restarts = runtime.pool_events.subscribe(bound=1, kinds={"pool_restarted"})
            nursery.start_soon(parts.helpers.redraw_after_restarts, restarts)
            await parts.jobs.discard_held()
            await parts.probe.add_new(trio.current_time())
            await parts.revisions.reconcile([])
            nursery.start_soon(parts.probe.run)
            try:
                yield self
            finally:
                nursery.cancel_scope.cancel()
                if self._handoff is not None:
                    shutil.rmtree(self._handoff, ignore_errors=True)

    # -- what the server and the tests use ------------------------------------------------

    @property
    def routes(self) -> list[Route]:
        """Front-door HTTP routes: this database's images by URL (design §7.6)."""
        mine = {self.db_id: self}
        return [ImageRoute(mine.get).route()]

    @property
    def handlers(self) -> dict[str, Handler]:
        """Front-door handlers: ``list_runs``, ``select``, ``visible``, ``submit``, ``cancel``
        (:class:`~examples.preview.app.connected_clients.Clients`) and ``run_data``
        (:class:`~examples.preview.app.run_views.DataView`)."""
        return {**self._running.clients.handlers, **self._running.data.handlers}

    def on_disconnect(self, conn: Connection) -> None:
        """Stop the image pushes of a closed connection (a front-door hook)."""
        self._running.clients.on_disconnect(conn)

    async def execute(self, job: SchedulerJob, runtime: Runtime) -> Any:
        """The runtime's ``execute``: :meth:`ClaimRunner.execute
        <examples.preview.app.claim_runner.ClaimRunner.execute>`.

        Raises:
            WorkCancelled: (``work_cancelled``) a client cancelled the run.
            ActorError: the helper job or the drawing failed (classified, design §1.5).
        """
        return await self._running.claims.execute(job, runtime)

    async def helper_job(self, operation: str, payload: Any) -> Any:
        """Run one helper job: :meth:`HelperJobs.run_job
        <examples.preview.app.helper_jobs.HelperJobs.run_job>`.

        Raises:
            ActorError: as :meth:`actors.PoolHandle.run_job`.
        """
        return await self._running.helpers.run_job(operation, payload)

    def halt_job(self, job: int) -> bool:
        """Stop the work of the run whose event-log run ``job`` was cancelled (§6.7)."""
        return self._running.claims.halt_job(job)

    def stop_probing(self) -> None:
        """Stop looking for new and changed runs (at shutdown): a probe in flight is
        cancelled now, not when the app's tasks are (design §3.8)."""
        self._running.probe.stop()

    async def cancel_open(self, *, actor: str, waiting_only: bool = False) -> int:
        """Cancel the open event-log runs at shutdown: :meth:`EventLogRuns.cancel_open
        <examples.preview.app.eventlog_runs.EventLogRuns.cancel_open>`; how many."""
        return await self._running.jobs.cancel_open(actor=actor, waiting_only=waiting_only)

    @property
    def runs(self) -> dict[int, RunRecord]:
        """Every known run, by the database's run id."""
        return self._table.runs

    @property
    def selected(self) -> int | None:
        """The run a client selected, or None."""
        return self._running.selection.selected

    @property
    def visible(self) -> frozenset[int]:
        """The runs in the client's viewport."""
        return self._running.selection.visible

    @property
    def probes(self) -> int:
        """Change probes that succeeded."""
        return self._running.probe.probes


class _Parts:
    """The parts of a running app, each built with the runtime it talks to.

    From the bottom up, each depends only on parts built before it (the module
    docstring lists them).
    """

    def __init__(self, app: PreviewApp, runtime: Runtime, eventlog: EventLogClient | None) -> None:
        config = app.config
        table = app._table
        self.runtime = runtime
        self.selection = selection = Selection(runtime, ask_timeout=config.ask_timeout)
        self.revisions = revisions = Revisions(table, runtime, ask_timeout=config.ask_timeout)
        self.helpers = helpers = HelperJobs(runtime, revisions, job_timeout=config.job_timeout)
        self.live = live = LiveImages(app.images)
        self.claims = claims = ClaimRunner(table, helpers, stall_after=config.stall_after)
        self.jobs = jobs = EventLogRuns(runtime, table, claims, db=app.db_id, eventlog=eventlog)
        self.bridge = NoticeBridge(table, jobs, app.images, live)
        views = RunViews(table, helpers, app.views, db=app.db_id)
        self.clients = clients = Clients(
            table,
            selection,
            app.images,
            revisions,
            claims,
            push_timeout=config.push_timeout,
            views=views,
            notes=Annotations(config.db),
        )
        self.data = DataView(
            table, helpers, buckets=config.data_buckets, side=config.data_side,
            max_bytes=config.data_bytes,
        )  # fmt: skip
        self.probe = ChangeProbe(
            table, helpers, revisions, jobs, clients, poll_interval=config.poll_interval
        )
