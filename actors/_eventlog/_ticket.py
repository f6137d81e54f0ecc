"""Durability tickets of the ledger's batches (design §6.10, §6.13)."""

from __future__ import annotations

import trio

from ..errors import LedgerError, LedgerUnavailable

__all__ = ["Ticket", "wait_durable"]


class Ticket:
    """Durability of one batch: :meth:`wait` returns once it is committed (design §6.10).

    While the ledger cannot commit (disk full, an I/O error), a ticket not yet committed
    is *delayed*: its batch is kept and retried, :meth:`wait` raises
    :class:`~actors.errors.LedgerUnavailable` at once, and :meth:`wait_committed` goes
    on waiting (design §6.13).
    """

    __slots__ = ("_delayed", "_done", "_error", "_signal")

    def __init__(self) -> None:
        self._done = trio.Event()
        self._signal = trio.Event()  # set when done, or when delayed
        self._error: str | None = None
        self._delayed: LedgerUnavailable | None = None

    @property
    def done(self) -> bool:
        """True once the batch committed or failed for good."""
        return self._done.is_set()

    async def wait(self) -> None:
        """Wait until the batch is committed; always a checkpoint.

        Raises:
            LedgerUnavailable: (``ledger_unavailable``) the ledger cannot commit now; the
                batch is kept and will be committed when it can (``details`` has
                ``retry_after`` in seconds and ``cause``).
            LedgerError: (``ledger_error``) the batch will never be committed (the log
                closed first).
        """
        if self._done.is_set() or self._delayed is not None:
            await trio.lowlevel.checkpoint()
        else:
            await self._signal.wait()
        self._raise_if_failed()
        delayed = self._delayed
        if delayed is not None and not self._done.is_set():
            raise LedgerUnavailable(delayed.message, **delayed.details)

    async def wait_committed(self) -> None:
        """Wait until the batch is committed, through any delay; always a checkpoint.

        Raises:
            LedgerError: (``ledger_error``) the batch will never be committed.
        """
        await self._done.wait()
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise LedgerError(f"ledger commit failed: {self._error}")

    def _settle(self, error: str | None = None) -> None:
        self._error = error
        self._done.set()
        self._signal.set()

    def _delay(self, error: LedgerUnavailable) -> None:
        if not self._done.is_set():
            self._delayed = error
            self._signal.set()

    def _undelay(self) -> None:
        if self._delayed is not None and not self._done.is_set():
            self._delayed = None
            self._signal = trio.Event()


async def wait_durable(ticket: Ticket | None) -> None:
    """Wait for ``ticket`` (None: nothing was staged, as in memory); always a checkpoint.

    Raises:
        LedgerUnavailable: (``ledger_unavailable``) see :meth:`Ticket.wait`.
        LedgerError: (``ledger_error``) the ticket's batch will never be committed.
    """
    if ticket is None:
        await trio.lowlevel.checkpoint()
    else:
        await ticket.wait()
