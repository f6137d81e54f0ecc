"""The read-only inspection of a ledger before anything may write to it (§6.11, §6.12).

:func:`inspect_ledger` reads an existing ledger through read-only connections only
(``immutable`` without a write-ahead log, so not even ``-wal``/``-shm`` files appear) and
either returns everything boot needs or refuses the file with one line naming what is
wrong, every byte of the database and its ``-wal`` left as they were:

1. the file: not empty, the SQLite header, not truncated;
2. the write-ahead log, before SQLite may replay it (:mod:`actors._eventlog._ledger._wal`);
3. the session: the database says whether its last session closed cleanly; if not, its
   ``-wal`` must be there, and must be that session's own (design §6.12);
4. ``quick_check``, our ``application_id``, a schema version we know, our tables;
5. every row of every table, by SQL rules (:func:`actors._eventlog._ledger._rows.table_checks`),
   plus the rows that must exist (run ids and event seqs without a gap, the run of every
   request, the request of every run, a revision not behind the runs');
6. the rows boot loads, decoded and checked.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import urllib.parse
from typing import TYPE_CHECKING, Any

import attrs

from ...errors import LedgerCorrupt, LedgerError, LedgerVersionUnsupported
from ._rows import DECODERS, RowCheck, decode_request, decode_revision, decode_run, table_checks
from ._schema import APPLICATION_ID, SCHEMA_VERSION, TABLE_COLUMNS, run_columns
from ._wal import WalReport, check_wal

if TYPE_CHECKING:
    from .._types import Receipt
    from ._reads import ReadConnection

__all__ = [
    "Inspection",
    "LedgerSnapshot",
    "check_missing",
    "inspect_ledger",
    "load_snapshot",
    "parse_session",
]

_MAGIC = b"SQLite format 3\x00"
_UNTOUCHED = "the file was left untouched"


@attrs.frozen(kw_only=True)
class LedgerSnapshot:
    """What a ledger holds at boot, loaded and checked by :func:`inspect_ledger`."""

    revision: int
    """The persisted revision (0 for a new ledger)."""
    head: int
    """The highest event seq (0 for none)."""
    next_run_no: int
    """The number for the next run id."""
    next_request_position: int
    """The position for the next stored request."""
    open_runs: tuple[dict[str, Any], ...]
    """The checked fields (see :func:`~actors._eventlog._ledger._rows.decode_run`) of the runs
    neither finished nor cancelled, by run id."""
    requests: tuple[tuple[str, str, Receipt], ...]
    """The most recent ``(request_id, content, receipt)``, oldest first."""
    request_total: int
    """How many requests the ledger holds in all."""
    waiters: tuple[tuple[str, int, str | None, str | None], ...] = ()
    """``(request_id, run_id, actor, cancelled_by)`` of the requests of the open runs
    (``cancelled_by`` set for those that left their run, design §6.14)."""
    event_floor: int = 1
    """The lowest event seq the ledger holds once opened (``head + 1`` when none):
    older events are pruned at open (``keep_events``)."""


@attrs.frozen(kw_only=True)
class Inspection:
    """An existing ledger that passed every check, and what boot loads from it."""

    snapshot: LedgerSnapshot
    """What boot needs."""
    version: int
    """Its schema version (older ones are migrated when opened for writing)."""
    wal: WalReport | None
    """What the write-ahead log check found, or None without a ``-wal``."""


def parse_session(path: str, value: object) -> tuple[str, str]:
    """``(state, token)`` of the ``session`` meta value ``"open TOKEN"``/``"closed TOKEN"``.

    Raises:
        LedgerCorrupt: (``ledger_corrupt``) any other value.
    """
    if type(value) is str:
        state, _, token = value.partition(" ")
        if state in ("open", "closed") and token:
            return state, token
    check = RowCheck(path, "meta", "key", "session")
    raise check.corrupt("value", f"{value!r:.60} is not a session marker; {_UNTOUCHED}")


def inspect_ledger(path: str, *, keep_requests: int, keep_events: int | None) -> Inspection | None:
    """Check an existing ledger without writing to it; None if there is no file.

    Args:
        path: The ledger file.
        keep_requests: How many of the most recent requests boot loads.
        keep_events: How many events the ledger keeps once opened (for the floor).

    Raises:
        LedgerCorrupt: (``ledger_corrupt``) see the module docstring; ``details`` name
            ``table``, ``key`` and ``column`` for a bad row, ``frame`` for the log.
        LedgerVersionUnsupported: (``ledger_version_unsupported``) a schema we cannot open.
        LedgerError: (``ledger_error``) unreadable, or a SQLite file that is not a ledger.
    """
    wal = path + "-wal"
    try:
        size: int | None = os.path.getsize(path)
    except FileNotFoundError:
        size = None
    if not size:
        if os.path.exists(wal) and os.path.getsize(wal) > 0:
            # Committed pages may live only in the WAL; opening the empty file as a new
            # ledger would discard them (SQLite resets a WAL that does not match).
            raise LedgerCorrupt(
                f"ledger {path!r} is {'missing' if size is None else 'empty'} but its"
                " write-ahead log is not; the files were left untouched"
            )
        if size is None:
            return None
        raise LedgerCorrupt(
            f"ledger {path!r} is an empty (0-byte) file, not a ledger: taking it for a new"
            f" one would lose its history; {_UNTOUCHED} (remove it to start a new ledger)"
        )
    page_size = _check_header(path, size)
    has_wal = os.path.exists(wal)
    shm = path + "-shm"
    shm_existed = os.path.exists(shm)
    try:
        report = None
        if has_wal:
            try:
                report = check_wal(path, wal, page_size)
            except OSError as exc:
                raise LedgerError(f"cannot read the write-ahead log {wal!r}: {exc}") from None
        stored_session = _stored_session(path) if has_wal else None
        return _inspect(path, has_wal, stored_session, report, keep_requests, keep_events)
    except LedgerError as exc:
        if has_wal and not shm_existed:
            _remove(shm)
        if "left untouched" in exc.message:
            raise
        raise type(exc)(f"{exc.message}; {_UNTOUCHED}", **exc.details) from None
    except BaseException:
        if has_wal and not shm_existed:
            _remove(shm)
        raise


def _remove(shm: str) -> None:
    # Reading committed pages from a WAL needs its index: SQLite made a -shm.
    with contextlib.suppress(OSError):
        os.unlink(shm)


def _check_header(path: str, size: int) -> int:
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
        raise LedgerCorrupt(f"ledger {path!r} is {what}; {_UNTOUCHED}")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    header_valid = header[24:28] == header[92:96]
    if header_valid and pages and size < pages * page_size and not os.path.exists(path + "-wal"):
        raise LedgerCorrupt(
            f"ledger {path!r} is truncated ({size} bytes, header says"
            f" {pages * page_size}); {_UNTOUCHED}"
        )
    return page_size


def _connect(path: str, *, immutable: bool) -> sqlite3.Connection:
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    return sqlite3.connect(uri + ("&immutable=1" if immutable else ""), uri=True)


def _stored_session(path: str) -> object:
    """The ``session`` value in the database file alone (its WAL ignored), or None.

    None also when the file alone cannot be read: after a crash during a checkpoint the
    file may be mid-update, and only the log makes it whole.
    """
    try:
        conn = _connect(path, immutable=True)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'session'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return None if row is None else row[0]


def _inspect(
    path: str,
    has_wal: bool,
    stored_session: object,
    report: WalReport | None,
    keep_requests: int,
    keep_events: int | None,
) -> Inspection:
    try:
        conn = _connect(path, immutable=not has_wal)
        try:
            version = _check_schema(path, conn, has_wal)
            _check_session(path, conn, has_wal, stored_session)
            _check_rows(path, conn, version)
            snapshot = load_snapshot(path, conn, keep_requests, keep_events, version)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise LedgerCorrupt(
            f"ledger {path!r} is not a readable SQLite database ({exc}); {_UNTOUCHED}"
        ) from None
    return Inspection(snapshot=snapshot, version=version, wal=report)


def _check_schema(path: str, conn: sqlite3.Connection, has_wal: bool) -> int:
    problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        with_log = " (read with its write-ahead log)" if has_wal else ""
        raise LedgerCorrupt(
            f"ledger {path!r} failed its integrity check{with_log}:"
            f" {'; '.join(problems[:3])}; {_UNTOUCHED}"
        )
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if app_id != APPLICATION_ID:
        what = "an empty SQLite database" if not tables else "a SQLite database"
        raise LedgerError(
            f"{path!r} is {what} but not an event-log ledger (application_id {app_id:#x});"
            f" {_UNTOUCHED}"
        )
    if version > SCHEMA_VERSION:
        raise LedgerVersionUnsupported(
            f"ledger {path!r} has schema version {version}, newer than the supported"
            f" {SCHEMA_VERSION}; upgrade trio-actors. The file was left untouched",
            version=version,
            supported=SCHEMA_VERSION,
        )
    if version not in TABLE_COLUMNS:
        raise LedgerVersionUnsupported(
            f"ledger {path!r} has schema version {version}, older than the supported"
            f" {SCHEMA_VERSION}, and there is no migration; {_UNTOUCHED}",
            version=version,
            supported=SCHEMA_VERSION,
        )
    # Our id and version, yet not our tables: refuse it before anything writes to it
    # (even switching the journal mode to WAL rewrites the header).
    expected = TABLE_COLUMNS[version]
    wrong = sorted(
        table
        for table, columns in expected.items()
        if table not in tables
        or tuple(row[1] for row in conn.execute(f"PRAGMA table_info({table})")) != columns
    )
    if wrong:
        raise LedgerCorrupt(
            f"ledger {path!r} has missing or altered tables ({', '.join(wrong)}); {_UNTOUCHED}"
        )
    return int(version)


def _check_session(
    path: str, conn: sqlite3.Connection, has_wal: bool, stored_session: object
) -> None:
    """Refuse a log that is missing, or not this database's own (design §6.12)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'session'").fetchone()
    if row is None:
        return  # written by a version that kept no session marker
    state, token = parse_session(path, row[0])
    wal = path + "-wal"
    if not has_wal:
        if state == "open":
            raise LedgerCorrupt(
                f"ledger {path!r}: its last session did not close, so its newest commits"
                f" live in its write-ahead log, but {wal!r} is missing; {_UNTOUCHED}"
                " (restore the log beside it, or see design §6.12 to accept the loss)",
                table="meta",
                key="session",
                column="value",
            )
        return
    if stored_session is None:
        return
    _, stored_token = parse_session(path, stored_session)
    if stored_token != token:
        raise LedgerCorrupt(
            f"ledger {path!r}: its write-ahead log {wal!r} belongs to another ledger or"
            f" session (session {token!r}, the database's is {stored_token!r}); the files"
            " were left untouched (move the foreign log away, see design §6.12)",
            table="meta",
            key="session",
            column="value",
        )


def _json_functions(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT json_valid('{}')").fetchone()
    except sqlite3.OperationalError:
        return False
    return True


def _request_columns(waiters: bool) -> str:
    # Version 1 had no waiter columns: they read as NULL (nobody detached).
    extra = "actor, cancelled_by" if waiters else "NULL, NULL"
    return f"request_id, content, run_id, receipt, {extra}"


def _check_rows(path: str, conn: sqlite3.Connection, version: int) -> None:
    """Every cell by SQL rules, then the rows that must exist; the first problem raises."""
    waiters = version >= 2
    columns = {
        "runs": run_columns(version),
        "events": "seq, kind, run_id, data",
        "requests": _request_columns(waiters),
    }
    checks = table_checks(
        with_json=_json_functions(conn), waiters=waiters, finished_at=version >= 3
    )
    for table, key_name, sql in checks:
        bad = conn.execute(sql).fetchone()
        if bad is None:
            continue
        key, column = bad
        row = conn.execute(
            f"SELECT {columns[table]} FROM {table} WHERE {key_name} IS ?", (key,)
        ).fetchone()
        check = RowCheck(path, table, key_name, key)
        try:  # the decoder's message says what is wrong; SQL only found the row
            DECODERS[table](path, tuple(row))
        except LedgerCorrupt as exc:
            raise LedgerCorrupt(f"{exc}; {_UNTOUCHED}", **exc.details) from None
        raise check.corrupt(column, f"holds a value the log never writes; {_UNTOUCHED}")
    check_missing(path, conn)


def check_missing(path: str, conn: ReadConnection) -> None:
    """Refuse a ledger missing a row that must exist (any engine, ``?`` placeholders).

    Run ids and event seqs have no gaps, every request's run and every run's request
    exist, and the revision is not behind the runs'.

    Raises:
        LedgerCorrupt: (``ledger_corrupt``) the first missing row, named.
    """

    def missing(table: str, key_name: str, key: object, why: str) -> LedgerCorrupt:
        return RowCheck(path, table, key_name, key).corrupt(
            None, f"row missing ({why}); {_UNTOUCHED}"
        )

    runs = conn.execute("SELECT count(*), min(run_id), max(run_id) FROM runs").fetchone()
    count, low, high = runs
    if count and (low != 1 or count != high):
        gap = 1 if low != 1 else _first_gap(conn, "runs", "run_id")
        raise missing("runs", "run_id", gap, "run ids have no gaps")
    count, low, high = conn.execute("SELECT count(*), min(seq), max(seq) FROM events").fetchone()
    if count and count != high - low + 1:
        raise missing("events", "seq", _first_gap(conn, "events", "seq"), "seqs have no gaps")
    orphan = conn.execute(
        "SELECT request_id, run_id FROM requests q"
        " WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = q.run_id) LIMIT 1"
    ).fetchone()
    if orphan is not None:
        raise missing("runs", "run_id", orphan[1], f"request {orphan[0]!r} names it")
    orphan = conn.execute(
        "SELECT run_id, request_id FROM runs r"
        " WHERE NOT EXISTS (SELECT 1 FROM requests q WHERE q.request_id = r.request_id)"
        " LIMIT 1"
    ).fetchone()
    if orphan is not None:
        raise missing("requests", "request_id", orphan[1], f"run {orphan[0]} names it")
    row = conn.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()
    revision = 0 if row is None else decode_revision(path, row[0])
    newest = conn.execute("SELECT coalesce(max(revision), 0) FROM runs").fetchone()[0]
    if revision < newest:
        raise RowCheck(path, "meta", "key", "revision").corrupt(
            "value" if row is not None else None,
            f"{'missing' if row is None else revision}, behind the runs' revision {newest};"
            f" {_UNTOUCHED}",
        )


def _first_gap(conn: ReadConnection, table: str, key: str) -> int:
    row = conn.execute(
        f"SELECT a.{key} + 1 FROM {table} a WHERE a.{key} < (SELECT max({key}) FROM {table})"
        f" AND NOT EXISTS (SELECT 1 FROM {table} b WHERE b.{key} = a.{key} + 1)"
        f" ORDER BY a.{key} LIMIT 1"
    ).fetchone()
    return int(row[0])


def load_snapshot(
    path: str,
    conn: ReadConnection,
    keep_requests: int,
    keep_events: int | None,
    version: int,
) -> LedgerSnapshot:
    """What boot needs from a checked ledger of ``version`` (any engine, ``?`` placeholders).

    Raises:
        LedgerCorrupt: (``ledger_corrupt``) a row boot loads is damaged.
    """
    waiters = version >= 2
    row = conn.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()
    revision = 0 if row is None else decode_revision(path, row[0])
    head, floor = conn.execute("SELECT coalesce(max(seq), 0), min(seq) FROM events").fetchone()
    floor = head + 1 if floor is None else floor
    if keep_events is not None:
        floor = max(floor, head - keep_events + 1)
    run_no = conn.execute("SELECT coalesce(max(run_id), 0) FROM runs").fetchone()[0]
    total, position = conn.execute(
        "SELECT count(*), coalesce(max(position), 0) FROM requests"
    ).fetchone()
    cols = run_columns(version)
    open_runs = tuple(
        decode_run(path, tuple(row))
        for row in conn.execute(
            f"SELECT {cols} FROM runs WHERE state NOT IN ('finished', 'cancelled') ORDER BY run_id"
        )
    )
    requests = []
    for row in conn.execute(
        f"SELECT {_request_columns(waiters)} FROM requests ORDER BY position DESC LIMIT ?",
        (keep_requests,),
    ):
        content, receipt, _, _ = decode_request(path, tuple(row))
        requests.append((row[0], content, receipt))
    requests.reverse()
    detached = "q.cancelled_by" if waiters else "NULL"
    waiting = tuple(
        (request_id, run_id, actor, by)
        for request_id, run_id, actor, by in conn.execute(
            f"SELECT q.request_id, q.run_id, {'q.actor' if waiters else 'NULL'}, {detached}"
            " FROM requests q JOIN runs r ON r.run_id = q.run_id"
            " WHERE r.state NOT IN ('finished', 'cancelled') ORDER BY q.position"
        )
    )
    return LedgerSnapshot(
        revision=revision,
        head=head,
        next_run_no=run_no + 1,
        next_request_position=position + 1,
        open_runs=open_runs,
        requests=tuple(requests),
        request_total=total,
        waiters=waiting,
        event_floor=floor,
    )
