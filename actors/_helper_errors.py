"""``protocol.errors`` as seen inside a helper child process: stdlib only (SPEC §3.9).

Why this exists: a helper child must start fast, so it must not import trio, attrs or
cattrs (a bare interpreter starts in about 20 ms; attrs alone adds about 25 ms).
:mod:`protocol.framing` and :mod:`protocol.envelope` are stdlib-only, but they import
their exception classes from :mod:`protocol.errors`, which also defines the attrs-based
:class:`~protocol.errors.ErrorRecord` and therefore imports attrs.

The child bootstrap (``actors._helper_process.BOOTSTRAP``) loads *this file* under the
name ``protocol.errors`` before anything imports the real one. It defines the same
exception classes with the same ``code`` and ``category`` (a parent-side test keeps the
two in step), so framing and envelope behave identically in the child. Inside the child
these exceptions never cross the process boundary as objects: :mod:`actors.helper` turns
them into error records (plain dicts) or an exit status.

Names that need attrs (``ErrorRecord``) are not available here; reaching for one raises
an ``AttributeError`` that says why. Helper entry points raise
:class:`actors.helper.JobError` (or any exception with ``code``/``category``) instead.

Never import this module in the parent process.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

Category = Literal["transient", "permanent", "stale"]
CATEGORIES: tuple[Category, ...] = ("transient", "permanent", "stale")

#: Bound on an error message that crosses a boundary, in bytes of UTF-8 (SPEC §1.5).
MAX_ERROR_MESSAGE_BYTES = 1024

#: Set on the module object so a reader of ``sys.modules`` can tell it is the stand-in.
LIGHT_STAND_IN = True


def bound_message(message: str, limit: int = MAX_ERROR_MESSAGE_BYTES) -> str:
    """Cut ``message`` to at most ``limit`` bytes of UTF-8, on a character boundary."""
    raw = message.encode("utf-8", errors="replace")
    if len(raw) <= limit:
        return message
    ellipsis = "…".encode()
    return raw[: limit - len(ellipsis)].decode("utf-8", errors="ignore") + "…"


class ActorError(Exception):
    """Stand-in for :class:`protocol.errors.ActorError`: same ``code``, ``category``,
    ``message`` and ``details``; no ``to_record`` (that needs attrs)."""

    code: ClassVar[str] = "actor_error"
    category: ClassVar[Category] = "permanent"

    def __init__(self, message: str = "", **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details


class ProtocolError(ActorError):
    """Stand-in for :class:`protocol.errors.ProtocolError`."""

    code = "protocol_error"
    category = "permanent"


class FrameTooLarge(ProtocolError):
    """Stand-in for :class:`protocol.errors.FrameTooLarge`."""

    code = "frame_too_large"


class TruncatedFrame(ProtocolError):
    """Stand-in for :class:`protocol.errors.TruncatedFrame`."""

    code = "truncated_frame"


class InvalidMessage(ProtocolError):
    """Stand-in for :class:`protocol.errors.InvalidMessage`."""

    code = "invalid_message"


class MessageTooLarge(ProtocolError):
    """Stand-in for :class:`protocol.errors.MessageTooLarge`."""

    code = "message_too_large"


class ProtocolViolation(ProtocolError):
    """Stand-in for :class:`protocol.errors.ProtocolViolation`."""

    code = "protocol_violation"


def __getattr__(name: str) -> Any:
    raise AttributeError(
        f"protocol.errors.{name} is not available inside a helper child process: the "
        "child loads a stdlib-only stand-in of protocol.errors so that it never imports "
        "attrs (see actors/_helper_errors.py); raise actors.helper.JobError instead"
    )
