"""Which characters a TrueType font can draw: its ``cmap`` table (design §5.2).

A font draws a character it has no glyph for as its "missing glyph", an empty box in
DejaVu Sans, which looks like a real (if odd) character. The renderer asks
:func:`covered` first and draws a visible replacement mark instead
(:data:`REPLACEMENT`), so a reader sees that something could not be drawn.

Stdlib only: the table is read from the font file (OpenType ``cmap`` formats 4 and
12, the Unicode subtables every TrueType font of a Linux system has).
"""

from __future__ import annotations

import functools
import struct
from pathlib import Path

__all__ = ["REPLACEMENT", "covered", "drawable"]

#: Drawn in place of a character the font has no glyph for: U+FFFD, the Unicode
#: replacement character (a question mark in a diamond).
REPLACEMENT = "\ufffd"


@functools.lru_cache(maxsize=8)
def covered(path: str) -> frozenset[int]:
    """The code points that the font at ``path`` maps to a glyph (empty if unreadable)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return frozenset()
    try:
        return frozenset(_cmap(data))
    except (struct.error, ValueError, IndexError):
        return frozenset()


def drawable(text: str, path: str | None) -> str:
    """``text`` with each character the font cannot draw replaced by :data:`REPLACEMENT`.

    Whitespace and control characters are kept (they need no glyph). With no font path
    the text is returned unchanged.
    """
    if path is None:
        return text
    points = covered(path)
    if not points:
        return text
    fallback = REPLACEMENT if ord(REPLACEMENT) in points else "?"
    return "".join(
        ch if ord(ch) in points or ch.isspace() or ord(ch) < 32 else fallback for ch in text
    )


def _cmap(data: bytes) -> set[int]:
    tables = _table_directory(data)
    if b"cmap" not in tables:
        raise ValueError("font has no cmap table")
    base = tables[b"cmap"]
    _version, count = struct.unpack_from(">HH", data, base)
    subtables = []
    for k in range(count):
        platform, encoding, offset = struct.unpack_from(">HHI", data, base + 4 + 8 * k)
        subtables.append((platform, encoding, base + offset))
    points: set[int] = set()
    for platform, encoding, offset in subtables:
        unicode = platform == 0 or (platform == 3 and encoding in (1, 10))
        if not unicode:
            continue
        fmt = struct.unpack_from(">H", data, offset)[0]
        if fmt == 4:
            points |= _format4(data, offset)
        elif fmt == 12:
            points |= _format12(data, offset)
    return points


def _table_directory(data: bytes) -> dict[bytes, int]:
    _sfnt, count = struct.unpack_from(">IH", data, 0)
    tables = {}
    for k in range(count):
        tag, _checksum, offset, _length = struct.unpack_from(">4sIII", data, 12 + 16 * k)
        tables[tag] = offset
    return tables


def _format4(data: bytes, offset: int) -> set[int]:
    seg_x2 = struct.unpack_from(">H", data, offset + 6)[0]
    segs = seg_x2 // 2
    ends = struct.unpack_from(f">{segs}H", data, offset + 14)
    starts_at = offset + 16 + seg_x2
    starts = struct.unpack_from(f">{segs}H", data, starts_at)
    deltas = struct.unpack_from(f">{segs}h", data, starts_at + seg_x2)
    range_at = starts_at + 2 * seg_x2
    ranges = struct.unpack_from(f">{segs}H", data, range_at)
    points: set[int] = set()
    for k in range(segs):
        for code in range(starts[k], ends[k] + 1):
            if code == 0xFFFF:
                continue
            if ranges[k] == 0:
                glyph = (code + deltas[k]) & 0xFFFF
            else:
                where = range_at + 2 * k + ranges[k] + 2 * (code - starts[k])
                glyph = struct.unpack_from(">H", data, where)[0]
                if glyph:
                    glyph = (glyph + deltas[k]) & 0xFFFF
            if glyph:
                points.add(code)
    return points


def _format12(data: bytes, offset: int) -> set[int]:
    groups = struct.unpack_from(">I", data, offset + 12)[0]
    points: set[int] = set()
    for k in range(groups):
        start, end, glyph = struct.unpack_from(">III", data, offset + 16 + 12 * k)
        points.update(range(start + (1 if glyph == 0 else 0), end + 1))
    return points
