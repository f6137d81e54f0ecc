"""The reply fence's fast path for a known operation (design §2.3).

Once a job for an operation has been encoded, a reply for it is fenced by comparing the
operation's bytes instead of decoding them, and its payload is scanned inline. These
tests forge replies whose operation or payload differ from a good one by a few bytes
and check the fast path gives exactly the general path's result or refusal. A job read
by the helper (no operation expected) looks a known name up by its bytes; the last
tests check that path the same way, and that a refused name is never learnt.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol import ProtocolError, ProtocolViolation, decode_envelope, new_session
from protocol.envelope import decode_fenced, encode_fields

HEAD = 34  # bytes of the fixed head of an envelope body (design §2.3)
KINDS = ("reply", "progress")


def _known(session: str, operation: str) -> None:
    """Encode a job, as the parent does before it waits for the reply."""
    encode_fields(kind="job", session=session, generation=1, operation=operation, payload=1)


def _reply_body(session: str, operation: str, payload: Any) -> bytes:
    return encode_fields(
        kind="reply",
        session=session,
        generation=1,
        operation=operation,
        status="ok",
        payload=payload,
    )[4:]


def _fenced(body: bytes, session: str, operation: str = "echo") -> Any:
    return decode_fenced(body, session=session, kinds=KINDS, generation=1, operation=operation)


def test_a_reply_for_the_known_operation_decodes_as_in_the_general_path() -> None:
    session = new_session()
    _known(session, "écho-ü")  # non-ASCII: 2-byte UTF-8 characters
    body = _reply_body(session, "écho-ü", {"a": [1, 2.5, "x"]})
    env = _fenced(body, session, "écho-ü")
    assert env == decode_envelope(body)
    assert (env.operation, env.payload, env.status) == ("écho-ü", {"a": [1, 2.5, "x"]}, "ok")


def test_another_operation_of_the_same_length_is_refused_by_name() -> None:
    session = new_session()
    _known(session, "echo")
    body = _reply_body(session, "echp", 1)
    with pytest.raises(ProtocolViolation) as info:
        _fenced(body, session)
    assert info.value.details == {"field": "operation", "expected": "echo", "got": "echp"}


def test_operation_bytes_that_are_not_utf8_are_refused_by_name() -> None:
    session = new_session()
    _known(session, "echo")
    body = bytearray(_reply_body(session, "echo", 1))
    body[HEAD] = 0xFF
    with pytest.raises(ProtocolError) as info:
        _fenced(bytes(body), session)
    assert info.value.details["field"] == "operation"


def test_an_operation_never_encoded_here_takes_the_general_path() -> None:
    session = new_session()
    _known(session, "echo")
    body = _reply_body(session, "never-sent-here", 1)
    assert _fenced(body, session, "never-sent-here").payload == 1


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (b'{"a":1,"a":2}', "duplicate key"),
        (b"[1e400]", "out of range"),
        (b'"\\ud800"', "lone surrogate"),
        (b"1 2", "JSON"),
        (b"\xff1", "UTF-8"),
        (b"NaN", "not valid JSON"),
    ],
)
def test_a_bad_payload_is_refused_by_name(text: bytes, words: str) -> None:
    session = new_session()
    _known(session, "echo")
    good = _reply_body(session, "echo", 12)  # a 2-byte payload, replaced below
    body = _with_payload(good, text)
    with pytest.raises(ProtocolError, match=words) as info:
        _fenced(body, session)
    assert info.value.details["field"] == "payload"


def test_payloads_the_fast_scan_hands_on_decode_the_same() -> None:
    session = new_session()
    _known(session, "echo")
    good = _reply_body(session, "echo", 12)
    for text, value in ((b" [1] ", [1]), (b'"\\u00e9\\ud83d\\ude00"', "é😀")):
        assert _fenced(_with_payload(good, text), session).payload == value


def _with_payload(good: bytes, text: bytes) -> bytes:
    """``good`` (a reply whose operation is ``echo``) with its payload replaced."""
    head = bytearray(good[:HEAD])
    head[30:34] = len(text).to_bytes(4, "big")
    return bytes(head) + good[HEAD : HEAD + 4] + text


# --- a frame read without an expected operation (the helper reading a job) -------------


def _job_body(session: str, operation: str) -> bytes:
    return encode_fields(kind="job", session=session, generation=3, operation=operation)[4:]


def _job(body: bytes, session: str) -> Any:
    return decode_fenced(body, session=session, kinds=("job", "cancel", "shutdown"))


def test_a_job_decodes_as_in_the_general_path_before_and_after_its_name_is_learnt() -> None:
    session = new_session()
    operation = "ünlearnt-" + session[:8]  # a name no other test has used
    body = _job_body(session, operation)
    first = _job(body, session)  # decoded and checked, then learnt
    again = _job(body, session)  # looked up by its bytes
    assert first == again == decode_envelope(body)
    assert type(again.operation) is str
    assert again.operation == operation


def test_a_job_whose_operation_bytes_are_not_utf8_is_refused_by_name() -> None:
    session = new_session()
    body = bytearray(_job_body(session, "echo"))
    _job(bytes(body), session)  # "echo" is known now
    body[HEAD] = 0xFF
    with pytest.raises(ProtocolError) as info:
        _job(bytes(body), session)
    assert info.value.details["field"] == "operation"


def test_a_job_whose_operation_is_too_long_is_refused_and_not_learnt() -> None:
    session = new_session()
    # Over 128 characters: only a forged frame carries it (the encoder refuses it).
    head = bytearray(_job_body(session, "echo")[:HEAD])
    head[28:30] = (200).to_bytes(2, "big")  # the operation's length in the head
    body = bytes(head) + b"x" * 200
    for _ in range(2):  # refused the second time too: a bad name is never learnt
        with pytest.raises(ProtocolError) as info:
            _job(body, session)
        assert info.value.details["field"] == "operation"
