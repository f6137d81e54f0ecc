"""Connections that never finish their first request head are bounded (design §7.3).

The bound itself and a front door's streams run on the virtual clock where the timing
is the point (exact ages and deadlines, contributing §F.2; in-memory streams, no real I/O);
a real front door on port 0 with real sockets, on the real clock, shows that a new
client gets in while idle connections flood it, and that no more than ``max_pending``
of them are ever held.
"""

from __future__ import annotations

import logging
import socket
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing
from frontdoor_support import TIMEOUT, assert_no_children
from test_frontdoor import client, serving

from examples.web.cli import OneLineParser
from examples.web.frontdoor import FrontDoor, FrontDoorConfig
from examples.web.launch import add_server_options, front_door_config
from examples.web.pending import PendingConnections

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(autouse=True)
def _no_child_left() -> Iterator[None]:
    yield
    assert_no_children()


class Evictions(logging.Handler):
    """Keeps each ``pending_evicted`` record's level, fields and trio time."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[tuple[float, int, str, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == "pending_evicted":
            when = round(trio.current_time(), 9)
            self.seen.append((when, record.levelno, record.peer, record.age))  # type: ignore[attr-defined]


@pytest.fixture
def evictions() -> Iterator[Evictions]:
    handler = Evictions()
    logger = logging.getLogger("examples.frontdoor")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.setLevel(level)
        logger.removeHandler(handler)


# -- the bound, on the virtual clock ------------------------------------------------------


async def test_the_oldest_pending_connection_makes_room(
    autojump_clock: trio.testing.MockClock, evictions: Evictions
) -> None:
    pending = PendingConnections(2)
    scopes = [trio.CancelScope() for _ in range(4)]
    async with trio.open_nursery() as nursery:

        async def wait_head(index: int) -> None:
            with scopes[index], pending.waiting(scopes[index], f"127.0.0.1:{index}"):
                await trio.sleep_forever()

        for index in range(3):
            nursery.start_soon(wait_head, index)
            await trio.sleep(1.5)  # each waits 1.5 s longer than the next
        # The third's arrival at 3.0 closed the first (pending since 0.0).
        assert [scope.cancel_called for scope in scopes[:3]] == [True, False, False]
        assert (len(pending), pending.evicted) == (2, 1)
        with pending.waiting(scopes[3], "127.0.0.1:3"):  # one that ends in time
            assert (len(pending), pending.evicted) == (2, 2)
        assert len(pending) == 1  # it is not counted once its head is in
        nursery.cancel_scope.cancel()
    assert len(pending) == 0
    assert evictions.seen == [
        (3.0, logging.INFO, "127.0.0.1:0", 3.0),
        (4.5, logging.INFO, "127.0.0.1:1", 3.0),
    ]


def test_max_pending_is_validated_by_name() -> None:
    with pytest.raises(ValueError, match="max_pending must be >= 1 and <= 10000, got 0"):
        FrontDoorConfig(max_pending=0)
    with pytest.raises(ValueError, match="max_pending must be >= 1 and <= 10000, got 10001"):
        FrontDoorConfig(max_pending=10_001)
    with pytest.raises(ValueError, match=r"max_pending must be an integer, got 1\.5"):
        FrontDoorConfig(max_pending=1.5)  # type: ignore[arg-type]
    default = FrontDoorConfig()
    # Clients that all connect at once are all read before any is evicted.
    assert default.max_pending == 128 > default.max_connections
    with pytest.raises(ValueError, match="limit must be >= 1"):
        PendingConnections(0)


def test_the_servers_take_max_pending_from_the_command_line() -> None:
    parser = OneLineParser(prog="server")
    add_server_options(parser, port=1)
    assert front_door_config(parser, parser.parse_args([])).max_pending == 128
    config = front_door_config(parser, parser.parse_args(["--max-pending", "7"]))
    assert config.max_pending == 7


# -- a front door's streams, on the virtual clock -----------------------------------------


class _Peer:
    def __init__(self, port: int) -> None:
        self.port = port

    def getpeername(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


class FakeSocketStream(trio.abc.HalfCloseableStream):
    """The server half of an in-memory connection, with the peer a socket would name."""

    def __init__(self, stream: trio.StapledStream[Any, Any], port: int) -> None:
        self._stream = stream
        self.socket = _Peer(port)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self._stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self._stream.aclose()


async def test_a_new_connection_closes_the_oldest_idle_one_and_the_others_keep_their_deadline(
    autojump_clock: trio.testing.MockClock, evictions: Evictions
) -> None:
    config = FrontDoorConfig(max_pending=4, handshake_timeout=10.0, allowed_hosts={"*"})
    front = FrontDoor(None, config)  # type: ignore[arg-type]  # no request reaches it
    closed_at: dict[int, float] = {}

    async def connect(nursery: trio.Nursery, port: int) -> trio.abc.Stream:
        client_side, server_side = trio.testing.memory_stream_pair()
        nursery.start_soon(front._serve_stream, FakeSocketStream(server_side, port))
        return client_side

    async def until_closed(port: int, stream: trio.abc.Stream) -> None:
        assert await stream.receive_some() == b""  # closed without a word
        closed_at[port] = trio.current_time()

    async with trio.open_nursery() as nursery:
        for port in range(4):  # idle connections at 0, 1, 2 and 3 s
            nursery.start_soon(until_closed, port, await connect(nursery, port))
            await trio.sleep(1.0)
        assert (front.statistics().pending, front.statistics().pending_evicted) == (4, 0)
        real = await connect(nursery, 4)  # at 4 s: a client that sends its request
        await real.send_all(b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += await real.receive_some()
        assert answer.startswith(b"HTTP/1.1 404 ")  # served as ever, at once
        assert trio.current_time() == 4.0
        stats = front.statistics()
        assert (stats.pending, stats.pending_evicted, stats.http_requests) == (3, 1, 1)
        await real.aclose()
    # The oldest went at the newcomer's arrival; the others at their own deadline.
    assert closed_at == {0: 4.0, 1: 11.0, 2: 12.0, 3: 13.0}
    assert evictions.seen == [(4.0, logging.INFO, "127.0.0.1:0", 4.0)]
    assert (front.statistics().pending, front.statistics().pending_evicted) == (0, 1)


# -- a real front door, real sockets ------------------------------------------------------


def _open_without_data(stream: trio.SocketStream) -> bool:
    """True if the server has neither closed ``stream`` nor sent on it (never waits)."""
    with socket.socket(fileno=stream.socket.dup().detach()) as probe:
        probe.setblocking(False)
        try:
            probe.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return True
    return False


async def _wait_pending(front: FrontDoor, accepted: int) -> tuple[int, int]:
    """Wait until the front door has taken in ``accepted`` connections as pending;
    return ``(pending, pending_evicted)`` then."""
    with trio.fail_after(TIMEOUT):
        # Accepting happens in the server's tasks: its counters are what the test reads.
        while True:
            stats = front.statistics()
            if stats.pending + stats.pending_evicted >= accepted:
                return stats.pending, stats.pending_evicted
            await trio.sleep(0.01)


async def _closed_by_server(stream: trio.SocketStream) -> bool:
    with trio.fail_after(TIMEOUT):
        try:
            return await stream.receive_some() == b""
        except trio.BrokenResourceError:  # a reset: the server closed with bytes unread
            return True


async def test_a_real_client_gets_in_and_the_oldest_idle_connection_is_closed(
    evictions: Evictions,
) -> None:
    config = FrontDoorConfig(max_pending=4, handshake_timeout=30.0)
    async with serving(config) as front, AsyncExitStack() as stack:
        idle: list[trio.SocketStream] = []
        for count in range(1, 5):
            stream = await trio.open_tcp_stream("127.0.0.1", front.port)
            idle.append(await stack.enter_async_context(stream))
            assert await _wait_pending(front, count) == (count, 0)
        oldest_host, oldest_port = idle[0].socket.getsockname()[:2]
        async with client(front) as c:  # a websocket handshake: the fifth connection
            assert (await c.request("boot_report"))["type"] == "boot_report_reply"
            assert await _closed_by_server(idle[0])
            stats = front.statistics()
            assert (stats.pending, stats.pending_evicted, stats.connections) == (3, 1, 1)
            assert all(_open_without_data(stream) for stream in idle[1:])
    assert [(level, peer) for _, level, peer, _ in evictions.seen] == [
        (logging.INFO, f"{oldest_host}:{oldest_port}")
    ]
    assert 0.0 <= evictions.seen[0][3] < 30.0


async def test_a_flood_of_idle_connections_never_holds_more_than_max_pending() -> None:
    flood, limit = 24, 4
    config = FrontDoorConfig(max_pending=limit, handshake_timeout=30.0)
    async with (
        serving(config) as front,
        AsyncExitStack() as stack,
        client(front) as before,  # connected before the flood: never pending
    ):
        assert (await before.request("boot_report"))["type"] == "boot_report_reply"
        streams: list[trio.SocketStream] = []
        for count in range(1, flood + 1):
            stream = await trio.open_tcp_stream("127.0.0.1", front.port)
            streams.append(await stack.enter_async_context(stream))
            if count % 2:  # half of them dribble a head they never finish
                await stream.send_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1")
            pending, evicted = await _wait_pending(front, count)
            assert (pending, evicted) == (min(count, limit), max(0, count - limit))
        for stream in streams[: flood - limit]:
            assert await _closed_by_server(stream)
        assert all(_open_without_data(stream) for stream in streams[flood - limit :])
        async with client(front) as after:  # a new client gets in all the same
            assert (await after.request("boot_report"))["type"] == "boot_report_reply"
        assert (await before.request("boot_report"))["type"] == "boot_report_reply"
        stats = front.statistics()
        assert (stats.pending, stats.pending_evicted) == (limit - 1, flood - limit + 1)
        assert stats.accepted == 2
