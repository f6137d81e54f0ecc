"""Shared pieces of the websocket front-door tests: a JSON client and process checks.

Front-door tests talk to a real server over a real websocket (trio-websocket), on the
real clock with short timeouts (contributing §F.3): every wait is under ``fail_after``.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio
from process_support import assert_no_children as assert_no_children
from process_support import children as children
from process_support import is_zygote as is_zygote
from process_support import pid_gone as pid_gone
from trio_websocket import wrap_client_stream

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from trio_websocket import WebSocketConnection

#: Seconds any single expected message may take to arrive (generous: shared machine).
TIMEOUT = 10.0
#: One line of an example server's log (``examples.web.cli.LOG_FORMAT``).
_LOG_LINE = re.compile(r"^ *(\d+) ms (\S+): (.*)$", re.MULTILINE)


def logged(log: str, logger: str, pattern: str) -> list[float]:
    """When an example server logged each message of ``logger`` that ``pattern`` matches
    (``re.match``: from the message's start).

    Times are the server's own clock: seconds since its logging began (the log's
    ``relativeCreated``), so they leave out what the test process measures besides (the
    interpreter's start and exit, the test's own scheduling), which a loaded machine
    stretches far more than the steps the server times itself.
    """
    return [
        int(match[1]) / 1000
        for match in _LOG_LINE.finditer(log)
        if match[2] == logger and re.match(pattern, match[3])
    ]


class Client:
    """A test client: sends requests, matches answers by ``request_id``, keeps pushes.

    Pushed messages (``event``, ``resync_required``, extension pushes) that arrive while
    waiting for an answer are kept, in order, in :attr:`pushed`.
    """

    def __init__(self, ws: WebSocketConnection, prefix: str = "r") -> None:
        self.ws = ws
        self.pushed: list[dict[str, Any]] = []
        self._ids = (f"{prefix}{n}" for n in itertools.count(1))

    async def send(self, message: dict[str, Any] | str) -> None:
        await self.ws.send_message(message if isinstance(message, str) else json.dumps(message))

    async def receive(self) -> dict[str, Any]:
        with trio.fail_after(TIMEOUT):
            return json.loads(await self.ws.get_message())

    async def request(self, type: str, **fields: Any) -> dict[str, Any]:
        """Send a request with a fresh ``request_id`` and return its answer."""
        request_id = fields.pop("request_id", None) or next(self._ids)
        await self.send({"type": type, "request_id": request_id, **fields})
        return await self.answer(request_id)

    async def answer(self, request_id: str | None) -> dict[str, Any]:
        """The next message answering ``request_id``; pushes meanwhile go to ``pushed``.

        With ``request_id`` None, the answer is an ``error`` without an id (a request the
        server could not read): a push such as ``run_list`` also has a null id.
        """
        while True:
            message = await self.receive()
            answers = "request_id" in message and message["request_id"] == request_id
            if answers and (request_id is not None or message.get("type") == "error"):
                return message
            self.pushed.append(message)

    async def wait_state(self, run_id: int, *states: str) -> dict[str, Any]:
        """Poll ``status`` until the run is in one of ``states``; return that answer."""
        with trio.fail_after(TIMEOUT):
            # The run's state lives in the server: polling it over the wire is the test.
            while (status := await self.request("status", run_id=run_id))["state"] not in states:  # noqa: ASYNC110
                await trio.sleep(0.01)
        return status

    async def read_until_closed(self) -> None:
        """Read (keeping pushes) until the server closes; ConnectionClosed propagates."""
        while True:
            self.pushed.append(await self.receive())

    async def next_push(self) -> dict[str, Any]:
        """The oldest kept push, or the next message (which must be a push)."""
        if self.pushed:
            return self.pushed.pop(0)
        message = await self.receive()
        assert "request_id" not in message or message["type"] in ("run_list",), message
        return message

    async def events_until(self, run_id: int, kinds: set[str]) -> list[dict[str, Any]]:
        """Pushed events up to the first of ``run_id`` whose kind is in ``kinds``."""
        seen = []
        while True:
            message = await self.next_push()
            assert message["type"] == "event", message
            seen.append(message)
            if message["run_id"] == run_id and message["kind"] in kinds:
                return seen


@asynccontextmanager
async def open_client(
    port: int,
    resource: str = "/",
    *,
    headers: list[tuple[bytes, bytes]] | None = None,
    receive_buffer: int | None = None,
    message_queue_size: int = 4,
    prefix: str = "r",
) -> AsyncIterator[Client]:
    """Connect a :class:`Client` to ``ws://127.0.0.1:port`` + ``resource``.

    The handshake's ``Host`` is ``127.0.0.1:port``, as a browser or
    ``open_websocket_url`` sends it (the front door checks it, design §7.3).
    The test owns the TCP stream and closes it on exit: trio-websocket's client leaves
    its socket open when the *server* closed the connection (a ResourceWarning, an error
    under ``filterwarnings = error``). ``receive_buffer`` sets ``SO_RCVBUF`` in bytes.
    """
    sock = trio.socket.socket()
    stream = None
    try:
        if receive_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        with trio.fail_after(TIMEOUT):
            await sock.connect(("127.0.0.1", port))
        stream = trio.SocketStream(sock)
        async with trio.open_nursery() as nursery:
            with trio.fail_after(TIMEOUT):
                ws = await wrap_client_stream(
                    nursery, stream, f"127.0.0.1:{port}", resource, extra_headers=headers,
                    message_queue_size=message_queue_size,
                )  # fmt: skip
            try:
                yield Client(ws, prefix)
            finally:
                with trio.move_on_after(TIMEOUT, shield=True):
                    await ws.aclose()
                nursery.cancel_scope.cancel()
    finally:
        if stream is not None:
            await stream.aclose()
        else:
            sock.close()


#: TCP states of /proc/net/tcp by their hex code (include/net/tcp_states.h).
TCP_STATES = {
    "01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
    "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
    "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING",
}  # fmt: skip


def sockets_to(port: int) -> list[str]:
    """The states of this network namespace's IPv4 TCP sockets connected to
    ``127.0.0.1:port``: the client sides of a local server's connections.

    A socket its owner has closed is gone or in ``TIME_WAIT``/``FIN_WAIT*``/``LAST_ACK``;
    one the server closed but its owner never did stays in ``CLOSE_WAIT``.
    """
    peer = f"0100007F:{port:04X}"
    with open("/proc/self/net/tcp", encoding="ascii") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return [TCP_STATES.get(row[3], row[3]) for row in rows if row[2] == peer]


async def first_line(stream: trio.abc.ReceiveStream) -> bytes:
    """The first line a server process prints (e.g. ``listening on ...``), with its newline.

    Read one byte at a time, so nothing after the line is taken from the pipe.
    """
    line = b""
    with trio.fail_after(TIMEOUT):
        while not line.endswith(b"\n"):
            chunk = await stream.receive_some(1)
            assert chunk, f"the server exited before printing a line: {line!r}"
            line += chunk
    return line


# -- a websocket client written by hand (frames as bytes) ------------------------------

#: An opening handshake written by hand: the test's "client" then goes silent.
HANDSHAKE = (
    "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


async def raw_handshake(stream: trio.SocketStream) -> bytes:
    """Send :data:`HANDSHAKE`; return what came back up to the end of the 101 head."""
    port = stream.socket.getpeername()[1]
    await stream.send_all(HANDSHAKE.format(port=port).encode())
    received = b""
    with trio.fail_after(5):
        while b"\r\n\r\n" not in received:
            received += await stream.receive_some(4096)
    assert received.startswith(b"HTTP/1.1 101")
    return received


def client_frame(text: str | bytes, opcode: int = 0x1) -> bytes:
    """One masked frame (text by default), as a client must send it (RFC 6455 §5.3)."""
    data = text.encode() if isinstance(text, str) else text
    assert len(data) < 126
    mask = b"\x01\x02\x03\x04"
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    return bytes([0x80 | opcode, 0x80 | len(data)]) + mask + masked


def parse_frames(data: bytes) -> tuple[list[tuple[int, bytes]], bytes]:
    """Whole server frames ``(opcode, payload)`` and the bytes of an incomplete last one."""
    frames = []
    while len(data) >= 2:
        size, head = data[1] & 0x7F, 2
        if size == 126:
            size, head = int.from_bytes(data[2:4], "big"), 4
        elif size == 127:
            size, head = int.from_bytes(data[2:10], "big"), 10
        if len(data) < head + size:
            break
        frames.append((data[0] & 0x0F, data[head : head + size]))
        data = data[head + size :]
    return frames, data
