"""The parent's ends of a helper's pipes: whole frames out, frames in (SPEC §2.2, §3).

:class:`HelperPipe` writes one whole frame at a time and reads frames back, with as
little work per frame as trio allows: a write is one non-blocking ``os.write``; a read
takes whatever the pipe holds in one ``os.read`` of a whole pipe buffer (a reply of
several frames costs one read), waiting for readability only when it is empty, decoding it
with a :class:`~protocol.framing.FrameDecoder` that enforces the reply size limit before
buffering a body.
"""

from __future__ import annotations

import os
from collections import deque
from typing import TYPE_CHECKING, Final

import trio

from protocol.framing import FrameDecoder

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

    __slots__ = ("_decoder", "_frames", "_rfd", "_stdin", "_wfd", "send_broken")

    def __init__(self, stdin: FdStream, stdout: FdStream, *, max_reply: int) -> None:
        self._stdin = stdin
        self._wfd = stdin.fileno()
        self._rfd = stdout.fileno()
        self._decoder = FrameDecoder(max_size=max_reply)
        self._frames: deque[bytes] = deque()
        #: True while a frame is only partly written (a cancellation cut it): the
        #: stream can carry no further frame (SPEC §3.5 then skips the cancel frame).
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
        try:
            written = os.write(self._wfd, frame)
        except BlockingIOError:
            written = 0
        except OSError:  # EPIPE: the child is gone; EBADF: we closed the pipe
            raise PipeGone from None
        if written == len(frame):
            return
        self.send_broken = True
        try:
            await self._stdin.send_all(memoryview(frame)[written:])
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise PipeGone from None
        self.send_broken = False

    async def receive(self) -> bytes:
        """Return the body of the next frame from the child; always a checkpoint.

        Like ``FdStream.receive_some``: a checkpoint, then ``os.read`` of whatever the
        pipe holds, and only if it is empty ``wait_readable``. A helper that answers
        within the checkpoint (a short job) costs no registration with epoll at all.

        Raises:
            PipeGone: end of file (a partial frame at EOF counts as the exit it is), or
                the pipe was closed.
            FrameTooLarge: (code ``frame_too_large``) a frame declares more than
                ``max_reply`` bytes.
        """
        await trio.lowlevel.checkpoint()
        frames = self._frames
        while not frames:
            try:
                data = os.read(self._rfd, READ_SIZE)
            except BlockingIOError:
                try:
                    await trio.lowlevel.wait_readable(self._rfd)
                except (trio.ClosedResourceError, trio.BusyResourceError):
                    raise PipeGone from None
                continue
            except OSError:  # EBADF: we closed the pipe
                raise PipeGone from None
            if not data:
                raise PipeGone
            frames.extend(self._decoder.feed(data))
        return frames.popleft()
