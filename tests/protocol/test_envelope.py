"""Tests for protocol.envelope: the helper frame envelope and reply fencing (SPEC §2.3)."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
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
from protocol.envelope import SURROGATE_ESCAPE, decode_fenced, encode_fields, encodes_as_utf8

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


# --- progress frames (SPEC §3.9) ----------------------------------------------------

PROGRESS = {"fraction": 0.25, "note": "page 1 of 4"}


def progress(**changes: Any) -> dict[str, Any]:
    return base(**{"kind": "progress", "status": None, "payload": PROGRESS, **changes})


def test_progress_roundtrip() -> None:
    env = Envelope(**progress())
    assert roundtrip(env) == env
    assert roundtrip(Envelope(**progress(payload={"fraction": 1}))).payload == {"fraction": 1}


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"fraction": 1.5}, "payload"),
        ({"fraction": -0.1}, "payload"),
        ({"fraction": "half"}, "payload"),
        ({"fraction": True}, "payload"),
        ({"note": "no fraction"}, "payload"),
        ({"fraction": 0.5, "eta": 3}, "payload"),
        ({"fraction": 0.5, "note": 7}, "payload"),
        ({"fraction": 0.5, "note": "é" * 600}, "payload"),
        ([0.5], "payload"),
        (None, "payload"),
    ],
)
def test_decode_refuses_a_bad_progress_payload(payload: object, field: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_envelope(raw(kind="progress", status=None, payload=payload))
    assert info.value.details["field"] == field


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
    base(),
    base(status="cancelled", payload=None),
    base(status="error", payload=None, error=ERROR),
    base(kind="job", status=None, payload={"run_id": 3, "name": 'quote " and \\ é'}),
    base(kind="cancel", status=None, payload=None),
    base(kind="shutdown", status=None, payload=None),
    progress(),
    base(kind="ready", generation=0, operation="startup", payload={"pid": 1}),
]


@pytest.mark.parametrize("fields", ENVELOPES)
def test_encode_fields_gives_the_bytes_of_encode_envelope(fields: dict[str, Any]) -> None:
    frame = encode_fields(**fields, max_size=DEFAULT_MAX_REQUEST)
    assert frame == encode_envelope(Envelope(**fields), max_size=DEFAULT_MAX_REQUEST)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"generation": -1}, "generation"),
        ({"operation": ""}, "operation"),
        ({"status": None}, "status"),
        ({"session": "nothex"}, "session"),
        ({"kind": "result"}, "kind"),
    ],
)
def test_encode_fields_validates_like_the_constructor(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        encode_fields(**base(**changes))


def test_encode_fields_refuses_oversize_and_non_json() -> None:
    with pytest.raises(FrameTooLarge):
        encode_fields(**base(payload="x" * 5000), max_size=4096)
    with pytest.raises(ProtocolError) as info:
        encode_fields(**base(payload={1, 2}))
    assert info.value.details == {"field": "payload"}


REQUESTS = ("job", "cancel", "shutdown")


@pytest.mark.parametrize("fields", ENVELOPES)
def test_decode_fenced_accepts_what_it_expects(fields: dict[str, Any]) -> None:
    body = encode_fields(**fields)[4:]
    env = decode_fenced(
        body,
        session=SESSION,
        kinds=(fields["kind"],),
        generation=fields["generation"],
        operation=fields["operation"],
    )
    assert env == decode_envelope(body) == Envelope(**fields)
    # Any generation and operation, when they are not given.
    assert decode_fenced(body, session=SESSION, kinds=(fields["kind"],)) == env


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"version": 2}, "version"),
        ({"session": OTHER_SESSION}, "session"),
        ({"generation": 6}, "generation"),
        ({"operation": "preview"}, "operation"),
        ({"kind": "ready"}, "kind"),
    ],
)
def test_decode_fenced_refuses_like_check_reply(changes: dict[str, Any], field: str) -> None:
    body = raw(**changes)
    with pytest.raises(ProtocolViolation) as fenced:
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
        b"not json",
        b"[1]",
        raw(generation=True),
        raw(generation=7.0),
        raw(version=True),
        raw(extra=1),
        raw(status="error"),
        raw(kind="progress", status=None, payload={"fraction": 2}),
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


def test_decode_fenced_refuses_a_cancelled_ready() -> None:
    body = raw(kind="ready", generation=0, operation="startup", status="cancelled")
    with pytest.raises(ProtocolViolation) as info:
        decode_fenced(body, session=SESSION, kinds=("ready",), generation=0, operation="startup")
    assert info.value.details["field"] == "status"


def test_lone_surrogates_are_refused_both_ways() -> None:
    lone = raw(payload="\udcff")  # json.dumps writes it as the escape \udcff
    with pytest.raises(ProtocolError, match="surrogate") as info:
        decode_envelope(lone)
    assert info.value.details == {"field": "<frame>"}
    assert decode_envelope(raw(payload="😀")).payload == "😀"  # a pair is fine
    with pytest.raises(ProtocolError) as sent:
        encode_fields(**base(payload="\udcff"))
    assert sent.value.details == {"field": "payload"}
    assert encodes_as_utf8(["a", {"b": "😀"}])
    assert not encodes_as_utf8({"\ud800": 1})
    assert SURROGATE_ESCAPE.search('"\\ud83d\\ude00"')


def test_envelope_behaves_like_a_frozen_value() -> None:
    env = Envelope(**base())
    same = Envelope(**base())
    assert env == same
    assert env != Envelope(**base(generation=8))
    assert env != base()  # not equal to its dict
    assert hash(Envelope(**base(payload=[1]) | {"payload": 5})) == hash(Envelope(**base(payload=5)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        del env.payload
    assert pickle.loads(pickle.dumps(env)) == env
    assert copy.copy(env) == env
    assert repr(env).startswith("Envelope(version=1, kind='reply', session=")
    assert env.to_json() == base()
