"""A command-line client of the preview server: save the PNGs of every run (design §7.2).

Usage::

    python -m examples.preview.client ws://127.0.0.1:8765 [--select RUN] [--out DIR]
                                      [--db ID] [--token T] [--timeout S]
    python -m examples.preview.client ws://127.0.0.1:8765 --databases

``--databases`` prints the server's databases (id, state, runs, file name, error) and
exits. Otherwise it connects, switches to database ``ID`` if ``--db`` is given
(``use_database``; an unknown id is exit status 2), asks ``list_databases`` (a server
of several databases, design §7.5: the session is about the one the connection uses;
the other databases' runs are skipped), subscribes to the event log (from the start, so
it sees every run's
``job_queued`` ... ``job_finished``), asks ``list_runs``, selects ``RUN`` (so the
server draws it first), and for every ``image_ready`` notice fetches the image from
its URL over HTTP (design §7.6; one ``GET`` per image on one kept-alive connection, the
token in an ``Authorization`` header) and saves it as ``DIR/run<id>-<kind>.png`` (a
newer revision overwrites an older one; an image already superseded when it is fetched,
a 404, is skipped: its newer notice follows). It stops when
every run of the newest run list is settled (:meth:`Collection.missing`), or when
``--timeout`` seconds have passed: a run is settled once its current event-log run
finished and every image that run published came, at the finished revision or newer
(so an empty run's images count, and a kind that failed is not waited for); a run still
being written needs only its newest images. On ``resync_required`` it subscribes again
from the last event it saw and asks ``list_runs`` again (every image is pushed again).
It prints one line per image: run, kind, revision, width x height, bytes, the
run's event-log run (``job``) and its status (from the newest ``run_list``, or from
the ``job_finished`` event of that event-log run if it came later). Exit status 0 when
every image came, 1 on timeout, when the server went away meanwhile or refused an image
(any answer but 200 or 404), 2 for a bad
argument or a refused connection (nothing listening, a wrong token); each failure is one
line on stderr. An ``http://`` address (the dashboard's) is taken as ``ws://``. The
token is ``--token``, else the ``?token=`` of the address, else ``$TRIO_ACTORS_TOKEN``,
else the one a local server wrote in its info file (design §7.3); it is sent in an
``Authorization`` header and never printed.

Every message is read with the project's strict codec
(:func:`protocol.codec.decode_server_message`).
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import attrs
import trio
from trio_websocket import ConnectionClosed, open_websocket_url

from protocol import messages
from protocol.codec import decode_server_message

from ..web.cli import OneLineParser, client_target, connection_problem, count, leaf, seconds
from ..web.fetch import FetchError, HttpClient, open_http_client

__all__ = [
    "Collection",
    "DatabaseRefused",
    "SavedImage",
    "collect",
    "database_lines",
    "databases",
    "main",
]

#: Largest server message read, in bytes (images come by URL, not in messages).
MAX_MESSAGE = 4 * 1024 * 1024
#: Largest image fetched, in bytes (a 640 x 480 preview is well under it).
MAX_IMAGE = 16 * 1024 * 1024
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
        jobs = [job for job, of in self.jobs.items() if of == run_id]
        return max([*jobs, *([] if listed is None else [listed])], default=None)

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
        """The ``seq`` of the newest event seen (0 if none): where to subscribe again."""
        return self.events[-1].seq if self.events else 0

    def _note_event(self, event: messages.Event) -> None:
        if event.seq <= self.cursor:
            return  # already seen (a subscription again after resync_required)
        self.events.append(event)
        if event.run_id is None:
            return
        if event.kind == "job_queued":
            arguments = event.data.get("arguments", {})
            run = arguments.get("run_id")
            db = arguments.get("db")
            if isinstance(run, int) and (db is None or self.db is None or db == self.db):
                self.jobs[event.run_id] = run
        elif event.kind in ("job_finished", "job_cancelled") and event.run_id in self.jobs:
            self.finished[self.jobs[event.run_id]] = {
                **event.data, "kind": event.kind, "job": event.run_id,
            }  # fmt: skip


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


class DatabaseRefused(Exception):
    """The server refused ``use_database`` (an unknown or unreadable database)."""


async def databases(
    url: str,
    *,
    token: str | None = None,
    timeout: float = 30.0,  # noqa: ASYNC109
) -> messages.DatabaseList:
    """The server's ``database_list`` (design §7.5), within ``timeout`` seconds.

    Raises:
        trio.TooSlowError: no answer in time.
        HandshakeError: the server refused the connection (e.g. a wrong token).
    """
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else None
    with trio.fail_after(timeout):
        async with open_websocket_url(
            url, extra_headers=headers, max_message_size=MAX_MESSAGE, connect_timeout=timeout
        ) as ws:
            await ws.send_message(json.dumps({"type": "list_databases", "request_id": "d1"}))
            while True:
                message = decode_server_message(await ws.get_message(), max_size=MAX_MESSAGE)
                if isinstance(message, messages.DatabaseList):
                    return message


def database_lines(listed: messages.DatabaseList) -> list[str]:
    """The printed table of ``--databases``; the current one marked ``*``."""
    lines = []
    for entry in listed.databases:
        mark = "*" if entry.db == listed.current else " "
        runs = "-" if entry.runs is None else str(entry.runs)
        error = f"  ({entry.error})" if entry.error else ""
        lines.append(f"{mark} {entry.db:<32} {entry.state:<8} {runs:>5}  {entry.name}{error}")
    return lines


async def collect(
    url: str,
    out: Path,
    *,
    select: int | None = None,
    db: str | None = None,
    token: str | None = None,
    timeout: float = 30.0,  # noqa: ASYNC109 - the whole session's bound, as documented
) -> Collection:
    """Connect to ``url``, save the images into ``out``; see the module docstring.

    Returns:
        What was seen; ``complete`` tells whether every expected image came within
        ``timeout`` seconds (trio clock).

    Raises:
        DatabaseRefused: ``db`` was given and the server refused it.
        HandshakeError: the server refused the connection (e.g. a wrong token).
        ConnectionClosed: the server closed the connection.
    """
    await trio.Path(out).mkdir(parents=True, exist_ok=True)
    seen = Collection()
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else None
    ids = (f"c{n}" for n in itertools.count(1))
    with trio.move_on_after(timeout):
        async with (
            open_http_client(url, token=token) as http,  # one kept-alive connection
            open_websocket_url(
                url, extra_headers=headers, max_message_size=MAX_MESSAGE, connect_timeout=timeout
            ) as ws,
        ):

            async def send(kind: str, **fields: Any) -> None:
                request = {"type": kind, "request_id": next(ids), **fields}
                await ws.send_message(json.dumps(request, separators=(",", ":")))

            if db is not None:
                await send("use_database", db=db)  # request c1
            await send("list_databases")  # answered first: whose runs the session sees
            await send("subscribe", cursor=0)
            await send("list_runs")
            if select is not None:
                await send("select", run_id=select)
            listed = False
            while not (listed and not seen.missing()):
                message = decode_server_message(await ws.get_message(), max_size=MAX_MESSAGE)
                if isinstance(message, messages.RunList):
                    seen.runs = {run.run_id: run for run in message.runs}
                    listed = True
                elif isinstance(message, messages.Events):
                    for event in message.events:
                        seen._note_event(event)
                elif isinstance(message, messages.Event):
                    seen._note_event(message)
                elif isinstance(message, messages.DatabaseList):
                    seen.db = message.current
                elif isinstance(message, messages.ImageReady):
                    if seen.db is not None and message.db != seen.db:
                        continue
                    saved = await _fetch(http, out, message)
                    if saved is not None:
                        seen.images[message.run_id, message.kind] = saved
                elif isinstance(message, messages.ResyncRequired):
                    # Events or pushes were dropped (design §6.9): the subscription
                    # ended, and the run list or an image may be gone.
                    await send("subscribe", cursor=seen.cursor)
                    await send("list_runs")
                elif isinstance(message, messages.ErrorReply):
                    if db is not None and message.request_id == "c1":
                        raise DatabaseRefused(f"database {db!r}: {message.message}")
                    seen.errors.append(message)
                    print(f"error {message.code}: {message.message}", file=sys.stderr)
            seen.complete = True
    return seen


async def _fetch(http: HttpClient, out: Path, notice: messages.ImageReady) -> SavedImage | None:
    """Fetch the image of ``notice`` and save it; None if it is no longer held (404)."""
    fetched = await http.get(notice.url, max_body=MAX_IMAGE)
    if fetched.status == 404:
        return None
    if fetched.status != 200:
        first = fetched.body.decode("utf-8", "replace").splitlines()[:1]
        raise ConnectionError(
            f"GET {notice.url.split('?')[0]}: {' '.join(first) or fetched.status}"
        )
    path = out / f"run{notice.run_id}-{notice.kind}.png"
    await trio.Path(path).write_bytes(fetched.body)
    return SavedImage(
        run_id=notice.run_id,
        kind=notice.kind,
        revision=notice.revision,
        width=notice.width,
        height=notice.height,
        size=len(fetched.body),
        path=path,
    )


def listing(seen: Collection) -> list[str]:
    """The printed table: one line per saved image, in run order."""
    lines = [f"{'run':>4}  {'kind':<9}  {'rev':>3}  {'size':>7}  {'bytes':>6}  {'job':>4}  status"]
    for (run_id, kind), image in sorted(seen.images.items()):
        size = f"{image.width}x{image.height}"
        job = seen.job(run_id)
        lines.append(
            f"{run_id:>4}  {kind:<9}  {image.revision:>3}  {size:>7}  {image.size:>6}  "
            f"{'-' if job is None else job:>4}  {seen.status(run_id)}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """The command line; see the module docstring. Returns the exit status."""
    parser = OneLineParser(
        prog="python -m examples.preview.client",
        label="preview_client",
        description="Save the PNG previews a preview server pushes.",
    )
    parser.add_argument("url", help="the server, e.g. ws://127.0.0.1:8765")
    parser.add_argument("--select", type=count(), default=None, help="run to select first")
    parser.add_argument("--out", default="previews", help="folder for the PNGs (previews)")
    parser.add_argument("--db", default=None, help="the database id to use (see --databases)")
    parser.add_argument(
        "--databases", action="store_true", help="print the server's databases and exit"
    )
    parser.add_argument("--token", default=None, help="the server's token (default: found)")
    parser.add_argument(
        "--timeout", type=seconds(allow_zero=False, maximum=3600), default=30.0,
        help="seconds to wait (30)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        url, token = client_target(args.url, args.token)
    except ValueError as exc:
        parser.error(str(exc))
    out = Path(args.out)
    try:
        if args.databases:
            listed = trio.run(lambda: databases(url, token=token, timeout=args.timeout))
            for line in database_lines(listed):
                print(line)
            return 0
        seen = trio.run(
            lambda: collect(
                url, out, select=args.select, db=args.db, token=token, timeout=args.timeout
            )
        )
    except BaseException as exc:  # one line for a failed connection; others re-raised
        error = leaf(exc)
        if isinstance(error, DatabaseRefused):
            print(f"preview_client: {error}", file=sys.stderr)
            return 2
        if isinstance(error, trio.TooSlowError):  # --databases got no list in time
            print(f"preview_client: {url}: no answer within {args.timeout:g} s", file=sys.stderr)
            return 1
        if isinstance(error, FetchError):  # an image could not be fetched
            print(f"preview_client: {url}: {error}", file=sys.stderr)
            return 1
        problem = connection_problem(error)
        if problem is None:
            raise
        if isinstance(error, ConnectionClosed):  # connected, then the server went away
            print(f"preview_client: {url}: {problem}", file=sys.stderr)
            return 1
        print(f"preview_client: cannot connect to {url}: {problem}", file=sys.stderr)
        return 2
    for line in listing(seen):
        print(line)
    if not seen.complete:
        missing = ", ".join(f"run{r}-{k}" for r, k in seen.missing()[:10])
        print(f"timeout after {args.timeout:g} s; missing: {missing or 'the run list'}")
        return 1
    print(f"saved {len(seen.images)} images of {len(seen.runs)} runs into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
