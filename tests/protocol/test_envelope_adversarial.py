"""Adversarial tests of the helper envelope (SPEC §2.3): hostile frames from a helper.

Every field mistyped (bools, NaN, huge ints, junk), extra keys, duplicate keys, numbers
that overflow, lone surrogates, other encodings, recursion bombs, and replies fenced by
session, generation and operation. Every refusal is a ``ProtocolError`` naming the field,
with a bounded message; nothing else ever escapes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from protocol import (
    Envelope,
    ProtocolError,
    ProtocolViolation,
    check_reply,
    decode_envelope,
    encode_envelope,
    new_session,
)

SESSION = new_session()


def reply(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "version": 1,
        "kind": "reply",
        "session": SESSION,
        "generation": 7,
        "operation": "read_run",
        "status": "ok",
        "payload": {"rows": 3},
        "error": None,
    }
    fields.update(changes)
    return fields


def refusal(data: bytes) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        decode_envelope(data)
    error = info.value
    assert error.code == "protocol_error"
    assert len(error.message) < 2000
    assert len(error.to_record().message.encode()) <= 1024
    return error


JUNK: list[Any] = [
    None,
    True,
    False,
    -1,
    2**53,
    10**40,
    1.0,
    1.5,
    "",
    "x" * 100_000,
    [],
    {},
    {"a": [1]},
]


@pytest.mark.parametrize(
    "field", ["version", "kind", "session", "generation", "operation", "status"]
)
def test_every_field_mistyped_is_named(field: str) -> None:
    for junk in JUNK:
        data = json.dumps(reply(**{field: junk})).encode()
        error: ProtocolError | None = None
        try:
            env = decode_envelope(data)
        except ProtocolError as exc:
            error = exc
        if error is not None:
            assert error.details["field"] == field, (field, junk, error)
            assert len(error.message) < 2000
            continue
        # accepted only when it is a legal value (e.g. status None is not for a reply)
        assert getattr(env, field) == junk, (field, junk)
        assert type(getattr(env, field)) is type(junk)


@pytest.mark.parametrize(
    "error",
    [
        {"category": "permanent", "code": "x"},
        {"category": "permanent", "code": "x", "message": "m", "extra": 1},
        {"category": "fatal", "code": "x", "message": "m"},
        {"category": "permanent", "code": "Not_Snake", "message": "m"},
        {"category": "permanent", "code": "a__b", "message": "m"},
        {"category": "permanent", "code": "x" * 65, "message": "m"},
        {"category": "permanent", "code": "x", "message": 5},
        {"category": "permanent", "code": "x", "message": "é" * 600},  # 1200 bytes
        {"category": ["permanent"], "code": "x", "message": "m"},
        "permanent",
        None,
    ],
)
def test_bad_error_records_are_named(error: Any) -> None:
    data = json.dumps(reply(status="error", payload=None, error=error)).encode()
    assert refusal(data).details["field"] == "error"


def test_extra_and_missing_keys() -> None:
    assert refusal(json.dumps(reply(extra=1)).encode()).details["field"] == "extra"
    assert refusal(json.dumps(reply(__proto__={})).encode()).details["field"] == "__proto__"
    for name in ("version", "kind", "session", "generation", "operation"):
        data = reply()
        del data[name]
        assert refusal(json.dumps(data).encode()).details["field"] == name


def test_duplicate_keys_are_refused() -> None:
    # "generation" twice: one parser fences on the first, another reads the second
    text = json.dumps(reply())
    doubled = text.replace('"generation": 7', '"generation": 6, "generation": 7')
    assert doubled != text
    assert "duplicate key" in refusal(doubled.encode()).message
    nested = text.replace('{"rows": 3}', '{"rows": 3, "rows": 4}')
    assert "duplicate key" in refusal(nested.encode()).message


@pytest.mark.parametrize("number", ["1e400", "-1e400", "9" * 400 + ".5"])
def test_numbers_overflowing_a_double_are_refused(number: str) -> None:
    text = json.dumps(reply()).replace('{"rows": 3}', '{"rows": ' + number + "}")
    assert "out of range" in refusal(text.encode()).message


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_json_constants_are_refused(literal: str) -> None:
    text = json.dumps(reply()).replace('{"rows": 3}', "[" + literal + "]")
    refusal(text.encode())


def test_huge_integers_fail_cleanly() -> None:
    text = json.dumps(reply()).replace('"generation": 7', '"generation": ' + "9" * 5000)
    refusal(text.encode())
    text = json.dumps(reply()).replace('{"rows": 3}', "9" * 5000)
    refusal(text.encode())


@pytest.mark.parametrize(
    "data",
    [
        json.dumps(reply()).encode("utf-16"),
        json.dumps(reply()).encode("utf-32"),
        b"\xef\xbb\xbf" + json.dumps(reply()).encode(),
        json.dumps(reply()).encode().replace(b'"read_run"', b'"read\xffrun"'),
        json.dumps(reply()).encode().replace(b'"read_run"', b'"read\xed\xa0\x80run"'),
        json.dumps(reply(operation="\udc80")).encode("ascii"),  # an escaped lone surrogate
        json.dumps(reply(payload={"\ud800": 1})).encode("ascii"),
        b"",
        b" ",
        b"null",
        b"[]",
        json.dumps(reply()).encode() + b" {}",
        b"\x00" * 64,
    ],
)
def test_non_utf8_and_malformed_frames_are_refused(data: bytes) -> None:
    refusal(data)


@pytest.mark.parametrize("depth", [100, 3000, 200_000])
def test_recursion_bombs_in_the_payload_fail_cleanly(depth: int) -> None:
    bomb = "[" * depth + "]" * depth
    text = json.dumps(reply()).replace('{"rows": 3}', bomb)
    error: ProtocolError | None = None
    try:
        env = decode_envelope(text.encode())
    except ProtocolError as exc:
        error = exc
    if error is None:
        assert env.generation == 7
    else:
        assert error.details["field"] == "<frame>"


def test_surrogates_on_the_way_out_are_a_protocol_error() -> None:
    # A file name decoded with surrogateescape, say: it used to raise UnicodeEncodeError.
    env = Envelope(**reply(payload={"path": "/data/\udcff.db"}))
    with pytest.raises(ProtocolError):
        encode_envelope(env)
    with pytest.raises(ProtocolError):
        encode_envelope(Envelope(**reply(operation="op\ud800")))


def test_error_records_with_surrogates_are_escaped_not_lost() -> None:
    from actors.errors import SourceError

    record = SourceError("cannot open /data/\udcff.db").to_record()
    assert record.message == "cannot open /data/\\udcff.db"
    env = Envelope(**reply(status="error", payload=None, error=record.to_dict()))
    assert decode_envelope(encode_envelope(env)[4:]).error == record.to_dict()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"version": 2}, "version"),
        ({"version": 0}, "version"),
        ({"session": new_session()}, "session"),
        ({"generation": 6}, "generation"),
        ({"generation": 8}, "generation"),
        ({"operation": "READ_RUN"}, "operation"),
        ({"kind": "job", "status": None}, "kind"),
        ({"kind": "ready"}, "kind"),
    ],
)
def test_fencing_names_the_mismatch(changes: dict[str, Any], field: str) -> None:
    env = decode_envelope(json.dumps(reply(**changes)).encode())
    with pytest.raises(ProtocolViolation) as info:
        check_reply(env, session=SESSION, generation=7, operation="read_run")
    assert info.value.details["field"] == field
    assert info.value.code == "protocol_violation"


def test_a_matching_reply_passes_the_fence() -> None:
    env = decode_envelope(json.dumps(reply()).encode())
    check_reply(env, session=SESSION, generation=7, operation="read_run")
    assert env.payload == {"rows": 3}
