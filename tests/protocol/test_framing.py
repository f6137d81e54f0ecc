"""Tests for protocol.framing: length-prefixed frames, sans-io (design §2.2)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import (
    DEFAULT_MAX_REPLY,
    DEFAULT_MAX_REQUEST,
    FrameDecoder,
    FrameTooLarge,
    ProtocolError,
    TruncatedFrame,
    encode_frame,
)


def header(length: int) -> bytes:
    return struct.pack(">I", length)


def tr(data: bytes, expected: list[bytes], *, max_size: int = DEFAULT_MAX_REPLY) -> None:
    """Feed ``data`` whole, one byte at a time, and with trailing data (h11 ``tr``)."""
    # Whole.
    decoder = FrameDecoder(max_size=max_size)
    assert decoder.feed(data) == expected
    assert decoder.buffered == 0
    decoder.close()

    # One byte at a time.
    decoder = FrameDecoder(max_size=max_size)
    got: list[bytes] = []
    for i in range(len(data)):
        got += decoder.feed(data[i : i + 1])
    assert got == expected
    decoder.close()

    # With trailing data: the start of another frame stays buffered.
    trailing = header(5) + b"ab"
    decoder = FrameDecoder(max_size=max_size)
    assert decoder.feed(data + trailing) == expected
    assert decoder.buffered == len(trailing)
    assert decoder.feed(b"cde") == [b"abcde"]
    decoder.close()


def test_encode_frame_layout() -> None:
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"
    assert encode_frame(bytearray(b"xy")) == b"\x00\x00\x00\x02xy"
    assert encode_frame(memoryview(b"xyz")) == b"\x00\x00\x00\x03xyz"
    assert encode_frame(b"x" * 300)[:4] == b"\x00\x00\x01\x2c"


@pytest.mark.parametrize(
    ("payloads"),
    [
        [b"hello"],
        [b""],
        [b"", b"", b""],
        [b"one", b"two", b"three"],
        # A payload that looks like a length prefix must not confuse the decoder.
        [header(3) + b"abc", header(0)],
        [bytes(range(256)) * 4],
    ],
)
def test_decode_whole_bytewise_trailing(payloads: list[bytes]) -> None:
    tr(b"".join(encode_frame(p) for p in payloads), payloads)


def test_feed_nothing_returns_nothing() -> None:
    decoder = FrameDecoder(max_size=10)
    assert decoder.feed(b"") == []
    assert decoder.feed(bytearray()) == []
    decoder.close()


def test_feed_accepts_bytearray_and_memoryview() -> None:
    decoder = FrameDecoder(max_size=10)
    assert decoder.feed(bytearray(encode_frame(b"a"))) == [b"a"]
    assert decoder.feed(memoryview(encode_frame(b"bc"))) == [b"bc"]
    assert all(type(p) is bytes for p in decoder.feed(encode_frame(b"d")))


def test_limit_is_inclusive() -> None:
    tr(encode_frame(b"x" * 10, max_size=10), [b"x" * 10], max_size=10)
    decoder = FrameDecoder(max_size=10)
    with pytest.raises(FrameTooLarge):
        decoder.feed(header(11))


def test_oversized_header_rejected_before_body() -> None:
    # Only the 4-byte prefix arrives, declaring 2 GiB: the error comes at once,
    # without waiting for (or buffering) any of the body.
    decoder = FrameDecoder(max_size=DEFAULT_MAX_REPLY)
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(header(2**31))
    assert info.value.code == "frame_too_large"
    assert info.value.details == {"size": 2**31, "limit": DEFAULT_MAX_REPLY}
    assert "2147483648" in str(info.value)


def test_oversized_header_split_bytewise() -> None:
    decoder = FrameDecoder(max_size=DEFAULT_MAX_REQUEST)
    data = header(DEFAULT_MAX_REQUEST + 1)
    for byte in data[:3]:
        assert decoder.feed(bytes([byte])) == []
    with pytest.raises(FrameTooLarge):
        decoder.feed(data[3:])


def test_oversized_header_after_good_frame_in_same_chunk() -> None:
    decoder = FrameDecoder(max_size=8)
    with pytest.raises(FrameTooLarge):
        decoder.feed(encode_frame(b"ok") + header(9) + b"123456789")


def test_decoder_stays_broken_after_error() -> None:
    decoder = FrameDecoder(max_size=4)
    with pytest.raises(FrameTooLarge):
        decoder.feed(header(5))
    with pytest.raises(FrameTooLarge, match="already failed"):
        decoder.feed(encode_frame(b"ok"))
    with pytest.raises(FrameTooLarge):
        decoder.close()


@pytest.mark.parametrize(
    ("data", "details"),
    [
        (b"\x00", {"buffered": 1}),
        (b"\x00\x00\x00", {"buffered": 3}),
        (header(5), {"buffered": 4, "expected": 9}),
        (header(5) + b"abcd", {"buffered": 8, "expected": 9}),
        (encode_frame(b"done") + header(1), {"buffered": 4, "expected": 5}),
    ],
)
def test_truncated_at_eof(data: bytes, details: dict[str, int]) -> None:
    decoder = FrameDecoder(max_size=100)
    decoder.feed(data)
    with pytest.raises(TruncatedFrame) as info:
        decoder.close()
    assert info.value.code == "truncated_frame"
    assert info.value.details == details
    assert isinstance(info.value, ProtocolError)


def test_clean_close_is_idempotent_and_final() -> None:
    decoder = FrameDecoder(max_size=100)
    assert decoder.feed(encode_frame(b"x")) == [b"x"]
    decoder.close()
    decoder.close()
    with pytest.raises(RuntimeError, match="after close"):
        decoder.feed(b"")


def test_encode_frame_refuses_oversized_payload() -> None:
    with pytest.raises(FrameTooLarge) as info:
        encode_frame(b"x" * (DEFAULT_MAX_REPLY + 1))
    assert info.value.details == {"size": DEFAULT_MAX_REPLY + 1, "limit": DEFAULT_MAX_REPLY}
    with pytest.raises(FrameTooLarge):
        encode_frame(b"x" * (DEFAULT_MAX_REQUEST + 1), max_size=DEFAULT_MAX_REQUEST)
    assert len(encode_frame(b"x" * DEFAULT_MAX_REQUEST, max_size=DEFAULT_MAX_REQUEST)) == (
        DEFAULT_MAX_REQUEST + 4
    )


def test_default_limits() -> None:
    assert DEFAULT_MAX_REQUEST == 64 * 1024
    assert DEFAULT_MAX_REPLY == 1024 * 1024
    assert FrameDecoder(max_size=7).max_size == 7


@pytest.mark.parametrize("bad", [True, 1.5, "10", None])
def test_limit_must_be_an_int(bad: object) -> None:
    with pytest.raises(TypeError, match="max_size"):
        FrameDecoder(max_size=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_size"):
        encode_frame(b"", max_size=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 2**32])
def test_limit_must_fit_the_prefix(bad: int) -> None:
    with pytest.raises(ValueError, match="max_size"):
        FrameDecoder(max_size=bad)


def test_encode_frame_refuses_text() -> None:
    with pytest.raises(TypeError, match="bytes"):
        encode_frame("abc")  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=40), max_size=8),
    data=st.data(),
)
def test_random_splits_decode_identically(payloads: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(encode_frame(p, max_size=64) for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    decoder = FrameDecoder(max_size=64)
    got: list[bytes] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        got += decoder.feed(stream[start:cut])
        start = cut
    decoder.close()
    assert got == payloads


def test_one_whole_frame_per_chunk_is_checked_like_any_other() -> None:
    # A chunk that is exactly one frame takes a shortcut; the limit still holds.
    decoder = FrameDecoder(max_size=10)
    assert decoder.feed(encode_frame(b"x" * 10)) == [b"x" * 10]
    with pytest.raises(FrameTooLarge):
        decoder.feed(header(11) + b"x" * 11)
    closed = FrameDecoder(max_size=10)
    closed.close()
    with pytest.raises(RuntimeError, match="after close"):
        closed.feed(encode_frame(b"x"))
