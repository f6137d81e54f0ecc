"""The envelope of every helper frame, and the checks that fence replies (design §2.3).

Each frame between the supervisor and a helper process carries one envelope: a fixed
binary head (version, kind, status, generation, session, lengths; the layout is in
``protocol._envelope_wire`` and design §2.3), the operation name, the payload and error
record as strict JSON, and maybe a binary part: raw bytes beside the payload, for which
the payload is a :class:`Blob` (its JSON ``head`` and its ``data``). In Python a frame is
an :class:`Envelope`::

    Envelope(version=2, kind="reply", session="<32 hex>", generation=7,
             operation="metadata", status="ok", payload={...}, error=None)

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
decodes and fences in one step, accepting a well-formed frame with a handful of integer
and byte comparisons against the values it expects and falling back to the general
(slower, field-naming) checks for anything else. Both give exactly the errors of the
general way.

This module imports only :mod:`protocol.errors` / :mod:`protocol.framing`, the layout of
``protocol._envelope_wire`` (stdlib ``struct``), the field checks of
``protocol._envelope_checks``, the value class of ``protocol._envelope_value`` and
the strict JSON of ``protocol._strict_json`` (stdlib ``json``): the helper child
process imports it and must start fast. That is why :class:`Envelope` is a small
hand-written frozen class (a tuple underneath: a decoder builds one per frame) and not
an attrs class like the client messages (start-up time wins over uniformity here), nor a
dataclass (``import dataclasses`` pulls in ``inspect`` and costs a helper ~9 ms of start-up), why
``secrets`` is imported only by :func:`new_session` (the parent's business), and why the
error record travels as a plain dict. :func:`encode_positional` and
:func:`decode_positional` are the same calls without keywords, for the per-job hot path.
"""

from __future__ import annotations

from ._blob import MAX_BLOB_BYTES, Blob, trusted_blob
from ._envelope_checks import (
    ANSWER_KINDS,
    ENVELOPE_KINDS,
    MAX_GENERATION,
    MAX_OPERATION_LENGTH,
    MAX_PROGRESS_NOTE_BYTES,
    REPLY_STATUSES,
    FieldError,
    is_error_code,
    validate,
)
from ._envelope_value import Envelope
from ._envelope_wire import (
    BINARY_FLAG,
    BINARY_LENGTH_SIZE,
    BODY_HEADER,
    BODY_PARTS,
    FRAME_PARTS,
    KIND_CODES,
    KIND_NAMES,
    MAGIC,
    MAX_VERSION,
    STATUS_CODES,
    STATUS_NAMES,
)
from ._strict_json import (
    SURROGATE_ESCAPE,
    c_encode,
    dumps_value,
    encodes_as_utf8,
    parse,
    scan,
)
from .errors import FrameTooLarge, ProtocolError, ProtocolViolation
from .framing import DEFAULT_MAX_REPLY, MAX_FRAME_LIMIT, _check_limit

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the child ~3 ms
if TYPE_CHECKING:
    from typing import Any, Final

__all__ = [
    "ANSWER_KINDS",
    "MAX_BLOB_BYTES",
    "ENVELOPE_KINDS",
    "MAX_GENERATION",
    "MAX_OPERATION_LENGTH",
    "MAX_PROGRESS_NOTE_BYTES",
    "MAX_VERSION",
    "PROTOCOL_VERSION",
    "REPLY_STATUSES",
    "SURROGATE_ESCAPE",
    "Blob",
    "Envelope",
    "check_reply",
    "decode_envelope",
    "decode_fenced",
    "decode_positional",
    "encode_envelope",
    "encode_fields",
    "encode_positional",
    "encodes_as_utf8",
    "is_error_code",
    "new_session",
]

#: Version of the helper protocol this code speaks (design §2.3). Version 2: the binary
#: head of ``protocol._envelope_wire`` (version 1 was all JSON).
PROTOCOL_VERSION: Final = 2

_HEAD: Final = BODY_HEADER.size  # 34 bytes of fixed fields before the operation
_unpack_head = BODY_HEADER.unpack_from
_unpack_parts = BODY_PARTS.unpack_from
_pack_frame_parts = FRAME_PARTS.pack
_REQUEST_KINDS: Final = ("job", "cancel", "shutdown")
_PLAIN_STATUSES: Final = ("ok", "cancelled")

#: Sessions that passed validation → their 16 bytes. Each side speaks a few sessions at
#: a time (one per helper), so the hot path checks a session with one dict lookup and
#: converts it once. Cleared when it grows past a bound (helpers come and go).
_known_sessions: dict[str, bytes] = {}
_MAX_KNOWN_SESSIONS: Final = 256


#: Operations that passed validation → their UTF-8 bytes: the hot path encodes a job's
#: operation once, and fences a reply's operation by comparing bytes (no decode). The
#: same few names recur; cleared when it grows past a bound.
_known_operations: dict[str, bytes] = {}
#: The same names the other way round (bytes → name), for a frame read without an
#: expected operation (the helper reading a job): a known name is neither decoded nor
#: checked again. Kept in step with ``_known_operations`` by :func:`_learn_operation`.
_operation_names: dict[bytes, str] = {}
_MAX_KNOWN_OPERATIONS: Final = 256
#: Frame shapes encoded before, ``(kind, session, operation, status)`` → the constant
#: parts of their head (see :func:`_frame_shape`): a job or reply then skips the field
#: checks its shape passed already. Cleared when it grows past a bound.
_shapes: dict[tuple[str, str, str, str | None], tuple[bytes, bytes, bytes]] = {}
_MAX_SHAPES: Final = 1024
#: ``Envelope`` from fields already proven valid: ``_envelope_value.trusted`` without
#: its call (the decoder builds one per frame).
_new_envelope = tuple.__new__
#: ``kinds`` of :func:`decode_positional` → its fast path's accepted heads (see
#: :func:`_accepted_for`); callers pass a few constant tuples.
_accepted_heads: dict[tuple[str, ...], dict[bytes, tuple[str, str | None, int]]] = {}
_MAX_ACCEPTED_HEADS: Final = 64


def _accepted_for(kinds: tuple[str, ...]) -> dict[bytes, tuple[str, str | None, int]]:
    """The fast path's heads for a frame of one of ``kinds``: the first 4 bytes (magic,
    version, kind, status) of each shape it takes (a request, an ok or cancelled reply,
    each with or without a binary part; not a progress frame, whose payload has its own
    checks) → that kind, that status and the binary flag (0 or :data:`BINARY_FLAG`)."""
    heads: dict[bytes, tuple[str, str | None, int]] = {}
    for kind in kinds:
        statuses: tuple[str | None, ...] = ()
        if kind in _REQUEST_KINDS:
            statuses = (None,)
        elif kind == "reply":
            statuses = _PLAIN_STATUSES
        for status in statuses:
            for binary in (0, BINARY_FLAG):
                status_byte = STATUS_CODES[status] | binary
                code = bytes((MAGIC, PROTOCOL_VERSION, KIND_CODES[kind], status_byte))
                heads[code] = (KIND_NAMES[code[2]], status, binary)  # type: ignore[assignment]
    if type(kinds) is tuple and all(type(kind) is str for kind in kinds):  # hashable
        if len(_accepted_heads) >= _MAX_ACCEPTED_HEADS:
            _accepted_heads.clear()
        _accepted_heads[kinds] = heads
    return heads


def _learn_session(session: str) -> bytes:
    """Remember a session that has just passed validation; return its bytes."""
    if len(_known_sessions) >= _MAX_KNOWN_SESSIONS:
        _known_sessions.clear()
        _shapes.clear()  # a shape's frames must keep teaching the decoder their session
    raw = _known_sessions[session] = bytes.fromhex(session)
    return raw


def _learn_operation(operation: str, raw: bytes) -> None:
    """Remember an operation name that has just passed validation, and its bytes."""
    if len(_known_operations) >= _MAX_KNOWN_OPERATIONS:
        _known_operations.clear()
        _operation_names.clear()
        _shapes.clear()  # ... and their operation
    _known_operations[operation] = raw
    _operation_names[raw] = operation


def new_session() -> str:
    """Return a fresh session id: 128 random bits as 32 lowercase hex characters."""
    import secrets  # here, not at the top: only the parent makes sessions (start-up cost)

    return secrets.token_hex(16)


def encode_envelope(env: Envelope, *, max_size: int = DEFAULT_MAX_REPLY) -> bytes:
    """Serialise ``env`` as one frame (design §2.2, §2.3; layout in ``_envelope_wire``).

    Args:
        env: The envelope.
        max_size: Largest allowed frame body, in bytes (default 1 MiB; use
            :data:`protocol.DEFAULT_MAX_REQUEST` for parent → helper frames).

    Returns:
        The whole frame (4-byte length prefix, 34-byte head, operation in UTF-8,
        payload and error record in compact UTF-8 JSON; an absent payload takes no
        bytes). A :class:`Blob` payload is its ``head`` as the JSON payload and its
        ``data`` as the binary part, raw, behind its 4-byte length (design §2.3).

    Raises:
        FrameTooLarge: (code ``frame_too_large``) the body is longer than ``max_size``;
            ``details`` has ``size`` and ``limit``, and ``field`` ``"data"`` when the
            frame has a binary part (its size is in the message).
        ProtocolError: (code ``protocol_error``) the payload is not JSON-serialisable
            (e.g. a set, NaN, a tuple or object key, a cycle or a lone surrogate):
            ``details["field"] == "payload"``; the operation or the error record's
            message holds a lone surrogate: ``"operation"`` / ``"error"``.

    Dict keys that are ints, floats, bools or None are written as strings, as
    :mod:`json` does; two keys of one dict that become the same string (``1`` and
    ``"1"``) make a frame the receiver refuses as a duplicate key.
    """
    return encode_positional(
        env.kind,
        env.session,
        env.generation,
        env.operation,
        env.status,
        env.payload,
        env.error,
        max_size,
        env.version,
    )


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
        The whole frame, as :func:`encode_envelope` returns it.

    Raises:
        ValueError: a field is out of its domain; the message names the field.
        FrameTooLarge: (code ``frame_too_large``) the body is longer than ``max_size``.
        ProtocolError: (code ``protocol_error``) as for :func:`encode_envelope`.
    """
    return encode_positional(
        kind, session, generation, operation, status, payload, error, max_size, version
    )


def encode_positional(
    kind: str,
    session: str,
    generation: int,
    operation: str,
    status: str | None,
    payload: Any,
    error: dict[str, str] | None,
    max_size: int,
    version: int = PROTOCOL_VERSION,
) -> bytes:
    """:func:`encode_fields` with positional arguments (keywords cost a hot path more).

    For the helper protocol's own per-job calls; same checks, bytes and errors.
    """
    # A frame of a shape encoded before (its kind, session, operation and status checked
    # then) costs one dict lookup; the generation and version are checked every time.
    try:
        shape = _shapes.get((kind, session, operation, status))
    except TypeError:  # an unhashable field: the general checks name it
        shape = None
    if (
        shape is None
        or error is not None
        or type(generation) is not int
        or not 0 <= generation <= MAX_GENERATION
        or type(version) is not int
        or version != PROTOCOL_VERSION
    ):
        shape = _frame_shape(
            kind, session, generation, operation, status, payload, error, version, max_size
        )
    elif type(max_size) is not int or not 0 <= max_size <= MAX_FRAME_LIMIT:
        _check_limit(max_size)  # raises the TypeError/ValueError that names it
    prefix, middle, op = shape
    data = None
    if payload.__class__ is Blob:  # a binary part beside the JSON head (design §2.3)
        payload, data = payload
    try:
        if payload is None:
            body = b""
        elif c_encode is not None:  # dumps_value inlined: one call less per frame
            body = "".join(c_encode(payload, 0)).encode()
        else:
            body = dumps_value(payload).encode()
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError too
        raise ProtocolError(
            f"envelope field 'payload' is not JSON-serialisable: {exc}", field="payload"
        ) from None
    try:
        record = b"" if error is None else dumps_value(error).encode()
    except ValueError as exc:  # a lone surrogate in the message
        raise ProtocolError(
            f"envelope field 'error' is not valid Unicode: {exc}", field="error"
        ) from None
    if data is not None:
        return _with_binary(prefix, generation, middle, op, body, data, record, max_size)
    size = _HEAD + len(op) + len(body) + len(record)
    if size > max_size:
        raise FrameTooLarge(
            f"frame payload is {size} bytes, over the limit of {max_size} bytes",
            size=size,
            limit=max_size,
        )
    frame = _pack_frame_parts(size, prefix, generation, middle, len(body)) + op + body
    return frame + record if record else frame


def _with_binary(
    prefix: bytes,
    generation: int,
    middle: bytes,
    op: bytes,
    body: bytes,
    data: bytes | bytearray | memoryview,
    record: bytes,
    max_size: int,
) -> bytes:
    """The frame of :func:`encode_positional` whose payload is a :class:`Blob`: the
    status byte's :data:`BINARY_FLAG` set, the binary part after the JSON payload."""
    n = len(data)  # bytes: a Blob's memoryview is cast to unsigned bytes
    size = _HEAD + len(op) + len(body) + BINARY_LENGTH_SIZE + n + len(record)
    if size > max_size:
        raise FrameTooLarge(
            f"frame payload is {size} bytes, over the limit of {max_size} bytes: its "
            f"binary part (field 'data') is {n} bytes",
            size=size,
            limit=max_size,
            field="data",
        )
    head = _pack_frame_parts(
        size, prefix[:3] + bytes((prefix[3] | BINARY_FLAG,)), generation, middle, len(body)
    )
    # One copy of the bytes, into the frame; no base64, no JSON string.
    return b"".join((head, op, body, n.to_bytes(BINARY_LENGTH_SIZE, "big"), data, record))


def _frame_shape(
    kind: str,
    session: str,
    generation: int,
    operation: str,
    status: str | None,
    payload: Any,
    error: dict[str, str] | None,
    version: int,
    max_size: int,
) -> tuple[bytes, bytes, bytes]:
    """:func:`encode_positional`'s checks for a frame whose shape it has not seen.

    Returns the constant parts of the frame's head (``FRAME_PARTS``' magic, version,
    kind and status; the session and operation length) and the operation's bytes, and
    remembers them for the hot path's shapes: a request, or an ok or cancelled reply,
    of the current version, without an error record. Their other checks involve only
    the generation and the limits, which :func:`encode_positional` makes on every
    frame (the payload of such a frame is any JSON value).

    Raises:
        ValueError, FrameTooLarge, ProtocolError: as :func:`encode_fields`.
    """
    raw_session = _known_sessions.get(session)
    plain = (
        error is None
        and type(operation) is str
        and 0 < len(operation) <= MAX_OPERATION_LENGTH
        and type(version) is int
        and version == PROTOCOL_VERSION
        and (
            (status is None and kind in _REQUEST_KINDS)
            or (kind == "reply" and status in _PLAIN_STATUSES)
        )
    )
    if not (
        plain
        and raw_session is not None
        and type(generation) is int
        and 0 <= generation <= MAX_GENERATION
    ):
        validate(version, kind, session, generation, operation, status, payload, error)
        if raw_session is None:
            raw_session = _learn_session(session)
    if type(max_size) is not int or not 0 <= max_size <= MAX_FRAME_LIMIT:
        _check_limit(max_size)  # raises the TypeError/ValueError that names it
    op = _known_operations.get(operation)
    if op is None:
        try:
            op = operation.encode()
        except UnicodeEncodeError:
            raise ProtocolError(
                "envelope field 'operation' is not valid Unicode (a lone surrogate)",
                field="operation",
            ) from None
        if type(operation) is str:  # validated above; a subclass could compare oddly
            _learn_operation(operation, op)
    shape = (
        bytes((MAGIC, version, KIND_CODES[kind], STATUS_CODES[status])),
        raw_session + len(op).to_bytes(2, "big"),
        op,
    )
    if plain and type(kind) is str and type(session) is str:
        if len(_shapes) >= _MAX_SHAPES:
            _shapes.clear()
        _shapes[(kind, session, operation, status)] = shape
    return shape


def decode_envelope(payload: bytes) -> Envelope:
    """Parse and validate one frame's body as an envelope (design §2.3).

    Every field is checked. The version is only checked to be a byte here:
    :func:`check_reply` decides whether it is the right one.

    Args:
        payload: The frame body (without the length prefix).

    Returns:
        The validated :class:`Envelope`.

    Raises:
        ProtocolError: (code ``protocol_error``) the body is shorter than its head,
            does not start with the magic byte, or declares more operation and payload
            bytes than it carries (``details["field"] == "<frame>"``); an unknown kind
            or status code; an operation that is not UTF-8; a payload or error record
            that is not strict UTF-8 JSON (a duplicate key, a number overflowing a
            double, a lone surrogate escape or nesting too deep included); a binary
            part whose length field is cut off or declares more bytes than the body
            carries (field ``data``); or a field out of its domain. The message names
            the field and ``details["field"]`` holds it.

    A binary part decodes to a :class:`Blob` payload whose ``data`` is a read-only
    ``memoryview`` of ``payload`` when that is ``bytes`` (no copy), else a copy.
    """
    size = len(payload)
    if size < _HEAD:
        raise ProtocolError(
            f"envelope is {size} bytes, shorter than its {_HEAD}-byte head", field="<frame>"
        )
    magic, version, kind_code, status_code, generation, raw_session, op_size, body_size = (
        _unpack_head(payload)
    )
    if magic != MAGIC:
        raise ProtocolError(
            f"not an envelope: it starts with byte 0x{magic:02x}, not 0x{MAGIC:02x}",
            field="<frame>",
        )
    end = _HEAD + op_size + body_size
    if end > size:
        raise ProtocolError(
            f"envelope declares {op_size} bytes of operation and {body_size} of payload,"
            f" but carries {size - _HEAD}",
            field="<frame>",
        )
    kind = KIND_NAMES[kind_code]
    if kind is None:
        raise ProtocolError(f"envelope field 'kind': {kind_code} is not a kind code", field="kind")
    binary = status_code & BINARY_FLAG
    status_code &= ~BINARY_FLAG
    if status_code >= len(STATUS_NAMES):
        raise ProtocolError(
            f"envelope field 'status': {status_code} is not a status code", field="status"
        )
    try:
        operation = str(payload[_HEAD : _HEAD + op_size], "utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            f"envelope field 'operation' is not UTF-8: {exc}", field="operation"
        ) from None
    body = None if body_size == 0 else parse(payload[_HEAD + op_size : end], "payload")
    if binary:
        data, end = _binary_part(payload, end)
        body = trusted_blob(body, data)
    if end != size and status_code != STATUS_CODES["error"]:
        # Even a JSON null here: only one encoding of "no error record" (none at all).
        raise ProtocolError(
            "envelope field 'error': only a status 'error' answer carries an error record",
            field="error",
        )
    error = None if end == size else parse(payload[end:], "error")
    try:
        return Envelope(
            version=version,
            kind=kind,
            session=raw_session.hex(),
            generation=generation,
            operation=operation,
            status=STATUS_NAMES[status_code],
            payload=body,
            error=error,
        )
    except FieldError as exc:
        raise ProtocolError(
            f"envelope field {exc.field!r}: {exc.reason}", field=exc.field
        ) from None


def _binary_part(payload: bytes, start: int) -> tuple[bytes | memoryview, int]:
    """The binary part that starts at ``start`` of a frame body, and where it ends.

    A view of ``payload`` when it is ``bytes`` (immutable: the view is safe to hand
    on, no copy); a copy of anything else, which its owner could change.

    Raises:
        ProtocolError: (code ``protocol_error``, ``details["field"] == "data"``) the
            length field, or the bytes it declares, run past the end of the body.
    """
    size = len(payload)
    stop = start + BINARY_LENGTH_SIZE
    if stop > size:
        raise ProtocolError(
            f"envelope field 'data': the binary part's {BINARY_LENGTH_SIZE}-byte length is"
            f" cut off ({size - start} bytes left)",
            field="data",
        )
    n = int.from_bytes(payload[start:stop], "big")
    end = stop + n
    if end > size:
        raise ProtocolError(
            f"envelope field 'data': the binary part declares {n} bytes but the frame"
            f" carries {size - stop}",
            field="data",
        )
    if type(payload) is bytes:
        return memoryview(payload)[stop:end], end
    return bytes(payload[stop:end]), end


def decode_fenced(
    payload: bytes,
    *,
    session: str,
    kinds: tuple[str, ...],
    generation: int | None = None,
    operation: str | None = None,
) -> Envelope:
    """Decode a frame and fence it against what we expect, in one step (design §2.3).

    Equivalent to ``decode_envelope`` followed by the checks of :func:`check_reply`
    (version, kind, session, then generation and operation when given), with the same
    errors, but a well-formed frame costs a few integer and byte comparisons and the
    JSON parse of its payload.

    Args:
        payload: The frame body (without the length prefix).
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
    return decode_positional(payload, session, kinds, generation, operation)


def decode_positional(
    payload: bytes,
    session: str,
    kinds: tuple[str, ...],
    generation: int | None = None,
    operation: str | None = None,
) -> Envelope:
    """:func:`decode_fenced` with positional arguments (keywords cost a hot path more).

    For the helper protocol's own per-frame calls; same checks, result and errors.
    """
    # Fast path: the head compared with what we expect, for the two common shapes (a
    # request, and an ok or cancelled reply; no error record). Anything else, and every
    # refusal, goes through the general checks, which name the field.
    expected_session = _known_sessions.get(session)
    if expected_session is not None and len(payload) >= _HEAD:
        try:
            accepted = _accepted_heads[kinds]
        except (KeyError, TypeError):
            accepted = _accepted_for(kinds)
        prefix, g, raw_session, op_size, body_size = _unpack_parts(payload)
        shape = accepted.get(prefix)  # magic, version, kind and status in one lookup
        start = _HEAD + op_size
        stop = start + body_size  # where the payload ends
        end = stop  # where the payload and the binary part end
        if shape is not None and shape[2]:  # a binary part: its length, then its bytes
            end = stop + BINARY_LENGTH_SIZE + int.from_bytes(payload[stop : stop + 4], "big")
        if (
            shape is not None
            and end == len(payload)
            and raw_session == expected_session
            and g <= MAX_GENERATION
            and (generation is None or g == generation)
        ):
            op: str | None = None
            raw_op = payload[_HEAD:start]
            if operation is not None:
                # A known operation was validated when its job was encoded: equal
                # bytes are the same (valid) name, without decoding them.
                if raw_op == _known_operations.get(operation):
                    op = operation
            else:
                op = _operation_names.get(raw_op)
                if op is None:
                    try:
                        op = raw_op.decode()
                    except UnicodeDecodeError:
                        op = None
                    else:
                        if 0 < len(op) <= MAX_OPERATION_LENGTH:
                            _learn_operation(op, raw_op)
                        else:
                            op = None
            if op is not None:
                body = None
                if body_size:
                    # parse() inlined for the plain case; anything else (bad UTF-8,
                    # not JSON, trailing bytes, a \u escape to check) goes through it.
                    try:
                        text = payload[start:stop].decode()
                        body, parsed = scan(text, 0)
                    except (ValueError, RecursionError, StopIteration):
                        text, parsed = "", -1
                    if parsed != len(text) or "\\u" in text:
                        body = parse(payload[start:stop], "payload")
                kind, status, binary = shape
                if binary:
                    start = stop + BINARY_LENGTH_SIZE
                    body = trusted_blob(
                        body,
                        memoryview(payload)[start:]
                        if type(payload) is bytes
                        else bytes(payload[start:]),
                    )
                return _new_envelope(
                    Envelope, (PROTOCOL_VERSION, kind, session, g, op, status, body, None)
                )
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
    """Refuse a frame that is not for the job we are waiting on (design §2.3, §3.4).

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
