"""Who gets one of the front door's connection slots, and the refusals (design §7.3).

:class:`Admission` holds the slot counts of a front door: ``max_connections`` slots in
all, ``max_per_address`` for one IP address. A handshake takes its slot the moment it
passes the checks (the Host, Origin and token checks of :mod:`examples.web.guard`, then
the limits), before the front door waits for anything, so concurrent handshakes each
see the ones ahead of them; the slot is given back when the handshake fails or times
out, or when the connection it opened ends. A plain HTTP connection takes a slot for as
long as it is kept alive, if one is free (:meth:`Admission.has_room`); without one it is
answered once and closed, never refused (:mod:`examples.web.plainhttp`).

A plain HTTP connection lends its slot whenever it waits for its client (idle between
requests, reading a request head, writing an answer or lingering after the last one;
:meth:`Admission.lend`): a websocket handshake that finds no slot free takes the slot
of the one that has waited longest (of its own address, when the address's limit is
the one reached), and that connection is closed without a word, as an idle one is at
its ``keepalive_timeout``. So a client without the token, which may fetch the public
pages, never keeps a client with the token out, however it reads or writes; only a
route at work keeps its slot (for ``handshake_timeout`` seconds at most). Each such
decision is one ``INFO`` record (``event=http_slot_reclaimed``, with the ``peer`` and
``address`` of the connection closed). A refused request is counted by reason and
logged once (``event=request_refused``).
"""

from __future__ import annotations

import collections
import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING

import attrs

from .guard import Guard, Refusal

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    import trio

    from .config import FrontDoorConfig

__all__ = ["Admission", "Slot"]

LOGGER = logging.getLogger("examples.frontdoor")


@attrs.define(kw_only=True, eq=False)
class Slot:
    """One slot held (:meth:`Admission.slot`); mutable: it is given back once."""

    address: str
    """The IP address it counts for."""
    held: bool = True
    """False once given back: its holder's block ended, or it was reclaimed."""
    reclaimed: bool = False
    """True if a websocket handshake took it while it was lent (:meth:`Admission.lend`)."""


class Admission:
    """The slots and refusals of one front door (design §7.3); see the module doc.

    Args:
        config: The front door's settings (``max_connections``, ``max_per_address``).
        guard: The Host, Origin and token checks; replaced by :attr:`guard` once the
            front door knows its ports.

    Attributes:
        guard: The checks applied first.
        held: Slots taken now: handshakes in progress, open websocket connections and
            kept-alive plain HTTP connections.
        refusals: Refused requests (websocket and plain HTTP) by reason.
        reclaimed: Slots taken from waiting kept plain HTTP connections so far.
    """

    def __init__(self, config: FrontDoorConfig, guard: Guard) -> None:
        self.config = config
        self.guard = guard
        self.held = 0
        self.reclaimed = 0
        self.refusals: collections.Counter[str] = collections.Counter()
        self._per_address: collections.Counter[str] = collections.Counter()
        # Lent slots, the longest lent first (dicts keep their insertion order).
        self._lent: dict[Slot, tuple[trio.CancelScope, str]] = {}

    def refusal(
        self, target: str, headers: Mapping[bytes, bytes], address: str, *, admitting: bool
    ) -> Refusal | None:
        """Why a websocket handshake from ``address`` is refused now, or None.

        Args:
            target: The request target (path and query).
            headers: The request's headers, names lowercased.
            address: The client's IP address.
            admitting: False once the front door is shutting down (then 503).
        """
        if not admitting:
            return Refusal(
                status=503, reason="shutting_down", message="the server is shutting down"
            )
        refusal = self.guard.check(target, headers, websocket=True)
        if refusal is not None:
            return refusal
        while (refusal := self._limit(address)) is not None:
            # An address at its limit frees one of its own lent slots, which also makes
            # room on a full server; a full server alone frees any. Never one that
            # would not let this handshake in.
            own = self._at_address_limit(address)  # always so for an address_limit
            if not self._reclaim(address if own else None):
                return refusal
        return None

    def has_room(self, address: str) -> bool:
        """True if a slot for ``address`` is free now (neither limit is reached)."""
        return self._limit(address) is None

    def _address_limit(self) -> int:
        return min(self.config.max_per_address, self.config.max_connections)

    def _at_address_limit(self, address: str) -> bool:
        return self._per_address[address] >= self._address_limit()

    def _limit(self, address: str) -> Refusal | None:
        if self.held >= self.config.max_connections:
            return Refusal(status=503, reason="full", message="too many connections")
        if self._at_address_limit(address):
            return Refusal(
                status=429, reason="address_limit",
                message=f"too many connections from {address} (at most {self._address_limit()})",
            )  # fmt: skip
        return None

    @contextmanager
    def slot(self, address: str) -> Iterator[Slot]:
        """Hold one slot for ``address`` for the duration of the block.

        Take it right after :meth:`refusal` said None (or :meth:`has_room` True), with
        no checkpoint between, so that at most ``max_connections`` slots are ever held.
        It is given back when the block ends, or earlier if it is reclaimed while lent.
        """
        self.held += 1
        self._per_address[address] += 1
        slot = Slot(address=address)
        try:
            yield slot
        finally:
            self._give_back(slot)

    @contextmanager
    def lend(self, slot: Slot, scope: trio.CancelScope, peer: str) -> Iterator[None]:
        """Lend ``slot`` for the duration of the block: a handshake may take it.

        For a kept plain HTTP connection waiting for its client. Taking it gives the
        slot back at once and cancels ``scope`` (its holder then sees
        :attr:`Slot.reclaimed`).

        Args:
            slot: A slot held (:meth:`slot`).
            scope: The scope of the wait, cancelled if the slot is taken.
            peer: ``address:port`` of the connection, for the log.
        """
        if slot.held:
            self._lent[slot] = (scope, peer)
        try:
            yield
        finally:
            self._lent.pop(slot, None)

    def _reclaim(self, address: str | None) -> bool:
        # Take the longest lent slot (of ``address`` if given); False if none is lent.
        slot = next(
            (lent for lent in self._lent if address is None or lent.address == address), None
        )
        if slot is None:
            return False
        scope, peer = self._lent.pop(slot)
        slot.reclaimed = True
        self._give_back(slot)
        scope.cancel()
        self.reclaimed += 1
        LOGGER.info(
            "closing the kept HTTP connection from %s: its slot is needed", peer,
            extra={"event": "http_slot_reclaimed", "peer": peer, "address": slot.address},
        )  # fmt: skip
        return True

    def _give_back(self, slot: Slot) -> None:
        if not slot.held:
            return
        slot.held = False
        address = slot.address
        self.held -= 1
        self._per_address[address] -= 1
        if not self._per_address[address]:
            del self._per_address[address]

    def refused(
        self, refusal: Refusal, peer: str, kind: str, headers: Mapping[bytes, bytes]
    ) -> None:
        """Count ``refusal`` and log it (a warning, ``event=request_refused``).

        Args:
            refusal: What the client is told.
            peer: ``address:port`` of the client.
            kind: ``websocket`` or ``http``.
            headers: The request's headers (``Origin`` and ``Host`` are logged, cut to
                200 characters).
        """
        self.refusals[refusal.reason] += 1
        if not LOGGER.isEnabledFor(logging.WARNING):
            return  # refusals are the attack path: build nothing nobody reads
        origin = headers.get(b"origin", b"").decode("latin-1")[:200] or None
        host = headers.get(b"host", b"").decode("latin-1")[:200] or None
        LOGGER.warning(
            "refused %s from %s: %s (%s)",
            "a websocket handshake" if kind == "websocket" else "an HTTP request",
            peer, refusal.message, refusal.reason,
            extra={"event": "request_refused", "peer": peer, "request": kind,
                   "reason": refusal.reason, "status": refusal.status,
                   "origin": origin, "host": host},
        )  # fmt: skip
