"""Adversarial tests of the client codec (design §2.1, §2.4): hostile JSON from a client.

Every field of every message mistyped, nested junk, recursion bombs, huge strings and
numbers, non-UTF-8 bytes, lone surrogates, duplicate keys. Each input either decodes to
exactly what was sent (no coercion) or fails with ``InvalidMessage`` naming the field;
nothing else ever escapes, and whatever decodes can be encoded back as UTF-8 JSON.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from message_examples import EXAMPLES

from protocol import (
    InvalidMessage,
    MessageTooLarge,
    ProtocolError,
    UnknownType,
    decode_client_message,
    decode_server_message,
    encode_message,
    unstructure_message,
)

JUNK: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**53,
    10**30,
    1.5,
    -0.0,
    "",
    "x" * 5000,
    [],
    [1, "a"],
    {},
    {"type": "submit"},
    [[[[[]]]]],
]


def decode_any(text: str | bytes) -> Any:
    try:
        return decode_client_message(text)
    except UnknownType:
        return decode_server_message(text)


def check_round_trip_or_named(obj: dict[str, Any], field: str) -> None:
    text = json.dumps(obj)
    error: InvalidMessage | None = None
    try:
        msg = decode_any(text)
    except InvalidMessage as exc:
        error = exc
    if error is not None:
        assert error.code == "invalid_message"
        paths = error.details["fields"]
        assert any(p == f"$.{field}" or p.startswith(f"$.{field}") for p in paths), (obj, paths)
        assert len(error.message) < 4096
        return
    # Accepted: it must be exactly what was sent, and encodable again.
    back = unstructure_message(msg)
    # An optional field added later is left out while null (protocol.messages.ADDED_OPTIONAL).
    sent, got = obj[field], back.get(field)
    if isinstance(sent, list):
        assert list(got) == sent, (obj, back)
    elif type(sent) is int and type(got) is float:
        assert got == sent  # an int where a float is expected (JSON has one number)
    else:
        assert got == sent, (obj, back)
        assert type(got) is type(sent), (obj, back)
    encode_message(msg).encode("utf-8")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda m: type(m).__name__)
def test_every_field_mistyped(example: Any) -> None:
    valid = unstructure_message(example)
    for field in [f.name for f in attrs.fields(type(example))]:
        for junk in JUNK:
            check_round_trip_or_named({**valid, field: junk}, field)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda m: type(m).__name__)
def test_extra_keys_are_named_and_missing_keys_are_named(example: Any) -> None:
    valid = unstructure_message(example)
    with pytest.raises(InvalidMessage) as info:
        decode_any(json.dumps({**valid, "zz_extra": 1, "__proto__": {}}))
    assert {"$.zz_extra", "$.__proto__"} <= set(info.value.details["fields"])
    for field in [f.name for f in attrs.fields(type(example)) if f.default is attrs.NOTHING]:
        broken = {k: v for k, v in valid.items() if k != field}
        with pytest.raises(InvalidMessage) as info:
            decode_any(json.dumps(broken))
        assert f"$.{field}" in info.value.details["fields"]


@pytest.mark.parametrize(
    "text",
    [
        '{"type":"submit","request_id":"r","operation":"x","arguments":{"a":1e400}}',
        '{"type":"submit","request_id":"r","operation":"x","arguments":{"a":-1e400}}',
        '{"type":"watch","request_id":"r","cursor":1e400}',
        '{"type":"submit","request_id":"r","operation":"x","arguments":{"a":' + "9" * 400 + ".0}}",
    ],
)
def test_numbers_overflowing_a_double_are_refused(text: str) -> None:
    # They used to decode to inf, which encode_message then refused (ValueError): a
    # message that could be read but never written back (e.g. echoed in a status).
    with pytest.raises(InvalidMessage, match="out of range"):
        decode_client_message(text)


def test_huge_integers_are_refused_cleanly() -> None:
    for digits in (30, 5000):
        text = '{"type":"watch","request_id":"r","cursor":' + "9" * digits + "}"
        with pytest.raises(InvalidMessage):
            decode_client_message(text, max_size=10**6)


@pytest.mark.parametrize(
    "text",
    [
        '{"type":"submit","request_id":"\\ud800","operation":"x"}',
        '{"type":"submit","request_id":"r","operation":"x","arguments":{"k":"\\udfff"}}',
        '{"type":"submit","request_id":"r","operation":"x","arguments":{"\\uDC80":1}}',
        '{"type":"submit","request_id":"r","operation":"x\\ude00\\ud83d"}',  # reversed pair
    ],
)
def test_lone_surrogate_escapes_are_refused(text: str) -> None:
    # Valid JSON syntax, but not Unicode: a request_id like this used to be accepted
    # and echoed back, and encoding the reply as UTF-8 for the websocket then failed.
    with pytest.raises(InvalidMessage, match="lone surrogate"):
        decode_client_message(text)
    with pytest.raises(InvalidMessage, match="lone surrogate"):
        decode_client_message(text.encode("ascii"))


def test_raw_lone_surrogate_in_a_str_is_refused() -> None:
    with pytest.raises(InvalidMessage, match="lone surrogate"):
        decode_client_message('{"type":"ack","request_id":"\udc80","seq":1}')


def test_proper_surrogate_pairs_and_escaped_backslashes_are_fine() -> None:
    msg = decode_client_message('{"type":"ack","request_id":"\\ud83d\\ude00","seq":1}')
    assert msg.request_id == "\U0001f600"
    msg = decode_client_message('{"type":"ack","request_id":"\\\\ud800","seq":1}')
    assert msg.request_id == "\\ud800"  # a backslash, then the letters: fine
    assert "\\ud800" in encode_message(msg).encode("utf-8").decode("utf-8")


@pytest.mark.parametrize(
    "data",
    [
        b'{"type":"ack","request_id":"\xff","seq":1}',
        b'{"type":"ack","request_id":"\xed\xa0\x80","seq":1}',  # CESU surrogate
        b'{"type":"ack","request_id":"\xc0\xaf","seq":1}',  # overlong
        '{"type":"ack","request_id":"r","seq":1}'.encode("utf-16"),
        b"\xef\xbb\xbf" + b'{"type":"ack","request_id":"r","seq":1}',  # BOM
    ],
)
def test_non_utf8_bytes_are_refused(data: bytes) -> None:
    with pytest.raises(InvalidMessage) as info:
        decode_client_message(data)
    assert info.value.details["fields"] == ["$"]


def test_duplicate_keys_are_refused_at_any_depth() -> None:
    for text in (
        '{"type":"ack","request_id":"r","seq":1,"seq":2}',
        '{"type":"submit","request_id":"r","operation":"x","arguments":{"a":{"b":1,"b":1}}}',
    ):
        with pytest.raises(InvalidMessage, match="duplicate key"):
            decode_client_message(text)


@pytest.mark.parametrize("depth", [100, 5000, 30000])
def test_recursion_bombs_fail_cleanly(depth: int) -> None:
    for opening, closing in (("[", "]"), ('{"a":', "}")):
        bomb = opening * depth + "1" + closing * depth
        text = '{"type":"submit","request_id":"r","operation":"x","arguments":{"k":' + bomb + "}}"
        error: InvalidMessage | None = None
        try:
            msg = decode_client_message(text, max_size=10**6)
        except InvalidMessage as exc:
            error = exc
        if error is None:
            encode_message(msg)  # what decodes also encodes
        else:
            assert error.details["fields"] == ["$"]


def test_size_limit_counts_bytes_for_str_input_exactly() -> None:
    base = '{"type":"ack","request_id":"","seq":1}'
    room = 100 - len(base)
    fits = base.replace('""', '"' + "é" * (room // 2) + '"')
    assert len(fits.encode()) <= 100
    assert decode_client_message(fits, max_size=100).request_id == "é" * (room // 2)
    over = base.replace('""', '"' + "é" * (room // 2 + 1) + '"')
    with pytest.raises(MessageTooLarge) as info:
        decode_client_message(over, max_size=100)
    assert info.value.details["size"] == len(over.encode())
    with pytest.raises(MessageTooLarge):
        decode_client_message("x" * (10**7), max_size=100)  # refused without encoding


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "null",
        "[]",
        '"submit"',
        "{",
        '{"type":"ack"',
        '{"type":"ack","request_id":"r","seq":1}{"type":"ack"}',
        '{"type":"ack","request_id":"r","seq":1} trailing',
        "NaN",
        '{"type":"ack","request_id":"r","seq":NaN}',
        '{"type":"ack","request_id":"r","seq":Infinity}',
        '{"type":"ack","request_id":"r","seq":0x10}',
        "{'type':'ack'}",
        '{"type":"ack","request_id":"r","seq":1,}',
        "\x00",
    ],
)
def test_malformed_text_is_an_invalid_message(text: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        decode_client_message(text)
    assert info.value.details["fields"] == ["$"] or info.value.details["fields"][0].startswith("$")


def test_huge_unknown_type_is_bounded_in_the_error() -> None:
    with pytest.raises(UnknownType) as info:
        decode_client_message(json.dumps({"type": "x" * 60000}))
    assert len(info.value.message) < 1000
    assert len(info.value.details["type"]) <= 128


def test_every_error_is_a_protocol_error_with_a_record() -> None:
    for text in ('{"type":"ack"}', "[", '{"type":"nope"}'):
        with pytest.raises(ProtocolError) as info:
            decode_client_message(text)
        record = info.value.to_record()
        assert record.category == "permanent"
        assert len(record.message.encode()) <= 1024
