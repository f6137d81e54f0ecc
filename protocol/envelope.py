"""The envelope of every helper frame, and the checks that fence replies (SPEC §2.3).

Each frame between the supervisor and a helper process carries one JSON object::

    {"version": 1, "kind": "reply", "session": "<32 hex>", "generation": 7,
     "operation": "metadata", "status": "ok", "payload": {...}, "error": null}

* ``session`` is random per helper incarnation (:func:`new_session`);
* ``generation`` numbers jobs, strictly increasing within a session;
* a reply is accepted as the result of a job only if :func:`check_reply` passes: the
  same version, session, generation and operation as the job, and a terminal status.

This module imports only the standard library and :mod:`protocol.errors`: the helper
child process imports it and must start fast. That is why :class:`Envelope` is a frozen
slotted *dataclass* and not an attrs class like the client messages (STYLE rule 4 gives
way here), and why the error record travels as a plain dict.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
from typing import Any, Final

from .errors import CATEGORIES, MAX_ERROR_MESSAGE_BYTES, ProtocolError, ProtocolViolation
from .framing import DEFAULT_MAX_REPLY, encode_frame

__all__ = [
    "ANSWER_KINDS",
    "ENVELOPE_KINDS",
    "MAX_GENERATION",
    "MAX_OPERATION_LENGTH",
    "PROTOCOL_VERSION",
    "REPLY_STATUSES",
    "Envelope",
    "check_reply",
    "decode_envelope",
    "encode_envelope",
    "new_session",
]

#: Version of the helper protocol this code speaks (SPEC §2.3).
PROTOCOL_VERSION: Final = 1
#: Largest generation number: the largest integer a JSON double holds exactly.
MAX_GENERATION: Final = 2**53 - 1
#: Longest operation name, in characters.
MAX_OPERATION_LENGTH: Final = 128
#: Every frame kind. Parent → helper: startup, job, cancel, shutdown.
#: Helper → parent: ready (answer to startup), reply (answer to a job).
ENVELOPE_KINDS: Final = frozenset({"startup", "ready", "job", "cancel", "reply", "shutdown"})
#: Kinds that answer a request and therefore carry a status.
ANSWER_KINDS: Final = frozenset({"ready", "reply"})
#: Statuses of an answer. ``cancelled`` is the helper's answer to a cancel frame.
REPLY_STATUSES: Final = frozenset({"ok", "error", "cancelled"})

_FIELDS: Final = (
    "version",
    "kind",
    "session",
    "generation",
    "operation",
    "status",
    "payload",
    "error",
)
_SESSION_RE: Final = re.compile(r"[0-9a-f]{32}")
_CODE_RE: Final = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
_ERROR_KEYS: Final = frozenset({"category", "code", "message"})
_encoder = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=False
)


class _FieldError(ValueError):
    """A field of an envelope failed validation; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"envelope field {field!r}: {message}")
        self.field = field


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def new_session() -> str:
    """Return a fresh session id: 128 random bits as 32 lowercase hex characters."""
    return secrets.token_hex(16)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate_error(error: object) -> None:
    if not isinstance(error, dict):
        raise _FieldError("error", f"must be an object, got {type(error).__name__}")
    keys = set(error)
    if keys != _ERROR_KEYS:
        missing = sorted(_ERROR_KEYS - keys)
        extra = sorted(map(str, keys - _ERROR_KEYS))
        raise _FieldError(
            "error", f"keys must be category/code/message (missing {missing}, unknown {extra})"
        )
    if error["category"] not in CATEGORIES:
        raise _FieldError(
            "error", f"category must be one of {list(CATEGORIES)}, got {error['category']!r}"
        )
    code = error["code"]
    if not isinstance(code, str) or len(code) > 64 or not _CODE_RE.fullmatch(code):
        raise _FieldError("error", f"code must be a snake_case string, got {code!r}")
    message = error["message"]
    if not isinstance(message, str):
        raise _FieldError("error", f"message must be a string, got {type(message).__name__}")
    if len(message.encode("utf-8", errors="surrogatepass")) > MAX_ERROR_MESSAGE_BYTES:
        raise _FieldError("error", f"message must be at most {MAX_ERROR_MESSAGE_BYTES} bytes")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    """One helper frame's content (SPEC §2.3). Validated on construction.

    A frozen, slotted dataclass rather than attrs: see the module docstring.

    Raises:
        ValueError: a field is out of its domain; the message names the field.
    """

    version: int
    """Protocol version; :data:`PROTOCOL_VERSION` when we build it. Any int in
    ``[0, MAX_GENERATION]`` decodes, so that :func:`check_reply` can name a mismatch."""
    kind: str
    """One of :data:`ENVELOPE_KINDS`."""
    session: str
    """The helper incarnation's id: 32 lowercase hex characters (:func:`new_session`)."""
    generation: int
    """Job number within the session, an int in ``[0, MAX_GENERATION]`` (bools refused)."""
    operation: str
    """Operation name, 1..:data:`MAX_OPERATION_LENGTH` characters."""
    status: str | None = None
    """For ``ready``/``reply``: one of :data:`REPLY_STATUSES` (required); else None."""
    payload: Any = None
    """Any JSON value: the job's arguments or the reply's result."""
    error: dict[str, str] | None = None
    """``{"category", "code", "message"}`` (message ≤ 1 KiB of UTF-8); present exactly
    when ``status == "error"``. Build it with ``ActorError(...).to_record().to_dict()``."""

    def __post_init__(self) -> None:
        if not _is_int(self.version) or not 0 <= self.version <= MAX_GENERATION:
            raise _FieldError("version", f"must be a non-negative int, got {self.version!r}")
        if not isinstance(self.kind, str) or self.kind not in ENVELOPE_KINDS:
            raise _FieldError("kind", f"must be one of {sorted(ENVELOPE_KINDS)}, got {self.kind!r}")
        if not isinstance(self.session, str) or not _SESSION_RE.fullmatch(self.session):
            raise _FieldError(
                "session", f"must be 32 lowercase hex characters, got {self.session!r}"
            )
        if not _is_int(self.generation) or not 0 <= self.generation <= MAX_GENERATION:
            raise _FieldError(
                "generation", f"must be an int in [0, 2**53-1], got {self.generation!r}"
            )
        if (
            not isinstance(self.operation, str)
            or not 1 <= len(self.operation) <= MAX_OPERATION_LENGTH
        ):
            raise _FieldError(
                "operation",
                f"must be a string of 1..{MAX_OPERATION_LENGTH} "
                f"characters, got {self.operation!r:.80}",
            )
        if self.kind in ANSWER_KINDS:
            if not isinstance(self.status, str) or self.status not in REPLY_STATUSES:
                raise _FieldError(
                    "status",
                    f"a {self.kind} must have status ok, error or cancelled, got {self.status!r}",
                )
        elif self.status is not None:
            raise _FieldError("status", f"a {self.kind} frame has no status, got {self.status!r}")
        if self.status == "error":
            _validate_error(self.error)
        elif self.error is not None:
            raise _FieldError("error", "only a status 'error' answer carries an error record")

    def to_json(self) -> dict[str, Any]:
        """Return the JSON-compatible dict of every field (``None`` kept as ``null``)."""
        return {name: getattr(self, name) for name in _FIELDS}


def encode_envelope(env: Envelope, *, max_size: int = DEFAULT_MAX_REPLY) -> bytes:
    """Serialise ``env`` as compact UTF-8 JSON and wrap it in one frame (SPEC §2.2, §2.3).

    Args:
        env: The envelope.
        max_size: Largest allowed JSON payload, in bytes (default 1 MiB; use
            :data:`protocol.DEFAULT_MAX_REQUEST` for parent → helper frames).

    Returns:
        The whole frame: 4-byte length prefix plus the JSON bytes.

    Raises:
        FrameTooLarge: (code ``frame_too_large``) the JSON is longer than ``max_size``.
        ProtocolError: (code ``protocol_error``) the payload is not JSON-serialisable
            (e.g. a set, NaN, a non-str key or a cycle); ``details["field"] == "payload"``.
    """
    try:
        text = _encoder.encode(env.to_json())
    except (TypeError, ValueError, RecursionError) as exc:
        raise ProtocolError(
            f"envelope field 'payload' is not JSON-serialisable: {exc}", field="payload"
        ) from None
    return encode_frame(text.encode("utf-8"), max_size=max_size)


def decode_envelope(payload: bytes) -> Envelope:
    """Parse and validate one frame's payload as an envelope (SPEC §2.3).

    Every field is checked; unknown keys are refused. The version is only checked to be
    an int here: :func:`check_reply` decides whether it is the right one.

    Args:
        payload: The frame body (without the length prefix), UTF-8 JSON.

    Returns:
        The validated :class:`Envelope`.

    Raises:
        ProtocolError: (code ``protocol_error``) not UTF-8, not JSON, not an object, a
            missing or unknown key, or a field out of its domain. The message names the
            field and ``details["field"]`` holds it (``"<frame>"`` for the first three).
    """
    try:
        data = json.loads(payload, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"envelope is not UTF-8 JSON: {exc}", field="<frame>") from None
    if not isinstance(data, dict):
        raise ProtocolError(
            f"envelope must be a JSON object, got {type(data).__name__}", field="<frame>"
        )
    for name in ("version", "kind", "session", "generation", "operation"):
        if name not in data:
            raise ProtocolError(f"envelope field {name!r} is missing", field=name)
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise ProtocolError(f"envelope has unknown field {unknown[0]!r}", field=unknown[0])
    try:
        return Envelope(**data)
    except _FieldError as exc:
        raise ProtocolError(str(exc), field=exc.field) from None


def check_reply(
    env: Envelope,
    *,
    session: str,
    generation: int,
    operation: str,
    kind: str = "reply",
) -> None:
    """Refuse an answer that is not for the job we are waiting on (SPEC §2.3, §3.4).

    Args:
        env: The decoded answer.
        session: The helper incarnation's session id.
        generation: The active job's generation.
        operation: The active job's operation.
        kind: The expected kind: ``"reply"`` for a job, ``"ready"`` for startup.

    Raises:
        ProtocolViolation: (code ``protocol_violation``) the version is not
            :data:`PROTOCOL_VERSION`, the session, generation or operation differs, the
            kind is not ``kind``, or a ``ready`` carries status ``cancelled``. The
            message names the mismatch, and ``details`` has ``field``, ``expected`` and
            ``got``. The caller must retire the helper; the answer is never a result.
        ValueError: ``kind`` is not ``"reply"`` or ``"ready"`` (a bug in the caller).
    """
    if kind not in ANSWER_KINDS:
        raise ValueError(f"kind must be 'reply' or 'ready', got {kind!r}")
    checks: tuple[tuple[str, object, object], ...] = (
        ("version", PROTOCOL_VERSION, env.version),
        ("kind", kind, env.kind),
        ("session", session, env.session),
        ("generation", generation, env.generation),
        ("operation", operation, env.operation),
    )
    for field, expected, got in checks:
        if got != expected:
            raise ProtocolViolation(
                f"{_WHAT[field]}: expected {field} {expected!r}, got {got!r}",
                field=field,
                expected=expected,
                got=got,
            )
    if env.status not in (REPLY_STATUSES if kind == "reply" else {"ok", "error"}):
        raise ProtocolViolation(
            f"bad status for a {kind}: got {env.status!r}",
            field="status",
            expected=sorted(REPLY_STATUSES) if kind == "reply" else ["error", "ok"],
            got=env.status,
        )


_WHAT: Final = {
    "version": "wrong protocol version",
    "kind": "not the expected frame kind",
    "session": "reply from another session",
    "generation": "reply for another generation",
    "operation": "reply for another operation",
}
