"""Length-prefixed frames for helper-process IPC, sans-io (design §2.2).

A frame is a 4-byte big-endian unsigned length followed by that many payload bytes.
:func:`encode_frame` builds one; :class:`FrameDecoder` turns a byte stream, fed in
chunks split or joined at any byte boundary, back into payloads.

This module imports nothing but :mod:`protocol.errors` (not even ``struct``): the helper
child process imports it and must start fast (no trio, no attrs, no cattrs).

Example::

    decoder = FrameDecoder(max_size=DEFAULT_MAX_REPLY)
    for payload in decoder.feed(chunk):   # zero or more whole payloads
        ...
    decoder.close()                       # at EOF: raises TruncatedFrame if mid-frame
"""

from __future__ import annotations

from .errors import FrameTooLarge, ProtocolError, TruncatedFrame

__all__ = [
    "DEFAULT_MAX_REPLY",
    "DEFAULT_MAX_REQUEST",
    "HEADER_SIZE",
    "MAX_FRAME_LIMIT",
    "FrameDecoder",
    "encode_frame",
]

#: Default limit on a request frame's payload (parent → helper), in bytes (design §2.2).
DEFAULT_MAX_REQUEST = 64 * 1024
#: Default limit on a reply frame's payload (helper → parent), in bytes (design §2.2).
DEFAULT_MAX_REPLY = 1024 * 1024
#: Size of the length prefix, in bytes.
HEADER_SIZE = 4
#: The largest length a 4-byte prefix can declare, in bytes; no limit may exceed it.
MAX_FRAME_LIMIT = 2**32 - 1


def _check_limit(max_size: object) -> int:
    if isinstance(max_size, bool) or not isinstance(max_size, int):
        raise TypeError(f"max_size must be an int number of bytes, got {max_size!r}")
    if not 0 <= max_size <= MAX_FRAME_LIMIT:
        raise ValueError(f"max_size must be in [0, {MAX_FRAME_LIMIT}] bytes, got {max_size!r}")
    return max_size


def encode_frame(payload: bytes, *, max_size: int = DEFAULT_MAX_REPLY) -> bytes:
    """Return ``payload`` as one frame: a 4-byte big-endian length, then the bytes.

    Args:
        payload: The frame body (any bytes-like object).
        max_size: Largest allowed payload, in bytes (default 1 MiB, the reply limit;
            pass :data:`DEFAULT_MAX_REQUEST` for requests).

    Returns:
        ``HEADER_SIZE + len(payload)`` bytes.

    Raises:
        FrameTooLarge: (code ``frame_too_large``) the payload is longer than ``max_size``
            bytes; nothing is encoded. ``details`` has ``size`` and ``limit``.
        TypeError: ``payload`` is not bytes-like, or ``max_size`` is not an int.
        ValueError: ``max_size`` is outside ``[0, 2**32 - 1]``.
    """
    if type(max_size) is not int or not 0 <= max_size <= MAX_FRAME_LIMIT:
        _check_limit(max_size)  # raises the TypeError/ValueError that names it
    if type(payload) is not bytes:
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise TypeError(f"payload must be bytes, got {type(payload).__name__}")
        payload = bytes(payload)
    size = len(payload)
    if size > max_size:
        raise FrameTooLarge(
            f"frame payload is {size} bytes, over the limit of {max_size} bytes",
            size=size,
            limit=max_size,
        )
    return size.to_bytes(HEADER_SIZE, "big") + payload


class FrameDecoder:
    """Incremental, sans-io decoder of length-prefixed frames (design §2.2).

    Feed it bytes as they arrive, in chunks of any size; it returns each whole payload
    once its last byte is in. The length prefix is checked as soon as its 4 bytes are in:
    a declared length above ``max_size`` raises :class:`FrameTooLarge` *before* any of
    the body is buffered, so a hostile peer cannot make us hold a huge frame.

    After an error the decoder is broken: the byte stream cannot be resynchronised, and
    every later :meth:`feed` or :meth:`close` raises the same kind of error again.
    Payloads completed earlier in the call that raised are discarded with the stream.

    Args:
        max_size: Largest allowed payload, in bytes (:data:`DEFAULT_MAX_REQUEST` for
            the helper's side, :data:`DEFAULT_MAX_REPLY` for the parent's).

    Raises:
        TypeError: ``max_size`` is not an int (bools are refused).
        ValueError: ``max_size`` is outside ``[0, 2**32 - 1]``.
    """

    __slots__ = ("_body", "_closed", "_error", "_head", "_max_size", "_need")

    def __init__(self, *, max_size: int) -> None:
        self._max_size = _check_limit(max_size)
        self._head = bytearray()  # 0..3 bytes of a length prefix not yet complete
        self._body = bytearray()  # the part of the current body received so far
        self._need: int | None = None  # declared length of the current frame, if known
        self._error: ProtocolError | None = None
        self._closed = False

    @property
    def max_size(self) -> int:
        """Largest allowed payload, in bytes."""
        return self._max_size

    @property
    def buffered(self) -> int:
        """Bytes held for a frame that is not complete yet (prefix and body)."""
        return len(self._head) + (HEADER_SIZE + len(self._body) if self._need is not None else 0)

    def feed(self, data: bytes) -> list[bytes]:
        """Take the next chunk of the stream and return the payloads it completes.

        Args:
            data: Any number of bytes (including none), split anywhere.

        Returns:
            The payloads of the frames completed by this chunk, in order (maybe none).

        Raises:
            FrameTooLarge: (code ``frame_too_large``) a length prefix declares more than
                ``max_size`` bytes; raised as soon as the prefix is complete, before the
                body is buffered. ``details`` has ``size`` and ``limit``.
            ProtocolError: (code of the first error) the decoder already failed.
            RuntimeError: the decoder was closed.
        """
        if self._need is None and not self._head and self._error is None and not self._closed:
            # Fast path: the chunk is exactly one whole frame (one reply per read).
            if type(data) is bytes and len(data) >= HEADER_SIZE:
                size = int.from_bytes(data[:HEADER_SIZE], "big")
                if len(data) == HEADER_SIZE + size and size <= self._max_size:
                    return [data[HEADER_SIZE:]]
        else:
            self._check_usable()
        view = memoryview(data).cast("B")
        frames: list[bytes] = []
        while view:
            need = self._need
            if need is None:
                if not self._head and len(view) >= HEADER_SIZE:
                    need = int.from_bytes(view[:HEADER_SIZE], "big")
                    view = view[HEADER_SIZE:]
                else:
                    take = HEADER_SIZE - len(self._head)
                    self._head += view[:take]
                    view = view[take:]
                    if len(self._head) < HEADER_SIZE:
                        break
                    need = int.from_bytes(self._head, "big")
                    self._head.clear()
                if need > self._max_size:
                    self._error = FrameTooLarge(
                        f"frame declares {need} bytes, over the limit of {self._max_size} bytes",
                        size=need,
                        limit=self._max_size,
                    )
                    raise self._error
                self._need = need
            if not self._body and len(view) >= need:
                # Fast path: the whole body is in this chunk; copy it once.
                frames.append(bytes(view[:need]))
                view = view[need:]
            else:
                take = need - len(self._body)
                self._body += view[:take]
                view = view[take:]
                if len(self._body) < need:
                    break
                frames.append(bytes(self._body))
                self._body.clear()
            self._need = None
        return frames

    def close(self) -> None:
        """Declare end of input; a clean end between frames is not an error.

        Calling it again is allowed and does nothing more.

        Raises:
            TruncatedFrame: (code ``truncated_frame``) the input ended inside a frame
                (a partial prefix or body is buffered). ``details`` has ``buffered``
                (bytes held) and, when the prefix was complete, ``expected`` (bytes).
            ProtocolError: (code of the first error) the decoder already failed.
        """
        if self._error is not None:
            self._raise_again()
        if self._closed:
            return
        self._closed = True
        if self._head or self._need is not None:
            details: dict[str, int] = {"buffered": self.buffered}
            if self._need is not None:
                details["expected"] = HEADER_SIZE + self._need
                message = (
                    f"input ended inside a frame: {len(self._body)} of "
                    f"{self._need} body bytes received"
                )
            else:
                message = (
                    f"input ended inside a length prefix: {len(self._head)} of "
                    f"{HEADER_SIZE} bytes received"
                )
            self._error = TruncatedFrame(message, **details)
            raise self._error

    def _check_usable(self) -> None:
        if self._error is not None:
            self._raise_again()
        if self._closed:
            raise RuntimeError("FrameDecoder.feed() after close()")

    def _raise_again(self) -> None:
        error = self._error
        assert error is not None
        # A fresh instance, so tracebacks do not pile up on one exception object.
        raise type(error)(f"decoder already failed: {error.message}", **error.details)
