"""Plain HTTP on the websocket port: a page (the dashboard) beside the websocket (design §7).

The front door reads the head of each new connection's first request itself, with h11
(:func:`read_head`): at most ``max_head`` bytes, within the handshake timeout. A
websocket upgrade (``Upgrade: websocket``) then goes to trio-websocket with those bytes
replayed (:class:`ReplayStream`), so its handshake, token check and refusals are as
before. Any other request is answered here (:func:`answer`) and the connection closed:

========================================  ============================================
request                                   answer
========================================  ============================================
a ``Host`` that is not the server's       403 with the reason (the DNS-rebinding
(on a loopback bind, design §7.3)         defence, :mod:`examples.web.guard`)
``GET``/``HEAD`` of a page's path         200 with the page (the query is ignored:
(e.g. ``/``, ``/dashboard.html``)         the page reads it)
``GET``/``HEAD`` under a route's prefix    the route's answer (:mod:`examples.web.routes`;
                                          a protected route needs the token first)
``GET``/``HEAD`` of any other path        404
another method                            405 (``Allow: GET, HEAD``)
a malformed head, or a request target     400 with h11's words (never the client's
that is not a path (``http://host/...``,  bytes); over ``max_head`` bytes: 431
whose authority would escape the Host
check)
========================================  ============================================

Every answer has ``Content-Length`` (but a 304), ``Connection: close``,
``Cache-Control`` (``no-store``, or the page's or route's own: the server's scripts and
styles may be cached), ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy:
no-referrer`` (a token in the page's address never leaves it); pages get a
Content-Security-Policy that allows only their own inline script and style, scripts and
styles of the server itself, images from the server itself or ``data:``, and websocket
connections. After the answer the server half-closes and reads what the client still
sends (bounded) before closing, so the answer is not lost to a TCP reset. The pages are
public: the token, when one is set, guards the websocket (the page passes on the
``token`` of its own address) and the protected routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs
import h11
import trio

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "Head",
    "Page",
    "ReplayStream",
    "answer",
    "linger",
    "peer_name",
    "plain_response",
    "read_head",
    "response",
    "response_for",
]

#: Bytes asked of the socket per read while reading a request head.
_CHUNK: Final = 4096
#: Most bytes read (and dropped) after an answer, before the connection is closed.
_LINGER_BYTES: Final = 64 * 1024
_CSP: Final = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; "
    "style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src ws: wss:; base-uri 'none'; form-action 'none'"
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


@attrs.frozen(kw_only=True)
class Head:
    """The first request head of a connection (see :func:`read_head`)."""

    request: h11.Request | None
    """The request, or None (the client closed, or sent a bad head: see ``error``)."""
    raw: bytes = attrs.field(repr=lambda raw: f"<{len(raw)} bytes>")
    """Every byte read so far (the head and whatever followed it)."""
    error: tuple[int, str] | None = None
    """For a bad head: the HTTP status to answer (400, 431) and why."""

    @property
    def websocket(self) -> bool:
        """True for a websocket upgrade request (``Upgrade: websocket``)."""
        if self.request is None:
            return False
        return any(
            name == b"upgrade" and b"websocket" in value.lower()
            for name, value in self.request.headers
        )


async def read_head(stream: trio.abc.ReceiveStream, *, max_head: int) -> Head:
    """Read the first request head of ``stream`` (a checkpoint; no timeout of its own).

    Args:
        stream: A new connection.
        max_head: Most bytes the head may take (h11's ``max_incomplete_event_size``).

    Returns:
        The head; ``request`` is None if the client closed first or the head is bad.
    """
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=max_head)
    raw = bytearray()
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            # h11's words only: what follows its colon quotes the client's bytes.
            why = str(exc).partition(":")[0] or "a malformed request head"
            return Head(request=None, raw=bytes(raw), error=(exc.error_status_hint, why))
        if isinstance(event, h11.Request):
            if len(raw) - len(conn.trailing_data[0]) > max_head:  # it came in one piece
                return Head(request=None, raw=bytes(raw), error=(431, "the head is too large"))
            if not event.target.startswith(b"/"):  # absolute-form: its authority is unchecked
                why = "the request target must be a path starting with '/'"
                return Head(request=None, raw=bytes(raw), error=(400, why))
            return Head(request=event, raw=bytes(raw))
        if event is not h11.NEED_DATA:  # ConnectionClosed: nothing to answer
            return Head(request=None, raw=bytes(raw))
        data = await stream.receive_some(_CHUNK)
        raw += data
        conn.receive_data(bytes(data))  # b"" is the end of input; h11 is typed for bytes


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


def response(
    status: int,
    reason: str,
    body: bytes,
    *,
    content_type: str = "text/plain; charset=utf-8",
    head_only: bool = False,
    cache_control: str = "no-store",
    extra: tuple[str, ...] = (),
    length: bool = True,
) -> bytes:
    """The bytes of one answer with the headers every answer has (see the module doc).

    Args:
        status: The HTTP status.
        reason: Its reason phrase.
        body: The content, bytes; left out for ``head_only`` (``HEAD``, 304).
        content_type: The ``Content-Type`` header.
        head_only: True: the head only, ``Content-Length`` still that of ``body``.
        cache_control: The ``Cache-Control`` header.
        extra: More header lines, e.g. ``"ETag: \"r3\""``.
        length: False: no ``Content-Length`` (a 304).
    """
    lines = [
        f"HTTP/1.1 {status} {reason}",
        f"Content-Type: {content_type}",
        *([f"Content-Length: {len(body)}"] if length else []),
        "Connection: close",
        f"Cache-Control: {cache_control}",
        "X-Content-Type-Options: nosniff",
        "Referrer-Policy: no-referrer",
        *extra,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + (b"" if head_only else body)


def plain_response(status: int, text: str) -> bytes:
    """A plain-text answer with the headers of every answer, e.g. a refusal.

    ``text`` starts with the status line's status and reason: ``403 Forbidden: ...``.
    """
    reason = text.split(":", 1)[0].partition(" ")[2] or "Refused"
    return response(status, reason, text.encode())


def response_for(head: Head, pages: Mapping[str, Page]) -> bytes | None:
    """The answer to a plain HTTP ``head`` (see the module docstring), or None."""
    if head.request is None:
        if head.error is None:
            return None  # the client went away
        status, why = head.error
        reason = "Request Header Fields Too Large" if status == 431 else "Bad Request"
        return response(status, reason, f"{status} {reason}: {why[:200]}\n".encode())
    method = head.request.method
    if method not in (b"GET", b"HEAD"):
        return response(
            405, "Method Not Allowed", b"405 Method Not Allowed\n", extra=("Allow: GET, HEAD",)
        )
    path = head.request.target.split(b"?", 1)[0].decode("ascii", "replace")
    page = pages.get(path)
    if page is None:
        return response(404, "Not Found", b"404 Not Found\n", head_only=method == b"HEAD")
    return response(
        200, "OK", page.body, content_type=page.content_type, head_only=method == b"HEAD",
        cache_control=page.cache_control, extra=(f"Content-Security-Policy: {_CSP}",),
    )  # fmt: skip


async def answer(stream: trio.abc.SendStream, head: Head, pages: Mapping[str, Page]) -> int:
    """Answer a plain HTTP request (no timeout of its own; then call :func:`linger`).

    Returns:
        The status sent, or 0 if nothing was sent (the client had gone).
    """
    response = response_for(head, pages)
    if response is None:
        await trio.lowlevel.checkpoint()
        return 0
    await stream.send_all(response)
    return int(response[9:12])


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
