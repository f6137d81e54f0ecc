"""The envelope of every helper frame, and the checks that fence replies (SPEC §2.3).

Each frame between the supervisor and a helper process carries one JSON object::

    {"version":1,"kind":"reply","session":"<32 hex>","generation":7,
     "operation":"metadata","status":"ok","payload":{...},"error":null}

* ``session`` is random per helper incarnation (:func:`new_session`);
* ``generation`` numbers jobs, strictly increasing within a session;
* a reply is accepted as the result of a job only if :func:`check_reply` passes: the
  same version, session, generation and operation as the job, and a terminal status;
* a ``progress`` frame (helper → parent, while a job runs) is fenced the same way and
  carries ``{"fraction": 0..1, "note": str | null}``.

Two ways in. The general one builds an :class:`Envelope` (validated on construction) and
calls :func:`encode_envelope` / :func:`decode_envelope` + :func:`check_reply`. The hot
path of the helper protocol skips the object where it can: :func:`encode_fields`
validates and encodes without building an :class:`Envelope`, and :func:`decode_fenced`
decodes and fences in one step, accepting a well-formed frame with a handful of
comparisons against the values it expects and falling back to the general (slower,
field-naming) checks for anything else. Both give exactly the errors of the general way.

This module imports only :mod:`protocol.errors` / :mod:`protocol.framing` and the strict
JSON of :mod:`protocol._envelope_json` (stdlib ``json``): the helper child process
imports it and must start fast. That is why :class:`Envelope`
is a small hand-written frozen slotted class and not an attrs class like the client
messages (STYLE rule 4 gives way here), nor a dataclass (``import dataclasses`` pulls
in ``inspect`` and costs a helper ~9 ms of start-up), why ``secrets`` is imported only
by :func:`new_session` (the parent's business), and why the error record travels as a
plain dict.
"""

from __future__ import annotations

from ._envelope_json import SURROGATE_ESCAPE, dumps_str, dumps_value, encodes_as_utf8, parse
from .errors import CATEGORIES, MAX_ERROR_MESSAGE_BYTES, ProtocolError, ProtocolViolation
from .framing import DEFAULT_MAX_REPLY, encode_frame

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the child ~3 ms
if TYPE_CHECKING:
    from typing import Any, Final, TypeGuard

__all__ = [
    "ANSWER_KINDS",
    "ENVELOPE_KINDS",
    "MAX_GENERATION",
    "MAX_OPERATION_LENGTH",
    "MAX_PROGRESS_NOTE_BYTES",
    "PROTOCOL_VERSION",
    "REPLY_STATUSES",
    "SURROGATE_ESCAPE",
    "Envelope",
    "check_reply",
    "decode_envelope",
    "decode_fenced",
    "encode_envelope",
    "encode_fields",
    "encodes_as_utf8",
    "new_session",
]

#: Version of the helper protocol this code speaks (SPEC §2.3).
PROTOCOL_VERSION: Final = 1
#: Largest generation number: the largest integer a JSON double holds exactly.
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
_FIELD_SET: Final = frozenset(_FIELDS)
_REQUIRED: Final = ("version", "kind", "session", "generation", "operation")
_HEX: Final = "0123456789abcdef"
_CODE_CHARS: Final = "abcdefghijklmnopqrstuvwxyz0123456789_"
_ERROR_KEYS: Final = frozenset({"category", "code", "message"})
_PROGRESS_KEYS: Final = frozenset({"fraction", "note"})
_STATUS_JSON: Final = {None: "null", "ok": '"ok"', "error": '"error"', "cancelled": '"cancelled"'}


class _FieldError(ValueError):
    """A field of an envelope failed validation; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"envelope field {field!r}: {message}")
        self.field = field


def new_session() -> str:
    """Return a fresh session id: 128 random bits as 32 lowercase hex characters."""
    import secrets  # here, not at the top: only the parent makes sessions (start-up cost)

    return secrets.token_hex(16)


def _is_int(value: object) -> TypeGuard[int]:
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def _validate_error(error: object) -> None:
    if not isinstance(error, dict):
        raise _FieldError("error", f"must be an object, got {type(error).__name__}")
    if error.keys() != _ERROR_KEYS:
        keys = set(error)
        missing = sorted(_ERROR_KEYS - keys)
        extra = sorted(map(str, keys - _ERROR_KEYS))
        raise _FieldError(
            "error", f"keys must be category/code/message (missing {missing}, unknown {extra})"
        )
    if error["category"] not in CATEGORIES:
        raise _FieldError(
            "error", f"category must be one of {list(CATEGORIES)}, got {error['category']!r:.80}"
        )
    code = error["code"]
    if (
        not isinstance(code, str)
        or not 0 < len(code) <= 64
        or code.strip(_CODE_CHARS)
        or code[0] == "_"
        or code[-1] == "_"
        or "__" in code
    ):
        raise _FieldError("error", f"code must be a snake_case string, got {code!r:.80}")
    message = error["message"]
    if not isinstance(message, str):
        raise _FieldError("error", f"message must be a string, got {type(message).__name__}")
    if len(message) * 4 > MAX_ERROR_MESSAGE_BYTES and (
        len(message.encode("utf-8", errors="surrogatepass")) > MAX_ERROR_MESSAGE_BYTES
    ):
        raise _FieldError("error", f"message must be at most {MAX_ERROR_MESSAGE_BYTES} bytes")


def _validate_progress(payload: object) -> None:
    if not isinstance(payload, dict) or "fraction" not in payload:
        raise _FieldError("payload", 'a progress payload is {"fraction": 0..1, "note": str|null}')
    if not payload.keys() <= _PROGRESS_KEYS:
        extra = sorted(map(str, payload.keys() - _PROGRESS_KEYS))
        raise _FieldError("payload", f"a progress payload has unknown keys {extra}")
    fraction = payload["fraction"]
    if (
        not isinstance(fraction, int | float)
        or isinstance(fraction, bool)
        or not 0.0 <= fraction <= 1.0  # NaN fails this too
    ):
        raise _FieldError("payload", f"fraction must be a number in [0, 1], got {fraction!r:.80}")
    note = payload.get("note")
    if note is not None and (
        not isinstance(note, str)
        or len(note.encode("utf-8", errors="surrogatepass")) > MAX_PROGRESS_NOTE_BYTES
    ):
        raise _FieldError(
            "payload", f"note must be null or a string of at most {MAX_PROGRESS_NOTE_BYTES} bytes"
        )


def _validate(
    version: object,
    kind: object,
    session: object,
    generation: object,
    operation: object,
    status: object,
    payload: object,
    error: object,
) -> None:
    """Check every field's domain; raise :class:`_FieldError` naming the first bad one."""
    if not _is_int(version) or not 0 <= version <= MAX_GENERATION:
        raise _FieldError("version", f"must be a non-negative int, got {version!r:.80}")
    if not isinstance(kind, str) or kind not in ENVELOPE_KINDS:
        raise _FieldError("kind", f"must be one of {sorted(ENVELOPE_KINDS)}, got {kind!r:.80}")
    if not isinstance(session, str) or len(session) != 32 or session.strip(_HEX):
        raise _FieldError("session", f"must be 32 lowercase hex characters, got {session!r:.80}")
    if not _is_int(generation) or not 0 <= generation <= MAX_GENERATION:
        raise _FieldError("generation", f"must be an int in [0, 2**53-1], got {generation!r:.80}")
    if not isinstance(operation, str) or not 1 <= len(operation) <= MAX_OPERATION_LENGTH:
        raise _FieldError(
            "operation",
            f"must be a string of 1..{MAX_OPERATION_LENGTH} characters, got {operation!r:.80}",
        )
    if kind in ANSWER_KINDS:
        if status not in ("ok", "error", "cancelled"):  # a tuple: no hashing of odd values
            raise _FieldError(
                "status", f"a {kind} must have status ok, error or cancelled, got {status!r:.80}"
            )
    elif status is not None:
        raise _FieldError("status", f"a {kind} frame has no status, got {status!r:.80}")
    if status == "error":
        _validate_error(error)
    elif error is not None:
        raise _FieldError("error", "only a status 'error' answer carries an error record")
    if kind == "progress":
        _validate_progress(payload)


_new = object.__new__
_set = object.__setattr__


def _frozen(name: str) -> AttributeError:
    import dataclasses  # only on a misuse: keep the child's start fast

    return dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


class Envelope:
    """One helper frame's content (SPEC §2.3). Validated on construction.

    Frozen and slotted, keyword-only, compared and hashed by value like a frozen
    dataclass (assigning a field raises ``dataclasses.FrozenInstanceError``). Written by
    hand rather than with attrs or dataclasses: see the module docstring.

    Raises:
        ValueError: a field is out of its domain; the message names the field.
    """

    __slots__ = _FIELDS

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
    status: str | None
    """For ``ready``/``reply``: one of :data:`REPLY_STATUSES` (required); else None."""
    payload: Any
    """Any JSON value: the job's arguments or the reply's result. For ``progress``:
    ``{"fraction": number in [0, 1], "note": str | None}`` (note ≤ 1 KiB of UTF-8)."""
    error: dict[str, str] | None
    """``{"category", "code", "message"}`` (message ≤ 1 KiB of UTF-8); present exactly
    when ``status == "error"``. Build it with ``ActorError(...).to_record().to_dict()``."""

    def __init__(
        self,
        *,
        version: int,
        kind: str,
        session: str,
        generation: int,
        operation: str,
        status: str | None = None,
        payload: Any = None,
        error: dict[str, str] | None = None,
    ) -> None:
        _validate(version, kind, session, generation, operation, status, payload, error)
        _set(self, "version", version)
        _set(self, "kind", kind)
        _set(self, "session", session)
        _set(self, "generation", generation)
        _set(self, "operation", operation)
        _set(self, "status", status)
        _set(self, "payload", payload)
        _set(self, "error", error)

    def __setattr__(self, name: str, value: object) -> None:
        raise _frozen(name)

    def __delattr__(self, name: str) -> None:
        raise _frozen(name)

    def _astuple(
        self,
    ) -> tuple[int, str, str, int, str, str | None, Any, dict[str, str] | None]:
        return (
            self.version,
            self.kind,
            self.session,
            self.generation,
            self.operation,
            self.status,
            self.payload,
            self.error,
        )

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Envelope:
            return NotImplemented
        return self._astuple() == other._astuple()

    def __hash__(self) -> int:
        return hash(self._astuple())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELDS)
        return f"Envelope({fields})"

    def __getstate__(self) -> tuple[Any, ...]:
        return self._astuple()

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(_FIELDS, state, strict=True):
            _set(self, name, value)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON-compatible dict of every field (``None`` kept as ``null``)."""
        return dict(zip(_FIELDS, self._astuple(), strict=True))


def _trusted(
    version: int,
    kind: str,
    session: str,
    generation: int,
    operation: str,
    status: str | None,
    payload: Any,
    error: dict[str, str] | None,
) -> Envelope:
    """Build an :class:`Envelope` from fields already proven valid (no re-validation)."""
    env = _new(Envelope)
    _set(env, "version", version)
    _set(env, "kind", kind)
    _set(env, "session", session)
    _set(env, "generation", generation)
    _set(env, "operation", operation)
    _set(env, "status", status)
    _set(env, "payload", payload)
    _set(env, "error", error)
    return env


def _frame(
    version: int,
    kind: str,
    session: str,
    generation: int,
    operation: str,
    status: str | None,
    payload: Any,
    error: dict[str, str] | None,
    max_size: int,
) -> bytes:
    """Encode validated fields as one frame: the JSON text of ``to_json()``, compact.

    The fixed fields are known-safe text (ints, a kind, a hex session, a status), so
    only ``operation``, ``payload`` and ``error`` go through the JSON encoder.
    """
    try:
        text = (
            f'{{"version":{version},"kind":"{kind}","session":"{session}",'
            f'"generation":{generation},"operation":{dumps_str(operation)},'
            f'"status":{_STATUS_JSON[status]},"payload":{dumps_value(payload)},'
            f'"error":{"null" if error is None else dumps_value(error)}}}'
        ).encode()
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError too
        raise ProtocolError(
            f"envelope field 'payload' is not JSON-serialisable: {exc}", field="payload"
        ) from None
    return encode_frame(text, max_size=max_size)


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
            (e.g. a set, NaN, a non-str key, a cycle or a lone surrogate);
            ``details["field"] == "payload"``.
    """
    return _frame(*env._astuple(), max_size)


def encode_fields(
    *,
    kind: str,
    session: str,
    generation: int,
    operation: str,
    status: str | None = None,
    payload: Any = None,
    error: dict[str, str] | None = None,
    version: int = PROTOCOL_VERSION,
    max_size: int = DEFAULT_MAX_REPLY,
) -> bytes:
    """Validate the fields of an envelope and encode them as one frame, in one step.

    The same checks and the same bytes as
    ``encode_envelope(Envelope(...), max_size=max_size)``, without building the
    object: the hot path of the helper protocol (every job and every reply).

    Returns:
        The whole frame: 4-byte length prefix plus the JSON bytes.

    Raises:
        ValueError: a field is out of its domain; the message names the field.
        FrameTooLarge: (code ``frame_too_large``) the JSON is longer than ``max_size``.
        ProtocolError: (code ``protocol_error``) the payload is not JSON-serialisable;
            ``details["field"] == "payload"``.
    """
    _validate(version, kind, session, generation, operation, status, payload, error)
    return _frame(version, kind, session, generation, operation, status, payload, error, max_size)


def decode_envelope(payload: bytes) -> Envelope:
    """Parse and validate one frame's payload as an envelope (SPEC §2.3).

    Every field is checked; unknown keys are refused. The version is only checked to be
    an int here: :func:`check_reply` decides whether it is the right one.

    Args:
        payload: The frame body (without the length prefix), UTF-8 JSON.

    Returns:
        The validated :class:`Envelope`.

    Raises:
        ProtocolError: (code ``protocol_error``) not UTF-8, not JSON (a duplicate key,
            a number overflowing a double or a lone surrogate escape included), not an
            object, a missing or unknown key, or a field out of its domain. The message
            names the field and ``details["field"]`` holds it (``"<frame>"`` for the
            first three).
    """
    data = parse(payload)
    for name in _REQUIRED:
        if name not in data:
            raise ProtocolError(f"envelope field {name!r} is missing", field=name)
    if not data.keys() <= _FIELD_SET:
        unknown = sorted(data.keys() - _FIELD_SET)
        raise ProtocolError(f"envelope has unknown field {unknown[0]!r}", field=unknown[0])
    try:
        return Envelope(**data)
    except _FieldError as exc:
        raise ProtocolError(str(exc), field=exc.field) from None


def decode_fenced(
    payload: bytes,
    *,
    session: str,
    kinds: tuple[str, ...],
    generation: int | None = None,
    operation: str | None = None,
) -> Envelope:
    """Decode a frame and fence it against what we expect, in one step (SPEC §2.3).

    Equivalent to ``decode_envelope`` followed by the checks of :func:`check_reply`
    (version, kind, session, then generation and operation when given), with the same
    errors, but a well-formed frame costs one JSON parse and a few comparisons.

    Args:
        payload: The frame body (without the length prefix), UTF-8 JSON.
        session: The session the frame must belong to.
        kinds: The kinds accepted here, e.g. ``("reply", "progress")`` while a job runs.
        generation: The generation the frame must carry; None accepts any valid one
            (the helper reading a new job).
        operation: The operation the frame must carry; None accepts any valid one.

    Returns:
        The validated :class:`Envelope`.

    Raises:
        ProtocolError: (code ``protocol_error``) the frame is malformed, as for
            :func:`decode_envelope`.
        ProtocolViolation: (code ``protocol_violation``) the frame is well formed but
            not one we expect: wrong version, session, kind, generation or operation,
            or a ``ready`` with status ``cancelled``; ``details`` has ``field``,
            ``expected`` and ``got``. The caller must retire the peer.
    """
    data = parse(payload)
    # Fast path: the fields every frame has, compared with what we expect (an equal
    # str/int is valid by construction), then the two common shapes. Anything else, and
    # every refusal, goes through the general checks below, which name the field.
    g = data.get("generation")
    op = data.get("operation")
    version = data.get("version")
    kind = data.get("kind")
    if (
        type(version) is int
        and version == PROTOCOL_VERSION
        and data.get("session") == session
        and kind in kinds
        and type(g) is int
        and (g == generation if generation is not None else 0 <= g <= MAX_GENERATION)
        and (
            op == operation
            if operation is not None
            else type(op) is str and 0 < len(op) <= MAX_OPERATION_LENGTH
        )
        and data.get("error") is None
        and data.keys() <= _FIELD_SET
    ):
        status = data.get("status")
        if (status is None and kind in ("job", "cancel", "shutdown")) or (
            kind == "reply" and status in ("ok", "cancelled")
        ):
            # ``op`` equals ``operation`` or passed the str check above (no cast: hot path).
            return _trusted(version, kind, session, g, op, status, data.get("payload"), None)  # type: ignore[arg-type]
    env = decode_envelope(payload)
    _fence(env, session, kinds, generation, operation)
    return env


def check_reply(
    env: Envelope,
    *,
    session: str,
    generation: int,
    operation: str,
    kind: str = "reply",
) -> None:
    """Refuse a frame that is not for the job we are waiting on (SPEC §2.3, §3.4).

    Args:
        env: The decoded answer (or progress frame).
        session: The helper incarnation's session id.
        generation: The active job's generation.
        operation: The active job's operation.
        kind: The expected kind: ``"reply"`` for a job, ``"ready"`` for startup,
            ``"progress"`` for a progress report of the active job.

    Raises:
        ProtocolViolation: (code ``protocol_violation``) the version is not
            :data:`PROTOCOL_VERSION`, the session, generation or operation differs, the
            kind is not ``kind``, or a ``ready`` carries status ``cancelled``. The
            message names the mismatch, and ``details`` has ``field``, ``expected`` and
            ``got``. The caller must retire the helper; the answer is never a result.
        ValueError: ``kind`` is not ``"reply"``, ``"ready"`` or ``"progress"`` (a bug in
            the caller).
    """
    if kind not in ("reply", "ready", "progress"):
        raise ValueError(f"kind must be 'reply', 'ready' or 'progress', got {kind!r}")
    _fence(env, session, (kind,), generation, operation)


def _fence(
    env: Envelope,
    session: str,
    kinds: tuple[str, ...],
    generation: int | None,
    operation: str | None,
) -> None:
    expected_kind: object = kinds[0] if len(kinds) == 1 else sorted(kinds)
    checks: tuple[tuple[str, object, object, bool], ...] = (
        ("version", PROTOCOL_VERSION, env.version, env.version == PROTOCOL_VERSION),
        ("kind", expected_kind, env.kind, env.kind in kinds),
        ("session", session, env.session, env.session == session),
        ("generation", generation, env.generation, generation in (None, env.generation)),
        ("operation", operation, env.operation, operation in (None, env.operation)),
    )
    for field, expected, got, ok in checks:
        if not ok:
            raise ProtocolViolation(
                f"{_WHAT[field]}: expected {field} {expected!r}, got {got!r}",
                field=field,
                expected=expected,
                got=got,
            )
    if env.kind == "ready" and env.status == "cancelled":
        raise ProtocolViolation(
            f"bad status for a ready: got {env.status!r}",
            field="status",
            expected=["error", "ok"],
            got=env.status,
        )


_WHAT: Final = {
    "version": "wrong protocol version",
    "kind": "not the expected frame kind",
    "session": "reply from another session",
    "generation": "reply for another generation",
    "operation": "reply for another operation",
}
