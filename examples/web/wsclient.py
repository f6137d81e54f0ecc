"""A client's websocket whose socket is closed however the connection ends (design §7.4).

trio-websocket 0.12 leaves a client's TCP stream open after a close the *server* began:
the client answers the close frame and waits for the server's TCP close, as RFC 6455
§7.1.1 asks, reads it, and never closes its own side; ``aclose()`` then returns at once,
the close being done. Every server close (a shutdown's 1001, a drop for falling behind,
4000) would leave one socket in ``CLOSE_WAIT`` for as long as the client runs, and a
client that reconnects after each drop would pile them up.
:func:`open_websocket_client` is :func:`trio_websocket.open_websocket_url` that closes
the stream as the block ends if the connection was closed by then; the example clients
open their websockets with it.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio
from trio_websocket import open_websocket_url

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from trio_websocket import WebSocketConnection

__all__ = ["open_websocket_client"]


@asynccontextmanager
async def open_websocket_client(url: str, **options: Any) -> AsyncIterator[WebSocketConnection]:
    """Connect to the websocket at ``url`` for the duration of the block.

    Entering is a checkpoint (the opening handshake, within ``connect_timeout``
    seconds); so is leaving: a connection still open is closed with code 1000, as
    :func:`~trio_websocket.open_websocket_url` does, and the socket of one the server
    closed is closed at once (no closing handshake is left to wait for).

    Args:
        url: ``ws://host:port/path``.
        options: Keyword options of :func:`~trio_websocket.open_websocket_url`
            (``extra_headers``, ``max_message_size`` in bytes, ``connect_timeout`` in
            seconds, ...).

    Raises:
        trio_websocket.HandshakeError: the connection could not be opened (refused,
            timed out, rejected by the server).
    """
    async with open_websocket_url(url, **options) as ws:
        try:
            yield ws
        finally:
            if ws.closed is not None:  # closed by the server (or already by us)
                await trio.aclose_forcefully(ws._stream)
