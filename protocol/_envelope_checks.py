"""The domain of every envelope field, checked (design §2.3).

Used by :mod:`protocol.envelope` only (which re-exports the constants). Stdlib-only, like
it: the helper child imports both and must start fast.
"""

from __future__ import annotations

from ._blob import Blob
from ._envelope_wire import MAX_VERSION
from ._field_error import FieldError
from .errors import CATEGORIES, MAX_ERROR_MESSAGE_BYTES

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the child ~3 ms
if TYPE_CHECKING:
    from typing import Final, TypeGuard

__all__ = [
    "ANSWER_KINDS",
    "ENVELOPE_KINDS",
    "MAX_GENERATION",
    "MAX_OPERATION_LENGTH",
    "MAX_PROGRESS_NOTE_BYTES",
    "REPLY_STATUSES",
    "FieldError",
    "is_error_code",
    "validate",
]

#: Largest generation number: the largest integer a JSON double holds exactly, so a
#: generation survives any JSON consumer (logs, the websocket API).
MAX_GENERATION: Final = 2**53 - 1
#: Longest operation name, in characters.
MAX_OPERATION_LENGTH: Final = 128
#: Longest ``note`` of a progress frame, in bytes of UTF-8.
MAX_PROGRESS_NOTE_BYTES: Final = 1024
#: Every frame kind. Parent → helper: startup, job, cancel, shutdown.
#: Helper → parent: ready (answer to startup), progress (while a job runs), reply
#: (answer to a job).
ENVELOPE_KINDS: Final = frozenset(
    {"startup", "ready", "job", "cancel", "progress", "reply", "shutdown"}
)
#: Kinds that answer a request and therefore carry a status.
ANSWER_KINDS: Final = frozenset({"ready", "reply"})
#: Statuses of an answer. ``cancelled`` is the helper's answer to a cancel frame.
REPLY_STATUSES: Final = frozenset({"ok", "error", "cancelled"})

_HEX: Final = "0123456789abcdef"
_CODE_CHARS: Final = "abcdefghijklmnopqrstuvwxyz0123456789_"
_ERROR_KEYS: Final = frozenset({"category", "code", "message"})
_PROGRESS_KEYS: Final = frozenset({"fraction", "note"})


def _is_int(value: object) -> TypeGuard[int]:
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def is_error_code(code: object) -> TypeGuard[str]:
    """True if ``code`` is a snake_case code of at most 64 characters (an error code;
    ``protocol.messages.is_code`` for event kinds too): lowercase ASCII letters and
    digits, single underscores between them."""
    return (
        isinstance(code, str)
        and 0 < len(code) <= 64
        and not code.strip(_CODE_CHARS)
        and code[0] != "_"
        and code[-1] != "_"
        and "__" not in code
    )


def _validate_error(error: object) -> None:
    if not isinstance(error, dict):
        raise FieldError("error", f"must be an object, got {type(error).__name__}")
    if error.keys() != _ERROR_KEYS:
        keys = set(error)
        missing = sorted(_ERROR_KEYS - keys)
        extra = sorted(map(str, keys - _ERROR_KEYS))
        raise FieldError(
            "error", f"keys must be category/code/message (missing {missing}, unknown {extra})"
        )
    if error["category"] not in CATEGORIES:
        raise FieldError(
            "error", f"category must be one of {list(CATEGORIES)}, got {error['category']!r:.80}"
        )
    code = error["code"]
    if not is_error_code(code):
        raise FieldError("error", f"code must be a snake_case string, got {code!r:.80}")
    message = error["message"]
    if not isinstance(message, str):
        raise FieldError("error", f"message must be a string, got {type(message).__name__}")
    if len(message) * 4 > MAX_ERROR_MESSAGE_BYTES and (
        len(message.encode("utf-8", errors="surrogatepass")) > MAX_ERROR_MESSAGE_BYTES
    ):
        raise FieldError("error", f"message must be at most {MAX_ERROR_MESSAGE_BYTES} bytes")


def _validate_progress(payload: object) -> None:
    if not isinstance(payload, dict) or "fraction" not in payload:
        raise FieldError("payload", 'a progress payload is {"fraction": 0..1, "note": str|null}')
    if not payload.keys() <= _PROGRESS_KEYS:
        extra = sorted(map(str, payload.keys() - _PROGRESS_KEYS))
        raise FieldError("payload", f"a progress payload has unknown keys {extra}")
    fraction = payload["fraction"]
    if (
        not isinstance(fraction, int | float)
        or isinstance(fraction, bool)
        or not 0.0 <= fraction <= 1.0  # NaN fails this too
    ):
        raise FieldError("payload", f"fraction must be a number in [0, 1], got {fraction!r:.80}")
    note = payload.get("note")
    if note is not None and (
        not isinstance(note, str)
        or len(note.encode("utf-8", errors="surrogatepass")) > MAX_PROGRESS_NOTE_BYTES
    ):
        raise FieldError(
            "payload", f"note must be null or a string of at most {MAX_PROGRESS_NOTE_BYTES} bytes"
        )


def validate(
    version: object,
    kind: object,
    session: object,
    generation: object,
    operation: object,
    status: object,
    payload: object,
    error: object,
) -> None:
    """Check every field's domain; raise :class:`FieldError` naming the first bad one."""
    if not _is_int(version) or not 0 <= version <= MAX_VERSION:
        raise FieldError("version", f"must be an int in [0, {MAX_VERSION}], got {version!r:.80}")
    if not isinstance(kind, str) or kind not in ENVELOPE_KINDS:
        raise FieldError("kind", f"must be one of {sorted(ENVELOPE_KINDS)}, got {kind!r:.80}")
    if not isinstance(session, str) or len(session) != 32 or session.strip(_HEX):
        raise FieldError("session", f"must be 32 lowercase hex characters, got {session!r:.80}")
    if not _is_int(generation) or not 0 <= generation <= MAX_GENERATION:
        raise FieldError("generation", f"must be an int in [0, 2**53-1], got {generation!r:.80}")
    if not isinstance(operation, str) or not 1 <= len(operation) <= MAX_OPERATION_LENGTH:
        raise FieldError(
            "operation",
            f"must be a string of 1..{MAX_OPERATION_LENGTH} characters, got {operation!r:.80}",
        )
    if kind in ANSWER_KINDS:
        if status not in ("ok", "error", "cancelled"):  # a tuple: no hashing of odd values
            raise FieldError(
                "status", f"a {kind} must have status ok, error or cancelled, got {status!r:.80}"
            )
    elif status is not None:
        raise FieldError("status", f"a {kind} frame has no status, got {status!r:.80}")
    if status == "error":
        _validate_error(error)
    elif error is not None:
        raise FieldError("error", "only a status 'error' answer carries an error record")
    if kind == "progress":
        # A report with bytes: its head is the report (design §2.3).
        _validate_progress(payload.head if payload.__class__ is Blob else payload)
