"""The parent's ends of a helper's pipes: whole frames out, frames in (design §2.2, §3).

:class:`HelperPipe` writes one whole frame at a time and reads frames back, with as
little work per frame as trio allows: a write is one non-blocking ``os.write``; a read
takes whatever the pipe holds in one ``os.read`` of a whole pipe buffer (a reply of
several frames costs one read), waiting for readability only when it is empty (and then
the wait is the checkpoint: no extra pass of the run loop). A read that is exactly one
whole frame within the reply size limit (the usual reply) is taken as it is; anything
else goes through a :class:`~protocol.framing.FrameDecoder`, which enforces the limit
before buffering a body.

Waiting for a frame (design §3.6) is the job of one long-lived **reader** per helper
(:meth:`HelperPipe.run`, started by :meth:`HelperPipe.start_reader`): it alone waits for
readability, and hands each frame straight to the one task parked in
:meth:`HelperPipe.receive` (no channel, no extra pass of the run loop). It is also the
**timer** of that wait: a parked receive says ``until`` when it gives up, and the reader
sleeps under one long-lived cancel scope whose deadline is moved only when a wait must
end earlier than it is armed for (a job's reply deadline is later than the last one's:
nothing to do), so a job costs no cancel scope of its own. A task that finds its frame
already there (a helper on this CPU answers before the parent waits) never parks.
"""

from __future__ import annotations

import math
import os
from collections import deque
from typing import TYPE_CHECKING, Final, NoReturn

import trio
from outcome import Error, Value
from trio.lowlevel import Abort, current_task, reschedule, wait_task_rescheduled

from protocol.errors import ProtocolError
from protocol.framing import HEADER_SIZE, FrameDecoder

if TYPE_CHECKING:
    from trio.lowlevel import FdStream, Task

__all__ = ["INBOX", "HelperPipe", "PipeGone", "ReceiveStopped"]

#: Bytes asked of one ``os.read`` of the reply pipe: a whole pipe buffer (64 KiB on
#: Linux), so everything already written arrives in one read. Not more: CPython
#: allocates the full size first, and above 128 KiB that is an ``mmap``/``munmap`` pair,
#: about 15 us, on every read.
READ_SIZE: Final = 65536
#: Frames the reader holds for nobody (no task waits) before it stops reading: memory
#: stays bounded whatever a helper writes between jobs.
INBOX: Final = 16
_INF: Final = math.inf


class PipeGone(Exception):
    """End of file, a broken pipe or a closed descriptor: the helper is exiting or gone."""


class ReceiveStopped(Exception):
    """A parked :meth:`HelperPipe.receive` was woken without a frame: its ``until`` passed
    (:attr:`expired`), or :meth:`HelperPipe.interrupt` was called. Never an
    ``ActorError``: the job path turns it into the error of its cause."""

    def __init__(self, *, expired: bool) -> None:
        super().__init__("the deadline passed" if expired else "interrupted")
        #: True if the waiter's ``until`` passed; False if it was interrupted.
        self.expired = expired


class HelperPipe:
    """Frame I/O over a helper's stdin (``send``) and stdout (``receive``).

    Args:
        stdin: The child's stdin, our write end.
        stdout: The child's stdout, our read end.
        max_reply: Largest frame payload accepted from the child, in bytes.
    """

    __slots__ = (
        "_armed",
        "_decoder",
        "_failure",
        "_frames",
        "_handed_back",
        "_max_reply",
        "_parked",
        "_reading",
        "_rfd",
        "_scope",
        "_stdin",
        "_waiter",
        "_wfd",
        "_whole",
        "send_broken",
        "until",
    )

    def __init__(self, stdin: FdStream, stdout: FdStream, *, max_reply: int) -> None:
        self._stdin = stdin
        self._wfd = stdin.fileno()
        self._rfd = stdout.fileno()
        self._decoder = FrameDecoder(max_size=max_reply)
        self._max_reply = max_reply
        # True while the decoder holds no part of a frame: a read that is exactly one
        # whole frame within the limit is then taken as it is, without the decoder's
        # call (the usual reply; the decoder's own first check, done here).
        self._whole = True
        self._frames: deque[bytes] = deque()
        #: True while a frame is only partly written (a cancellation cut it): the
        #: stream can carry no further frame (design §3.5 then skips the cancel frame).
        self.send_broken = False
        # The reader (see the module docstring): whether it owns the waiting, the task
        # parked in receive() and the reader itself when it stopped for a full inbox.
        self._reading = False
        self._waiter: Task | None = None
        self._parked: Task | None = None
        # The parked receive the reader woke as it was cancelled, until it runs again:
        # None, or whether interrupt() came meanwhile (it must not be lost).
        self._handed_back: bool | None = None
        # Why the stream ended (PipeGone, or the ProtocolError that broke it), once the
        # reader has seen it: a receive raises it once the frames read before are taken.
        self._failure: Exception | None = None
        self._scope: trio.CancelScope | None = None
        # The reader scope's deadline: never later than the parked waiter's ``until``.
        self._armed = _INF
        #: When the task waiting in :meth:`receive` gives up, seconds on trio's clock
        #: (moved later with :meth:`extend`).
        self.until = _INF

    async def send(self, frame: bytes, *, checkpoint: bool = True) -> None:
        """Write one whole frame; a cancellation never leaves part of it written.

        The frame is written with one non-blocking ``os.write`` (after a checkpoint,
        unless ``checkpoint`` is False); frames are small next to a pipe's buffer. Only
        if the pipe is full does the rest go through ``send_all``, and only then could
        a cancellation cut the frame: :attr:`send_broken` says so.

        Raises:
            PipeGone: the child closed its end (EPIPE) or we closed ours.
        """
        if checkpoint:
            await trio.lowlevel.checkpoint()  # cancelled here: nothing was written
        written = self.write_nowait(frame)
        if written < len(frame):
            await self.send_rest(frame, written)

    def write_nowait(self, frame: bytes) -> int:
        """Write as much of ``frame`` as the pipe takes now; return the bytes written.

        If that is not all of it, :attr:`send_broken` is set: finish with
        :meth:`send_rest` before anything else is written.

        Raises:
            PipeGone: the child closed its end (EPIPE) or we closed ours.
        """
        try:
            written = os.write(self._wfd, frame)
        except BlockingIOError:
            written = 0
        except OSError:  # EPIPE: the child is gone; EBADF: we closed the pipe
            raise PipeGone from None
        if written < len(frame):
            self.send_broken = True
        return written

    async def send_rest(self, frame: bytes, written: int) -> None:
        """Write ``frame`` from byte ``written`` on, waiting for pipe space as needed.

        Raises:
            PipeGone: the child closed its end (EPIPE) or we closed ours.
        """
        try:
            await self._stdin.send_all(memoryview(frame)[written:])
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise PipeGone from None
        self.send_broken = False

    def receive_nowait(self) -> bytes | None:
        """Return the body of the next frame if it is already here, else None.

        Reads what the pipe holds (one ``os.read`` of a whole pipe buffer, repeated
        only while a frame is incomplete and more bytes come); never waits.

        Raises:
            PipeGone: end of file (a partial frame at EOF counts as the exit it is), or
                the pipe was closed.
            FrameTooLarge: (code ``frame_too_large``) a frame declares more than
                ``max_reply`` bytes.
        """
        frames = self._frames
        while not frames:
            data = self._read()
            if data is None:
                return None
            got = self._split(data)
            if len(got) == 1:  # one whole frame, no queue needed
                return got[0]
            frames.extend(got)
        return frames.popleft()

    def _read(self) -> bytes | None:
        """One ``os.read`` of what the pipe holds; None if it is empty."""
        try:
            data = os.read(self._rfd, READ_SIZE)
        except BlockingIOError:
            return None
        except OSError:  # EBADF: we closed the pipe
            raise PipeGone from None
        if not data:
            raise PipeGone
        return data

    def _split(self, data: bytes) -> list[bytes]:
        """The frames ``data`` completes, in order (a subclass may take some out)."""
        if self._whole and len(data) >= HEADER_SIZE:
            size = int.from_bytes(data[:HEADER_SIZE], "big")
            if size == len(data) - HEADER_SIZE and size <= self._max_reply:
                return [data[HEADER_SIZE:]]
        self._whole = False  # until the decoder has taken this (it may raise)
        got = self._decoder.feed(data)
        self._whole = self._decoder.buffered == 0
        return got

    async def receive(self, *, known_empty: bool = False, until: float = _INF) -> bytes:
        """Return the body of the next frame from the child; always a checkpoint.

        With the reader running (:meth:`start_reader`), a frame already read is taken at
        once; else this task parks until the reader hands it one (the wait is then the
        checkpoint), or ``until`` passes. Without it (a pipe used alone, as in tests, or
        once the reader's nursery was cancelled: a closing pool still stops its jobs),
        this task waits for readability itself, under a cancel scope for ``until``.

        Reads first (:meth:`receive_nowait`), and only if nothing is there waits for
        readability, which is then the checkpoint (a schedule point and a cancel
        point); when no wait was needed it checkpoints afterwards instead. Either way
        one pass of the run loop per frame, where ``FdStream.receive_some`` takes two
        when it must wait (a checkpoint, then the wait). A cancellation after the read
        leaves the frame buffered here.

        Args:
            known_empty: The caller has just found the pipe empty: wait at once,
                without reading first.
            until: When to give up, seconds on trio's clock (with the reader only;
                :attr:`until` may be moved later meanwhile).

        Raises:
            PipeGone: end of file (a partial frame at EOF counts as the exit it is), or
                the pipe was closed.
            FrameTooLarge: (code ``frame_too_large``) a frame declares more than
                ``max_reply`` bytes.
            ReceiveStopped: ``until`` passed, or :meth:`interrupt` woke it.
        """
        if self._reading:
            return await self._receive_from_reader(known_empty, until)
        if until == _INF:
            return await self._receive_alone(known_empty)
        self.until = until
        with trio.CancelScope(deadline=until) as scope:
            self._scope = scope
            try:
                return await self._receive_alone(known_empty)
            finally:
                self._scope = None
        raise ReceiveStopped(expired=trio.current_time() >= self.until)

    async def _receive_alone(self, known_empty: bool) -> bytes:
        body = None if known_empty else self.receive_nowait()
        if body is not None:
            try:
                await trio.lowlevel.checkpoint()
            except BaseException:  # cancelled: the frame stays for the next receive
                self._frames.appendleft(body)
                raise
            return body
        while True:
            try:
                await trio.lowlevel.wait_readable(self._rfd)
            except (trio.ClosedResourceError, trio.BusyResourceError):
                raise PipeGone from None
            body = self.receive_nowait()
            if body is not None:
                return body

    # --- the reader -------------------------------------------------------------------

    def start_reader(self, nursery: trio.Nursery) -> None:
        """Hand all waiting to a reader task in ``nursery`` (:meth:`run`), from now on."""
        self._reading = True
        nursery.start_soon(self.run)

    async def run(self) -> Exception | None:
        """The reader: wait for the child's frames and hand them on until the stream
        ends (end of file, the pipe closed, or a frame that breaks it); every parked or
        later :meth:`receive` then raises why. Raises nothing but ``Cancelled``.

        Returns:
            What ended the reading: ``PipeGone``, or the ``ProtocolError`` of a frame
            that broke the stream (``FrameTooLarge``); None if it was cancelled.
        """
        self._reading = True
        failure: Exception | None = None
        try:
            while True:
                with trio.CancelScope(deadline=self._armed) as scope:
                    self._scope = scope
                    await self._pump()
                # Only the scope's own deadline ends the pump without an exception.
                self._scope = None
                self._expire()
        except (PipeGone, ProtocolError) as exc:
            failure = exc
        finally:
            self._scope = None
            if failure is None:
                # Cancelled (its nursery is closing), not ended: the stream goes on, and
                # each receive waits for it itself from now on (the parked one too).
                self._reading = False
                waiter = self._waiter
                if waiter is not None:
                    self._waiter = None
                    self._handed_back = False
                    reschedule(waiter, Value(None))
            else:
                self._end(failure)
        return failure

    async def _pump(self) -> NoReturn:
        frames = self._frames
        while True:
            while len(frames) >= INBOX:  # nobody takes them: stop reading for now
                self._parked = current_task()
                await wait_task_rescheduled(self._abort_parked)
            try:
                await trio.lowlevel.wait_readable(self._rfd)
            except (trio.ClosedResourceError, trio.BusyResourceError):
                raise PipeGone from None
            data = self._read()
            if data is None:
                continue
            got = self._split(data)
            if not got:
                continue
            waiter = self._waiter
            if waiter is not None and not frames:
                self._waiter = None
                frames.extend(got[1:])
                reschedule(waiter, Value(got[0]))
            else:
                frames.extend(got)

    def _abort_parked(self, _: object) -> Abort:
        self._parked = None
        return Abort.SUCCEEDED

    def _abort_waiter(self, _: object) -> Abort:
        self._waiter = None
        return Abort.SUCCEEDED

    def _expire(self) -> None:
        """The reader's deadline passed: end the parked wait if its ``until`` has, and
        arm for what is left (a stall deadline moved later meanwhile)."""
        waiter = self._waiter
        if waiter is not None and trio.current_time() >= self.until:
            self._waiter = None
            self._armed = _INF
            reschedule(waiter, Error(ReceiveStopped(expired=True)))
        else:
            self._armed = self.until if waiter is not None else _INF

    def _end(self, failure: Exception) -> None:
        """No more frames will come: wake the parked receive with why."""
        if self._failure is None:
            self._failure = failure
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            reschedule(waiter, Error(self._ended()))

    def _ended(self) -> Exception:
        failure = self._failure
        return PipeGone() if failure is None or isinstance(failure, PipeGone) else failure

    async def _receive_from_reader(self, known_empty: bool, until: float) -> bytes:
        frames = self._frames
        body = None
        if frames:
            body = frames.popleft()
            parked = self._parked
            if parked is not None:  # room again in the inbox
                self._parked = None
                reschedule(parked)
        elif self._failure is not None:
            await trio.lowlevel.checkpoint()
            raise self._ended()
        elif not known_empty:
            try:
                body = self.receive_nowait()
            except ProtocolError as exc:  # the stream is broken for every later receive
                self._end(exc)
                raise
        if body is not None:
            try:
                await trio.lowlevel.checkpoint()
            except BaseException:  # cancelled: the frame stays for the next receive
                frames.appendleft(body)
                raise
            return body
        # Park; the reader hands the next frame over, or wakes us at ``until``.
        self.until = until
        if until < self._armed:
            self._armed = until
            if self._scope is not None:
                self._scope.deadline = until
        self._waiter = current_task()
        received: bytes | None = await wait_task_rescheduled(self._abort_waiter)
        if received is None:  # the reader is gone: wait without it
            interrupted, self._handed_back = self._handed_back, None
            if interrupted:
                raise ReceiveStopped(expired=False)
            return await self.receive(known_empty=False, until=self.until)
        return received

    def extend(self, until: float) -> None:
        """Move the waiting receive's ``until`` later (a stall deadline pushed back):
        the reader finds it when it wakes at the earlier time; never waits."""
        self.until = until
        if not self._reading and self._scope is not None:  # a receive waiting alone
            self._scope.deadline = until

    def interrupt(self) -> bool:
        """Wake the task parked in :meth:`receive` with ``ReceiveStopped``; never waits.

        Returns:
            True if a task was parked there.
        """
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            reschedule(waiter, Error(ReceiveStopped(expired=False)))
            return True
        if not self._reading and self._scope is not None:  # a receive waiting alone
            self.until = _INF  # so its scope's end reads as an interruption
            self._scope.cancel()
            return True
        if self._handed_back is False:  # woken by the reader's end, not yet running
            self._handed_back = True
            return True
        return False
