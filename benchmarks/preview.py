"""Benchmark of the preview server end to end against a plain loop (design §5.4, §7.2).

Run: ``python benchmarks/preview.py`` (500 runs, about a minute on 2 cores; ``--quick``
for a 60-run smoke run, ``--runs N`` for another size). It writes a database of finished
runs (:func:`examples.preview.sample_db.create_many_runs_database`) into a temporary
folder, then measures in the same run:

* **the floor**: one process, no runtime, that reads every run
  (:meth:`QcodesSource.read_run <examples.preview.child.qcodes.source.QcodesSource.read_run>`)
  and draws its thumbnail and its preview with the server's drawing code
  (:func:`examples.preview.child.drawing.render.render`): its CPU time (user + system, from
  start to exit, imports included), wall time and peak RSS
  (``getrusage(RUSAGE_SELF).ru_maxrss``); and, in a second process, the wall time of
  reading every run and drawing only its thumbnail;
* **the helpers alone**, the bound any server meets at best: in a third process, a bare
  :func:`actors.open_helper_pool` of the server's helper (as many helpers as the
  server has) given the server's own helper jobs, with every helper busy and no server
  around them: ``read_run`` drawing the thumbnail of every run, then ``draw`` of every
  preview; its wall time for the thumbnails and the CPU of its helpers (reaped,
  ``RUSAGE_CHILDREN``; start-up included);
* **the server**: ``python -m examples.preview.server DB --port 0 --no-token`` as a
  subprocess with a fresh payload cache; once it prints ``listening on``, a websocket
  client asks ``list_runs`` (after which the server pushes every image) and times the
  first thumbnail, all thumbnails and all previews after it connected; then, before
  the server is stopped, the CPU time of the server and every descendant (``/proc``:
  ``utime + stime`` of each live process plus the server's ``cutime + cstime`` of
  reaped helpers) and the server's peak RSS (``VmHWM``).

With ``--metrics`` the server phase runs four times more, in alternation with a fresh
payload cache each time: twice with ``--no-metrics`` (the runtime unmeasured, no
``/metrics``) and twice measured, as above, with a scraper reading ``/metrics`` every
second (:data:`SCRAPE_INTERVAL`, urllib in a thread, as a Prometheus server would). The
difference is what measuring and being scraped cost together (design §7.8), and the
target is the medians of CPU and time to all thumbnails within 3 % of the unmeasured
server's, same run.

It prints each figure and the ratios with OK/MISS against the targets: server + helpers
CPU <= 1.15x the floor's; server peak RSS <= 1.0x the floor process's (the server never
loads the drawing code: numpy and Pillow stay in the helpers); connect -> all thumbnails
<= 1.15x the helpers alone's time for them (the server may add 15 % to the bound, measured
in the same run); first thumbnail after connect <= 50 ms. Then the bounds the helpers
alone set: the CPU and thumbnail ratios to the floor a server that cost nothing would
reach (the server starts drawing before a client connects, so its thumbnail figure can
come in below that bound on a small database).
Wall times are seconds of ``time.monotonic``; CPU times are seconds.

Before measuring it writes the bytecode of the tree's packages (:func:`compile_tree`), as
installing a package does: every measured process then starts as an installed one
would, even where ``PYTHONDONTWRITEBYTECODE`` is set (else each process, floor, helpers
and server alike, compiles every source it imports at each start). The server's own CPU
when it printed ``listening on`` (its start-up: imports, helpers started, runs
submitted) is printed beside its total.

The client learns of an image from the server's ``image_ready`` notices and fetches
it by URL (:func:`image_bytes`), as the dashboard's browser does: over at most
:data:`FETCHES_AT_ONCE` kept-alive HTTP/1.1 connections.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: Targets (design §5.4): ratios of the server's figures to the floor's.
CPU_TARGET = 1.15
RSS_TARGET = 1.0
#: Of the helpers alone's time to the last thumbnail (the bound, same run).
THUMBNAILS_TARGET = 1.15
FIRST_THUMBNAIL_TARGET = 0.050  # seconds
#: Seconds the server may take to start, and the client to get every image.
START_TIMEOUT = 60.0
COLLECT_TIMEOUT = 300.0
_LISTENING = re.compile(r"listening on (ws://\S+)")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


#: The tree's packages whose bytecode :func:`compile_tree` writes.
PACKAGES = ("actors", "protocol", "examples")


def compile_tree() -> None:
    """Write the bytecode of :data:`PACKAGES` (``__pycache__``), as ``pip install`` does."""
    import compileall

    for package in PACKAGES:
        compileall.compile_dir(ROOT / package, quiet=1)


# -- the floor -----------------------------------------------------------------------------


def floor(db: str, mode: str) -> dict[str, float]:
    """Read every run of ``db`` and draw it in this process; the figures (see module doc).

    Args:
        db: The database.
        mode: ``"all"`` (thumbnail and preview) or ``"thumbnails"``.
    """
    from examples.preview.child.drawing.render import render
    from examples.preview.child.qcodes.source import open_source

    kinds = ("thumbnail", "preview") if mode == "all" else ("thumbnail",)
    start = time.monotonic()
    images = 0
    with open_source(db) as source:
        for run in source.list_runs():
            observation = source.read_run(run["run_id"])
            for kind in kinds:
                images += len(render(observation, kind)) > 0
    wall = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_kib": float(usage.ru_maxrss),
        "images": float(images),
    }


def in_process(*argv: str) -> dict[str, float]:
    """This script with ``argv`` in a fresh process (its CPU time, peak RSS and children
    are its own): the figures it printed last, as JSON."""
    out = subprocess.run(
        [sys.executable, __file__, *argv], check=True, capture_output=True, text=True, cwd=ROOT
    )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def run_floor(db: Path, mode: str) -> dict[str, float]:
    """:func:`floor` in a fresh process."""
    return in_process("--floor", mode, str(db))


# -- the helpers alone ----------------------------------------------------------------------


async def helpers_alone(db: Path, helpers: int) -> dict[str, float]:
    """The server's helper jobs on a bare pool of ``helpers`` helpers; the figures (see the
    module doc): ``thumbnails`` (wall seconds from the first job to the last thumbnail),
    ``all`` (to the last preview) and ``cpu`` (of the reaped helpers, seconds)."""
    import trio

    from actors import HelperSpec, open_helper_pool
    from examples.preview.app.preview_app import helper_env
    from examples.preview.child.draw import observation_of

    with tempfile.TemporaryDirectory(prefix="handoff-") as handoff:
        spec = HelperSpec(
            entry="examples.preview.child.helper:main",
            options={"db": str(db), "handoff": handoff},
            cwd=str(ROOT),
            env=helper_env(),  # as the server's helpers
        )
        async with open_helper_pool(spec, size=helpers) as pool:
            run_ids: list[int] = []
            after: int | None = 0
            while after is not None:
                page = await pool.run_job("list_runs", {"after": after, "limit": 500})
                run_ids += [run["run_id"] for run in page["runs"]]
                after = page["next_after"]
            revisions: dict[int, str | None] = {}
            start = time.monotonic()

            async def jobs(todo: list[Any], operation: str) -> None:
                while todo:
                    payload = todo.pop()
                    result = await pool.run_job(operation, payload)
                    if operation == "read_run":  # PNGs beside it, as the server reads them
                        revisions[payload["run_id"]] = observation_of(result).get("revision")

            async def phase(todo: list[Any], operation: str) -> None:
                async with trio.open_nursery() as nursery:
                    for _ in range(helpers):
                        nursery.start_soon(jobs, todo, operation)

            reads = [{"run_id": run, "draw": ["thumbnail"]} for run in reversed(run_ids)]
            await phase(reads, "read_run")
            thumbnails = time.monotonic() - start
            draws = [{"run_id": run, "kinds": ["preview"], "revision": revisions[run]}
                     for run in reversed(run_ids)]  # fmt: skip
            await phase(draws, "draw")
            done = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"thumbnails": thumbnails, "all": done, "cpu": usage.ru_utime + usage.ru_stime,
            "runs": float(len(run_ids))}  # fmt: skip


def run_helpers_alone(db: Path, helpers: int) -> dict[str, float]:
    """:func:`helpers_alone` in a fresh process."""
    return in_process("--helpers-alone", str(helpers), str(db))


# -- the server ----------------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, list[str]] | None:
    """(parent pid, fields after the command name) of ``/proc/<pid>/stat``, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), fields


def tree_cpu(root: int) -> tuple[float, float, int]:
    """CPU seconds of ``root`` and its descendants, of ``root`` alone, and how many
    processes were counted.

    Each live process counts its ``utime + stime``; reaped children are in their
    parent's ``cutime + cstime`` (so a helper that was replaced still counts, once).
    """
    parents: dict[int, int] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = _stat(int(entry))
            if found is not None:
                parents[int(entry)], stats[int(entry)] = found
    members = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in members and pid not in members:
                members.add(pid)
                grew = True
    ticks = 0
    for pid in members & set(stats):
        fields = stats[pid]  # utime, stime, cutime, cstime are fields 14-17 of stat
        ticks += sum(int(value) for value in fields[11:15])
    own = sum(int(value) for value in stats[root][11:13]) if root in stats else 0
    return ticks / _CLOCK_TICKS, own / _CLOCK_TICKS, len(members & set(stats))


def peak_rss_kib(pid: int) -> float:
    """``VmHWM`` of ``pid`` in KiB (0 if unreadable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1])
    except OSError:
        pass
    return 0.0


#: Images fetched at once, as a browser does per server (HTTP/1.1, six kept-alive
#: connections).
FETCHES_AT_ONCE = 6
#: Largest image fetched, in bytes.
MAX_IMAGE = 8 * 1024 * 1024
#: Times the client connects again after the server dropped it for falling behind.
RECONNECTS = 5


async def image_bytes(client: Any, notice: Any) -> bytes:
    """The bytes of the image an ``image_ready`` notice announces: one ``GET`` of its
    URL with ``client`` (an :class:`~examples.web.fetch.HttpClient` of the server,
    design §7.6)."""
    fetched = await client.get(notice.url, max_body=MAX_IMAGE)
    if fetched.status != 200:
        raise RuntimeError(f"GET {notice.url}: {fetched.status}")
    return bytes(fetched.body)


async def collect(url: str, expected: int, timeout: float) -> dict[str, Any]:  # noqa: ASYNC109
    """Connect to ``url`` and time the images of ``expected`` runs (see the module doc).

    Each ``image_ready`` notice is fetched by URL, up to :data:`FETCHES_AT_ONCE` at a
    time over as many kept-alive connections, as the dashboard's browser does; an image
    counts when its bytes are in. If the server drops the client for falling behind
    (close 4000, design §7.4: a loaded machine may not read for ``push_timeout``), it
    connects again and asks ``list_runs`` again, at most :data:`RECONNECTS` times; the
    times still count from the first connection.

    Returns:
        ``first_thumbnail``, ``thumbnails``, ``previews`` (seconds after the
        connection opened, None if not reached), ``bytes`` and ``images`` received,
        the HTTP ``connections`` the images came over, and the ``reconnects``.
    """
    import trio
    from trio_websocket import ConnectionClosed

    from examples.web.closing import RESYNC_REQUIRED
    from examples.web.fetch import open_http_client
    from examples.web.wsclient import open_websocket_client
    from protocol import messages
    from protocol.codec import structure_message
    from protocol.messages import ServerMessage

    # The client's decoder is set up before it connects: the server's latency is timed,
    # not the client's one-off set-up (a browser's JSON.parse has none).
    structure_message({"type": "ok", "request_id": None}, ServerMessage)
    found: dict[str, set[int]] = {"thumbnail": set(), "preview": set()}
    times: dict[str, float | None] = {"first_thumbnail": None, "thumbnails": None,
                                      "previews": None}  # fmt: skip
    totals = {"bytes": 0, "images": 0, "connections": 0, "reconnects": 0}
    limiter = trio.CapacityLimiter(FETCHES_AT_ONCE)
    all_in = trio.Event()
    connected = time.monotonic()

    async def fetch(client: Any, notice: Any) -> None:
        async with limiter:
            data = await image_bytes(client, notice)
        totals["bytes"] += len(data)
        totals["images"] += 1
        now = time.monotonic() - connected
        if notice.kind == "thumbnail" and times["first_thumbnail"] is None:
            times["first_thumbnail"] = now
        found[notice.kind].add(notice.run_id)
        for kind, key in (("thumbnail", "thumbnails"), ("preview", "previews")):
            if times[key] is None and len(found[kind]) >= expected:
                times[key] = now
        if times["previews"] is not None and times["thumbnails"] is not None:
            all_in.set()

    async def notices(client: Any, nursery: trio.Nursery, first: bool) -> None:
        nonlocal connected
        async with open_websocket_client(url, max_message_size=16 * 1024 * 1024) as ws:
            if first:
                connected = time.monotonic()
            # Images only: an event-log subscription from the start would add 500 runs'
            # events to the same connection, which this client does not measure.
            await ws.send_message(json.dumps({"type": "list_runs", "request_id": "b1"}))
            while True:
                # The run lists are parsed, not structured, as a browser's JSON.parse
                # does: structuring 500 rows in this client would count as the server's
                # latency. The notices are structured (strictly) before use.
                data = json.loads(await ws.get_message())
                if isinstance(data, dict) and data.get("type") == "image_ready":
                    message = structure_message(data, ServerMessage)
                    if isinstance(message, messages.ImageReady) and message.kind in found:
                        nursery.start_soon(fetch, client, message)

    async def connections(client: Any, nursery: trio.Nursery) -> None:
        for attempt in range(RECONNECTS + 1):
            try:
                await notices(client, nursery, first=attempt == 0)
            except ConnectionClosed as exc:
                reason = exc.reason
                if reason is None or reason.code != RESYNC_REQUIRED or attempt == RECONNECTS:
                    raise
                totals["reconnects"] += 1
                print(f"dropped by the server ({reason.reason}); reconnecting", file=sys.stderr)

    with trio.move_on_after(timeout):
        async with open_http_client(url, max_connections=FETCHES_AT_ONCE) as client:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(connections, client, nursery)
                await all_in.wait()
                nursery.cancel_scope.cancel()
            totals["connections"] = client.opened
    return {**times, **totals, "found": found}


#: Seconds between two scrapes of ``/metrics`` with ``--metrics``.
SCRAPE_INTERVAL = 1.0


def _scrape(url: str, stop: threading.Event, scrapes: list[int]) -> None:
    """GET ``/metrics`` every :data:`SCRAPE_INTERVAL` seconds until ``stop`` is set."""
    import urllib.request

    address = url.replace("ws://", "http://").rstrip("/") + "/metrics"
    while not stop.wait(SCRAPE_INTERVAL):
        with urllib.request.urlopen(address, timeout=10) as answer:
            answer.read()
        scrapes.append(1)


def run_server(db: Path, workdir: Path, runs: int, helpers: int,
               timeout: float = COLLECT_TIMEOUT, *, tag: str = "",
               scrape: bool = False, metrics: bool = True) -> dict[str, Any]:  # fmt: skip
    """Start the server on ``db``, collect every image, measure it, stop it (with
    ``scrape``, a scraper reads ``/metrics`` every second meanwhile; without ``metrics``
    the server runs with ``--no-metrics``)."""
    import trio

    env = {**os.environ, "TRIO_ACTORS_RUNTIME_DIR": str(workdir / "info")}
    errors = (workdir / "server.stderr").open("w")
    started = time.monotonic()
    server = subprocess.Popen(
        [sys.executable, "-m", "examples.preview.server", str(db), "--port", "0", "--no-token",
         "--cache-dir", str(workdir / f"cache{tag}"), "--helpers", str(helpers),
         *(() if metrics else ("--no-metrics",))],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=errors, text=True,
    )  # fmt: skip
    lines: list[str] = []
    found = threading.Event()

    def read_stdout() -> None:
        assert server.stdout is not None
        for line in server.stdout:
            lines.append(line)
            if _LISTENING.search(line):
                found.set()

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    try:
        if not found.wait(START_TIMEOUT):
            raise RuntimeError(f"the server did not start: {''.join(lines)}")
        ready_cpu = tree_cpu(server.pid)[1]
        url = next(m.group(1) for line in lines if (m := _LISTENING.search(line)))
        ready = time.monotonic() - started
        stop, scrapes = threading.Event(), []
        scraper = threading.Thread(target=_scrape, args=(url, stop, scrapes), daemon=True)
        if scrape:
            scraper.start()
        try:
            figures = trio.run(collect, url, runs, timeout)
        finally:
            stop.set()
            if scrape:
                scraper.join(15)
        figures["scrapes"] = len(scrapes)
        figures["cpu"], figures["server_cpu"], figures["processes"] = tree_cpu(server.pid)
        figures["rss_kib"] = peak_rss_kib(server.pid)
        figures["ready"] = ready
        figures["ready_cpu"] = ready_cpu
        if figures["thumbnails"] is None or figures["previews"] is None:
            figures["missing"] = sorted(
                (run, kind) for kind, runs_seen in figures.pop("found").items()
                for run in set(range(1, runs + 1)) - runs_seen
            )[:10]  # fmt: skip
        figures.pop("found", None)
        return figures
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        reader.join(5)
        errors.close()
        tail = (workdir / "server.stderr").read_text().splitlines()[-20:]
        if tail:
            print("server stderr (last lines):", *tail, sep="\n  ", file=sys.stderr)


# -- the report ----------------------------------------------------------------------------


def verdict(value: float | None, limit: float) -> str:
    """``OK`` if ``value`` is at most ``limit``, else ``MISS`` (also when not measured)."""
    return "OK" if value is not None and value <= limit else "MISS"


def report(runs: int, full: dict[str, float], thumbs: dict[str, float],
           alone: dict[str, float], server: dict[str, Any], helpers: int) -> list[str]:  # fmt: skip
    """The printed lines: each figure, then each ratio with its verdict, then the bounds
    the helpers alone set (the ratios a server that cost nothing would reach)."""
    mib = 1024.0
    lines = [
        f"floor (one process, {runs} runs, thumbnail + preview):",
        f"  CPU {full['cpu']:.2f} s, wall {full['wall']:.2f} s, "
        f"peak RSS {full['rss_kib'] / mib:.1f} MiB",
        f"floor, thumbnails alone: wall {thumbs['wall']:.2f} s",
        f"helpers alone (bare pool, {helpers} helpers): thumbnails "
        f"{alone['thumbnails']:.2f} s, all images {alone['all']:.2f} s, "
        f"CPU {alone['cpu']:.2f} s",
        f"server ({server['processes']} processes at the end, ready after "
        f"{server['ready']:.2f} s, its own CPU then {server['ready_cpu']:.2f} s):",
    ]

    def seconds(key: str) -> str:
        value = server[key]
        return "not reached" if value is None else f"{value:.3f} s"

    lines += [
        f"  first thumbnail after connect {seconds('first_thumbnail')}, all thumbnails "
        f"{seconds('thumbnails')}, all previews {seconds('previews')}",
        f"  {server['images']} images, {server['bytes'] / mib / mib:.2f} MiB over "
        f"{server['connections']} HTTP connections"
        + (f"; missing {server['missing']}" if server.get("missing") else ""),
        f"  CPU of server + helpers {server['cpu']:.2f} s (server alone "
        f"{server['server_cpu']:.2f} s), server peak RSS {server['rss_kib'] / mib:.1f} MiB",
    ]
    cpu = server["cpu"] / full["cpu"]
    rss = server["rss_kib"] / full["rss_kib"]
    thumbnails = (
        None if server["thumbnails"] is None else server["thumbnails"] / alone["thumbnails"]
    )
    first = server["first_thumbnail"]
    lines += [
        "ratios:",
        f"  CPU server + helpers / floor        {cpu:5.2f}x  (<= {CPU_TARGET}x) "
        f"{verdict(cpu, CPU_TARGET)}",
        f"  server peak RSS / floor process     {rss:5.2f}x  (<= {RSS_TARGET}x) "
        f"{verdict(rss, RSS_TARGET)}",
        "  all thumbnails / helpers alone      "
        + ("  n/a " if thumbnails is None else f"{thumbnails:5.2f}x")
        + f"  (<= {THUMBNAILS_TARGET}x) {verdict(thumbnails, THUMBNAILS_TARGET)}",
        "  first thumbnail after connect       "
        + ("  n/a " if first is None else f"{first * 1000:4.0f} ms")
        + f"  (<= {FIRST_THUMBNAIL_TARGET * 1000:.0f} ms) "
        f"{verdict(first, FIRST_THUMBNAIL_TARGET)}",
        "bounds (the helpers alone: a server that cost nothing):",
        f"  CPU helpers alone / floor           {alone['cpu'] / full['cpu']:5.2f}x  "
        f"(server's share now {cpu - alone['cpu'] / full['cpu']:+.2f}x)",
        f"  helpers' thumbnails / floor         {alone['thumbnails'] / thumbs['wall']:5.2f}x",
    ]
    if server["thumbnails"] is not None:
        lines.append(
            f"  server's thumbnails / floor         {server['thumbnails'] / thumbs['wall']:5.2f}x"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """The command line; see the module docstring. Exit status 0 (the verdicts are printed)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 60-run smoke run")
    parser.add_argument("--runs", type=int, default=None, help="runs in the database (500)")
    parser.add_argument("--helpers", type=int, default=2, help="the server's helpers (2)")
    parser.add_argument("--timeout", type=float, default=COLLECT_TIMEOUT,
                        help="seconds to wait for every image (300)")  # fmt: skip
    parser.add_argument("--metrics", action="store_true",
                        help="compare the server measured and scraped every second "
                        "with one run --no-metrics, same run")  # fmt: skip
    parser.add_argument("--floor", nargs=2, metavar=("MODE", "DB"), help=argparse.SUPPRESS)
    parser.add_argument("--helpers-alone", nargs=2, metavar=("HELPERS", "DB"),
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args(argv)
    if args.floor:
        print(json.dumps(floor(args.floor[1], args.floor[0])))
        return 0
    if args.helpers_alone:
        import trio

        db = Path(args.helpers_alone[1]).resolve()
        figures = trio.run(helpers_alone, db, int(args.helpers_alone[0]))
        print(json.dumps(figures))
        return 0
    runs = args.runs or (60 if args.quick else 500)
    from examples.preview.sample_db import create_many_runs_database

    compile_tree()
    with tempfile.TemporaryDirectory(prefix="preview-bench-") as folder:
        workdir = Path(folder)
        start = time.monotonic()
        db = create_many_runs_database(workdir / "runs.db", runs)
        print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; database of {runs} "
              f"runs written in {time.monotonic() - start:.1f} s")  # fmt: skip
        full = run_floor(db, "all")
        thumbs = run_floor(db, "thumbnails")
        alone = run_helpers_alone(db, args.helpers)
        server = run_server(db, workdir, runs, args.helpers, args.timeout)
        pairs = []
        for i in range(2 if args.metrics else 0):  # alternated: both see the same load
            plain = run_server(
                db, workdir, runs, args.helpers, args.timeout, tag=f"p{i}", metrics=False
            )
            scraped = run_server(
                db, workdir, runs, args.helpers, args.timeout, tag=f"s{i}", scrape=True
            )
            pairs.append((plain, scraped))
    for line in report(runs, full, thumbs, alone, server, args.helpers):
        print(line)
    for line in report_metrics(pairs):
        print(line)
    return 0


def report_metrics(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[str]:
    """The ``--metrics`` lines: metrics on and scraped every second against metrics off
    (``--no-metrics``), same run."""
    if not pairs:
        return []
    lines = ["metrics on, scraped every second vs metrics off (medians of the runs):"]
    for key, label in (("cpu", "CPU server + helpers"), ("thumbnails", "all thumbnails")):
        plain = statistics.median(p[key] for p, _ in pairs if p[key] is not None)
        scraped = statistics.median(s[key] for _, s in pairs if s[key] is not None)
        ratio = scraped / plain
        lines.append(f"  {label}: {scraped:.3f} s on vs {plain:.3f} s off = {ratio:.3f}x "
                     f"(<= 1.03x) {verdict(ratio, 1.03)}")  # fmt: skip
    lines.append(f"  scrapes per scraped run: {[s['scrapes'] for _, s in pairs]}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
