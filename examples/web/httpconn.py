"""One TCP connection's plain HTTP requests and answers, in h11's state machine (design §7.1).

:class:`HttpConnection` reads request heads (:class:`HttpRequest`) and writes answers
(:class:`HttpAnswer`) on one stream through one server-side ``h11.Connection``, so
HTTP/1.1 keep-alive follows h11's rules: after an answer,
:meth:`HttpConnection.next_cycle` starts the next request's cycle only if both sides are
done and neither asked to close (``Connection: close`` from the client, an HTTP/1.0
client, or an answer sent with ``close=True``). Requests are answered in order; bytes of
a pipelined request wait in h11's buffer. It decides nothing and has no timeout of its
own: the front door's policy (:mod:`examples.web.plainhttp`) puts every wait under a
deadline.

:class:`HttpRequest` and :class:`HttpAnswer` are the one request and the one answer type
of the HTTP layer: the front door's checks, its pages and the dynamic routes
(:mod:`examples.web.routes`) read the same request, and whatever answers (a route, a
page, a refusal) makes the same answer, which gets the headers every answer has when it
is written (:mod:`examples.web.http` lists them).
"""

from __future__ import annotations

import urllib.parse
from http import HTTPStatus
from typing import TYPE_CHECKING, Final

import attrs
import h11
import trio

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "Head",
    "HttpAnswer",
    "HttpConnection",
    "HttpRequest",
    "header_fields",
    "reason_phrase",
]

#: Bytes asked of the socket per read while reading a request head.
_CHUNK: Final = 4096


#: Reason phrases by status: looked up once per answer, without an enum call.
_PHRASES: Final = {status.value: status.phrase for status in HTTPStatus}


def reason_phrase(status: int, default: str) -> str:
    """The reason phrase of HTTP ``status`` (``403`` -> ``Forbidden``), or ``default``
    for a status HTTP does not name."""
    return _PHRASES.get(status, default)


def header_fields(request: h11.Request) -> dict[bytes, bytes]:
    """The request's headers by name (lowercased by h11), a repeated one joined with
    ``", "`` as RFC 9110 §5.3 combines them: every line counts (an ``Authorization``
    given twice is one wrong credential unless both are the same; an ``If-None-Match``
    list may span lines), never only the last."""
    fields: dict[bytes, bytes] = {}
    for name, value in request.headers:
        fields[name] = fields[name] + b", " + value if name in fields else value
    return fields


def _target_of(request: HttpRequest) -> str:
    query = urllib.parse.urlencode(dict(request.query))
    return urllib.parse.quote(request.path) + (f"?{query}" if query else "")


@attrs.frozen(kw_only=True)
class HttpRequest:
    """One plain HTTP request head, as every part of the front door sees it (design §7.1)."""

    method: str
    """The method as sent, e.g. ``GET`` or ``HEAD``."""
    path: str
    """The path, percent-decoded (e.g. ``/db/sample-1a2b/runs/3/preview.png``)."""
    query: Mapping[str, str]
    """The query's parameters (``token`` included); of a repeated one the last (a route
    never sees one: it is a 400 first)."""
    headers: Mapping[bytes, bytes]
    """The request headers, names lowercased, a repeated one joined (:func:`header_fields`)."""
    target: str = attrs.field(default=attrs.Factory(_target_of, takes_self=True))
    """The request target as sent (visible ASCII: h11 lets in nothing else); made of
    ``path`` and ``query`` when not given."""

    @property
    def websocket(self) -> bool:
        """True for a websocket upgrade request (``Upgrade: websocket``)."""
        return b"websocket" in self.headers.get(b"upgrade", b"").lower()


def _request_of(request: h11.Request) -> HttpRequest:
    target = request.target.decode("ascii", "replace")
    split = urllib.parse.urlsplit(target)
    return HttpRequest(
        method=request.method.decode("ascii", "replace"),
        path=urllib.parse.unquote(split.path),
        query=dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True)),
        headers=header_fields(request),
        target=target,
    )


@attrs.frozen(kw_only=True)
class HttpAnswer:
    """One answer to a plain HTTP request: a route's, a page's or a refusal.

    :meth:`HttpConnection.send` writes it through h11 with the headers every answer has
    (:meth:`wire_headers`); :meth:`encode` gives the bytes of a one-shot answer, written
    without h11.
    """

    status: int
    """The HTTP status, e.g. 200, 304, 404."""
    body: bytes = attrs.field(default=b"", repr=lambda body: f"<{len(body)} bytes>")
    """The content (bytes); for ``HEAD`` and 304 only its length is sent (a 304: none)."""
    content_type: str = "text/plain; charset=utf-8"
    """The ``Content-Type`` header (left out of a 304, whose headers a cache copies onto
    the answer it holds: RFC 9111 §3.2)."""
    cache_control: str = "no-store"
    """The ``Cache-Control`` header."""
    headers: tuple[tuple[str, str], ...] = ()
    """More headers, e.g. ``(("ETag", '"r3-ab12"'),)``."""

    @classmethod
    def text(cls, status: int, message: str) -> HttpAnswer:
        """A plain-text answer: ``404 Not Found: <message>`` and a newline."""
        return cls(status=status, body=f"{status} {cls.reason_of(status)}: {message}\n".encode())

    @staticmethod
    def reason_of(status: int) -> str:
        """The reason phrase of ``status`` (``Error`` for one HTTP does not name)."""
        return reason_phrase(status, "Error")

    @property
    def reason(self) -> str:
        """The status line's reason phrase."""
        return self.reason_of(self.status)

    def wire_headers(self) -> list[tuple[str, str]]:
        """Every header but ``Connection``, in order: ``Content-Type`` and
        ``Content-Length`` (not for a 304), ``Cache-Control``,
        ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer``, then
        :attr:`headers`."""
        headers = []
        if self.status != 304:
            headers += [("Content-Type", self.content_type),
                        ("Content-Length", str(len(self.body)))]  # fmt: skip
        return [
            *headers,
            ("Cache-Control", self.cache_control),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            *self.headers,
        ]

    def encode(self) -> bytes:
        """The answer's bytes with ``Connection: close``: the connection ends with it."""
        lines = [
            f"HTTP/1.1 {self.status} {self.reason}",
            *(f"{name}: {value}" for name, value in self.wire_headers()),
            "Connection: close",
        ]
        body = b"" if self.status == 304 else self.body
        return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body


@attrs.frozen(kw_only=True)
class Head:
    """A request head as the front door reads it (see :meth:`HttpConnection.receive_head`)."""

    request: HttpRequest | None
    """The request, or None (the client closed, or sent a bad head: see ``error``)."""
    raw: bytes = attrs.field(repr=lambda raw: f"<{len(raw)} bytes>")
    """Every byte read so far, for a connection's first request only (a websocket
    handshake replays them to trio-websocket); empty for later requests."""
    error: tuple[int, str] | None = None
    """For a bad head: the HTTP status to answer (400, 431, or 501 for a transfer
    coding h11 does not know) and why."""
    has_body: bool = False
    """True if the request announces a body (``Content-Length`` above 0, any
    ``Transfer-Encoding``, even with an empty body): the front door does not read
    bodies, so the connection closes after the answer."""

    @property
    def websocket(self) -> bool:
        """True for a websocket upgrade request (``Upgrade: websocket``)."""
        return self.request is not None and self.request.websocket


class HttpConnection:
    """The requests and answers of one connection, read and written with h11.

    Args:
        stream: The client's stream.
        max_head: Most bytes one request head may take (h11's
            ``max_incomplete_event_size``; a larger one is a 431).

    Attributes:
        stream: The client's stream.
        requests: Request heads read so far (bad ones included).
    """

    def __init__(self, stream: trio.abc.HalfCloseableStream, *, max_head: int) -> None:
        self.stream = stream
        self.max_head = max_head
        self.requests = 0
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=max_head)
        self._raw: bytearray | None = bytearray()  # the first request's bytes only
        self._head_only = False  # the current request is a HEAD: its answer has no body
        self._received = 0  # bytes received in this cycle (a head in one piece is counted)

    async def receive_head(self) -> Head:
        """Read the next request head (a checkpoint; no timeout of its own).

        Returns:
            The head; ``request`` is None if the client closed first or the head is bad
            (``error`` then says the status to answer and why).
        """
        conn = self._h11
        self._head_only = False
        if conn.trailing_data[0]:  # pipelined, or its first bytes came by wait_request()
            await trio.lowlevel.checkpoint()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                self.requests += 1
                # h11's words only: what follows its colon quotes the client's bytes.
                why = str(exc).partition(":")[0] or "a malformed request head"
                return self._head(None, error=(exc.error_status_hint, why))
            if isinstance(event, h11.Request):
                self.requests += 1
                self._head_only = event.method == b"HEAD"
                return self._checked(event)
            if event is not h11.NEED_DATA:  # ConnectionClosed: nothing to answer
                return self._head(None)
            await self._receive()

    def _checked(self, request: h11.Request) -> Head:
        conn = self._h11
        if self._received - len(conn.trailing_data[0]) > self.max_head:  # came in one piece
            return self._head(None, error=(431, "the head is too large"))
        if not request.target.startswith(b"/"):  # absolute-form: its authority is unchecked
            why = "the request target must be a path starting with '/'"
            return self._head(None, error=(400, why))
        # Any Transfer-Encoding counts as a body, even one that ends at once: with a
        # Content-Length beside it, RFC 9112 §6.3 wants the connection closed.
        if any(name == b"transfer-encoding" for name, _ in request.headers):
            return self._head(_request_of(request), has_body=True)
        try:  # without a body h11 ends the request at once, needing no more bytes
            has_body = not isinstance(conn.next_event(), h11.EndOfMessage)
        except h11.RemoteProtocolError:  # a broken body: never read, the connection closes
            has_body = True
        return self._head(_request_of(request), has_body=has_body)

    def _head(
        self, request: HttpRequest | None, *, error: tuple[int, str] | None = None,
        has_body: bool = False,
    ) -> Head:  # fmt: skip
        raw = b"" if self._raw is None else bytes(self._raw)
        return Head(request=request, raw=raw, error=error, has_body=has_body)

    async def _receive(self) -> bool:
        data = await self.stream.receive_some(_CHUNK)
        self._received += len(data)
        if self._raw is not None:
            self._raw += data
        self._h11.receive_data(bytes(data))  # b"" is the end of input; h11 is typed for bytes
        return bool(data)

    async def wait_request(self) -> bool:
        """Wait until the next request has begun (a checkpoint).

        Call after :meth:`next_cycle` said True.

        Returns:
            True once bytes of the next request are in, False if the client closed.
        """
        data, closed = self._h11.trailing_data
        if data or closed:  # pipelined after the previous request, or the end
            await trio.lowlevel.checkpoint()
            return bool(data)
        return await self._receive()

    async def send(self, answer: HttpAnswer, *, close: bool = False) -> None:
        """Write ``answer`` with the headers every answer has (a checkpoint; no timeout
        of its own).

        The answer to a ``HEAD`` goes without its body, whoever made it (a refusal
        carries one), and so does a 304: its ``Content-Length`` still says the length
        of the ``GET``'s.

        Args:
            answer: The answer to the current request (or to a bad head).
            close: True: the connection ends after this answer (``Connection: close``).
                h11 adds it as well when the client asked to close.

        Raises:
            h11.LocalProtocolError: the answer breaks HTTP (a bug of its maker).
        """
        conn = self._h11
        headers = answer.wire_headers()
        if close:
            headers.append(("Connection", "close"))
        # One write of head, body and end (one system call, one wake-up of the client),
        # the body copied once: h11 passes it through instead of joining it.
        parts = [conn.send(h11.Response(status_code=answer.status, reason=answer.reason,
                                        headers=headers))]  # fmt: skip
        if answer.body and not self._head_only and answer.status != 304:  # h11 refuses it
            parts += conn.send_with_data_passthrough(h11.Data(data=answer.body)) or []
        parts.append(conn.send(h11.EndOfMessage()))
        await self.stream.send_all(b"".join(parts))

    def next_cycle(self) -> bool:
        """Start the next request's cycle if the connection may be kept alive.

        Returns:
            True if it may (the last request was read to its end, the answer is sent,
            and nobody asked to close), else False: the connection must close.
        """
        conn = self._h11
        if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
            return False
        conn.start_next_cycle()
        self._raw = None  # a later request is never replayed to trio-websocket
        self._received = len(conn.trailing_data[0])  # the next request's bytes read already
        return True
