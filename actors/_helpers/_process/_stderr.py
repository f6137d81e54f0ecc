"""A helper's stderr: each line forwarded to logging, the tail kept for errors (design §3.10).

The helper's stderr (where its ``print`` calls, tracebacks and grandchildren's output
go) is a pipe that :class:`StderrTail` reads in a task of the pool's nursery. Every
complete line becomes a record of the ``actors.helpers.stderr`` logger (WARNING: the
helper said something the operator should see) with the helper's identity as
``extra``; the last :data:`TAIL_BYTES` bytes are kept, so that a helper that dies
before *ready* can say why in its error (design §3.3). Reading costs nothing while the
helper is quiet.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Final

import trio
from trio.lowlevel import enable_ki_protection

if TYPE_CHECKING:
    from collections.abc import Callable

    from trio.lowlevel import FdStream

__all__ = ["STDERR_LOGGER", "TAIL_BYTES", "StderrTail"]

#: The logger that helper stderr lines go to.
STDERR_LOGGER: Final = logging.getLogger("actors.helpers.stderr")
#: Bytes of a helper's stderr kept for its error reports (the tail).
TAIL_BYTES: Final = 4096
_READ: Final = 65536


class StderrTail:
    """Reads one helper's stderr pipe (see the module docstring).

    Args:
        stream: The parent's end of the pipe.
        fields: The helper's identity, added to every log record as ``extra``.
    """

    def __init__(self, stream: FdStream, fields: dict[str, Any]) -> None:
        self._stream = stream
        self._fd = stream.fileno()
        self._fields = fields
        self._tail = bytearray()
        self._line = bytearray()
        self.closed = False
        self.on_activity: Callable[[], None] | None = None
        """Called (sync, never waits) whenever the helper wrote to stderr: its job's
        stall timer, when ``HelperSpec.stderr_is_activity`` is set (design §3.12)."""

    @enable_ki_protection
    async def run(self) -> None:
        """Read until end of file or :meth:`close` (run it in a nursery)."""
        while True:
            try:
                data = await self._stream.receive_some(_READ)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return
            if not data:
                self._flush()
                return
            self._feed(data)

    def drain_nowait(self) -> None:
        """Take in whatever the pipe holds now (the helper has just exited)."""
        if self.closed:
            return
        while True:
            try:
                data = os.read(self._fd, _READ)
            except OSError:  # empty (EAGAIN) or closed
                return
            if not data:
                self._flush()
                return
            self._feed(data)

    def text(self) -> str:
        """The tail: the last :data:`TAIL_BYTES` bytes of stderr, as text."""
        return self._tail.decode("utf-8", errors="replace")

    def tail(self) -> str:
        """:meth:`drain_nowait`, then :meth:`text`: all the helper wrote so far."""
        self.drain_nowait()
        return self.text()

    def close(self) -> None:
        """Stop reading and close the pipe (a running :meth:`run` returns)."""
        if not self.closed:
            self.closed = True
            self._flush()
            self._stream.close()

    def _feed(self, data: bytes) -> None:
        if self.on_activity is not None:
            self.on_activity()
        tail = self._tail
        tail += data
        if len(tail) > TAIL_BYTES:
            del tail[: len(tail) - TAIL_BYTES]
        line = self._line
        line += data
        *complete, rest = line.split(b"\n")
        if len(rest) > TAIL_BYTES:  # a line without end: log it in pieces
            complete.append(rest)
            rest = bytearray()
        self._line = bytearray(rest)
        if STDERR_LOGGER.isEnabledFor(logging.WARNING):
            for raw in complete:
                self._log(raw)

    def _flush(self) -> None:
        if self._line:
            self._log(bytes(self._line))
            self._line = bytearray()

    def _log(self, raw: bytes | bytearray) -> None:
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        if text and STDERR_LOGGER.isEnabledFor(logging.WARNING):
            STDERR_LOGGER.warning(
                "%s: %s", self._fields.get("helper"), text, extra={**self._fields, "line": text}
            )
