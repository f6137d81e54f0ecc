"""The warden's channel, parent side, sans-io (design §2.5, §3.16).

A helper on another host runs under a *warden* (``actors/_remote/_warden.py``) at the far
end of ``ssh -T``, over one SSH connection with two channels:

* the **control channel**, parent → warden: an SSH stream-local forwarding (``ssh -L``)
  to a Unix socket the warden listens on. It carries **control frames**: ordinary frames
  (§2.2) whose body is the byte :data:`WARDEN_MAGIC` followed by one strict JSON object
  with a ``"type"`` — ``start`` (first: the helper's command and the warden's
  timeouts), ``signal`` (SIGTERM or SIGKILL to the helper's whole tree) and
  ``heartbeat``. Where the server refuses the forwarding, the parent sends them on
  stdin instead, between the helper's frames, and the warden relays the rest.
* **stdin** and **stdout**, parent ↔ helper: the helper's own, which the warden hands
  it unread: requests and replies pass as a local helper's do, without a hop.
* **stderr**, warden → parent: first whatever the login wrote (``ssh``'s and the remote
  shell's messages, as text), then :data:`WARDEN_PREAMBLE` and ``hello``; then text
  again (what ``ssh`` says while the parent opens the control channel) up to a second
  :data:`WARDEN_PREAMBLE`, and then only frames: control frames — ``started`` or
  ``refused``, ``signalled``, ``heartbeat`` (the echo) and ``exit`` (last: exit
  status, whether the tree is empty) — and **stderr frames**, whose body is the byte
  :data:`WARDEN_STDERR` and then bytes the helper's tree wrote to its stderr, relayed
  by the warden.

:func:`is_control` tells a control body from a helper's; :func:`encode_start`,
:func:`encode_signal` and :func:`encode_heartbeat` build the parent's frames,
:class:`StderrSplitter` cuts ``ssh``'s stderr into text, the helper's stderr and control
frames, and :func:`decode_control` checks a warden's message field by field. Like
:mod:`protocol.framing` this module never imports trio.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Final

from ._strict_json import parse
from .errors import ProtocolError, ProtocolViolation
from .framing import DEFAULT_MAX_REQUEST, HEADER_SIZE, MAX_FRAME_LIMIT, encode_frame

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "CONTAINMENT_MODES",
    "EXIT_CAUSES",
    "WARDEN_CONTROL_LIMIT",
    "WARDEN_EXIT_REFUSED",
    "WARDEN_MAGIC",
    "WARDEN_PREAMBLE",
    "WARDEN_SIGNALS",
    "WARDEN_STDERR",
    "WARDEN_VERSION",
    "StderrSplitter",
    "decode_control",
    "encode_heartbeat",
    "encode_signal",
    "encode_start",
    "is_control",
]

#: Version of the warden's protocol; ``hello`` and ``start`` carry it. Version 3: the
#: helper's requests and replies bypass the warden (its stdin and stdout are SSH's), the
#: parent's control frames take a forwarded Unix socket, the warden speaks on stderr.
WARDEN_VERSION: Final = 3
#: First byte of a control frame's body (an envelope's is 0xAE, §2.3).
WARDEN_MAGIC: Final = 0xAF
#: First byte of a stderr frame's body: the rest is what the helper's tree wrote.
WARDEN_STDERR: Final = 0xAD
#: What the warden writes on stderr before ``hello`` and again before its next frame:
#: the login's text, and then what ``ssh`` said meanwhile, end here.
WARDEN_PREAMBLE: Final = b"\x00trio-actors-warden\x00"
#: Largest frame the warden sends on stderr, in bytes (its stderr frames are smaller).
WARDEN_CONTROL_LIMIT: Final = 1024 * 1024
#: The warden's exit status after it sent ``refused``.
WARDEN_EXIT_REFUSED: Final = 3
#: The signals ``signal`` may name.
WARDEN_SIGNALS: Final = ("SIGTERM", "SIGKILL")
#: How the warden may hold the helper's tree (``start``'s ``containment``, §3.16).
CONTAINMENT_MODES: Final = ("auto", "cgroup", "tree", "group")
#: Why a warden ended (``exit``'s ``cause``).
EXIT_CAUSES: Final = (
    "exited",
    "link_lost",
    "heartbeat_lost",
    "start_timeout",
    "parent_protocol_error",
)

_MAGIC_BYTE: Final = bytes((WARDEN_MAGIC,))
_STATUS_OR_SIGNAL: Final = (int, type(None))

#: Each message the warden sends → its fields and their types (None: JSON null allowed).
_SCHEMA: Final[dict[str, dict[str, tuple[type, ...]]]] = {
    "hello": {"version": (int,), "pid": (int,), "python": (str,), "channel": (bool,)},
    "started": {"pid": (int,), "containment": (str,), "cgroup": (str, type(None))},
    "refused": {"reason": (str,), "message": (str,)},
    "signalled": {"signal": (str,), "pids": (list,), "failed": (list,)},
    "heartbeat": {"seq": (int,)},
    "exit": {
        "cause": (str,),
        "returncode": _STATUS_OR_SIGNAL,
        "signal": (str, type(None)),
        "empty": (bool,),
        "left": (list,),
        "message": (str, type(None)),
    },
}


#: The list fields of pids (``failed``: of ``[pid, errno]`` pairs), checked item by item.
_PID_LISTS: Final[dict[str, tuple[str, ...]]] = {
    "signalled": ("pids", "failed"),
    "exit": ("left",),
}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_pid_entry(item: object, *, pairs: bool) -> bool:
    if not pairs:
        return _is_int(item)
    return isinstance(item, list) and len(item) == 2 and all(_is_int(part) for part in item)


def is_control(body: bytes) -> bool:
    """True if a frame body from the SSH channel is the warden's, not the helper's.

    Args:
        body: One frame's body (without its length prefix).
    """
    return body[:1] == _MAGIC_BYTE


def _frame(message: Mapping[str, object]) -> bytes:
    body = _MAGIC_BYTE + json.dumps(message, separators=(",", ":"), allow_nan=False).encode()
    return encode_frame(body, max_size=MAX_FRAME_LIMIT)


def _seconds(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def encode_start(
    argv: Sequence[str],
    *,
    heartbeat_timeout: float,
    sweep_timeout: float,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    containment: str = "auto",
    max_request: int = DEFAULT_MAX_REQUEST,
    version: int = WARDEN_VERSION,
) -> bytes:
    """The ``start`` frame: run ``argv`` on the warden's host (design §3.16).

    Args:
        argv: The helper's command line, looked up on the remote ``PATH``.
        heartbeat_timeout: Seconds (the warden's monotonic clock) without any frame from
            the parent after which the warden kills the helper's tree (``heartbeat_lost``).
        sweep_timeout: Seconds the warden waits for the tree to be empty after its
            SIGKILL before it reports what is left.
        cwd: The helper's working directory on the remote host (None: the login's).
        env: Variables added to the remote login's environment for the helper.
        containment: ``auto`` (the strongest the host has), ``cgroup``, ``tree`` or
            ``group`` (§3.11).
        max_request: Largest frame body the parent sends the helper, in bytes (the
            helper's replies do not pass through the warden: the parent checks their
            limit itself).
        version: The control protocol version (tests set another to see the refusal).

    Returns:
        The whole frame (length prefix included).

    Raises:
        TypeError: a field has the wrong type.
        ValueError: ``argv`` is empty, a timeout is not finite and > 0, a limit is
            outside ``[0, 2**32 - 1]`` bytes, or ``containment`` is not a mode.
    """
    if isinstance(argv, str) or not all(isinstance(arg, str) for arg in argv):
        raise TypeError(f"argv must be a sequence of strings, got {argv!r}")
    if not argv:
        raise ValueError("argv must not be empty")
    if containment not in CONTAINMENT_MODES:
        raise ValueError(f"containment must be one of {CONTAINMENT_MODES}, got {containment!r}")
    if isinstance(max_request, bool) or not isinstance(max_request, int):
        raise TypeError(f"max_request must be an int number of bytes, got {max_request!r}")
    if not 0 <= max_request <= MAX_FRAME_LIMIT:
        raise ValueError(
            f"max_request must be in [0, {MAX_FRAME_LIMIT}] bytes, got {max_request!r}"
        )
    return _frame(
        {
            "type": "start",
            "version": version,
            "argv": list(argv),
            "cwd": cwd,
            "env": dict(env or {}),
            "heartbeat_timeout": _seconds("heartbeat_timeout", heartbeat_timeout),
            "sweep_timeout": _seconds("sweep_timeout", sweep_timeout),
            "containment": containment,
            "max_request": max_request,
        }
    )


def encode_signal(name: str) -> bytes:
    """The ``signal`` frame: ``name`` to every process of the helper's tree (§3.5).

    Raises:
        ValueError: ``name`` is not one of :data:`WARDEN_SIGNALS`.
    """
    if name not in WARDEN_SIGNALS:
        raise ValueError(f"signal must be one of {WARDEN_SIGNALS}, got {name!r}")
    return _frame({"type": "signal", "signal": name})


def encode_heartbeat(seq: int) -> bytes:
    """The ``heartbeat`` frame; the warden echoes ``seq`` back.

    Raises:
        TypeError: ``seq`` is not an int.
        ValueError: ``seq`` is outside ``[0, 2**53 - 1]``.
    """
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise TypeError(f"seq must be an int, got {seq!r}")
    if not 0 <= seq < 2**53:
        raise ValueError(f"seq must be in [0, 2**53 - 1], got {seq!r}")
    return _frame({"type": "heartbeat", "seq": seq})


class StderrSplitter:
    """Cuts the stderr of the ``ssh`` running a warden into what it carries (§2.5).

    Until :data:`WARDEN_PREAMBLE`, the bytes are the login's text (``ssh``'s own
    messages, the remote shell's); after it, one frame (``hello``), then text again up to
    the second preamble (``ssh``'s words while the parent opens the control channel:
    a refused forwarding), then frames of at most :data:`WARDEN_CONTROL_LIMIT` bytes:
    stderr frames and control frames. Bytes that
    cannot be a frame there (a length over the limit: a warden that crashed with a
    traceback, ``ssh``'s last words as the link dies) end the framing for good
    (:attr:`broken` says why), and everything from them on is text again, so no
    diagnostic is lost.

    Args:
        limit: Largest frame body accepted after the preamble, in bytes.
    """

    __slots__ = ("_buffer", "_framed", "_hello", "_limit", "broken")

    def __init__(self, limit: int = WARDEN_CONTROL_LIMIT) -> None:
        self._buffer = bytearray()
        self._framed = False
        self._hello = True  # the next frame is the first: text follows it
        self._limit = limit
        #: Why the framing ended (a bad length after the preamble), or None.
        self.broken: str | None = None

    @property
    def framed(self) -> bool:
        """True once the preamble was seen (and the framing has not broken)."""
        return self._framed

    def feed(self, data: bytes) -> list[tuple[str, bytes]]:
        """Take ``data``; return what it completes, in order.

        Returns:
            ``(kind, bytes)`` pairs: ``"text"`` (the login's or a broken stream's
            bytes), ``"stderr"`` (the helper's stderr bytes) or ``"control"`` (a
            control frame's body, for :func:`decode_control`).
        """
        buffer = self._buffer
        buffer += data
        out: list[tuple[str, bytes]] = []
        if not self._framed:
            if self.broken is not None:
                out.append(("text", bytes(buffer)))
                buffer.clear()
                return out
            at = buffer.find(WARDEN_PREAMBLE)
            if at < 0:
                # Keep what could be the start of a preamble cut by the read.
                keep = len(WARDEN_PREAMBLE) - 1
                if len(buffer) > keep:
                    out.append(("text", bytes(buffer[:-keep])))
                    del buffer[:-keep]
                return out
            if at:
                out.append(("text", bytes(buffer[:at])))
            del buffer[: at + len(WARDEN_PREAMBLE)]
            self._framed = True
        pos, end = 0, len(buffer)
        while end - pos >= HEADER_SIZE:
            size = int.from_bytes(buffer[pos : pos + HEADER_SIZE], "big")
            if size > self._limit or size == 0:
                self.broken = f"a frame on the warden's stderr declares {size} bytes"
                self._framed = False
                out.append(("text", bytes(buffer[pos:])))
                buffer.clear()
                return out
            stop = pos + HEADER_SIZE + size
            if stop > end:
                break
            body = bytes(buffer[pos + HEADER_SIZE : stop])
            if body[0] == WARDEN_STDERR:
                out.append(("stderr", body[1:]))
            else:
                out.append(("control", body))
            pos = stop
            if self._hello:
                # After hello, text up to the next preamble.
                self._hello = False
                self._framed = False
                del buffer[:pos]
                return out + self.feed(b"")
        del buffer[:pos]
        return out

    def close(self) -> list[tuple[str, bytes]]:
        """End of file: what is left, as text (a cut frame, a preamble never finished)."""
        left = bytes(self._buffer)
        self._buffer.clear()
        return [("text", left)] if left and not self._framed else []

    @property
    def pending(self) -> int:
        """Bytes held that are not yet whole (a frame cut by the end: the link died)."""
        return len(self._buffer)


def decode_control(body: bytes) -> dict[str, object]:
    """Check one control frame from the warden and return its message.

    Args:
        body: A frame body for which :func:`is_control` is true.

    Returns:
        The message: a dict with ``"type"`` and the fields of that type (more fields
        than those checked may be present: a refusal's details).

    Raises:
        ProtocolError: (code ``protocol_error``) the body is not :data:`WARDEN_MAGIC`
            and a strict JSON object, its ``type`` is unknown, or a field is missing or
            of the wrong type; ``details["field"]`` names it.
        ProtocolViolation: (code ``protocol_violation``) a ``hello`` of another
            version than :data:`WARDEN_VERSION` (``details``: ``field`` ``"version"``,
            ``expected``, ``got``): that warden must not be used.
    """
    if not is_control(body):
        raise ProtocolError("not a warden control frame", field="<frame>")
    message = parse(body[1:], "control")
    if not isinstance(message, dict):
        raise ProtocolError("a warden control frame must be a JSON object", field="control")
    kind = message.get("type")
    version = message.get("version")
    if kind == "hello" and _is_int(version) and version != WARDEN_VERSION:
        # Before the fields: another version may have others.
        raise ProtocolViolation(
            f"warden version mismatch: expected version {WARDEN_VERSION},"
            f" the remote warden speaks {version}",
            field="version",
            expected=WARDEN_VERSION,
            got=version,
        )
    schema = _SCHEMA.get(kind) if isinstance(kind, str) else None
    if schema is None:
        raise ProtocolError(f"unknown warden control frame type {kind!r}", field="type")
    for name, types in schema.items():
        value = message.get(name, ...)
        if (
            value is ...
            or not isinstance(value, types)
            or (isinstance(value, bool) and bool not in types)
        ):
            raise ProtocolError(
                f"warden {kind!r} frame: field {name!r} is missing or of the wrong type",
                field=name,
            )
    for name in _PID_LISTS.get(str(kind), ()):
        items = message[name]
        assert isinstance(items, list)
        if not all(_is_pid_entry(item, pairs=name == "failed") for item in items):
            raise ProtocolError(
                f"warden {kind!r} frame: field {name!r} must list"
                + (" [pid, errno] pairs" if name == "failed" else " pids (ints)"),
                field=name,
            )
    return message
