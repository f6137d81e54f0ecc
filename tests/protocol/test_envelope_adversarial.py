"""Adversarial tests of the helper envelope (design §2.3): hostile frames from a helper.

Every byte of the binary head forged (magic, version, kind and status codes, generation,
session, lengths that lie), operations that are not UTF-8, payloads and error records
that are not strict JSON (duplicate keys, NaN, overflowing numbers, lone surrogates,
recursion bombs), truncations, an old all-JSON frame, seeded random garbage and random
mutations of valid frames (with and without a binary part); and replies fenced by
version, session, generation and operation. Every refusal is a ``ProtocolError`` naming
the field, with a bounded message; nothing else ever escapes, and whatever decodes can
be encoded again.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import pytest
from envelope_support import (
    ERROR,
    HEAD_SIZE,
    KIND_CODES,
    SESSION,
    STATUS_CODES,
    base,
    check_bounded,
    js,
    raw,
    refusal,
)

from protocol import (
    MAX_GENERATION,
    PROTOCOL_VERSION,
    Envelope,
    ProtocolError,
    ProtocolViolation,
    check_reply,
    decode_envelope,
    encode_envelope,
    new_session,
)
from protocol.envelope import MAX_VERSION, decode_fenced

if TYPE_CHECKING:
    from collections.abc import Callable

KIND_NAMES = {code: name for name, code in KIND_CODES.items()}
STATUS_NAMES = {code: name for name, code in STATUS_CODES.items()}
PROGRESS = {"fraction": 0.25, "note": "page 1 of 4"}

Outcome = Envelope | tuple[type[ProtocolError], dict[str, Any], str]


def outcome(call: Callable[..., Envelope], *args: Any, **kwargs: Any) -> Outcome:
    """The envelope ``call(...)`` returns, or the ProtocolError it raises; nothing else."""
    try:
        env = call(*args, **kwargs)
    except ProtocolError as exc:
        check_bounded(exc)
        return (type(exc), exc.details, str(exc))
    assert type(env) is Envelope
    return env


def named(body: bytes) -> str:
    """The field a refusal of ``body`` names."""
    field: str = refusal(body).details["field"]
    return field


# --- the fixed head ----------------------------------------------------------------


@pytest.mark.parametrize("length", range(HEAD_SIZE))
def test_every_truncated_head_is_refused(length: int) -> None:
    for body in (raw()[:length], bytes(length), b"\xff" * length):
        error = refusal(body)
        assert error.details == {"field": "<frame>"}
        assert "shorter" in error.message


@pytest.mark.parametrize("magic", [0x00, 0x01, 0x7B, 0xAD, 0xAF, 0xEA, 0xFF])
def test_a_wrong_magic_byte_is_not_an_envelope(magic: int) -> None:
    error = refusal(raw(magic=magic))
    assert error.details == {"field": "<frame>"}
    assert f"0x{magic:02x}" in error.message
    # checked before anything else in the head
    assert named(raw(magic=magic, kind_code=0, status_code=99, op_len=0xFFFF)) == "<frame>"


def test_an_old_all_json_frame_is_not_an_envelope() -> None:
    fields = base(version=1)  # as version 1 wrote it: one JSON object
    for v1 in (js(fields), js(fields)[:10], b" " + js(fields), js(fields) + bytes(64)):
        error = refusal(v1)
        assert error.details == {"field": "<frame>"}


def expected_field(kind_code: int, status_code: int) -> str | None:
    """What a reply frame with payload {"rows": 3} and no error record is refused for."""
    kind = KIND_NAMES.get(kind_code)
    if kind is None:
        return "kind"
    if status_code & 0x7F not in STATUS_NAMES:
        return "status"
    if status_code & 0x80:
        return "data"  # bit 7 says a binary part follows the payload: its length is not there
    status = STATUS_NAMES[status_code]
    if (kind in ("ready", "reply")) != (status is not None):
        return "status"
    if status == "error":
        return "error"  # no record
    if kind == "progress":
        return "payload"  # {"rows": 3} is no progress payload
    return None


def test_every_kind_and_status_byte() -> None:
    accepted = 0
    for kind_code in range(256):
        for status_code in range(256):
            body = raw(kind_code=kind_code, status_code=status_code)
            field = expected_field(kind_code, status_code)
            if field is None:
                env = decode_envelope(body)
                assert env.kind == KIND_NAMES[kind_code]
                assert env.status == STATUS_NAMES[status_code]
                accepted += 1
                continue
            with pytest.raises(ProtocolError) as info:
                decode_envelope(body)
            assert info.value.details == {"field": field}, (kind_code, status_code)
            assert len(info.value.message) < 2000
    # startup, job, cancel, shutdown with none; ready and reply with ok or cancelled
    assert accepted == 4 + 2 * 2


def test_every_version_byte_is_decoded_and_fenced() -> None:
    for version in range(MAX_VERSION + 1):
        body = raw(version=version)
        env = decode_envelope(body)
        assert env.version == version
        if version == PROTOCOL_VERSION:
            check_reply(env, session=SESSION, generation=7, operation="metadata")
            continue
        with pytest.raises(ProtocolViolation) as info:
            decode_fenced(body, session=SESSION, kinds=("reply",), generation=7)
        assert info.value.details == {
            "field": "version",
            "expected": PROTOCOL_VERSION,
            "got": version,
        }


@pytest.mark.parametrize(
    ("generation", "field"),
    [
        (0, None),
        (1, None),
        (MAX_GENERATION, None),
        (MAX_GENERATION + 1, "generation"),
        (2**63 - 1, "generation"),
        (2**63, "generation"),
        (2**64 - 1, "generation"),
    ],
)
def test_generation_bytes(generation: int, field: str | None) -> None:
    body = raw(generation=generation)
    if field is None:
        assert decode_envelope(body).generation == generation
    else:
        error = refusal(body)
        assert error.details == {"field": field}
        with pytest.raises(ProtocolError) as fenced:
            decode_fenced(body, session=SESSION, kinds=("reply",))
        assert fenced.value.details == {"field": field}
        assert str(fenced.value) == str(error)


def test_any_sixteen_session_bytes_decode_and_one_bit_off_is_fenced() -> None:
    rng = random.Random(2)
    for _ in range(50):
        session = rng.randbytes(16)
        assert decode_envelope(raw(session=session)).session == session.hex()
    ours = bytes.fromhex(SESSION)
    for bit in range(128):
        flipped = (int.from_bytes(ours, "big") ^ (1 << bit)).to_bytes(16, "big")
        body = raw(session=flipped)
        with pytest.raises(ProtocolViolation) as info:
            decode_fenced(body, session=SESSION, kinds=("reply",), generation=7)
        assert info.value.details == {
            "field": "session",
            "expected": SESSION,
            "got": flipped.hex(),
        }


# --- lengths that lie ----------------------------------------------------------------

OP = len(b"metadata")
PAYLOAD = len(b'{"rows":3}')


@pytest.mark.parametrize(
    ("lengths", "field"),
    [
        # declared beyond the body
        ({"op_len": OP + 1}, "<frame>"),
        ({"payload_len": PAYLOAD + 1}, "<frame>"),
        ({"op_len": 0xFFFF}, "<frame>"),
        ({"payload_len": 0xFFFF_FFFF}, "<frame>"),
        ({"op_len": 0xFFFF, "payload_len": 0xFFFF_FFFF}, "<frame>"),
        ({"op_len": OP + PAYLOAD + 1, "payload_len": 0}, "<frame>"),
        # shorter: what is left over is read as the next part
        ({"payload_len": PAYLOAD - 1}, "payload"),  # '{"rows":3' is not JSON
        ({"payload_len": 0}, "error"),  # the payload is left over, as an error record
        ({"op_len": OP - 4, "payload_len": 0}, "error"),  # 'data{"rows":3}' left over
        ({"op_len": OP - 1}, "payload"),  # 'a{"rows":3' is the payload
        ({"op_len": OP - 1, "payload_len": PAYLOAD + 1}, "payload"),  # 'a{"rows":3}'
        ({"op_len": OP + 1, "payload_len": PAYLOAD - 1}, "payload"),  # '"rows":3}'
        ({"op_len": 0}, "payload"),
        ({"op_len": 0, "payload_len": 0}, "error"),
    ],
)
def test_lengths_that_lie(lengths: dict[str, Any], field: str) -> None:
    assert named(raw(**lengths)) == field


def test_a_length_can_move_bytes_between_well_formed_parts() -> None:
    # The whole rest declared as the operation: 18 characters, no payload; well formed,
    # and the fence refuses it.
    body = raw(op_len=OP + PAYLOAD, payload_len=0)
    env = decode_envelope(body)
    assert (env.operation, env.payload) == ('metadata{"rows":3}', None)
    with pytest.raises(ProtocolViolation) as info:
        decode_fenced(body, session=SESSION, kinds=("reply",), generation=7, operation="metadata")
    assert info.value.details["field"] == "operation"


@pytest.mark.parametrize(
    "trailing",
    [b"x", b"{}", b"[]", b"0", b"\x00", b" ", b"\n", js(ERROR), b'"error"', b"\xff"],
)
def test_trailing_bytes_are_an_error_record_only_for_status_error(trailing: bytes) -> None:
    for kind, status in (("reply", "ok"), ("reply", "cancelled"), ("job", None)):
        body = raw(kind=kind, status=status) + trailing
        error = refusal(body)
        assert error.details == {"field": "error"}
        with pytest.raises(ProtocolError) as fenced:
            decode_fenced(body, session=SESSION, kinds=(kind,), generation=7, operation="metadata")
        assert fenced.value.details == {"field": "error"}
        assert str(fenced.value) == str(error)
    if trailing.strip():  # JSON allows whitespace after the record
        with_record = raw(status="error", payload=None, error=ERROR)
        assert named(with_record + trailing) == "error"  # extra data after the record


@pytest.mark.parametrize("trailing", [b"null", b" null\n"])
def test_a_trailing_null_is_an_error_record_too(trailing: bytes) -> None:
    assert named(raw() + trailing) == "error"


def test_an_error_record_swallowed_by_the_payload_length() -> None:
    record = js(ERROR)
    body = raw(status="error", payload=None, error=record, payload_len=len(record))
    assert named(body) == "error"  # the record read as the payload: none is left


@pytest.mark.parametrize("kind", ["reply", "ready"])
def test_every_truncation_of_a_frame(kind: str) -> None:
    plain = raw(kind=kind)
    for length in range(len(plain)):
        assert named(plain[:length]) == "<frame>", length
    with_record = raw(kind=kind, status="error", payload={"partial": 1}, error=ERROR)
    head_and_payload = len(with_record) - len(js(ERROR))
    for length in range(len(with_record)):
        want = "<frame>" if length < head_and_payload else "error"
        assert named(with_record[:length]) == want, length
    assert decode_envelope(with_record).error == ERROR


# --- the operation ------------------------------------------------------------------


@pytest.mark.parametrize(
    "operation",
    [
        b"\xff",
        b"read\xffrun",
        b"\x80",
        b"\xc3",  # a truncated two-byte sequence
        b"\xe2\x82",  # a truncated three-byte sequence
        b"\xc0\x80",  # an overlong NUL
        b"\xc0\xaf",  # an overlong "/"
        b"\xed\xa0\x80",  # a lone high surrogate, UTF-8 encoded
        b"read\xed\xb3\xbfrun",  # a lone low surrogate (surrogateescape of 0xff)
        b"\xf4\x90\x80\x80",  # past U+10FFFF
        b"\xf8\x88\x80\x80\x80",  # a five-byte sequence
        "metadata".encode("utf-16"),
    ],
)
def test_an_operation_that_is_not_utf8_is_refused(operation: bytes) -> None:
    error = refusal(raw(operation=operation))
    assert error.details == {"field": "operation"}
    assert "UTF-8" in error.message


@pytest.mark.parametrize(
    ("operation", "field"),
    [
        (b"", "operation"),
        (b"x" * 129, "operation"),
        (b"x" * 0xFFFF, "operation"),
        ("😀" * 129, "operation"),
        ("😀" * 128, None),
        ("x", None),
        ("op\x00name", None),  # any characters: the operation is only compared
    ],
)
def test_operation_lengths(operation: str | bytes, field: str | None) -> None:
    body = raw(operation=operation)
    if field is None:
        assert decode_envelope(body).operation == operation
    else:
        assert named(body) == field


# --- the payload and the error record: strict JSON -----------------------------------

NOT_STRICT_JSON = [
    b" ",
    b"nul",
    b"not json",
    b"{",
    b"[1,]",
    b'{"a":1,}',
    b"[1] [2]",
    b"01",
    b"+1",
    b".5",
    b"0x10",
    b"True",
    b"None",
    b"'x'",
    b"{'a':1}",
    b'"\\x41"',
    b'"\\u12"',
    b'"\x01"',  # a raw control character in a string
    b"\x00",
    b"\xef\xbb\xbf{}",  # a UTF-8 byte order mark
    "{}".encode("utf-16"),
    "{}".encode("utf-32"),
    b'"\xff"',
    b'"\xc0\x80"',
    b'"\xed\xa0\x80"',  # a lone surrogate, UTF-8 encoded
    b'"\\udcff"',  # a lone surrogate, escaped
    b'{"\\ud800":1}',  # in a key
    b'["\\ud83d"]',  # half a pair
    b'["\\ude00\\ud83d"]',  # a pair the wrong way round
    b'{"a":1,"a":2}',
    b'{"x":{"a":1,"a":2}}',
    b'[{"a":1,"b":2,"a":1}]',
    b"NaN",
    b"[NaN]",
    b"[Infinity]",
    b"[-Infinity]",
    b'{"x":-Infinity}',
    b"1e400",
    b"-1e400",
    b"[1E+309]",
    b"9" * 400 + b".5",
    b"9" * 5000,  # past Python's int digit limit
]


@pytest.mark.parametrize("text", NOT_STRICT_JSON)
def test_a_payload_that_is_not_strict_json_is_refused(text: bytes) -> None:
    assert named(raw(payload=text)) == "payload"
    assert named(raw(kind="job", status=None, payload=text)) == "payload"


@pytest.mark.parametrize("text", NOT_STRICT_JSON)
def test_an_error_record_that_is_not_strict_json_is_refused(text: bytes) -> None:
    assert named(raw(status="error", payload=None, error=text)) == "error"


def test_refusals_say_why() -> None:
    assert "duplicate key" in refusal(raw(payload=b'{"a":1,"a":2}')).message
    assert "duplicate key" in refusal(raw(payload=b'{"x":{"a":1,"a":2}}')).message
    assert "out of range" in refusal(raw(payload=b"[1e400]")).message
    assert "surrogate" in refusal(raw(payload=b'"\\udcff"')).message
    doubled = b'{"category":"transient","category":"permanent","code":"x","message":"m"}'
    assert "duplicate key" in refusal(raw(status="error", payload=None, error=doubled)).message
    long_key = b'{"' + b"k" * 100_000 + b'":1,"' + b"k" * 100_000 + b'":2}'
    assert "duplicate key" in refusal(raw(payload=long_key)).message  # and bounded


def test_huge_integers_fail_cleanly() -> None:
    assert decode_envelope(raw(payload=b"9" * 4000)).payload == int("9" * 4000)
    assert named(raw(payload=b"9" * 5000)) == "payload"
    assert named(raw(payload=b"[" + b"9" * 100_000 + b"]")) == "payload"
    progress = raw(kind="progress", status=None, payload=b'{"fraction":' + b"9" * 4000 + b"}")
    assert named(progress) == "payload"  # out of [0, 1], message cut short


@pytest.mark.parametrize("depth", [100, 3000, 200_000])
@pytest.mark.parametrize("opener", [b"[", b'{"a":'])
def test_recursion_bombs_fail_cleanly(depth: int, opener: bytes) -> None:
    closer = b"]" if opener == b"[" else b"}"
    bomb = opener * depth + b"1" + closer * depth
    for body, field in (
        (raw(kind="job", status=None, payload=bomb), "payload"),
        (raw(status="error", payload=None, error=bomb), "error"),
        (raw(status="error", payload=bomb, error=ERROR), "payload"),
    ):
        result = outcome(decode_envelope, body)
        if isinstance(result, Envelope):
            assert field == "payload"
            assert result.generation == 7
        else:
            assert result[1] == {"field": field}


@pytest.mark.parametrize(
    "error",
    [
        {"category": "permanent", "code": "x"},
        {"category": "permanent", "code": "x", "message": "m", "extra": 1},
        {"category": "fatal", "code": "x", "message": "m"},
        {"category": "permanent", "code": "Not_Snake", "message": "m"},
        {"category": "permanent", "code": "a__b", "message": "m"},
        {"category": "permanent", "code": "_a", "message": "m"},
        {"category": "permanent", "code": "", "message": "m"},
        {"category": "permanent", "code": "x" * 65, "message": "m"},
        {"category": "permanent", "code": 5, "message": "m"},
        {"category": "permanent", "code": "x", "message": 5},
        {"category": "permanent", "code": "x", "message": None},
        {"category": "permanent", "code": "x", "message": "é" * 600},  # 1200 bytes
        {"category": ["permanent"], "code": "x", "message": "m"},
        {"category": {"a": 1}, "code": "x", "message": "m"},
        {},
        [],
        "permanent",
        5,
        b"null",
    ],
)
def test_bad_error_records_are_named(error: Any) -> None:
    assert named(raw(status="error", payload=None, error=error)) == "error"
    assert named(raw(kind="ready", status="error", payload=None, error=error)) == "error"


def test_surrogates_on_the_way_out_are_a_protocol_error() -> None:
    # A file name decoded with surrogateescape, say: never a UnicodeEncodeError.
    cases: list[tuple[dict[str, Any], str]] = [
        ({"payload": {"path": "/data/\udcff.db"}}, "payload"),
        ({"payload": {"\udcff": 1}}, "payload"),
        ({"operation": "op\ud800"}, "operation"),
        (
            {"status": "error", "payload": None, "error": {**ERROR, "message": "/\udcff.db"}},
            "error",
        ),
    ]
    for changes, field in cases:
        with pytest.raises(ProtocolError) as info:
            encode_envelope(Envelope(**base(**{"payload": None, **changes})))
        assert type(info.value) is ProtocolError
        assert info.value.details == {"field": field}


def test_error_records_with_surrogates_are_escaped_not_lost() -> None:
    from actors.errors import SourceUnreadable

    record = SourceUnreadable("cannot open /data/\udcff.db").to_record()
    assert record.message == "cannot open /data/\\udcff.db"
    env = Envelope(
        version=PROTOCOL_VERSION,
        kind="reply",
        session=SESSION,
        generation=7,
        operation="metadata",
        status="error",
        error=record.to_dict(),
    )
    assert decode_envelope(encode_envelope(env)[4:]).error == record.to_dict()


# --- fencing --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"version": PROTOCOL_VERSION + 1}, "version"),
        ({"version": 0}, "version"),
        ({"version": MAX_VERSION}, "version"),
        ({"session": new_session()}, "session"),
        ({"session": bytes(16)}, "session"),
        ({"generation": 6}, "generation"),
        ({"generation": 8}, "generation"),
        ({"generation": 0}, "generation"),
        ({"generation": MAX_GENERATION}, "generation"),
        ({"operation": "METADATA"}, "operation"),
        ({"operation": "metadata\x00"}, "operation"),
        ({"kind": "job", "status": None}, "kind"),
        ({"kind": "progress", "status": None, "payload": PROGRESS}, "kind"),
        ({"kind": "ready"}, "kind"),
        # the first mismatch in order version, kind, session, generation, operation
        ({"version": 0, "kind": "ready", "generation": 6}, "version"),
        ({"kind": "ready", "session": bytes(16)}, "kind"),
        ({"generation": 6, "operation": "x", "session": bytes(16)}, "session"),
        ({"generation": 6, "operation": "x"}, "generation"),
    ],
)
def test_fencing_names_the_mismatch(changes: dict[str, Any], field: str) -> None:
    body = raw(**changes)
    env = decode_envelope(body)
    with pytest.raises(ProtocolViolation) as checked:
        check_reply(env, session=SESSION, generation=7, operation="metadata")
    assert checked.value.details["field"] == field
    assert checked.value.details["got"] == getattr(env, field)
    assert checked.value.code == "protocol_violation"
    with pytest.raises(ProtocolViolation) as fenced:
        decode_fenced(body, session=SESSION, kinds=("reply",), generation=7, operation="metadata")
    assert fenced.value.details == checked.value.details
    assert str(fenced.value) == str(checked.value)


def test_a_matching_reply_passes_the_fence() -> None:
    env = decode_envelope(raw())
    check_reply(env, session=SESSION, generation=7, operation="metadata")
    assert env.payload == {"rows": 3}
    assert decode_fenced(raw(), session=SESSION, kinds=("reply",), generation=7) == env


# --- random garbage and random mutations --------------------------------------------


def fence_order(env: Envelope, kind: str, *, any_job: bool = False) -> str | None:
    """The first field of ``env`` that differs from the frame we expect (None: none).

    We expect ``kind`` in our session, for generation 7 and operation "metadata" unless
    ``any_job``.
    """
    expected: dict[str, object] = {"version": PROTOCOL_VERSION, "kind": kind, "session": SESSION}
    if not any_job:
        expected |= {"generation": 7, "operation": "metadata"}
    for field, value in expected.items():
        if getattr(env, field) != value:
            return field
    if env.kind == "ready" and env.status == "cancelled":
        return "status"
    return None


def check_everything(body: bytes) -> Outcome:
    """Decode ``body`` every way there is; all must agree, and nothing else escapes."""
    decoded = outcome(decode_envelope, body)
    if isinstance(decoded, Envelope):
        # whatever decodes can be encoded again, to the same envelope
        again = encode_envelope(decoded, max_size=2**24)[4:]
        assert decode_envelope(again) == decoded
    else:
        assert decoded[0] is ProtocolError
    for kind in ("reply", "job", "ready", "progress"):
        fenced = outcome(
            decode_fenced, body, session=SESSION, kinds=(kind,), generation=7, operation="metadata"
        )
        if not isinstance(decoded, Envelope):
            assert fenced == decoded  # the same type, details and message
            continue
        field = fence_order(decoded, kind)
        if field is None:
            assert fenced == decoded
        else:
            assert not isinstance(fenced, Envelope)
            assert fenced[0] is ProtocolViolation
            assert fenced[1]["field"] == field
        if kind != "job":  # check_reply fences answers and progress only
            assert fenced == outcome(check, decoded, kind)  # details and message too
        unfenced = outcome(decode_fenced, body, session=SESSION, kinds=(kind,))
        field = fence_order(decoded, kind, any_job=True)
        if field is None:
            assert unfenced == decoded
        else:
            assert not isinstance(unfenced, Envelope)
            assert unfenced[0] is ProtocolViolation
            assert unfenced[1]["field"] == field
    return decoded


def check(env: Envelope, kind: str) -> Envelope:
    check_reply(env, session=SESSION, generation=7, operation="metadata", kind=kind)
    return env


VALID_FRAMES = [
    raw(),
    raw(status="cancelled", payload=None),
    raw(status="error", payload=None, error=ERROR),
    raw(status="error", payload={"partial": [1, 2]}, error=ERROR),
    raw(kind="progress", status=None, payload=PROGRESS),
    raw(kind="job", status=None, payload={"run_id": 3, "name": "é", "f": 0.5}),
    raw(kind="job", status=None, payload=None),
    raw(kind="ready", payload={"pid": 1}),
    raw(kind="ready", status="cancelled"),
    # with a binary part (design §2.3)
    raw(binary=b"\x89PNG\r\n\x1a\n\x00\xff"),
    raw(payload=None, binary=b""),
    raw(status="error", payload=None, error=ERROR, binary=b"dump\x00"),
    raw(kind="progress", status=None, payload=PROGRESS, binary=bytes(range(7))),
    raw(kind="job", status=None, payload=["mod:fn"], binary=b"\x80\x05pickle"),
]


@pytest.mark.parametrize("index", range(len(VALID_FRAMES)))
def test_random_mutations_of_a_valid_frame(index: int) -> None:
    body = VALID_FRAMES[index]
    assert isinstance(check_everything(body), Envelope)
    rng = random.Random(index)
    accepted = refused = 0
    for position in range(len(body)):
        old = body[position]
        values = {old ^ 0x01, old ^ 0x80, 0x00, 0xFF, *rng.sample(range(256), 4)} - {old}
        mutants = [body[:position] + bytes([value]) + body[position + 1 :] for value in values]
        mutants.append(body[:position] + body[position + 1 :])  # a byte deleted
        mutants.append(body[:position] + rng.randbytes(1) + body[position:])  # inserted
        for mutant in mutants:
            if isinstance(check_everything(mutant), Envelope):
                accepted += 1
            else:
                refused += 1
    assert accepted > 0
    assert refused > 0


def test_random_garbage() -> None:
    rng = random.Random(20240611)
    for _ in range(300):  # anything at all: nearly always the wrong magic
        check_everything(rng.randbytes(rng.randrange(0, 120)))
    for _ in range(300):  # the magic, then anything
        check_everything(b"\xae" + rng.randbytes(rng.randrange(0, 120)))
    decoded = 0
    for _ in range(300):  # a plausible head, then random tails
        operation = rng.randbytes(rng.randrange(0, 12))
        payload = rng.choice([b"", b"{}", b"[1]", b'"x"', b"{", rng.randbytes(rng.randrange(8))])
        body = raw(
            version=rng.choice([PROTOCOL_VERSION, rng.randrange(256)]),
            kind_code=rng.randrange(9),
            status_code=rng.randrange(5) | rng.choice([0, 0, 0x80]),
            generation=rng.choice([7, rng.randrange(2**64)]),
            operation=rng.choice([b"metadata", operation]),
            payload=payload,
            error=rng.choice([b"", js(ERROR), rng.randbytes(rng.randrange(8))]),
            binary=rng.choice([None, rng.randbytes(rng.randrange(8))]),
            binary_len=rng.choice([None, None, rng.randrange(16)]),
        )
        if isinstance(check_everything(body), Envelope):
            decoded += 1
    assert decoded > 0
