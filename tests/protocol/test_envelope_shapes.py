"""The encoder's shapes and the decoder's accepted heads (design §2.3).

Once a frame of a shape (kind, session, operation, status) has been encoded, the next
one of that shape skips the checks of those four fields; the generation, version, error
record, size limit and payload are still checked on every frame. The decoder compares
magic, version, kind and status as one 4-byte head against those its ``kinds`` accept
on the fast path. These tests check that a warm shape gives exactly the general path's
bytes and refusals, and that what a shape does not cover still takes every check.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol import FrameTooLarge, ProtocolError, ProtocolViolation, new_session
from protocol.envelope import (
    PROTOCOL_VERSION,
    Envelope,
    decode_envelope,
    decode_fenced,
    encode_envelope,
    encode_fields,
)

JOB: dict[str, Any] = {"kind": "job", "operation": "echo", "generation": 7, "payload": [1, "a"]}


def _warm(session: str) -> None:
    """Encode a job of the shape, so the next one takes the shape's path."""
    encode_fields(kind="job", session=session, generation=1, operation="echo", payload=1)


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"generation": 0},
        {"generation": 2**53 - 1},
        {"payload": None},
        {"payload": {"x": [None, 1.5, "ü"]}},
        {"kind": "cancel", "payload": None},
        {"kind": "reply", "status": "ok"},
        {"kind": "reply", "status": "cancelled", "payload": None},
        {"version": 1},
        {"version": 255},
    ],
)
def test_a_warm_shape_encodes_the_bytes_of_the_general_path(fields: dict[str, Any]) -> None:
    session = new_session()
    values = {**JOB, "session": session, "version": PROTOCOL_VERSION, **fields}
    general = encode_envelope(Envelope(**values))
    for _ in range(2):  # cold, then warm
        assert encode_fields(**values) == general


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"generation": -1}, "generation"),
        ({"generation": 2**53}, "generation"),
        ({"generation": True}, "generation"),
        ({"generation": 7.0}, "generation"),
        ({"version": 2.0}, "version"),
        ({"version": 256}, "version"),
        ({"error": {"category": "permanent", "code": "x", "message": "m"}}, "error"),
    ],
)
def test_a_warm_shape_still_checks_each_frames_own_fields(
    fields: dict[str, Any], field: str
) -> None:
    session = new_session()
    _warm(session)
    with pytest.raises(ValueError, match=field):
        encode_fields(**{**JOB, "session": session, **fields})


def test_a_warm_shape_still_checks_the_payload_and_the_limits() -> None:
    session = new_session()
    _warm(session)
    with pytest.raises(ProtocolError, match="payload") as caught:
        encode_fields(**{**JOB, "session": session, "payload": {1j}})
    assert caught.value.details["field"] == "payload"
    with pytest.raises(FrameTooLarge):
        encode_fields(**JOB, session=session, max_size=40)
    with pytest.raises(TypeError):
        encode_fields(**JOB, session=session, max_size=True)
    with pytest.raises(ValueError, match="max_size"):
        encode_fields(**JOB, session=session, max_size=-1)


def test_a_progress_frame_is_never_a_shape_its_payload_is_checked_each_time() -> None:
    session = new_session()
    progress = {"kind": "progress", "session": session, "generation": 1, "operation": "echo"}
    encode_fields(**progress, payload={"fraction": 0.5, "note": None})
    with pytest.raises(ValueError, match="payload"):
        encode_fields(**progress, payload={"fraction": 2})


def test_heads_accepted_for_kinds_decode_like_the_general_path() -> None:
    session = new_session()
    _warm(session)
    for kind, status in (("reply", "ok"), ("reply", "cancelled"), ("progress", None)):
        payload = {"fraction": 1.0, "note": "n"} if kind == "progress" else 3
        body = encode_fields(
            kind=kind, session=session, generation=1, operation="echo", status=status,
            payload=payload,
        )[4:]  # fmt: skip
        for kinds in (("reply", "progress"), ["reply", "progress"]):  # a list: no head cache
            got = decode_fenced(body, session=session, kinds=kinds, generation=1, operation="echo")  # type: ignore[arg-type]
            assert got == decode_envelope(body)
            assert got.version == PROTOCOL_VERSION


def test_odd_kinds_are_refused_as_by_the_general_path() -> None:
    session = new_session()
    _warm(session)
    body = encode_fields(**JOB, session=session)[4:]
    for kinds in ((["job"],), ("reply",), ()):
        with pytest.raises(ProtocolViolation) as caught:
            decode_fenced(body, session=session, kinds=kinds)  # type: ignore[arg-type]
        assert caught.value.details["field"] == "kind"
