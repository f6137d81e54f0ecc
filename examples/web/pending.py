"""The connections that have not sent their first request head yet (design §7.3).

A connection is *pending* from the moment the front door accepts it until its first
request head (a plain HTTP request or a websocket upgrade) is complete; then the
admission slots judge it (:mod:`examples.web.admission`). A pending connection holds no
slot, only a task and a file descriptor, for ``handshake_timeout`` seconds at most. On
a shared machine every local user is 127.0.0.1, so a per-address limit cannot tell
them apart: without a bound, one local process could open idle connections faster than
they time out and take every descriptor the server has (then ``accept()`` fails with
EMFILE, and the user's own browser cannot connect).

:class:`PendingConnections` bounds them at ``max_pending``: when one more connection is
accepted while that many are pending, the one pending longest is closed. A real client
sends its head within milliseconds of connecting, so the oldest pending connection is a
stalled one, and a flood of idle connections closes its own members, never keeps a new
client out. Each such decision is one ``INFO`` record of ``examples.frontdoor``
(``event=pending_evicted``, with the ``peer`` and the ``age`` in seconds of the
connection closed) and is counted (:attr:`PendingConnections.evicted`).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["PendingConnections"]

LOGGER = logging.getLogger("examples.frontdoor")


class PendingConnections:
    """The pending connections of one front door, at most ``limit``; see the module doc.

    Args:
        limit: Most connections pending at once (``max_pending``, at least 1).

    Attributes:
        limit: Most connections pending at once.
        evicted: Pending connections closed so far to make room for a newer one.

    Raises:
        ValueError: ``limit`` is below 1.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit!r}")
        self.limit = limit
        self.evicted = 0
        # The scope of each pending connection's wait, with its peer and when it began
        # (trio clock); the oldest first (dicts keep their insertion order).
        self._waiting: dict[trio.CancelScope, tuple[str, float]] = {}

    def __len__(self) -> int:
        """Connections pending now."""
        return len(self._waiting)

    @contextmanager
    def waiting(self, scope: trio.CancelScope, peer: str) -> Iterator[None]:
        """Count one connection as pending for the duration of the block.

        Enter it as the connection is accepted, with no checkpoint between, and leave it
        once its first request head is complete (or it ended). Entering it while
        ``limit`` connections are pending closes the oldest of them first: its
        ``scope`` is cancelled, and it is no longer counted.

        Args:
            scope: The scope of the connection's wait for its head; cancelled if it is
                evicted.
            peer: ``address:port`` of the connection, for the log.
        """
        now = trio.current_time()
        while len(self._waiting) >= self.limit:
            self._evict_oldest(now)
        self._waiting[scope] = (peer, now)
        try:
            yield
        finally:
            self._waiting.pop(scope, None)

    def _evict_oldest(self, now: float) -> None:
        scope = next(iter(self._waiting))
        peer, since = self._waiting.pop(scope)
        scope.cancel()
        self.evicted += 1
        age = now - since
        LOGGER.info(
            "closing the connection from %s: no request head after %.3f s, %d newer ones wait",
            peer, age, self.limit,
            extra={"event": "pending_evicted", "peer": peer, "age": age},
        )  # fmt: skip
