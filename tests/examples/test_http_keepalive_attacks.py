"""Hostile clients against the front door's plain HTTP keep-alive (design §7.1, §7.3).

Request smuggling (a body framed two ways, a body that ends at once), h11's refusals
with their proper status lines, pipelined requests checked on their own, kept
connections that wait for their client (idle, dribbling, not reading: they never keep a
websocket client out), half-closed clients and a request during the shutdown grace. A
real front door on port 0 and raw TCP clients on the real clock with short timeouts, as
in ``test_http_keepalive``.
"""

from __future__ import annotations

import functools
import logging
import socket
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from frontdoor_support import TIMEOUT, assert_no_children, open_client
from test_frontdoor import client, rejected_handshake
from test_frontdoor import serving as frontdoor_serving
from test_http_keepalive import IMAGE_URL, RawClient, connect, request
from test_routes import ETAG, IMAGE, TOKEN, config, serving
from test_ws_http import PAGE, PAGES
from trio_websocket import ConnectionClosed

from examples.web.frontdoor import FrontDoor, FrontDoorConfig
from examples.web.httpconn import HttpConnection

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(autouse=True)
def _no_child_left() -> Iterator[None]:
    yield
    assert_no_children()


# -- smuggling -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "framing",
    [
        # Both framings: RFC 9112 §6.3 wants the connection closed after the answer, so
        # that a proxy reading the other framing cannot be fed a request of its own.
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        # A chunked body that ends at once is still a body announced.
        "Transfer-Encoding: chunked\r\n",
    ],
)
async def test_a_chunked_request_closes_its_connection_even_with_an_empty_body(framing: str):
    async with serving(config()) as front:
        client = await connect(front)
        async with client.stream:
            smuggled = f"GET /img/a.png HTTP/1.1\r\nHost: 127.0.0.1:{front.port}\r\n\r\n"
            await client.send(request(front, "/", extra=framing) + b"0\r\n\r\n" + smuggled.encode())
            status, headers, body = await client.answer()
            assert (status, headers["connection"], body) == ("HTTP/1.1 200 OK", "close", PAGE.body)
            assert await client.closed()  # the request after the body is never read
        stats = front.statistics()
        assert (stats.http_requests, stats.refusals) == (1, {})


async def test_an_unsupported_transfer_coding_is_501_not_implemented():
    async with serving(config()) as front:
        client = await connect(front)
        async with client.stream:
            await client.send(request(front, "/", extra="Transfer-Encoding: gzip, chunked\r\n"))
            status, headers, body = await client.answer()
            assert (status, headers["connection"]) == ("HTTP/1.1 501 Not Implemented", "close")
            assert body.startswith(b"501 Not Implemented: ")
            assert await client.closed()


async def test_a_conflicting_content_length_is_400_and_nothing_after_it_is_read():
    async with serving(config()) as front:
        client = await connect(front)
        async with client.stream:
            await client.send(
                request(front, "/", extra="Content-Length: 0\r\nContent-Length: 44\r\n")
                + request(front, "/img/a.png")
            )
            status, headers, _ = await client.answer()
            assert (status, headers["connection"]) == ("HTTP/1.1 400 Bad Request", "close")
            assert await client.closed()
        assert front.statistics().refusals == {}


# -- a pipelined request is checked on its own -------------------------------------------


@pytest.mark.parametrize(
    ("second", "status"),
    [
        ("GET / HTTP/1.1\r\nHost: rebound.example:{port}\r\n\r\n", "403 Forbidden"),
        ("GET /img/a.png HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n", "403 Forbidden"),
        ("GET /img/a.png HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
         "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n", "400 Bad Request"),
        # An obsolete line folding h11 joins: the Host is then not the server's.
        ("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n rebound.example\r\n\r\n",
         "403 Forbidden"),
        ("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n" + "X: y\r\n" * 3000 + "\r\n",
         "431 Request Header Fields Too Large"),
    ],
)  # fmt: skip
async def test_a_request_in_the_same_packet_as_a_good_one_is_checked_on_its_own(
    second: str, status: str
):
    # The first carries the token (as a header) and a good Host; nothing of it
    # carries over to the second, which arrives with it.
    async with serving(config()) as front:
        client = await connect(front)
        async with client.stream:
            first = request(front, "/img/a.png", extra=f"Authorization: Bearer {TOKEN}\r\n")
            third = request(front, "/img/a.png", extra=f"Authorization: Bearer {TOKEN}\r\n")
            await client.send(first + second.format(port=front.port).encode() + third)
            assert (await client.answer())[0] == "HTTP/1.1 200 OK"
            got, headers, body = await client.answer()
            assert (got, headers["connection"]) == (f"HTTP/1.1 {status}", "close")
            assert body.startswith(status.encode())
            assert await client.closed()  # the third is never answered
        assert front.statistics().route_answers == {"200": 1}


# -- a refused HEAD ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "status"),
    [
        ("HEAD /img/a.png HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n", "403 Forbidden"),
        ("HEAD /img/a.png?token=wrong-token-0 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n",
         "403 Forbidden"),
        ("HEAD / HTTP/1.1\r\nHost: rebound.example:{port}\r\n\r\n", "403 Forbidden"),
        # A pipelined upgrade, refused as a late one: its HEAD form too.
        ("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
         "HEAD / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
         "Connection: Upgrade\r\n\r\n", "400 Bad Request"),
    ],
)  # fmt: skip
async def test_a_refused_head_gets_the_refusals_head_without_its_body(
    head: str, status: str, caplog: pytest.LogCaptureFixture
):
    # A refusal is made with its body; the answer to a HEAD goes without it (h11 would
    # refuse to write it, and the client would get no answer at all).
    caplog.set_level(logging.DEBUG, logger="examples.frontdoor")
    async with serving(config()) as front:
        client = await connect(front)
        async with client.stream:
            await client.send(head.format(port=front.port).encode())
            if head.startswith("GET"):
                assert (await client.answer())[0] == "HTTP/1.1 200 OK"
            got, headers, _ = await client.answer(head_only=True)
            assert (got, headers["connection"]) == (f"HTTP/1.1 {status}", "close")
            assert int(headers["content-length"]) > len(status)  # the GET's body length
            assert await client.closed()  # and not one byte of that body
    events = [getattr(record, "event", None) for record in caplog.records]
    assert "client_stream_failed" not in events
    (closed,) = [r for r in caplog.records if getattr(r, "event", None) == "http_connection_closed"]
    assert closed.reason == "refused"


# -- a header given twice ---------------------------------------------------------------


@pytest.mark.parametrize("wrong_first", [True, False])
async def test_every_line_of_a_repeated_authorization_header_counts(wrong_first: bool):
    # Not only the last line: a wrong credential never hides behind a right one.
    lines = [f"Authorization: Bearer {TOKEN}\r\n", "Authorization: Bearer wrong-token-0\r\n"]
    if wrong_first:
        lines.reverse()
    async with serving(config()) as front:
        client = await connect(front)
        async with client.stream:
            await client.send(request(front, "/img/a.png", extra="".join(lines)))
            status, headers, body = await client.answer()
            assert (status, headers["connection"]) == ("HTTP/1.1 403 Forbidden", "close")
            assert IMAGE not in body
        pairs = [tuple(line.strip().encode().split(b": ", 1)) for line in lines]
        rejected = await rejected_handshake(front, "/", pairs)  # type: ignore[arg-type]
        assert rejected.status_code == 403
        assert front.statistics().refusals == {"wrong_token": 2}


async def test_an_if_none_match_list_over_two_lines_is_read_whole():
    async with serving(config()) as front:
        client = await connect(front)
        async with client.stream:
            for lines in [f'If-None-Match: {ETAG}\r\nIf-None-Match: "other"\r\n',
                          f'If-None-Match: "other"\r\nIf-None-Match: {ETAG}\r\n']:  # fmt: skip
                await client.send(request(front, IMAGE_URL, extra=lines))
                status, headers, body = await client.answer()
                assert (status, headers["etag"], body) == ("HTTP/1.1 304 Not Modified", ETAG, b"")


# -- kept connections never keep a websocket client out ---------------------------------


async def kept(front: FrontDoor, target: str = "/") -> RawClient:
    """A connection kept alive after one public request (no token)."""
    client = await connect(front)
    await client.send(request(front, target))
    status, headers, _ = await client.answer()
    assert (status, "connection" in headers) == ("HTTP/1.1 200 OK", False)
    return client


async def wait_http_connections(front: FrontDoor, count: int) -> None:
    with trio.fail_after(TIMEOUT):
        while front.statistics().http_connections != count:  # noqa: ASYNC110 - server state
            await trio.sleep(0.01)


@pytest.mark.parametrize("limit", ["max_per_address", "max_connections"])
async def test_a_websocket_takes_the_slot_of_the_longest_waiting_kept_connection(limit: str):
    # Without the token, a client may still fetch the public page and keep its
    # connection: idle, or dribbling its next request, it must not hold a slot a
    # websocket client with the token needs.
    async with serving(config(keepalive_timeout=30.0, **{limit: 2})) as front:
        first = await kept(front)
        second = await kept(front)
        async with first.stream, second.stream:
            await second.send(b"GET / HT")  # a later request begun, never finished
            await wait_http_connections(front, 2)
            async with open_client(front.port, f"/?token={TOKEN}") as ws:  # type: ignore[arg-type]
                assert (await ws.request("boot_report"))["type"] == "boot_report_reply"
                assert await first.closed()  # the longest waiting: closed without a word
                async with open_client(front.port, f"/?token={TOKEN}") as other:  # type: ignore[arg-type]
                    assert (await other.request("boot_report"))["type"] == "boot_report_reply"
                    assert await second.closed()  # its half request is never answered
                    stats = front.statistics()
                    assert (stats.http_connections, stats.http_reclaimed) == (0, 2)
                    assert stats.refusals == {}
                    # Every slot is a websocket's now: nothing to take, refused as before.
                    with trio.fail_after(TIMEOUT):
                        rejected = await rejected_handshake(front, f"/?token={TOKEN}")
                    assert rejected.status_code == (429 if limit == "max_per_address" else 503)


async def test_a_client_that_takes_no_answers_lends_its_slot_too():
    # It pipelines the requests a connection may carry and reads nothing: the answers
    # fill both socket buffers and the server waits to write. Its deadline is long here;
    # a websocket client still gets in.
    settings = config(
        max_per_address=1, handshake_timeout=30.0, keepalive_timeout=30.0,
        socket_send_buffer=4096,
    )  # fmt: skip
    async with serving(settings) as front:
        sock = trio.socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        with trio.fail_after(TIMEOUT):
            await sock.connect(("127.0.0.1", front.port))
        async with trio.SocketStream(sock) as hoarder:
            with trio.fail_after(TIMEOUT):
                await hoarder.send_all(request(front, "/") * 1000)  # about 50 KiB
            await wait_http_connections(front, 1)
            async with open_client(front.port, f"/?token={TOKEN}") as ws:  # type: ignore[arg-type]
                assert (await ws.request("boot_report"))["type"] == "boot_report_reply"
            stats = front.statistics()
            assert (stats.http_reclaimed, stats.refusals) == (1, {})
            assert stats.http_requests < 1000  # it was cut while answers were waiting


# -- half-closed clients ------------------------------------------------------------------


async def test_a_client_that_half_closes_after_its_requests_gets_every_answer():
    async with serving(config()) as front:
        client = await connect(front)
        async with client.stream:
            await client.send(request(front, "/") + request(front, IMAGE_URL))
            await client.stream.send_eof()
            assert (await client.answer())[::2] == ("HTTP/1.1 200 OK", PAGE.body)
            status, headers, body = await client.answer()
            assert (status, "connection" in headers, body) == ("HTTP/1.1 200 OK", False, IMAGE)
            assert await client.closed()
        assert front.statistics().http_requests == 2


async def test_a_client_that_half_closes_inside_a_head_gets_a_400():
    async with serving(config()) as front:
        client = await connect(front)
        async with client.stream:
            await client.send(request(front, "/") + b"GET /img/a.png HT")
            await client.stream.send_eof()
            assert (await client.answer())[0] == "HTTP/1.1 200 OK"
            status, headers, body = await client.answer()
            assert (status, headers["connection"]) == ("HTTP/1.1 400 Bad Request", "close")
            assert body.startswith(b"400 Bad Request: ")
            assert await client.closed()


# -- shutdown ---------------------------------------------------------------------------


async def test_a_request_during_the_shutdown_grace_is_answered_and_its_connection_closed():
    async with frontdoor_serving(pages=PAGES) as front, client(front) as ws:
        browser = await kept(front)
        async with browser.stream:
            run = await ws.request("submit", operation="slow", arguments={"seconds": 1.0})
            assert run["admitted"]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(functools.partial(front.shutdown, grace=5.0))
                with trio.fail_after(TIMEOUT):
                    while front.admitting:  # noqa: ASYNC110 - server state
                        await trio.sleep(0.01)
                # The run keeps the grace going: the kept connection is still served.
                await browser.send(request(front, "/"))
                status, headers, body = await browser.answer()
                assert (status, headers["connection"], body) == (
                    "HTTP/1.1 200 OK", "close", PAGE.body,
                )  # fmt: skip
                assert await browser.closed()
                with pytest.raises(ConnectionClosed):
                    await ws.read_until_closed()


class _ReclaimedAsDataCame(HttpConnection):
    """A connection whose slot a handshake takes right as its next request arrives."""

    def __init__(self, stream: trio.abc.HalfCloseableStream, front: FrontDoor) -> None:
        super().__init__(stream, max_head=4096)
        self.front = front

    async def wait_request(self) -> bool:
        more = await super().wait_request()
        # No checkpoint after this: the cancel of the idle wait is never delivered.
        assert self.front._admission.refusal("/", {}, "127.0.0.1", admitting=True) is None
        return more


async def test_a_slot_taken_as_the_next_request_arrives_ends_the_connection():
    settings = FrontDoorConfig(allowed_hosts={"*"}, max_per_address=1)
    front = FrontDoor(None, settings, pages=PAGES)  # type: ignore[arg-type]  # no websocket
    client, server = trio.testing.memory_stream_pair()
    conn = _ReclaimedAsDataCame(server, front)
    get = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    async with trio.open_nursery() as nursery:
        await client.send_all(get)
        head = await conn.receive_head()
        deadline = trio.current_time() + TIMEOUT
        nursery.start_soon(front._plain.serve, conn, head, "127.0.0.1:40000", deadline)
        answer = b""
        with trio.fail_after(TIMEOUT):
            while not answer.endswith(PAGE.body):
                answer += await client.receive_some(65536)
            await client.send_all(get)  # the next request: never answered
    assert answer.count(b"HTTP/1.1 200 OK") == 1
    stats = front.statistics()
    assert (stats.http_requests, stats.http_connections, stats.http_reclaimed) == (1, 0, 1)
    await client.aclose()
