"""Corking: several websocket messages leave in one write to the socket (design §7.1).

Every ``send_all`` to a socket is a system call and, on loopback, a wake-up of the
reader: a burst of small messages (the ``image_ready`` notices of a client that just
asked ``list_runs``, a run's lifecycle events) costs one of each per message. The
websocket protocol lets several frames share one write, so a connection's writer takes
every message that is ready at once and sends them *corked*, as Linux's ``TCP_CORK`` or
Node's ``writable.cork()`` do: :class:`CorkableStream` sits between trio-websocket and
the socket; inside :meth:`CorkableStream.corked`, the frames trio-websocket writes for
the corking task are kept, and they go out in one ``send_all`` when the block ends.

Order is kept: bytes leave in the order their ``send_all`` calls came, whoever made
them. A frame of another task (trio-websocket's reader answering a ping or a close)
is never held: it goes out at once, after the held frames. Each ``send_all`` of
trio-websocket carries whole frames, so a write never splits one.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["CorkableStream"]


class CorkableStream(trio.abc.Stream):
    """``stream``, whose writes one task may hold back and send as one (see the module doc).

    Args:
        stream: The connection's stream (what trio-websocket would write to).

    Attributes:
        writes: ``send_all`` calls made on ``stream`` so far.
    """

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.writes = 0
        self._held: list[bytes | bytearray | memoryview] = []
        self._corker: trio.lowlevel.Task | None = None
        # One write to the stream at a time: trio-websocket's own lock does not cover
        # the write that ends a corked block.
        self._lock = trio.Lock()

    @asynccontextmanager
    async def corked(self) -> AsyncIterator[None]:
        """Hold this task's writes until the block ends, then send them in one write.

        The entry is no checkpoint; the exit is one (the write, which also happens when
        the block raises, so no frame is lost). Not reentrant.

        Raises:
            RuntimeError: a block is already open.
            trio.BrokenResourceError, trio.ClosedResourceError: as the stream's
                ``send_all`` (at the exit).
        """
        if self._corker is not None:
            raise RuntimeError("corked() is not reentrant")
        self._corker = trio.lowlevel.current_task()
        try:
            yield
        finally:
            self._corker = None
            await self._write(b"")

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Hold ``data`` inside the caller's corked block; else write it after anything
        held (a checkpoint either way)."""
        if self._corker is not None and self._corker is trio.lowlevel.current_task():
            self._held.append(data)
            await trio.lowlevel.checkpoint()
            return
        await self._write(data)

    async def _write(self, data: bytes | bytearray | memoryview) -> None:
        async with self._lock:
            held, self._held = self._held, []
            if data:
                held.append(data)
            if not held:
                return
            self.writes += 1
            await self.stream.send_all(held[0] if len(held) == 1 else b"".join(held))

    async def wait_send_all_might_not_block(self) -> None:
        """As the stream's."""
        await self.stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        """As the stream's."""
        return await self.stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        """Close the stream (anything still held is dropped: the connection is gone)."""
        self._held = []
        await self.stream.aclose()
