"""Durability tickets of the ledger's batches (design §6.10)."""

from __future__ import annotations

import trio

from ..errors import LedgerError

__all__ = ["Ticket", "wait_durable"]


class Ticket:
    """Durability of one batch: :meth:`wait` returns once it is committed (design §6.10)."""

    __slots__ = ("_done", "_error")

    def __init__(self) -> None:
        self._done = trio.Event()
        self._error: str | None = None

    @property
    def done(self) -> bool:
        """True once the batch committed or failed."""
        return self._done.is_set()

    async def wait(self) -> None:
        """Wait until the batch is committed; always a checkpoint.

        Raises:
            LedgerError: (``ledger_error``) the batch's transaction failed.
        """
        if self._done.is_set():
            await trio.lowlevel.checkpoint()
        else:
            await self._done.wait()
        if self._error is not None:
            raise LedgerError(f"ledger commit failed: {self._error}")

    def _settle(self, error: str | None = None) -> None:
        self._error = error
        self._done.set()


async def wait_durable(ticket: Ticket | None) -> None:
    """Wait for ``ticket`` (None: nothing was staged, as in memory); always a checkpoint.

    Raises:
        LedgerError: (``ledger_error``) the ticket's batch failed to commit.
    """
    if ticket is None:
        await trio.lowlevel.checkpoint()
    else:
        await ticket.wait()
