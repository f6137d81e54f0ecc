"""Request ids and their receipts, for idempotent submits (design §6.3).

With a ledger every admitted request is stored there, and the ledger is what decides:
an id memory does not hold is looked up in the ledger before the request is decided, so
idempotency does not depend on ``retain_requests``. Memory is a cache in front of it,
with two rules that make "look up, then decide" atomic whatever its size:

* a request stays in memory until its row is committed (a duplicate decided meanwhile
  finds it there, and gets its receipt and ticket, never a second run);
* nothing leaves memory while a look-up is in flight (a look-up that missed a row
  committed during it finds the request in memory when it decides), and the id just
  looked up stays while its request is decided.

Beyond these, memory keeps the newest ``retain_requests``: what the rules kept is
trimmed when the last look-up in flight ends. Without a ledger, memory is
all there is: idempotency covers the newest ``retain_requests`` ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from .._types import Receipt, encode_json

if TYPE_CHECKING:
    from .._ledger import Ledger, LedgerSnapshot, Ticket

__all__ = ["RequestStore", "StoredRequest"]

#: The receipt's fields, stored as JSON with its request (read back by ``Receipt(**)``).
_RECEIPT_FIELDS = tuple(field.name for field in attrs.fields(Receipt))


class StoredRequest:
    """An admitted request: its canonical content, receipt and durability ticket."""

    __slots__ = ("content", "receipt", "ticket")

    def __init__(self, content: str, receipt: Receipt, ticket: Ticket | None) -> None:
        self.content = content
        self.receipt = receipt
        self.ticket = ticket


class RequestStore:
    """The admitted requests by id: the newest in memory, all of them in the ledger.

    Args:
        retain: How many requests memory keeps (``retain_requests``).
        ledger: Where each request is stored, or None in memory.
    """

    def __init__(self, retain: int, ledger: Ledger | None) -> None:
        self._retain = retain
        self._ledger = ledger
        self._requests: dict[str, StoredRequest] = {}
        self._ledger_has_more = False
        self._next_position = 1
        self._lookups = 0

    def boot(self, snapshot: LedgerSnapshot) -> None:
        """Load the newest requests the ledger holds."""
        for request_id, content, receipt in snapshot.requests:
            self._requests[request_id] = StoredRequest(content, receipt, None)
        self._ledger_has_more = snapshot.request_total > len(self._requests)
        self._next_position = snapshot.next_request_position

    def get(self, request_id: str) -> StoredRequest | None:
        """The request if memory holds it."""
        return self._requests.get(request_id)

    def must_load(self, request_id: str) -> bool:
        """True when only the ledger could know ``request_id`` (see :meth:`load`)."""
        return self._ledger_has_more and request_id not in self._requests

    async def load(self, request_id: str) -> None:
        """Bring ``request_id`` from the ledger into memory, if the ledger has it.

        Raises:
            LedgerError: (``ledger_error``) the ledger could not be read.
        """
        assert self._ledger is not None
        self._lookups += 1
        try:
            await self._ledger.settle_for_read()
            row = await self._ledger.fetch_request(request_id)
            if row is not None and request_id not in self._requests:
                content, receipt, _ = row
                self._requests[request_id] = StoredRequest(content, receipt, None)
        finally:
            self._lookups -= 1
            # The last look-up ended: trim what they kept (steady traffic never lets the
            # stores do it), all but the id its caller decides on right now.
            self._evict(keep=request_id)

    def store(
        self, request_id: str, content: str, receipt: Receipt, actor: str | None
    ) -> Ticket | None:
        """Keep an admitted request (and stage its row); the ticket of its row."""
        ticket = None
        if self._ledger is not None:
            ticket = self._ledger.stage_request(
                request_id,
                content,
                receipt.run_id or 0,
                encode_json({name: getattr(receipt, name) for name in _RECEIPT_FIELDS}),
                self._next_position,
                actor,
            )
            self._next_position += 1
        self._requests[request_id] = StoredRequest(content, receipt, ticket)
        self._evict()
        return ticket

    def _evict(self, keep: str | None = None) -> None:
        requests = self._requests
        if self._lookups:
            return
        kept = None if keep is None else requests.pop(keep, None)
        while len(requests) > self._retain:
            oldest = next(iter(requests))
            ticket = requests[oldest].ticket
            if ticket is not None and not ticket.done:
                break  # not committed yet, nor anything newer
            del requests[oldest]
            self._ledger_has_more = self._ledger is not None
        if kept is not None and keep is not None:
            requests[keep] = kept  # the newest now: the next store trims it

    def __len__(self) -> int:
        """How many requests memory holds now."""
        return len(self._requests)
