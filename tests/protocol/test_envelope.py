"""Tests for protocol.envelope: the helper frame envelope and reply fencing (design §2.3).

Frames are forged byte by byte with ``envelope_support.raw`` (the binary head of
``protocol._envelope_wire``, written out independently).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

import pytest
from envelope_support import (
    ERROR,
    HEAD,
    HEAD_SIZE,
    KIND_CODES,
    MAGIC,
    OTHER_SESSION,
    SESSION,
    STATUS_CODES,
    base,
    js,
    raw,
)

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
from protocol.envelope import (
    MAX_VERSION,
    SURROGATE_ESCAPE,
    decode_fenced,
    encode_fields,
    encodes_as_utf8,
)
from protocol.framing import MAX_FRAME_LIMIT


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


def test_protocol_version_fits_the_version_byte() -> None:
    assert PROTOCOL_VERSION == 2  # version 1 was all JSON
    assert MAX_VERSION == 255


PROGRESS = {"fraction": 0.25, "note": "page 1 of 4"}


def progress(**changes: Any) -> dict[str, Any]:
    return base(**{"kind": "progress", "status": None, "payload": PROGRESS, **changes})


#: One envelope of every kind, and of every status an answer may carry.
EVERY_KIND = [
    base(kind="startup", status=None, generation=0, operation="startup", payload=None),
    base(kind="ready", generation=0, operation="startup", payload={"pid": 1, "opened": "db"}),
    base(
        kind="ready", generation=0, operation="startup", status="error", payload=None, error=ERROR
    ),
    base(
        kind="job",
        status=None,
        generation=MAX_GENERATION,
        operation="thumbnail",
        payload=[1, 2.5, "é", None, True, {"nested": []}],
    ),
    base(kind="cancel", status=None, generation=3, operation="x", payload=None),
    progress(),
    base(),
    base(status="cancelled", payload=None),
    base(status="error", payload=None, error=ERROR),
    base(status="error", payload={"partial": [1]}, error=ERROR),
    base(kind="shutdown", status=None, generation=9, operation="shutdown", payload=None),
]


def kind_status(fields: dict[str, Any]) -> str:
    return f"{fields['kind']}-{fields['status']}"


@pytest.mark.parametrize("fields", EVERY_KIND, ids=kind_status)
def test_roundtrip(fields: dict[str, Any]) -> None:
    env = Envelope(**fields)
    assert roundtrip(env) == env
    assert roundtrip(env).to_json() == fields


@pytest.mark.parametrize("fields", EVERY_KIND, ids=kind_status)
def test_kind_and_status_codes_on_the_wire(fields: dict[str, Any]) -> None:
    body = encode_envelope(Envelope(**fields))[4:]
    magic, version, kind_code, status_code, generation, session, op_size, _ = HEAD.unpack_from(body)
    assert (magic, version) == (MAGIC, PROTOCOL_VERSION)
    assert kind_code == KIND_CODES[fields["kind"]]
    assert status_code == STATUS_CODES[fields["status"]]
    assert generation == fields["generation"]
    assert session == bytes.fromhex(SESSION)
    assert body[HEAD_SIZE : HEAD_SIZE + op_size] == fields["operation"].encode()
    assert body == raw(**fields)  # the independent forger writes the same bytes


def test_the_head_is_34_bytes_and_the_payload_compact_json() -> None:
    payload = {"rows": 3, "name": "é", "list": [1, 2.5, None]}
    frame = encode_envelope(Envelope(**base(payload=payload)))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    body = frame[4:]
    text = '{"rows":3,"name":"é","list":[1,2.5,null]}'.encode()
    assert HEAD.size == HEAD_SIZE == 34
    assert HEAD.unpack_from(body) == (
        MAGIC,
        PROTOCOL_VERSION,
        KIND_CODES["reply"],
        STATUS_CODES["ok"],
        7,
        bytes.fromhex(SESSION),
        len(b"metadata"),
        len(text),
    )
    assert body[HEAD_SIZE:] == b"metadata" + text  # no spaces, UTF-8 not \u escapes
    assert len(body) == HEAD_SIZE + 8 + len(text)


def test_no_payload_takes_no_bytes() -> None:
    env = Envelope(**base(kind="cancel", status=None, payload=None))
    body = encode_envelope(env)[4:]
    assert len(body) == HEAD_SIZE + len(b"metadata")
    assert HEAD.unpack_from(body)[-1] == 0
    assert decode_envelope(body) == env
    assert decode_envelope(body).payload is None


def test_an_explicit_json_null_payload_decodes_to_none() -> None:
    env = decode_envelope(raw(payload=b"null"))
    assert env.payload is None
    assert env == Envelope(**base(payload=None))
    # and is written back the canonical way: no bytes at all
    assert encode_envelope(env)[4:] == raw(payload=None)


@pytest.mark.parametrize("payload", [0, 0.0, "", [], {}, False, -0.0, "null"])
def test_falsy_payloads_are_not_none(payload: object) -> None:
    env = Envelope(**base(payload=payload))
    body = encode_envelope(env)[4:]
    assert HEAD.unpack_from(body)[-1] == len(js(payload)) > 0
    got = roundtrip(env).payload
    assert got == payload
    assert type(got) is type(payload)


def test_the_error_record_follows_the_payload() -> None:
    env = Envelope(**base(status="error", payload={"partial": 1}, error=ERROR))
    body = encode_envelope(env)[4:]
    op_size, payload_size = HEAD.unpack_from(body)[-2:]
    end = HEAD_SIZE + op_size + payload_size
    assert body[HEAD_SIZE + op_size : end] == b'{"partial":1}'
    assert body[end:] == js(ERROR)  # the rest of the body, compact JSON
    assert decode_envelope(body) == env


def test_the_operation_length_counts_bytes() -> None:
    for operation in ("é" * 128, "😀" * 128, "x"):
        env = Envelope(**base(operation=operation))
        body = encode_envelope(env)[4:]
        assert HEAD.unpack_from(body)[-2] == len(operation.encode())
        assert decode_envelope(body) == env


def test_generation_is_eight_bytes_up_to_max_generation() -> None:
    env = Envelope(**base(generation=MAX_GENERATION))
    body = encode_envelope(env)[4:]
    assert body[4:12] == MAX_GENERATION.to_bytes(8, "big")
    assert decode_envelope(body).generation == MAX_GENERATION
    for generation in (MAX_GENERATION + 1, 2**63, 2**64 - 1):
        with pytest.raises(ProtocolError) as info:
            decode_envelope(raw(generation=generation))
        assert info.value.details == {"field": "generation"}


def test_every_version_byte_decodes_and_the_fence_decides() -> None:
    for version in range(MAX_VERSION + 1):
        env = decode_envelope(raw(version=version))
        assert env.version == version
        assert env == Envelope(**base(version=version))
    for bad in (MAX_VERSION + 1, -1, True, 2.0, "2"):
        with pytest.raises(ValueError, match="version"):
            Envelope(**base(version=bad))
        with pytest.raises(ValueError, match="version"):
            encode_fields(**base(version=bad))


def test_encode_respects_limit() -> None:
    env = Envelope(**base(kind="job", status=None, payload="x" * DEFAULT_MAX_REQUEST))
    size = HEAD_SIZE + len(b"metadata") + DEFAULT_MAX_REQUEST + 2  # the quotes
    with pytest.raises(FrameTooLarge) as info:
        encode_envelope(env, max_size=DEFAULT_MAX_REQUEST)
    assert info.value.code == "frame_too_large"
    assert info.value.details == {"size": size, "limit": DEFAULT_MAX_REQUEST}
    assert len(encode_envelope(env)) == 4 + size


def test_the_limit_is_on_the_whole_body() -> None:
    env = Envelope(**base(status="error", payload={"partial": 1}, error=ERROR))
    body = encode_envelope(env)[4:]
    assert encode_envelope(env, max_size=len(body))[4:] == body
    for limit in (len(body) - 1, HEAD_SIZE, 0):
        with pytest.raises(FrameTooLarge) as info:
            encode_envelope(env, max_size=limit)
        assert info.value.details == {"size": len(body), "limit": limit}
        with pytest.raises(FrameTooLarge):
            encode_fields(**env.to_json(), max_size=limit)


@pytest.mark.parametrize(
    ("max_size", "error"),
    [
        (True, TypeError),
        ("1", TypeError),
        (1.0, TypeError),
        (-1, ValueError),
        (MAX_FRAME_LIMIT + 1, ValueError),
    ],
)
def test_encode_refuses_a_bad_limit(max_size: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="max_size"):
        encode_envelope(Envelope(**base()), max_size=max_size)  # type: ignore[arg-type]
    with pytest.raises(error, match="max_size"):
        encode_fields(**base(), max_size=max_size)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "payload",
    [{1, 2}, float("nan"), float("inf"), object(), b"bytes", {(1, 2): "tuple key"}],
)
def test_encode_refuses_non_json_payload(payload: object) -> None:
    env = Envelope(**base(payload=payload))
    with pytest.raises(ProtocolError) as info:
        encode_envelope(env)
    assert type(info.value) is ProtocolError
    assert info.value.details == {"field": "payload"}
    assert "'payload'" in str(info.value)


def test_envelope_is_frozen_and_slotted() -> None:
    env = Envelope(**base())
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.generation = 8
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.extra = 1
    assert not hasattr(env, "__dict__")
    assert env.generation == 7
    with pytest.raises(TypeError):
        Envelope(PROTOCOL_VERSION, "reply", SESSION, 7, "metadata")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Envelope(kind="reply", session=SESSION, generation=7, operation="x")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"kind_code": 0}, "kind"),
        ({"kind_code": 8}, "kind"),
        ({"kind_code": 255}, "kind"),
        ({"status_code": 4}, "status"),
        ({"status_code": 255}, "status"),
        ({"generation": MAX_GENERATION + 1}, "generation"),
        ({"generation": 2**64 - 1}, "generation"),
        ({"operation": b""}, "operation"),
        ({"operation": b"x" * 129}, "operation"),
        ({"operation": "é" * 129}, "operation"),
        ({"operation": b"read\xffrun"}, "operation"),
        ({"operation": b"\xed\xa0\x80"}, "operation"),  # a lone surrogate, UTF-8 encoded
        ({"status": None}, "status"),
        ({"kind": "ready", "status": None}, "status"),
        ({"kind": "job"}, "status"),
        ({"kind": "startup", "status": "cancelled"}, "status"),
        ({"kind": "progress", "payload": PROGRESS}, "status"),
        ({"status": "error"}, "error"),
        ({"error": ERROR}, "error"),
        ({"kind": "job", "status": None, "error": ERROR}, "error"),
        ({"status": "error", "error": {**ERROR, "extra": 1}}, "error"),
        ({"status": "error", "error": {"code": "x", "message": ""}}, "error"),
        ({"status": "error", "error": {**ERROR, "category": "fatal"}}, "error"),
        ({"status": "error", "error": {**ERROR, "code": "Not Snake"}}, "error"),
        ({"status": "error", "error": {**ERROR, "message": "x" * 1025}}, "error"),
        ({"status": "error", "error": {**ERROR, "message": 5}}, "error"),
        ({"status": "error", "error": "boom"}, "error"),
        ({"status": "error", "error": b"not json"}, "error"),
        ({"payload": b"not json"}, "payload"),
        ({"payload": b"[NaN]"}, "payload"),
        ({"payload": b'{"rows":3,"rows":4}'}, "payload"),
    ],
)
def test_decode_names_the_bad_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_envelope(raw(**changes))
    assert type(info.value) is ProtocolError
    assert info.value.code == "protocol_error"
    assert info.value.details == {"field": field}
    assert repr(field) in str(info.value)


V1_FRAME = json.dumps(base(version=1)).encode()  # what version 1 sent: all JSON


@pytest.mark.parametrize(
    "body",
    [
        b"",
        bytes([MAGIC]),
        raw()[: HEAD_SIZE - 1],
        raw(magic=0),
        raw(magic=MAGIC + 1),
        raw(magic=ord("{")),
        V1_FRAME,
        b"[" * 100_000,
        raw(op_len=len(b"metadata") + 1),
        raw(payload_len=len(b'{"rows":3}') + 1),
        raw(op_len=0xFFFF, payload_len=0xFFFF_FFFF),
        raw()[:-1],
    ],
)
def test_decode_refuses_what_is_not_an_envelope(body: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_envelope(body)
    assert type(info.value) is ProtocolError
    assert info.value.details == {"field": "<frame>"}


def test_a_version_1_frame_is_not_an_envelope() -> None:
    with pytest.raises(ProtocolError, match="not an envelope") as info:
        decode_envelope(V1_FRAME)
    assert info.value.details == {"field": "<frame>"}
    assert "0x7b" in str(info.value)  # its first byte, "{"


def test_optional_fields_default() -> None:
    env = decode_envelope(raw(kind="job", status=None, generation=1, operation="x", payload=None))
    assert (env.status, env.payload, env.error) == (None, None, None)
    assert env == Envelope(
        version=PROTOCOL_VERSION, kind="job", session=SESSION, generation=1, operation="x"
    )


def test_decode_rejects_nan_inside_payload() -> None:
    with pytest.raises(ProtocolError) as info:
        decode_envelope(raw(payload=b'{"rows":3,"x":NaN}'))
    assert info.value.details == {"field": "payload"}


def test_constructor_validates_too() -> None:
    with pytest.raises(ValueError, match="generation"):
        Envelope(**base(generation=True))
    with pytest.raises(ValueError, match="session"):
        Envelope(**base(session=SESSION.upper()))


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


MISMATCHES = [
    ({"version": PROTOCOL_VERSION + 1}, "version", "wrong protocol version"),
    ({"version": PROTOCOL_VERSION - 1}, "version", "wrong protocol version"),
    ({"version": 0}, "version", "wrong protocol version"),
    ({"session": OTHER_SESSION}, "session", "another session"),
    ({"generation": 6}, "generation", "another generation"),
    ({"generation": 8}, "generation", "another generation"),
    ({"operation": "preview"}, "operation", "another operation"),
    ({"kind": "ready"}, "kind", "kind"),
]


@pytest.mark.parametrize(("changes", "field", "words"), MISMATCHES)
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
    assert info.value.details == {
        "field": "status",
        "expected": ["error", "ok"],
        "got": "cancelled",
    }


def test_encode_refuses_cyclic_payload() -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(ProtocolError) as info:
        encode_envelope(Envelope(**base(payload=cycle)))
    assert info.value.details == {"field": "payload"}


def test_check_reply_expects_an_answer_kind() -> None:
    with pytest.raises(ValueError, match="kind"):
        check_reply(
            Envelope(**base()), session=SESSION, generation=7, operation="metadata", kind="job"
        )


# --- progress frames (design §3.9) ----------------------------------------------------


def test_progress_roundtrip() -> None:
    env = Envelope(**progress())
    assert roundtrip(env) == env
    assert roundtrip(Envelope(**progress(payload={"fraction": 1}))).payload == {"fraction": 1}
    note = {"fraction": 0, "note": "é" * 512}  # exactly 1 KiB of UTF-8
    assert roundtrip(Envelope(**progress(payload=note))).payload == note


@pytest.mark.parametrize(
    "payload",
    [
        {"fraction": 1.5},
        {"fraction": -0.1},
        {"fraction": "half"},
        {"fraction": True},
        {"fraction": None},
        {"note": "no fraction"},
        {"fraction": 0.5, "eta": 3},
        {"fraction": 0.5, "note": 7},
        {"fraction": 0.5, "note": "é" * 513},
        [0.5],
        0.5,
        None,
        b"null",
        b'{"fraction":1e999}',
        b'{"fraction":0.5,"fraction":0.6}',
    ],
)
def test_decode_refuses_a_bad_progress_payload(payload: object) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_envelope(raw(kind="progress", status=None, payload=payload))
    assert info.value.details == {"field": "payload"}


def test_progress_has_no_status() -> None:
    with pytest.raises(ProtocolError) as info:
        decode_envelope(raw(kind="progress", status="ok", payload=PROGRESS))
    assert info.value.details["field"] == "status"


def test_check_reply_fences_progress_like_a_reply() -> None:
    env = Envelope(**progress())
    check_reply(env, session=SESSION, generation=7, operation="metadata", kind="progress")
    with pytest.raises(ProtocolViolation) as info:
        check_reply(env, session=SESSION, generation=8, operation="metadata", kind="progress")
    assert info.value.details == {"field": "generation", "expected": 8, "got": 7}


# --- the one-step paths: encode_fields and decode_fenced ----------------------------

ENVELOPES = [
    *EVERY_KIND,
    base(kind="job", status=None, payload={"run_id": 3, "name": 'quote " and \\ é'}),
    base(kind="job", status=None, payload=None),
    base(kind="cancel", status=None, payload=None),
    base(operation="😀" * 128),
]


@pytest.mark.parametrize("fields", ENVELOPES, ids=kind_status)
def test_encode_fields_gives_the_bytes_of_encode_envelope(fields: dict[str, Any]) -> None:
    frame = encode_fields(**fields, max_size=DEFAULT_MAX_REQUEST)
    assert frame == encode_envelope(Envelope(**fields), max_size=DEFAULT_MAX_REQUEST)
    without_version = {name: value for name, value in fields.items() if name != "version"}
    assert encode_fields(**without_version) == frame  # the version defaults to ours


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"generation": -1}, "generation"),
        ({"generation": MAX_GENERATION + 1}, "generation"),
        ({"operation": ""}, "operation"),
        ({"status": None}, "status"),
        ({"session": "nothex"}, "session"),
        ({"kind": "result"}, "kind"),
        ({"version": MAX_VERSION + 1}, "version"),
        ({"error": ERROR}, "error"),
        ({"kind": "progress", "status": None, "payload": {"fraction": 2}}, "payload"),
    ],
)
def test_encode_fields_validates_like_the_constructor(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        encode_fields(**base(**changes))
    with pytest.raises(ValueError, match=field):
        Envelope(**base(**changes))


def test_encode_fields_refuses_oversize_and_non_json() -> None:
    with pytest.raises(FrameTooLarge) as too_large:
        encode_fields(**base(payload="x" * 5000), max_size=4096)
    assert too_large.value.details == {"size": HEAD_SIZE + 8 + 5002, "limit": 4096}
    with pytest.raises(ProtocolError) as info:
        encode_fields(**base(payload={1, 2}))
    assert info.value.details == {"field": "payload"}


@pytest.mark.parametrize("fields", ENVELOPES, ids=kind_status)
def test_decode_fenced_accepts_what_it_expects(fields: dict[str, Any]) -> None:
    body = encode_fields(**fields)[4:]
    env = decode_fenced(
        body,
        session=SESSION,
        kinds=(fields["kind"],),
        generation=fields["generation"],
        operation=fields["operation"],
    )
    assert type(env) is Envelope
    assert env == decode_envelope(body) == Envelope(**fields)
    # Any generation and operation, when they are not given.
    assert decode_fenced(body, session=SESSION, kinds=(fields["kind"],)) == env
    assert decode_fenced(body, session=SESSION, kinds=(*KIND_CODES,)) == env


@pytest.mark.parametrize(("changes", "field", "words"), MISMATCHES)
def test_decode_fenced_refuses_like_check_reply(
    changes: dict[str, Any], field: str, words: str
) -> None:
    body = raw(**changes)
    with pytest.raises(ProtocolViolation, match=words) as fenced:
        decode_fenced(body, session=SESSION, kinds=("reply",), generation=7, operation="metadata")
    with pytest.raises(ProtocolViolation) as checked:
        check_reply(decode_envelope(body), session=SESSION, generation=7, operation="metadata")
    assert fenced.value.details == checked.value.details
    assert fenced.value.details["field"] == field
    assert str(fenced.value) == str(checked.value)


def test_decode_fenced_names_all_accepted_kinds() -> None:
    with pytest.raises(ProtocolViolation) as info:
        decode_fenced(raw(kind="job", status=None), session=SESSION, kinds=("reply", "progress"))
    assert info.value.details == {
        "field": "kind",
        "expected": ["progress", "reply"],
        "got": "job",
    }


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not an envelope",
        V1_FRAME,
        bytes(HEAD_SIZE),
        raw()[:-1],
        raw() + b"x",
        raw(kind_code=0),
        raw(status_code=9),
        raw(generation=MAX_GENERATION + 1),
        raw(generation=2**64 - 1),
        raw(operation=b""),
        raw(operation=b"\xff"),
        raw(payload=b"[NaN]"),
        raw(payload=b'"\\udcff"'),
        raw(status=None),
        raw(status="error"),
        raw(error=ERROR),
        raw(kind="progress", status=None, payload={"fraction": 2}),
        raw(kind="progress", status="ok", payload=PROGRESS),
    ],
)
def test_decode_fenced_refuses_malformed_frames_like_decode_envelope(body: bytes) -> None:
    with pytest.raises(ProtocolError) as fenced:
        decode_fenced(
            body, session=SESSION, kinds=("reply", "progress"), generation=7, operation="metadata"
        )
    with pytest.raises(ProtocolError) as decoded:
        decode_envelope(body)
    assert type(fenced.value) is type(decoded.value) is ProtocolError
    assert fenced.value.details == decoded.value.details
    assert str(fenced.value) == str(decoded.value)


def test_decode_fenced_refuses_a_cancelled_ready() -> None:
    body = raw(kind="ready", generation=0, operation="startup", status="cancelled")
    with pytest.raises(ProtocolViolation) as fenced:
        decode_fenced(body, session=SESSION, kinds=("ready",), generation=0, operation="startup")
    with pytest.raises(ProtocolViolation) as checked:
        check_reply(
            decode_envelope(body), session=SESSION, generation=0, operation="startup", kind="ready"
        )
    assert fenced.value.details == checked.value.details
    assert fenced.value.details["field"] == "status"
    assert str(fenced.value) == str(checked.value)


def test_lone_surrogates_are_refused_both_ways() -> None:
    lone = raw(payload=b'"\\udcff"')  # the JSON escape of a lone surrogate
    with pytest.raises(ProtocolError, match="surrogate") as info:
        decode_envelope(lone)
    assert info.value.details == {"field": "payload"}
    assert decode_envelope(raw(payload=b'"\\ud83d\\ude00"')).payload == "😀"  # a pair is fine
    assert decode_envelope(raw(payload="😀")).payload == "😀"
    with pytest.raises(ProtocolError) as sent:
        encode_fields(**base(payload="\udcff"))
    assert sent.value.details == {"field": "payload"}
    with pytest.raises(ProtocolError) as op:
        encode_fields(**base(operation="op\ud800"))
    assert op.value.details == {"field": "operation"}
    assert encodes_as_utf8(["a", {"b": "😀"}])
    assert not encodes_as_utf8({"\ud800": 1})
    assert SURROGATE_ESCAPE.search('"\\ud83d\\ude00"')


def test_envelope_behaves_like_a_frozen_value() -> None:
    env = Envelope(**base())
    same = Envelope(**base())
    assert env == same
    assert not env != same  # noqa: SIM202 (__ne__ itself)
    assert env != Envelope(**base(generation=8))
    assert env != base()  # not equal to its dict
    assert env != list(base().values())
    assert hash(Envelope(**base(payload=[1]) | {"payload": 5})) == hash(Envelope(**base(payload=5)))
    assert len({Envelope(**base(payload=5)), Envelope(**base(payload=5))}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        del env.payload
    assert pickle.loads(pickle.dumps(env)) == env
    assert type(pickle.loads(pickle.dumps(env))) is Envelope
    assert copy.copy(env) == env
    deep = copy.deepcopy(env)
    assert deep == env
    assert deep.payload is not env.payload
    assert repr(env).startswith(f"Envelope(version={PROTOCOL_VERSION}, kind='reply', session=")
    assert repr(env) == (
        f"Envelope(version={PROTOCOL_VERSION}, kind='reply', session='{SESSION}', generation=7,"
        " operation='metadata', status='ok', payload={'rows': 3}, error=None)"
    )
    assert env.to_json() == base()
    assert json.loads(json.dumps(env.to_json())) == base()


def test_an_envelope_is_not_equal_to_a_plain_tuple_of_its_fields() -> None:
    env = Envelope(**base(payload=5))
    fields = tuple(env.to_json().values())
    assert env != fields
    assert fields != env
    assert not env == fields  # noqa: SIM201 (the __eq__ path, not __ne__)
    assert env == Envelope(**base(payload=5))


def test_envelopes_have_no_order() -> None:
    env = Envelope(**base(payload=5))
    for compare in (
        lambda: env < env,
        lambda: env <= env,
        lambda: env > env,
        lambda: env >= env,
        lambda: () < env,  # noqa: SIM300 (the reflected path)
    ):
        with pytest.raises(TypeError, match="no order"):
            compare()
