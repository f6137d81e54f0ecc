"""The event-log ledger's schema: creating, migrating and pruning a ledger (design §6.10).

A new ledger is built beside its final path and renamed into place once its schema is
committed, so a ledger path never holds a half-made file: an empty or foreign file found
there is refused (design §6.11), never taken for a new ledger.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3

from ...errors import LedgerError

__all__ = [
    "APPLICATION_ID",
    "RUN_COLUMNS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TABLE_COLUMNS",
    "create_ledger",
    "migrate",
    "prune_events",
    "run_columns",
]

#: The schema version this code writes (``PRAGMA user_version``); 1 and 2 are migrated.
SCHEMA_VERSION = 3
#: ``PRAGMA application_id`` of an event-log ledger ("TAEL").
APPLICATION_ID = 0x5441454C

_V2_RUNS = (
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
#: Columns of the ``runs`` table, in order; ``stage_run`` takes rows in this order.
#: ``finished_at``: when the run was decided, seconds since the epoch (wall clock, §6.18).
RUN_COLUMNS = (*_V2_RUNS, "finished_at")

#: The tables of a version-3 ledger (``meta`` holds ``revision`` and ``session``).
SCHEMA = f"""
CREATE TABLE requests (
    request_id TEXT PRIMARY KEY,
    content TEXT NOT NULL,
    run_id INTEGER NOT NULL,
    receipt TEXT NOT NULL,
    position INTEGER NOT NULL,
    actor TEXT,
    cancelled_by TEXT
);
CREATE INDEX requests_run ON requests(run_id);
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
    interruptions INTEGER NOT NULL,
    finished_at REAL
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

_V1_REQUESTS = ("request_id", "content", "run_id", "receipt", "position")

#: The columns of every table by schema version, as ``PRAGMA table_info`` lists them.
TABLE_COLUMNS: dict[int, dict[str, tuple[str, ...]]] = {
    1: {
        "requests": _V1_REQUESTS,
        "runs": _V2_RUNS,
        "events": ("seq", "kind", "run_id", "data"),
        "meta": ("key", "value"),
    },
    2: {
        "requests": (*_V1_REQUESTS, "actor", "cancelled_by"),
        "runs": _V2_RUNS,
        "events": ("seq", "kind", "run_id", "data"),
        "meta": ("key", "value"),
    },
    3: {
        "requests": (*_V1_REQUESTS, "actor", "cancelled_by"),
        "runs": RUN_COLUMNS,
        "events": ("seq", "kind", "run_id", "data"),
        "meta": ("key", "value"),
    },
}

#: Version 1 to 2: requests remember who submitted them and who detached them (§6.14).
#: Version 2 to 3: runs remember when they were decided (§6.18; NULL for older ones).
_MIGRATIONS = {
    1: """
    ALTER TABLE requests ADD COLUMN actor TEXT;
    ALTER TABLE requests ADD COLUMN cancelled_by TEXT;
    CREATE INDEX requests_run ON requests(run_id);
    PRAGMA user_version = 2;
    """,
    2: """
    ALTER TABLE runs ADD COLUMN finished_at REAL;
    PRAGMA user_version = 3;
    """,
}


def run_columns(version: int) -> str:
    """The ``SELECT`` list of :data:`RUN_COLUMNS` for a ledger of ``version`` not yet
    migrated (a column it lacks reads as NULL)."""
    return ", ".join(c if c in TABLE_COLUMNS[version]["runs"] else "NULL" for c in RUN_COLUMNS)


def create_ledger(path: str) -> None:
    """Create an empty ledger at ``path`` (which must not exist), atomically.

    The schema is committed in a file beside it, which is synced and renamed into
    place; a crash leaves either no ledger or a whole one.

    Raises:
        LedgerError: (``ledger_error``) the file could not be created.
    """
    temporary = f"{path}.new-{secrets.token_hex(4)}"
    try:
        conn = sqlite3.connect(temporary, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript("BEGIN;" + SCHEMA + "COMMIT;")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()  # the last connection: SQLite removes the -wal and -shm
        with open(temporary, "rb+") as f:
            os.fsync(f.fileno())
        os.rename(temporary, path)
        _sync_directory(path)
    except (OSError, sqlite3.Error) as exc:
        for leftover in (temporary, temporary + "-wal", temporary + "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(leftover)
        raise LedgerError(f"cannot create ledger {path!r}: {exc}") from None


def _sync_directory(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def migrate(conn: sqlite3.Connection, version: int) -> None:
    """Bring a checked ledger of ``version`` to :data:`SCHEMA_VERSION`, in one transaction."""
    while version < SCHEMA_VERSION:
        conn.executescript("BEGIN IMMEDIATE;" + _MIGRATIONS[version] + "COMMIT;")
        version += 1


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
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
