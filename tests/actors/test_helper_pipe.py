"""The pipe's reader: one long-lived task per helper that waits for its frames and is the
timer of the job's wait, so a job needs no cancel scope of its own (design §3.6).

The reader runs on two plain pipes (the test plays the helper), and nothing is in flight
when the clock jumps: every write happens before the task that writes blocks, so the
``autojump_clock`` tests assert exact virtual times (contributing §F.3).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from actors._helpers._process._pipe import INBOX, HelperPipe, PipeGone, ReceiveStopped
from protocol.envelope import encode_fields, new_session

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

_SESSION = new_session()


def _frame(generation: int) -> bytes:
    return encode_fields(
        kind="reply",
        session=_SESSION,
        generation=generation,
        operation="echo",
        status="ok",
        payload=generation,
        max_size=4096,
    )


class Pipes:
    """A :class:`HelperPipe` over two plain pipes, its reader running in a nursery."""

    def __init__(self) -> None:
        self.job_read, job_write = os.pipe()
        reply_read, self.reply_write = os.pipe()
        self.streams = (trio.lowlevel.FdStream(job_write), trio.lowlevel.FdStream(reply_read))
        self.pipe = HelperPipe(*self.streams, max_reply=4096)

    def write(self, data: bytes) -> None:
        os.write(self.reply_write, data)

    def close(self) -> None:
        os.close(self.job_read)
        if self.reply_write >= 0:
            os.close(self.reply_write)
        for stream in self.streams:
            stream.close()


@pytest.fixture
async def pipes(nursery: trio.Nursery) -> AsyncIterator[Pipes]:
    pair = Pipes()
    try:
        pair.pipe.start_reader(nursery)
        yield pair
    finally:
        pair.close()


async def test_a_wait_ends_exactly_at_its_until(
    pipes: Pipes, autojump_clock: trio.testing.MockClock
) -> None:
    start = trio.current_time()
    with pytest.raises(ReceiveStopped) as info:
        await pipes.pipe.receive(known_empty=True, until=start + 5)
    assert info.value.expired
    assert trio.current_time() == start + 5


async def test_a_later_until_rearms_the_timer_where_it_wakes(
    pipes: Pipes, autojump_clock: trio.testing.MockClock
) -> None:
    # The first wait arms the reader for +5 and ends early with a frame; the second
    # wait's until (+1 +5) is later, so the timer is not moved: it wakes at +5, finds
    # the wait not due and re-arms for +6, where the wait ends, exactly.
    start = trio.current_time()

    async def answer() -> None:
        await trio.sleep(1)
        pipes.write(_frame(1))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer)
        assert await pipes.pipe.receive(until=start + 5) == _frame(1)[4:]
    assert trio.current_time() == start + 1
    with pytest.raises(ReceiveStopped):
        await pipes.pipe.receive(until=start + 6)
    assert trio.current_time() == start + 6


async def test_an_earlier_until_moves_the_timer_forward(
    pipes: Pipes, autojump_clock: trio.testing.MockClock
) -> None:
    start = trio.current_time()
    with pytest.raises(ReceiveStopped):
        await pipes.pipe.receive(until=start + 30)
    with pytest.raises(ReceiveStopped):
        await pipes.pipe.receive(until=start + 31)  # armed for +60 meanwhile: moved
    assert trio.current_time() == start + 31


async def test_until_moved_later_while_parked_is_honoured(
    pipes: Pipes, autojump_clock: trio.testing.MockClock
) -> None:
    # A stall deadline pushed back while the job waits (design §3.12).
    start = trio.current_time()

    async def push() -> None:
        await trio.sleep(2)
        pipes.pipe.until = start + 9

    async with trio.open_nursery() as nursery:
        nursery.start_soon(push)
        with pytest.raises(ReceiveStopped):
            await pipes.pipe.receive(until=start + 3)
    assert trio.current_time() == start + 9


async def test_interrupt_wakes_the_parked_receive_at_once(
    pipes: Pipes, autojump_clock: trio.testing.MockClock
) -> None:
    start = trio.current_time()
    assert not pipes.pipe.interrupt()  # nobody parked

    async def interrupt() -> None:
        await trio.sleep(1)
        assert pipes.pipe.interrupt()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt)
        with pytest.raises(ReceiveStopped) as info:
            await pipes.pipe.receive(until=start + 30)
    assert not info.value.expired
    assert trio.current_time() == start + 1


async def test_a_cancelled_wait_loses_no_frame_and_the_next_gets_it(
    pipes: Pipes, autojump_clock: trio.testing.MockClock
) -> None:
    with trio.move_on_after(1) as scope:
        await pipes.pipe.receive()
    assert scope.cancelled_caught
    pipes.write(_frame(7))
    assert await pipes.pipe.receive() == _frame(7)[4:]


async def test_a_stale_frame_waits_for_the_next_receive_in_order(pipes: Pipes) -> None:
    # A frame that comes when nobody waits (a late reply) is kept for the next receive,
    # which fences it (the job path): it is not lost and does not overtake a later one.
    pipes.write(_frame(1))
    await trio.testing.wait_all_tasks_blocked()
    pipes.write(_frame(2))
    assert await pipes.pipe.receive() == _frame(1)[4:]
    assert await pipes.pipe.receive() == _frame(2)[4:]


async def test_frames_nobody_takes_are_bounded(pipes: Pipes) -> None:
    # The reader stops reading once INBOX frames wait for nobody; the rest stays in the
    # pipe (the helper blocks), and all come out in order once taken.
    count = 3 * INBOX
    for generation in range(1, count + 1):
        pipes.write(_frame(generation))
        await trio.testing.wait_all_tasks_blocked()
    held: Any = pipes.pipe._frames  # internals: what the reader holds
    assert len(held) == INBOX
    got = [await pipes.pipe.receive() for _ in range(count)]
    assert got == [_frame(generation)[4:] for generation in range(1, count + 1)]


async def test_end_of_file_wakes_the_parked_receive_and_every_later_one(
    pipes: Pipes,
) -> None:
    async def close_soon() -> None:
        await trio.testing.wait_all_tasks_blocked()
        os.close(pipes.reply_write)
        pipes.reply_write = -1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(close_soon)
        with pytest.raises(PipeGone):
            await pipes.pipe.receive()
    with pytest.raises(PipeGone):
        await pipes.pipe.receive()


async def test_a_frame_over_the_limit_ends_the_reader_with_the_error(pipes: Pipes) -> None:
    from protocol.errors import FrameTooLarge

    pipes.write((4097).to_bytes(4, "big") + b"x" * 4097)
    with pytest.raises(FrameTooLarge):
        await pipes.pipe.receive()
    with pytest.raises(FrameTooLarge):
        await pipes.pipe.receive()
