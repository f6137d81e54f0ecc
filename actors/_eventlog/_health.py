"""Whether the ledger commits: failed and stalled commits and the outage they make.

design §6.13, §6.19. :class:`LedgerHealth` is owned by the
:class:`~actors._eventlog._ledger.Ledger`. A commit that fails (disk full, an I/O
error) starts an *outage*; so does a commit that hangs without raising (a stalled
``fsync``) once it has run ``stall_timeout`` seconds, which :meth:`LedgerHealth.watch`
notices. During an outage every ticket not yet committed is *delayed* (its waiters get
:class:`~actors.errors.LedgerUnavailable` at once), and the ``on_health`` callback
hears the first failure; the first commit that succeeds ends the outage and tells
``on_health`` (None).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from ..errors import LedgerUnavailable
from ._connection import classify_error

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

    from .._core import Backoff
    from ._batch import Batch

    #: ``on_health(error)``: commits fail (``error``), or succeed again (None).
    HealthCallback = Callable[[LedgerUnavailable | None], None]

__all__ = ["LedgerHealth"]

_log = logging.getLogger("actors.eventlog")


class LedgerHealth:
    """The outage state of one ledger's commits (design §6.13, §6.19).

    Args:
        path: The ledger's file, for messages and records.
        retry: The delays between attempts to commit a batch that failed (seconds).
        stall_timeout: Seconds (trio clock) a commit may run before it counts as stalled.
        staging: Returns the batch being staged now (its ticket is delayed too).
    """

    def __init__(
        self, path: str, retry: Backoff, stall_timeout: float, staging: Callable[[], Batch]
    ) -> None:
        self._path = path
        self._retry = retry
        self._stall_timeout = stall_timeout
        self._staging = staging
        #: The error of the outage in progress, else None.
        self.unavailable: LedgerUnavailable | None = None
        self._attempt = 0
        #: Commit attempts that failed, and commits that stalled.
        self.failed_commits = 0
        self.stalled_commits = 0
        # The commit in progress: its batch, when it began, an event set whenever one
        # begins or ends (for the watchdog), and whether it was found stalled.
        self._committing: Batch | None = None
        self._began: float | None = None
        self._changed = trio.Event()
        self._stalled = False

    def retry_delay(self) -> float:
        """Seconds before the next attempt to commit a batch that failed."""
        return self._retry.delay(max(1, self._attempt))

    def moved(self, batch: Batch | None) -> None:
        """A commit of ``batch`` begins, or (None) the commit in progress ended."""
        self._committing = batch
        self._began = None if batch is None else trio.current_time()
        if batch is None:
            self._stalled = False
        self._changed.set()
        self._changed = trio.Event()

    def failed(self, batch: Batch, exc: sqlite3.Error, on_health: HealthCallback | None) -> None:
        """The commit of ``batch`` failed with ``exc``: the outage starts or goes on."""
        self.failed_commits += 1
        self._attempt += 1
        error = classify_error(self._path, exc, "commit")
        cause = str(error.details.get("cause", exc))
        unavailable = LedgerUnavailable(
            f"ledger {self._path!r} cannot commit: {cause}; decisions are kept and committed"
            " once it can",
            cause=cause,
            retry_after=self.retry_delay(),
        )
        first = self.unavailable is None
        self.unavailable = unavailable
        batch.ticket._delay(unavailable)
        self._staging().ticket._delay(unavailable)
        if first:
            _log.warning(
                "ledger %s cannot commit: %s",
                self._path,
                cause,
                extra={"ledger": self._path, "cause": cause, "rows": batch.size},
            )
            if on_health is not None:
                on_health(unavailable)

    def recovered(self, on_health: HealthCallback | None) -> None:
        """A commit succeeded during an outage: it ends."""
        failures, self._attempt = self._attempt, 0
        self.unavailable = None
        self._staging().ticket._undelay()
        _log.info(
            "ledger %s commits again after %d failed attempts",
            self._path,
            failures,
            extra={"ledger": self._path, "failed_attempts": failures},
        )
        if on_health is not None:
            on_health(None)

    async def watch(
        self,
        *,
        on_health: HealthCallback | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Declare an outage once a commit has run ``stall_timeout`` seconds (§6.19).

        Runs until cancelled. The outage ends as any other: when a commit succeeds.
        """
        task_status.started()
        while True:
            began, changed = self._began, self._changed
            if began is None or self._stalled:
                await changed.wait()
                continue
            with trio.move_on_at(began + self._stall_timeout):
                await changed.wait()
                continue
            self._stall(on_health)

    def _stall(self, on_health: HealthCallback | None) -> None:
        batch, began = self._committing, self._began
        assert batch is not None
        assert began is not None
        self._stalled = True
        self.stalled_commits += 1
        elapsed = trio.current_time() - began
        _log.warning(
            "ledger %s: a commit has run for %.3f s (limit %g s); the ledger is unavailable"
            " until it ends",
            self._path,
            elapsed,
            self._stall_timeout,
            extra={
                "ledger": self._path,
                "cause": "commit stalled",
                "seconds": elapsed,
                "stall_timeout": self._stall_timeout,
                "rows": batch.size,
            },
        )
        if self.unavailable is not None:
            return  # a retry of a failed commit: the outage is declared already
        unavailable = LedgerUnavailable(
            f"ledger {self._path!r} cannot commit: commit stalled for over"
            f" {self._stall_timeout:g} s; decisions are kept and committed once it can",
            cause="commit stalled",
            retry_after=self._stall_timeout,
        )
        self.unavailable = unavailable
        batch.ticket._delay(unavailable)
        self._staging().ticket._delay(unavailable)
        if on_health is not None:
            on_health(unavailable)
