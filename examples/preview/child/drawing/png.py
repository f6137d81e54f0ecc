"""The preview server's payload check: every payload is a PNG (design §5.1).

Passed to the renderer as ``RendererConfig(check_payload=check_png)``, so nothing that
is not a well-formed PNG header is cached or published.
"""

from __future__ import annotations

import struct
from typing import Final

from actors.errors import PayloadInvalid

__all__ = ["MIN_PNG_BYTES", "PNG_SIGNATURE", "check_png"]

PNG_SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"
#: Signature + IHDR + one IDAT + IEND: the smallest valid PNG, in bytes.
MIN_PNG_BYTES: Final = 67


def check_png(data: bytes) -> tuple[int, int]:
    """Check the PNG signature and ``IHDR`` header of ``data``.

    Returns:
        ``(width, height)`` in pixels.

    Raises:
        PayloadInvalid: (code ``payload_invalid``, ``details["reason"] == "not_png"``)
            no PNG signature, no ``IHDR`` header, or a zero width or height.
    """
    if not data.startswith(PNG_SIGNATURE):
        raise PayloadInvalid("payload is not a PNG (bad signature)", reason="not_png")
    if len(data) < 24 or data[12:16] != b"IHDR":
        raise PayloadInvalid("PNG has no IHDR header", reason="not_png")
    width, height = struct.unpack(">II", data[16:24])
    if width == 0 or height == 0:
        raise PayloadInvalid(f"PNG is {width}x{height} pixels", reason="not_png")
    return int(width), int(height)
