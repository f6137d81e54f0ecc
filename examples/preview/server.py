"""The live measurement-preview server: the flagship example (design §7.2).

Serve the runs of a QCoDeS measurement database to browsers and scripts over a
websocket: helper processes read the database read-only, the scheduler orders the
metadata / thumbnail / preview work of every run by selected / visible / remaining,
the renderer draws PNGs and the event log pushes each run's progress. Run it::

    python -m examples.preview.server [PATH ...] [--host 127.0.0.1] [--port 8765]
        [--token T | --no-token] [--allow-origin ORIGIN] [--allow-host HOST]
        [--max-per-address N] [--max-pending N] [--helpers 2] [--cache-dir DIR]
        [--ledger PATH] [--grace S] [--poll S] [--stall-after S] [--scan S] [--no-live-demo]
        [--no-metrics] [-v]

It binds its port first of all: a port in use is refused with one line on stderr
(suggesting ``--port 0``) and exit status 2 before anything is written. So is a bad
option (e.g. a negative ``--grace``).

Each ``PATH`` is a QCoDeS ``.db`` file or a folder of them; with several paths or a
folder, every database found is served, with a database picker, and the folders are
watched for new files (design §7.5, :mod:`examples.preview.app.databases`). The first
readable database found is started at once, the others on first use.

With no ``PATH`` it writes a sample database in the QCoDeS schema into a private folder
of its own under the cache folder (``--cache-dir``, default ``~/.cache/trio-actors``:
``preview-<pid>-XXXX/``, removed at exit; one left behind by a killed server is removed
by the next one), and serves that, growing its unfinished run by a few rows every half
second so the live refresh can be watched (``--no-live-demo`` turns that off). So two
servers never touch each other's sample. A file named that does not exist, is not SQLite or
has no QCoDeS ``runs`` table is refused with one line on stderr and exit status 2.

It prints ``starting: ...`` at once, and once ready ``listening on
ws://HOST:PORT/?token=T`` and ``dashboard: http://HOST:PORT/?token=T`` (the dashboard
page, served on the same port). ``T`` is a fresh random token each start unless
``--token`` gives one or ``--no-token`` opts out (loopback only); it is also written to
the server's info file, where ``python -m examples.preview.cli.client`` finds it. Only the
server's own pages may open a websocket (``--allow-origin`` adds others; with
``--allow-origin null`` the page opened as a file works too, and its address
``examples/preview/dashboard.html?ws=...`` is printed), and on a loopback bind only
requests for a loopback name are answered (``--allow-host`` adds others): design §7.3,
:mod:`examples.web.guard`. The websocket API is
the front door's (:mod:`examples.web.frontdoor`: ``subscribe``, ``status``, ...) plus
``list_runs``, ``select`` and ``visible`` (:mod:`examples.preview.app.connected_clients`); after
``list_runs`` each image is announced by an ``image_ready`` push and fetched from its
URL on the same port (design §7.6). ``python -m examples.preview.cli.client``
is a command-line client.

It measures its runtime for Prometheus, served at ``/metrics`` beside the Observer page
``/observer`` (design §7.8); ``--no-metrics`` runs it unmeasured, and then those paths
are answered 404 like any unknown one.

SIGINT/SIGTERM shut it down: no new work is admitted; runs waiting on a writer and runs
still queued are cancelled at once, the running ones get up to ``--grace`` seconds to
finish (the rest are cancelled), the websockets are closed with code 1001 and every
helper process is reaped. Exit status 0. A signal (or Ctrl-C) before the server is ready
(before ``listening on`` is printed) stops the start quietly, reaping any helper already
started: exit status 128 + the signal's number (130 for Ctrl-C). Log lines (``-v``, and
the shutdown's) have the job server's format (:func:`examples.web.cli.setup_logging`).
"""

from __future__ import annotations

import signal
import sys

from .cli import quiet_start

# Ctrl-C while the modules below load (half a second of imports): no traceback, under
# python -m and as the installed console command. main() gives Ctrl-C back.
quiet_start.install(__name__, "trio-actors-preview")

# The imports after the handler above: ruff's E402 is expected here.
import logging  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import urllib.parse  # noqa: E402
from contextlib import asynccontextmanager, suppress  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

import attrs  # noqa: E402
import trio  # noqa: E402

from actors import open_runtime  # noqa: E402
from actors.errors import ActorError, LedgerError, SourceUnreadable  # noqa: E402

from ..web.cli import OneLineParser, count, describe, leaf, seconds  # noqa: E402
from ..web.frontdoor import FrontDoor, FrontDoorConfig, Page, open_front_door  # noqa: E402
from ..web.held import left_held, run_list  # noqa: E402
from ..web.launch import (  # noqa: E402
    add_server_options,
    announce,
    front_door_config,
    listening,
)
from ..web.names import NULL_ORIGIN, is_loopback  # noqa: E402
from ..web.observer import observability  # noqa: E402
from ..web.serverinfo import InfoFile, process_alive  # noqa: E402
from ..web.signals import shutdown_on_signal  # noqa: E402
from .app import (  # noqa: E402
    Databases,
    PreviewApp,
    PreviewConfig,
    default_cache_dir,
    find_databases,
    open_database,
    static_pages,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from actors import BootReport, PoolHandle

    from ..web.routes import Route

__all__ = [
    "DASHBOARD",
    "DASHBOARD_PATHS",
    "dashboard_page_url",
    "dashboard_url",
    "live_demo",
    "main",
    "open_preview_server",
    "private_workdir",
    "serve_preview",
]

LOGGER = logging.getLogger("examples.preview")
#: The dashboard page (plain HTML + JavaScript), served by the server itself at
#: :data:`DASHBOARD_PATHS`, or opened as a file with ``?ws=URL``.
DASHBOARD = Path(__file__).resolve().parent / "dashboard.html"
#: Paths of the dashboard on the server's port (plain HTTP ``GET``).
DASHBOARD_PATHS = ("/", "/dashboard.html")
#: Rows the live demo appends to the sample's unfinished run, and how often (seconds).
DEMO_ROWS = 3
DEMO_INTERVAL = 0.5


def dashboard_url(ws_url: str, token: str | None = None) -> str:
    """The dashboard's ``file://`` address for a server at ``ws_url``."""
    query = {"ws": ws_url} if token is None else {"ws": ws_url, "token": token}
    return DASHBOARD.as_uri() + "?" + urllib.parse.urlencode(query, safe=":/")


def dashboard_page_url(ws_url: str, token: str | None = None) -> str:
    """The dashboard's ``http://`` address on the server at ``ws_url`` (same port)."""
    url = "http" + ws_url.removeprefix("ws") + "/"
    return url if token is None else url + "?" + urllib.parse.urlencode({"token": token})


async def live_demo(path: Path, *, rows: int = DEMO_ROWS, interval: float = DEMO_INTERVAL) -> None:
    """Grow the sample database's unfinished run until it is complete (a demo writer).

    A plain ``sqlite3`` writer in a worker thread, like a measurement in another
    process: the server sees the rows only through its change probe (design §4.5).
    """
    from .sample_db import LIVE_RUN_ID, append_live_rows  # numpy: only for the sample

    while True:
        await trio.sleep(interval)
        state = await trio.to_thread.run_sync(append_live_rows, path, rows)
        if state["is_completed"]:
            LOGGER.info("live demo: run %d completed with %d rows", LIVE_RUN_ID, state["rows"])
            return


def private_workdir(cache_root: Path) -> Path:
    """A fresh folder of this process under ``cache_root``: ``preview-<pid>-XXXX``.

    Folders of the same pattern whose process is gone (a server that was killed) are
    removed first. The caller removes the new one when it exits.
    """
    cache_root.mkdir(parents=True, exist_ok=True)
    for stale in cache_root.glob("preview-*-*"):
        pid = stale.name.split("-")[1]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"preview-{os.getpid()}-", dir=cache_root))


async def _shutdown(
    front: FrontDoor,
    databases: Databases,
    pool: PoolHandle,
    signals: AsyncIterator[int],
    grace: float,
) -> int:
    async def prepare() -> None:
        # The idle helpers are shut down now, side by side with the grace and a hung
        # job's ladder, not after them (design §3.8); running jobs go on.
        with suppress(ActorError):  # the pool actor is already stopping: nothing to do
            pool.retire_idle()
        # A change probe's job in flight would otherwise be cancelled only with the
        # app's tasks, its ladder after every other one.
        databases.stop_probing()
        # Runs waiting on a writer cannot finish within any grace, and queued ones have
        # done nothing yet: cancel them at once; the running ones get the grace.
        await databases.cancel_open(actor="server_shutdown", waiting_only=True)

    signum = await shutdown_on_signal(front, signals, grace=grace, prepare=prepare)
    with trio.move_on_after(grace + 1.0) as cleanup:
        cleanup.shield = True  # record the rest as cancelled, not as survivors
        await databases.cancel_open(actor="server_shutdown")
    return signum


@asynccontextmanager
async def open_preview_server(
    config: PreviewConfig,
    front_config: FrontDoorConfig,
    identity: dict[str, Any],
    *,
    paths: Sequence[Path] | None = None,
    sockets: Sequence[socket.socket] | None = None,
    on_boot: Callable[[BootReport], object] | None = None,
    metrics: bool = True,
) -> AsyncIterator[tuple[FrontDoor, PreviewApp]]:
    """Run the preview server for the duration of the block (design §7.2, §7.5).

    Entering (a checkpoint) returns once the helpers are ready, every run is submitted
    and the port is bound. Leaving closes every client (code 1001), cancels the app's
    tasks, stops the four actors and reaps every helper process (design §3.8).

    Args:
        config: The app's settings; ``config.db`` is the first database.
        front_config: Where the websocket listens.
        identity: :func:`~examples.preview.app.preview_app.open_database` of ``config.db``.
        paths: The files and folders whose databases are served besides ``config.db``
            (:class:`~examples.preview.app.databases.Databases`); None: only that one.
        sockets: Listening sockets bound beforehand (:func:`examples.web.cli.bind_sockets`),
            served instead of binding ``front_config``'s address.
        on_boot: Called (sync) with the event log's boot report (the runs its ledger
            holds from before, design §6.10) before the app discards them to draw
            every run afresh.
        metrics: Measure the runtime and serve ``/metrics``, ``/observer`` and
            ``/observer/state`` (design §7.8); False: unmeasured, those paths 404.

    Yields:
        The front door and the first database's app.

    Raises:
        OSError: the address cannot be bound.
        HelperStartupFailed: (``helper_startup_failed``) a helper could not start.
        LedgerError: (``ledger_corrupt``, ...) the event log refused the ledger; the
            file is left untouched (design §6.11).
    """
    async with _open_server(
        config, front_config, identity,
        paths=paths, sockets=sockets, on_boot=on_boot, metrics=metrics,
    ) as (front, app, _):  # fmt: skip
        yield front, app


@asynccontextmanager
async def _open_server(
    config: PreviewConfig,
    front_config: FrontDoorConfig,
    identity: dict[str, Any],
    *,
    paths: Sequence[Path] | None,
    sockets: Sequence[socket.socket] | None,
    on_boot: Callable[[BootReport], object] | None,
    metrics: bool,
) -> AsyncIterator[tuple[FrontDoor, PreviewApp, Databases]]:
    app = PreviewApp(config, identity)
    databases = Databases(app, paths, config)
    runtime_config = await trio.to_thread.run_sync(app.runtime_config)  # makes cache dirs
    runtime_config = attrs.evolve(runtime_config, metrics=metrics)  # served at /metrics
    page = Page(body=await trio.Path(DASHBOARD).read_bytes())
    pages = {**dict.fromkeys(DASHBOARD_PATHS, page), **await static_pages()}
    async with open_runtime(runtime_config) as runtime:
        routes: list[Route] = []
        if runtime.metrics is not None:  # unmeasured: /metrics and /observer are unknown
            routes, observer = await observability(runtime.metrics, front_config)
            pages.update(observer)
        if on_boot is not None:
            on_boot(await runtime.eventlog.boot_report())
        async with (
            app.running(runtime),
            open_front_door(
                runtime.eventlog,
                front_config,
                handlers=databases.handlers,
                pages=pages,
                routes=[*databases.routes, *routes],
                sockets=sockets,
            ) as front,
            # Every database reports to the first one's event log (design §7.5).
            databases.running(runtime.eventlog, front),
        ):
            front.on_disconnect(databases.on_disconnect)
            yield front, app, databases


async def serve_preview(
    config: PreviewConfig,
    front_config: FrontDoorConfig,
    identity: dict[str, Any],
    *,
    grace: float = 5.0,
    demo: Path | None = None,
    on_ready: Callable[[FrontDoor], object] | None = None,
    sockets: Sequence[socket.socket] | None = None,
    on_boot: Callable[[BootReport], object] | None = None,
    paths: Sequence[Path] | None = None,
    metrics: bool = True,
    task_status: trio.TaskStatus[FrontDoor] = trio.TASK_STATUS_IGNORED,
) -> tuple[int, bool]:
    """Run the preview server until SIGINT/SIGTERM, then shut down (design §7.1, §7.2).

    ``task_status.started(front)`` and ``on_ready(front)`` once the port is bound and
    every run is submitted. A signal before that stops the start at once (what was
    started is stopped, every helper reaped); :meth:`trio.Nursery.start` then raises
    ``RuntimeError``, so use ``on_ready`` to run it as a whole.

    Args:
        config: The app's settings.
        front_config: Where the websocket listens.
        identity: :func:`~examples.preview.app.preview_app.open_database` of ``config.db``.
        grace: Seconds (trio clock) running work gets after the first signal.
        demo: A sample database whose unfinished run to grow (see :func:`live_demo`).
        on_ready: Called (sync) once the server is ready; a signal that came before is
            never reported after it (the start is stopped instead).
        sockets: Listening sockets bound beforehand (see :func:`open_preview_server`).
        on_boot: Given the boot report before held runs are discarded (see
            :func:`open_preview_server`).
        paths: The files and folders served besides ``config.db`` (see
            :func:`open_preview_server`).
        metrics: Measure the runtime and serve ``/metrics`` and the Observer (see
            :func:`open_preview_server`).

    After the shutdown it prints which runs it leaves unfinished, if any
    (:func:`examples.web.held.left_held`).

    Returns:
        The signal's number and whether the server was ready, once every client is
        closed and every helper reaped.

    Raises:
        OSError: the address cannot be bound.
        HelperStartupFailed: (``helper_startup_failed``) a helper could not start.
    """
    send, receive = trio.open_memory_channel[int](8)
    starting = trio.CancelScope()  # the start, cancelled by a signal before it is done
    early: list[int] = []

    async def route(signals: AsyncIterator[int]) -> None:
        # The only reader of the signals: before the server is ready a signal stops the
        # start; afterwards they go to _shutdown (a flood beyond 8 is dropped).
        async for signum in signals:
            if ready:
                with suppress(trio.WouldBlock):
                    send.send_nowait(signum)
            else:
                early.append(signum)
                starting.cancel()

    ready = False
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals, send, receive:
        async with trio.open_nursery() as guard:
            guard.start_soon(route, signals)
            with starting:
                async with (
                    _open_server(
                        config, front_config, identity,
                        paths=paths, sockets=sockets, on_boot=on_boot, metrics=metrics,
                    ) as (front, app, databases),
                    trio.open_nursery() as nursery,
                ):  # fmt: skip
                    # A signal routed meanwhile has cancelled ``starting``: this
                    # checkpoint raises then, so "ready" is never announced after it.
                    await trio.lowlevel.checkpoint()
                    ready = True
                    if demo is not None:
                        nursery.start_soon(live_demo, demo)
                    task_status.started(front)
                    if on_ready is not None:
                        on_ready(front)
                    signum = await _shutdown(front, databases, app.runtime.pool, receive, grace)
                    ledger = None if config.ledger is None else str(config.ledger)
                    for line in await left_held(front.eventlog, ledger=ledger):
                        print(line, flush=True)
                    nursery.cancel_scope.cancel()
            guard.cancel_scope.cancel()
    if early:
        return early[0], False
    return signum, True


def _parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m examples.preview.server",
        label="preview_server",
        description="Serve live previews of a QCoDeS measurement database over a websocket.",
    )
    add = parser.add_argument
    positive = seconds(allow_zero=False)
    add("paths", nargs="*", metavar="PATH", help="QCoDeS .db files, or folders whose .db "
        "files are served and watched (default: write and serve a sample)")  # fmt: skip
    add_server_options(parser, port=8765)
    add("--helpers", type=count(minimum=1, maximum=32), default=2,
        help="helper processes reading the database (2)")  # fmt: skip
    add("--cache-dir", default=None, help="payload cache and sample folder (~/.cache/trio-actors)")
    add("--poll", type=positive, default=0.5, help="seconds between change probes (0.5)")
    add("--stall-after", type=positive, default=30.0, help="seconds before an unchanged "
        "unfinished run is reported incomplete (30)")  # fmt: skip
    add("--scan", type=positive, default=2.0, help="seconds between looks at the folders "
        "for new or gone databases (2)")  # fmt: skip
    add("--no-live-demo", action="store_true", help="do not grow the sample's unfinished run")
    add("--no-metrics", action="store_true", help="do not measure the runtime: /metrics and "
        "/observer are not served (404)")  # fmt: skip
    return parser


def _early_signal(signum: int, frame: object) -> None:
    """SIGTERM while preparing (before trio runs): unwind, so the private folder goes."""
    raise _StoppedEarly(signum)


class _StoppedEarly(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def main(argv: list[str] | None = None) -> int:
    """The command line; see the module docstring. Returns the exit status."""
    quiet_start.restore()  # trio takes Ctrl-C from here
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C while preparing (e.g. writing the sample)
        return _stopped_early(signal.SIGINT)
    except _StoppedEarly as stopped:
        return _stopped_early(stopped.signum)


def _stopped_early(signum: int) -> int:
    name = signal.Signals(signum).name  # SIGINT or SIGTERM: the two it waits for
    print(f"{name} before the server was ready: stopped", file=sys.stderr)
    return 128 + signum


def _main(argv: list[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    front_config = front_door_config(parser, args)
    # First of all: a busy port is reported before anything is written.
    with listening(parser, args) as sockets:
        workdir: Path | None = None
        on_term = signal.getsignal(signal.SIGTERM)
        try:
            if on_term == signal.SIG_DFL and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, _early_signal)
            cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
            demo = None
            if not args.paths:  # a private copy: never shared with another server
                # The sample's writer needs numpy; a server of real databases never loads it.
                from .sample_db import create_sample_database

                workdir = private_workdir(cache_dir)
                db = create_sample_database(workdir / "qcodes-sample.db")
                demo = None if args.no_live_demo else db
                cache_dir = workdir
                print(f"sample database: {db} (private; removed at exit)", flush=True)
                return _serve(args, parser, db, cache_dir, demo, front_config, sockets, on_term)
            paths = distinct_paths([Path(path) for path in args.paths])
            first = _first_database(paths)
            if first is None:
                return 2
            db = first
            several = len(paths) > 1 or paths[0].is_dir()
            return _serve(
                args, parser, db, cache_dir, demo, front_config, sockets, on_term,
                paths=paths if several else None,
            )  # fmt: skip
        finally:
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)


def distinct_paths(paths: Sequence[Path]) -> list[Path]:
    """``paths`` without repeats, in order: a file or folder named twice (``a.db``,
    ``./a.db``, a link to it) is the same one, served and listed once."""
    seen: set[Path] = set()
    kept = []
    for path in paths:
        try:
            key = path.resolve()
        except (OSError, RuntimeError):  # a link loop: kept as named, refused later
            key = path.absolute()
        if key not in seen:
            seen.add(key)
            kept.append(path)
    return kept


#: Hosts that bind every interface: no browser opens an address with them.
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def reachable_hosts(host: str) -> list[str]:
    """Hosts a browser can open for a server bound to ``host`` (blocking: asks the
    resolver for this machine's names).

    A wildcard bind (``0.0.0.0``, ``::``) is reached by this machine's names and
    addresses: its host name (fully qualified when known), each of its non-loopback
    addresses, then ``127.0.0.1`` (on this machine). Any other host: ``[host]``.
    """
    if host.strip("[]") not in _WILDCARDS:
        return [host]
    names = [socket.getfqdn(), socket.gethostname()]
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM)
    except OSError:
        infos = []
    names += [str(info[4][0]) for info in infos]
    try:  # the address outgoing traffic uses (a UDP connect sends nothing)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))
            names.append(str(probe.getsockname()[0]))
    except OSError:
        pass
    outside = [n for n in names if n and n not in _WILDCARDS and not is_loopback(n)]
    return list(dict.fromkeys([*outside, "127.0.0.1"]))  # this machine's own last


def reachable_urls(url: str, hosts: Sequence[str] | None = None) -> list[str]:
    """``url`` under each host a browser can open (:func:`reachable_hosts` of its host,
    unless ``hosts`` gives them): ``[url]`` unless it names a wildcard."""
    parts = urllib.parse.urlsplit(url)
    if (parts.hostname or "") not in _WILDCARDS:
        return [url]
    found = hosts if hosts is not None else reachable_hosts(parts.hostname or "")
    return [
        urllib.parse.urlunsplit(
            parts._replace(netloc=f"{f'[{h}]' if ':' in h else h}:{parts.port}")
        )
        for h in found
    ]


def _first_database(paths: Sequence[Path]) -> Path | None:
    """The database served first: the first readable one found (design §7.5).

    Every file named on the command line must be readable (else one line on stderr);
    a folder's unreadable files are listed as errors later. None (after one line on
    stderr) when there is nothing to serve.
    """
    for path in paths:
        if not path.is_dir():
            try:
                open_database(path)
            except SourceUnreadable as exc:
                print(f"preview_server: {exc.message}", file=sys.stderr)
                return None
    refused: list[str] = []
    for found in find_databases(paths):
        try:
            open_database(found)
        except SourceUnreadable as exc:
            refused.append(exc.message)
            continue
        return found
    named = ", ".join(str(path) for path in paths)
    why = "no *.db file there" if not refused else refused[0]  # one line: the first reason
    more = f" (and {len(refused) - 1} more unreadable)" if len(refused) > 1 else ""
    print(f"preview_server: no readable QCoDeS database in {named}: {why}{more}", file=sys.stderr)
    return None


def _serve(
    args: Any,
    parser: OneLineParser,
    db: Path,
    cache_dir: Path,
    demo: Path | None,
    front_config: FrontDoorConfig,
    sockets: Sequence[socket.socket],
    on_term: Any,
    *,
    paths: Sequence[Path] | None = None,
) -> int:
    try:
        identity = open_database(db)
    except SourceUnreadable as exc:
        print(f"preview_server: {exc.message}", file=sys.stderr)
        return 2
    try:
        config = PreviewConfig(
            db=db,
            helpers=args.helpers,
            cache_dir=cache_dir,
            ledger=args.ledger,
            poll_interval=args.poll,
            stall_after=args.stall_after,
            scan_interval=args.scan,
            max_inflight=max(4096, 2 * int(identity["run_count"]) + 64),
        )
    except ValueError as exc:
        parser.error(str(exc))

    record = InfoFile("preview_server")  # written once ready, removed at exit
    hosts = reachable_hosts(front_config.host)  # before the start: the resolver blocks
    held: list[str] = []

    def on_boot(report: BootReport) -> None:
        # The app discards them (every run is drawn afresh): no decision is left to a person.
        if config.ledger is not None:
            ids = [run.run_id for run in report.survivors]
            held.append(
                f"held from before: {len(ids)} runs ({run_list(ids)}); discarded: the "
                "preview draws every run afresh"
                if ids
                else "held from before: none"
            )

    def on_ready(front: FrontDoor) -> None:
        token = front.config.token
        # A file:// page's origin is "null": it may connect only if that is allowed.
        as_file = NULL_ORIGIN in front.config.allowed_origins
        file_line = (f"dashboard as a file: {dashboard_url(front.url, token)}",) if as_file else ()
        # Bound to every interface: the dashboard under this machine's names, never
        # "0.0.0.0", which no browser opens.
        reachable = reachable_urls(front.url, hosts)
        also = tuple(f"also reachable as: {dashboard_page_url(u, token)}" for u in reachable[1:])
        announce(
            record,
            front.url,
            token,
            dashboard=dashboard_page_url(reachable[0], token),
            extra=(*also, *file_line, *held),
        )

    async def run() -> tuple[int, bool]:
        return await serve_preview(
            config,
            front_config,
            identity,
            grace=args.grace,
            demo=demo,
            on_ready=on_ready,
            sockets=sockets,
            on_boot=on_boot,
            paths=paths,
            metrics=not args.no_metrics,
        )

    print(f"starting: {db} ({identity['run_count']} runs, {args.helpers} helpers)", flush=True)
    if paths is not None:
        print(f"watching: {', '.join(str(path) for path in paths)}", flush=True)
    if signal.getsignal(signal.SIGTERM) is _early_signal:
        signal.signal(signal.SIGTERM, on_term)  # trio's signal receiver takes it from here
    try:
        signum, ready = trio.run(run)
    except BaseException as exc:  # report one line; anything else is re-raised
        error = leaf(exc)
        if isinstance(error, KeyboardInterrupt):  # Ctrl-C before the signals were caught
            return _stopped_early(signal.SIGINT)
        if isinstance(error, LedgerError):  # refused at boot: its message is the one line
            print(f"preview_server: {error}", file=sys.stderr)
            return 2
        if isinstance(error, OSError | ActorError):
            print(f"preview_server: {describe(error)}", file=sys.stderr)
            return 1
        raise
    finally:
        record.remove()
    return 0 if ready else _stopped_early(signum)


if __name__ == "__main__":
    sys.exit(main())
