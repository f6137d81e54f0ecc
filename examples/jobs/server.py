"""A generic job server: jobs run in supervised helper processes, over websocket (design §7).

The second example server. Its operations run in helper processes
(:mod:`examples.jobs.helper`) supervised by the pool actor (design §3); the
event log (design §6) admits them, runs them with its built-in drain (one runner per
operation, at most ``helpers`` at once) and pushes their lifecycle to clients through
the websocket front door (:mod:`examples.web.frontdoor`, design §7.1):

==================  ===================  ==============================================
operation           arguments            what it shows
==================  ===================  ==============================================
``hash_file``       ``{"path": str}``    a result (``sha256``, ``size``) with progress,
                                         for a file inside ``--files-root``
``count_primes``    ``{"limit": int}``   a long computation: progress, then ``cancel``
                                         stops it cooperatively (design §3.5 step 1)
``sleep``           ``{"seconds": n}``   a long job that costs no CPU
``crash``           ``{}``               the helper exits: the run fails with
                                         ``helper_exited``, the next job gets a fresh
                                         helper incarnation (another ``pid``, §3.7)
==================  ===================  ==============================================

The pool actor and the event log run under a supervision tree
(:mod:`examples.jobs.tree`, design §7.1), which the Observer shows (``/observer``, design
§7.8). More than ``max_restarts`` helper crashes within ``restart_period`` seconds fail
the pool (its escalation, design §1.4, §3.7): its actor fails, and its supervisor,
``services``, restarts it after a capped exponential backoff (``pool_backoff``); jobs
caught by the failure fail with the transient ``pool_restarting``.

``hash_file`` reads only inside the files root (``--files-root DIR``, default the
directory the server was started in): the path, relative to the root or absolute, is
resolved (symlinks, ``..``) and anything outside is refused at ``submit`` with one
``invalid_command`` that does not say whether the path exists (design §7.3); the helper
checks again on the file it opened.

Every result has the ``pid`` of the helper that ran it. Run it::

    python -m examples.jobs.server [--host 127.0.0.1] [--port 8766] [--ledger PATH|URL]
        [--token T | --no-token] [--allow-origin ORIGIN] [--allow-host HOST]
        [--max-per-address N] [--max-pending N] [--files-root DIR] [--helpers N]
        [--grace S] [--cluster] [--cluster-lease S] [-v]

It binds its port first of all, and prints ``listening on ws://HOST:PORT/?token=T``
once ready (a fresh random token each start unless ``--token`` gives one or
``--no-token`` opts out, loopback only); it also writes that address to a runtime file
only its user can read, where ``python -m examples.jobs.client`` finds the token
(:mod:`examples.web.serverinfo`, design §7.3).
SIGINT/SIGTERM shut it down gracefully: no new work, up to ``--grace`` seconds for
running jobs, websockets closed with code 1001, every helper reaped. With ``--ledger``,
runs survive a restart: unfinished ones are listed by ``boot_report`` and wait for
``resume``/``discard``; at start the server prints how many runs it holds from before
and how to decide them, and at a graceful shutdown which runs it leaves held
(:mod:`examples.web.held`). ``--ledger`` takes a SQLite file, or a ``postgresql://`` URL
for a PostgreSQL ledger (the same runs, events and refusals; docs/cluster.rst); with
``--cluster`` several job servers share that PostgreSQL ledger: a job submitted to any
of them runs once, on any node's helpers, and every node's clients see every node's
events in one order (docs/cluster.rst). A bad
option, a port in use or a ledger the event log refuses (``ledger_corrupt``: damage,
named by table, key and column, and the file is left byte-identical, design §6.11; a
foreign or newer schema, ``ledger_error``/``ledger_version_unsupported``): one line on
stderr and exit status 2; a helper failure: one line and status 1.

Progress: each helper handler reports ``ctx.progress(fraction)``; the pool actor hands
the progress frames to the runner's callback (design §3.9), which reports them to the
event log (``job_progress`` events pushed to subscribed clients).
"""

from __future__ import annotations

from ..preview.cli import quiet_start

# Ctrl-C while the modules below load: no traceback (main() gives Ctrl-C back).
quiet_start.install(__name__, "trio-actors-jobs")

import contextlib
import functools
import logging
import os
import signal
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors import (
    POOL_EVENT_KINDS,
    Backoff,
    ChildSpec,
    EventLogActor,
    EventLogClient,
    EventLogConfig,
    HelperSpec,
    HelperTimeouts,
    LiveChild,
    OperationSpec,
    PoolActor,
    PoolConfig,
    PoolEvents,
    PoolHandle,
    count_field,
    duration_field,
)
from actors.errors import ActorError, InvalidCommand, LedgerError
from actors.metrics import Lifecycle, RuntimeMetrics

from ..web.api import BUILTIN_HANDLERS
from ..web.cli import OneLineParser, count, describe, leaf
from ..web.frontdoor import FrontDoor, FrontDoorConfig, open_front_door
from ..web.held import held_at_start, left_held
from ..web.launch import add_server_options, announce, front_door_config, listening
from ..web.observer import observability
from ..web.serverinfo import info_file
from ..web.signals import shutdown_on_signal
from .helper import MAX_LIMIT, MAX_SLEEP, OUTSIDE_ROOT, resolve_inside
from .tree import STRATEGIES, build_tree, started_or_root_cause

if TYPE_CHECKING:
    import socket
    from collections.abc import AsyncIterator, Callable, Sequence

    from actors import ActorRef, HelperPool, RunStatus, SupervisorEvent, SupervisorRef
    from protocol import messages

    from ..web.api import Handler
    from ..web.connection import Connection

__all__ = [
    "OPERATIONS",
    "JobRuntime",
    "JobServer",
    "JobServerConfig",
    "HelperRunner",
    "main",
    "open_job_runtime",
    "open_job_server",
    "serve_jobs",
    "submit_handler",
]

LOGGER = logging.getLogger("examples.jobs.server")
ROOT = Path(__file__).resolve().parents[2]
#: The job server's TCP port unless ``--port`` says otherwise (also the client's default).
DEFAULT_PORT = 8766
#: Seconds (trio clock) a client's closing handshake may take: short, so a client that
#: does not read cannot push the exit past grace + 1 s.
CLOSE_TIMEOUT = 0.25
#: Seconds (trio clock) an actor's start may take (the event log's boot reads its
#: ledger; a loaded machine is slow), the pool's the helpers' startup timeout more.
START_TIMEOUT = 60.0
#: The job server's operations and their argument schemas (design §6.2).
OPERATIONS = (
    OperationSpec(name="hash_file", fields={"path"}, required={"path"}),
    OperationSpec(name="count_primes", fields={"limit"}, required={"limit"}),
    OperationSpec(name="sleep", fields={"seconds"}, required={"seconds"}),
    OperationSpec(name="crash"),
)


def _files_root(value: object) -> Path:
    """``files_root`` resolved; a directory that exists."""
    if not isinstance(value, str | os.PathLike):
        raise ValueError(f"files_root must be a path, got {value!r}")
    root = Path(value).resolve()
    if not root.is_dir():
        raise ValueError(f"files_root must be an existing directory, got {str(value)!r}")
    return root


def _cluster(config: JobServerConfig, value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"cluster must be a bool, got {value!r}")
    if value and not (config.ledger or "").startswith(("postgresql://", "postgres://")):
        raise ValueError("--cluster needs a --ledger postgresql:// URL (docs/cluster.rst)")


@attrs.frozen(kw_only=True)
class JobServerConfig:
    """Settings of the job server; validated at construction (design §1.6).

    Raises:
        ValueError: a field is out of range; the message names it.
    """

    front_door: FrontDoorConfig = attrs.field(
        factory=lambda: FrontDoorConfig(port=DEFAULT_PORT, close_timeout=CLOSE_TIMEOUT)
    )
    """Where and how the websocket front door listens."""
    ledger: str | None = None
    """The ledger (design §6.10): a SQLite file or a ``postgresql://`` URL (docs/cluster.rst);
    None keeps runs in memory only."""
    cluster: bool = attrs.field(
        default=False, validator=lambda self, _, value: _cluster(self, value)
    )
    """Share ``ledger`` (a ``postgresql://`` URL) with other job servers: one cluster
    (docs/cluster.rst)."""
    cluster_lease: float = duration_field(10.0, allow_zero=False, maximum=30.0)
    """Seconds a cluster node's lease lasts (database clock; docs/cluster.rst)."""
    helpers: int = count_field(2, minimum=1, maximum=64)
    """Helper processes, and jobs run at once."""
    grace: float = duration_field(5.0)
    """Seconds (trio clock) running jobs get to finish after SIGINT/SIGTERM."""
    job_timeout: float = duration_field(120.0, allow_zero=False)
    """Seconds (trio clock) one job may take before its helper is stopped (design §3.6)."""
    stop_grace: float = duration_field(0.5)
    """Seconds (trio clock) each actor gets to drain when the server stops."""
    helper_timeouts: HelperTimeouts = attrs.field(
        factory=lambda: HelperTimeouts(
            startup=10.0, reply=120.0, cancel_grace=0.3, shutdown=0.5, terminate=0.3, kill=0.5
        )
    )
    """Helper deadlines (design §3.2); short ladder steps keep shutdown within grace + 1 s."""
    max_restarts: int = count_field(5, minimum=0)
    """Helper replacements allowed within ``restart_period`` before the pool fails
    (restart intensity, design §1.4)."""
    restart_period: float = duration_field(10.0, allow_zero=False)
    """Sliding window of the restart intensity, in seconds (trio clock)."""
    pool_backoff: Backoff = attrs.field(
        factory=lambda: Backoff(base=1.0, cap=30.0, reset_after=60.0),
        validator=attrs.validators.instance_of(Backoff),
    )
    """Seconds (trio clock) the tree waits before restarting a failed actor, a pool past
    its restart intensity first of all: 1 s doubling to 30 s, back to 1 s after a quiet
    minute (design §1.4, §3.7; :mod:`examples.jobs.tree`)."""
    tree_max_restarts: int = count_field(10, minimum=0)
    """Restarts each supervisor of the tree allows within ``tree_restart_period``; one
    more and it gives up (design §1.4). With the default backoff a pool that keeps
    failing is retried every 30 s without ever exceeding it."""
    tree_restart_period: float = duration_field(60.0, allow_zero=False)
    """The intensity window of the tree's supervisors, in seconds (trio clock); also
    the Observer's window for a child's restarts."""
    files_root: Path = attrs.field(factory=Path.cwd, converter=_files_root)
    """The directory ``hash_file`` may read inside (resolved; default: the current
    directory when the config is made), design §7.3."""


class HelperRunner:
    """The event log's runner for every job operation: one helper job per run (design §6.6).

    ``await runner(run, report)`` runs ``run.operation`` on a helper with the run's
    arguments, reports the helper's progress frames to the event log, and returns the
    helper's result. A failed job raises its error (the event log records a failed
    completion, verdict ``NOT_RUN``); a cancelled run cancels the helper job (the
    pool's escalation ladder, design §3.5).

    Args:
        pool: The pool actor's handle.
        job_timeout: Seconds (trio clock) a job may take, escalation included.
        files_root: Given to ``hash_file`` jobs as their ``root`` (design §7.3).
    """

    def __init__(
        self,
        pool: PoolHandle,
        *,
        job_timeout: float,
        files_root: Path | None = None,
    ) -> None:
        self.pool = pool
        self.job_timeout = job_timeout
        self.files_root = files_root if files_root is not None else Path.cwd()

    async def __call__(self, run: RunStatus, report: Callable[..., None]) -> Any:
        """Run one job; see the class docstring.

        Raises:
            ActorError: what the job failed with, e.g. ``HelperExited``
                (``helper_exited``), ``JobFailed`` (the handler's code, e.g.
                ``source_unreadable``), ``ReplyTimeout`` (``reply_timeout``),
                ``PoolRestarting`` (``pool_restarting``: the pool failed and is being
                restarted).
        """

        def on_progress(fraction: float, note: str | None) -> None:
            with contextlib.suppress(ActorError):  # already_decided: cancelled meanwhile
                report(fraction, note)

        arguments = dict(run.arguments)
        if run.operation == "hash_file":  # the helper checks the path against it again
            arguments["root"] = str(self.files_root)
        return await self.pool.run_job(
            run.operation,
            arguments,
            timeout=self.job_timeout,
            on_progress=on_progress,
        )


class JobRuntime:
    """The job server's actors under their supervision tree; made by
    :func:`open_job_runtime` only (the tree: :mod:`examples.jobs.tree`).

    Each handle follows its actor across restarts (design §1.7): read ``runtime.x``
    each time rather than keeping what it returned.
    """

    def __init__(self, config: JobServerConfig) -> None:
        self.config = config
        timeouts = attrs.evolve(config.helper_timeouts, reply=config.job_timeout)
        self._pool_config = PoolConfig(
            size=config.helpers,
            timeouts=timeouts,
            max_restarts=config.max_restarts,
            restart_period=config.restart_period,
        )
        self.pool_events = PoolEvents(helper_spec().name)
        """The pool's events across its restarts (design §3.10): subscribe to follow
        its helpers and its escalations (``intensity_exceeded``, ``pool_restarted``)."""
        self._pool: LiveChild[PoolActor] = LiveChild("pool")
        self._eventlog: LiveChild[EventLogActor] = LiveChild("event_log")
        self.pool = PoolHandle(self._pool)
        """The pool actor's handle (design §3): ``snapshot()`` shows the helpers."""
        self._runner = HelperRunner(
            self.pool,
            job_timeout=config.job_timeout + timeouts.ladder + 1.0,
            files_root=config.files_root,
        )
        self.metrics = _metrics(self)
        """The actors' Prometheus metrics (:mod:`actors.metrics`) and the tree's
        lifecycle, served at ``/metrics`` and ``/observer``."""
        grace = config.stop_grace
        # The pool starts once its helpers are ready, each within the startup timeout.
        pool_start = timeouts.startup + START_TIMEOUT
        self.tree = build_tree(
            pool=ChildSpec("pool", self._new_pool, shutdown=grace, start_timeout=pool_start),
            event_log=ChildSpec("event_log", self._new_event_log, shutdown=grace,
                                start_timeout=START_TIMEOUT),
            max_restarts=config.tree_max_restarts,
            period=config.tree_restart_period,
            backoff=config.pool_backoff,
            on_event=self._on_event,
        )  # fmt: skip
        self._client: EventLogClient | None = None

    def _new_pool(self) -> PoolActor:
        actor = PoolActor(
            helper_spec(), self._pool_config, events=self.pool_events, on_failure="escalate"
        )
        return self._pool.made(actor)

    def _new_event_log(self) -> EventLogActor:
        config = self.config
        log_config = EventLogConfig(
            ledger_path=config.ledger,
            max_concurrency=config.helpers,
            cluster=config.cluster,
            cluster_lease=config.cluster_lease,
        )
        runners = {op.name: self._runner for op in OPERATIONS}
        actor = EventLogActor(log_config, operations=OPERATIONS, runners=runners)
        return self._eventlog.made(actor)

    def _on_event(self, event: SupervisorEvent) -> None:
        self._pool.on_event(event)
        self._eventlog.on_event(event)
        self.metrics.on_supervisor_event(event)
        log = self._eventlog.instance
        if event.kind == "child_started" and event.child == "event_log" and log is not None:
            self.metrics.attach_event_log(log.log)  # each incarnation's own log

    @property
    def supervisor(self) -> SupervisorRef:
        """The root of the tree (design §1.7): ``which_children``, ``restarts``."""
        return self.tree.ref

    @property
    def eventlog(self) -> EventLogClient:
        """The event log's client, for its current incarnation (its last one while it
        restarts; design §6)."""
        ref = self._eventlog.ref or self._eventlog.last_ref
        if ref is None:
            raise RuntimeError("the event log has not started")
        if self._client is None or self._client.ref is not ref:
            self._client = EventLogClient(ref)
        return self._client

    def live_pool(self) -> HelperPool | None:
        """The running helper pool, or None while the pool actor restarts."""
        actor = self._pool.instance
        try:
            return None if actor is None else actor.pool
        except RuntimeError:  # between its start and its pool's
            return None

    def mailboxes(self) -> dict[str, ActorRef]:
        """The running actors' refs by name (the Observer's mailboxes)."""
        children = (self._eventlog, self._pool)
        return {child.name: child.ref for child in children if child.ref is not None}

    async def close(self) -> None:
        """Stop the tree: the event log, then the pool (each within ``stop_grace``)."""
        for child in (self._pool, self._eventlog):
            child.close()  # no restart is coming: callers waiting for one give up
        await self.tree.ref.stop(2 * self.config.stop_grace)
        self.pool_events.close()


def helper_spec() -> HelperSpec:
    """The spec of the job server's helpers (:mod:`examples.jobs.helper`)."""
    return HelperSpec(entry=f"{__package__}.helper:main", cwd=str(ROOT), name="job-helper")


@asynccontextmanager
async def open_job_runtime(config: JobServerConfig) -> AsyncIterator[JobRuntime]:
    """Start the job server's tree: the pool actor (helper pool), then the event log.

    A pool that fails past its restart intensity is restarted by its supervisor after
    ``config.pool_backoff`` (:mod:`examples.jobs.tree`). Entering waits until every
    helper is ready and the ledger is open. Leaving stops the event log (running jobs
    are cancelled; with a ledger they are survivors at the next boot), then the pool
    actor: every helper is reaped before the block exits (§3.8).

    Raises:
        HelperStartupFailed: (``helper_startup_failed``) a helper did not start.
        LedgerCorrupt: (``ledger_corrupt``) the ledger file is damaged.
        RestartIntensityExceeded: (``restart_intensity_exceeded``) the tree gave up: an
            actor kept failing (design §1.4).
    """
    runtime = JobRuntime(config)
    async with trio.open_nursery() as nursery:
        stream = runtime.pool_events.subscribe(bound=1024, kinds=POOL_EVENT_KINDS - {"job_started"})
        nursery.start_soon(runtime.metrics.follow_pool, stream)
        with started_or_root_cause():
            await nursery.start(runtime.tree.run)
        try:
            yield runtime
        finally:
            with trio.CancelScope(shield=True):  # bounded by twice the stop grace
                LOGGER.info("stopping the event log and the pool actor")
                await runtime.close()
                LOGGER.info("stopped")
            nursery.cancel_scope.cancel()


def _metrics(runtime: JobRuntime) -> RuntimeMetrics:
    """The job server's metrics: its actors' events and statistics, its tree's decisions."""
    config = runtime.config
    lifecycle = Lifecycle(strategies=STRATEGIES, window=config.tree_restart_period)
    metrics = RuntimeMetrics(lifecycle=lifecycle)
    metrics.watch(
        event_log=lambda: None if (actor := runtime._eventlog.instance) is None else actor.log,
        pool=runtime.live_pool,
        mailboxes=runtime.mailboxes,
    )
    return metrics


def _check_arguments(operation: str, arguments: dict[str, Any]) -> None:
    """Check the argument *types* of a job (the event log checks the names, §6.2)."""
    problem: tuple[str, str] | None = None
    if operation == "hash_file" and "path" in arguments:
        path = arguments["path"]
        if not isinstance(path, str) or not 1 <= len(path) <= 4096 or "\x00" in path:
            problem = ("path", "must be a string of 1..4096 characters, without NUL")
    elif operation == "count_primes" and "limit" in arguments:
        limit = arguments["limit"]
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
            problem = ("limit", f"must be an integer from 0 to {MAX_LIMIT}")
    elif operation == "sleep" and "seconds" in arguments:
        seconds = arguments["seconds"]
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 0 <= seconds <= MAX_SLEEP
        ):
            problem = ("seconds", f"must be a number from 0 to {MAX_SLEEP:g}")
    if problem is not None:
        field, reason = problem
        raise InvalidCommand(f"{operation}: arguments.{field} {reason}", fields=[field])


def submit_handler(files_root: Path) -> Handler:
    """The job server's ``submit``: check argument types, keep ``hash_file`` inside
    ``files_root``, then the built-in submit (design §6.2, §7.3).

    The handler raises:
        InvalidCommand: (``invalid_command``) an argument has the wrong type or range, or
            a ``hash_file`` path resolves outside ``files_root`` (one message whether
            it exists or not); ``details.fields`` names the argument.
    """

    async def submit_job(conn: Connection, request: messages.Submit) -> messages.Message | None:
        _check_arguments(request.operation, request.arguments)
        path = request.arguments.get("path")
        if request.operation == "hash_file" and isinstance(path, str):  # else: the log refuses
            inside = await trio.to_thread.run_sync(resolve_inside, str(files_root), path)
            if inside is None:
                raise InvalidCommand(f"hash_file: arguments.{OUTSIDE_ROOT}", fields=["path"])
        return await BUILTIN_HANDLERS["submit"](conn, request)

    return submit_job


@attrs.define(eq=False)
class JobServer:
    """A running job server: its front door and its actors."""

    front: FrontDoor
    """The websocket front door (``front.port``, ``front.url``)."""
    runtime: JobRuntime
    """The pool actor and event log."""


@asynccontextmanager
async def open_job_server(
    config: JobServerConfig, *, sockets: Sequence[socket.socket] | None = None
) -> AsyncIterator[JobServer]:
    """Run the job server for the duration of the block (design §7).

    Entering returns once the helpers are ready and the port is bound (or ``sockets``,
    bound beforehand by :func:`examples.web.cli.bind_sockets`, are served). Leaving closes
    every client (1001), stops the actors and reaps every helper.

    Raises:
        OSError: the address cannot be bound.
        HelperStartupFailed: (``helper_startup_failed``) a helper did not start.
        LedgerCorrupt: (``ledger_corrupt``) the ledger file is damaged.
    """
    async with open_job_runtime(config) as runtime:
        routes, pages = await observability(runtime.metrics, config.front_door)
        async with open_front_door(
            runtime.eventlog,
            config.front_door,
            handlers={"submit": submit_handler(config.files_root)},
            pages=pages,
            routes=routes,
            sockets=sockets,
        ) as front:
            yield JobServer(front=front, runtime=runtime)


async def serve_jobs(
    config: JobServerConfig,
    *,
    sockets: Sequence[socket.socket] | None = None,
    on_ready: Callable[[str, list[str]], object] | None = None,
    client: str = "python -m examples.jobs.client",
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> int:
    """Run the job server until SIGINT/SIGTERM, then shut down gracefully (design §7.1).

    Once ready: ``on_ready(url, held)`` (sync), where ``held`` are the lines telling
    how many runs the ledger holds from before and how to decide them with ``client``
    (:func:`examples.web.held.held_at_start`; none without a ledger), then
    ``task_status.started(url)``. After the grace it prints which runs it leaves
    unfinished (held at the next start with a ledger, design §6.10). Returns the
    signal's number once every client is closed and every helper reaped.
    """
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_job_server(config, sockets=sockets) as server:
            url = server.front.url
            held: list[str] = []
            if config.ledger is not None:
                port = server.front.port
                where = "" if port == DEFAULT_PORT else f" --url {url}"
                held = await held_at_start(server.runtime.eventlog, client=client + where)
            if on_ready is not None:
                on_ready(url, held)
            task_status.started(url)
            signum = await shutdown_on_signal(server.front, signals, grace=config.grace)
            for line in await left_held(server.runtime.eventlog, ledger=config.ledger):
                print(line, flush=True)
            return signum


def _parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m examples.jobs.server",
        label="job_server",
        description="Run jobs in supervised helper processes, over a websocket API.",
    )
    add_server_options(parser, port=DEFAULT_PORT)
    add = parser.add_argument
    add("--files-root", default=None, metavar="DIR",
        help="hash_file reads only inside DIR (default: the current directory)")  # fmt: skip
    add("--helpers", type=count(minimum=1, maximum=64), default=2, help="helper processes (2)")
    add("--cluster", action="store_true",
        help="share the postgresql:// --ledger with other servers (docs/cluster.rst)")  # fmt: skip
    add("--cluster-lease", type=float, default=10.0, metavar="S",
        help="seconds a cluster node's lease lasts (10)")  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command line; see the module docstring. Returns the exit status."""
    quiet_start.restore()  # Ctrl-C is a KeyboardInterrupt again
    parser = _parser()
    args = parser.parse_args(argv)
    front_door = front_door_config(parser, args, close_timeout=CLOSE_TIMEOUT)
    try:
        config = JobServerConfig(
            front_door=front_door,
            ledger=args.ledger,
            cluster=args.cluster,
            cluster_lease=args.cluster_lease,
            helpers=args.helpers,
            grace=args.grace,
            **({} if args.files_root is None else {"files_root": args.files_root}),
        )
    except ValueError as exc:
        parser.error(str(exc))
    # First of all: a busy port is reported before any helper is started.
    with listening(parser, args) as sockets, info_file("job_server") as record:

        async def serve() -> None:
            async with trio.open_nursery() as nursery:

                def on_ready(url: str, held: list[str]) -> None:
                    announce(record, url, front_door.token, extra=tuple(held))

                await nursery.start(
                    functools.partial(
                        serve_jobs, config, sockets=sockets, on_ready=on_ready, client=client
                    )
                )
                LOGGER.info("hash_file reads inside %s", config.files_root)

        client = (  # the command a person types to decide held runs
            "trio-actors-jobs-client"
            if parser.prog.startswith("trio-actors-")
            else "python -m examples.jobs.client"
        )

        failure: BaseExceptionGroup[OSError | ActorError] | None = None
        try:
            trio.run(serve)
        except* (OSError, ActorError) as group:  # a helper or ledger failure
            failure = group
    if failure is not None:
        error = leaf(failure)
        if isinstance(error, LedgerError):  # refused at boot: its message is the one line
            print(f"job_server: {error}", file=sys.stderr)
            return 2
        print(f"job_server: {describe(error)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
