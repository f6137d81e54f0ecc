"""Tests for protocol.envelope: the helper frame envelope and reply fencing (SPEC §2.3)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from protocol import (
    DEFAULT_MAX_REQUEST,
    MAX_GENERATION,
    PROTOCOL_VERSION,
    Envelope,
    FrameDecoder,
    FrameTooLarge,
    ProtocolError,
    ProtocolViolation,
    check_reply,
    decode_envelope,
    encode_envelope,
    new_session,
)

SESSION = "0123456789abcdef0123456789abcdef"
OTHER_SESSION = "fedcba9876543210fedcba9876543210"
ERROR = {"category": "transient", "code": "source_busy", "message": "try later"}


def base(**changes: Any) -> dict[str, Any]:
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


def raw(**changes: Any) -> bytes:
    return json.dumps(base(**changes)).encode()


def roundtrip(env: Envelope) -> Envelope:
    frame = encode_envelope(env)
    (payload,) = FrameDecoder(max_size=len(frame)).feed(frame)
    return decode_envelope(payload)


def test_new_session_is_128_random_bits_in_hex() -> None:
    sessions = {new_session() for _ in range(50)}
    assert len(sessions) == 50
    for session in sessions:
        assert len(session) == 32
        int(session, 16)
        assert session == session.lower()


@pytest.mark.parametrize(
    "env",
    [
        Envelope(version=1, kind="startup", session=SESSION, generation=0, operation="startup"),
        Envelope(
            version=1,
            kind="ready",
            session=SESSION,
            generation=0,
            operation="startup",
            status="ok",
            payload={"pid": 1234, "opened": "db.sqlite"},
        ),
        Envelope(
            version=1,
            kind="job",
            session=SESSION,
            generation=MAX_GENERATION,
            operation="thumbnail",
            payload=[1, 2.5, "é", None, True, {"nested": []}],
        ),
        Envelope(version=1, kind="cancel", session=SESSION, generation=3, operation="x"),
        Envelope(**base()),
        Envelope(**base(status="cancelled", payload=None)),
        Envelope(**base(status="error", payload=None, error=ERROR)),
        Envelope(version=1, kind="shutdown", session=SESSION, generation=9, operation="shutdown"),
    ],
)
def test_roundtrip(env: Envelope) -> None:
    assert roundtrip(env) == env


def test_encoding_is_compact_json_in_one_frame() -> None:
    frame = encode_envelope(Envelope(**base()))
    length = int.from_bytes(frame[:4], "big")
    assert length == len(frame) - 4
    text = frame[4:].decode()
    assert ": " not in text
    assert ", " not in text
    assert json.loads(text) == base()


def test_encode_respects_limit() -> None:
    env = Envelope(**base(kind="job", status=None, payload="x" * DEFAULT_MAX_REQUEST))
    with pytest.raises(FrameTooLarge):
        encode_envelope(env, max_size=DEFAULT_MAX_REQUEST)
    assert len(encode_envelope(env)) > DEFAULT_MAX_REQUEST


@pytest.mark.parametrize("payload", [{1, 2}, float("nan"), object()])
def test_encode_refuses_non_json_payload(payload: object) -> None:
    env = Envelope(**base(payload=payload))
    with pytest.raises(ProtocolError) as info:
        encode_envelope(env)
    assert info.value.details == {"field": "payload"}


def test_envelope_is_frozen_and_slotted() -> None:
    env = Envelope(**base())
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.generation = 8  # type: ignore[misc]
    assert not hasattr(env, "__dict__")
    with pytest.raises(TypeError):
        Envelope(1, "reply", SESSION, 7, "metadata")  # type: ignore[misc]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"version": True}, "version"),
        ({"version": "1"}, "version"),
        ({"version": -1}, "version"),
        ({"kind": "result"}, "kind"),
        ({"kind": None}, "kind"),
        ({"kind": []}, "kind"),
        ({"status": {}}, "status"),
        ({"session": SESSION.upper()}, "session"),
        ({"session": SESSION[:-1]}, "session"),
        ({"session": 5}, "session"),
        ({"generation": True}, "generation"),
        ({"generation": 1.0}, "generation"),
        ({"generation": -1}, "generation"),
        ({"generation": MAX_GENERATION + 1}, "generation"),
        ({"operation": ""}, "operation"),
        ({"operation": "x" * 129}, "operation"),
        ({"operation": 3}, "operation"),
        ({"status": None}, "status"),
        ({"status": "done"}, "status"),
        ({"kind": "job"}, "status"),
        ({"status": "error"}, "error"),
        ({"error": ERROR}, "error"),
        ({"status": "error", "error": {**ERROR, "extra": 1}}, "error"),
        ({"status": "error", "error": {"code": "x", "message": ""}}, "error"),
        ({"status": "error", "error": {**ERROR, "category": "fatal"}}, "error"),
        ({"status": "error", "error": {**ERROR, "code": "Not Snake"}}, "error"),
        ({"status": "error", "error": {**ERROR, "message": "x" * 1025}}, "error"),
        ({"status": "error", "error": {**ERROR, "message": 5}}, "error"),
        ({"status": "error", "error": "boom"}, "error"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_decode_names_the_bad_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_envelope(raw(**changes))
    assert type(info.value) is ProtocolError
    assert info.value.code == "protocol_error"
    assert info.value.details["field"] == field
    assert repr(field) in str(info.value)


@pytest.mark.parametrize("missing", ["version", "kind", "session", "generation", "operation"])
def test_decode_names_missing_field(missing: str) -> None:
    fields = base()
    del fields[missing]
    with pytest.raises(ProtocolError, match=missing) as info:
        decode_envelope(json.dumps(fields).encode())
    assert info.value.details == {"field": missing}


def test_optional_fields_default() -> None:
    env = decode_envelope(
        json.dumps(
            {"version": 1, "kind": "job", "session": SESSION, "generation": 1, "operation": "x"}
        ).encode()
    )
    assert (env.status, env.payload, env.error) == (None, None, None)


@pytest.mark.parametrize(
    "payload",
    [b"", b"not json", b"\xff\xfe\x00", b"[1, 2]", b'"text"', b"NaN", b"[" * 100_000],
)
def test_decode_rejects_non_object_frames(payload: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_envelope(payload)
    assert info.value.details == {"field": "<frame>"}


def test_decode_rejects_nan_inside_payload() -> None:
    with pytest.raises(ProtocolError):
        decode_envelope(raw()[:-1] + b', "x": NaN}')


def test_constructor_validates_too() -> None:
    with pytest.raises(ValueError, match="generation"):
        Envelope(**base(generation=True))


def test_check_reply_accepts_the_matching_reply() -> None:
    for status in ("ok", "cancelled"):
        check_reply(
            Envelope(**base(status=status)), session=SESSION, generation=7, operation="metadata"
        )
    check_reply(
        Envelope(**base(status="error", payload=None, error=ERROR)),
        session=SESSION,
        generation=7,
        operation="metadata",
    )


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"version": 2}, "version", "wrong protocol version"),
        ({"session": OTHER_SESSION}, "session", "another session"),
        ({"generation": 6}, "generation", "another generation"),
        ({"generation": 8}, "generation", "another generation"),
        ({"operation": "preview"}, "operation", "another operation"),
        ({"kind": "ready"}, "kind", "kind"),
    ],
)
def test_check_reply_names_the_mismatch(changes: dict[str, Any], field: str, words: str) -> None:
    env = decode_envelope(raw(**changes))
    with pytest.raises(ProtocolViolation, match=words) as info:
        check_reply(env, session=SESSION, generation=7, operation="metadata")
    assert info.value.code == "protocol_violation"
    assert info.value.details["field"] == field
    assert info.value.details["got"] == changes[field]


def test_check_reply_refuses_a_request_kind() -> None:
    env = Envelope(**base(kind="job", status=None))
    with pytest.raises(ProtocolViolation, match="kind") as info:
        check_reply(env, session=SESSION, generation=7, operation="metadata")
    assert info.value.details == {"field": "kind", "expected": "reply", "got": "job"}


def test_check_ready_at_startup() -> None:
    ready = Envelope(**base(kind="ready", generation=0, operation="startup"))
    check_reply(ready, session=SESSION, generation=0, operation="startup", kind="ready")
    cancelled = Envelope(
        **base(kind="ready", generation=0, operation="startup", status="cancelled")
    )
    with pytest.raises(ProtocolViolation, match="status") as info:
        check_reply(cancelled, session=SESSION, generation=0, operation="startup", kind="ready")
    assert info.value.details["field"] == "status"


def test_encode_refuses_cyclic_payload() -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(ProtocolError):
        encode_envelope(Envelope(**base(payload=cycle)))


def test_check_reply_expects_an_answer_kind() -> None:
    with pytest.raises(ValueError, match="kind"):
        check_reply(
            Envelope(**base()), session=SESSION, generation=7, operation="metadata", kind="job"
        )
