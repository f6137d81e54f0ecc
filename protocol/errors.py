"""The root of the project's one error hierarchy, and the protocol errors (SPEC §1.5, §2).

The root lives here, not in ``actors``, because ``protocol`` is sans-io and must not
import the runtime, while the runtime's errors must share one root with the protocol's.
``actors.errors`` re-exports :class:`ActorError` and adds the runtime's conditions.

Every error class has two class-level attributes:

* ``code``: a stable snake_case string that clients may match on;
* ``category``: ``"transient"`` (a retry may succeed), ``"permanent"`` (it will not) or
  ``"stale"`` (the result is no longer wanted: superseded or cancelled).

Errors never cross an actor or process boundary as objects: :meth:`ActorError.to_record`
turns one into an :class:`ErrorRecord` (data only, message bounded to 1 KiB).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

Category = Literal["transient", "permanent", "stale"]
CATEGORIES: tuple[Category, ...] = ("transient", "permanent", "stale")

#: Bound on an error message that crosses a boundary, in bytes of UTF-8 (SPEC §1.5).
MAX_ERROR_MESSAGE_BYTES = 1024


def bound_message(message: str, limit: int = MAX_ERROR_MESSAGE_BYTES) -> str:
    """Cut ``message`` to at most ``limit`` bytes of UTF-8, on a character boundary.

    A cut message ends with ``"…"`` so a reader can tell it was shortened.
    """
    raw = message.encode("utf-8")
    if len(raw) <= limit:
        return message
    ellipsis = "…".encode()
    cut = raw[: limit - len(ellipsis)].decode("utf-8", errors="ignore")
    return cut + "…"


def _check_code(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not value or not value.replace("_", "a").isalnum() or not value.islower():
        raise ValueError(f"{attribute.name} must be a snake_case code, got {value!r}")


@attrs.frozen(kw_only=True)
class ErrorRecord:
    """An error as data: what crosses an actor or process boundary (SPEC §1.5).

    Never carries an exception or traceback object; the message is bounded.
    """

    category: Category = attrs.field(validator=attrs.validators.in_(CATEGORIES))
    """``transient``, ``permanent`` or ``stale``."""
    code: str = attrs.field(validator=[attrs.validators.instance_of(str), _check_code])
    """Stable snake_case code, e.g. ``"reply_timeout"``."""
    message: str = attrs.field(
        default="", converter=bound_message, validator=attrs.validators.instance_of(str)
    )
    """Human-readable text, at most 1 KiB of UTF-8 (longer text is cut)."""

    def to_dict(self) -> dict[str, str]:
        """Return the JSON-compatible form ``{"category", "code", "message"}``."""
        return {"category": self.category, "code": self.code, "message": self.message}


class ActorError(Exception):
    """Root of every error this project raises on purpose (SPEC §1.5).

    Subclasses set ``code`` and ``category`` at class level. Extra keyword arguments
    given to the constructor are kept in :attr:`details` (JSON-compatible values only),
    so a caller can report e.g. the exit code of a helper without parsing the message.

    Args:
        message: Human-readable description; bounded to 1 KiB when made into a record.
        **details: Structured, JSON-compatible facts about the failure.
    """

    code: ClassVar[str] = "actor_error"
    category: ClassVar[Category] = "permanent"

    def __init__(self, message: str = "", **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    @property
    def retryable(self) -> bool:
        """True when a retry may succeed (the category is ``transient``)."""
        return self.category == "transient"

    def to_record(self) -> ErrorRecord:
        """Return this error as data, safe to send across a boundary."""
        return ErrorRecord(category=self.category, code=self.code, message=self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"


class ProtocolError(ActorError):
    """A peer broke the wire protocol (SPEC §2).

    Raised by the sans-io protocol code: bad frames, bad envelopes, bad messages.
    Unlike :class:`ProtocolViolation`, it does not by itself say the peer must be retired;
    the caller decides (a websocket client gets an error reply and stays connected).
    """

    code = "protocol_error"
    category = "permanent"


class FrameTooLarge(ProtocolError):
    """A frame declared (or a payload has) more bytes than the limit (SPEC §2.2).

    Raised by :class:`protocol.FrameDecoder` *before* the body is buffered, and by
    :func:`protocol.encode_frame` before anything is written.
    """

    code = "frame_too_large"


class TruncatedFrame(ProtocolError):
    """The byte stream ended inside a frame (SPEC §2.2).

    Raised by :meth:`protocol.FrameDecoder.close` at end of input; a clean end between
    frames is not an error.
    """

    code = "truncated_frame"


class InvalidMessage(ProtocolError):
    """A message did not structure: unknown, missing or mistyped fields (SPEC §2.1, §2.4).

    The message names every offending field (cattrs ``transform_error`` paths), and
    :attr:`ActorError.details` has ``fields``: the list of those paths.
    """

    code = "invalid_message"


class MessageTooLarge(ProtocolError):
    """A client message is larger than the configured limit in bytes (SPEC §2.4)."""

    code = "message_too_large"


class ProtocolViolation(ProtocolError):
    """A helper's reply failed the envelope checks of SPEC §2.3.

    Wrong version, another session, a generation that is not the active job's, or
    another operation. Unlike its parent :class:`ProtocolError`, the supervisor answers
    this one by retiring the helper by force (SPEC §3.4); the reply is never a result.
    """

    code = "protocol_violation"
