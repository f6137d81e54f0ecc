"""The helper child's frame stream (design §3.3, §3.4): its own duplicates of file
descriptors 0 and 1, a frame decoder, and the decoded frames.

Child side: like :mod:`actors.helper`, it never imports trio (nor ``typing``: the
child's start-up time counts).
"""

from __future__ import annotations

import os
import select
import sys
from collections import deque

from protocol.envelope import Envelope, decode_envelope, decode_positional
from protocol.errors import ProtocolError
from protocol.framing import DEFAULT_MAX_REPLY, DEFAULT_MAX_REQUEST, HEADER_SIZE, FrameDecoder

__all__ = ["ChildStdio"]

#: The kinds of frame the parent may send once the session is known.
REQUEST_KINDS = ("job", "cancel", "shutdown")
_READ_SIZE = 65536  # a whole pipe buffer; more costs an mmap per read


class ChildStdio:
    """The frame stream: private duplicates of fds 0/1, a decoder, and decoded frames."""

    __slots__ = (
        "broken",
        "decoder",
        "eof",
        "max_reply",
        "max_request",
        "pending",
        "rfd",
        "session",
        "wfd",
        "whole",
    )

    def __init__(self) -> None:
        # os.dup gives non-inheritable descriptors (PEP 446): grandchildren never get them.
        self.rfd = os.dup(0)
        self.wfd = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self.decoder = FrameDecoder(max_size=DEFAULT_MAX_REQUEST)
        self.max_request = DEFAULT_MAX_REQUEST
        #: True while the decoder holds no part of a frame: a read that is exactly one
        #: whole frame within the limit is then taken without the decoder's call.
        self.whole = True
        self.max_reply = DEFAULT_MAX_REPLY
        self.pending: deque[Envelope] = deque()
        self.eof = False
        #: The session once the startup frame is in; frames are then fenced against it.
        self.session: str | None = None
        #: A protocol error met while polling during a job (reported after the job).
        self.broken: ProtocolError | None = None

    def set_limits(self, max_request: int, max_reply: int) -> None:
        """Adopt the limits of the startup frame, in bytes (nothing else is buffered)."""
        if self.decoder.buffered == 0:
            self.decoder = FrameDecoder(max_size=max_request)
            self.max_request = max_request
        self.max_reply = max_reply

    def _feed(self, data: bytes) -> None:
        if not data:
            self.eof = True
            self.decoder.close()
            return
        session = self.session
        self.whole = False  # until the decoder has taken this (it may raise)
        bodies = self.decoder.feed(data)
        self.whole = self.decoder.buffered == 0
        for body in bodies:
            if session is None:
                self.pending.append(decode_envelope(body))
            else:
                self.pending.append(decode_positional(body, session, REQUEST_KINDS))

    def receive(self) -> Envelope | None:
        """Block until the next envelope; None at end of input.

        Raises:
            ProtocolError: a malformed frame, or (code ``protocol_violation``) one of
                another session or version, or of a kind the parent must not send.
        """
        while not self.pending:
            if self.eof:
                return None
            data = os.read(self.rfd, _READ_SIZE)
            session = self.session
            if data and session is not None:
                if self.whole and len(data) >= HEADER_SIZE:  # the decoder's first check
                    size = int.from_bytes(data[:HEADER_SIZE], "big")
                    if size == len(data) - HEADER_SIZE and size <= self.max_request:
                        return decode_positional(data[HEADER_SIZE:], session, REQUEST_KINDS)
                self.whole = False  # until the decoder has taken this (it may raise)
                bodies = self.decoder.feed(data)
                self.whole = self.decoder.buffered == 0
                if len(bodies) == 1:  # one whole frame, no queue needed
                    return decode_positional(bodies[0], session, REQUEST_KINDS)
                self.pending.extend(decode_positional(b, session, REQUEST_KINDS) for b in bodies)
            else:
                self._feed(data)
        return self.pending.popleft()

    def poll(self) -> None:
        """Read whatever input is ready, without blocking; remember a protocol error."""
        try:
            while not self.eof and select.select([self.rfd], [], [], 0)[0]:
                self._feed(os.read(self.rfd, _READ_SIZE))
        except ProtocolError as exc:
            self.broken = exc
            self.eof = True

    def write(self, data: bytes) -> None:
        written = os.write(self.wfd, data)
        if written < len(data):
            view = memoryview(data)[written:]
            while view:
                view = view[os.write(self.wfd, view) :]
