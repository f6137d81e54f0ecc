"""The ledger's reads: bounded, and every row checked (design §6.11, §6.19).

:class:`LedgerReads` is owned by a ledger's store and reads what memory no longer holds
(a run, a request id, events below the window, a page of decided runs) through a
connection and its one-thread limiter: the SQLite store's one connection (so a read sees
everything committed before it and never shares the connection with a commit), or the
PostgreSQL store's reader connection. The SQL is written with ``?`` placeholders; the
PostgreSQL store's connection adapts them.

No read waits without bound: each one gives up after ``read_timeout`` seconds (a stalled
disk, or a stalled commit ahead of it) with :class:`~actors.errors.LedgerUnavailable`;
its worker thread is abandoned and keeps the connection (the limiter) until it returns,
and the store is asked to cancel the statement it runs (PostgreSQL can).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import trio

from ...errors import LedgerCorrupt, LedgerError, LedgerUnavailable
from .._types import TERMINAL_STATES
from ._rows import RowCheck, decode_event, decode_request, decode_run
from ._schema import RUN_COLUMNS

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from .._types import Event, Receipt

_T = TypeVar("_T")

__all__ = ["Cursor", "LedgerReads", "ReadConnection", "StoreErrors"]

_log = logging.getLogger("actors.eventlog")


class Cursor(Protocol):
    """The rows of one statement (``sqlite3.Cursor`` and psycopg's ``Cursor`` both are)."""

    def fetchone(self) -> Any:
        """The next row, or None."""

    def fetchall(self) -> list[Any]:
        """Every row left."""

    def __iter__(self) -> Iterator[Any]:
        """The rows left, one by one."""


class ReadConnection(Protocol):
    """What a read needs of a connection: ``execute`` with ``?`` placeholders."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor:
        """Run ``sql`` with ``parameters``."""
        ...


class StoreErrors(Protocol):
    """How a store names itself and classifies its engine's errors."""

    @property
    def path(self) -> str:
        """Where the ledger lives, for messages (a URL without its password)."""
        ...

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        """The engine's errors: classified, never a crash."""
        ...

    def classify(self, exc: BaseException, doing: str, *, retry_after: float = 0.05) -> LedgerError:
        """The ledger error for ``exc`` while ``doing`` something."""
        ...


class LedgerReads:
    """The bounded reads of one ledger (design §6.19).

    Args:
        store: Names the ledger and classifies the engine's errors.
        limiter: The connection's ``CapacityLimiter(1)``: one thread on it at a time.
        connection: Returns the open connection (None once closed); called in the thread.
        timeout: Seconds (trio clock) one read may take; then ``LedgerUnavailable``.
        retry_after: Seconds: the ``retry_after`` of a read the engine failed.
        cancel: Cancels the statement of an abandoned read (called shielded, bounded).
    """

    def __init__(
        self,
        store: StoreErrors,
        limiter: trio.CapacityLimiter,
        connection: Callable[[], ReadConnection | None],
        *,
        timeout: float,
        retry_after: float,
        cancel: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._store = store
        self._path = store.path
        self._cancel = cancel
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

        def read(conn: ReadConnection) -> tuple[dict[str, Any], int] | None:
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

    async def read(self, fn: Callable[[ReadConnection], _T]) -> _T:
        """Return ``fn(connection)``, run in a worker thread for at most ``timeout``.

        Raises:
            LedgerUnavailable: (``ledger_unavailable``) no answer within ``timeout``
                seconds; ``details`` has ``retry_after``.
            LedgerCorrupt: (``ledger_corrupt``) what ``fn`` read is damaged (logged).
            LedgerError: (``ledger_error``) the engine failed, or the ledger is closed.
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
                try:
                    return await self.call(run, abandon=True)
                except trio.Cancelled:
                    if self._cancel is not None:
                        # Shielded: the cancel request is bounded by its own timeout.
                        with trio.CancelScope(shield=True):
                            await self._cancel()
                    raise
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
            LedgerError: (``ledger_error`` or a subclass) the engine failed; its error
                is the cause.
        """
        try:
            return await trio.to_thread.run_sync(
                fn, *args, limiter=self._limiter, abandon_on_cancel=abandon
            )
        except self._store.errors as exc:
            error = self._store.classify(exc, "reading", retry_after=self._retry_after)
            if error is exc:
                raise  # ours already (the PostgreSQL writer lock is taken)
            raise error from exc
