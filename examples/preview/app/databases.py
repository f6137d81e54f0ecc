"""Databases: a preview server of several QCoDeS databases (design §7.5).

The server is given paths: ``.db`` files, and folders whose ``*.db`` files it serves
(non-recursive: a measurement folder keeps its databases side by side, and a recursive
walk of a large tree on every poll would cost more than it finds). Each database is one
:class:`~examples.preview.app.databases.DatabaseEntry` with its own
:class:`~examples.preview.app.preview_app.PreviewApp`: its own runtime, helpers that open it
read-only (design §7.2), runs and images. The first database is started with the
server; the others are *idle* until a client first uses one (``use_database``), and
stay started until the server stops. Every database's runs are reported to one event
log (the first database's), so a client follows all of them with one subscription;
each run's arguments name its database (``arguments.db``).

:class:`Databases` serves, for the front door:

* ``list_databases`` → ``database_list`` (every entry, and the one the connection uses);
* ``use_database`` {db} → ``ok``: later run requests of this connection concern that
  database (started first, within ``open_timeout`` seconds); its image notices replace
  those of the database used before. An unknown id is ``invalid_command`` naming
  ``db``; an entry in error is ``source_unreadable``; one still starting after the
  timeout is ``source_not_ready`` (retry);
* every other request: the handler of the connection's database's app (the first
  database until the connection says otherwise), else the front door's own;
* the image route of every database (:class:`~examples.preview.app.images.ImageRoute`).

Folders are looked at again every ``scan_interval`` seconds (trio has no file-system
notifications; a scan runs in a worker thread within ``job_timeout``; one that fails is
logged with its traceback, ``event=scan_failed``, and the next one tries again). A new file is
checked (read-only, a moment) and announced with ``database_added``: ``idle``, or
``error`` with the reason (not SQLite, no QCoDeS ``runs`` table); an entry in error is
checked again at each scan, so a file still being created becomes usable. A file that is
gone is ``database_removed``; a started one is stopped (its helpers are reaped) and
stays listed in ``error`` ("the file is gone") until the file is back, so a client
looking at it is told why. A file changed in place (its device, inode, size,
modification time or SQLite header differ from its last check) is checked again: the
same database (being written) stays as it is, a damaged one becomes an entry in error
(its helpers stopped), another database (replaced by a rename) is removed and added
again. A symbolic link is followed only to a regular file and listed by its own name.
A name is shown with U+FFFD for bytes that are not UTF-8 and for control characters; a
file whose path is not UTF-8 is listed in error (its helpers could not be given it).
At most ``max_databases`` are served; more are logged once each and left out. The
first database is never removed nor checked again.

**One database.** :class:`DatabaseEntry`: one database of a preview server of several (design §7.5).

An entry is found (``idle`` once checked readable, or ``error`` with the reason), then
started on first use (``starting``, then ``ready``): :meth:`DatabaseEntry.serve` runs
its app's runtime until the entry is stopped or the server stops. No I/O of its own
but in :meth:`serve`.
"""

from __future__ import annotations

import logging
import os
import unicodedata
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, get_args

import attrs
import trio

from actors import open_runtime
from actors.errors import InvalidCommand, SourceNotReady, SourceUnreadable, UnknownType
from protocol import messages

from ...web.api import BUILTIN_HANDLERS
from .image_urls import database_id, listed_path
from .images import ImageRoute
from .preview_app import PreviewApp, open_database

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from actors import EventLogClient

    from ...web.api import Handler
    from ...web.connection import Connection
    from ...web.frontdoor import FrontDoor
    from ...web.routes import Route
    from .config import PreviewConfig

__all__ = ["Databases", "file_stamp", "find_databases", "DatabaseEntry", "display_name"]

#: A file's device, inode, size (bytes), modification time (ns) and header bytes.
FileStamp: TypeAlias = tuple[int, int, int, int, bytes]
#: Bytes of a file's start kept in its stamp: SQLite's database header.
_HEADER_BYTES = 100

LOGGER = logging.getLogger("examples.preview")
#: ``conn.data`` key of the id of the database a connection uses.
_CURRENT = "preview_db"
#: Why a file is not served, by :class:`~actors.errors.SourceUnreadable` reason: what
#: clients are told (never the path).
_WHY = {
    "missing": "the file is gone",
    "not_a_file": "not a regular file",
    "not_sqlite": "not an SQLite database",
    "not_qcodes": "no QCoDeS runs table",
    "unreadable": "unreadable",
    "path_not_utf8": "its path is not UTF-8 (rename it)",
    "check_failed": "checking it failed (see the server's log)",
}


def find_databases(paths: Sequence[Path]) -> list[Path]:
    """The database files of ``paths``, in order, each once (blocking I/O).

    A folder gives its ``*.db`` files (sorted by name, non-recursive); a file is kept
    as it is (whatever its name: the user named it); a path that is neither is left out.
    A symbolic link is followed only to a regular file, and is listed by its own name in
    its folder, never its target's (:func:`~examples.preview.app.image_urls.listed_path`).
    """
    found: dict[Path, Path] = {}
    for path in paths:
        try:
            if path.is_dir():
                for child in sorted(path.glob("*.db")):
                    if child.is_file():  # follows a link: only to a regular file
                        found.setdefault(child.resolve(), listed_path(child))
            elif path.is_file():
                found.setdefault(path.resolve(), listed_path(path))
        except OSError as exc:  # e.g. a folder we may not read: nothing from it
            LOGGER.warning("cannot look into %s: %s", path, exc, extra={"path": str(path)})
    return list(found.values())


def file_stamp(path: Path) -> FileStamp | None:
    """What says the file at ``path`` changed, or None if it cannot be read (blocking
    I/O): its device, inode, size (bytes), modification time (ns) and first
    :data:`_HEADER_BYTES` bytes (SQLite's header: damage shows there even within one
    tick of the clock, and its change counter moves at each write)."""
    try:
        with path.open("rb") as file:
            stat = os.fstat(file.fileno())
            header = file.read(_HEADER_BYTES)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, header)


def _look(paths: Sequence[Path]) -> list[tuple[Path, FileStamp | None]]:
    return [(path, file_stamp(path)) for path in find_databases(paths)]


def _check_file(path: Path) -> tuple[FileStamp | None, dict[str, Any]]:
    stamp = file_stamp(path)  # before: a change while checking shows at the next scan
    return stamp, open_database(path)


class Databases:
    """Every database of one preview server (see the module docstring).

    Args:
        primary: The first database's app, started by the server itself.
        paths: The paths given (files and folders); None: only ``primary``.
        config: The settings each other database's app starts from (its ``db`` and
            ``ledger`` are replaced: the shared event log keeps the ledger), and
            ``max_databases``, ``scan_interval``, ``open_timeout`` and ``job_timeout``
            (the most one scan or one check of a file may take, seconds).
    """

    def __init__(
        self, primary: PreviewApp, paths: Sequence[Path] | None, config: PreviewConfig
    ) -> None:
        self._config = config
        self._paths = list(paths or ())
        self._max = config.max_databases
        self._scan_interval = config.scan_interval
        self._scan_timeout = config.job_timeout
        self._open_timeout = config.open_timeout
        first = DatabaseEntry.started(primary)
        self.primary = first
        self.entries: dict[str, DatabaseEntry] = {first.db: first}
        """Every database by id, in the order found."""
        self._ignored: set[Path] = set()
        self._front: FrontDoor | None = None
        self._eventlog: EventLogClient | None = None
        self._nursery: trio.Nursery | None = None
        self.scans = 0
        """Scans of the folders done."""

    # -- running ------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self, eventlog: EventLogClient, front: FrontDoor) -> AsyncIterator[None]:
        """Serve and watch the databases for the duration of the block.

        Entering (a checkpoint) lists the databases the paths hold now; leaving stops
        every database started here (their helpers are reaped) and the watch.
        """
        self._eventlog = eventlog
        self._front = front
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if self._paths:
                await self.scan()
                nursery.start_soon(self._watch)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()
                self._nursery = None

    async def _watch(self) -> None:
        while True:
            await trio.sleep(self._scan_interval)
            try:
                await self.scan()
            except Exception as exc:  # contained: the next scan tries again
                LOGGER.error(
                    "a scan of the folders failed", exc_info=True,
                    extra={"event": "scan_failed", "error": type(exc).__name__},
                )  # fmt: skip

    async def scan(self) -> None:
        """Look at the paths once: add new databases, drop gone ones (a checkpoint)."""
        with trio.move_on_after(self._scan_timeout) as scope:
            looked = await trio.to_thread.run_sync(_look, self._paths, abandon_on_cancel=True)
        if scope.cancelled_caught:
            LOGGER.warning("a scan of the folders took over %g s: skipped", self._scan_timeout)
            return
        self.scans += 1
        present = {path for path, _ in looked}
        for entry in list(self.entries.values()):
            if entry is self.primary or entry.path in present:
                continue
            if entry.app is not None:  # in use: stays listed, in error, until it is back
                entry.stop()
                entry.fail("the file is gone")
                entry.kept = True
                self._announce(entry)
            elif not entry.kept:
                self._remove(entry)
        for path, stamp in looked:
            known = self._entry_of(path)
            if known is None:
                if len(self.entries) >= self._max:
                    if path not in self._ignored:
                        self._ignored.add(path)
                        LOGGER.warning(
                            "%s: not served, over max_databases (%d)", display_name(path),
                            self._max,
                            extra={"event": "database_ignored", "database": display_name(path)},
                        )  # fmt: skip
                    continue
                entry = DatabaseEntry.found(path)
                self.entries[entry.db] = entry
                await self._check(entry)
            elif known.state == "error" and known.app is None:
                await self._check(known)  # perhaps written since
            elif known is not self.primary and stamp != known.stamp:
                await self._recheck(known)  # written, damaged or replaced

    def _entry_of(self, path: Path) -> DatabaseEntry | None:
        return next((e for e in self.entries.values() if e.path == path), None)

    async def _check(self, entry: DatabaseEntry, *, announce: bool = True) -> None:
        before = entry.info()
        try:
            stamp, identity = await self._check_in_thread(entry.path)
        except (SourceUnreadable, trio.TooSlowError) as exc:
            entry.fail(self._why(exc))
        else:
            entry.stamp = stamp
            entry.identity = identity
            entry.state = "idle"
            entry.error = None
            entry.kept = False
            entry.runs = int(identity["run_count"])
        if announce and (entry.info() != before or entry.announced is False):
            self._announce(entry)

    async def _recheck(self, entry: DatabaseEntry) -> None:
        """Check again a served file whose stamp changed: one being written stays as it
        is; a damaged one becomes an error entry and a replaced one (another database:
        its ``source_id`` differs) a new one, its helpers stopped either way."""
        was = entry.identity.get("source_id")
        try:
            stamp, identity = await self._check_in_thread(entry.path)
        except (SourceUnreadable, trio.TooSlowError) as exc:
            entry.stop()
            entry.fail(self._why(exc))
            entry.stamp = None
            LOGGER.warning(
                "%s: changed and no longer readable: %s", entry.name, entry.error,
                extra={"event": "database_damaged", "database": entry.db},
            )  # fmt: skip
            self._announce(entry)
            return
        if identity.get("source_id") == was:  # the same database, written to
            entry.stamp = stamp
            return
        entry.stop()
        entry.fail("replaced by another database")  # wakes whoever waits for it to start
        self._remove(entry, why="replaced by another database")
        fresh = DatabaseEntry.found(entry.path)
        self.entries[fresh.db] = fresh
        await self._check(fresh)

    async def _check_in_thread(self, path: Path) -> tuple[FileStamp | None, dict[str, Any]]:
        """:func:`_check_file` in a thread, within the scan timeout.

        Raises:
            SourceUnreadable: as :func:`_check_file`; any other failure of the check too
                (reason ``check_failed``, logged with its traceback as
                ``event=database_check_failed``): one odd file never stops the watch.
            trio.TooSlowError: it took longer.
        """
        with trio.fail_after(self._scan_timeout):
            try:
                return await trio.to_thread.run_sync(_check_file, path, abandon_on_cancel=True)
            except SourceUnreadable:
                raise
            except Exception as exc:  # one odd file never stops the watch, nor the server
                LOGGER.error(
                    "%s: checking it failed", display_name(path), exc_info=True,
                    extra={"event": "database_check_failed", "database": display_name(path),
                           "error": type(exc).__name__},
                )  # fmt: skip
                raise SourceUnreadable(
                    f"checking it failed ({type(exc).__name__})", reason="check_failed"
                ) from None

    def _why(self, exc: SourceUnreadable | trio.TooSlowError) -> str:
        """Why a check failed, in words for clients (a SourceUnreadable's message names the
        path)."""
        if isinstance(exc, SourceUnreadable):
            return _WHY.get(str(exc.details.get("reason")), "unreadable")
        return f"checking it took over {self._scan_timeout:g} s"

    def _remove(self, entry: DatabaseEntry, *, why: str = "gone") -> None:
        del self.entries[entry.db]
        entry.stop()
        LOGGER.info(
            "%s: %s, no longer served", entry.name, why,
            extra={"event": "database_removed", "database": entry.db, "why": why},
        )  # fmt: skip
        if self._front is not None:
            self._front.broadcast_nowait(messages.DatabaseRemoved(db=entry.db))

    def _announce(self, entry: DatabaseEntry) -> None:
        entry.announced = True
        LOGGER.info(
            "%s: %s%s", entry.name, entry.state, f" ({entry.error})" if entry.error else "",
            extra={"event": "database_state", "database": entry.db, "state": entry.state},
        )  # fmt: skip
        if self._front is not None:
            self._front.broadcast_nowait(messages.DatabaseAdded(database=entry.info()))

    async def _open(self, entry: DatabaseEntry) -> None:
        """Start ``entry``'s app and runtime if it is idle; wait until it is ready."""
        if entry.state == "idle":
            if self._nursery is None or self._eventlog is None:
                raise RuntimeError("the databases are not running")
            config = attrs.evolve(self._config, db=entry.path, ledger=None)
            entry.begin(PreviewApp(config, entry.identity))
            self._announce(entry)
            self._nursery.start_soon(self._serve, entry, self._eventlog)
        with trio.move_on_after(self._open_timeout):
            await entry.wait_settled()
        if entry.state == "starting":
            raise SourceNotReady(f"database {entry.db!r} is still starting; try again")
        if entry.state == "error":
            raise SourceUnreadable(f"database {entry.db!r}: {entry.error}", fields=["db"])

    async def _serve(self, entry: DatabaseEntry, eventlog: EventLogClient) -> None:
        try:
            await entry.serve(eventlog, on_ready=lambda: self._announce(entry))
        except Exception as exc:  # contained: one database's failure never stops the server
            LOGGER.warning("%s: cannot serve it: %r", entry.name, exc, extra={"database": entry.db})
            entry.fail(f"its helpers failed to start ({type(exc).__name__})")
            self._announce(entry)
        # else: stopped (its file is gone): announced by the scan

    # -- what the front door uses -------------------------------------------------------

    def source(self, db: str) -> PreviewApp | None:
        """The started app of database ``db`` (its images), or None."""
        entry = self.entries.get(db)
        return None if entry is None else entry.app

    @property
    def routes(self) -> list[Route]:
        """The image route of every database (design §7.6)."""
        return [ImageRoute(self.source).route()]

    @property
    def handlers(self) -> dict[str, Handler]:
        """Front-door handlers of every client request (see the module docstring)."""
        handlers: dict[str, Handler] = {
            "list_databases": self.on_list_databases,
            "use_database": self.on_use_database,
        }
        for cls in get_args(messages.ClientRequest):
            tag = messages.TAGS[cls]
            if tag not in handlers:
                handlers[tag] = self._routed(tag)
        return handlers

    def _routed(self, tag: str) -> Handler:
        async def handler(conn: Connection, request: Any) -> messages.Message | None:
            entry = self._current(conn)
            app = entry.app
            if app is None and self.primary.app is not None and tag in self.primary.app.handlers:
                why = entry.error or "not started; use_database starts it"
                raise SourceUnreadable(f"database {entry.db!r} is not served: {why}")
            own = None if app is None else app.handlers.get(tag)
            if own is None:
                own = BUILTIN_HANDLERS.get(tag)
            if own is None:
                raise UnknownType(
                    f"this server does not serve {tag!r} requests", fields=["$.type"], type=tag
                )
            return await own(conn, request)

        return handler

    def _current(self, conn: Connection) -> DatabaseEntry:
        db = conn.data.get(_CURRENT, self.primary.db)
        entry = self.entries.get(db)
        if entry is None:
            raise InvalidCommand(
                f"the database {db!r} this connection used is gone; see list_databases",
                fields=["db"],
            )
        return entry

    async def on_list_databases(
        self, conn: Connection, request: messages.ListDatabases
    ) -> messages.DatabaseList:
        """``list_databases`` → ``database_list`` (no I/O)."""
        await trio.lowlevel.checkpoint()
        current = conn.data.get(_CURRENT, self.primary.db)
        return messages.DatabaseList(
            request_id=request.request_id,
            databases=tuple(entry.info() for entry in self.entries.values()),
            current=current if current in self.entries else None,
        )

    async def on_use_database(self, conn: Connection, request: messages.UseDatabase) -> None:
        """``use_database`` → ``ok`` (see the module docstring).

        Raises:
            InvalidCommand: (``invalid_command``) no database has that id.
            SourceUnreadable: (``source_unreadable``) the database is in error.
            SourceNotReady: (``source_not_ready``) it is still starting; retry.
        """
        entry = self.entries.get(request.db)
        if entry is None:
            raise InvalidCommand(
                f"use_database: no database {request.db[:80]!r}; see list_databases",
                fields=["db"],
            )
        await self._open(entry)
        before = self.entries.get(conn.data.get(_CURRENT, self.primary.db))
        if before is not entry:
            if before is not None and before.app is not None:
                before.app.on_disconnect(conn)  # its image notices stop
            conn.data[_CURRENT] = entry.db
        LOGGER.info(
            "%s uses %s", conn.name, entry.name,
            extra={"event": "database_used", "conn": conn.name, "database": entry.db},
        )  # fmt: skip

    def on_disconnect(self, conn: Connection) -> None:
        """Stop the image notices of a closed connection (a front-door hook)."""
        for entry in self.entries.values():
            if entry.app is not None:
                entry.app.on_disconnect(conn)

    def stop_probing(self) -> None:
        """Stop every started database's change probe (at shutdown)."""
        for entry in self.entries.values():
            if entry.app is not None:
                entry.app.stop_probing()

    async def cancel_open(self, *, actor: str, waiting_only: bool = False) -> int:
        """Cancel the open event-log runs of every started database (at shutdown)."""
        total = 0
        for entry in list(self.entries.values()):
            if entry.app is not None and entry.state == "ready":
                total += await entry.app.cancel_open(actor=actor, waiting_only=waiting_only)
        return total


def display_name(path: Path) -> str:
    """``path``'s name as text any client can show and any log can hold on one line:
    bytes that are not UTF-8 and control characters (a newline...) become U+FFFD."""
    name = os.fsencode(path.name).decode("utf-8", "replace")
    return "".join("\ufffd" if unicodedata.category(c) == "Cc" else c for c in name)


@attrs.define(kw_only=True, eq=False)
class DatabaseEntry:
    """One database: its id, state and, once started, its app."""

    path: Path
    """The file, as listed in its folder (never sent to clients; see
    :func:`~examples.preview.app.image_urls.listed_path`)."""
    db: str
    """Its id (:func:`~examples.preview.app.image_urls.database_id`)."""
    state: str = "idle"
    """``idle``, ``starting``, ``ready`` or ``error`` (design §7.5)."""
    error: str | None = None
    """Why it is in ``error``."""
    runs: int | None = None
    """Its run count when last checked."""
    identity: dict[str, Any] = attrs.field(factory=dict)
    """:func:`~examples.preview.app.preview_app.open_database`'s answer, once checked."""
    stamp: tuple[int, int, int, int, bytes] | None = None
    """The file's device, inode, size, modification time and header when last checked
    (:func:`~examples.preview.app.databases.file_stamp`); None until checked readable."""
    app: PreviewApp | None = None
    """Its app, once started."""
    announced: bool = False
    """True once a ``database_added`` told the clients about it."""
    kept: bool = False
    """True while it stays listed, in error, after its file went away in use."""
    _settled: trio.Event = attrs.field(factory=trio.Event)
    _scope: trio.CancelScope | None = None
    """The scope of the :meth:`serve` of the latest :meth:`begin`."""

    @classmethod
    def found(cls, path: Path) -> DatabaseEntry:
        """A new entry of the file at ``path`` (not checked yet: ``error`` until it is)."""
        return cls(path=path, db=database_id(path), state="error", error="not checked yet")

    @classmethod
    def started(cls, app: PreviewApp) -> DatabaseEntry:
        """The entry of an app the server started itself (``ready``)."""
        entry = cls(
            path=listed_path(Path(app.config.db)),
            db=app.db_id,
            state="ready",
            runs=int(app.identity.get("run_count", 0)),
            identity=app.identity,
            app=app,
            announced=True,
        )
        entry._settled.set()
        return entry

    @property
    def name(self) -> str:
        """The file's name as clients and logs see it (:func:`display_name`)."""
        return display_name(self.path)

    def info(self) -> messages.DatabaseInfo:
        """The entry as clients see it."""
        return messages.DatabaseInfo(
            db=self.db,
            name=self.name[:255] or self.db,
            state=self.state,
            error=None if self.error is None else self.error[: messages.MAX_TEXT_LENGTH],
            runs=self.runs,
        )

    def fail(self, why: str) -> None:
        """Put the entry in ``error`` (its app, if any, is dropped)."""
        self.state = "error"
        self.error = why
        self.app = None
        self._settled.set()

    def begin(self, app: PreviewApp) -> None:
        """``idle`` → ``starting`` with ``app`` (then run :meth:`serve`)."""
        self.state = "starting"
        self.app = app
        # A fresh scope each time: a scope serves one ``with`` only, and a file gone
        # and back is served again.
        self._scope = trio.CancelScope()
        self._settled = trio.Event()

    async def wait_settled(self) -> None:
        """Wait until the entry is ``ready`` or in ``error`` (no timeout of its own)."""
        await self._settled.wait()

    async def serve(self, eventlog: EventLogClient, on_ready: Callable[[], object]) -> None:
        """Run the app's runtime, reporting to ``eventlog``, until :meth:`stop` or
        cancelled; the entry is ``ready`` meanwhile, and ``on_ready()`` is called once it
        is (a checkpoint).

        Raises:
            ActorError: the runtime could not start (e.g. ``helper_startup_failed``).
        """
        app = self.app
        scope = self._scope
        if app is None or scope is None:
            raise RuntimeError("serve() after begin() only")
        runtime_config = await trio.to_thread.run_sync(app.runtime_config)
        with scope:
            async with (
                open_runtime(runtime_config) as runtime,
                app.running(runtime, eventlog=eventlog),
            ):
                self.state = "ready"
                self._settled.set()
                on_ready()
                await trio.sleep_forever()

    def stop(self) -> None:
        """Stop serving (its helpers are reaped as :meth:`serve` unwinds); never waits."""
        if self._scope is not None:
            self._scope.cancel()
        self.app = None
