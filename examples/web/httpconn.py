"""One TCP connection's plain HTTP requests and answers, in h11's state machine (design §7.1).

:class:`HttpConnection` reads request heads and writes answers (:class:`Answer`) on one
stream through one server-side ``h11.Connection``, so HTTP/1.1 keep-alive follows h11's
rules: after an answer, :meth:`HttpConnection.next_cycle` starts the next request's
cycle only if both sides are done and neither asked to close (``Connection: close``
from the client, an HTTP/1.0 client, or an answer sent with ``close=True``). Requests
are answered in order; bytes of a pipelined request wait in h11's buffer. It decides
nothing and has no timeout of its own: the front door's policy
(:mod:`examples.web.plainhttp`) puts every wait under a deadline.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Final

import attrs
import h11
import trio

__all__ = ["Answer", "Head", "HttpConnection", "header_fields", "reason_phrase"]

#: Bytes asked of the socket per read while reading a request head.
_CHUNK: Final = 4096


def reason_phrase(status: int, default: str) -> str:
    """The reason phrase of HTTP ``status`` (``403`` -> ``Forbidden``), or ``default``
    for a status HTTP does not name."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return default


def header_fields(request: h11.Request) -> dict[bytes, bytes]:
    """The request's headers by name (lowercased by h11), a repeated one joined with
    ``", "`` as RFC 9110 §5.3 combines them: every line counts (an ``Authorization``
    given twice is one wrong credential unless both are the same; an ``If-None-Match``
    list may span lines), never only the last."""
    fields: dict[bytes, bytes] = {}
    for name, value in request.headers:
        fields[name] = fields[name] + b", " + value if name in fields else value
    return fields


@attrs.frozen(kw_only=True)
class Head:
    """A request head as the front door reads it (see :meth:`HttpConnection.receive_head`)."""

    request: h11.Request | None
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
        if self.request is None:
            return False
        return any(
            name == b"upgrade" and b"websocket" in value.lower()
            for name, value in self.request.headers
        )


@attrs.frozen(kw_only=True)
class Answer:
    """One answer to a plain HTTP request, ready to be written (:mod:`examples.web.http`).

    :meth:`HttpConnection.send` writes it through h11; :meth:`encode` gives the bytes of
    a one-shot answer, written without h11.
    """

    status: int
    """The HTTP status."""
    reason: str
    """Its reason phrase."""
    headers: tuple[tuple[str, str], ...]
    """Every header but ``Connection``, in order."""
    body: bytes = attrs.field(repr=lambda body: f"<{len(body)} bytes>")
    """The bytes sent after the head: empty for ``HEAD`` and 304 (``Content-Length``
    still says the length of the ``GET``'s body)."""

    def encode(self) -> bytes:
        """The answer's bytes with ``Connection: close``: the connection ends with it."""
        lines = [
            f"HTTP/1.1 {self.status} {self.reason}",
            *(f"{name}: {value}" for name, value in self.headers),
            "Connection: close",
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + self.body


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
            return self._head(request, has_body=True)
        try:  # without a body h11 ends the request at once, needing no more bytes
            has_body = not isinstance(conn.next_event(), h11.EndOfMessage)
        except h11.RemoteProtocolError:  # a broken body: never read, the connection closes
            has_body = True
        return self._head(request, has_body=has_body)

    def _head(
        self, request: h11.Request | None, *, error: tuple[int, str] | None = None,
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

    async def send(self, answer: Answer, *, close: bool = False) -> None:
        """Write ``answer`` (a checkpoint; no timeout of its own).

        The answer to a ``HEAD`` goes without its body, whoever made it (a refusal
        carries one): its ``Content-Length`` still says the length of the ``GET``'s.

        Args:
            answer: The answer to the current request (or to a bad head).
            close: True: the connection ends after this answer (``Connection: close``).
                h11 adds it as well when the client asked to close.

        Raises:
            h11.LocalProtocolError: the answer breaks HTTP (a bug of its maker).
        """
        conn = self._h11
        headers = [*answer.headers, ("Connection", "close")] if close else list(answer.headers)
        data = conn.send(h11.Response(status_code=answer.status, reason=answer.reason,
                                      headers=headers))  # fmt: skip
        if answer.body and not self._head_only:  # h11 refuses a body after a HEAD
            data += conn.send(h11.Data(data=answer.body))
        data += conn.send(h11.EndOfMessage())
        await self.stream.send_all(data)

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
