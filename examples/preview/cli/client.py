"""A command-line client of the preview server: save the PNGs of every run (design §7.2).

Usage::

    python -m examples.preview.cli.client ws://127.0.0.1:8765 [--select RUN] [--out DIR]
                                      [--db ID] [--token T] [--timeout S]
    python -m examples.preview.cli.client ws://127.0.0.1:8765 --databases

``--databases`` prints the server's databases (id, state, runs, file name, error) and
exits. Otherwise it connects, switches to database ``ID`` if ``--db`` is given
(``use_database``; an unknown id is exit status 2; so is a ``--select`` run the
database does not have, ``unknown_run``), asks ``list_databases`` (a server of
several databases, design §7.5: the session is about the one the connection uses; the
other databases' runs are skipped), reads the event log from the start (so it sees every
run's ``job_queued`` ... ``job_finished``) page by page with ``watch`` until a page is
empty, then subscribes after the last one (a subscription's backlog beyond
``watch_limit`` goes through its bounded port, which a long log would overflow at once,
design §6.9), asks ``list_runs``, selects ``RUN`` (so the server draws it first), and
for every ``image_ready`` notice fetches the image from its URL over HTTP (design §7.6;
the token in an ``Authorization`` header) and saves it as ``DIR/run<id>-<kind>.png`` (a
newer revision overwrites an older one; an image already superseded when it is fetched,
a 404, is skipped: its newer notice follows). The websocket is read without pause: the
notices go to :data:`FETCHERS` fetch tasks (each on its own kept-alive connection)
through a table that holds only the newest revision per (run, kind), so the reader never
waits for a fetch and the table is at most runs x kinds. It stops when every run of the
newest run list is settled (:meth:`Collection.missing`), or when ``--timeout`` seconds
have passed: a run is settled once its current event-log run finished and every image
that run published came, at the finished revision or newer (so an empty run's images
count, and a kind that failed is not waited for); a run still being written needs only
its newest images.

If the server drops it for falling behind (``resync_required``, then close 4000, design
§7.4), it prints one line on stderr (why, and the event it resumes after), connects
again after :data:`BACKOFF_FIRST` seconds (doubled for each drop in a row without a new
event or image in between, up to :data:`BACKOFF_CAP`; after :data:`RECONNECTS` such
drops it gives up), sends ``use_database`` again if ``--db`` was given, reads and
subscribes as above after the newest event it has (the cursor the server named, unless
the server had sent it none), asks ``list_runs`` again (every image is announced again;
one already saved at that revision is neither fetched nor counted again) and goes on. If
the log no longer holds that cursor (``cursor_expired``) it takes a ``snapshot`` and
subscribes after its cursor (design §6.15); a run whose finish was among the events lost
then is settled by a thumbnail and a preview of any revision. Every wait is within the
one ``--timeout``.

It prints one line per image: run, kind, revision, width x height, bytes, the run's
event-log run (``job``) and its status (from the newest ``run_list``, or from the
``job_finished`` event of that event-log run if it came later). Exit status 0 when every
image came, 1 on timeout, when the server went away meanwhile (closed the connection
other than for falling behind, or dropped it too often) or refused an image (any answer
but 200 or 404), 2 for a bad argument or a refused connection (nothing listening, a
wrong token); each failure is one line on stderr. An ``http://`` address (the
dashboard's) is taken as ``ws://``. The token is ``--token``, else the ``?token=`` of
the address, else ``$TRIO_ACTORS_TOKEN``, else the one a local server wrote in its info
file (design §7.3); it is sent in an ``Authorization`` header and never printed.

Every message is read with the project's strict codec
(:func:`protocol.codec.decode_server_message`).
"""

from __future__ import annotations

from . import quiet_start

# Ctrl-C while the modules below load: no traceback (main() gives Ctrl-C back).
quiet_start.install(__name__, "trio-actors-preview-client")

import itertools  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

import trio  # noqa: E402
from trio_websocket import ConnectionClosed, HandshakeError  # noqa: E402

from protocol import messages  # noqa: E402
from protocol.codec import decode_server_message  # noqa: E402

from ...web.cli import (  # noqa: E402
    OneLineParser,
    client_target,
    connection_problem,
    count,
    describe,
    leaf,
    seconds,
    stdout_closed,
)
from ...web.closing import RESYNC_REQUIRED  # noqa: E402
from ...web.fetch import FetchError, HttpClient, open_http_client  # noqa: E402
from ...web.wsclient import open_websocket_client  # noqa: E402
from .client_collection import Collection, SavedImage  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = [
    "Collection",
    "DatabaseRefused",
    "ImageRefused",
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
#: Images fetched at once, each over its own kept-alive HTTP connection.
FETCHERS = 4
#: Reconnects in a row, without a new event or image in between, before giving up.
RECONNECTS = 5
#: Seconds (trio clock) before the first reconnect in a row; doubled for each next one,
#: up to :data:`BACKOFF_CAP`.
BACKOFF_FIRST = 0.1
BACKOFF_CAP = 2.0

_log = logging.getLogger(__name__)


class DatabaseRefused(Exception):
    """The server refused ``use_database`` (an unknown or unreadable database)."""


class RunRefused(Exception):
    """The server refused the ``select`` of ``--select RUN`` (``unknown_run``: the
    database has no such run); unlike :class:`DatabaseRefused`, the database is fine."""


class ImageRefused(Exception):
    """The server answered an image's ``GET`` with a status other than 200 or 404.

    Unlike :class:`~examples.web.fetch.FetchError` (no HTTP answer, or a cut one), the
    server did answer; the message names the path and the answer's first line.
    """


def _auth_headers(token: str | None) -> list[tuple[bytes, bytes]] | None:
    """The websocket handshake's ``Authorization: Bearer`` header, if a token is given."""
    return [(b"authorization", f"Bearer {token}".encode())] if token else None


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
    with trio.fail_after(timeout):
        async with open_websocket_client(
            url,
            extra_headers=_auth_headers(token),
            max_message_size=MAX_MESSAGE,
            connect_timeout=timeout,
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

    Every wait (each connection, each reconnect's delay, each fetch) is bounded by the
    one deadline ``timeout`` seconds (trio clock) after the call.

    Returns:
        What was seen; ``complete`` tells whether every expected image came within
        ``timeout`` seconds (trio clock).

    Raises:
        DatabaseRefused: ``db`` was given and the server refused it.
        HandshakeError: the server refused the first connection (e.g. a wrong token).
        ConnectionClosed: the server closed the connection other than for falling
            behind, or dropped the client :data:`RECONNECTS` times in a row without a
            new event or image in between.
        FetchError: an image's answer was not HTTP, was cut off, or too large.
        ImageRefused: an image was answered with a status other than 200 or 404.
    """
    await trio.Path(out).mkdir(parents=True, exist_ok=True)
    seen = Collection()
    with trio.move_on_after(timeout):
        async with open_http_client(url, token=token, max_connections=FETCHERS) as http:
            session = _Session(url, out, http, seen, select=select, db=db, token=token,
                               timeout=timeout)  # fmt: skip
            await session.run()
    return seen


class _Wanted:
    """Image notices not fetched yet: the newest revision per (run, kind).

    The websocket reader puts (never waits) and the fetchers take, so a reader never
    stops reading for a fetch; the notices held are at most runs x kinds. A (run, kind)
    being fetched is not handed out again until that fetch is done, so an older
    revision never overwrites a newer file.
    """

    def __init__(self) -> None:
        self._notices: dict[tuple[int, str], messages.ImageReady] = {}
        self._busy: set[tuple[int, str]] = set()
        self._lot = trio.lowlevel.ParkingLot()

    def put(self, notice: messages.ImageReady) -> None:
        """Hold ``notice`` unless a newer revision of its image is held already."""
        key = (notice.run_id, notice.kind)
        held = self._notices.get(key)
        if held is None or notice.revision > held.revision:
            self._notices[key] = notice
            self._lot.unpark()

    async def get(self) -> messages.ImageReady:
        """The oldest held notice whose image is not being fetched (waits for one).

        Always a checkpoint. Call :meth:`done` with its key once it is fetched.
        """
        await trio.lowlevel.checkpoint()
        while True:
            for key, notice in self._notices.items():
                if key not in self._busy:
                    del self._notices[key]
                    self._busy.add(key)
                    return notice
            await self._lot.park()

    def done(self, key: tuple[int, str]) -> None:
        """The fetch of ``key`` ended: a newer notice of it may be handed out."""
        self._busy.discard(key)
        if key in self._notices:
            self._lot.unpark()


class _Dropped(Exception):
    """A connection ended in a way the client comes back from (close 4000)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class _Session:
    """One :func:`collect`: the connections one after another, and the fetchers."""

    def __init__(
        self,
        url: str,
        out: Path,
        http: HttpClient,
        seen: Collection,
        *,
        select: int | None,
        db: str | None,
        token: str | None,
        timeout: float,
    ) -> None:
        self.url, self.out, self.http, self.seen = url, out, http, seen
        self.select, self.db, self.timeout = select, db, timeout
        self.select_id: str | None = None
        """The request id of the ``select`` sent for ``--select``, once sent."""
        self.headers = _auth_headers(token)
        self.wanted = _Wanted()
        self.listed = False  # a run list came: until then nothing is known to be missing
        self.paging = True  # reading the backlog with watch, not subscribed yet
        self.failure: Exception | None = None
        self.progress = 0  # events and images taken in: a drop after progress is no loop
        self.scope = trio.CancelScope()
        self.reading = trio.CancelScope()  # the current connection's reading, or a delay

    async def run(self) -> None:
        """Collect until every run is settled; the first failure is raised as it is."""
        with self.scope:
            async with trio.open_nursery() as nursery:
                for _ in range(FETCHERS):
                    nursery.start_soon(self._guarded, self._fetch_images)
                nursery.start_soon(self._guarded, self._connections)
        if self.failure is not None:
            raise self.failure

    async def _guarded(self, fn: Callable[[], Awaitable[None]]) -> None:
        # A failure ends the session and is raised alone, not in an exception group.
        try:
            await fn()
        except Exception as exc:
            if self.failure is None:
                self.failure = exc
            self.scope.cancel()

    def _check(self) -> None:
        if self.listed and not self.seen.missing():
            self.seen.complete = True
            self.reading.cancel()  # the connection then closes normally (code 1000)

    async def _connections(self) -> None:
        """Connect, and connect again each time the server drops the client (design
        §7.4): at most :data:`RECONNECTS` times in a row without progress, waiting
        :data:`BACKOFF_FIRST` seconds, doubling up to :data:`BACKOFF_CAP`."""
        attempt = 0
        first = True
        while not self.seen.complete:
            progress = self.progress
            self.reading = trio.CancelScope()
            try:
                await self._connection(first=first)
                continue  # complete
            except _Dropped as dropped:
                why = dropped.why
                cause: BaseException = dropped.__cause__ or dropped
            except (HandshakeError, OSError) as exc:
                if first:
                    raise
                why, cause = connection_problem(exc) or str(exc), exc
            first = False
            if self.seen.complete:
                break
            attempt = 1 if self.progress > progress else attempt + 1
            if attempt > RECONNECTS:
                raise cause
            delay = min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** (attempt - 1))
            print(
                f"preview_client: {why}; reconnecting in {delay:g} s after event "
                f"{self.seen.cursor} (attempt {attempt} of {RECONNECTS})",
                file=sys.stderr,
            )
            _log.info(
                "reconnecting after event %d: %s", self.seen.cursor, why,
                extra={"event": "client_reconnect", "why": why, "cursor": self.seen.cursor,
                       "attempt": attempt, "delay": delay},
            )  # fmt: skip
            self.reading = trio.CancelScope()
            with self.reading:
                await trio.sleep(delay)
        self.scope.cancel()  # the fetchers too

    async def _connection(self, *, first: bool) -> None:
        """One websocket connection, read until it ends.

        Raises:
            _Dropped: the server dropped the client for falling behind (close 4000).
        """
        ids = (f"c{n}" for n in itertools.count(1))
        async with open_websocket_client(
            self.url, extra_headers=self.headers, max_message_size=MAX_MESSAGE,
            connect_timeout=self.timeout,
        ) as ws:  # fmt: skip

            async def send(kind: str, **fields: Any) -> str:
                request_id = next(ids)
                request = {"type": kind, "request_id": request_id, **fields}
                await ws.send_message(json.dumps(request, separators=(",", ":")))
                return request_id

            if self.db is not None:
                await send("use_database", db=self.db)  # request c1
            await send("list_databases")  # answered first: whose runs the session sees
            # Page through the backlog with watch first: a subscribe's backlog beyond
            # watch_limit goes through its bounded port, which a long log overflows
            # at once (then the server drops the client, design §6.9).
            self.paging = True
            following = await send("watch", cursor=self.seen.cursor)
            await send("list_runs")  # every image is announced again
            if self.select is not None:
                self.select_id = await send("select", run_id=self.select)
            try:
                with self.reading:
                    while True:
                        message = decode_server_message(
                            await ws.get_message(), max_size=MAX_MESSAGE
                        )
                        following = await self._take(message, send, following)
                        self._check()
            except ConnectionClosed as exc:
                reason = exc.reason
                if reason is not None and reason.code == RESYNC_REQUIRED:
                    raise _Dropped(connection_problem(exc) or "resync required") from exc
                raise

    async def _take(
        self, message: messages.Message, send: Callable[..., Awaitable[str]], following: str
    ) -> str:
        """Take in one server message.

        ``following`` is the id of the newest ``watch`` or ``subscribe`` request; returns
        it, or the id of the next one: ``watch`` again after a page of events, and
        ``subscribe`` once a page is empty (the backlog is read).
        """
        seen = self.seen
        if isinstance(message, messages.RunList):
            seen.runs = {run.run_id: run for run in message.runs}
            self.listed = True
        elif isinstance(message, messages.Event):
            self.progress += seen._note_event(message)
        elif isinstance(message, messages.Events):
            for event in message.events:
                self.progress += seen._note_event(event)
            if self.paging and message.request_id == following:
                self.paging = bool(message.events)  # an empty page: the backlog is read
                kind = "watch" if self.paging else "subscribe"
                return await send(kind, cursor=message.cursor)
        elif isinstance(message, messages.DatabaseList):
            seen.db = message.current
        elif isinstance(message, messages.ImageReady):
            if seen.db is None or message.db == seen.db:
                held = seen.images.get((message.run_id, message.kind))
                if held is None or held.revision < message.revision:
                    self.wanted.put(message)
        elif isinstance(message, messages.SnapshotReply):
            seen._resume_at(message)
            self.paging = False
            return await send("subscribe", cursor=message.cursor)
        elif isinstance(message, messages.ErrorReply):
            if self.db is not None and message.request_id == "c1":
                raise DatabaseRefused(f"database {self.db!r}: {message.message}")
            if message.request_id is not None and message.request_id == self.select_id:
                raise RunRefused(f"--select {self.select}: {message.code}: {message.message}")
            if message.request_id == following and message.code == "cursor_expired":
                # The log no longer holds the events after the cursor (design §6.15).
                await send("snapshot")
                return following
            seen.errors.append(message)
            print(f"error {message.code}: {message.message}", file=sys.stderr)
        # resync_required: the server closes the connection next (code 4000), then the
        # client connects again and resumes after its cursor.
        return following

    async def _fetch_images(self) -> None:
        """One fetcher: fetch the wanted images one at a time, forever."""
        while True:
            notice = await self.wanted.get()
            key = (notice.run_id, notice.kind)
            try:
                held = self.seen.images.get(key)
                if held is not None and held.revision >= notice.revision:
                    continue  # came again after a reconnect: saved once
                saved = await _fetch(self.http, self.out, notice)
            finally:
                self.wanted.done(key)
            if saved is not None:
                self.seen.images[key] = saved
                self.progress += 1
                self._check()


async def _fetch(http: HttpClient, out: Path, notice: messages.ImageReady) -> SavedImage | None:
    """Fetch the image of ``notice`` and save it; None if it is no longer held (404)."""
    fetched = await http.get(notice.url, max_body=MAX_IMAGE)
    if fetched.status == 404:
        return None
    if fetched.status != 200:
        first = fetched.body.decode("utf-8", "replace").splitlines()[:1]
        raise ImageRefused(f"GET {notice.url.split('?')[0]}: {' '.join(first) or fetched.status}")
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
    quiet_start.restore()  # Ctrl-C is a KeyboardInterrupt again, reported in one line
    parser = OneLineParser(
        prog="python -m examples.preview.cli.client",
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
    if not args.databases:
        try:  # before connecting: a folder that cannot be made is no connection problem
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"argument --out: cannot make the folder {str(out)!r}: {describe(exc)}")
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
        if isinstance(error, BrokenPipeError):  # e.g. `--databases | head -1`
            return stdout_closed()
        if isinstance(error, KeyboardInterrupt):  # Ctrl-C: what is saved stays saved
            print("preview_client: interrupted", file=sys.stderr)
            return 130
        if isinstance(error, DatabaseRefused | RunRefused):
            print(f"preview_client: {error}", file=sys.stderr)
            return 2
        if isinstance(error, trio.TooSlowError):  # --databases got no list in time
            print(f"preview_client: {url}: no answer within {args.timeout:g} s", file=sys.stderr)
            return 1
        if isinstance(error, FetchError | ImageRefused):  # an image could not be fetched
            print(f"preview_client: {url}: {error}", file=sys.stderr)
            return 1
        if isinstance(error, OSError) and error.filename is not None:  # saving an image
            saving = f"cannot save {error.filename}: {describe(error)}"
            print(f"preview_client: {saving}", file=sys.stderr)
            return 1
        problem = connection_problem(error)
        if problem is None:
            raise
        if isinstance(error, ConnectionClosed):  # connected, then the server went away
            print(f"preview_client: {url}: {problem}", file=sys.stderr)
            return 1
        print(f"preview_client: cannot connect to {url}: {problem}", file=sys.stderr)
        return 2
    try:
        for line in listing(seen):
            print(line)
        if not seen.complete:
            missing = ", ".join(f"run{r}-{k}" for r, k in seen.missing()[:10])
            print(f"timeout after {args.timeout:g} s; missing: {missing or 'the run list'}")
            return 1
        print(f"saved {len(seen.images)} images of {len(seen.runs)} runs into {out}")
        sys.stdout.flush()
    except BrokenPipeError:
        return stdout_closed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
