"""The binary part of the helper envelope (design §2.3): a :class:`protocol.Blob`.

Its exact bytes on the wire, every kind that carries one, the view a decoder hands on
(no copy of a ``bytes`` frame; a copy of anything mutable), the limit on the whole frame,
truncated and lying lengths, frames without one unchanged, and random ``Blob``s through
random splits of the stream (h11's ``tr``: whole, byte by byte, with trailing data).
"""

from __future__ import annotations

import array
import pickle
from typing import Any

import pytest
from envelope_support import ERROR, SESSION, framed, raw, refusal
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import (
    Blob,
    Envelope,
    FrameDecoder,
    FrameTooLarge,
    ProtocolError,
    decode_envelope,
    encode_envelope,
)
from protocol.envelope import decode_fenced, encode_fields

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
PROGRESS = {"fraction": 0.5, "note": "half"}


def reply(payload: Any, **changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "kind": "reply",
        "session": SESSION,
        "generation": 7,
        "operation": "metadata",
        "status": "ok",
        "payload": payload,
    }
    fields.update(changes)
    return fields


def fenced(body: bytes, kind: str = "reply") -> Envelope:
    return decode_fenced(body, session=SESSION, kinds=(kind,), generation=7, operation="metadata")


def test_the_exact_layout() -> None:
    frame = encode_fields(**reply(Blob(head={"w": 3}, data=b"\x00\xffPNG")))
    body = frame[4:]
    assert frame[:4] == len(body).to_bytes(4, "big")
    assert body[3] == 0x81  # status ok (1), bit 7: a binary part follows the payload
    assert body[30:34] == (7).to_bytes(4, "big")  # the payload's length: JSON only
    assert body[34:42] == b"metadata"
    assert body[42:49] == b'{"w":3}'
    assert body[49:53] == (5).to_bytes(4, "big")
    assert body[53:] == b"\x00\xffPNG"  # as they are: no base64
    assert body == raw(payload={"w": 3}, binary=b"\x00\xffPNG")  # the tests' own forger


def test_a_frame_without_a_binary_part_is_unchanged() -> None:
    # Old text-only frames: the same bytes as before the binary part existed.
    frame = encode_fields(**reply({"rows": 3}))
    assert frame[4:] == raw()
    assert frame[4 + 3] == 1
    assert fenced(raw()).payload == {"rows": 3}


@pytest.mark.parametrize(
    "fields",
    [
        reply(Blob(head={"w": 3}, data=PNG)),
        reply(Blob(data=PNG)),  # no head: no payload bytes
        reply(Blob(head=0, data=b"")),  # an empty part is still a part
        reply(Blob(data=b"dump"), status="error", error=ERROR),
        reply(Blob(head={"partial": 1}, data=b"x"), status="error", error=ERROR),
        reply(Blob(head=PROGRESS, data=PNG), kind="progress", status=None),
        reply(Blob(head=["mod:fn"], data=b"\x80\x05"), kind="job", status=None),
    ],
    ids=["reply", "no-head", "empty", "error", "error-head", "progress", "job"],
)
def test_roundtrip_every_path(fields: dict[str, Any]) -> None:
    frame = encode_fields(**fields)
    (body,) = FrameDecoder(max_size=2**20).feed(frame)
    env = decode_envelope(body)
    assert env.payload == fields["payload"]
    assert env.error == fields.get("error")
    assert fenced(body, fields["kind"]) == env  # the fast path agrees
    assert encode_envelope(env) == frame  # and it encodes to the same bytes


def test_the_decoded_part_is_a_read_only_view_of_the_frame() -> None:
    body = encode_fields(**reply(Blob(head={"w": 3}, data=PNG)))[4:]
    for env in (decode_envelope(body), fenced(body)):
        data = env.payload.data
        assert type(data) is memoryview
        assert data.readonly
        assert data.obj is body  # no copy
        assert data == PNG
        assert bytes(data) == PNG


def test_a_mutable_frame_is_copied() -> None:
    body = bytearray(encode_fields(**reply(Blob(data=PNG)))[4:])
    env = decode_envelope(body)  # type: ignore[arg-type]
    body[-1] ^= 0xFF  # the caller reuses its buffer: the decoded bytes do not change
    assert env.payload.data == PNG


@pytest.mark.parametrize(
    "data",
    [
        bytearray(b"abc"),
        memoryview(b"xabcx")[1:4],
        memoryview(array.array("H", [0x6261, 0x63])).cast("B")[:3],
    ],
)
def test_any_bytes_like_data(data: bytes | bytearray | memoryview) -> None:
    env = fenced(encode_fields(**reply(Blob(data=data)))[4:])
    assert env.payload == Blob(data=b"abc")


def test_a_memoryview_of_another_format_is_its_raw_bytes() -> None:
    words = array.array("I", [1, 2])
    blob = Blob(data=memoryview(words))
    assert len(blob.data) == 8
    assert fenced(encode_fields(**reply(blob))[4:]).payload.data == words.tobytes()


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ("text", TypeError),
        (None, TypeError),
        ([1], TypeError),
        (memoryview(b"abcd")[::2], ValueError),
    ],
)
def test_blob_names_a_bad_data_field(data: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="'data'"):
        Blob(data=data)


def test_blob_is_a_frozen_value() -> None:
    blob = Blob(head={"a": 1}, data=b"xy")
    assert blob == Blob(head={"a": 1}, data=memoryview(b"xy"))
    assert blob != (blob.head, blob.data)  # only a Blob equals a Blob
    assert blob != Blob(head={"a": 1}, data=b"xz")
    with pytest.raises(AttributeError):
        blob.data = b"z"  # type: ignore[misc]
    assert repr(Blob(data=PNG)) == f"Blob(head=None, data=<{len(PNG)} bytes>)"  # no bytes in logs
    decoded = fenced(encode_fields(**reply(blob))[4:]).payload
    assert pickle.loads(pickle.dumps(decoded)) == blob


def test_the_limit_is_on_the_whole_frame() -> None:
    fields = reply(Blob(head={"w": 3}, data=PNG))
    size = len(encode_fields(**fields)) - 4
    assert len(encode_fields(**fields, max_size=size)) == size + 4  # exactly at the limit
    with pytest.raises(FrameTooLarge) as info:
        encode_fields(**fields, max_size=size - 1)
    assert info.value.details == {"size": size, "limit": size - 1, "field": "data"}
    assert "binary part (field 'data')" in info.value.message
    assert f"{len(PNG)} bytes" in info.value.message
    # and the receiver refuses such a frame before buffering it (design §2.2)
    with pytest.raises(FrameTooLarge):
        FrameDecoder(max_size=size - 1).feed(encode_fields(**fields)[:4])


def test_a_progress_report_with_bytes_is_checked_like_any_other() -> None:
    with pytest.raises(ValueError, match="payload"):
        encode_fields(**reply(Blob(head={"rows": 3}, data=b"x"), kind="progress", status=None))
    with pytest.raises(ProtocolError) as info:
        decode_envelope(raw(kind="progress", status=None, binary=b"x"))  # head {"rows": 3}
    assert info.value.details == {"field": "payload"}


def test_a_head_that_is_not_json_is_refused() -> None:
    with pytest.raises(ProtocolError) as info:
        encode_fields(**reply(Blob(head={1, 2}, data=b"x")))
    assert info.value.details == {"field": "payload"}


def test_a_nested_blob_is_not_a_binary_part() -> None:
    with pytest.raises(ProtocolError) as info:
        encode_fields(**reply({"image": Blob(data=b"x")}))
    assert info.value.details == {"field": "payload"}


@pytest.mark.parametrize(
    ("binary_len", "field"),
    [(9, "data"), (2**32 - 1, "data"), (3, "error")],  # too long; shorter: bytes left over
)
def test_lengths_that_lie(binary_len: int, field: str) -> None:
    body = raw(binary=b"\x89PNGxxxx", binary_len=binary_len)
    assert refusal(body).details == {"field": field}
    with pytest.raises(ProtocolError) as info:
        fenced(body)
    assert info.value.details == {"field": field}


@pytest.mark.parametrize("kind", ["reply", "progress", "error"])
def test_every_truncation_of_a_binary_frame(kind: str) -> None:
    if kind == "error":
        body = raw(status="error", payload=None, error=ERROR, binary=b"dump")
    elif kind == "progress":
        body = raw(kind="progress", status=None, payload=PROGRESS, binary=b"\x00\x01\x02")
    else:
        body = raw(binary=b"\x89PNG\x00")
    kind_name = decode_envelope(body).kind
    for length in range(len(body)):
        cut = body[:length]
        error = refusal(cut)  # a plain ProtocolError, bounded: never a silent decode
        assert error.details["field"] in ("<frame>", "data", "error", "payload"), length
        with pytest.raises(ProtocolError):
            decode_fenced(cut, session=SESSION, kinds=(kind_name,))


def test_a_truncated_stream_inside_the_part_is_a_truncated_frame() -> None:
    frame = framed(raw(binary=PNG))
    decoder = FrameDecoder(max_size=2**20)
    assert decoder.feed(frame[:-10]) == []
    with pytest.raises(ProtocolError) as info:
        decoder.close()
    assert info.value.code == "truncated_frame"


def tr(stream: bytes, expected: list[Envelope]) -> None:
    """Decode ``stream`` whole, one byte at a time, and with trailing data (h11 ``tr``)."""

    def decode(bodies: list[bytes]) -> list[Envelope]:
        return [decode_fenced(b, session=SESSION, kinds=("reply", "progress")) for b in bodies]

    decoder = FrameDecoder(max_size=2**20)
    assert decode(decoder.feed(stream)) == expected
    decoder.close()
    decoder = FrameDecoder(max_size=2**20)
    got: list[Envelope] = []
    for i in range(len(stream)):
        got += decode(decoder.feed(stream[i : i + 1]))
    decoder.close()
    assert got == expected
    decoder = FrameDecoder(max_size=2**20)
    assert decode(decoder.feed(stream + stream[:7])) == expected
    assert decoder.buffered == 7


def test_binary_frames_in_a_stream() -> None:
    frames = [
        encode_fields(**reply(Blob(head=PROGRESS, data=b"p"), kind="progress", status=None)),
        encode_fields(**reply({"rows": 3})),
        encode_fields(**reply(Blob(head={"w": 3}, data=PNG))),
    ]
    tr(b"".join(frames), [decode_envelope(f[4:]) for f in frames])


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    parts=st.lists(st.tuples(_json, st.binary(max_size=64), st.booleans()), min_size=1, max_size=5),
    data=st.data(),
)
def test_random_blobs_through_random_splits(
    parts: list[tuple[Any, bytes, bool]], data: st.DataObject
) -> None:
    payloads = [
        Blob(head=head, data=raw_bytes) if binary else head for head, raw_bytes, binary in parts
    ]
    stream = b"".join(encode_fields(**reply(p)) for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    decoder = FrameDecoder(max_size=2**16)
    got: list[Any] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        got += [fenced(body).payload for body in decoder.feed(stream[start:cut])]
        start = cut
    decoder.close()
    assert got == payloads
