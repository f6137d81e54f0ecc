"""The ledger's reads: bounded, and every row checked (design §6.11, §6.19).

:class:`LedgerReads` is owned by the
:class:`~actors._eventlog._ledger._commit.SQLiteLedger` and reads what memory no longer
holds (a run, a request id, events below the window, a page of decided runs) through the
ledger's one connection and its one-thread limiter, so a read sees everything committed
before it and never shares the connection with a commit.

No read waits without bound: each one gives up after ``read_timeout`` seconds (a stalled
disk, or a stalled commit ahead of it) with :class:`~actors.errors.LedgerUnavailable`;
its worker thread is abandoned and keeps the connection (the limiter) until it returns.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from ...errors import LedgerCorrupt, LedgerError, LedgerUnavailable
from .._types import TERMINAL_STATES
from ._connection import classify_error
from ._rows import RowCheck, decode_event, decode_request, decode_run
from ._schema import RUN_COLUMNS

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._types import Event, Receipt

_T = TypeVar("_T")

__all__ = ["LedgerReads"]

_log = logging.getLogger("actors.eventlog")


class LedgerReads:
    """The bounded reads of one ledger (design §6.19).

    Args:
        path: The ledger's file, for messages and records.
        limiter: The ledger's ``CapacityLimiter(1)``: one thread on the connection.
        connection: Returns the open connection, or None once the ledger is closed.
        timeout: Seconds (trio clock) one read may take; then ``LedgerUnavailable``.
        retry_after: Seconds: the ``retry_after`` of a read SQLite failed.
    """

    def __init__(
        self,
        path: str,
        limiter: trio.CapacityLimiter,
        connection: Callable[[], sqlite3.Connection | None],
        *,
        timeout: float,
        retry_after: float,
    ) -> None:
        self._path = path
        self._limiter = limiter
        self._connection = connection
        self.timeout = timeout
        self._retry_after = retry_after
        #: Reads (and waits before one) that gave up after ``timeout``.
        self.timeouts = 0

    async def run(self, run_id: int) -> tuple[dict[str, Any], int] | None:
        """Return the checked fields of the committed run ``run_id`` and how many
        requests still wait on it, or None.

        Raises:
            LedgerCorrupt: (``ledger_corrupt``) the row is damaged.
            LedgerUnavailable: (``ledger_unavailable``) no answer within ``timeout``.
            LedgerError: (``ledger_error``) SQLite failed.
        """
        cols = ", ".join(RUN_COLUMNS)
        path = self._path

        def read(conn: sqlite3.Connection) -> tuple[dict[str, Any], int] | None:
            row = conn.execute(f"SELECT {cols} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                return None
            waiters = conn.execute(
                "SELECT count(*) FROM requests WHERE run_id = ? AND cancelled_by IS NULL",
                (run_id,),
            ).fetchone()[0]
            return decode_run(path, tuple(row)), waiters

        return await self.read(read)

    async def request(self, request_id: str) -> tuple[str, Receipt, str | None] | None:
        """Return ``(content, receipt, cancelled_by)`` of a committed request, or None.

        Raises:
            LedgerCorrupt, LedgerUnavailable, LedgerError: as :meth:`run`.
        """
        rows = await self.query(
            "SELECT request_id, content, run_id, receipt, actor, cancelled_by FROM requests"
            " WHERE request_id = ?",
            (request_id,),
        )
        if not rows:
            return None
        content, receipt, _, cancelled_by = decode_request(self._path, tuple(rows[0]))
        return content, receipt, cancelled_by

    async def events(self, after: int, limit: int) -> list[Event]:
        """Return up to ``limit`` committed events after ``after``, checked, without a gap.

        Raises:
            LedgerCorrupt: (``ledger_corrupt``) a row is damaged, or one is missing
                between two that are there.
            LedgerUnavailable, LedgerError: as :meth:`run`.
        """
        rows = await self.query(
            "SELECT seq, kind, run_id, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
            (after, limit),
        )
        events = []
        for expected, row in enumerate(rows, after + 1):
            event = decode_event(self._path, tuple(row))
            if event.seq != expected:
                check = RowCheck(self._path, "events", "seq", expected)
                raise check.corrupt(None, "row missing (seqs have no gaps)")
            events.append(event)
        return events

    async def decided_runs(
        self,
        after: int,
        limit: int,
        states: tuple[str, ...],
        verdict: str | None,
        since: float | None,
    ) -> list[tuple[Any, ...]]:
        """Return up to ``limit`` committed ``runs`` rows decided in ``states`` (with
        ``verdict``, at or after ``since``), by run id after ``after``; raw, in
        ``RUN_COLUMNS`` order: the caller checks each (design §6.11, §6.18).

        Raises:
            LedgerUnavailable, LedgerError: as :meth:`run`.
        """
        sql = f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE run_id > ?"
        params: tuple[Any, ...] = (after,)
        if set(states) == TERMINAL_STATES:
            # Not "IN (finished, cancelled)": a damaged state must be reported, not skipped.
            sql += " AND state NOT IN ('queued', 'running', 'held')"
        else:
            sql += f" AND state IN ({', '.join('?' * len(states))})"
            params += states
        if verdict is not None:
            sql += " AND verdict = ?"
            params += (verdict,)
        if since is not None:
            sql += " AND finished_at >= ?"
            params += (since,)
        rows = await self.query(sql + " ORDER BY run_id LIMIT ?", (*params, limit))
        return [tuple(row) for row in rows]

    async def query(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """Return every row of ``sql``; bounded like :meth:`read`."""
        return await self.read(lambda conn: conn.execute(sql, params).fetchall())

    async def read(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Return ``fn(connection)``, run in a worker thread for at most ``timeout``.

        Raises:
            LedgerUnavailable: (``ledger_unavailable``) no answer within ``timeout``
                seconds; ``details`` has ``retry_after``.
            LedgerCorrupt: (``ledger_corrupt``) what ``fn`` read is damaged (logged).
            LedgerError: (``ledger_error``) SQLite failed, or the ledger is closed.
        """

        # Bounded (design §6.19): behind a stalled commit (one connection, one thread at
        # a time) or in a read the disk stalls; an abandoned read keeps the limiter
        # until its thread returns, so the connection is never shared.
        def run() -> _T:
            conn = self._connection()
            if conn is None:
                raise LedgerError("ledger is closed")
            return fn(conn)

        try:
            with trio.move_on_after(self.timeout):
                return await self.call(run, abandon=True)
        except LedgerCorrupt as exc:
            _log.error("%s", exc.message, extra={"ledger": self._path, **exc.details})
            raise
        raise self.timed_out("the read")

    def timed_out(self, what: str) -> LedgerUnavailable:
        """Count and log a read that gave up after ``timeout``; return its error."""
        self.timeouts += 1
        cause = f"{what} took longer than {self.timeout:g} s"
        _log.warning(
            "ledger %s: a read gave up: %s",
            self._path,
            cause,
            extra={"ledger": self._path, "cause": cause, "read_timeout": self.timeout},
        )
        return LedgerUnavailable(
            f"ledger {self._path!r} did not answer: {cause}",
            cause=cause,
            retry_after=self.timeout,
        )

    async def call(self, fn: Callable[..., _T], *args: object, abandon: bool = False) -> _T:
        """Run ``fn(*args)`` in a worker thread under the ledger's limiter.

        Raises:
            LedgerError: (``ledger_error`` or a subclass) SQLite failed; the
                ``sqlite3.Error`` is its cause.
        """
        try:
            return await trio.to_thread.run_sync(
                fn, *args, limiter=self._limiter, abandon_on_cancel=abandon
            )
        except sqlite3.Error as exc:
            raise classify_error(self._path, exc, "reading", retry_after=self._retry_after) from exc
