"""The cluster's tables and its transactions on PostgreSQL (docs/cluster.rst).

Every decision of a cluster node is a transaction here, run in a trio worker thread on
one of the node's psycopg connections (``writer``: batches of decisions; ``follower``:
``LISTEN`` and the reads of new events; ``reader``: ``status`` and old events). A batch
is a list of operations (:class:`Op`) written in one transaction:

* a batch that admits (submit, resume, reap) takes the ``inflight`` counter row first
  (``FOR UPDATE``), so admission decides ``max_inflight`` exactly, cluster-wide, and
  coalescing and idempotency see every committed run and request (unique indexes back
  both); a finish or a cancel only takes runs out of the live set, which can never break
  the bound: it takes no shared row but counts them on its node's own ``released:`` row,
  which admission subtracts;
* every batch locks in one order (:meth:`ClusterStore.write`): ``inflight``, the run rows
  in ``run_id`` order (one statement, up front), the node's ``released:`` row, ``head``;
  so no two batches ever wait for each other in a cycle;
* the events of the batch get their seqs *last*: ``UPDATE ... SET value = value + n
  RETURNING value`` on the ``head`` counter row, sent with ``COMMIT`` in one message so
  that its lock is held for the server's time only; seqs are dense and in commit order:
  a reader that sees seq H sees every seq below H;
* writes about a claimed run are conditional on its ``owner`` (the node's incarnation id):
  a node never finishes, progresses or cancels a run it does not own;
* each node holds a lease in ``cluster_nodes``, renewed on its own connection and judged
  by the database's clock (``now()``); any node that finds a lease expired *holds* that
  node's running runs (``held``, ``job_interrupted``, the owner cleared) and drops the
  lease, so the dead node's late writes match no row (fencing by owner: an incarnation
  id is never reused, and a held run never goes back to its old owner).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from typing import TYPE_CHECKING, Any

import attrs

from ...errors import (
    AdmissionFull,
    AlreadyDecided,
    InvalidCommand,
    LedgerError,
    RequestConflict,
    RunQuarantined,
    UnknownRun,
)
from .._ledger import PostgresStore
from .._types import Receipt, encode_json

if TYPE_CHECKING:
    import psycopg

__all__ = ["TABLES", "Batch", "ClaimedRun", "ClusterStore", "Op", "Outcome"]

_log = logging.getLogger("actors.eventlog")

#: The schema version of a cluster ledger's tables.
CLUSTER_VERSION = 1
#: Its tables; a single-node ledger's are refused by the cluster and vice versa.
TABLES = (
    "cluster_counters",
    "cluster_events",
    "cluster_meta",
    "cluster_nodes",
    "cluster_requests",
    "cluster_runs",
)

_SCHEMA = f"""
CREATE TABLE cluster_meta (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO cluster_meta VALUES ('schema_version', '{CLUSTER_VERSION}');
CREATE TABLE cluster_counters (name text PRIMARY KEY, value bigint NOT NULL);
INSERT INTO cluster_counters VALUES ('inflight', 0), ('head', 0);
CREATE SEQUENCE cluster_run_ids;
CREATE TABLE cluster_requests (
    request_id text PRIMARY KEY,
    content text NOT NULL,
    run_id bigint NOT NULL,
    coalesced boolean NOT NULL,
    actor text,
    node text NOT NULL
);
CREATE TABLE cluster_runs (
    run_id bigint PRIMARY KEY,
    request_id text NOT NULL,
    operation text NOT NULL,
    arguments text NOT NULL,
    revision bigint NOT NULL,
    snapshot_id text NOT NULL,
    coalesce_key text,
    state text NOT NULL,
    owner text,
    verdict text,
    result text,
    error text,
    cancelled_by text,
    cancel_requested text,
    progress double precision,
    queued_seq bigint NOT NULL DEFAULT 0,
    waiters bigint NOT NULL DEFAULT 1,
    finished_at double precision,
    interruptions bigint NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX cluster_runs_live ON cluster_runs(coalesce_key)
    WHERE state IN ('queued', 'running');
CREATE INDEX cluster_runs_queued ON cluster_runs(run_id) WHERE state = 'queued';
CREATE INDEX cluster_runs_owner ON cluster_runs(owner) WHERE state = 'running';
CREATE TABLE cluster_nodes (
    node text PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE TABLE cluster_events (
    seq bigint PRIMARY KEY,
    kind text NOT NULL,
    run_id bigint,
    data text NOT NULL
);
"""

#: Operations that may add live runs, or that hold runs: their batch takes ``inflight``
#: first. Others take no shared row but ``head``: a finish or cancel only removes a live
#: run, which can never break the bound, and counts it on its node's ``released:`` row.
_ADMISSION_KINDS = frozenset({"submit", "resume", "reap"})
#: Operations about one run named by its ``run_id``: their rows are locked up front.
_NAMED_RUN_KINDS = frozenset({"finish", "progress", "cancel", "resume", "discard"})
#: The prefix of a node's counter of runs it took out of the live set (finished,
#: cancelled) without the ``inflight`` row; live runs = inflight - sum(released).
_RELEASED = "released:"

_LIVE_COUNT = (
    "SELECT (SELECT value FROM cluster_counters WHERE name = 'inflight')"
    " - (SELECT coalesce(sum(value), 0) FROM cluster_counters WHERE name LIKE %s)"
)

_RELEASE = (
    "INSERT INTO cluster_counters VALUES (%(released_name)s, %(released)s) ON CONFLICT (name)"
    " DO UPDATE SET value = cluster_counters.value + EXCLUDED.value"
)

#: The end of every batch with events: the head moves by ``n`` (its row locked to COMMIT),
#: the events get the seqs after the old head, in order, the runs created in the batch
#: get their ``job_queued`` seq, and the followers are woken; it returns the old head.
_TAIL = """
WITH h AS (
    UPDATE cluster_counters SET value = value + %(n)s WHERE name = 'head'
    RETURNING value - %(n)s AS base
), e AS (
    INSERT INTO cluster_events (seq, kind, run_id, data)
    SELECT h.base + u.ord, u.kind, u.run_id, u.data
    FROM h, unnest(%(kinds)s::text[], %(runs)s::bigint[], %(data)s::text[])
        WITH ORDINALITY AS u(kind, run_id, data, ord)
), q AS (
    UPDATE cluster_runs AS r SET queued_seq = h.base + x.off
    FROM h, unnest(%(queued_runs)s::bigint[], %(queued_offsets)s::bigint[]) AS x(run_id, off)
    WHERE r.run_id = x.run_id
)
SELECT h.base, pg_notify(%(channel)s, '') FROM h
"""

#: The NOTIFY channel; a notification is only a wake-up (the follower polls anyway).
CHANNEL = "trio_actors_cluster"

_RUN_FIELDS = (
    "run_id, request_id, operation, arguments, revision, snapshot_id, state, owner,"
    " verdict, result, error, cancelled_by, progress, waiters, interruptions"
)


@attrs.define(kw_only=True)
class Op:
    """One decision for the next batch: ``kind`` and its fields; ``outcome`` once run."""

    kind: str
    """``submit``, ``claim``, ``progress``, ``finish``, ``cancel``, ``record``."""
    fields: dict[str, Any]
    outcome: Outcome | None = None


@attrs.define(kw_only=True)
class Outcome:
    """What an operation decided, known once its batch committed."""

    value: Any = None
    error: Exception | None = None
    #: Events this operation emitted: ``(kind, run_id, data JSON)``; seqs set at commit.
    events: list[tuple[str, int | None, str]] = attrs.Factory(list)
    first_seq: int = 0


@attrs.frozen(kw_only=True)
class ClaimedRun:
    """A run this node claimed: what its runner needs."""

    run_id: int
    request_id: str
    operation: str
    arguments: dict[str, Any]
    revision: int
    snapshot_id: str


@attrs.define(kw_only=True)
class _Txn:
    """One batch's transaction while its operations run."""

    cur: psycopg.Cursor[Any]
    inflight: int | None
    """The live runs (queued and running) cluster-wide, counted under the ``inflight``
    row; None when the batch did not take it (it admits nothing)."""
    inflight_delta: int = 0
    """What the batch adds to the ``inflight`` row (when it holds it)."""
    released: int = 0
    """Runs the batch took out of the live set without holding ``inflight``."""
    new_runs: dict[int, Outcome] = attrs.Factory(dict)
    """The runs created in this batch: their ``job_queued`` seq is known at its end."""
    dead: dict[int, list[str]] = attrs.Factory(dict)
    """Per reap op (by ``id``): the nodes whose running runs it holds."""
    locked: list[int] = attrs.Factory(list)
    """The run rows locked up front, in ``run_id`` order."""

    def change_live(self, count: int) -> None:
        """``count`` more live runs (fewer, if negative): on the ``inflight`` row when
        the batch holds it, else (only ever fewer) on the node's ``released:`` row."""
        if self.inflight is not None:
            self.inflight += count
            self.inflight_delta += count
        else:
            assert count <= 0, "live runs are added only under the inflight row"
            self.released -= count


@attrs.define
class Batch:
    """Operations written in one transaction, in order."""

    ops: list[Op]


class ClusterStore(PostgresStore):
    """The PostgreSQL connections and transactions of one cluster node.

    It reuses :class:`PostgresStore`'s connections (worker threads, one connection per
    role, ``statement_timeout``, cancel on a cancelled scope, the error classification)
    but never takes the single-node writer lock: every node writes the ledger.

    Args:
        url: The ``postgresql://`` URL.
        node: This node's incarnation id (random per start).
        max_inflight: Live runs (queued and running) the whole cluster admits.
        retry_after: Seconds a refused submitter should wait (``admission_full``).
        statement_timeout: Seconds each statement may run (server-side).
        read_timeout: Seconds a read may take.
        idle_timeout: Seconds a session may sit idle inside a transaction before the
            server ends it (``idle_in_transaction_session_timeout``).
    """

    def __init__(
        self,
        url: str,
        *,
        node: str,
        max_inflight: int,
        retry_after: float,
        statement_timeout: float,
        read_timeout: float,
        idle_timeout: float,
    ) -> None:
        super().__init__(
            url,
            statement_timeout=statement_timeout,
            read_timeout=read_timeout,
            retry_after=retry_after,
        )
        self.node = node
        self._idle_timeout = idle_timeout
        self.single_writer = False  # every node writes a cluster ledger
        self.application = f"trio-actors {node}"
        self._max_inflight = max_inflight
        self._retry_after = retry_after

    def _connection(self, role: str) -> psycopg.Connection[Any]:
        # A worker thread abandoned at close must not open a connection after it.
        if self.closed:
            raise self._psycopg.OperationalError("ledger is closed")
        conn = super()._connection(role)
        if self.closed:
            conn.close()
            raise self._psycopg.OperationalError("ledger is closed")
        return conn

    def _prepare(self, role: str, conn: psycopg.Connection[Any]) -> None:
        # A node paused (or cut off) inside a transaction must not hold the head or
        # inflight row for ever: the server ends such a session after this long, and
        # its transaction, never committed, is rolled back.
        conn.execute(
            "SELECT set_config('idle_in_transaction_session_timeout', %s, false)",
            (f"{max(1, round(self._idle_timeout * 1000))}ms",),
        )
        if role == "follower":
            conn.execute(f"LISTEN {CHANNEL}")

    # -- opening (the writer's thread) ---------------------------------------------------

    def open_cluster(self) -> tuple[int, list[tuple[Any, ...]]]:
        """Create the cluster's tables in an empty schema, or check them; the head seq
        and the unfinished runs' rows (``_RUN_FIELDS``) as of that head.

        Raises:
            LedgerError: (``ledger_error``) the schema holds other tables (a single-node
                ledger, or something else), or a cluster schema of another version.
        """
        try:
            conn = self._connection("writer")
            tables = set(self._create_if_empty(conn, _SCHEMA, f"cluster version {CLUSTER_VERSION}"))
            if not set(TABLES) <= tables:
                raise LedgerError(
                    f"ledger {self.path!r} holds tables ({', '.join(sorted(tables)[:5])}) but"
                    " not a cluster ledger; nothing was written (use an empty database or"
                    " schema for a cluster, or start without --cluster)"
                )
            row = conn.execute(
                "SELECT value FROM cluster_meta WHERE key = 'schema_version'"
            ).fetchone()
            if row is None or row[0] != str(CLUSTER_VERSION):
                raise LedgerError(
                    f"ledger {self.path!r} is a cluster ledger of version"
                    f" {row[0] if row else '(none)'}, not {CLUSTER_VERSION}; nothing was written"
                )
            # The head and the unfinished runs as of one snapshot: the follower goes on
            # from that head, so the node's mirror of live runs misses none.
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                head = conn.execute(
                    "SELECT value FROM cluster_counters WHERE name = 'head'"
                ).fetchone()
                runs = conn.execute(
                    f"SELECT {_RUN_FIELDS} FROM cluster_runs"
                    " WHERE state IN ('queued', 'running', 'held') ORDER BY run_id"
                ).fetchall()
            finally:
                conn.execute("COMMIT")
            return 0 if head is None else int(head[0]), runs
        except BaseException:
            self.close_connections()
            raise

    # -- a batch (the writer's thread) ----------------------------------------------------

    def write(self, batch: Batch) -> None:
        """Write ``batch`` in one transaction and set every op's outcome.

        The transaction takes its locks in one order, the same for every batch of every
        node, so no two batches ever wait for each other in a cycle (docs/cluster.rst,
        "Locks, in one order"):

        1. the ``inflight`` row, only when the batch admits (:data:`_ADMISSION_KINDS`);
        2. the run rows it decides about, all in one statement, ordered by ``run_id``;
        3. the node's own ``released:`` counter row (and, in a reap, dead nodes' rows);
        4. the ``head`` row, last, held to ``COMMIT``.

        Rows locked with ``SKIP LOCKED`` (claims, expired leases) are never waited for,
        and rows the batch inserts are invisible to others until it commits: neither
        can close a cycle.

        Raises:
            psycopg.Error: the transaction failed: nothing of it was written.
        """
        if self.closed:
            raise self._psycopg.OperationalError("ledger is closed")
        conn = self._connection("writer")
        ops = batch.ops
        outcomes = [Outcome() for _ in ops]
        with conn.cursor() as cur:
            # The transaction is ours to end: its last statements and COMMIT go to the
            # server in one pipeline, so the head row is held for the server's time
            # only, never across a round trip to this (maybe busy) process.
            cur.execute("BEGIN")
            try:
                txn = _Txn(cur=cur, inflight=None)
                self._decide(txn, ops, outcomes)
                base = self._commit(conn, txn, outcomes)
            except BaseException:
                self._rollback(conn)
                raise
        offset = 0
        for op, outcome in zip(ops, outcomes, strict=True):
            outcome.first_seq = base + offset + 1
            offset += len(outcome.events)
            op.outcome = outcome
        # Receipts carry the cursor just before their run's job_queued event.
        for outcome in outcomes:
            if isinstance(outcome.value, _PendingReceipt):
                outcome.value = outcome.value.receipt(txn.new_runs)

    def _decide(self, txn: _Txn, ops: list[Op], outcomes: list[Outcome]) -> None:
        """Run ``ops`` in the open transaction: the first three lock steps of
        :meth:`write`'s order, and every op's decision."""
        cur = txn.cur
        if any(op.kind in _ADMISSION_KINDS for op in ops):
            # Taken first, by every batch that can add live runs: admission is
            # decided on the committed count, one batch at a time, cluster-wide.
            cur.execute("SELECT value FROM cluster_counters WHERE name = 'inflight' FOR UPDATE")
            # A new statement, so a new snapshot taken with the row held: it sees
            # every release committed so far (a release committed later only makes
            # this count too high, never too low: the bound is never exceeded).
            cur.execute(_LIVE_COUNT, (_RELEASED + "%",))
            row = cur.fetchone()
            txn.inflight = 0 if row is None else int(row[0])
        self._lock_runs(txn, ops)
        # Claims last: a claim waits for no row, so its place in the batch is free,
        # and the batch's finishes are then written together.
        order = sorted(range(len(ops)), key=lambda i: ops[i].kind == "claim")
        at = 0
        while at < len(order):
            kind = ops[order[at]].kind
            if kind == "finish":
                group = _distinct_runs(ops, order, at)
                self._finish_all(txn, [(ops[i].fields, outcomes[i]) for i in group])
                at += len(group)
                continue
            index = order[at]
            getattr(self, f"_op_{kind}")(txn, ops[index].fields, outcomes[index])
            at += 1

    def _commit(self, conn: psycopg.Connection[Any], txn: _Txn, outcomes: list[Outcome]) -> int:
        """Write the counters and the events, then COMMIT, in one message to the
        server: the last two lock steps of :meth:`write`'s order. The old head (the
        batch's first seq - 1; 0 when the batch has no events)."""
        rows = [event for outcome in outcomes for event in outcome.events]
        offsets: dict[int, int] = {}
        offset = 0
        for outcome in outcomes:
            offsets[id(outcome)] = offset
            offset += len(outcome.events)
        queued = [(run_id, offsets[id(o)] + 1) for run_id, o in txn.new_runs.items()]
        statements: list[str] = []
        params: dict[str, Any] = {}
        if txn.released:
            # Runs left the live set without the inflight row: counted on this node's
            # own row, which admission subtracts (never a shared hot row).
            statements.append(_RELEASE)
            params.update(released_name=_RELEASED + self.node, released=txn.released)
        if txn.inflight_delta:
            statements.append(
                "UPDATE cluster_counters SET value = value + %(delta)s WHERE name = 'inflight'"
            )
            params["delta"] = txn.inflight_delta
        if rows:
            # Last: the head row's lock is held until COMMIT, so seqs follow commits.
            statements.append(_TAIL)
            params.update(
                n=len(rows),
                kinds=[kind for kind, _, _ in rows],
                runs=[run_id for _, run_id, _ in rows],
                data=[data for _, _, data in rows],
                queued_runs=[run_id for run_id, _ in queued],
                queued_offsets=[off for _, off in queued],
                channel=CHANNEL,
            )
        statements.append("COMMIT")
        # One simple-protocol query (parameters bound here, several statements): the
        # server runs them back to back, so the head row is held for the server's time
        # only, never across a round trip to this (maybe busy) process.
        with self._psycopg.ClientCursor(conn) as cur:
            cur.execute(";\n".join(statements), params)
            if not rows:
                return 0
            for _ in range(len(statements) - 2):
                cur.nextset()
            row = cur.fetchone()
        assert row is not None
        return int(row[0])

    def _rollback(self, conn: psycopg.Connection[Any]) -> None:
        """End a failed batch's transaction, if the connection still has one."""
        if conn.closed or conn.broken:
            return  # the server rolls it back with the session
        if conn.info.transaction_status != self._psycopg.pq.TransactionStatus.IDLE:
            try:
                conn.execute("ROLLBACK")
            except self._psycopg.Error:
                conn.close()  # the next batch reconnects

    def _lock_runs(self, txn: _Txn, ops: list[Op]) -> None:
        """Lock, in ``run_id`` order and in one statement, every existing run row the
        batch may wait for: the runs its ops name, the live runs its submissions may
        join, and the running runs of the nodes its reaps find dead."""
        ids: list[int] = []
        keys: list[str] = []
        for op in ops:
            if op.kind in _NAMED_RUN_KINDS:
                ids.append(op.fields["run_id"])
            elif op.kind == "submit" and not op.fields["mutating"]:
                keys.append(_snapshot_id(op.fields["content"]))
            elif op.kind == "reap":
                txn.dead[id(op.fields)] = self._dead_nodes(txn, op.fields)
        dead = sorted({node for nodes in txn.dead.values() for node in nodes})
        if len(ids) + len(keys) + len(dead) <= 1 and not txn.dead:
            return  # at most one row to wait for: no order to keep
        txn.cur.execute(
            "SELECT run_id FROM cluster_runs WHERE run_id = ANY(%s)"
            " OR (coalesce_key = ANY(%s) AND state IN ('queued', 'running'))"
            " OR (owner = ANY(%s) AND state = 'running')"
            " ORDER BY run_id FOR UPDATE",
            (ids, keys, dead),
        )
        txn.locked = [int(row[0]) for row in txn.cur.fetchall()]

    def _dead_nodes(self, txn: _Txn, fields: dict[str, Any]) -> list[str]:
        """The nodes a reap holds the runs of: this node (``retire``, ``own``), or
        those whose lease expired (their leases dropped; ``SKIP LOCKED``: never waits)."""
        if fields.get("retire"):  # this node, closing: its lease goes too
            txn.cur.execute("DELETE FROM cluster_nodes WHERE node = %s", (self.node,))
            return [self.node]
        if fields.get("own"):  # this node, after it fenced itself
            return [self.node]
        txn.cur.execute(
            "DELETE FROM cluster_nodes WHERE node IN (SELECT node FROM cluster_nodes"
            " WHERE expires_at < now() FOR UPDATE SKIP LOCKED) RETURNING node"
        )
        return sorted(row[0] for row in txn.cur.fetchall())

    def _op_submit(self, txn: _Txn, fields: dict[str, Any], outcome: Outcome) -> None:
        cur, inflight = txn.cur, txn.inflight
        assert inflight is not None
        request_id = fields["request_id"]
        content = fields["content"]
        cur.execute(
            "INSERT INTO cluster_requests VALUES (%s, %s, 0, false, %s, %s)"
            " ON CONFLICT (request_id) DO NOTHING RETURNING request_id",
            (request_id, content, fields["actor"], self.node),
        )
        if cur.fetchone() is None:
            # Known (committed by any node, or earlier in this batch): the same receipt.
            cur.execute(
                "SELECT r.content, r.run_id, r.coalesced, u.queued_seq, u.snapshot_id"
                " FROM cluster_requests r JOIN cluster_runs u ON u.run_id = r.run_id"
                " WHERE r.request_id = %s",
                (request_id,),
            )
            known = cur.fetchone()
            assert known is not None
            if known[0] != content:
                outcome.error = RequestConflict(
                    f"request id {request_id!r} was used with other content",
                    request_id=request_id,
                )
                return
            outcome.value = _PendingReceipt(
                request_id, int(known[1]), bool(known[2]), known[4], int(known[3])
            )
            return
        revision = 0
        snapshot_id = _snapshot_id(content)
        key = None if fields["mutating"] else snapshot_id
        if key is not None:
            cur.execute(
                "UPDATE cluster_runs SET waiters = waiters + 1 WHERE coalesce_key = %s"
                " AND state IN ('queued', 'running') RETURNING run_id, queued_seq",
                (key,),
            )
            joined = cur.fetchone()
            if joined is not None:
                run_id = int(joined[0])
                cur.execute(
                    "UPDATE cluster_requests SET run_id = %s, coalesced = true"
                    " WHERE request_id = %s",
                    (run_id, request_id),
                )
                outcome.value = _PendingReceipt(
                    request_id, run_id, True, snapshot_id, int(joined[1])
                )
                return
        if inflight >= self._max_inflight:
            # Only admitted requests are stored: a refusal may be retried.
            cur.execute("DELETE FROM cluster_requests WHERE request_id = %s", (request_id,))
            outcome.value = Receipt(
                admitted=False,
                run_id=None,
                request_id=request_id,
                snapshot_id=None,
                revision=revision,
                event_cursor=0,
                code="admission_full",
                retryable=True,
                depth=inflight,
                bound=self._max_inflight,
                retry_after=self._retry_after,
            )
            return
        cur.execute(
            "INSERT INTO cluster_runs (run_id, request_id, operation, arguments, revision,"
            " snapshot_id, coalesce_key, state)"
            " VALUES (nextval('cluster_run_ids'), %s, %s, %s, %s, %s, %s, 'queued')"
            " RETURNING run_id",
            (request_id, fields["operation"], fields["arguments_json"], revision, snapshot_id, key),
        )
        row = cur.fetchone()
        assert row is not None
        run_id = int(row[0])
        cur.execute(
            "UPDATE cluster_requests SET run_id = %s WHERE request_id = %s", (run_id, request_id)
        )
        outcome.events.append(
            (
                "job_queued",
                run_id,
                f'{{"operation":{encode_json(fields["operation"])},'
                f'"arguments":{fields["arguments_json"]},"revision":{revision},'
                f'"snapshot_id":{encode_json(snapshot_id)},'
                f'"request_id":{encode_json(request_id)}}}',
            )
        )
        txn.new_runs[run_id] = outcome
        outcome.value = _PendingReceipt(request_id, run_id, False, snapshot_id, 0)
        txn.change_live(1)

    def _op_claim(self, txn: _Txn, fields: dict[str, Any], outcome: Outcome) -> None:
        cur = txn.cur
        adopted: list[tuple[Any, ...]] = []
        if "adopt" in fields:
            # Running as this node's, but not among the runs it knows (``adopt``): a
            # claim of them committed while the node saw it fail. Taken again, as is;
            # skipped while locked, as every claim is (never a wait out of lock order):
            # a node holding them (this lease expired) goes first, the next claim sees.
            cur.execute(
                "SELECT run_id, request_id, operation, arguments, revision, snapshot_id"
                " FROM cluster_runs WHERE state = 'running' AND owner = %s"
                " AND run_id <> ALL(%s) ORDER BY run_id LIMIT %s FOR UPDATE SKIP LOCKED",
                (self.node, list(fields["adopt"]), fields["limit"]),
            )
            adopted = cur.fetchall()
        # Only under a live lease, held (FOR SHARE) until COMMIT: a reaper that dropped
        # this node's lease first leaves the claim empty (else the runs would be owned
        # by a node no reaper knows of, running for ever if it died now), and one that
        # comes later skips the locked lease (SKIP LOCKED) and holds these runs next time.
        # A lease locked by its own renewal is skipped too: the claim waits for nothing
        # and the node claims again at its next wake-up.
        cur.execute(
            "WITH lease AS (SELECT 1 FROM cluster_nodes WHERE node = %s"
            " AND expires_at > now() FOR SHARE SKIP LOCKED)"
            " UPDATE cluster_runs SET state = 'running', owner = %s"
            " WHERE EXISTS (SELECT 1 FROM lease) AND run_id IN ("
            "SELECT run_id FROM cluster_runs WHERE state = 'queued' AND operation = ANY(%s)"
            " ORDER BY run_id LIMIT %s FOR UPDATE SKIP LOCKED)"
            " RETURNING run_id, request_id, operation, arguments, revision, snapshot_id",
            (self.node, self.node, list(fields["operations"]), fields["limit"] - len(adopted)),
        )
        claimed = sorted((_claimed(r) for r in cur.fetchall()), key=lambda run: run.run_id)
        owner = encode_json(self.node)
        for run in claimed:
            outcome.events.append(("job_started", run.run_id, f'{{"owner":{owner}}}'))
        outcome.value = [_claimed(r) for r in adopted] + claimed

    def _op_progress(self, txn: _Txn, fields: dict[str, Any], outcome: Outcome) -> None:
        cur = txn.cur
        cur.execute(
            "UPDATE cluster_runs SET progress = %s WHERE run_id = %s AND owner = %s"
            " AND state = 'running' RETURNING run_id",
            (fields["fraction"], fields["run_id"], self.node),
        )
        outcome.value = cur.fetchone() is not None
        if outcome.value:
            outcome.events.append(
                ("job_progress", fields["run_id"], f'{{"fraction":{fields["fraction"]!r}}}')
            )

    def _finish_all(self, txn: _Txn, finishes: list[tuple[dict[str, Any], Outcome]]) -> None:
        """Record the outcome of several runs this node owns (distinct ``run_id``), in
        one statement; each outcome's value: whether its run was still this node's."""
        cur = txn.cur
        cur.execute(
            "UPDATE cluster_runs AS r SET state = CASE WHEN u.cancelled_by IS NULL"
            " THEN 'finished' ELSE 'cancelled' END, verdict = u.verdict, result = u.result,"
            " error = u.error, cancelled_by = u.cancelled_by, finished_at = %s"
            " FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[])"
            " AS u(run_id, verdict, result, error, cancelled_by)"
            " WHERE r.run_id = u.run_id AND r.owner = %s AND r.state = 'running'"
            " RETURNING r.run_id",
            (
                time.time(),
                [fields["run_id"] for fields, _ in finishes],
                [fields.get("verdict") for fields, _ in finishes],
                [fields.get("result_json") for fields, _ in finishes],
                [fields.get("error_json") for fields, _ in finishes],
                [fields.get("cancelled_by") for fields, _ in finishes],
                self.node,
            ),
        )
        decided = {int(row[0]) for row in cur.fetchall()}
        for fields, outcome in finishes:
            run_id = fields["run_id"]
            outcome.value = run_id in decided
            if not outcome.value:  # not ours (any more), or decided already
                continue
            cancelled_by = fields.get("cancelled_by")
            if cancelled_by is not None:
                kind = "job_cancelled"
                data = f'{{"by":{encode_json(cancelled_by)},"was":"running"}}'
            else:
                kind = "job_finished"
                data = '{"verdict":' + encode_json(fields["verdict"])
                if fields["result_json"] is not None:
                    data += ',"result":' + fields["result_json"]
                if fields["error_json"] is not None:
                    data += ',"error":' + fields["error_json"]
                data += "}"
            outcome.events.append((kind, run_id, data))
            txn.change_live(-1)

    def _op_cancel(self, txn: _Txn, fields: dict[str, Any], outcome: Outcome) -> None:
        cur = txn.cur
        run_id, actor = fields["run_id"], fields["actor"]
        cur.execute(
            "SELECT state, owner, cancel_requested FROM cluster_runs WHERE run_id = %s FOR UPDATE",
            (run_id,),
        )
        row = cur.fetchone()
        if row is None:
            outcome.value = "unknown"
            return
        state, owner, requested = row
        if state == "queued":
            cur.execute(
                "UPDATE cluster_runs SET state = 'cancelled', cancelled_by = %s,"
                " finished_at = %s WHERE run_id = %s",
                (actor, time.time(), run_id),
            )
            outcome.events.append(
                ("job_cancelled", run_id, f'{{"by":{encode_json(actor)},"was":"queued"}}')
            )
            outcome.value = "cancelled"
            txn.change_live(-1)
            return
        if state == "running":
            if requested is None:
                # Only the owner stops the work and records job_cancelled: it hears of
                # this request through its follower (truthful cancel, design §6.7).
                cur.execute(
                    "UPDATE cluster_runs SET cancel_requested = %s WHERE run_id = %s",
                    (actor, run_id),
                )
                outcome.events.append(
                    (
                        "job_cancel_requested",
                        run_id,
                        f'{{"by":{encode_json(actor)},"owner":{encode_json(owner)}}}',
                    )
                )
            outcome.value = "requested"
            return
        outcome.value = "decided"

    def _op_reap(self, txn: _Txn, fields: dict[str, Any], outcome: Outcome) -> None:
        """Hold the running runs of every node whose lease expired (their leases were
        dropped up front, :meth:`_dead_nodes`); or (``retire``, ``own``) this node's."""
        cur = txn.cur
        dead = txn.dead[id(fields)]
        held: list[tuple[str, int, int]] = []
        if dead:
            # Only rows locked up front: a run the dead node claimed since (a zombie
            # still writing) is its own to hold when it finds its lease gone.
            cur.execute(
                "UPDATE cluster_runs SET state = 'held', interruptions = interruptions + 1"
                " WHERE owner = ANY(%s) AND state = 'running' AND run_id = ANY(%s)"
                " RETURNING owner, run_id, interruptions",
                (dead, txn.locked),
            )
            held = sorted(cur.fetchall(), key=lambda row: row[1])
            gone = [node for node in dead if node != self.node or fields.get("retire")]
            if gone:
                # A node gone for good: its released count folds into inflight (the
                # sum stays the same), so the counter rows do not pile up.
                cur.execute(
                    "WITH gone AS (DELETE FROM cluster_counters WHERE name = ANY(%s)"
                    " RETURNING value) SELECT coalesce(sum(value), 0) FROM gone",
                    ([_RELEASED + node for node in sorted(gone)],),
                )
                row = cur.fetchone()
                txn.inflight_delta -= 0 if row is None else int(row[0])
        threshold = fields["quarantine_after"]
        for owner, run_id, interruptions in held:
            outcome.events.append(
                (
                    "job_interrupted",
                    run_id,
                    f'{{"interruptions":{interruptions},'
                    f'"quarantined":{"true" if interruptions >= threshold else "false"},'
                    f'"owner":{encode_json(owner)}}}',
                )
            )
        outcome.value = (dead, [run_id for _, run_id, _ in held])
        txn.change_live(-len(held))

    def _held(self, txn: _Txn, run_id: int, outcome: Outcome) -> tuple[Any, ...] | None:
        """The held run's row, locked; else None with the outcome's error set."""
        txn.cur.execute(
            "SELECT state, interruptions, operation, arguments, revision, snapshot_id,"
            " request_id FROM cluster_runs WHERE run_id = %s FOR UPDATE",
            (run_id,),
        )
        row = txn.cur.fetchone()
        if row is None:
            outcome.error = UnknownRun(f"no run {run_id}", run_id=run_id)
        elif row[0] in ("finished", "cancelled"):
            outcome.error = AlreadyDecided(f"run {run_id} is already {row[0]}", state=row[0])
        elif row[0] != "held":
            outcome.error = InvalidCommand(f"run {run_id} is {row[0]}, not held", fields=["run_id"])
        else:
            return tuple(row)
        return None

    def _op_resume(self, txn: _Txn, fields: dict[str, Any], outcome: Outcome) -> None:
        row = self._held(txn, fields["run_id"], outcome)
        if row is None:
            return
        _, interruptions, operation, arguments, revision, snapshot_id, request_id = row
        assert txn.inflight is not None  # a resume takes the inflight row (it admits)
        if interruptions >= fields["quarantine_after"] and not fields["override"]:
            outcome.error = RunQuarantined(
                f"run {fields['run_id']} was interrupted {interruptions} times; resume it"
                " with override=True",
                interruptions=interruptions,
            )
            return
        if txn.inflight >= self._max_inflight:
            outcome.error = AdmissionFull(
                f"{txn.inflight} runs in flight (bound {self._max_inflight})",
                depth=txn.inflight,
                bound=self._max_inflight,
                retry_after=self._retry_after,
            )
            return
        # Queued again, for any node to claim; it no longer coalesces (a live run of
        # the same request may exist by now).
        txn.cur.execute(
            "UPDATE cluster_runs SET state = 'queued', owner = NULL, cancel_requested = NULL,"
            " coalesce_key = NULL WHERE run_id = %s",
            (fields["run_id"],),
        )
        outcome.events.append(
            (
                "job_queued",
                fields["run_id"],
                f'{{"operation":{encode_json(operation)},"arguments":{arguments},'
                f'"revision":{revision},"snapshot_id":{encode_json(snapshot_id)},'
                f'"request_id":{encode_json(request_id)},"resumed":true,'
                f'"interruptions":{interruptions}}}',
            )
        )
        txn.change_live(1)

    def _op_discard(self, txn: _Txn, fields: dict[str, Any], outcome: Outcome) -> None:
        if self._held(txn, fields["run_id"], outcome) is None:
            return
        txn.cur.execute(
            "UPDATE cluster_runs SET state = 'cancelled', cancelled_by = %s, finished_at = %s"
            " WHERE run_id = %s",
            (fields["actor"], time.time(), fields["run_id"]),
        )
        outcome.events.append(
            (
                "job_cancelled",
                fields["run_id"],
                f'{{"by":{encode_json(fields["actor"])},"was":"held","reason":"discarded"}}',
            )
        )

    def _op_record(self, txn: _Txn, fields: dict[str, Any], outcome: Outcome) -> None:
        outcome.events.append((fields["kind"], None, fields["data_json"]))

    # -- leases (the heartbeat's own connection) ------------------------------------------

    def renew(self, lease: float) -> tuple[bool, int]:
        """Extend this node's lease to ``lease`` seconds from the database's now; whether
        it was still held (False: another node found it expired and took it), and how
        many other leases have expired (the heartbeat's thread)."""
        conn = self._connection("heartbeat")
        with conn.transaction():
            # No wait for a synchronous standby: a renewal lost in a failover only makes
            # the lease look older (the node may be judged dead early: its runs held,
            # never run twice), and one waiting on a standby would hold the lease row
            # that this node's claims take.
            conn.execute("SET LOCAL synchronous_commit = local")
            row = conn.execute(
                "UPDATE cluster_nodes SET expires_at = now() + make_interval(secs => %s)"
                " WHERE node = %s RETURNING (SELECT count(*) FROM cluster_nodes"
                " WHERE expires_at < now())",
                (lease, self.node),
            ).fetchone()
        return row is not None, 0 if row is None else int(row[0])

    def join(self, lease: float) -> None:
        """Take this node's lease (at open, the writer's thread)."""
        self._connection("writer").execute(
            "INSERT INTO cluster_nodes (node, expires_at)"
            " VALUES (%s, now() + make_interval(secs => %s))",
            (self.node, lease),
        )

    # -- reads -----------------------------------------------------------------------------

    def follow(self, after: int, limit: int, wait: float) -> tuple[list[tuple[Any, ...]], int]:
        """Wait up to ``wait`` seconds for a notification, then read the events after
        ``after`` (at most ``limit``) and the committed head (the follower's thread).

        Raises:
            psycopg.Error: the connection failed (the next call reconnects and LISTENs).
        """
        conn = self._connection("follower")
        if wait > 0:
            # Wake-ups that arrived meanwhile (during the last read, say) are taken all
            # at once: one read covers every commit they announce.
            pending = sum(1 for _ in conn.notifies(timeout=0))
            if not pending:
                # Any notification, or none within ``wait``: either way, poll.
                for _ in conn.notifies(timeout=wait, stop_after=1):
                    pass
        # The events and the head in one statement: one snapshot, one round trip.
        rows = conn.execute(
            "SELECT h.value, e.seq, e.kind, e.run_id, e.data FROM cluster_counters AS h"
            " LEFT JOIN LATERAL (SELECT seq, kind, run_id, data FROM cluster_events"
            " WHERE seq > %s ORDER BY seq LIMIT %s) AS e ON true"
            " WHERE h.name = 'head' ORDER BY e.seq",
            (after, limit),
        ).fetchall()
        head = int(rows[0][0]) if rows else 0
        return [row[1:] for row in rows if row[1] is not None], head

    def read_run(self, run_id: int) -> tuple[Any, ...] | None:
        """A run's row (``_RUN_FIELDS``), or None (the reader's thread)."""
        return (
            self._connection("reader")
            .execute(f"SELECT {_RUN_FIELDS} FROM cluster_runs WHERE run_id = %s", (run_id,))
            .fetchone()
        )

    def read_events(self, after: int, limit: int) -> list[tuple[Any, ...]]:
        """Up to ``limit`` committed events after ``after`` (the reader's thread)."""
        return (
            self._connection("reader")
            .execute(
                "SELECT seq, kind, run_id, data FROM cluster_events WHERE seq > %s"
                " ORDER BY seq LIMIT %s",
                (after, limit),
            )
            .fetchall()
        )

    def connect_timeout(self) -> int:
        """Seconds a connection attempt may take."""
        return max(2, math.ceil(self._statement_timeout))


class _PendingReceipt:
    """A receipt whose cursor may be known only once its batch has its seqs."""

    __slots__ = ("coalesced", "queued_seq", "request_id", "run_id", "snapshot_id")

    def __init__(
        self, request_id: str, run_id: int, coalesced: bool, snapshot_id: str, queued_seq: int
    ) -> None:
        self.request_id = request_id
        self.run_id = run_id
        self.coalesced = coalesced
        self.snapshot_id = snapshot_id
        self.queued_seq = queued_seq

    def receipt(self, new_runs: dict[int, Outcome]) -> Receipt:
        created = new_runs.get(self.run_id)
        # A run created in this batch (also when joined or repeated within it) has its
        # job_queued seq only now; its row's queued_seq was written with it.
        queued_seq = created.first_seq if created is not None else self.queued_seq
        return Receipt(
            admitted=True,
            run_id=self.run_id,
            request_id=self.request_id,
            snapshot_id=self.snapshot_id,
            revision=0,
            event_cursor=queued_seq - 1,
            coalesced=self.coalesced,
        )


def _claimed(row: tuple[Any, ...]) -> ClaimedRun:
    """A claimed run from its row (run_id, request_id, operation, arguments, revision,
    snapshot_id)."""
    return ClaimedRun(
        run_id=int(row[0]),
        request_id=row[1],
        operation=row[2],
        arguments=_loads(row[3]),
        revision=int(row[4]),
        snapshot_id=row[5],
    )


def _snapshot_id(content: str, revision: int = 0) -> str:
    """The content key of a submission: its ``snapshot_id`` and, for an operation that
    does not mutate, its coalescing key."""
    return hashlib.sha256(f"{revision}:{content}".encode()).hexdigest()[:16]


def _distinct_runs(ops: list[Op], order: list[int], at: int) -> list[int]:
    """The indexes of the finishes from ``order[at]`` on, up to the first op that is
    not a finish or names a run again (written in the next statement, after it)."""
    group: list[int] = []
    runs: set[int] = set()
    for index in order[at:]:
        op = ops[index]
        if op.kind != "finish" or op.fields["run_id"] in runs:
            break
        runs.add(op.fields["run_id"])
        group.append(index)
    return group


def _loads(text: str) -> dict[str, Any]:
    value = json.loads(text)
    assert isinstance(value, dict)
    return value
