"""Adversarial tests of protocol.framing (design §2.2): hostile and broken byte streams."""

from __future__ import annotations

import pytest

from protocol import FrameDecoder, FrameTooLarge, ProtocolError, TruncatedFrame, encode_frame
from protocol.framing import MAX_FRAME_LIMIT


def prefix(length: int) -> bytes:
    return length.to_bytes(4, "big")


def feed_whole_and_bytewise(data: bytes, *, max_size: int) -> list[list[bytes] | str]:
    """Feed whole and one byte at a time; return the frames, or the error's code."""
    outcomes: list[list[bytes] | str] = []
    for chunks in ([data], [data[i : i + 1] for i in range(len(data))]):
        decoder = FrameDecoder(max_size=max_size)
        got: list[bytes] = []
        try:
            for chunk in chunks:
                got += decoder.feed(chunk)
            decoder.close()
        except ProtocolError as exc:
            outcomes.append(exc.code)
            continue
        outcomes.append(got)
    return outcomes


def test_zero_length_frames_are_frames() -> None:
    data = prefix(0) * 3 + encode_frame(b"x", max_size=1) + prefix(0)
    assert feed_whole_and_bytewise(data, max_size=1) == [[b"", b"", b"", b"x", b""]] * 2
    decoder = FrameDecoder(max_size=0)
    assert decoder.feed(prefix(0)) == [b""]
    with pytest.raises(FrameTooLarge):
        decoder.feed(prefix(1))


def test_length_exactly_at_the_limit_and_one_over() -> None:
    limit = 1000
    at = prefix(limit) + b"a" * limit
    assert feed_whole_and_bytewise(at, max_size=limit) == [[b"a" * limit]] * 2
    over = prefix(limit + 1) + b"a" * (limit + 1)
    assert feed_whole_and_bytewise(over, max_size=limit) == ["frame_too_large"] * 2
    with pytest.raises(FrameTooLarge) as info:
        encode_frame(b"a" * (limit + 1), max_size=limit)
    assert info.value.details == {"size": limit + 1, "limit": limit}


@pytest.mark.parametrize("declared", [MAX_FRAME_LIMIT, 2**31, 10**9])
def test_huge_declared_length_fails_before_any_body_is_buffered(declared: int) -> None:
    decoder = FrameDecoder(max_size=MAX_FRAME_LIMIT - 1)
    if declared <= decoder.max_size:
        # A legal declared length is buffered only as its bytes arrive, never allocated.
        assert decoder.feed(prefix(declared) + b"abc") == []
        assert decoder.buffered == 4 + 3
        return
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(prefix(declared) + b"x" * 10)
    assert info.value.details == {"size": declared, "limit": MAX_FRAME_LIMIT - 1}
    assert decoder.buffered == 0


def test_max_limit_prefix_against_a_small_limit_is_refused_at_the_fourth_byte() -> None:
    decoder = FrameDecoder(max_size=64)
    for byte in prefix(MAX_FRAME_LIMIT)[:3]:
        assert decoder.feed(bytes([byte])) == []
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"\xff")
    assert decoder.buffered == 0


def test_garbage_after_valid_frames() -> None:
    good = encode_frame(b"one") + encode_frame(b"two")
    # garbage that reads as a huge length: an error, whole or byte by byte
    assert feed_whole_and_bytewise(good + b"GARBAGE!", max_size=64) == ["frame_too_large"] * 2
    # garbage that reads as a small length with too few bytes: truncated at EOF
    decoder = FrameDecoder(max_size=2**31)
    assert decoder.feed(good + b"\x00\x00\x00\x09abc") == [b"one", b"two"]
    with pytest.raises(TruncatedFrame) as info:
        decoder.close()
    assert info.value.details == {"buffered": 7, "expected": 13}
    # half a prefix at EOF
    decoder = FrameDecoder(max_size=64)
    assert decoder.feed(good + b"\x00\x00") == [b"one", b"two"]
    with pytest.raises(TruncatedFrame) as info:
        decoder.close()
    assert info.value.details == {"buffered": 2}


def test_feed_after_error_and_after_close() -> None:
    decoder = FrameDecoder(max_size=4)
    with pytest.raises(FrameTooLarge):
        decoder.feed(prefix(5))
    for _ in range(3):  # every later call fails again; nothing is resynchronised
        with pytest.raises(FrameTooLarge, match="already failed"):
            decoder.feed(encode_frame(b"ok"))
        with pytest.raises(FrameTooLarge, match="already failed"):
            decoder.close()
        with pytest.raises(FrameTooLarge, match="already failed"):
            decoder.feed(b"")
    decoder = FrameDecoder(max_size=4)
    assert decoder.feed(encode_frame(b"ok")) == [b"ok"]
    decoder.close()
    decoder.close()  # idempotent
    with pytest.raises(RuntimeError, match="after close"):
        decoder.feed(encode_frame(b"ok"))  # even a whole, well-formed frame
    with pytest.raises(RuntimeError, match="after close"):
        decoder.feed(b"")


def test_truncated_close_then_feed_keeps_failing() -> None:
    decoder = FrameDecoder(max_size=64)
    decoder.feed(prefix(10) + b"abc")
    with pytest.raises(TruncatedFrame):
        decoder.close()
    with pytest.raises(TruncatedFrame, match="already failed"):
        decoder.feed(b"defghij")


@pytest.mark.parametrize("bad", ["text", 12, None, [1, 2]])
def test_feed_refuses_non_bytes(bad: object) -> None:
    decoder = FrameDecoder(max_size=64)
    with pytest.raises(TypeError):
        decoder.feed(bad)  # type: ignore[arg-type]
    assert decoder.feed(encode_frame(b"fine")) == [b"fine"]


def test_bytearray_and_memoryview_chunks_are_copied() -> None:
    decoder = FrameDecoder(max_size=64)
    chunk = bytearray(encode_frame(b"abc") + encode_frame(b"de")[:3])
    frames = decoder.feed(chunk)
    chunk[4:7] = b"XYZ"  # the caller reuses its buffer
    assert frames == [b"abc"]
    assert all(type(f) is bytes for f in frames)
    assert decoder.feed(memoryview(encode_frame(b"de")[3:])) == [b"de"]


@pytest.mark.parametrize("bad", [-1, MAX_FRAME_LIMIT + 1, True, 1.0, "64", None])
def test_limits_are_validated(bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="max_size"):
        FrameDecoder(max_size=bad)  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError), match="max_size"):
        encode_frame(b"x", max_size=bad)  # type: ignore[arg-type]
