"""A minimal HTTP/1.1 ``GET`` over trio and h11: the command-line clients' image fetch.

:func:`http_get` opens one TCP connection per request (the front door answers one
request per connection, :mod:`examples.web.http`), sends the token as an
``Authorization: Bearer`` header (so it never appears in a URL the client prints or
logs, design §7.3) and reads the answer, at most ``max_body`` bytes of body. No
timeout of its own: callers put it under a cancel scope.
"""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING

import attrs
import h11
import trio

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["FetchError", "Fetched", "http_get"]

_CHUNK = 65536


class FetchError(Exception):
    """The server's answer was not HTTP, was cut off, or its body was over ``max_body``.

    Raised by :func:`http_get`; an answer with an error status is not a ``FetchError``
    (see :attr:`Fetched.status`).
    """


@attrs.frozen(kw_only=True)
class Fetched:
    """One HTTP answer."""

    status: int
    """The HTTP status."""
    headers: Mapping[str, str]
    """The headers, names lowercased (the last of a repeated one)."""
    body: bytes = attrs.field(repr=lambda body: f"<{len(body)} bytes>")
    """The body, bytes."""


async def http_get(
    base: str,
    target: str,
    *,
    token: str | None = None,
    max_body: int,
    headers: Mapping[str, str] | None = None,
) -> Fetched:
    """``GET`` ``target`` (a path and query) from the server at ``base`` (a checkpoint).

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
    split = urllib.parse.urlsplit(base)
    if split.hostname is None:
        raise ValueError(f"not an address: {base!r}")
    port = split.port or (443 if split.scheme in ("https", "wss") else 80)
    host = f"[{split.hostname}]" if ":" in split.hostname else split.hostname
    request_headers = [("Host", f"{host}:{port}"), ("Connection", "close")]
    if token:
        request_headers.append(("Authorization", f"Bearer {token}"))
    request_headers += list((headers or {}).items())
    conn = h11.Connection(h11.CLIENT)
    stream = await trio.open_tcp_stream(split.hostname, port)
    async with stream:
        await stream.send_all(
            conn.send(h11.Request(method="GET", target=target, headers=request_headers))
            + conn.send(h11.EndOfMessage())
        )
        status = 0
        answer_headers: dict[str, str] = {}
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise FetchError(f"not an HTTP answer: {exc}") from exc
            if event is h11.NEED_DATA:
                conn.receive_data(bytes(await stream.receive_some(_CHUNK)))
            elif isinstance(event, h11.Response):
                status = event.status_code
                answer_headers = {
                    name.decode("latin-1"): value.decode("latin-1") for name, value in event.headers
                }
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > max_body:
                    raise FetchError(f"the answer is over {max_body} bytes")
            elif isinstance(event, h11.EndOfMessage):
                return Fetched(status=status, headers=answer_headers, body=bytes(body))
            elif isinstance(event, h11.ConnectionClosed):
                raise FetchError("the server closed the connection before its answer ended")
