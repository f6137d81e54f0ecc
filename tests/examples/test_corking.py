"""Corked writes (:mod:`examples.web.corking`): held frames leave in one write, in order."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from examples.web.corking import CorkableStream


class RecordingStream(trio.abc.Stream):
    """A fake stream that keeps each ``send_all`` as one write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()
        self.writes.append(bytes(data))

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        return b"in"

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        self.closed = True


async def test_writes_in_a_corked_block_leave_as_one_write_at_its_end():
    raw = RecordingStream()
    stream = CorkableStream(raw)
    await stream.send_all(b"a")
    async with stream.corked():
        for part in (b"b", b"c", b"d"):
            with trio.testing.assert_checkpoints():
                await stream.send_all(part)
        assert raw.writes == [b"a"]  # held until the block ends
    assert raw.writes == [b"a", b"bcd"]
    assert stream.writes == 2
    async with stream.corked():
        pass  # nothing held: no empty write
    assert stream.writes == 2


async def test_another_tasks_write_goes_at_once_after_what_is_held():
    raw = RecordingStream()
    stream = CorkableStream(raw)
    async with stream.corked():
        await stream.send_all(b"1")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream.send_all, b"pong")  # e.g. trio-websocket's reader
        await stream.send_all(b"2")
    # Order of the calls kept; the other task's frame was not held back.
    assert raw.writes == [b"1pong", b"2"]


async def test_held_frames_are_written_when_the_block_raises():
    raw = RecordingStream()
    stream = CorkableStream(raw)

    async def fail_in_block() -> None:
        async with stream.corked():
            await stream.send_all(b"x")
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await fail_in_block()
    assert raw.writes == [b"x"]


async def test_corked_is_not_reentrant_and_reads_and_close_pass_through():
    raw = RecordingStream()
    stream = CorkableStream(raw)
    async with stream.corked():
        with pytest.raises(RuntimeError, match="not reentrant"):
            async with stream.corked():
                pass
    assert await stream.receive_some(10) == b"in"
    await stream.wait_send_all_might_not_block()
    await stream.aclose()
    assert raw.closed
