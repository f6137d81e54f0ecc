"""Plain HTTP on the websocket port: a page (the dashboard) beside the websocket (design §7).

The front door reads each request head itself, with h11 (:class:`~examples.web.httpconn.
HttpConnection`): at most ``max_request_head`` bytes. A websocket upgrade
(``Upgrade: websocket``) as a connection's first request goes to trio-websocket with the
bytes read replayed (:class:`ReplayStream`), so its handshake, token check and refusals
are as before. Any other request is answered here, and the connection is kept alive for
the next request of the same client (HTTP/1.1; :mod:`examples.web.plainhttp` says for
how long and how many):

========================================  ============================================
request                                   answer
========================================  ============================================
a ``Host`` that is not the server's       403 with the reason (the DNS-rebinding
(on a loopback bind, design §7.3)         defence, :mod:`examples.web.guard`); closes
``GET``/``HEAD`` of a page's path         200 with the page (the query is ignored:
(e.g. ``/``, ``/dashboard.html``)         the page reads it)
``GET``/``HEAD`` under a route's prefix    the route's answer (:mod:`examples.web.routes`;
                                          a protected route needs the token first,
                                          else 403 and close)
``GET``/``HEAD`` of any other path        404
another method                            405 (``Allow: GET, HEAD``); closes
a malformed head, or a request target     400 with h11's words (never the client's
that is not a path (``http://host/...``,  bytes); over ``max_head`` bytes: 431;
whose authority would escape the Host     an unknown transfer coding: 501; closes
check)
a websocket upgrade after a plain         400 (a websocket opens its own connection,
request on the same connection            as browsers do); closes
========================================  ============================================

Every answer has ``Content-Type`` and ``Content-Length`` (but a 304: a cache would copy
its ``Content-Type`` onto the image it holds), ``Cache-Control`` (``no-store``, or the
page's or route's own: the server's scripts and styles may be cached),
``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: no-referrer`` (a token in the
page's address never leaves it); pages get a Content-Security-Policy that allows only
their own inline script and style, scripts and styles of the server itself, images from
the server itself or ``data:``, and websocket connections. An answer that ends its
connection says ``Connection: close``: those marked "closes" above, the answer to a
request with a body (never read), to a client that asked to close (``Connection:
close``, or HTTP/1.0), the last one a connection may carry, and those sent while the
server shuts down. After such an answer the server half-closes and reads what the client
still sends (bounded, :func:`linger`) before closing, so the answer is not lost to a TCP
reset. The pages are public: the token, when one is set, guards the websocket (the page
passes on the ``token`` of its own address) and the protected routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs
import trio

from .httpconn import Head, HttpAnswer, HttpConnection, HttpRequest

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "Head",
    "HttpAnswer",
    "HttpRequest",
    "Page",
    "ReplayStream",
    "error_answer",
    "linger",
    "page_answer",
    "peer_address",
    "peer_name",
    "plain_answer",
    "read_head",
]

#: Bytes asked of the socket per read while lingering.
_CHUNK: Final = 4096
#: Most bytes read (and dropped) after an answer, before the connection is closed.
_LINGER_BYTES: Final = 64 * 1024
_CSP: Final = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; "
    "style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self' ws: wss:; base-uri 'none'; form-action 'none'"
)


@attrs.frozen(kw_only=True)
class Page:
    """A page served over plain HTTP by the front door."""

    body: bytes = attrs.field(repr=lambda body: f"<{len(body)} bytes>")
    """The content, bytes."""
    content_type: str = "text/html; charset=utf-8"
    """The ``Content-Type`` header."""
    cache_control: str = "no-store"
    """The ``Cache-Control`` header: a page's own files (scripts, styles) may be cached."""


async def read_head(stream: trio.abc.HalfCloseableStream, *, max_head: int) -> Head:
    """Read the first request head of ``stream`` (a checkpoint; no timeout of its own).

    Args:
        stream: A new connection.
        max_head: Most bytes the head may take (h11's ``max_incomplete_event_size``).

    Returns:
        The head (:meth:`HttpConnection.receive_head
        <examples.web.httpconn.HttpConnection.receive_head>`); ``request`` is None if the
        client closed first or the head is bad.
    """
    return await HttpConnection(stream, max_head=max_head).receive_head()


class ReplayStream(trio.abc.Stream):
    """``stream`` with ``prefix`` (bytes already read from it) put back in front.

    Lets trio-websocket read a handshake whose head :func:`read_head` already read.
    """

    def __init__(self, stream: trio.abc.Stream, prefix: bytes) -> None:
        self.stream = stream
        self._prefix = prefix

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        """The replayed bytes first, then the stream's (a checkpoint)."""
        if not self._prefix:
            return await self.stream.receive_some(max_bytes)
        await trio.lowlevel.checkpoint()
        size = len(self._prefix) if max_bytes is None else max_bytes
        data, self._prefix = self._prefix[:size], self._prefix[size:]
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """As the stream's."""
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        """As the stream's."""
        await self.stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        """Close the stream."""
        await self.stream.aclose()


def plain_answer(status: int, text: str) -> HttpAnswer:
    """A plain-text answer, e.g. a refusal.

    ``text`` starts with the status and its reason phrase, as the status line does:
    ``403 Forbidden: ...``.
    """
    return HttpAnswer(status=status, body=text.encode())


def error_answer(status: int, why: str) -> HttpAnswer:
    """The answer to a request that could not be read: 400, 431 for a head too large,
    501 for a transfer coding h11 does not know.

    ``why`` is in the server's words (at most 200 characters are sent), never the
    client's bytes.
    """
    return HttpAnswer.text(status, why[:200])


def page_answer(request: HttpRequest, pages: Mapping[str, Page]) -> HttpAnswer:
    """The answer to a plain HTTP request that no route takes (see the module doc):
    a page, 404 or 405."""
    if request.method not in ("GET", "HEAD"):
        return HttpAnswer(
            status=405, body=b"405 Method Not Allowed\n", headers=(("Allow", "GET, HEAD"),)
        )
    page = pages.get(request.target.split("?", 1)[0])
    if page is None:
        return HttpAnswer(status=404, body=b"404 Not Found\n")
    return HttpAnswer(
        status=200, body=page.body, content_type=page.content_type,
        cache_control=page.cache_control, headers=(("Content-Security-Policy", _CSP),),
    )  # fmt: skip


async def linger(stream: trio.abc.HalfCloseableStream) -> None:
    """Half-close, then read (and drop) what the client still sends until it closes.

    At most ``_LINGER_BYTES`` bytes; no timeout of its own. Closing with unread input
    would make the kernel reset the connection, and the client could lose the answer.
    """
    await stream.send_eof()
    drained = 0
    while drained < _LINGER_BYTES:
        data = await stream.receive_some(_CHUNK)
        if not data:
            return
        drained += len(data)


def peer_name(stream: trio.SocketStream) -> str:
    """``address:port`` of the client, for logs (``gone`` once it disconnected)."""
    try:
        address = stream.socket.getpeername()
    except OSError:
        return "gone"
    return f"{address[0]}:{address[1]}" if isinstance(address, tuple) else "local"


def peer_address(peer: str) -> str:
    """The IP address of ``peer`` (``address:port``, :func:`peer_name`): what the
    admission slots count per address."""
    return peer.rpartition(":")[0] or peer
