"""The SQLite ledger: its store, its one connection, its transactions, its errors (§6.10).

:class:`SQLiteLedger` is the :class:`~actors._eventlog._ledger._commit.BatchLedger` on a
:class:`SQLiteStore`. :func:`open_connection` inspects the file first (read-only,
:mod:`actors._eventlog._ledger._inspect`), creates a missing ledger atomically, and only
then opens it for writing: migrates an older schema, prunes old events, and starts a
session whose marker it checkpoints into the database file (design §6.12).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import sqlite3
import urllib.parse
from typing import TYPE_CHECKING

import trio

from ..._core import Backoff
from ...errors import LedgerCorrupt, LedgerError, LedgerUnavailable
from ._commit import BatchLedger
from ._inspect import inspect_ledger
from ._reads import LedgerReads
from ._schema import RUN_COLUMNS, create_ledger, migrate, prune_events

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._commit import Batch
    from ._inspect import Inspection, LedgerSnapshot
    from ._wal import WalReport

__all__ = ["SQLiteLedger", "SQLiteStore", "classify_error", "keep_log", "open_connection"]

_log = logging.getLogger("actors.eventlog")

#: Milliseconds a statement waits for a lock held by another connection (e.g. an
#: operator's ``sqlite3`` shell) before the attempt counts as a failure.
_BUSY_TIMEOUT_MS = 100
#: SQLite's primary result codes by meaning (the low byte of an extended code).
_CORRUPT_CODES = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB
_UNAVAILABLE_CODES = frozenset({5, 6, 7, 8, 10, 13, 14, 15})  # BUSY ... PROTOCOL


def classify_error(
    path: str, exc: BaseException, doing: str, *, retry_after: float = 0.05
) -> LedgerError:
    """The ledger error for a SQLite failure while ``doing`` something.

    Disk full, I/O errors, locks and a read-only file are :class:`LedgerUnavailable`
    (``cause`` and ``retry_after``, in seconds, in ``details``); a damaged page is
    :class:`LedgerCorrupt`; anything else a plain :class:`LedgerError`.
    """
    name = getattr(exc, "sqlite_errorname", type(exc).__name__)
    code = getattr(exc, "sqlite_errorcode", None)
    cause = f"{name}: {exc}"
    primary = None if code is None else code & 0xFF
    if primary in _CORRUPT_CODES:
        return LedgerCorrupt(f"ledger {path!r}: {doing}: {cause}", cause=cause)
    if primary in _UNAVAILABLE_CODES:
        return LedgerUnavailable(
            f"ledger {path!r} is unavailable ({doing}): {cause}",
            cause=cause,
            retry_after=retry_after,
        )
    return LedgerError(f"ledger {path!r}: {doing}: {cause}")


def open_connection(
    path: str, *, synchronous: str, keep_requests: int, keep_events: int | None
) -> tuple[sqlite3.Connection, str, Inspection]:
    """Inspect, create if missing, and open the ledger for writing.

    Returns:
        The connection (autocommit, WAL, usable from one worker thread at a time), the
        session marker (``open TOKEN``) every commit writes, and the inspection.

    Raises:
        LedgerCorrupt, LedgerVersionUnsupported, LedgerError: as :meth:`Ledger.open`.
    """
    inspection = inspect_ledger(path, keep_requests=keep_requests, keep_events=keep_events)
    if inspection is None:
        create_ledger(path)
        inspection = inspect_ledger(path, keep_requests=0, keep_events=keep_events)
        assert inspection is not None
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot open ledger {path!r}: {exc}") from None
    session = f"open {secrets.token_hex(8)}"
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        migrate(conn, inspection.version)
        if keep_events is not None:
            prune_events(conn, keep_events)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('session', ?)", (session,))
        # Into the database file itself: from now on it says a log may hold commits.
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    except sqlite3.Error as exc:
        conn.close()
        raise classify_error(path, exc, "opening") from None
    if busy:
        _log.warning(
            "ledger %s: the checkpoint at open was blocked by another connection",
            path,
            extra={"ledger": path},
        )
    return conn, session, inspection


def keep_log(path: str, conn: sqlite3.Connection) -> None:
    """Close ``conn`` without SQLite removing the ``-wal`` (after a failed final commit).

    A read-only connection outlives the writer; as the last one it may neither
    checkpoint nor remove the log, so the next open finds the session unfinished and
    its log in place, as after a crash.
    """
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        reader = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        conn.close()
        return
    try:
        reader.execute("SELECT count(*) FROM meta").fetchone()
        conn.close()
    finally:
        reader.close()


class SQLiteStore:
    """A ledger's one SQLite connection and what it does in a worker thread (§6.10).

    Every method but :meth:`cancel` runs in a worker thread, one at a time
    (:attr:`limiter`): the connection is never shared by two threads at once.

    Args:
        path: The database file; created (atomically, with the schema) if missing.
        synchronous: ``PRAGMA synchronous`` (``FULL``, ``NORMAL`` or ``EXTRA``).
        read_timeout: Seconds (trio clock) a read may take (design §6.19).
        retry_after: Seconds: the ``retry_after`` of a read SQLite failed.
    """

    #: The errors of the engine, classified by :meth:`classify` (never a crash).
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(
        self, path: str, *, synchronous: str, read_timeout: float, retry_after: float
    ) -> None:
        self.path = path
        self._synchronous = synchronous
        self.limiter = trio.CapacityLimiter(1)
        #: Reads share the connection and its limiter: they see every commit before them.
        self.reads = LedgerReads(
            self,
            self.limiter,
            lambda: self.conn,
            timeout=read_timeout,
            retry_after=retry_after,
        )
        self.conn: sqlite3.Connection | None = None
        self._session = ""
        #: What the write-ahead-log check found at open (None without a ``-wal``).
        self.wal_report: WalReport | None = None

    def classify(self, exc: BaseException, doing: str, *, retry_after: float = 0.05) -> LedgerError:
        """The ledger error for ``exc`` while ``doing`` something (:func:`classify_error`)."""
        return classify_error(self.path, exc, doing, retry_after=retry_after)

    async def cancel(self) -> None:
        """Nothing to stop: SQLite has no server; an abandoned thread finishes alone."""
        await trio.lowlevel.checkpoint()

    def release(self) -> None:
        """Let go of the connection: a commit a worker thread starts later fails (the
        thread still running the final commit keeps its own reference and closes it)."""
        self.conn = None

    def open(self, keep_requests: int, keep_events: int | None) -> LedgerSnapshot:
        """Inspect, create if missing, open for writing; return what boot needs."""
        conn, self._session, inspection = open_connection(
            self.path,
            synchronous=self._synchronous,
            keep_requests=keep_requests,
            keep_events=keep_events,
        )
        self.conn = conn
        self.wal_report = inspection.wal
        return inspection.snapshot

    def commit(self, batch: Batch) -> None:
        """Write ``batch`` in one transaction; set ``batch.committed`` once it is durable."""
        conn = self.conn
        if conn is None:
            raise sqlite3.OperationalError("ledger is closed")
        conn.execute("BEGIN")
        try:
            if batch.requests:
                conn.executemany(
                    "INSERT INTO requests VALUES (?, ?, ?, ?, ?, ?, NULL)", batch.requests
                )
            if batch.detached:
                conn.executemany(
                    "UPDATE requests SET cancelled_by = ? WHERE request_id = ?", batch.detached
                )
            if batch.runs:
                conn.executemany(
                    f"INSERT OR REPLACE INTO runs VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
                    batch.runs.values(),
                )
            if batch.segments:
                conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", batch.event_rows())
            if batch.meta:
                conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", batch.meta.items())
            # Every commit carries this session's marker, so a log from another session
            # or ledger is told apart at the next open (design §6.12).
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('session', ?)", (self._session,))
            conn.execute("COMMIT")
            batch.committed = True
        except BaseException:
            # SQLite may have rolled back already (disk full): keep the first error.
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    def close(self, batches: list[Batch], commit: Callable[[Batch], None]) -> None:
        """Commit ``batches`` (with ``commit``), mark the session closed, close.

        A failure keeps the write-ahead log for the next open, as after a crash (§6.12).
        """
        conn = self.conn
        if conn is None:
            return
        closed = "closed" + self._session.removeprefix("open")
        try:
            for batch in batches:
                if not batch.committed:  # an abandoned commit may have finished it
                    commit(batch)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('session', ?)", (closed,))
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            self.conn = None
            keep_log(self.path, conn)
            raise
        self.conn = None
        conn.close()  # the last connection: SQLite removes the -wal


class SQLiteLedger(BatchLedger):
    """The SQLite ledger behind a durable event log (design §6.10).

    A :class:`BatchLedger` on a :class:`SQLiteStore`.

    Args:
        path: The database file; created (atomically, with the schema) if missing.
        synchronous: ``PRAGMA synchronous`` (``FULL``, ``NORMAL`` or ``EXTRA``).
        commit_linger: Seconds (trio clock) the writer waits after the first staged row
            before committing, to grow the batch; 0 commits as soon as it is free.
        max_pending_rows: Staged rows above which :meth:`wait_writable` blocks.
        retry: The delays between attempts to commit a batch that failed (seconds).
        read_timeout: Seconds (trio clock) a read waits, for the commit before it and
            for SQLite, before it raises ``LedgerUnavailable`` (design §6.19).
        stall_timeout: Seconds (trio clock) a commit may run before the watchdog
            declares the ledger unavailable (design §6.19).
    """

    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "FULL",
        commit_linger: float = 0.0,
        max_pending_rows: int = 50_000,
        retry: Backoff | None = None,
        read_timeout: float = 5.0,
        stall_timeout: float = 5.0,
    ) -> None:
        retry = retry or Backoff(base=0.05, cap=2.0)
        store = SQLiteStore(
            path, synchronous=synchronous, read_timeout=read_timeout, retry_after=retry.base
        )
        super().__init__(
            store,
            commit_linger=commit_linger,
            max_pending_rows=max_pending_rows,
            retry=retry,
            stall_timeout=stall_timeout,
        )
