"""A reply already there when the job is written: the fast path of ``run_job`` (§3.4-3.6).

``HelperProcess.run_job`` writes the job frame and, if the whole frame went out, looks for
the reply at once; a helper on the same CPU may have answered during the write. Found: no
deadline, one shielded schedule point. Not found: a wait, which the pipe's reader ends at
the deadline (the job has no cancel scope of its own). These tests make the fast path
deterministic instead of hoping for CPU placement: the job frame's write is wrapped
(:class:`Race`) so that it returns only once the helper's answer (its exact bytes,
computed with the same encoder) is in the reply pipe. The slow path is forced on the same
bytes by skipping the look (as if the pipe had been empty a moment earlier), so each
behaviour is checked on both paths with the same helper doing the same.

Real subprocesses on the real clock with short timeouts (contributing §F.3); every test checks
that no child and no zombie is left.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import select
import struct
import sys
import termios
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing
from helper_support import FAST, FRAME_READER, assert_no_children, spec, wait_gone

from actors import (
    ForcedTermination,
    FrameTooLarge,
    HelperExited,
    HelperSpec,
    HelperTimeouts,
    JobCancelled,
    JobFailed,
    ProtocolViolation,
    ReplyTimeout,
    open_helper_pool,
)
from actors._helpers._process import HelperProcess
from actors._helpers._process._pipe import INBOX, HelperPipe, PipeGone, ReceiveStopped
from protocol.envelope import encode_fields, new_session
from protocol.framing import MAX_FRAME_LIMIT

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
    from pathlib import Path

JOB_KIND = 3  # the kind byte of a job frame (protocol._envelope_wire.KIND_CODES)


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


# --- the sizes of what a helper answers -----------------------------------------------

_SIZER = new_session()  # any session: every session takes 16 bytes of the head


def frame_size(kind: str, operation: str, **fields: Any) -> int:
    """Bytes of one frame as the helper encodes it (length prefix included)."""
    frame = encode_fields(
        kind=kind,
        session=_SIZER,
        generation=1,
        operation=operation,
        max_size=MAX_FRAME_LIMIT,
        **fields,
    )
    return len(frame)


def reply_size(operation: str, payload: Any = None, **fields: Any) -> int:
    fields.setdefault("status", "ok")
    return frame_size("reply", operation, payload=payload, **fields)


def progress_size(operation: str, fraction: float, note: str | None) -> int:
    payload = {"fraction": float(fraction), "note": note}
    return frame_size("progress", operation, payload=payload)


def pipe_capacity() -> int:
    """Bytes a fresh pipe holds (64 KiB with 4 KiB pages); the helper's pipes are such."""
    read_end, write_end = os.pipe()
    try:
        return fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ)
    finally:
        os.close(read_end)
        os.close(write_end)


# --- the race, made deterministic ------------------------------------------------------


def _buffered(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def _wait_buffered(fd: int, size: int, within: float = 5.0) -> None:
    """Block (bounded, real clock) until the pipe ``fd`` holds ``size`` unread bytes.

    It blocks the event loop on purpose: this stands for the time ``os.write`` of the
    job frame took while a helper on the same CPU ran and answered. An edge-triggered
    epoll of its own (trio's registration of ``fd`` is untouched) wakes it at each
    write the helper makes: no polling.
    """
    edges = select.epoll()
    try:
        edges.register(fd, select.EPOLLIN | select.EPOLLET)
        give_up = time.monotonic() + within
        while _buffered(fd) < size:
            left = give_up - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the helper did not write {size} bytes within {within} s")
            edges.poll(left)
    finally:
        edges.close()


class Race:
    """Controls the moment between writing a job frame and looking for its reply.

    ``mode`` ``"fast"``: the look happens as in production. ``"slow"``: it is skipped,
    as if the pipe had been empty, so ``run_job`` opens its deadline scope and waits.
    :meth:`arm` makes the next job frame's write return only once the helper has
    written ``size`` bytes, then calls ``then``. ``looks`` records what each look found:
    ``"reply"``, ``"none"``, ``"skipped"`` or the name of the exception it raised;
    ``writes`` records ``(written, frame length)`` of each job frame.
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.looks: list[str] = []
        self.writes: list[tuple[int, int]] = []
        self.after_miss: Callable[[int], None] | None = None
        #: Awaited (shielded) at the fast path's schedule point, once: stands for the
        #: other tasks that run there (the job's own task is suspended).
        self.at_schedule_point: Callable[[HelperProcess], Awaitable[None]] | None = None
        self._hook: tuple[trio.lowlevel.Task, HelperProcess] | None = None
        self._armed: deque[tuple[int, Callable[[], None] | None]] = deque()

    def arm(self, size: int, then: Callable[[], None] | None = None) -> None:
        self._armed.append((size, then))

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_write = HelperPipe.write_nowait
        real_look = HelperProcess._reply_nowait

        def write_nowait(pipe: HelperPipe, frame: bytes) -> int:
            written = real_write(pipe, frame)
            if frame[6] == JOB_KIND:
                self.writes.append((written, len(frame)))
                if self._armed:
                    size, then = self._armed.popleft()
                    _wait_buffered(pipe._rfd, size)
                    if then is not None:
                        then()
            return written

        def reply_nowait(
            helper: HelperProcess, generation: int, operation: str, on_progress: Any
        ) -> Any:
            if self.mode == "slow":
                self.looks.append("skipped")
                return None
            try:
                reply = real_look(helper, generation, operation, on_progress)
            except Exception as exc:
                self.looks.append(type(exc).__name__)
                raise
            self.looks.append("none" if reply is None else "reply")
            if reply is None and self.after_miss is not None:
                self.after_miss(generation)
            if reply is not None and self.at_schedule_point is not None:
                # run_job's next await is its schedule point (nothing in between).
                self._hook = (trio.lowlevel.current_task(), helper)
            return reply

        real_checkpoint = trio.lowlevel.cancel_shielded_checkpoint

        async def cancel_shielded_checkpoint() -> None:
            hook, self._hook = self._hook, None
            if hook is not None and hook[0] is trio.lowlevel.current_task():
                assert self.at_schedule_point is not None
                with trio.CancelScope(shield=True):
                    await self.at_schedule_point(hook[1])
            else:
                self._hook = hook  # another task's checkpoint (trio uses it too)
            await real_checkpoint()

        monkeypatch.setattr(HelperPipe, "write_nowait", write_nowait)
        monkeypatch.setattr(HelperProcess, "_reply_nowait", reply_nowait)
        monkeypatch.setattr(trio.lowlevel, "cancel_shielded_checkpoint", cancel_shielded_checkpoint)

    @property
    def found(self) -> str:
        """What a look finds when the answer is already there, in this mode."""
        return "reply" if self.mode == "fast" else "skipped"


@pytest.fixture
def race(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Race:
    race = Race(getattr(request, "param", "fast"))
    race.install(monkeypatch)
    return race


both_paths = pytest.mark.parametrize("race", ["fast", "slow"], indirect=True)


# --- a scripted raw-argv helper --------------------------------------------------------

#: A stdlib-only helper (``-I -S``) that answers each job as its plan says, building
#: frames by hand from the job frame's head (see ``protocol._envelope_wire``). argv:
#: the path of the test's :func:`go` FIFO and a JSON plan, one step per job (then
#: ``echo``):
#:
#: * ``echo``: reply ``ok`` with the job's payload (the job frame, two head bytes set);
#: * ``twice``: that reply twice, in one write;
#: * ``exit``: that reply, then exit with status 5 once the test releases it (one byte
#:   on the FIFO; end of file, the test gone, releases it too);
#: * ``exit_now``: that reply, then exit with status 5 at once;
#: * ``split``: a progress frame (0.5, "half") and the first half of the reply in one
#:   write; the second half once the test releases it.
#:
#: A plan starting with ``deaf`` (or ``deaf_ignore_sigterm``) answers *ready*, then never
#: reads its stdin again (it waits for signals only).
SCRIPTED = r"""
import json, os, signal, struct, sys
go, plan = sys.argv[1], json.loads(sys.argv[2])
HEAD = struct.Struct(">BBBBQ16sHI")
"""
SCRIPTED += FRAME_READER
SCRIPTED += r"""
def answer(request, kind, status, payload=None):
    magic, version, _, _, generation, session, op_size, size = HEAD.unpack_from(request)
    operation = request[34 : 34 + op_size]
    data = request[34 + op_size : 34 + op_size + size]
    if payload is not None:
        data = json.dumps(payload, separators=(",", ":")).encode()
    body = HEAD.pack(magic, version, kind, status, generation, session, op_size, len(data))
    body += operation + data
    return len(body).to_bytes(4, "big") + body
def released():
    # The test holds the FIFO open for writing, so this open never blocks; the read
    # blocks until the test writes a byte (or closes: end of file).
    fd = os.open(go, os.O_RDONLY)
    os.read(fd, 1)
    os.close(fd)
os.write(1, answer(next_frame(), 2, 1, {"pid": os.getpid()}))
if plan and plan[0].startswith("deaf"):
    if plan[0] == "deaf_ignore_sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        signal.pause()
jobs = 0
while True:
    request = next_frame()
    if request[2] == 7:
        sys.exit(0)
    if request[2] != 3:
        continue
    jobs += 1
    step = plan[jobs - 1] if jobs <= len(plan) else "echo"
    reply = answer(request, 6, 1)
    if step == "echo":
        os.write(1, reply)
    elif step == "twice":
        os.write(1, reply + reply)
    elif step == "exit":
        os.write(1, reply)
        released()
        os._exit(5)
    elif step == "exit_now":
        os.write(1, reply)
        os._exit(5)
    elif step == "split":
        cut = len(reply) // 2
        os.write(1, answer(request, 5, 0, {"fraction": 0.5, "note": "half"}) + reply[:cut])
        released()
        os.write(1, reply[cut:])
"""


def scripted(go: Go, *plan: str, **fields: Any) -> HelperSpec:
    argv = [sys.executable, "-I", "-S", "-c", SCRIPTED, str(go.path), json.dumps(plan)]
    return HelperSpec(argv=argv, name="scripted", **fields)


class Go:
    """A FIFO through which the test lets a :data:`SCRIPTED` helper go on, one step at a
    time. The test holds it open for reading and writing (on Linux that never blocks),
    so the helper's open never blocks and a release is never lost, even one made before
    the helper waits."""

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self._fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)

    def release(self) -> None:
        os.write(self._fd, b"g")

    def close(self) -> None:
        os.close(self._fd)


@pytest.fixture
def go(tmp_path: Path) -> Iterator[Go]:
    fifo = Go(tmp_path / "go")
    yield fifo
    fifo.close()


# --- HelperPipe alone, on plain pipes ---------------------------------------------------


def _frame(generation: int) -> bytes:
    return encode_fields(
        kind="reply",
        session=_SIZER,
        generation=generation,
        operation="echo",
        status="ok",
        payload=generation,
        max_size=4096,
    )


class PlainPipes:
    """A :class:`HelperPipe` over two plain pipes; the test plays the helper."""

    def __init__(self) -> None:
        self.job_read, job_write = os.pipe()
        reply_read, self.reply_write = os.pipe()
        # The streams own the parent's ends (HelperPipe keeps only the reply fd's number).
        self.streams = (trio.lowlevel.FdStream(job_write), trio.lowlevel.FdStream(reply_read))
        self.pipe = HelperPipe(*self.streams, max_reply=4096)

    def close(self) -> None:
        os.close(self.job_read)
        if self.reply_write >= 0:  # not closed by the test
            os.close(self.reply_write)
        for stream in self.streams:
            stream.close()


@pytest.fixture
async def plain() -> Any:
    pipes = PlainPipes()
    try:
        yield pipes
    finally:
        pipes.close()


async def test_a_receive_cancelled_after_its_read_puts_the_frame_back(plain):
    # Two frames in one read; the first is read, then the checkpoint is cancelled: it
    # must come back first, and the second after it.
    os.write(plain.reply_write, _frame(1) + _frame(2))
    with trio.CancelScope() as scope:
        scope.cancel()
        await plain.pipe.receive()
    assert scope.cancelled_caught
    assert await plain.pipe.receive() == _frame(1)[4:]
    assert await plain.pipe.receive() == _frame(2)[4:]
    assert plain.pipe.receive_nowait() is None


async def test_a_receive_cancelled_while_waiting_loses_nothing(plain):
    with trio.move_on_after(0.01) as scope:
        await plain.pipe.receive(known_empty=True)
    assert scope.cancelled_caught
    frame = _frame(3)
    os.write(plain.reply_write, frame[:10])
    assert plain.pipe.receive_nowait() is None  # half a frame: kept, not returned
    os.write(plain.reply_write, frame[10:])
    assert await plain.pipe.receive(known_empty=True) == frame[4:]


async def test_a_partial_write_is_marked_until_send_rest_finishes(plain):
    capacity = pipe_capacity()
    frame = b"y" * (2 * capacity)
    assert plain.pipe.write_nowait(frame) == capacity
    assert plain.pipe.send_broken
    received = bytearray(os.read(plain.job_read, capacity))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(plain.pipe.send_rest, frame, capacity)
        while len(received) < len(frame):
            await trio.lowlevel.wait_readable(plain.job_read)
            received += os.read(plain.job_read, capacity)
    assert bytes(received) == frame
    assert not plain.pipe.send_broken


async def test_frames_split_or_joined_across_reads_come_out_whole_and_in_order(plain):
    # A read that is exactly one frame is taken without the decoder; one that ends
    # inside a frame hands the rest to it, until it holds nothing again.
    first, second, third = _frame(1), _frame(2), _frame(3)
    os.write(plain.reply_write, first)
    assert plain.pipe.receive_nowait() == first[4:]
    os.write(plain.reply_write, second[:3])  # not even a whole length prefix
    assert plain.pipe.receive_nowait() is None
    os.write(plain.reply_write, second[3:] + third[:20])
    assert plain.pipe.receive_nowait() == second[4:]
    assert plain.pipe.receive_nowait() is None  # the start of the third, kept
    os.write(plain.reply_write, third[20:])
    assert plain.pipe.receive_nowait() == third[4:]
    os.write(plain.reply_write, first)  # whole again: the decoder holds nothing
    assert plain.pipe.receive_nowait() == first[4:]
    assert plain.pipe.receive_nowait() is None


async def test_a_frame_over_the_reply_limit_is_refused_and_so_is_everything_after(plain):
    at_limit = struct.pack(">I", 4096) + b"x" * 4096
    os.write(plain.reply_write, at_limit)
    assert plain.pipe.receive_nowait() == at_limit[4:]
    os.write(plain.reply_write, struct.pack(">I", 4097) + b"x" * 4097)
    with pytest.raises(FrameTooLarge):
        plain.pipe.receive_nowait()
    # The stream cannot be resynchronised: a good frame read whole is refused too.
    os.write(plain.reply_write, _frame(4))
    with pytest.raises(FrameTooLarge):
        plain.pipe.receive_nowait()


# --- the pipe's reader: the timer of the job's wait (no cancel scope per job) -----------
# Nothing is in flight when the clock jumps (every write happens before its task
# blocks), so the autojump_clock tests assert exact virtual times.


@pytest.fixture
async def pipes(nursery: trio.Nursery) -> AsyncIterator[PlainPipes]:
    pair = PlainPipes()
    try:
        pair.pipe.start_reader(nursery)
        yield pair
    finally:
        pair.close()


async def test_a_wait_ends_exactly_at_its_until(
    pipes: PlainPipes, autojump_clock: trio.testing.MockClock
) -> None:
    start = trio.current_time()
    with pytest.raises(ReceiveStopped) as info:
        await pipes.pipe.receive(known_empty=True, until=start + 5)
    assert info.value.expired
    assert trio.current_time() == start + 5


async def test_a_later_until_rearms_the_timer_where_it_wakes(
    pipes: PlainPipes, autojump_clock: trio.testing.MockClock
) -> None:
    # The first wait arms the reader for +5 and ends early with a frame; the second
    # wait's until (+1 +5) is later, so the timer is not moved: it wakes at +5, finds
    # the wait not due and re-arms for +6, where the wait ends, exactly.
    start = trio.current_time()

    async def answer() -> None:
        await trio.sleep(1)
        os.write(pipes.reply_write, _frame(1))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer)
        assert await pipes.pipe.receive(until=start + 5) == _frame(1)[4:]
    assert trio.current_time() == start + 1
    with pytest.raises(ReceiveStopped):
        await pipes.pipe.receive(until=start + 6)
    assert trio.current_time() == start + 6


async def test_an_earlier_until_moves_the_timer_forward(
    pipes: PlainPipes, autojump_clock: trio.testing.MockClock
) -> None:
    start = trio.current_time()
    with pytest.raises(ReceiveStopped):
        await pipes.pipe.receive(until=start + 30)
    with pytest.raises(ReceiveStopped):
        await pipes.pipe.receive(until=start + 31)  # armed for +60 meanwhile: moved
    assert trio.current_time() == start + 31


async def test_until_moved_later_while_parked_is_honoured(
    pipes: PlainPipes, autojump_clock: trio.testing.MockClock
) -> None:
    # A stall deadline pushed back while the job waits (design §3.12).
    start = trio.current_time()

    async def push() -> None:
        await trio.sleep(2)
        pipes.pipe.extend(start + 9)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(push)
        with pytest.raises(ReceiveStopped):
            await pipes.pipe.receive(until=start + 3)
    assert trio.current_time() == start + 9


async def test_interrupt_wakes_the_parked_receive_at_once(
    pipes: PlainPipes, autojump_clock: trio.testing.MockClock
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
    pipes: PlainPipes, autojump_clock: trio.testing.MockClock
) -> None:
    with trio.move_on_after(1) as scope:
        await pipes.pipe.receive()
    assert scope.cancelled_caught
    os.write(pipes.reply_write, _frame(7))
    assert await pipes.pipe.receive() == _frame(7)[4:]


async def test_a_stale_frame_waits_for_the_next_receive_in_order(pipes: PlainPipes) -> None:
    # A frame that comes when nobody waits (a late reply) is kept for the next receive,
    # which fences it (the job path): it is not lost and does not overtake a later one.
    os.write(pipes.reply_write, _frame(1))
    await trio.testing.wait_all_tasks_blocked()
    os.write(pipes.reply_write, _frame(2))
    assert await pipes.pipe.receive() == _frame(1)[4:]
    assert await pipes.pipe.receive() == _frame(2)[4:]


async def test_frames_nobody_takes_are_bounded(pipes: PlainPipes) -> None:
    # The reader stops reading once INBOX frames wait for nobody; the rest stays in the
    # pipe (the helper blocks), and all come out in order once taken.
    count = 3 * INBOX
    for generation in range(1, count + 1):
        os.write(pipes.reply_write, _frame(generation))
        await trio.testing.wait_all_tasks_blocked()
    held: Any = pipes.pipe._frames  # internals: what the reader holds
    assert len(held) == INBOX
    got = [await pipes.pipe.receive() for _ in range(count)]
    assert got == [_frame(generation)[4:] for generation in range(1, count + 1)]


async def test_end_of_file_wakes_the_parked_receive_and_every_later_one(
    pipes: PlainPipes,
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


async def test_a_frame_over_the_limit_ends_the_reader_with_the_error(pipes: PlainPipes) -> None:
    os.write(pipes.reply_write, (4097).to_bytes(4, "big") + b"x" * 4097)
    with pytest.raises(FrameTooLarge):
        await pipes.pipe.receive()
    with pytest.raises(FrameTooLarge):
        await pipes.pipe.receive()


async def test_a_cancelled_reader_hands_the_waiting_back_deadline_and_all(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The reader's nursery closes first (a pool shutting down): the parked receive goes
    # on waiting by itself, still ends exactly at its until, and later frames still come.
    plain = PlainPipes()
    reader = trio.CancelScope()

    async def read() -> None:
        with reader:
            assert await plain.pipe.run() is None  # cancelled, not ended

    async def stop_reader() -> None:
        await trio.sleep(1)
        reader.cancel()

    try:
        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(stop_reader)
        start = trio.current_time()
        with pytest.raises(ReceiveStopped) as info:
            await plain.pipe.receive(until=start + 5)
        assert info.value.expired
        assert trio.current_time() == start + 5
        os.write(plain.reply_write, _frame(8))
        assert await plain.pipe.receive(until=start + 10) == _frame(8)[4:]
    finally:
        plain.close()


async def test_an_interrupt_between_the_readers_end_and_the_waiters_turn_is_not_lost(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # A closing pool cancels the reader and cancels the job in one tick: the waiter the
    # reader handed back has not run yet when interrupt() comes, and must still stop
    # at once (not wait out its until).
    plain = PlainPipes()
    reader = trio.CancelScope()
    interrupted: list[bool] = []

    async def read() -> None:
        with reader:
            assert await plain.pipe.run() is None
        # The same step as the reader's end: the waiter it woke has not run yet.
        interrupted.append(plain.pipe.interrupt())

    async def stop_reader() -> None:
        await trio.sleep(1)
        reader.cancel()

    try:
        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(stop_reader)
        start = trio.current_time()
        with pytest.raises(ReceiveStopped) as info:
            await plain.pipe.receive(until=start + 5)
        assert interrupted == [True]
        assert not info.value.expired
        assert trio.current_time() == start + 1
    finally:
        plain.close()


# --- 1. the same outcome on both paths -------------------------------------------------


@both_paths
async def test_an_ok_result_is_the_same_on_both_paths(race):
    payload = {"text": "héllo", "items": [1, 2.5, None, True]}
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        race.arm(reply_size("echo", payload))
        assert await pool.run_job("echo", payload) == payload
        race.arm(reply_size("echo", 2))
        assert await pool.run_job("echo", 2) == 2
        helper = pool.snapshot().helpers[0]
    assert race.looks == [race.found, race.found]
    assert [written == length for written, length in race.writes] == [True, True]
    assert helper is not None
    assert (helper.incarnation, helper.jobs_run, helper.state) == (1, 2, "idle")


@both_paths
async def test_a_handler_error_is_the_same_on_both_paths(race):
    record = {"category": "transient", "code": "disk_full", "message": "no space left"}
    fail = {"message": record["message"], "code": "disk_full", "category": "transient"}
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        race.arm(reply_size("fail", None, status="error", error=record))
        with pytest.raises(JobFailed) as caught:
            await pool.run_job("fail", fail)
        race.arm(reply_size("echo", "after"))
        assert await pool.run_job("echo", "after") == "after"
        helper = pool.snapshot().helpers[0]
    assert race.looks == [race.found, race.found]
    assert (caught.value.code, caught.value.category) == ("disk_full", "transient")
    assert caught.value.message == "no space left"
    assert caught.value.details["generation"] == 1
    assert helper is not None
    assert helper.incarnation == 1


@both_paths
async def test_progress_comes_in_order_before_the_result_on_both_paths(race):
    reports = [[0.25, "first"], [1.0, "second"], [1.0, None]]
    events: list[object] = []

    def on_progress(fraction: float, note: str | None) -> None:
        events.append((fraction, note))

    job = {"reports": reports, "result": "done"}
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        frames = sum(progress_size("progress_then", f, n) for f, n in reports)
        race.arm(frames + reply_size("progress_then", "done"))
        events.append(await pool.run_job("progress_then", job, on_progress=on_progress))
    assert race.looks == [race.found]
    assert events == [(0.25, "first"), (1.0, "second"), (1.0, None), "done"]


@both_paths
async def test_a_failing_callback_is_logged_and_ignored_on_both_paths(race, caplog):
    def on_progress(fraction: float, note: str | None) -> None:
        raise RuntimeError("the callback is broken")

    caplog.set_level(logging.ERROR, logger="actors.helpers")
    job = {"reports": [[0.5, "a"], [1.0, "b"]], "result": "done"}
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        size = progress_size("progress_then", 0.5, "a") + progress_size("progress_then", 1, "b")
        race.arm(size + reply_size("progress_then", "done"))
        assert await pool.run_job("progress_then", job, on_progress=on_progress) == "done"
    assert race.looks == [race.found]
    messages = [r.getMessage() for r in caplog.records if r.name == "actors.helpers"]
    assert len(messages) == 2
    assert all("on_progress raised" in m for m in messages)


@both_paths
async def test_progress_then_an_error_on_both_paths(race):
    reports: list[tuple[float, str | None]] = []
    record = {"category": "permanent", "code": "bad_input", "message": "no"}
    job = {"reports": [[0.5, "half"]], "fail": {**record}}
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        size = progress_size("progress_then", 0.5, "half")
        race.arm(size + reply_size("progress_then", None, status="error", error=record))
        with pytest.raises(JobFailed) as caught:
            await pool.run_job(
                "progress_then", job, on_progress=lambda f, n: reports.append((f, n))
            )
    assert race.looks == [race.found]
    assert reports == [(0.5, "half")]
    assert caught.value.code == "bad_input"


@both_paths
async def test_a_cancelled_answer_nobody_asked_for_is_the_same_on_both_paths(race):
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        race.arm(reply_size("give_up", None, status="cancelled"))
        with pytest.raises(JobCancelled) as caught:
            await pool.run_job("give_up")
        race.arm(reply_size("echo", 3))
        assert await pool.run_job("echo", 3) == 3
        helper = pool.snapshot().helpers[0]
    assert race.looks == [race.found, race.found]
    assert caught.value.code == "job_cancelled"
    assert caught.value.details == {"operation": "give_up", "generation": 1}
    assert helper is not None
    assert (helper.incarnation, helper.state) == (1, "idle")


# --- 2. the caller is cancelled while the reply is there -------------------------------


@both_paths
async def test_caller_cancelled_as_the_reply_arrives_gets_it_or_stops_the_job(race):
    # The caller's scope is cancelled during the write, when the reply is already in
    # the pipe. The fast path returns the result (the job is done; the cancel takes
    # effect at the caller's next checkpoint); the slow path stops the job, and the
    # reply ends the ladder cooperatively. Either way the helper is the same, usable,
    # and the next job gets its own reply, not the first one's.
    got: list[object] = []
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        before = pool.snapshot().helpers[0]
        with trio.CancelScope() as scope:
            race.arm(reply_size("echo", "first"), then=scope.cancel)
            got.append(await pool.run_job("echo", "first"))
            await trio.lowlevel.checkpoint()
        assert scope.cancelled_caught
        race.arm(reply_size("echo", "second"))
        assert await pool.run_job("echo", "second") == "second"
        after = pool.snapshot().helpers[0]
        stats = pool.statistics()
    assert race.looks == [race.found, race.found]
    assert before is not None
    assert after is not None
    assert (after.pid, after.incarnation, after.jobs_run) == (before.pid, 1, 2)
    if race.mode == "fast":
        assert got == ["first"]
        assert (stats.jobs_succeeded, stats.jobs_cancelled) == (2, 0)
    else:
        assert got == []
        assert (stats.jobs_succeeded, stats.jobs_cancelled) == (1, 1)


@both_paths
async def test_caller_cancelled_by_progress_with_the_reply_already_read(race):
    # Progress and reply arrive in one read. The callback cancels the caller: the fast
    # path has the reply already and returns it; the slow path is cancelled at the
    # schedule point after reading the reply, puts the frame back, and the ladder's
    # cancel step consumes it: nothing is left for the next job.
    got: list[object] = []
    job = {"reports": [[1.0, "all"]], "result": "first"}
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        helper = pool._slots[0].helper
        with trio.CancelScope() as scope:
            race.arm(
                progress_size("progress_then", 1.0, "all") + reply_size("progress_then", "first")
            )
            got.append(
                await pool.run_job("progress_then", job, on_progress=lambda f, n: scope.cancel())
            )
            await trio.lowlevel.checkpoint()
        assert scope.cancelled_caught
        escalation = helper.last_escalation
        race.arm(reply_size("echo", "second"))
        assert await pool.run_job("echo", "second") == "second"
    assert race.looks == [race.found, race.found]
    if race.mode == "fast":
        assert (got, escalation) == (["first"], None)
    else:
        assert (got, escalation) == ([], "cooperative")


async def test_caller_cancelled_by_early_progress_stops_the_job(race):
    # The look finds a progress frame and no reply; the callback cancels the caller.
    # The wait that follows is a cancel point: the ladder stops the job cooperatively
    # at once (long before the reply deadline) and the helper stays.
    job = {"reports": [[0.1, "started"]], "work": 30}
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        helper = pool._slots[0].helper
        race.arm(progress_size("progress_then", 0.1, "started"))
        start = trio.current_time()
        with trio.CancelScope() as scope:
            await pool.run_job("progress_then", job, on_progress=lambda f, n: scope.cancel())
        elapsed = trio.current_time() - start
        assert scope.cancelled_caught
        assert helper.last_escalation == "cooperative"
        race.arm(reply_size("echo", "next"))
        assert await pool.run_job("echo", "next") == "next"
        after = pool.snapshot().helpers[0]
    assert race.looks == ["none", "reply"]
    assert elapsed < FAST.cancel_grace
    assert after is not None
    assert (after.incarnation, after.jobs_run) == (1, 2)


async def test_a_stale_reply_is_fenced_never_given_to_the_next_job(race, go):
    # A helper that answers job 1 twice: the second reply waits in the parent's buffer.
    # Job 2's look finds it at once and must refuse it (generation 1, not 2).
    async with open_helper_pool(scripted(go, "twice"), timeouts=FAST) as pool:
        race.arm(2 * reply_size("echo", "one"))
        assert await pool.run_job("echo", "one") == "one"
        with pytest.raises(ProtocolViolation) as caught:
            await pool.run_job("echo", "two")
        helper = pool.snapshot().helpers[0]
    assert race.looks == ["reply", "ProtocolViolation"]
    assert caught.value.details == {"field": "generation", "expected": 2, "got": 1}
    assert helper is not None
    assert (helper.alive, helper.exit_code) == (False, -9)


# --- 3. cancel_job racing a reply that is there ---------------------------------------


@pytest.mark.parametrize(
    "race",
    [
        "fast",
        "slow",
    ],
    indirect=True,
)
async def test_cancel_job_from_progress_with_the_reply_there_cancels_the_job(race):
    said: list[bool] = []
    job = {"reports": [[1.0, "all"]], "result": "first"}
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        race.arm(progress_size("progress_then", 1.0, "all") + reply_size("progress_then", "first"))
        with pytest.raises(JobCancelled) as caught:
            await pool.run_job(
                "progress_then",
                job,
                job_id="j",
                on_progress=lambda f, n: said.append(pool.cancel_job("j")),
            )
        assert await pool.run_job("echo", "next") == "next"
    assert said == [True]
    assert caught.value.details == {"escalation": "cooperative"}


async def test_cancel_job_from_early_progress_is_never_lost(race):
    # The helper reports progress at once, then works (cancellable) for 30 s; the report
    # is in the pipe when run_job looks for the reply, the reply is not.
    said: list[bool] = []
    timeouts = HelperTimeouts(reply=0.5, cancel_grace=0.5, shutdown=1.0)
    job = {"reports": [[0.1, "started"]], "work": 30}
    async with open_helper_pool(spec(), timeouts=timeouts) as pool:
        race.arm(progress_size("progress_then", 0.1, "started"))
        start = trio.current_time()
        with pytest.raises(JobCancelled) as caught:
            await pool.run_job(
                "progress_then",
                job,
                job_id="j",
                on_progress=lambda f, n: said.append(pool.cancel_job("j")),
            )
        elapsed = trio.current_time() - start
    assert race.looks == ["none"]
    assert said == [True]
    assert caught.value.details == {"escalation": "cooperative"}
    assert elapsed < timeouts.reply


@both_paths
async def test_helper_cancel_with_the_reply_buffered_stops_the_job_cleanly(race, nursery):
    # HelperProcess level: the reply of job 1 is buffered when its cancel is asked for
    # (from on_progress in the slow path, where the deadline scope exists). Whatever
    # the outcome, the next job is fenced by generation and gets its own reply.
    helper = HelperProcess(spec(), FAST)
    outcomes: list[object] = []
    try:
        await helper.start(nursery)
        job = {"reports": [[1.0, "all"]], "result": "first"}
        race.arm(progress_size("progress_then", 1.0, "all") + reply_size("progress_then", "first"))
        try:
            outcomes.append(
                await helper.run_job(
                    "progress_then", job, on_progress=lambda f, n: outcomes.append(helper.cancel())
                )
            )
        except JobCancelled as exc:
            outcomes.append(exc.details)
        assert helper.usable
        race.arm(reply_size("echo", "second"))
        assert await helper.run_job("echo", "second") == "second"
        assert helper.jobs_run == 2
    finally:
        with trio.CancelScope(shield=True):
            await helper.shutdown()
        helper.discard()
    # The reply stands, or the cancel won and the reply ended the ladder; which one is
    # asserted per path in test_cancel_job_from_progress_with_the_reply_there_cancels_the_job.
    assert outcomes in ([False, "first"], [True, {"escalation": "cooperative"}])
    if race.mode == "slow":
        assert outcomes == [True, {"escalation": "cooperative"}]


# --- 4. a job frame larger than the pipe -----------------------------------------------


async def test_a_job_frame_at_the_request_limit_goes_out_in_parts(race):
    # Four pipe buffers: the first write is partial (the look is skipped), send_rest
    # finishes it under the deadline scope, and the equally large reply comes back in
    # several reads. One byte more is refused before anything is written.
    limit = 4 * pipe_capacity()
    size = limit - 34 - len("echo") - 2  # the payload: a JSON string of ``size`` x
    async with open_helper_pool(spec(max_request=limit, max_reply=limit), timeouts=FAST) as pool:
        assert await pool.run_job("echo", "x" * size) == "x" * size
        with pytest.raises(FrameTooLarge):
            await pool.run_job("echo", "x" * (size + 1))
        race.arm(reply_size("echo", 1))
        assert await pool.run_job("echo", 1) == 1
        helper = pool.snapshot().helpers[0]
    [(written, length), small] = race.writes
    assert length == limit + 4
    assert 0 < written < length
    assert small[0] == small[1]
    assert race.looks == ["reply"]  # only the small job looked; the big one could not
    assert helper is not None
    assert (helper.incarnation, helper.jobs_run) == (1, 2)


@pytest.mark.parametrize(
    ("plan", "error", "escalation", "exit_code"),
    [
        ("deaf", ReplyTimeout, "sigterm", -15),
        ("deaf_ignore_sigterm", ForcedTermination, "sigkill", -9),
    ],
)
async def test_a_helper_that_never_reads_times_out_in_send_rest(
    race, go, plan, error, escalation, exit_code
):
    # The frame cannot all fit: the rest waits in send_rest, inside the reply deadline.
    # Half a frame is out, so no cancel frame can follow: straight to SIGTERM.
    timeouts = HelperTimeouts(reply=0.3, cancel_grace=0.2, terminate=0.2, kill=0.5)
    capacity = pipe_capacity()
    async with open_helper_pool(
        scripted(go, plan, max_request=4 * capacity), timeouts=timeouts
    ) as pool:
        start = trio.current_time()
        with pytest.raises(error) as caught:
            await pool.run_job("echo", "x" * (2 * capacity))
        elapsed = trio.current_time() - start
        helper = pool.snapshot().helpers[0]
    [(written, length)] = race.writes
    assert 0 < written < length
    assert race.looks == []
    assert caught.value.details == {"escalation": escalation, "parent_timeout": True}
    assert helper is not None
    assert (helper.alive, helper.exit_code) == (False, exit_code)
    ladder = 0.2 if escalation == "sigterm" else 0.2 + 0.5
    assert 0.3 <= elapsed < 0.3 + ladder + 0.3


async def test_cancel_job_while_the_frame_is_half_written(race, go):
    capacity = pipe_capacity()
    timeouts = HelperTimeouts(reply=10.0, cancel_grace=0.2, terminate=0.5, kill=0.5)
    outcome: list[BaseException] = []
    async with open_helper_pool(
        scripted(go, "deaf", max_request=4 * capacity), timeouts=timeouts
    ) as pool:

        async def job() -> None:
            try:
                await pool.run_job("echo", "x" * (2 * capacity), job_id="big")
            except JobCancelled as exc:
                outcome.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(job)
            await trio.testing.wait_all_tasks_blocked()  # blocked in send_rest
            assert pool.cancel_job("big")
        helper = pool.snapshot().helpers[0]
    [error] = outcome
    assert error.details == {"escalation": "sigterm"}
    assert helper is not None
    assert helper.exit_code == -15


# --- 5. partial, split and malformed replies; a crash after the reply ------------------

_ECHO_ONE = reply_size("echo", 1)


@both_paths
@pytest.mark.parametrize(
    ("fault", "size", "error", "details", "raised"),
    [
        # A malformed frame is a ProtocolError where it is decoded; run_job makes it a
        # ProtocolViolation (the peer broke the protocol).
        ("malformed_reply", 4 + 8, ProtocolViolation, {"field": "<frame>"}, "ProtocolError"),
        ("oversized_reply", 4 + 1, FrameTooLarge, {}, "FrameTooLarge"),
        ("stale_generation", _ECHO_ONE, ProtocolViolation, {"field": "generation"}, None),
        ("stale_session", _ECHO_ONE, ProtocolViolation, {"field": "session"}, None),
        ("wrong_version", _ECHO_ONE, ProtocolViolation, {"field": "version"}, None),
        (
            "stale_progress",
            progress_size("echo", 0.5, "stale"),
            ProtocolViolation,
            {"field": "generation"},
            None,
        ),
    ],
)
async def test_a_bad_answer_already_there_retires_the_helper_by_force(
    race, fault, size, error, details, raised
):
    async with open_helper_pool(spec(fault=fault), timeouts=FAST) as pool:
        race.arm(size)
        with pytest.raises(error) as caught:
            await pool.run_job("echo", 1)
        helper = pool.snapshot().helpers[0]
    assert type(caught.value) is error
    assert details.items() <= caught.value.details.items()
    assert race.looks == [(raised or error.__name__) if race.mode == "fast" else "skipped"]
    assert helper is not None
    assert (helper.alive, helper.exit_code) == (False, -9)


async def test_a_reply_larger_than_the_pipe_is_received_whole(race):
    # The look starts on a full pipe and may or may not see the reply's end (the helper
    # writes the rest as the look drains it: not deterministic, and either is right);
    # a partial frame left in the decoder is completed by the slow path.
    capacity = pipe_capacity()
    async with open_helper_pool(spec(max_reply=4 * capacity), timeouts=FAST) as pool:
        for _ in range(3):
            race.arm(capacity)
            assert await pool.run_job("big", 3 * capacity) == "x" * (3 * capacity)
        helper = pool.snapshot().helpers[0]
    assert set(race.looks) <= {"reply", "none"}
    assert len(race.looks) == 3
    assert helper is not None
    assert (helper.incarnation, helper.jobs_run) == (1, 3)


async def test_half_a_reply_at_the_look_then_nothing_is_a_reply_timeout(race):
    timeouts = HelperTimeouts(reply=0.3, cancel_grace=0.2, terminate=0.5, kill=0.5)
    payload = "a reply long enough to be cut in half"
    async with open_helper_pool(spec(fault="partial_frame"), timeouts=timeouts) as pool:
        race.arm(reply_size("echo", payload) // 2)
        start = trio.current_time()
        with pytest.raises(ReplyTimeout) as caught:
            await pool.run_job("echo", payload)
        elapsed = trio.current_time() - start
        helper = pool.snapshot().helpers[0]
    assert race.looks == ["none"]
    assert caught.value.details == {"escalation": "sigterm", "parent_timeout": True}
    assert helper is not None
    assert helper.exit_code == -15
    assert 0.3 + 0.2 <= elapsed < 0.3 + 0.2 + 0.5 + 0.3


async def test_a_reply_completed_after_the_look_is_received(race, go):
    # At the look: a whole progress frame and half the reply. The progress goes to the
    # callback, the half waits in the decoder; the rest comes only after the look (the
    # test releases it), in the slow path.
    events: list[object] = []
    race.after_miss = lambda generation: go.release()
    payload = {"k": "v" * 100}
    async with open_helper_pool(scripted(go, "split", "split"), timeouts=FAST) as pool:
        for _ in range(2):
            race.arm(progress_size("echo", 0.5, "half") + reply_size("echo", payload) // 2)
            events.append(
                await pool.run_job("echo", payload, on_progress=lambda f, n: events.append(n))
            )
        helper = pool.snapshot().helpers[0]
    assert race.looks == ["none", "none"]
    assert events == ["half", payload, "half", payload]
    assert helper is not None
    assert (helper.incarnation, helper.jobs_run) == (1, 2)


@both_paths
async def test_a_helper_that_exits_after_its_reply_is_replaced(race, go):
    # It exits once the job is over (the test lets it go): the result stands, and the
    # next job gets a fresh incarnation, not an answer of the old one.
    async with open_helper_pool(scripted(go, "exit"), timeouts=FAST) as pool:
        race.arm(reply_size("echo", "last words"))
        assert await pool.run_job("echo", "last words") == "last words"
        first = pool.snapshot().helpers[0]
        assert first is not None
        assert first.pid is not None
        go.release()
        await wait_gone(first.pid)  # reaped by its watcher: the pool knows it is gone
        gone = pool.snapshot().helpers[0]
        race.arm(reply_size("echo", "fresh"))
        assert await pool.run_job("echo", "fresh") == "fresh"
        fresh = pool.snapshot().helpers[0]
        go.release()  # the fresh incarnation exits too
    assert race.looks == [race.found, race.found]
    assert gone is not None
    assert (gone.alive, gone.exit_code) == (False, 5)
    assert fresh is not None
    assert fresh.incarnation == 2


async def test_a_helper_reaped_at_the_schedule_point_after_its_reply(race, go):
    # The helper exits right after its reply, and its watcher runs at the fast path's
    # schedule point (as it does whenever the exit is already visible to the loop and
    # the run queue's order puts it first). The reply came whole before the exit.
    async def reaped(helper: HelperProcess) -> None:
        assert helper.pid is not None
        await wait_gone(helper.pid)

    race.at_schedule_point = reaped
    async with open_helper_pool(scripted(go, "exit_now"), timeouts=FAST) as pool:
        race.arm(reply_size("echo", "last words"))
        try:
            outcome: object = await pool.run_job("echo", "last words")
        except HelperExited as exc:  # acceptable too: it did exit during the job
            outcome = exc.details
        race.at_schedule_point = None
        race.arm(reply_size("echo", "fresh"))
        assert await pool.run_job("echo", "fresh") == "fresh"
    assert race.looks == ["reply", "reply"]
    assert outcome in ("last words", {"exit_code": 5, "signal": None})


async def test_cancel_job_at_the_fast_paths_schedule_point_keeps_its_word(race):
    # Another task calls cancel_job while the job task sits at its schedule point with
    # the reply in hand. Either answer is defensible, but they must agree: True means
    # the job raises JobCancelled (cancel_job's contract); False means it was done.
    said: list[bool] = []

    async def cancel(helper: HelperProcess) -> None:
        assert helper.snapshot().state == "busy"
        said.append(pool.cancel_job("j"))

    race.at_schedule_point = cancel
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        race.arm(reply_size("echo", "first"))
        try:
            outcome: object = await pool.run_job("echo", "first", job_id="j")
        except JobCancelled as exc:
            outcome = exc
        race.at_schedule_point = None
        race.arm(reply_size("echo", "next"))
        assert await pool.run_job("echo", "next") == "next"
    assert race.looks == ["reply", "reply"]
    assert (said, isinstance(outcome, JobCancelled)) in (([True], True), ([False], False))


# --- 6. the reply deadline ------------------------------------------------------------


async def test_the_deadline_holds_after_a_look_that_found_only_progress(race):
    # The look consumes a progress frame but no reply: the deadline, counted from before
    # the write, still applies; the helper's late ``cancelled`` answer (to the cancel
    # frame) is not a result, and the helper is retired politely.
    reports: list[object] = []
    timeouts = HelperTimeouts(reply=0.3, cancel_grace=0.5, shutdown=1.0)
    job = {"reports": [[0.1, "started"]], "work": 30}
    async with open_helper_pool(spec(), timeouts=timeouts) as pool:
        race.arm(progress_size("progress_then", 0.1, "started"))
        start = trio.current_time()
        with pytest.raises(ReplyTimeout) as caught:
            await pool.run_job("progress_then", job, on_progress=lambda f, n: reports.append(n))
        elapsed = trio.current_time() - start
        retired = pool.snapshot().helpers[0]
    assert race.looks == ["none"]
    assert reports == ["started"]
    assert caught.value.code == "reply_timeout"
    assert caught.value.details == {"escalation": "cooperative", "parent_timeout": True}
    assert retired is not None
    assert (retired.alive, retired.exit_code) == (False, 0)
    assert 0.3 <= elapsed < 0.3 + 0.5


async def test_a_late_reply_after_the_deadline_is_never_returned(race):
    # The handler answers ok at 0.4 s, after the 0.2 s deadline, within the grace: the
    # answer ends the ladder but is not the result, and the next job gets a new helper.
    timeouts = HelperTimeouts(reply=0.2, cancel_grace=1.0, shutdown=1.0)
    async with open_helper_pool(spec(), timeouts=timeouts) as pool:
        with pytest.raises(ReplyTimeout) as caught:
            await pool.run_job("sleep", 0.4)
        race.arm(reply_size("echo", "fresh"))
        assert await pool.run_job("echo", "fresh") == "fresh"
        fresh = pool.snapshot().helpers[0]
    assert race.looks == ["none", "reply"]
    assert caught.value.details == {"escalation": "cooperative", "parent_timeout": True}
    assert fresh is not None
    assert fresh.incarnation == 2
