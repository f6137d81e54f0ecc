"""Who gets one of the front door's connection slots, and the refusals (design §7.3).

:class:`Admission` holds the slot counts of a front door: ``max_connections`` slots in
all, ``max_per_address`` for one IP address. A handshake takes its slot the moment it
passes the checks (the Host, Origin and token checks of :mod:`examples.web.guard`, then
the limits), before the front door waits for anything, so concurrent handshakes each
see the ones ahead of them; the slot is given back when the handshake fails or times
out, or when the connection it opened ends. A plain HTTP connection takes a slot for as
long as it is kept alive, if one is free (:meth:`Admission.has_room`); without one it is
answered once and closed, never refused (:mod:`examples.web.plainhttp`). A refused
request is counted by reason and logged once (``event=request_refused``).
"""

from __future__ import annotations

import collections
import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .guard import Guard, Refusal

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from .config import FrontDoorConfig

__all__ = ["Admission"]

LOGGER = logging.getLogger("examples.frontdoor")


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
    """

    def __init__(self, config: FrontDoorConfig, guard: Guard) -> None:
        self.config = config
        self.guard = guard
        self.held = 0
        self.refusals: collections.Counter[str] = collections.Counter()
        self._per_address: collections.Counter[str] = collections.Counter()

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
        return self._limit(address)

    def has_room(self, address: str) -> bool:
        """True if a slot for ``address`` is free now (neither limit is reached)."""
        return self._limit(address) is None

    def _limit(self, address: str) -> Refusal | None:
        config = self.config
        if self.held >= config.max_connections:
            return Refusal(status=503, reason="full", message="too many connections")
        limit = min(config.max_per_address, config.max_connections)
        if self._per_address[address] >= limit:
            return Refusal(
                status=429, reason="address_limit",
                message=f"too many connections from {address} (at most {limit})",
            )  # fmt: skip
        return None

    @contextmanager
    def slot(self, address: str) -> Iterator[None]:
        """Hold one slot for ``address`` for the duration of the block.

        Take it right after :meth:`refusal` said None (or :meth:`has_room` True), with
        no checkpoint between, so that at most ``max_connections`` slots are ever held.
        """
        self.held += 1
        self._per_address[address] += 1
        try:
            yield
        finally:
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
