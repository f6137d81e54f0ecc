"""A minimal HTTP/1.1 ``GET`` over trio and h11: the command-line clients' image fetch.

:func:`open_http_client` gives an :class:`HttpClient` that fetches many images over a
few kept-alive connections to one server, as a browser does (design §7.6): at most
``max_connections`` at once, each reused for the next ``GET`` while the server keeps it
alive (:mod:`examples.web.plainhttp`). A kept connection the server has closed in the
meantime (its idle timeout, its last request) is noticed when a ``GET`` on it gets no
byte of an answer: that ``GET`` is sent once more on a fresh connection (it changes
nothing on the server). :func:`http_get` is one ``GET`` on its own connection
(``Connection: close``).

The token is sent as an ``Authorization: Bearer`` header (so it never appears in a URL
the client prints or logs, design §7.3); an answer's body is read up to ``max_body``
bytes. No timeout of its own: callers put each ``GET`` under a cancel scope.
"""

from __future__ import annotations

import urllib.parse
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import h11
import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

__all__ = ["FetchError", "Fetched", "HttpClient", "http_get", "open_http_client"]

_CHUNK = 65536
#: What a connection the server closed while it was kept raises on the next ``GET``.
_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class FetchError(Exception):
    """The server's answer was not HTTP, was cut off, or its body was over ``max_body``.

    Raised by :meth:`HttpClient.get` and :func:`http_get`; an answer with an error
    status is not a ``FetchError`` (see :attr:`Fetched.status`).
    """


class _Unanswered(Exception):
    """A kept connection ended before any byte of the answer: try a fresh one."""


@attrs.frozen(kw_only=True)
class Fetched:
    """One HTTP answer."""

    status: int
    """The HTTP status."""
    headers: Mapping[str, str]
    """The headers, names lowercased (the last of a repeated one)."""
    body: bytes = attrs.field(repr=lambda body: f"<{len(body)} bytes>")
    """The body, bytes."""


class _Kept:
    """One client connection and its h11 state."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)
        self.used = False


class HttpClient:
    """``GET`` requests to one server over at most ``max_connections`` kept-alive
    connections; made by :func:`open_http_client`.

    Attributes:
        opened: Connections opened so far.
        requests: ``GET`` requests answered so far.
    """

    def __init__(self, base: str, *, token: str | None, max_connections: int) -> None:
        split = urllib.parse.urlsplit(base)
        if split.hostname is None:
            raise ValueError(f"not an address: {base!r}")
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections!r}")
        self._hostname = split.hostname
        self._port = split.port or (443 if split.scheme in ("https", "wss") else 80)
        host = f"[{split.hostname}]" if ":" in split.hostname else split.hostname
        self._headers = [("Host", f"{host}:{self._port}")]
        if token:
            self._headers.append(("Authorization", f"Bearer {token}"))
        self._slots = trio.Semaphore(max_connections)
        self._idle: list[_Kept] = []
        self._all: set[_Kept] = set()
        self.opened = self.requests = 0

    async def get(
        self,
        target: str,
        *,
        max_body: int,
        headers: Mapping[str, str] | None = None,
        close: bool = False,
    ) -> Fetched:
        """``GET`` ``target`` (a path and query) on a kept or a new connection.

        A checkpoint; waits for a connection while ``max_connections`` are busy.

        Args:
            target: The path and query, e.g. ``/db/x/runs/1/preview.png?rev=2``.
            max_body: Most bytes of body read.
            headers: More request headers (e.g. ``If-None-Match``).
            close: True: ask the server to close the connection after its answer.

        Raises:
            FetchError: a broken or oversized answer.
            OSError: the connection failed.
        """
        request_headers = [*self._headers, *(headers or {}).items()]
        if close:
            request_headers.append(("Connection", "close"))
        request = h11.Request(method="GET", target=target, headers=request_headers)
        async with self._slots:
            while self._idle:
                kept = self._idle.pop()
                try:
                    return await self._exchange(kept, request, max_body)
                except _Unanswered:
                    continue  # closed by the server while kept: the next one, or a new one
            kept = await self._connect()
            try:
                return await self._exchange(kept, request, max_body)
            except _Unanswered as exc:
                raise FetchError("the server closed the connection without an answer") from exc

    async def _connect(self) -> _Kept:
        stream = await trio.open_tcp_stream(self._hostname, self._port)
        kept = _Kept(stream)
        self._all.add(kept)
        self.opened += 1
        return kept

    async def _exchange(self, kept: _Kept, request: h11.Request, max_body: int) -> Fetched:
        # One request and its answer on ``kept``; puts it back in the pool if it may be
        # reused, else closes it (also when cancelled or failing halfway).
        done = answered = False
        conn = kept.h11
        try:
            try:
                await kept.stream.send_all(conn.send(request) + conn.send(h11.EndOfMessage()))
            except _GONE as exc:
                if kept.used:
                    raise _Unanswered from exc
                raise
            kept.used = True
            status = 0
            answer_headers: dict[str, str] = {}
            body = bytearray()
            while True:
                try:
                    event = conn.next_event()
                except h11.RemoteProtocolError as exc:
                    if not answered:
                        raise _Unanswered from exc  # closed while kept
                    raise FetchError(f"not an HTTP answer: {exc}") from exc
                if event is h11.NEED_DATA:
                    try:
                        data = await kept.stream.receive_some(_CHUNK)
                    except _GONE as exc:
                        if not answered:
                            raise _Unanswered from exc
                        raise
                    answered = answered or bool(data)
                    conn.receive_data(bytes(data))  # b"" is the end of input
                elif isinstance(event, h11.Response):
                    status = event.status_code
                    answer_headers = {
                        name.decode("latin-1"): value.decode("latin-1")
                        for name, value in event.headers
                    }
                elif isinstance(event, h11.Data):
                    body += event.data
                    if len(body) > max_body:
                        raise FetchError(f"the answer is over {max_body} bytes")
                elif isinstance(event, h11.EndOfMessage):
                    self.requests += 1
                    done = True
                    return Fetched(status=status, headers=answer_headers, body=bytes(body))
                else:  # ConnectionClosed before the answer ended
                    if not answered:
                        raise _Unanswered
                    raise FetchError("the server closed the connection before its answer ended")
        finally:
            if done and conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                conn.start_next_cycle()
                self._idle.append(kept)
            else:
                self._all.discard(kept)
                await trio.aclose_forcefully(kept.stream)

    async def aclose(self) -> None:
        """Close every connection (a checkpoint)."""
        kept_all, self._all, self._idle = self._all, set(), []
        for kept in kept_all:
            await trio.aclose_forcefully(kept.stream)
        await trio.lowlevel.checkpoint()


@asynccontextmanager
async def open_http_client(
    base: str, *, token: str | None = None, max_connections: int = 1
) -> AsyncIterator[HttpClient]:
    """An :class:`HttpClient` for the server at ``base``; leaving closes its connections.

    Entering is not a checkpoint (no connection is opened before the first ``GET``);
    leaving is.

    Args:
        base: ``http://host:port`` or ``ws://host:port`` (the websocket's address).
        token: Sent as ``Authorization: Bearer`` with every ``GET``, if given.
        max_connections: Most connections open at once (a browser keeps 6 per server).

    Raises:
        ValueError: ``base`` has no host, or ``max_connections`` is below 1.
    """
    client = HttpClient(base, token=token, max_connections=max_connections)
    try:
        yield client
    finally:
        await client.aclose()


async def http_get(
    base: str,
    target: str,
    *,
    token: str | None = None,
    max_body: int,
    headers: Mapping[str, str] | None = None,
) -> Fetched:
    """``GET`` ``target`` (a path and query) from the server at ``base`` on a connection
    of its own, closed after the answer (a checkpoint).

    Args:
        base: ``http://host:port`` or ``ws://host:port`` (the websocket's address).
        target: The path and query, e.g. ``/db/x/runs/1/preview.png?rev=2``.
        token: Sent as ``Authorization: Bearer``, if given.
        max_body: Most bytes of body read.
        headers: More request headers (e.g. ``If-None-Match``).

    Raises:
        FetchError: a broken or oversized answer.
        OSError: the connection failed.
    """
    async with open_http_client(base, token=token) as client:
        return await client.get(target, max_body=max_body, headers=headers, close=True)
