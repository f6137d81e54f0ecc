"""Plain HTTP keep-alive on the front door's port, and the clients that use it (design §7.1,
§7.3, §7.6).

A real front door on port 0 with the routes of ``test_routes`` and raw TCP clients that
speak HTTP/1.1 by hand, on the real clock with short timeouts; the timing rules alone
(idle timeout, a slow request) on the virtual clock against the front door's stream
handler, with exact times.
"""

from __future__ import annotations

import functools
import socket
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from frontdoor_support import HANDSHAKE, TIMEOUT, assert_no_children, open_client
from test_frontdoor import rejected_handshake
from test_frontdoor_faults import _PeerStream
from test_routes import ETAG, IMAGE, TOKEN, config, serving
from test_ws_http import PAGE, PAGES

from examples.web.fetch import FetchError, open_http_client
from examples.web.frontdoor import FrontDoor, FrontDoorConfig, Page

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(autouse=True)
def _no_child_left() -> Iterator[None]:
    yield
    assert_no_children()


class RawClient:
    """One TCP connection that writes requests by hand and reads answers one by one."""

    def __init__(self, stream: trio.abc.HalfCloseableStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def answer(self, *, head_only: bool = False) -> tuple[str, dict[str, str], bytes]:
        """The next answer: status line, headers (names lowercased), body."""
        with trio.fail_after(TIMEOUT):
            while b"\r\n\r\n" not in self.buffer:
                await self._more()
            head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
            status, *lines = head.decode("ascii").split("\r\n")
            headers = {n.lower(): v for n, _, v in (line.partition(": ") for line in lines)}
            size = 0 if head_only or " 304 " in status else int(headers["content-length"])
            while len(self.buffer) < size:
                await self._more()
        body, self.buffer = self.buffer[:size], self.buffer[size:]
        return status, headers, body

    async def closed(self) -> bool:
        """Wait until the server closes; True if it sent nothing more."""
        with trio.fail_after(TIMEOUT):
            rest = b""
            while chunk := await self.stream.receive_some(65536):
                rest += chunk
        return not (self.buffer or rest)

    async def _more(self) -> None:
        chunk = await self.stream.receive_some(65536)
        assert chunk, f"the server closed; unread: {self.buffer!r}"
        self.buffer += chunk


async def connect(front: FrontDoor) -> RawClient:
    with trio.fail_after(TIMEOUT):
        stream = await trio.open_tcp_stream("127.0.0.1", front.port)  # type: ignore[arg-type]
    return RawClient(stream)


def request(front: FrontDoor, target: str, method: str = "GET", extra: str = "") -> bytes:
    """A keep-alive request head (HTTP/1.1, no ``Connection`` header) with a good Host."""
    return f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{front.port}\r\n{extra}\r\n".encode()


IMAGE_URL = f"/img/a.png?token={TOKEN}"


# -- many requests on one connection ---------------------------------------------------


async def test_many_requests_share_one_connection_and_answers_come_in_order():
    async with serving(config()) as front:
        client = await connect(front)
        async with client.stream:
            for _ in range(2):  # one after the other
                await client.send(request(front, IMAGE_URL))
                status, headers, body = await client.answer()
                assert (status, body) == ("HTTP/1.1 200 OK", IMAGE)
                assert "connection" not in headers  # kept alive: HTTP/1.1's default
                assert headers["x-content-type-options"] == "nosniff"
            assert front.statistics().http_connections == 1
            # Pipelined: a page, HEAD, a 304, a 404, a route's own 400, the image again.
            await client.send(
                request(front, "/")
                + request(front, IMAGE_URL, "HEAD")
                + request(front, IMAGE_URL, extra=f"If-None-Match: {ETAG}\r\n")
                + request(front, "/nothing")
                + request(front, IMAGE_URL + "&rev=1&rev=2")
                + request(front, IMAGE_URL)
            )
            status, headers, body = await client.answer()
            assert (status, body) == ("HTTP/1.1 200 OK", PAGE.body)
            assert "default-src 'none'" in headers["content-security-policy"]
            status, headers, body = await client.answer(head_only=True)
            assert (status, headers["content-length"], body) == (
                "HTTP/1.1 200 OK", str(len(IMAGE)), b"",
            )  # fmt: skip
            status, headers, body = await client.answer()
            assert (status, headers["etag"], body) == ("HTTP/1.1 304 Not Modified", ETAG, b"")
            assert "content-length" not in headers
            status, _, body = await client.answer()
            assert (status, body) == ("HTTP/1.1 404 Not Found", b"404 Not Found\n")
            status, _, _ = await client.answer()
            assert status == "HTTP/1.1 400 Bad Request"
            status, _, body = await client.answer()
            assert (status, body) == ("HTTP/1.1 200 OK", IMAGE)
            await client.stream.send_eof()  # the client is done: the server closes too
            assert await client.closed()
        # Counted before the server closed: one connection, its slot given back.
        stats = front.statistics()
        assert (stats.http_requests, stats.http_reused, stats.http_connections) == (8, 7, 0)


async def test_the_client_or_http_1_0_asks_to_close():
    async with serving(config()) as front:
        for last in (
            request(front, "/", extra="Connection: close\r\n"),
            b"GET / HTTP/1.0\r\nHost: 127.0.0.1:%d\r\n\r\n" % front.port,
        ):
            client = await connect(front)
            async with client.stream:
                await client.send(request(front, "/") + last)
                status, headers, _ = await client.answer()
                assert (status, "connection" in headers) == ("HTTP/1.1 200 OK", False)
                status, headers, body = await client.answer()
                assert (status, headers["connection"], body) == (
                    "HTTP/1.1 200 OK", "close", PAGE.body,
                )  # fmt: skip
                assert await client.closed()


async def test_the_last_request_a_connection_may_carry_is_answered_with_close():
    async with serving(config(keepalive_requests=3)) as front:
        client = await connect(front)
        async with client.stream:
            for n in (1, 2, 3):
                await client.send(request(front, IMAGE_URL))
                status, headers, body = await client.answer()
                assert (status, body) == ("HTTP/1.1 200 OK", IMAGE)
                assert headers.get("connection") == ("close" if n == 3 else None), n
            assert await client.closed()


# -- every request is checked on its own -----------------------------------------------


@pytest.mark.parametrize(
    ("second", "status", "reason"),
    [
        ("GET / HTTP/1.1\r\nHost: evil.example:{port}\r\n\r\n", "403 Forbidden", "foreign_host"),
        ("GET /img/a.png HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n", "403 Forbidden",
         "missing_token"),
        ("GET /img/a.png?token=wrong-token HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n",
         "403 Forbidden", "wrong_token"),
        (HANDSHAKE, "400 Bad Request", "late_upgrade"),
        ("GET / HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n", "400 Bad Request", None),
        ("POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 3\r\n\r\nabc",
         "405 Method Not Allowed", None),
    ],
)  # fmt: skip
async def test_a_bad_second_request_is_answered_and_the_connection_closed(
    second: str, status: str, reason: str | None
):
    async with serving(config()) as front:
        client = await connect(front)
        async with client.stream:
            await client.send(request(front, IMAGE_URL))
            assert (await client.answer())[0] == "HTTP/1.1 200 OK"
            await client.send(second.format(port=front.port).encode())
            got, headers, body = await client.answer()
            assert (got, headers["connection"]) == (f"HTTP/1.1 {status}", "close")
            assert body.startswith(status.encode())
            assert IMAGE not in body
            assert await client.closed()
        refusals = front.statistics().refusals
        assert refusals == ({reason: 1} if reason else {})
        assert front.statistics().accepted == 0  # the late upgrade opened no websocket


async def test_a_request_with_a_body_is_answered_and_the_connection_closed():
    async with serving(config()) as front:
        client = await connect(front)
        async with client.stream:
            await client.send(request(front, "/", extra="Content-Length: 50000\r\n") + b"x" * 50000)
            status, headers, body = await client.answer()
            assert (status, headers["connection"], body) == ("HTTP/1.1 200 OK", "close", PAGE.body)
            assert await client.closed()


# -- bounds: time, slots, shutdown -----------------------------------------------------


async def test_an_idle_connection_is_closed_after_the_keepalive_timeout():
    async with serving(config(keepalive_timeout=0.2)) as front:
        client = await connect(front)
        async with client.stream:
            await client.send(request(front, IMAGE_URL))
            await client.answer()
            start = trio.current_time()
            assert await client.closed()  # closed without a word
            assert 0.15 <= trio.current_time() - start < TIMEOUT
        assert front.statistics().http_connections == 0


async def test_a_slow_second_request_is_cut_at_the_handshake_timeout():
    async with serving(config(handshake_timeout=0.3, keepalive_timeout=30.0)) as front:
        client = await connect(front)
        async with client.stream:
            await client.send(request(front, IMAGE_URL))
            await client.answer()
            start = trio.current_time()
            await client.send(b"GET / HT")  # and nothing more
            assert await client.closed()
            assert 0.25 <= trio.current_time() - start < 5.0  # not the keepalive's 30 s


async def test_kept_connections_hold_admission_slots():
    async with serving(config(max_per_address=1)) as front:
        kept = await connect(front)
        async with kept.stream:
            await kept.send(request(front, IMAGE_URL))
            assert "connection" not in (await kept.answer())[1]  # holds the address's slot
            # No slot left: a second connection is answered once, never refused.
            other = await connect(front)
            async with other.stream:
                await other.send(request(front, IMAGE_URL))
                status, headers, body = await other.answer()
                assert (status, headers["connection"], body) == ("HTTP/1.1 200 OK", "close", IMAGE)
                assert await other.closed()
            assert front.statistics().http_connections == 1
            # The kept connection only lends its slot while it waits: a websocket takes
            # it (design §7.3), and the kept connection is closed without a word.
            async with open_client(front.port, f"/?token={TOKEN}") as ws:  # type: ignore[arg-type]
                assert (await ws.request("boot_report"))["type"] == "boot_report_reply"
                assert await kept.closed()
                with trio.fail_after(TIMEOUT):
                    rejected = await rejected_handshake(front, f"/?token={TOKEN}")
                assert rejected.status_code == 429  # a websocket's slot is never taken
        stats = front.statistics()
        assert (stats.http_connections, stats.http_reclaimed) == (0, 1)
        assert stats.refusals == {"address_limit": 1}


async def test_closing_the_front_door_ends_idle_kept_connections_at_once():
    async with serving(config(keepalive_timeout=60.0)) as front:
        client = await connect(front)
        async with client.stream:
            await client.send(request(front, IMAGE_URL))
            await client.answer()
            front.close()
            with trio.fail_after(5.0):  # not the keepalive's 60 s
                assert await client.closed()


# -- the timing rules alone, on the virtual clock --------------------------------------


async def test_idle_and_slow_requests_end_at_exact_times(autojump_clock: trio.testing.MockClock):
    config = FrontDoorConfig(allowed_hosts={"*"}, handshake_timeout=2.0, keepalive_timeout=5.0)
    front = FrontDoor(None, config, pages=PAGES)  # type: ignore[arg-type]  # no websocket
    get = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"

    async def served(script: list[bytes | float]) -> float:
        # The client sends each bytes item, or waits that many seconds; the server's
        # handler returns when it closed the connection.
        client, server = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(front._serve_stream, _PeerStream(server, 40000))  # type: ignore[arg-type]
            for step in script:
                if isinstance(step, float):
                    await trio.sleep(step)
                else:
                    await client.send_all(step)
        await client.aclose()
        return trio.current_time()

    start = trio.current_time()
    assert await served([get, 1.0, get]) == start + 1.0 + 5.0  # idle after the 2nd answer
    start = trio.current_time()
    assert await served([get, 1.0, b"GET / HT", 0.5, b"TP/1.1\r\n"]) == start + 1.0 + 2.0
    start = trio.current_time()
    # The first request has handshake_timeout from the accept; a dribbling head is cut.
    assert await served([b"GET", 1.5, b" / HTTP/1.1\r\n"]) == start + 2.0
    assert front.statistics().http_requests == 3
    assert front.statistics().http_reused == 1


async def test_a_client_that_never_reads_is_cut_at_the_handshake_timeout(
    autojump_clock: trio.testing.MockClock,
):
    # A lockstep stream buffers nothing: the server's answer waits for a read forever.
    config = FrontDoorConfig(allowed_hosts={"*"}, handshake_timeout=2.0, keepalive_timeout=5.0)
    big = {"/": Page(body=b"x" * 100_000)}
    front = FrontDoor(None, config, pages=big)  # type: ignore[arg-type]
    client, server = trio.testing.lockstep_stream_pair()
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(front._serve_stream, _PeerStream(server, 40000))  # type: ignore[arg-type]
        await client.send_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")

        async def never_read() -> None:
            while True:  # the server's send_all blocks until its deadline closes the stream
                await client.send_all(b"x")

        with pytest.raises(trio.BrokenResourceError):
            await never_read()
    assert trio.current_time() == start + 2.0
    assert front.statistics().http_connections == 0
    await client.aclose()


# -- the clients ------------------------------------------------------------------------


async def test_the_client_reuses_its_connections_and_retries_one_the_server_closed():
    async with serving(config(keepalive_timeout=0.2)) as front:
        base = f"ws://127.0.0.1:{front.port}"
        async with open_http_client(base, token=TOKEN, max_connections=2) as client:
            with trio.fail_after(TIMEOUT):
                for _ in range(5):
                    fetched = await client.get("/img/a.png", max_body=1024)
                    assert (fetched.status, fetched.body) == (200, IMAGE)
                assert client.opened == 1
                async with trio.open_nursery() as nursery:  # at most 2 at once
                    get = functools.partial(client.get, "/img/a.png", max_body=1024)
                    for _ in range(10):
                        nursery.start_soon(get)
                assert client.opened == 2
                # The server closes idle connections after 0.2 s: the next GET notices
                # that its kept connection is gone and sends again on a fresh one.
                while front.statistics().http_connections:  # noqa: ASYNC110 - server state
                    await trio.sleep(0.01)
                fetched = await client.get("/img/a.png", max_body=1024)
                assert (fetched.status, fetched.body) == (200, IMAGE)
                assert (client.opened, client.requests) == (3, 16)
                with pytest.raises(FetchError, match="over 10 bytes"):
                    await client.get("/img/a.png", max_body=10)
                assert client.opened == 3  # the oversized answer's connection is closed
        stats = front.statistics()
        assert (stats.http_requests, stats.http_reused) == (17, 17 - 3)


async def test_the_client_opens_a_connection_per_request_for_a_server_that_closes():
    async with serving(config(keepalive_requests=1)) as front:
        base = f"http://127.0.0.1:{front.port}"
        async with open_http_client(base, token=TOKEN) as client:
            for _ in range(3):
                with trio.fail_after(TIMEOUT):
                    assert (await client.get("/img/a.png", max_body=1024)).status == 200
            assert client.opened == 3
        assert front.statistics().http_reused == 0


async def test_a_refused_connection_is_an_oserror_not_a_retry():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    async with open_http_client(f"http://127.0.0.1:{port}") as client:
        with pytest.raises(OSError, match="connect"):
            await client.get("/", max_body=10)
        assert client.opened == 0
    with pytest.raises(ValueError, match="max_connections"):
        async with open_http_client("http://127.0.0.1:1", max_connections=0):
            pass
