"""SQLite access for the QCoDeS reader: read-only connection, schema check, snapshots.

Stdlib only (runs inside a helper child). See
:mod:`examples.preview.child.qcodes.source` for the WAL
notes: ``mode=ro`` normally, ``immutable=1`` only for a file in a read-only folder with
no ``-wal`` file (nothing can be writing it).
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from pathlib import Path

from .errors import SourceUnreadable

__all__ = ["ReadTransaction", "connect", "quote_name", "validate_schema"]

_SQLITE_MAGIC = b"SQLite format 3\x00"
_REQUIRED_RUN_COLUMNS = ("run_id", "result_table_name", "is_completed")


def quote_name(name: str) -> str:
    """Quote an SQL identifier (QCoDeS table names contain ``-``)."""
    return '"' + name.replace('"', '""') + '"'


class ReadTransaction:
    """One deferred read transaction (a consistent snapshot), re-entrant."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._outer = False

    def __enter__(self) -> None:
        if not self._conn.in_transaction:
            self._conn.execute("BEGIN")
            self._outer = True

    def __exit__(self, *exc_info: object) -> None:
        if self._outer and self._conn.in_transaction:
            self._conn.execute("COMMIT")


def connect(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only after checking it exists and looks like SQLite.

    Text columns are decoded as UTF-8 with U+FFFD for bytes that are not UTF-8.

    Raises:
        SourceUnreadable: (code ``source_unreadable``) ``details["reason"]`` is ``missing``,
            ``not_a_file``, ``not_sqlite`` or ``unreadable``.
    """

    def fail(reason: str, message: str) -> SourceUnreadable:
        return SourceUnreadable(f"{message}: {path}", path=str(path), reason=reason)

    if not path.exists():
        raise fail("missing", "database file not found")
    if not path.is_file():
        raise fail("not_a_file", "database path is not a file")
    try:
        with path.open("rb") as handle:
            header = handle.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise fail("unreadable", f"cannot read database file ({exc.strerror})") from exc
    if header and header != _SQLITE_MAGIC:
        raise fail("not_sqlite", "not an SQLite database (bad file header)")
    # Bytes: a name that is not UTF-8 (kept by Python as surrogates) is quoted as it is.
    base = "file:" + urllib.parse.quote(os.fsencode(path))
    try:
        conn = _checked_connection(f"{base}?mode=ro")
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc) or "malformed" in str(exc):
            raise fail("not_sqlite", f"not an SQLite database ({exc})") from exc
        if Path(f"{path}-wal").exists():
            raise fail("unreadable", f"cannot open database read-only ({exc})") from exc
        # Read-only folder and nothing writing (no -wal): a static file.
        try:
            conn = _checked_connection(f"{base}?immutable=1")
        except sqlite3.DatabaseError as exc2:
            raise fail("unreadable", f"cannot open database read-only ({exc2})") from exc2
    conn.execute("PRAGMA query_only = 1")
    # SQLite keeps whatever bytes a writer stored: text that is not UTF-8 is read with
    # U+FFFD in place of the bad bytes, not refused for the whole query (every run).
    conn.text_factory = _text
    return conn


def _checked_connection(uri: str) -> sqlite3.Connection:
    # Closed at once when SQLite cannot read it, not whenever the garbage collector gets
    # to it (the error's traceback holds it in a cycle): a broken file in a watched
    # folder is checked again at every scan, and each check would hold its descriptors.
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=2.0)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def validate_schema(conn: sqlite3.Connection, path: Path) -> frozenset[str]:
    """Check for the QCoDeS ``runs`` table; return its column names.

    Raises:
        SourceUnreadable: (code ``source_unreadable``) reason ``not_qcodes`` or ``not_sqlite``.
    """
    try:
        columns = frozenset(row[1] for row in conn.execute("PRAGMA table_info(runs)"))
    except sqlite3.DatabaseError as exc:
        raise SourceUnreadable(
            f"not an SQLite database ({exc}): {path}", path=str(path), reason="not_sqlite"
        ) from exc
    if not columns:
        raise SourceUnreadable(
            f"not a QCoDeS database (it has no 'runs' table): {path}",
            path=str(path),
            reason="not_qcodes",
        )
    missing = [c for c in _REQUIRED_RUN_COLUMNS if c not in columns]
    if missing:
        raise SourceUnreadable(
            f"not a QCoDeS database ('runs' lacks {', '.join(missing)}): {path}",
            path=str(path),
            reason="not_qcodes",
        )
    return columns
