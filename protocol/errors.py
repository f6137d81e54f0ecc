"""The root of the project's one error hierarchy, and the protocol errors (design §1.5, §2).

The root lives here, not in ``actors``, because ``protocol`` is sans-io and must not
import the runtime, while the runtime's errors must share one root with the protocol's.
``actors.errors`` re-exports :class:`ActorError` and adds the runtime's conditions.

Every error class has two class-level attributes:

* ``code``: a stable snake_case string that clients may match on;
* ``category``: ``"transient"`` (a retry may succeed), ``"permanent"`` (it will not) or
  ``"stale"`` (the result is no longer wanted: superseded or cancelled).

Errors never cross an actor or process boundary as objects: :meth:`ActorError.to_record`
turns one into a :class:`protocol.records.ErrorRecord` (data only, message bounded to 1 KiB).
"""

from __future__ import annotations

from ._error_data import CATEGORIES as CATEGORIES
from ._error_data import MAX_ERROR_MESSAGE_BYTES as MAX_ERROR_MESSAGE_BYTES
from ._error_data import bound_message as bound_message
from ._error_data import describe_exception as describe_exception

# Not typing.TYPE_CHECKING: the helper child imports this module and must start fast.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar

    from ._error_data import Category as Category
    from .records import ErrorRecord


def __getattr__(name: str) -> object:
    """``Category`` (re-exported from the error data) at run time, built on first use."""
    if name == "Category":
        from . import _error_data

        return _error_data.Category
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ActorError(Exception):
    """Root of every error this project raises on purpose (design §1.5).

    Subclasses set ``code`` and ``category`` at class level. Extra keyword arguments
    given to the constructor are kept in :attr:`details` (JSON-compatible values only),
    so a caller can report e.g. the exit code of a helper without parsing the message.

    Args:
        message: Human-readable description; bounded to 1 KiB when made into a record.
        **details: Structured, JSON-compatible facts about the failure.

    Attributes:
        message: The human-readable description, as given.
        details: The structured facts given as keyword arguments (a dict).
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
        # Imported here so this module stays stdlib-only: the helper child imports it
        # (through framing and envelope) and must not pay for attrs at start-up.
        from .records import ErrorRecord

        return ErrorRecord(category=self.category, code=self.code, message=self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"


class ProtocolError(ActorError):
    """A peer broke the wire protocol (design §2).

    Raised by the sans-io protocol code: bad frames, bad envelopes, bad messages.
    Unlike :class:`ProtocolViolation`, it does not by itself say the peer must be retired;
    the caller decides (a websocket client gets an error reply and stays connected).
    """

    code = "protocol_error"
    category = "permanent"


class FrameTooLarge(ProtocolError):
    """A frame declared (or a payload has) more bytes than the limit (design §2.2).

    Raised by :class:`protocol.FrameDecoder` *before* the body is buffered, and by
    :func:`protocol.encode_frame` before anything is written.
    """

    code = "frame_too_large"


class TruncatedFrame(ProtocolError):
    """The byte stream ended inside a frame (design §2.2).

    Raised by :meth:`protocol.FrameDecoder.close` at end of input; a clean end between
    frames is not an error.
    """

    code = "truncated_frame"


class InvalidMessage(ProtocolError):
    """A message did not structure: unknown, missing or mistyped fields (design §2.1, §2.4).

    The message names every offending field (cattrs ``transform_error`` paths), and
    :attr:`ActorError.details` has ``fields``: the list of those paths.
    """

    code = "invalid_message"


class MessageTooLarge(ProtocolError):
    """A client message is larger than the configured limit in bytes (design §2.4)."""

    code = "message_too_large"


class ProtocolViolation(ProtocolError):
    """A helper's reply failed the envelope checks of design §2.3.

    Wrong version, another session, a generation that is not the active job's, or
    another operation. Unlike its parent :class:`ProtocolError`, the supervisor answers
    this one by retiring the helper by force (design §3.4); the reply is never a result.
    """

    code = "protocol_violation"


class UnknownType(InvalidMessage):
    """A message's ``type`` tag is a string but not one this side accepts (design §2.4).

    Raised by :func:`protocol.decode_client_message` (and its server-side twin) before
    any other field is looked at; ``details`` has ``fields == ["$.type"]`` and ``type``
    (the tag received). Unlike its parent :class:`InvalidMessage` (raised for a missing
    or non-string tag, or bad fields), it says the peer speaks another message set or
    version, not that one message is malformed.
    """

    code = "unknown_type"
