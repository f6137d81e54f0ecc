"""Tests for protocol.codec: strict structuring, JSON text in and out (design §2.1, §2.4)."""

from __future__ import annotations

import json
import re
import typing

import cattrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from message_examples import EXAMPLES

from protocol import (
    DEFAULT_MAX_MESSAGE,
    TAGS,
    Cancel,
    ClientRequest,
    ErrorReply,
    Event,
    Events,
    InvalidMessage,
    Message,
    MessageTooLarge,
    ProtocolError,
    Receipt,
    ServerMessage,
    StatusReply,
    Submit,
    UnknownType,
    decode_client_message,
    decode_server_message,
    encode_message,
    make_converter,
    structure_message,
    unstructure_message,
)

CLIENT = set(typing.get_args(ClientRequest))


def invalid(text: str | bytes, *, server: bool = False) -> InvalidMessage:
    decode = decode_server_message if server else decode_client_message
    with pytest.raises(InvalidMessage) as info:
        decode(text)
    return info.value


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: type(m).__name__)
def test_roundtrip_every_class(msg: Message) -> None:
    text = encode_message(msg)
    decode = decode_client_message if type(msg) in CLIENT else decode_server_message
    assert decode(text) == msg
    assert decode(text.encode()) == msg
    assert structure_message(json.loads(text)) == msg


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: type(m).__name__)
def test_unstructured_form_is_tagged_plain_json(msg: Message) -> None:
    data = unstructure_message(msg)
    assert next(iter(data)) == "type"
    assert data["type"] == TAGS[type(msg)]
    assert json.loads(json.dumps(data)) == data  # tuples became lists


def test_stable_wire_form() -> None:
    msg = Cancel(request_id="r1", run_id=7)
    assert encode_message(msg) == '{"type":"cancel","request_id":"r1","run_id":7}'
    nested = Events(request_id="w", events=(Event(seq=1, kind="job_queued", run_id=7),), cursor=1)
    assert json.loads(encode_message(nested)) == {
        "type": "events",
        "request_id": "w",
        "events": [{"seq": 1, "kind": "job_queued", "run_id": 7, "data": {}}],
        "cursor": 1,
    }


def test_encode_keeps_non_ascii() -> None:
    text = encode_message(Submit(request_id="r", operation="op", arguments={"name": "µ-sweep"}))
    assert "µ-sweep" in text


def test_encode_refuses_non_messages_and_nan() -> None:
    with pytest.raises(TypeError):
        encode_message({"type": "cancel"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="JSON compliant"):
        encode_message(Submit(request_id="r", operation="op", arguments={"x": float("nan")}))


def test_unknown_field_is_named() -> None:
    error = invalid('{"type":"cancel","request_id":"r","run_id":1,"force":true,"zz":0}')
    assert error.code == "invalid_message"
    assert error.details["fields"] == ["$.force", "$.zz"]
    assert "$.force: unknown field" in str(error)


def test_missing_field_is_named() -> None:
    error = invalid('{"type":"cancel","request_id":"r"}')
    assert error.details["fields"] == ["$.run_id"]
    assert "$.run_id: required field missing" in str(error)
    # A field that may be null is still required.
    assert invalid('{"type":"select","request_id":"r"}').details["fields"] == ["$.run_id"]


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ('{"type":"cancel","request_id":"r","run_id":"7"}', "$.run_id", "expected int"),
        ('{"type":"cancel","request_id":"r","run_id":true}', "$.run_id", "got boolean"),
        ('{"type":"cancel","request_id":"r","run_id":7.0}', "$.run_id", "got number"),
        ('{"type":"cancel","request_id":"r","run_id":null}', "$.run_id", "got null"),
        ('{"type":"cancel","request_id":5,"run_id":7}', "$.request_id", "expected string"),
        ('{"type":"resume","request_id":"r","run_id":1,"override":1}', "$.override", "boolean"),
        ('{"type":"resume","request_id":"r","run_id":1,"override":"yes"}', "$.override", "bool"),
        ('{"type":"visible","request_id":"r","run_ids":"12"}', "$.run_ids", "expected array"),
        ('{"type":"visible","request_id":"r","run_ids":{"1":1}}', "$.run_ids", "array"),
        ('{"type":"visible","request_id":"r","run_ids":[1,"2"]}', "$.run_ids[1]", "expected int"),
        ('{"type":"submit","request_id":"r","operation":"x","arguments":[]}', "$.arguments", ""),
        ('{"type":"cancel","request_id":"","run_id":7}', "$.request_id", "1..128 characters"),
        ('{"type":"cancel","request_id":"r","run_id":-7}', "$.run_id", "[0, 2**53-1]"),
        ('{"type":"watch","request_id":"r","cursor":9007199254740992}', "$.cursor", ""),
    ],
)
def test_wrong_type_or_value_is_named(text: str, field: str, reason: str) -> None:
    error = invalid(text)
    assert error.details["fields"] == [field]
    assert f"{field}: " in str(error)
    assert reason in str(error)


def test_nested_paths_are_named() -> None:
    data = {
        "type": "events",
        "request_id": "r",
        "cursor": 2,
        "events": [{"seq": "1", "kind": "job_queued"}, {"seq": 2}, {"seq": 3, "kind": "Bad"}],
    }
    error = invalid(json.dumps(data), server=True)
    assert error.details["fields"] == ["$.events[0].seq", "$.events[1].kind", "$.events[2].kind"]


def test_reported_fields_are_bounded() -> None:
    data = {"type": "ack", "request_id": "r", "seq": 1, **{f"x{i}": i for i in range(100)}}
    error = invalid(json.dumps(data))
    assert len(error.details["fields"]) == 32


def test_int_accepted_as_float() -> None:
    msg = decode_server_message(
        '{"type":"status_reply","request_id":null,"run_id":1,"state":"running","progress":1}'
    )
    assert isinstance(msg, StatusReply)
    assert msg.progress == 1.0
    assert type(msg.progress) is float


def test_float_field_refuses_bool_and_string() -> None:
    base = '{"type":"status_reply","request_id":null,"run_id":1,"state":"running","progress":'
    assert invalid(base + "true}", server=True).details["fields"] == ["$.progress"]
    assert invalid(base + '"0.5"}', server=True).details["fields"] == ["$.progress"]


@pytest.mark.parametrize(
    "text",
    ['{"type":"cancel",', "{'type': 'cancel'}", "", "   ", '{"type":"cancel"} trailing'],
)
def test_malformed_json_gives_line_and_column(text: str) -> None:
    error = invalid(text)
    assert type(error) is InvalidMessage
    assert re.search(r"malformed JSON at line \d+ column \d+", str(error))
    assert error.details["fields"] == ["$"]


def test_malformed_json_multiline_position() -> None:
    error = invalid('{\n  "type": "cancel",\n  "run_id": ,\n}')
    assert "line 3 column 13" in str(error)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"type":"cancel","x":NaN}', "NaN"),
        ('{"type":"cancel","x":Infinity}', "Infinity"),
        ('{"type":"cancel","type":"ack"}', "duplicate key 'type'"),
        ("[" * 5000 + "]" * 5000, "malformed JSON"),
        ("1" * 5000, "malformed JSON"),
    ],
)
def test_json_that_python_would_accept_is_refused(text: str, words: str) -> None:
    assert words in str(invalid(text))


def test_invalid_utf8_bytes() -> None:
    assert "not UTF-8" in str(invalid(b'{"type":"\xff"}'))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[1]", "got array"),
        ('"submit"', "got string"),
        ("null", "got null"),
        ("3", "got int"),
    ],
)
def test_non_object_is_refused(text: str, words: str) -> None:
    error = invalid(text)
    assert words in str(error)
    assert error.details["fields"] == ["$"]


def test_missing_or_mistyped_tag() -> None:
    assert "type is missing" in str(invalid('{"request_id":"r"}'))
    error = invalid('{"type":1,"request_id":"r"}')
    assert type(error) is InvalidMessage
    assert error.details["fields"] == ["$.type"]


def test_unknown_type() -> None:
    with pytest.raises(UnknownType) as info:
        decode_client_message('{"type":"launch_missiles","request_id":"r"}')
    error = info.value
    assert isinstance(error, InvalidMessage)
    assert error.code == "unknown_type"
    assert error.details == {"fields": ["$.type"], "type": "launch_missiles"}
    assert "'launch_missiles'" in str(error)


def test_direction_is_checked() -> None:
    receipt = encode_message(next(e for e in EXAMPLES if isinstance(e, Receipt)))
    with pytest.raises(UnknownType):
        decode_client_message(receipt)
    with pytest.raises(UnknownType):
        decode_server_message(encode_message(Cancel(request_id="r", run_id=1)))


def test_oversized_message_is_refused_before_parsing() -> None:
    # Not even JSON: the size check comes first.
    with pytest.raises(MessageTooLarge) as info:
        decode_client_message("{" * (DEFAULT_MAX_MESSAGE + 1))
    assert info.value.code == "message_too_large"
    assert info.value.details["limit"] == DEFAULT_MAX_MESSAGE
    with pytest.raises(MessageTooLarge) as info:
        decode_client_message(b"{" * (DEFAULT_MAX_MESSAGE + 1))
    assert info.value.details["size"] == DEFAULT_MAX_MESSAGE + 1


def test_size_limit_counts_utf8_bytes_and_is_inclusive() -> None:
    prefix = '{"type":"submit","request_id":"r","operation":"'
    suffix = '"}'
    body = "é" * 20  # 2 bytes each
    text = prefix + body + suffix
    size = len(text.encode())
    assert decode_client_message(text, max_size=size) == Submit(request_id="r", operation=body)
    with pytest.raises(MessageTooLarge):
        decode_client_message(text, max_size=size - 1)
    with pytest.raises(MessageTooLarge):
        decode_client_message(text.encode(), max_size=size - 1)


def test_decode_refuses_other_types() -> None:
    with pytest.raises(TypeError):
        decode_client_message({"type": "cancel"})  # type: ignore[arg-type]


def test_errors_become_error_replies() -> None:
    error = invalid('{"type":"cancel","request_id":"r","run_id":"x"}')
    reply = ErrorReply.from_error(error, request_id=None)
    again = decode_server_message(encode_message(reply))
    assert again == reply
    assert again.code == "invalid_message"
    assert again.details["fields"] == ["$.run_id"]
    assert isinstance(error, ProtocolError)


def test_make_converter_is_private_and_fresh() -> None:
    first, second = make_converter(), make_converter()
    assert first is not second
    assert first is not cattrs.global_converter
    assert first.forbid_extra_keys
    # Our strict hooks did not leak into the global converter (which coerces).
    assert cattrs.global_converter.structure("5", int) == 5
    with pytest.raises(cattrs.BaseValidationError):
        first.structure({"request_id": "r", "run_id": "5"}, Cancel)
    assert first.structure({"type": "cancel", "request_id": "r", "run_id": 5}, ClientRequest) == (
        Cancel(request_id="r", run_id=5)
    )
    assert first.unstructure(Cancel(request_id="r", run_id=5), unstructure_as=Message) == {
        "request_id": "r",
        "run_id": 5,
        "type": "cancel",
    }


def test_structure_message_union_choice() -> None:
    data = {"type": "resync_required", "head": 3}
    assert structure_message(data, ServerMessage) == structure_message(data)
    with pytest.raises(UnknownType):
        structure_message(data, ClientRequest)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(
    request_id=st.text(min_size=1, max_size=128),
    operation=st.text(min_size=1, max_size=128),
    arguments=st.dictionaries(st.text(max_size=8), _json, max_size=5),
)
def test_submit_roundtrip_property(request_id: str, operation: str, arguments: dict) -> None:
    msg = Submit(request_id=request_id, operation=operation, arguments=arguments)
    assert decode_client_message(encode_message(msg)) == msg


_field_names = st.sampled_from(
    [
        "request_id",
        "run_id",
        "run_ids",
        "cursor",
        "seq",
        "operation",
        "arguments",
        "override",
        "events",
        "runs",
        "x",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    tag=st.sampled_from(sorted(TAGS.values())),
    fields=st.dictionaries(_field_names, _json, max_size=5),
)
def test_any_json_object_decodes_or_fails_cleanly(tag: str, fields: dict) -> None:
    text = json.dumps({"type": tag, **fields})
    for decode in (decode_client_message, decode_server_message):
        fields_named: list[str] = ["-"]
        try:
            decode(text)
        except InvalidMessage as exc:
            fields_named = exc.details["fields"]
        assert fields_named
