"""Shared pieces of the envelope tests: a forger of binary helper frames (design §2.3).

The layout is written out here again, independently of ``protocol._envelope_wire``, so a
change to the wire format fails the tests instead of silently following them::

    >BBBBQ16sHI  magic 0xAE, version, kind code, status code, generation (u64),
                 16 session bytes, operation length (u16), payload length (u32)

then the operation (UTF-8), the payload (strict JSON; length 0 means no payload), when
bit 7 (0x80) of the status byte is set a binary part (``>I`` length, then raw bytes) and,
in the rest of the body, the error record (strict JSON; present exactly for status error).
"""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from protocol import PROTOCOL_VERSION, ProtocolError, decode_envelope

SESSION = "0123456789abcdef0123456789abcdef"
OTHER_SESSION = "fedcba9876543210fedcba9876543210"
ERROR = {"category": "transient", "code": "source_busy", "message": "try later"}

MAGIC = 0xAE
HEAD = struct.Struct(">BBBBQ16sHI")
HEAD_SIZE = 34
KIND_CODES = {
    "startup": 1,
    "ready": 2,
    "job": 3,
    "cancel": 4,
    "progress": 5,
    "reply": 6,
    "shutdown": 7,
}
STATUS_CODES: dict[str | None, int] = {None: 0, "ok": 1, "error": 2, "cancelled": 3}
BINARY_FLAG = 0x80


def base(**changes: Any) -> dict[str, Any]:
    """The fields of a valid ok reply (generation 7 of :data:`SESSION`), changed."""
    fields: dict[str, Any] = {
        "version": PROTOCOL_VERSION,
        "kind": "reply",
        "session": SESSION,
        "generation": 7,
        "operation": "metadata",
        "status": "ok",
        "payload": {"rows": 3},
        "error": None,
    }
    fields.update(changes)
    return fields


def js(value: Any) -> bytes:
    """Compact UTF-8 JSON, as the encoder writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _json_part(value: Any) -> bytes:
    # bytes are sent as they are (to forge bad JSON); None is no bytes; anything else JSON
    if isinstance(value, bytes):
        return value
    return b"" if value is None else js(value)


def raw(
    *,
    magic: int = MAGIC,
    version: int = PROTOCOL_VERSION,
    kind: str = "reply",
    status: str | None = "ok",
    kind_code: int | None = None,
    status_code: int | None = None,
    generation: int = 7,
    session: str | bytes = SESSION,
    operation: str | bytes = "metadata",
    payload: Any = b'{"rows":3}',
    error: Any = None,
    op_len: int | None = None,
    payload_len: int | None = None,
    binary: bytes | None = None,
    binary_len: int | None = None,
) -> bytes:
    """Forge one frame body (without the 4-byte length prefix), byte by byte.

    ``kind`` / ``status`` are looked up in the tables above unless ``kind_code`` /
    ``status_code`` give the byte itself. ``session`` as str is hex, as bytes the raw 16
    bytes. ``operation`` as str is UTF-8 encoded, as bytes sent as is. ``payload`` and
    ``error`` as bytes are sent as is, None is no bytes, anything else compact JSON.
    ``op_len`` / ``payload_len`` override the declared lengths (to make them lie).
    ``binary`` (bytes) is a binary part: the status byte gets bit 7 and the part, behind
    its 4-byte length (``binary_len`` overrides it), follows the payload.
    """
    op = operation.encode() if isinstance(operation, str) else operation
    body = _json_part(payload)
    record = _json_part(error)
    status_byte = STATUS_CODES[status] if status_code is None else status_code
    if binary is not None:
        status_byte |= BINARY_FLAG
        size = len(binary) if binary_len is None else binary_len
        body += size.to_bytes(4, "big") + binary
    head = HEAD.pack(
        magic,
        version,
        KIND_CODES[kind] if kind_code is None else kind_code,
        status_byte,
        generation,
        bytes.fromhex(session) if isinstance(session, str) else session,
        len(op) if op_len is None else op_len,
        len(_json_part(payload)) if payload_len is None else payload_len,
    )
    return head + op + body + record


def framed(body: bytes) -> bytes:
    """``body`` behind its 4-byte big-endian length prefix (design §2.2)."""
    return len(body).to_bytes(4, "big") + body


def check_bounded(error: ProtocolError) -> None:
    """A refusal's message stays short, and so does its record's."""
    assert error.code in ("protocol_error", "protocol_violation")
    assert len(error.message) < 2000
    assert len(error.to_record().message.encode()) <= 1024


def refusal(body: bytes) -> ProtocolError:
    """Decode ``body``, which must be refused with a plain, bounded ``ProtocolError``."""
    with pytest.raises(ProtocolError) as info:
        decode_envelope(body)
    error = info.value
    assert type(error) is ProtocolError
    assert error.code == "protocol_error"
    check_bounded(error)
    return error
