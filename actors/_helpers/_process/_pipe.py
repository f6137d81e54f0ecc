"""The parent's ends of a helper's pipes: whole frames out, frames in (design §2.2, §3).

:class:`HelperPipe` writes one whole frame at a time and reads frames back, with as
little work per frame as trio allows: a write is one non-blocking ``os.write``; a read
takes whatever the pipe holds in one ``os.read`` of a whole pipe buffer (a reply of
several frames costs one read), waiting for readability only when it is empty (and then
the wait is the checkpoint: no extra pass of the run loop). A read that is exactly one
whole frame within the reply size limit (the usual reply) is taken as it is; anything
else goes through a :class:`~protocol.framing.FrameDecoder`, which enforces the limit
before buffering a body.
"""

from __future__ import annotations

import os
from collections import deque
from typing import TYPE_CHECKING, Final

import trio

from protocol.framing import HEADER_SIZE, FrameDecoder

if TYPE_CHECKING:
    from trio.lowlevel import FdStream

__all__ = ["HelperPipe", "PipeGone"]

#: Bytes asked of one ``os.read`` of the reply pipe: a whole pipe buffer (64 KiB on
#: Linux), so everything already written arrives in one read. Not more: CPython
#: allocates the full size first, and above 128 KiB that is an ``mmap``/``munmap`` pair,
#: about 15 us, on every read.
READ_SIZE: Final = 65536


class PipeGone(Exception):
    """End of file, a broken pipe or a closed descriptor: the helper is exiting or gone."""


class HelperPipe:
    """Frame I/O over a helper's stdin (``send``) and stdout (``receive``).

    Args:
        stdin: The child's stdin, our write end.
        stdout: The child's stdout, our read end.
        max_reply: Largest frame payload accepted from the child, in bytes.
    """

    __slots__ = (
        "_decoder",
        "_frames",
        "_max_reply",
        "_rfd",
        "_stdin",
        "_wfd",
        "_whole",
        "send_broken",
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
            try:
                data = os.read(self._rfd, READ_SIZE)
            except BlockingIOError:
                return None
            except OSError:  # EBADF: we closed the pipe
                raise PipeGone from None
            if not data:
                raise PipeGone
            if self._whole and len(data) >= HEADER_SIZE:
                size = int.from_bytes(data[:HEADER_SIZE], "big")
                if size == len(data) - HEADER_SIZE and size <= self._max_reply:
                    return data[HEADER_SIZE:]
            self._whole = False  # until the decoder has taken this (it may raise)
            got = self._decoder.feed(data)
            self._whole = self._decoder.buffered == 0
            if len(got) == 1:  # one whole frame, no queue needed
                return got[0]
            frames.extend(got)
        return frames.popleft()

    async def receive(self, *, known_empty: bool = False) -> bytes:
        """Return the body of the next frame from the child; always a checkpoint.

        Reads first (:meth:`receive_nowait`), and only if nothing is there waits for
        readability, which is then the checkpoint (a schedule point and a cancel
        point); when no wait was needed it checkpoints afterwards instead. Either way
        one pass of the run loop per frame, where ``FdStream.receive_some`` takes two
        when it must wait (a checkpoint, then the wait). A cancellation after the read
        leaves the frame buffered here.

        Args:
            known_empty: The caller has just found the pipe empty: wait at once,
                without reading first.

        Raises:
            PipeGone: end of file (a partial frame at EOF counts as the exit it is), or
                the pipe was closed.
            FrameTooLarge: (code ``frame_too_large``) a frame declares more than
                ``max_reply`` bytes.
        """
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
