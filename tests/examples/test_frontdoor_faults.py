"""The front door against clients that stall and extension code that fails (design §7.1, §7.3).

A client that stops reading mid-handshake, a handler that never answers, a callback or a
check that raises: each costs at most its own request or its own connection, for a
bounded time, and leaves a log record that says what happened. Clients that only need
a zero-buffer stream talk to the front door's stream handler directly on the virtual
clock (exact times, contributing §F.2); the rest use a real server on loopback.
"""

from __future__ import annotations

import json
import logging
import types
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing
from frontdoor_support import HANDSHAKE, TIMEOUT, assert_no_children, open_client

from actors import EventLogActor, EventLogClient, EventLogConfig, OperationSpec
from examples.web.admission import Admission
from examples.web.connection import Connection
from examples.web.frontdoor import FrontDoor, FrontDoorConfig, open_front_door
from examples.web.guard import Guard, Refusal
from protocol import messages

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator


async def _echo(run: Any, report: Any) -> Any:
    return run.arguments.get("value")


@pytest.fixture(autouse=True)
def _no_child_left() -> Iterator[None]:
    yield
    assert_no_children()


@asynccontextmanager
async def serving(config: FrontDoorConfig | None = None, **kwargs: Any) -> AsyncIterator[FrontDoor]:
    actor = EventLogActor(
        EventLogConfig(), operations=[OperationSpec(name="echo", fields={"value"})],
        runners={"echo": _echo},
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(actor.run)
        log = EventLogClient(ref, timeout=5.0)
        async with open_front_door(log, config or FrontDoorConfig(), **kwargs) as front:
            yield front
        await ref.stop(1.0)


# -- a client that never reads (a stream with no buffer at all) --------------------------


class _PeerStream(trio.abc.HalfCloseableStream):
    """One end of ``trio.testing.lockstep_stream_pair``, seen as a socket from ``port``.

    Lockstep streams buffer nothing: the server's ``send_all`` waits until the client
    reads, as it would on a TCP connection whose receive window stays closed.
    """

    def __init__(self, stream: trio.StapledStream[Any, Any], port: int) -> None:
        self._stream = stream
        self.socket = types.SimpleNamespace(getpeername=lambda: ("127.0.0.1", port))

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self._stream.receive_some(max_bytes)

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        await self._stream.aclose()


def _handshake(origin: str | None = None) -> bytes:
    text = HANDSHAKE.format(port=8000)
    if origin is not None:
        text = text.replace("\r\n\r\n", f"\r\nOrigin: {origin}\r\n\r\n")
    return text.encode()


async def _head(stream: trio.abc.ReceiveStream) -> bytes:
    received = b""
    while b"\r\n\r\n" not in received:
        data = await stream.receive_some(4096)
        assert data, received
        received += data
    return received.partition(b"\r\n")[0]


async def test_a_client_that_never_reads_frees_its_slot_within_the_handshake_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Any Host: the front door is not bound (its handler is called directly).
    config = FrontDoorConfig(allowed_hosts={"*"}, handshake_timeout=2.0, ping_interval=300.0)
    front = FrontDoor(None, config)  # type: ignore[arg-type]  # no request reaches it
    ended: list[float] = []
    ports = iter(range(40000, 40100))

    async def serve(server: _PeerStream) -> None:
        await front._serve_stream(server)  # type: ignore[arg-type]
        ended.append(trio.current_time())

    async def connect(nursery: trio.Nursery, handshake: bytes) -> trio.abc.Stream:
        client, server = trio.testing.lockstep_stream_pair()
        nursery.start_soon(serve, _PeerStream(server, next(ports)))
        await client.send_all(handshake)  # returns once the server has read it
        return client

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        stalled = [await connect(nursery, _handshake()) for _ in range(16)]  # every slot
        stalled.append(await connect(nursery, _handshake("http://evil.example")))  # 403
        await trio.testing.wait_all_tasks_blocked()
        # The address holds every slot: a 17th client that reads is told so at once.
        seventeenth = await connect(nursery, _handshake())
        assert (await _head(seventeenth)).startswith(b"HTTP/1.1 429 ")
        await seventeenth.aclose()
        with trio.fail_after(10):  # virtual seconds: without the deadline they stay
            while len(ended) < 18:  # noqa: ASYNC110 - the server tasks end on their own
                await trio.sleep(0.5)
        assert ended == [start] + [start + 2.0] * 17  # the 429, then the silent ones
        assert front.statistics().refusals == {"foreign_origin": 1, "address_limit": 1}
        # Every slot is free again: the next client from that address is served.
        client = await connect(nursery, _handshake())
        assert await _head(client) == b"HTTP/1.1 101 Switching Protocols"
        await trio.testing.wait_all_tasks_blocked()
        assert front.statistics().connections == 1
        front.close()
        await client.aclose()
        for stream in stalled:
            await stream.aclose()


async def test_a_refused_handshake_gets_a_reason_phrase_on_the_wire() -> None:
    async with serving() as front:
        with trio.fail_after(TIMEOUT):
            stream = await trio.open_tcp_stream("127.0.0.1", front.port)
            async with stream:
                await stream.send_all(
                    HANDSHAKE.format(port=front.port)
                    .replace("\r\n\r\n", "\r\nOrigin: http://evil.example\r\n\r\n")
                    .encode()
                )
                answer = b""
                while data := await stream.receive_some(4096):
                    answer += data
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 403 Forbidden"
    assert body.startswith(b"403 Forbidden: ")
    assert front.statistics().rejected == 1


# -- extension code that fails or hangs ----------------------------------------------------


async def test_a_failing_after_reply_callback_is_logged_and_the_connection_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def explode() -> None:
        raise ZeroDivisionError("in a callback")

    async def select(conn: Connection, request: messages.Select) -> None:
        conn.after_reply(explode)

    async with serving(handlers={"select": select}) as front, open_client(front.port) as c:
        assert await c.request("select", run_id=1) == {"type": "ok", "request_id": "r1"}
        assert await c.request("select", run_id=2) == {"type": "ok", "request_id": "r2"}
        assert front.statistics().connections == 1
    failed = [r for r in caplog.records if getattr(r, "event", None) == "after_reply_failed"]
    assert len(failed) == 2
    assert failed[0].levelno == logging.WARNING
    assert failed[0].exc_info is not None
    assert failed[0].exc_info[0] is ZeroDivisionError
    assert failed[0].connection.startswith("ws-1@")  # type: ignore[attr-defined]


async def test_a_handler_that_hangs_is_answered_retryable_and_the_connection_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def select(conn: Connection, request: messages.Select) -> None:
        if request.run_id == 1:
            await trio.sleep_forever()

    config = FrontDoorConfig(request_timeout=0.2)
    async with serving(config, handlers={"select": select}) as front, open_client(front.port) as c:
        error = await c.request("select", run_id=1)
        assert (error["type"], error["code"], error["retryable"]) == (
            "error", "request_timeout", True,
        )  # fmt: skip
        assert error["request_id"] == "r1"
        assert await c.request("select", run_id=2) == {"type": "ok", "request_id": "r2"}
    (record,) = [r for r in caplog.records if getattr(r, "event", None) == "request_timeout"]
    assert (record.type, record.timeout) == ("select", 0.2)  # type: ignore[attr-defined]


def test_request_timeout_is_validated_by_name() -> None:
    for bad in (0, -1.0, float("nan"), "1"):
        with pytest.raises((ValueError, TypeError), match="request_timeout must"):
            FrontDoorConfig(request_timeout=bad)  # type: ignore[arg-type]


class _BrokenGuard(Guard):
    def check(self, target: str, headers: Any, *, websocket: bool) -> Refusal | None:
        raise RuntimeError("a bug in a check")


async def test_a_bug_while_serving_a_stream_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with serving() as front:
        front._admission.guard = _BrokenGuard(front.config, [front.port])
        with trio.fail_after(TIMEOUT):
            stream = await trio.open_tcp_stream("127.0.0.1", front.port)
            async with stream:
                await stream.send_all(HANDSHAKE.format(port=front.port).encode())
                assert await stream.receive_some(4096) == b""  # closed, nothing said
        front._admission.guard = Guard(front.config, [front.port])
        async with open_client(front.port) as c:  # the server goes on
            assert (await c.request("status", run_id=1))["type"] == "error"
    (record,) = [r for r in caplog.records if getattr(r, "event", None) == "client_stream_failed"]
    assert (record.levelno, record.error) == (logging.ERROR, "RuntimeError")  # type: ignore[attr-defined]
    assert record.exc_info is not None
    assert record.exc_info[1] is not None
    assert record.exc_info[1].subgroup(RuntimeError) is not None  # type: ignore[attr-defined]


async def test_a_client_that_leaves_mid_handshake_is_logged_without_a_traceback(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="examples.frontdoor")
    front = FrontDoor(None, FrontDoorConfig(allowed_hosts={"*"}))  # type: ignore[arg-type]
    client, server = trio.testing.lockstep_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(front._serve_stream, _PeerStream(server, 40000))  # type: ignore[arg-type]
        await client.send_all(_handshake())
        await client.aclose()  # gone before the answer: the server's send breaks
    (record,) = [r for r in caplog.records if r.name == "examples.frontdoor"]
    assert (record.levelno, record.event, record.exc_info) == (  # type: ignore[attr-defined]
        logging.INFO, "client_stream_ended", None,
    )  # fmt: skip
    assert trio.current_time() == 0.0  # at once, not at the handshake deadline


# -- hooks and the attack path's logging -----------------------------------------------------


async def test_on_disconnect_returns_an_unregister_function() -> None:
    kept: list[str] = []
    dropped: list[str] = []
    async with serving() as front:
        front.on_disconnect(lambda conn: kept.append(conn.name))
        unregister = front.on_disconnect(lambda conn: dropped.append(conn.name))
        unregister()
        unregister()  # idempotent
        async with open_client(front.port) as c:
            assert (await c.request("status", run_id=1))["type"] == "error"
        with trio.fail_after(TIMEOUT):
            while not kept:  # noqa: ASYNC110 - the hook runs after the closing handshake
                await trio.sleep(0.01)
    assert kept[0].startswith("ws-1@")
    assert dropped == []


class _CountingHeaders(dict[bytes, bytes]):
    reads = 0

    def get(self, key: bytes, default: Any = None) -> Any:  # type: ignore[override]
        type(self).reads += 1
        return super().get(key, default)


def test_a_refusal_builds_no_log_record_while_warnings_are_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = FrontDoorConfig()
    admission = Admission(config, Guard(config, [8000]))
    refusal = Refusal(status=403, reason="foreign_origin", message="no")
    headers = _CountingHeaders({b"origin": b"http://evil.example"})
    caplog.set_level(logging.ERROR, logger="examples.frontdoor")
    admission.refused(refusal, "127.0.0.1:1", "websocket", headers)
    assert (dict(admission.refusals), _CountingHeaders.reads, caplog.records) == (
        {"foreign_origin": 1}, 0, [],
    )  # fmt: skip
    caplog.set_level(logging.WARNING, logger="examples.frontdoor")
    admission.refused(refusal, "127.0.0.1:1", "websocket", headers)
    (record,) = caplog.records
    assert (record.origin, record.reason) == ("http://evil.example", "foreign_origin")  # type: ignore[attr-defined]


# -- the send queue: every wait on it is bounded ----------------------------------------------


class _StalledWs:
    """A websocket whose client reads nothing until :attr:`reading` is set."""

    def __init__(self) -> None:
        self.inbox, self._incoming = trio.open_memory_channel[str](8)
        self.reading = trio.Event()
        self.sent: list[dict[str, Any]] = []
        self.closed_with: tuple[int, str | None, float] | None = None
        self.closed = None

    async def get_message(self) -> str:
        return await self._incoming.receive()

    async def send_message(self, text: str) -> None:
        await self.reading.wait()
        self.sent.append(json.loads(text))

    async def ping(self) -> None:
        await trio.sleep_forever()

    async def aclose(self, code: int = 1000, reason: str | None = None) -> None:
        self.closed_with = (code, reason, trio.current_time())
        await trio.lowlevel.checkpoint()


class _Front:
    """Just what a :class:`Connection` needs of its front door."""

    def __init__(self, config: FrontDoorConfig) -> None:
        self.config = config
        self.eventlog = None
        self.admitting = True
        self.head_hint = 0
        self.dispatched: list[str] = []

    def saw(self, seq: int) -> None:
        self.head_hint = max(self.head_hint, seq)

    async def dispatch(self, conn: Connection, text: str | bytes) -> messages.Message:
        self.dispatched.append(str(text))
        await trio.lowlevel.checkpoint()
        return messages.OkReply(request_id=str(text))


async def test_an_answer_that_finds_the_queue_full_drops_the_client_after_push_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = FrontDoorConfig(send_queue=1, push_timeout=1.0, send_timeout=100.0,
                             ping_interval=300.0)  # fmt: skip
    front, ws = _Front(config), _StalledWs()
    conn = Connection(front, ws, 1, peer="127.0.0.1:1")  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run)
        for text in ("a", "b", "c"):  # a: being sent; b: queued; c: waits for room
            await ws.inbox.send(text)
        await trio.sleep(0.999)
        assert (conn.statistics().resyncs, front.dispatched) == (0, ["a", "b", "c"])
        await trio.sleep(0.002)
        stats = conn.statistics()
        assert (stats.resyncs, stats.dropped) == (1, 1)
        await ws.inbox.send("d")  # dropped: never served, its answer could not be sent
        await trio.testing.wait_all_tasks_blocked()
        assert front.dispatched == ["a", "b", "c"]
        ws.reading.set()  # the client reads again at t=1.001
    assert [m["type"] for m in ws.sent] == ["ok", "resync_required"]
    assert ws.sent[1] == {"type": "resync_required", "head": 0, "cursor": 0}
    assert ws.closed_with == (4000, "resync required; cursor=0", pytest.approx(1.001))
