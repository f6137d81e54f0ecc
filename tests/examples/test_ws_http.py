"""Plain HTTP on the front door's port: pages, refusals, limits (design §7.1, §7.3).

A real event-log actor and front door on port 0, raw TCP clients that speak HTTP/1.1 by
hand, and trio-websocket clients on the same port; real clock, short timeouts.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from frontdoor_support import TIMEOUT, assert_no_children, open_client

from actors import EventLogActor, EventLogClient, EventLogConfig, OperationSpec
from examples.web.frontdoor import FrontDoor, FrontDoorConfig, Page, open_front_door
from examples.web.http import ReplayStream

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

PAGE = Page(body=b"<!doctype html><title>t</title><p>hello</p>\n")
PAGES = {"/": PAGE, "/dashboard.html": PAGE}


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


@asynccontextmanager
async def serving(config: FrontDoorConfig | None = None) -> AsyncIterator[FrontDoor]:
    actor = EventLogActor(EventLogConfig(), operations=[OperationSpec(name="manual")])
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(actor.run)
        log = EventLogClient(ref, timeout=5.0)
        async with open_front_door(log, config or FrontDoorConfig(), pages=PAGES) as front:
            yield front
        await ref.stop(1.0)


async def exchange(front: FrontDoor, request: bytes) -> bytes:
    """Send raw ``request`` bytes; return everything the server sends until it closes."""
    with trio.fail_after(TIMEOUT):
        stream = await trio.open_tcp_stream("127.0.0.1", front.port)  # type: ignore[arg-type]
        async with stream:
            await stream.send_all(request)
            if not request:
                await stream.send_eof()  # connected and left
            answer = b""
            while chunk := await stream.receive_some(65536):
                answer += chunk
    return answer


def get(front: FrontDoor, path: str, method: str = "GET", extra: str = "") -> bytes:
    """A one-shot request head to ``front`` (``Connection: close``), with the ``Host`` a
    browser would send: :func:`exchange` reads its answer up to the server's close."""
    host = f"127.0.0.1:{front.port}"
    return f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{extra}\r\n".encode()


def split(answer: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("ascii").split("\r\n")
    headers = {name.lower(): value for name, _, value in (line.partition(": ") for line in lines)}
    return status, headers, body


async def test_the_page_is_served_on_the_websocket_port():
    async with serving() as front:
        for path in ("/", "/?select=4&token=abc", "/dashboard.html"):
            status, headers, body = split(await exchange(front, get(front, path)))
            assert status == "HTTP/1.1 200 OK"
            assert body == PAGE.body
            assert headers["content-type"] == "text/html; charset=utf-8"
            assert headers["content-length"] == str(len(PAGE.body))
            assert headers["connection"] == "close"
            assert headers["cache-control"] == "no-store"
            assert headers["x-content-type-options"] == "nosniff"
            assert headers["referrer-policy"] == "no-referrer"
            assert "default-src 'none'" in headers["content-security-policy"]
        status, headers, body = split(await exchange(front, get(front, "/", "HEAD")))
        assert (status, headers["content-length"], body) == (
            "HTTP/1.1 200 OK", str(len(PAGE.body)), b"",
        )  # fmt: skip
        assert front.statistics().http_requests == 4
        assert front.statistics().accepted == 0  # no websocket was opened


async def test_other_paths_methods_and_bad_heads_are_refused():
    async with serving(FrontDoorConfig(max_request_head=1024)) as front:
        status, headers, body = split(await exchange(front, get(front, "/secret.txt")))
        assert (status, body) == ("HTTP/1.1 404 Not Found", b"404 Not Found\n")
        status, headers, _ = split(
            await exchange(front, get(front, "/", "POST", "Content-Length: 0\r\n"))
        )
        assert (status, headers["allow"]) == ("HTTP/1.1 405 Method Not Allowed", "GET, HEAD")
        status, _, body = split(await exchange(front, b"this is not http\r\n\r\n"))
        assert status == "HTTP/1.1 400 Bad Request"
        assert body.startswith(b"400 Bad Request: ")
        # A 400 says what is wrong in words, never quoting the client's bytes.
        status, _, body = split(await exchange(front, "GET /\u00e9 HTTP/1.1\r\n\r\n".encode()))
        assert (status, body) == (
            "HTTP/1.1 400 Bad Request",
            b"400 Bad Request: illegal request line\n",
        )
        # An absolute-form target names an authority the Host check never sees.
        status, _, body = split(await exchange(front, get(front, "http://evil.example/")))
        assert (status, body) == (
            "HTTP/1.1 400 Bad Request",
            b"400 Bad Request: the request target must be a path starting with '/'\n",
        )  # fmt: skip
        huge = get(front, "/", extra=f"X-Padding: {'p' * 2000}\r\n")
        status, _, _ = split(await exchange(front, huge))
        assert status == "HTTP/1.1 431 Request Header Fields Too Large"
        # A request body the server does not read is drained, not answered by a reset.
        status, _, body = split(
            await exchange(front, get(front, "/", extra="Content-Length: 50000\r\n") + b"x" * 50000)
        )
        assert (status, body) == ("HTTP/1.1 200 OK", PAGE.body)
        assert await exchange(front, b"") == b""  # connected and left: nothing to answer
        assert front.statistics().http_requests == 7


async def test_a_slow_http_client_is_cut_at_the_handshake_timeout():
    async with serving(FrontDoorConfig(handshake_timeout=0.2)) as front:
        start = trio.current_time()
        assert await exchange(front, b"GET / HTTP/1.1\r\nHost: x\r\n") == b""  # never ends
        assert 0.15 <= trio.current_time() - start < TIMEOUT
        assert front.statistics().http_requests == 0


async def test_the_websocket_works_beside_the_pages_and_keeps_its_token():
    token = "s3cret-token"
    async with serving(FrontDoorConfig(token=token)) as front:
        status, _, body = split(await exchange(front, get(front, "/")))  # the page is public
        assert (status, body) == ("HTTP/1.1 200 OK", PAGE.body)
        refused = await exchange(
            front,
            get(front, "/", extra="Upgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"),
        )  # fmt: skip
        assert refused.startswith(b"HTTP/1.1 403 ")
        async with open_client(front.port, f"/?token={token}") as client:  # type: ignore[arg-type]
            receipt = await client.request("submit", operation="manual", arguments={})
            cancelled = await client.request("cancel", run_id=receipt["run_id"])
            assert cancelled["detail"]["cancelled_by"].startswith("ws-1@127.0.0.1:")
        assert front.statistics().accepted == 1
        assert front.statistics().rejected == 1


async def test_replay_stream_gives_back_the_bytes_read_first():
    left, right = trio.testing.memory_stream_pair()
    replay = ReplayStream(right, b"abcdef")
    await left.send_all(b"gh")
    assert await replay.receive_some(4) == b"abcd"
    assert await replay.receive_some() == b"ef"
    assert await replay.receive_some() == b"gh"
    await replay.send_all(b"out")
    assert await left.receive_some() == b"out"
    await replay.wait_send_all_might_not_block()
    await replay.aclose()
    assert await left.receive_some() == b""
