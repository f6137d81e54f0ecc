"""The event log's ledger: what it needs of durable storage, SQLite and PostgreSQL (§6.10).

The rest of the event log imports only this façade. :class:`Ledger` is the interface:
everything the event log asks of a ledger, and nothing about how it stores. The
event log builds a :class:`SQLiteLedger` for a file path, and for a ``postgresql://`` URL
(:func:`is_postgres_url`; docs/cluster.rst) a :class:`BatchLedger` on a
:class:`PostgresStore`: one ledger on an engine's store. Its modules:

* ``_commit``: the ledger itself, and what shares its private state: group commit
  (batches), durability tickets, failed and stalled commits (the outage state and its
  watchdog), the close within ``close_timeout``, and the ledger's statistics (§6.10,
  §6.13, §6.19);
* ``_reads``: its reads of what memory no longer holds, each bounded (§6.11, §6.19);
* ``_connection``: the SQLite ledger and its store: its one connection, its
  transactions, its errors;
* ``_postgres``: the PostgreSQL store: psycopg connections in worker threads, one per
  role, statements bounded and cancelled with their trio scope, reconnection, the
  writer lock;
* ``_schema``: creating, migrating and pruning a ledger file;
* ``_inspect``: the read-only inspection of a file before anything writes to it (§6.11,
  §6.12), with ``_wal``, the check of its write-ahead log (§6.12);
* ``_rows``: the checks of every value read back (§6.11): a damaged row is an error for
  the request that read it, never a crash. These rules are about the event log's rows,
  not about SQLite; another ledger (PostgreSQL) would check what it reads with them too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import trio

from ._commit import BatchLedger as BatchLedger
from ._commit import LedgerStatistics as LedgerStatistics
from ._commit import Ticket as Ticket
from ._commit import wait_durable as wait_durable
from ._connection import SQLiteLedger as SQLiteLedger
from ._inspect import LedgerSnapshot as LedgerSnapshot
from ._postgres import PostgresStore as PostgresStore
from ._postgres import is_postgres_url as is_postgres_url
from ._rows import RowCheck as RowCheck
from ._rows import decode_run as decode_run
from ._wal import WalReport as WalReport

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...errors import LedgerUnavailable
    from .._types import Event, Receipt
    from ._commit import HealthCallback

__all__ = [
    "BatchLedger",
    "Ledger",
    "LedgerSnapshot",
    "LedgerStatistics",
    "PostgresStore",
    "RowCheck",
    "SQLiteLedger",
    "Ticket",
    "WalReport",
    "decode_run",
    "is_postgres_url",
    "wait_durable",
]


class Ledger(Protocol):
    """What the event log needs of a ledger: durable storage of its decisions (§6.10).

    A ledger is opened once (:meth:`open`), then runs its writer and its commit watchdog
    as tasks until cancelled, and is closed once (:meth:`close_within`). In between, the
    log *stages* rows synchronously (each ``stage_*`` returns the :class:`Ticket` of the
    batch it joined, never waits) and reads back, checked, what memory no longer holds.
    Every read and wait is bounded (design §6.19); while commits fail, :attr:`unavailable`
    says why and tickets are delayed, not lost (design §6.13).
    """

    @property
    def path(self) -> str:
        """Where the ledger lives (a file, or a URL without its password), for messages
        and log records."""
        ...

    @property
    def wal_report(self) -> WalReport | None:
        """What the check of the write-ahead log found at open (None without one)."""
        ...

    @property
    def pending_rows(self) -> int:
        """Rows staged and not yet committed."""
        ...

    on_commit: Callable[[int, float], None] | None
    """Called (sync) after each successful commit with its rows and its seconds."""

    @property
    def unavailable(self) -> LedgerUnavailable | None:
        """The error of the outage in progress while commits fail, else None (§6.13)."""
        ...

    async def open(self, *, keep_requests: int, keep_events: int | None = None) -> LedgerSnapshot:
        """Check, create or open the ledger, and load what boot needs.

        Args:
            keep_requests: How many of the most recent requests to load.
            keep_events: How many of the most recent events to keep (None: all).

        Raises:
            LedgerCorrupt: (``ledger_corrupt``) the ledger is damaged; nothing was written.
            LedgerVersionUnsupported: (``ledger_version_unsupported``) a schema we cannot open.
            LedgerError: (``ledger_error``) not a ledger, or the storage failed.
        """
        ...

    async def run_writer(
        self,
        *,
        on_health: HealthCallback | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Commit staged rows until cancelled; ``on_health`` hears outages (§6.13)."""
        ...

    async def run_watchdog(
        self,
        *,
        on_health: HealthCallback | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Declare an outage while a commit runs too long, until cancelled (§6.19)."""
        ...

    async def close_within(self, close_timeout: float) -> None:
        """Commit what is staged and close, for at most ``close_timeout`` seconds (trio
        clock); never raises: what could not be committed is logged and its tickets fail.
        """
        ...

    def stage_request(
        self,
        request_id: str,
        content: str,
        run_id: int,
        receipt_json: str,
        position: int,
        actor: str | None = None,
    ) -> Ticket:
        """Stage an admitted request's row."""
        ...

    def stage_detach(self, request_id: str, cancelled_by: str) -> Ticket:
        """Stage that a request stopped waiting on its run (§6.14)."""
        ...

    def stage_run(self, row: tuple[Any, ...]) -> Ticket:
        """Stage a run's row (its last state in a batch is the one written)."""
        ...

    def stage_event(self, seq: int, kind: str, run_id: int | None, data_json: str) -> Ticket:
        """Stage an event row, in seq order without a gap.

        Raises:
            ValueError: ``seq`` does not follow the previous staged event's.
        """
        ...

    def stage_progress(self, seq: int, run_id: int, fraction: float) -> Ticket:
        """Stage the ``job_progress`` event whose data is ``{"fraction": fraction}``.

        Raises:
            ValueError: ``seq`` does not follow the previous staged event's.
        """
        ...

    def stage_meta(self, key: str, value: str) -> Ticket:
        """Stage a ``meta`` value (``revision``)."""
        ...

    async def flush(self) -> None:
        """Wait until everything staged so far is committed.

        Raises:
            LedgerUnavailable: (``ledger_unavailable``) commits fail now (§6.13).
            LedgerError: (``ledger_error``) the ledger closed first.
        """
        ...

    async def settle_for_read(self) -> None:
        """Wait until what is staged is committed, unless commits fail (§6.13).

        Raises:
            LedgerUnavailable: (``ledger_unavailable``) not within the read timeout.
        """
        ...

    async def wait_writable(self) -> None:
        """Wait while too many rows are staged (back-pressure), unless commits fail."""
        ...

    async def fetch_run(self, run_id: int) -> tuple[dict[str, Any], int] | None:
        """The checked fields of a committed run and how many requests wait on it.

        Raises:
            LedgerCorrupt: (``ledger_corrupt``) the row is damaged (§6.11).
            LedgerUnavailable: (``ledger_unavailable``) no answer in time (§6.19).
            LedgerError: (``ledger_error``) the storage failed.
        """
        ...

    async def fetch_request(self, request_id: str) -> tuple[str, Receipt, str | None] | None:
        """``(content, receipt, cancelled_by)`` of a committed request, checked.

        Raises:
            LedgerCorrupt, LedgerUnavailable, LedgerError: as :meth:`fetch_run`.
        """
        ...

    async def fetch_events(self, after: int, limit: int) -> list[Event]:
        """Up to ``limit`` committed events after ``after``, checked, without a gap.

        Raises:
            LedgerCorrupt, LedgerUnavailable, LedgerError: as :meth:`fetch_run`.
        """
        ...

    async def fetch_decided_runs(
        self,
        after: int,
        limit: int,
        states: tuple[str, ...],
        verdict: str | None,
        since: float | None,
    ) -> list[tuple[Any, ...]]:
        """A page of decided runs' raw rows; the caller checks each (§6.11, §6.18).

        Raises:
            LedgerUnavailable, LedgerError: as :meth:`fetch_run`.
        """
        ...

    def statistics(self) -> LedgerStatistics:
        """The ledger's counters, taken without waiting."""
        ...
