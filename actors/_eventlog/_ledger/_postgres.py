"""The PostgreSQL store of a ledger: psycopg 3 connections in worker threads (§6.10).

The PostgreSQL ledger is the :class:`~actors._eventlog._ledger._commit.BatchLedger` on a
:class:`PostgresStore`, chosen by a ``postgresql://`` ledger URL (docs/cluster.rst). The
same tables, rows and checks as the SQLite ledger; what differs is the engine:

* psycopg's async API needs asyncio, so its *blocking* API runs in trio worker threads,
  one connection per role (``writer`` for commits and the open, ``reader`` for reads),
  each with its own ``CapacityLimiter(1)``: a read never waits behind a commit, and a
  connection is never shared by two threads;
* every statement is bounded by the server-side ``statement_timeout`` (seconds in
  config), every connection attempt by ``connect_timeout``; a cancelled trio scope
  abandons the worker thread *and* cancels its statement on the server
  (:meth:`PostgresStore.cancel`, psycopg's ``cancel_safe``), so nothing keeps running
  behind a deadline;
* a server that goes away (a restart, a cut connection) makes commits fail with
  ``ledger_unavailable`` (and ``retry_after``), the same outage as a full disk
  (design §6.13): the batch is kept and retried, and the next attempt reconnects. A
  commit whose outcome is unknown (the connection broke during ``COMMIT``) is never
  written twice: each commit writes its own marker (``session`` in ``meta``), and the
  retry of that batch first reads whether its marker is there;
* one writer per ledger: the writer connection holds a session advisory lock on the
  ledger (its schema), taken at open and again on every reconnection; another process
  that holds it refuses the start (``ledger_in_use``, nothing written), and a writer
  that reconnects and finds it taken cannot commit (an outage) until it is free: two
  event logs never write one ledger at once (several nodes on one ledger are not
  supported: each keeps its own sequence and memory, docs/cluster.rst);
* the ledger is the set of tables in the connection's current schema (the URL's
  database, and ``search_path``); an empty schema gets ours, in one transaction, under an
  advisory lock; one that holds other tables, or no ``application_id`` of ours, is
  refused (``ledger_error``), one of a newer ``schema_version`` too
  (``ledger_version_unsupported``), before anything is written.
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
import urllib.parse
from typing import TYPE_CHECKING, Any

import trio

from ...errors import (
    LedgerCorrupt,
    LedgerError,
    LedgerInUse,
    LedgerUnavailable,
    LedgerVersionUnsupported,
)
from ._inspect import check_missing, load_snapshot
from ._reads import LedgerReads
from ._schema import APPLICATION_ID, RUN_COLUMNS, SCHEMA_VERSION, TABLE_COLUMNS

if TYPE_CHECKING:
    from collections.abc import Callable

    import psycopg

    from ._commit import Batch
    from ._inspect import LedgerSnapshot
    from ._reads import Cursor
    from ._wal import WalReport

__all__ = ["POSTGRES_SCHEMES", "PostgresStore", "is_postgres_url", "redact"]

_log = logging.getLogger("actors.eventlog")

#: URL schemes that name a PostgreSQL ledger (libpq's two).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")

#: The tables of a version-3 ledger, as the SQLite ledger's (§6.10), in PostgreSQL types.
SCHEMA = f"""
CREATE TABLE requests (
    request_id text PRIMARY KEY,
    content text NOT NULL,
    run_id bigint NOT NULL,
    receipt text NOT NULL,
    position bigint NOT NULL,
    actor text,
    cancelled_by text
);
CREATE INDEX requests_run ON requests(run_id);
CREATE TABLE runs (
    run_id bigint PRIMARY KEY,
    request_id text NOT NULL,
    operation text NOT NULL,
    arguments text NOT NULL,
    revision bigint NOT NULL,
    snapshot_id text NOT NULL,
    state text NOT NULL,
    verdict text,
    result text,
    error text,
    cancelled_by text,
    progress double precision,
    interruptions bigint NOT NULL,
    finished_at double precision
);
CREATE INDEX runs_open ON runs(state) WHERE state NOT IN ('finished', 'cancelled');
CREATE TABLE events (
    seq bigint PRIMARY KEY,
    kind text NOT NULL,
    run_id bigint,
    data text NOT NULL
);
CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO meta VALUES
    ('application_id', '{APPLICATION_ID:#x}'),
    ('schema_version', '{SCHEMA_VERSION}');
"""

#: The key of the advisory lock that serialises creating the schema ("TAEL").
_CREATE_LOCK = APPLICATION_ID
#: Takes the writer lock of the ledger in the current schema: the session-level advisory
#: lock (APPLICATION_ID, hash of the schema's name), held by the writer connection.
_WRITER_LOCK = "SELECT pg_try_advisory_lock(%s, hashtext(current_schema()))"
_WRITER_UNLOCK = "SELECT pg_advisory_unlock(%s, hashtext(current_schema()))"

_UPSERT_RUN = (
    f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join(['%s'] * len(RUN_COLUMNS))})"
    " ON CONFLICT (run_id) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in RUN_COLUMNS[1:])
)
_UPSERT_META = (
    "INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
)
#: SQLSTATEs of a damaged page or index (class XX, ``data_corrupted``/``index_corrupted``).
_CORRUPT_STATES = frozenset({"XX001", "XX002"})
#: SQLSTATE classes of a server that cannot answer now: connection exceptions,
#: insufficient resources (disk full), operator intervention (a restart, a cancelled
#: statement), transaction rollbacks (serialisation failures, deadlocks).
_UNAVAILABLE_CLASSES = frozenset({"08", "53", "57", "40", "55"})


def is_postgres_url(ledger: str) -> bool:
    """True when ``ledger`` is a PostgreSQL URL rather than a SQLite file path."""
    return ledger.startswith(POSTGRES_SCHEMES)


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***``, for messages and log records."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


class _Qmark:
    """A psycopg connection that takes the ``?`` placeholders of the shared reads."""

    __slots__ = ("_conn",)

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Any = (), /) -> Cursor:
        # The shared SQL holds no other "?" and no "%".
        return self._conn.execute(sql.replace("?", "%s"), parameters)


class PostgresStore:
    """A ledger's PostgreSQL connections and what they do in worker threads.

    Args:
        url: A libpq URL (``postgresql://user@host/db``, ``postgresql:///db?host=/run``).
        statement_timeout: Seconds the server lets one statement run (its
            ``statement_timeout``); also bounds each connection attempt and each cancel.
        read_timeout: Seconds (trio clock) a read may take (design §6.19).
        retry_after: Seconds: the ``retry_after`` of a read the server failed.

    Raises:
        LedgerError: (``ledger_error``) psycopg is not installed (the ``postgresql``
            extra).
    """

    def __init__(
        self, url: str, *, statement_timeout: float, read_timeout: float, retry_after: float
    ) -> None:
        try:
            import psycopg
        except ImportError:
            raise LedgerError(
                f"ledger {redact(url)!r} is a PostgreSQL URL, but psycopg is not installed"
                " (pip install 'trio-actors[postgresql]')"
            ) from None
        self._psycopg = psycopg
        self._url = url
        self.path = redact(url)
        #: psycopg's errors, and the refusal of the writer lock (``ledger_in_use``).
        self.errors: tuple[type[Exception], ...] = (psycopg.Error, LedgerInUse)
        self._statement_timeout = statement_timeout
        self.limiter = trio.CapacityLimiter(1)
        #: The reader connection's own limiter: a read never waits behind a commit.
        self.read_limiter = trio.CapacityLimiter(1)
        self._conns: dict[str, psycopg.Connection[Any]] = {}
        self._closed = False
        self.reads = LedgerReads(
            self,
            self.read_limiter,
            self._reader,
            timeout=read_timeout,
            retry_after=retry_after,
            cancel=lambda: self.cancel_statement("reader"),
        )
        self._token = ""
        self._commits = 0
        # The batch of the last commit attempt and its marker: a retry of the same batch
        # (the writer retries a batch whose commit raised) first checks whether that
        # attempt committed after all (an outcome unknown to us).
        self._attempt: tuple[Batch, str] | None = None
        #: The connections' ``application_name`` before their role (pg_stat_activity).
        self.application = "trio-actors ledger"
        #: Whether the writer holds the ledger's writer lock (a cluster's nodes do not).
        self.single_writer = True
        #: Connections opened in all (the first ones and every reconnection).
        self.connects = 0
        #: PostgreSQL has no write-ahead log of ours to check.
        self.wal_report: WalReport | None = None

    # -- connections (each used by one worker thread at a time) -------------------------

    def _connection(self, role: str) -> psycopg.Connection[Any]:
        conn = self._conns.get(role)
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        if conn is not None:
            conn.close()
            _log.info(
                "ledger %s: reconnecting the %s connection",
                self.path,
                role,
                extra={"ledger": self.path, "role": role},
            )
        conn = self._psycopg.connect(
            self._url,
            autocommit=True,
            connect_timeout=max(2, math.ceil(self._statement_timeout)),
            application_name=f"{self.application} {role}",
        )
        try:
            timeout_ms = max(1, round(self._statement_timeout * 1000))
            conn.execute("SELECT set_config('statement_timeout', %s, false)", (f"{timeout_ms}ms",))
            self._prepare(role, conn)
        except BaseException:
            conn.close()
            raise
        self._conns[role] = conn
        self.connects += 1
        return conn

    def _prepare(self, role: str, conn: psycopg.Connection[Any]) -> None:
        """Set up a new connection for ``role``: the writer takes the writer lock."""
        if role == "writer":
            self._lock_writer(conn)

    def _lock_writer(self, conn: psycopg.Connection[Any]) -> None:
        row = conn.execute(_WRITER_LOCK, (APPLICATION_ID,)).fetchone()
        if row is not None and row[0] is True:
            return
        holders = conn.execute(
            "SELECT a.pid, a.application_name, coalesce(host(a.client_addr), 'local')"
            " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.classid = %s::oid AND l.granted"
            " AND l.objid = (hashtext(current_schema()))::oid LIMIT 1",
            (APPLICATION_ID,),
        ).fetchone()
        who = (
            "another process"
            if holders is None
            else (f"backend pid {holders[0]} ({holders[1] or 'no name'}, from {holders[2]})")
        )
        cause = f"the ledger's writer lock is held by {who}"
        raise LedgerInUse(
            f"ledger {self.path!r} is in use: {cause}; one event log writes a ledger at a"
            " time (stop the other, or use another database or schema)",
            cause=cause,
        )

    def _reader(self) -> _Qmark | None:
        return None if self._closed else _Qmark(self._connection("reader"))

    @property
    def connections(self) -> int:
        """Connections open now (at most one per role)."""
        return sum(1 for conn in self._conns.values() if not conn.closed)

    async def cancel(self) -> None:
        """Cancel the statement the writer's abandoned thread runs; never raises."""
        await self.cancel_statement("writer")

    @property
    def closed(self) -> bool:
        """True once :meth:`close_connections` ran: no statement is started any more."""
        return self._closed

    async def cancel_statement(self, role: str) -> None:
        """Cancel the statement running on ``role``'s connection (``"writer"``,
        ``"reader"``, …) on the server, within the statement timeout; nothing if it has
        no open connection."""
        conn = self._conns.get(role)
        if conn is None or conn.closed:
            await trio.lowlevel.checkpoint()
            return
        timeout = max(2, math.ceil(self._statement_timeout))
        # cancel_safe opens a connection to the server: in a thread, bounded.
        with trio.move_on_after(timeout):
            try:
                await trio.to_thread.run_sync(
                    lambda: conn.cancel_safe(timeout=timeout), abandon_on_cancel=True
                )
            except self.errors as exc:
                _log.warning(
                    "ledger %s: could not cancel the %s's statement: %s",
                    self.path,
                    role,
                    exc,
                    extra={"ledger": self.path, "role": role},
                )
                return
            _log.info(
                "ledger %s: cancelled the %s's statement",
                self.path,
                role,
                extra={"ledger": self.path, "role": role},
            )

    def classify(self, exc: BaseException, doing: str, *, retry_after: float = 0.05) -> LedgerError:
        """The ledger error for a psycopg failure while ``doing`` something.

        A server that cannot answer now (connection lost or refused, a restart, a
        cancelled or timed-out statement, disk full, a serialisation failure) is
        :class:`LedgerUnavailable` (``cause`` and ``retry_after``, in seconds, in
        ``details``); a damaged page is :class:`LedgerCorrupt`; anything else a plain
        :class:`LedgerError`.
        """
        if isinstance(exc, LedgerError):
            return exc  # ours already (the writer lock is taken)
        sqlstate = getattr(exc, "sqlstate", None) or ""
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        cause = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        if sqlstate in _CORRUPT_STATES:
            return LedgerCorrupt(f"ledger {self.path!r}: {doing}: {cause}", cause=cause)
        if sqlstate[:2] in _UNAVAILABLE_CLASSES or (
            not sqlstate and isinstance(exc, self._psycopg.OperationalError)
        ):
            return LedgerUnavailable(
                f"ledger {self.path!r} is unavailable ({doing}): {cause}",
                cause=cause,
                retry_after=retry_after,
            )
        return LedgerError(f"ledger {self.path!r}: {doing}: {cause}")

    # -- opening ----------------------------------------------------------------------

    def open(self, keep_requests: int, keep_events: int | None) -> LedgerSnapshot:
        """Check the schema (create it in an empty one), prune, and load boot's rows.

        Raises:
            LedgerVersionUnsupported: (``ledger_version_unsupported``) a newer or unknown
                ``schema_version``; nothing was written.
            LedgerError: (``ledger_error``) tables of something else; nothing was written.
            LedgerInUse: (``ledger_in_use``) another process holds the writer lock.
            LedgerCorrupt: (``ledger_corrupt``) our tables altered, or a row damaged.
        """
        try:
            conn = self._connection("writer")
            self._check_or_create(conn)
            qconn = _Qmark(conn)
            check_missing(self.path, qconn)
            if keep_events is not None:
                conn.execute(
                    "DELETE FROM events"
                    " WHERE seq <= (SELECT coalesce(max(seq), 0) FROM events) - %s",
                    (keep_events,),
                )
            snapshot = load_snapshot(self.path, qconn, keep_requests, keep_events, SCHEMA_VERSION)
            self._token = secrets.token_hex(8)
            conn.execute(_UPSERT_META, ("session", f"open {self._token}"))
        except BaseException:
            self.close_connections()  # refused or failed: the ledger is never opened
            raise
        return snapshot

    def close_connections(self) -> None:
        """Close every connection of this store (the writer's lock released first)."""
        self._closed = True
        writer = self._conns.get("writer") if self.single_writer else None
        if writer is not None and not writer.closed and not writer.broken:
            # Released now, not when the backend gets round to exiting after the close:
            # an event log opened on this ledger right after finds it free. A failure
            # leaves it to the backend's exit.
            with contextlib.suppress(self._psycopg.Error):
                writer.execute(_WRITER_UNLOCK, (APPLICATION_ID,))
        for conn in self._conns.values():
            conn.close()

    def _tables(self, conn: psycopg.Connection[Any]) -> dict[str, tuple[str, ...]]:
        rows = conn.execute(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c"
            " JOIN information_schema.tables t"
            " ON t.table_schema = c.table_schema AND t.table_name = c.table_name"
            " WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'"
            " ORDER BY c.table_name, c.ordinal_position"
        ).fetchall()
        tables: dict[str, tuple[str, ...]] = {}
        for table, column in rows:
            tables[table] = (*tables.get(table, ()), column)
        return tables

    def _check_or_create(self, conn: psycopg.Connection[Any]) -> None:
        if conn.execute("SELECT current_schema()").fetchone() == (None,):
            raise LedgerError(
                f"ledger {self.path!r}: no schema to use (the search_path names none that"
                " exists); nothing was written"
            )
        tables = self._create_if_empty(conn, SCHEMA, f"schema version {SCHEMA_VERSION}")
        self._check_schema(conn, tables)

    def _create_if_empty(
        self, conn: psycopg.Connection[Any], schema: str, what: str
    ) -> dict[str, tuple[str, ...]]:
        """Create ``schema``'s tables if the current schema has none; its tables."""
        tables = self._tables(conn)
        if not tables:
            with conn.transaction():
                # Two nodes starting at once on an empty database: one creates.
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
                if not self._tables(conn):
                    conn.execute(schema.encode())
                    _log.info(
                        "ledger %s: created the ledger's tables (%s)",
                        self.path,
                        what,
                        extra={"ledger": self.path, "tables": what},
                    )
            tables = self._tables(conn)
        return tables

    def _check_schema(
        self, conn: psycopg.Connection[Any], tables: dict[str, tuple[str, ...]]
    ) -> None:
        meta: dict[str, str] = {}
        if tables.get("meta") == ("key", "value"):
            meta = dict(
                conn.execute(
                    "SELECT key, value FROM meta WHERE key IN ('application_id', 'schema_version')"
                ).fetchall()
            )
        if meta.get("application_id") != f"{APPLICATION_ID:#x}":
            raise LedgerError(
                f"{self.path!r} holds tables ({', '.join(sorted(tables)[:5])}) but not an"
                " event-log ledger (no application_id of ours in a meta table); nothing was"
                " written (use an empty database or schema)"
            )
        version_text = meta.get("schema_version", "")
        version = int(version_text) if version_text.isdigit() else -1
        if version != SCHEMA_VERSION:
            newer = version > SCHEMA_VERSION
            raise LedgerVersionUnsupported(
                f"ledger {self.path!r} has schema version {version_text or '(none)'},"
                f" {'newer than' if newer else 'not'} the supported {SCHEMA_VERSION}"
                f"{'; upgrade trio-actors' if newer else ''}. Nothing was written",
                version=version,
                supported=SCHEMA_VERSION,
            )
        expected = TABLE_COLUMNS[SCHEMA_VERSION]
        wrong = sorted(t for t, columns in expected.items() if tables.get(t) != columns)
        if wrong:
            raise LedgerCorrupt(
                f"ledger {self.path!r} has missing or altered tables ({', '.join(wrong)});"
                " nothing was written"
            )

    # -- commits (the writer's thread) --------------------------------------------------

    def commit(self, batch: Batch) -> None:
        """Write ``batch`` in one transaction; set ``batch.committed`` once it is durable.

        The retry of a batch whose last attempt failed first reads whether that attempt
        committed after all (its marker is in ``meta``): a batch is never written twice.
        """
        if self._closed:
            raise self._psycopg.OperationalError("ledger is closed")
        conn = self._connection("writer")
        attempt = self._attempt
        if attempt is not None and attempt[0] is batch:
            # Attempted before: its COMMIT may have succeeded unseen (a cut connection).
            marker = attempt[1]
            row = conn.execute("SELECT value FROM meta WHERE key = 'session'").fetchone()
            if row is not None and row[0] == marker:
                batch.committed = True
                return
        else:
            self._commits += 1
            marker = f"open {self._token}/{self._commits}"
            self._attempt = (batch, marker)
        with conn.transaction(), conn.cursor() as cur:
            if batch.requests:
                cur.executemany(
                    "INSERT INTO requests VALUES (%s, %s, %s, %s, %s, %s, NULL)", batch.requests
                )
            if batch.detached:
                cur.executemany(
                    "UPDATE requests SET cancelled_by = %s WHERE request_id = %s", batch.detached
                )
            if batch.runs:
                cur.executemany(_UPSERT_RUN, list(batch.runs.values()))
            if batch.segments:
                with cur.copy("COPY events (seq, kind, run_id, data) FROM STDIN") as copy:
                    for row in batch.event_rows():
                        copy.write_row(row)
            if batch.meta:
                cur.executemany(_UPSERT_META, list(batch.meta.items()))
            cur.execute(_UPSERT_META, ("session", marker))
        batch.committed = True

    def release(self) -> None:
        """Let go: a commit a worker thread starts later fails (that thread closes the
        connections; closing them here could pull one from under a running thread)."""
        self._closed = True

    def close(self, batches: list[Batch], commit: Callable[[Batch], None]) -> None:
        """Commit ``batches`` (with ``commit``), mark the session closed, close both
        connections (also when the final commit fails)."""
        try:
            if not self._closed:
                for batch in batches:
                    if not batch.committed:  # an abandoned commit may have finished it
                        commit(batch)
                if self._token:
                    conn = self._connection("writer")
                    conn.execute(_UPSERT_META, ("session", f"closed {self._token}"))
        finally:
            self.close_connections()
