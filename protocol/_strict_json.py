"""Strict JSON, shared by helper frames (design §2.3) and client messages (design §2.4).

Used by :mod:`protocol.envelope` (payloads and error records) and :mod:`protocol.codec`
(websocket messages). Stdlib-only, like the envelope (the helper child imports both).
Strict means: no NaN or infinity either way, no number that overflows a double, no
duplicate key (parsers disagree on which one wins), no lone surrogate (it is not Unicode
and cannot be written out as UTF-8 again). Both directions are tuned for many small
frames: the parser runs the C scanner directly, the encoder reuses one C encoder.
"""

from __future__ import annotations

import json
import re  # free: json.decoder imports it anyway

from .errors import ProtocolError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the child ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Final

__all__ = [
    "SURROGATE_ESCAPE",
    "c_encode",
    "dumps_str",
    "dumps_value",
    "encodes_as_utf8",
    "loads",
    "parse",
    "scan",
]

#: Matches a JSON ``\\uXXXX`` escape of a UTF-16 surrogate (U+D800..U+DFFF): JSON text
#: that may decode to a lone surrogate, which is not Unicode and cannot be encoded as
#: UTF-8 again. A match is only a hint (a valid pair matches too): confirm with
#: :func:`encodes_as_utf8` on the decoded value.
SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


_encoder = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=False
)
_dumps = _encoder.encode
#: JSON text of a str (the C function behind ``_dumps`` for strings).
dumps_str = json.encoder.encode_basestring


def _c_encoder() -> Callable[[object, int], Sequence[str]] | None:
    """The C encoder behind ``_dumps``, built once, if this Python allows it.

    ``JSONEncoder.encode`` builds a C encoder object on every call (about 1 us, as much
    as encoding a small payload). Build it once instead, through the same private
    constructor ``JSONEncoder.iterencode`` uses, and keep it only if it gives exactly
    the public encoder's output and refusals; otherwise (another Python) None.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        encode = make(None, _encoder.default, dumps_str, None, ":", ",", False, False, False)
        sample = {"a": [1, 2.5, "é\n", None, True], "2": {}}
        if "".join(encode(sample, 0)) != _dumps(sample):
            return None
        for bad in (float("nan"), {1, 2}):
            try:
                encode(bad, 0)
            except (TypeError, ValueError):
                continue
            return None
    except Exception:
        return None
    return encode  # type: ignore[no-any-return]


#: ``c_encode(value, 0)`` → the JSON text of ``value`` in chunks (join them), as
#: :func:`dumps_value` gives it, for a hot path that inlines :func:`dumps_value`; None
#: where this Python's C encoder cannot be used that way (then call ``dumps_value``).
c_encode: Final = _c_encoder()


def _c_dumps(value: object) -> str:
    return "".join(c_encode(value, 0))  # type: ignore[misc]  # only bound when set


#: ``dumps_value(value)`` → compact, strict JSON text (raises TypeError/ValueError).
dumps_value: Final = _dumps if c_encode is None else _c_dumps


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # 1e400 is valid JSON syntax but overflows to inf, which JSON cannot carry back out
    # (every encoder here refuses it): refuse it on the way in. Called per float only.
    value = float(text)
    if value - value != 0.0:  # inf (NaN cannot come from the JSON number syntax)
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Parsers disagree on which of two equal keys wins ("generation" twice could fence
    # one way and be read another): an ambiguous frame is refused (< 1 us a frame).
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key[:64]!r}")
            seen.add(key)
    return result


_decoder = json.JSONDecoder(
    parse_constant=_refuse_constant,
    parse_float=_finite_float,
    object_pairs_hook=_refuse_duplicates,
)
_loads = _decoder.decode
# The C scanner behind ``decode``: parsing with it directly skips two regex matches
# per frame (leading and trailing whitespace, which our encoder never writes).
# ``scan_once`` is set in ``JSONDecoder.__init__`` but missing from typeshed.
_scan: Callable[[str, int], tuple[Any, int]] = _decoder.scan_once  # type: ignore[attr-defined]
#: ``scan(text, 0)`` → ``(value, end)``: the strict C scanner, for a caller that inlines
#: :func:`parse`'s common case (it must hand anything but a plain, whole value, or a
#: text holding ``\\u``, to :func:`parse`). Raises ``StopIteration`` on no value.
scan: Final = _scan


def loads(text: str) -> Any:
    """Parse JSON text strictly: no NaN/infinity, no overflowing number, no duplicate key.

    Whitespace around the value is allowed (client messages may carry it). A lone
    surrogate escape is *not* checked here: callers confirm with :data:`SURROGATE_ESCAPE`
    and :func:`encodes_as_utf8`, which costs nothing for text without such an escape.

    Raises:
        json.JSONDecodeError: the text is not JSON.
        ValueError: NaN or infinity, a number that overflows a double, a duplicate key.
        RecursionError: nesting too deep.
    """
    return _loads(text)


def encodes_as_utf8(value: object) -> bool:
    """Return True if ``value`` (a decoded JSON value) can be written out as UTF-8 JSON.

    False when a string (or key) in it holds a lone surrogate, e.g. decoded from a
    ``"\\udcff"`` escape; also False for a value that is not JSON-serialisable at all.
    """
    try:
        _dumps(value).encode("utf-8")
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return False
    return True


def parse(data: bytes, field: str) -> Any:
    """Parse one JSON value of an envelope (its payload or error record), strictly.

    Args:
        data: UTF-8 JSON text.
        field: The envelope field it is, named by the error.

    Raises:
        ProtocolError: (code ``protocol_error``, ``details["field"] == field``) not
            UTF-8, not JSON (NaN, an overflowing number, a duplicate key or nesting too
            deep included), or a string holding a lone surrogate.
    """
    try:
        text = str(data, "utf-8")
        try:
            value, end = _scan(text, 0)
            if end != len(text):  # whitespace around the value, or extra data
                raise StopIteration
        except StopIteration:  # let decode() parse it, or say what is wrong
            value = _loads(text)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ProtocolError(
            f"envelope field {field!r} is not UTF-8 JSON: {exc}", field=field
        ) from None
    if "\\u" in text and SURROGATE_ESCAPE.search(text) and not encodes_as_utf8(value):
        raise ProtocolError(
            f"envelope field {field!r} is not valid Unicode: it holds a lone surrogate escape",
            field=field,
        )
    return value
