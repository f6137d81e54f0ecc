"""The event-log ledger's schema, and the check of a file before it is opened (design §6.10).

Split out of :mod:`actors._eventlog._ledger`. :func:`check_ledger_file` reads an existing file
through a read-only (if possible immutable) connection and refuses it, with its bytes
left unchanged, unless it is a whole SQLite database with our ``application_id``, our
``user_version`` and our tables.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse

from ..errors import LedgerCorrupt, LedgerError, LedgerVersionError

__all__ = [
    "APPLICATION_ID",
    "RUN_COLUMNS",
    "SCHEMA_VERSION",
    "check_ledger_file",
    "prune_events",
]

#: The schema version this code writes (``PRAGMA user_version``).
SCHEMA_VERSION = 1
#: ``PRAGMA application_id`` of an event-log ledger ("TAEL").
APPLICATION_ID = 0x5441454C
_MAGIC = b"SQLite format 3\x00"

#: Columns of the ``runs`` table, in order; ``stage_run`` takes a dict with these keys.
RUN_COLUMNS = (
    "run_id",
    "request_id",
    "operation",
    "arguments",
    "revision",
    "snapshot_id",
    "state",
    "verdict",
    "result",
    "error",
    "cancelled_by",
    "progress",
    "interruptions",
)

_SCHEMA = f"""
CREATE TABLE requests (
    request_id TEXT PRIMARY KEY,
    content TEXT NOT NULL,
    run_id INTEGER NOT NULL,
    receipt TEXT NOT NULL,
    position INTEGER NOT NULL
);
CREATE TABLE runs (
    run_id INTEGER PRIMARY KEY,
    request_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    arguments TEXT NOT NULL,
    revision INTEGER NOT NULL,
    snapshot_id TEXT NOT NULL,
    state TEXT NOT NULL,
    verdict TEXT,
    result TEXT,
    error TEXT,
    cancelled_by TEXT,
    progress REAL,
    interruptions INTEGER NOT NULL
);
CREATE INDEX runs_open ON runs(state) WHERE state NOT IN ('finished', 'cancelled');
CREATE TABLE events (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    run_id INTEGER,
    data TEXT NOT NULL
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {SCHEMA_VERSION};
"""


#: The columns of every table of the schema, as ``PRAGMA table_info`` lists them.
_TABLE_COLUMNS = {
    "requests": ("request_id", "content", "run_id", "receipt", "position"),
    "runs": RUN_COLUMNS,
    "events": ("seq", "kind", "run_id", "data"),
    "meta": ("key", "value"),
}


def check_ledger_file(path: str) -> bool:
    """Check an existing ledger file without writing to it; return False if it is new.

    Raises:
        LedgerCorrupt: (``ledger_corrupt``) not SQLite, truncated, failing quick_check,
            missing or altered tables, or an empty (or missing) file beside a non-empty
            write-ahead log.
        LedgerVersionError: (``ledger_version_unsupported``) a schema version other than
            ours (newer: upgrade; older: no migration exists).
        LedgerError: (``ledger_error``) a SQLite database that is not an event-log ledger.
    """
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        size = None
    if not size:
        wal = path + "-wal"
        if os.path.exists(wal) and os.path.getsize(wal) > 0:
            # Committed pages may live only in the WAL; opening the empty file as a new
            # ledger would discard them (SQLite resets a WAL that does not match).
            raise LedgerCorrupt(
                f"ledger {path!r} is {'missing' if size is None else 'empty'} but its"
                " write-ahead log is not; the files were left untouched"
            )
        return False
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError as exc:
        raise LedgerError(f"cannot read ledger {path!r}: {exc}") from None
    if len(header) < 100 or not header.startswith(_MAGIC):
        what = (
            "truncated (shorter than the 100-byte header)"
            if len(header) < 100
            else ("not a SQLite database (bad header)")
        )
        raise LedgerCorrupt(f"ledger {path!r} is {what}; the file was left untouched")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    header_valid = header[24:28] == header[92:96]
    if header_valid and pages and size < pages * page_size and not os.path.exists(path + "-wal"):
        raise LedgerCorrupt(
            f"ledger {path!r} is truncated ({size} bytes, header says"
            f" {pages * page_size}); the file was left untouched"
        )
    # Without a WAL file, open it "immutable" so that not even -wal/-shm files appear;
    # with one (a crash left it), its committed pages must be read too.
    has_wal = os.path.exists(path + "-wal")
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    uri += "" if has_wal else "&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            columns = {
                table: tuple(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))
                for table in _TABLE_COLUMNS
                if table in tables
            }
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise LedgerCorrupt(
            f"ledger {path!r} is not a readable SQLite database ({exc});"
            " the file was left untouched"
        ) from None
    if problems != ["ok"]:
        raise LedgerCorrupt(
            f"ledger {path!r} failed its integrity check: {'; '.join(problems[:3])};"
            " the file was left untouched"
        )
    if not tables and app_id == 0 and version == 0:
        return False
    if app_id != APPLICATION_ID:
        raise LedgerError(
            f"{path!r} is a SQLite database but not an event-log ledger"
            f" (application_id {app_id:#x}); the file was left untouched"
        )
    if version > SCHEMA_VERSION:
        raise LedgerVersionError(
            f"ledger {path!r} has schema version {version}, newer than the supported"
            f" {SCHEMA_VERSION}; upgrade trio-actors. The file was left untouched",
            version=version,
            supported=SCHEMA_VERSION,
        )
    if version < SCHEMA_VERSION:
        raise LedgerVersionError(
            f"ledger {path!r} has schema version {version}, older than the supported"
            f" {SCHEMA_VERSION}, and there is no migration; the file was left untouched",
            version=version,
            supported=SCHEMA_VERSION,
        )
    # Our id and version, yet not our tables: refuse it before anything writes to it
    # (even switching the journal mode to WAL rewrites the header).
    wrong = sorted(t for t, cols in _TABLE_COLUMNS.items() if columns.get(t) != cols)
    if wrong:
        raise LedgerCorrupt(
            f"ledger {path!r} has missing or altered tables ({', '.join(wrong)});"
            " the file was left untouched"
        )
    return True


def prune_events(conn: sqlite3.Connection, keep: int) -> None:
    """Delete all but the newest ``keep`` events, in one transaction (boot only).

    The events table is the ledger's fast-growing one (every lifecycle and progress
    event); without a bound it grows for as long as the server lives. The freed pages
    are reused by later events (no VACUUM: that would rewrite the whole file).
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "DELETE FROM events WHERE seq <= (SELECT coalesce(max(seq), 0) FROM events) - ?",
            (keep,),
        )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
