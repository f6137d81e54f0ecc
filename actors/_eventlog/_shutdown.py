"""Closing the ledger when the event log stops, within ``close_timeout`` (§6.13, §6.19)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from ..errors import LedgerError

if TYPE_CHECKING:
    from ._ledger import Ledger

__all__ = ["close_ledger"]

_log = logging.getLogger("actors.eventlog")


async def close_ledger(ledger: Ledger, close_timeout: float) -> None:
    """Commit what is staged and close ``ledger``, shielded, for ``close_timeout`` seconds.

    Never raises for the ledger: a final commit that fails, or that does not end within
    ``close_timeout`` (trio clock; a stalled disk), is logged and abandoned, and every
    ticket not committed is failed. The write-ahead log is left as it is then, so the next
    start finds the session unfinished and holds the runs it decided (design §6.12).
    """
    try:
        with trio.move_on_after(close_timeout, shield=True) as scope:
            await ledger.close()
        if scope.cancelled_caught:
            _log.error(
                "the ledger did not close within %g s: its final commit is abandoned;"
                " the next start finds the session unfinished",
                close_timeout,
                extra={"ledger": ledger.path, "close_timeout": close_timeout},
            )
    except LedgerError as exc:
        _log.error(
            "the ledger's final commit failed: %s",
            exc.message,
            extra={"ledger": ledger.path, "cause": exc.details.get("cause")},
        )
    finally:
        ledger.abandon()
