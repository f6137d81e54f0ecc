"""Opening and closing the ledger's one SQLite connection; classifying its errors (§6.10).

:func:`open_connection` inspects the file first (read-only,
:mod:`actors._eventlog._ledger._inspect`), creates a missing ledger atomically, and only
then opens it for writing: migrates an older schema, prunes old events, and starts a
session whose marker it checkpoints into the database file (design §6.12).
"""

from __future__ import annotations

import logging
import os
import secrets
import sqlite3
import urllib.parse
from typing import TYPE_CHECKING

from ...errors import LedgerCorrupt, LedgerError, LedgerUnavailable
from ._inspect import inspect_ledger
from ._schema import create_ledger, migrate, prune_events

if TYPE_CHECKING:
    from ._inspect import Inspection

__all__ = ["classify_error", "keep_log", "open_connection"]

_log = logging.getLogger("actors.eventlog")

#: Milliseconds a statement waits for a lock held by another connection (e.g. an
#: operator's ``sqlite3`` shell) before the attempt counts as a failure.
_BUSY_TIMEOUT_MS = 100
#: SQLite's primary result codes by meaning (the low byte of an extended code).
_CORRUPT_CODES = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB
_UNAVAILABLE_CODES = frozenset({5, 6, 7, 8, 10, 13, 14, 15})  # BUSY ... PROTOCOL


def classify_error(
    path: str, exc: sqlite3.Error, doing: str, *, retry_after: float = 0.05
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
