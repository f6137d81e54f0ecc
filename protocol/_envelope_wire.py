"""The binary layout of a helper frame's envelope (design §2.2, §2.3).

Used by :mod:`protocol.envelope` only. Stdlib-only (``struct`` is a C module), like it:
the helper child imports both and must start fast.

A frame is the 4-byte big-endian length of §2.2, then the body::

    offset  size  field
         0     1  magic, 0xAE (anything else is not an envelope)
         1     1  version (unsigned)
         2     1  kind: 1 startup, 2 ready, 3 job, 4 cancel, 5 progress, 6 reply, 7 shutdown
         3     1  status: 0 none, 1 ok, 2 error, 3 cancelled; bit 7 (0x80) set: a
                  binary part follows the payload
         4     8  generation (unsigned, big-endian)
        12    16  session: the 128 bits whose lowercase hex is the session id
        28     2  operation length in bytes (unsigned, big-endian)
        30     4  payload length in bytes (unsigned, big-endian); 0 means no payload
        34     n  operation, UTF-8
      34+n     m  payload, strict JSON (UTF-8)
    34+n+m     4  binary part length b (unsigned, big-endian): only with bit 7 of status
    38+n+m     b  binary part, raw bytes: only with bit 7 of status
       end  rest  error record, strict JSON (UTF-8); present exactly for status error
                  (end is 34+n+m, or 38+n+m+b with a binary part)

Why binary: the fixed fields are fenced on every frame (design §2.3), and comparing a
version byte, a generation integer and 16 session bytes costs a fraction of parsing and
checking them out of JSON text; a short job's round trip is mostly this work. The payload
and the error record stay JSON, the one format both sides already speak. Bytes (a PNG, a
pickle) travel in the binary part, as they are: no base64, and a decoder hands them on as
a view of the frame it read, without a copy. A frame without one is byte for byte a frame
of before the binary part existed.
"""

from __future__ import annotations

import struct

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the child ~3 ms
if TYPE_CHECKING:
    from typing import Final

__all__ = [
    "BODY_HEADER",
    "BINARY_FLAG",
    "BINARY_LENGTH_SIZE",
    "BODY_PARTS",
    "FRAME_PARTS",
    "KIND_CODES",
    "KIND_NAMES",
    "MAGIC",
    "MAX_VERSION",
    "STATUS_CODES",
    "STATUS_NAMES",
]

#: First byte of every envelope body.
MAGIC: Final = 0xAE
#: Largest version the version byte holds.
MAX_VERSION: Final = 255
#: The fixed part of a body: magic, version, kind, status, generation, session,
#: operation length, payload length (34 bytes).
BODY_HEADER: Final = struct.Struct(">BBBBQ16sHI")
#: The same 34 bytes with magic, version, kind and status as one 4-byte field: a
#: decoder compares those four against the heads it accepts in one dict lookup.
BODY_PARTS: Final = struct.Struct(">4sQ16sHI")
#: A frame's whole head (38 bytes): the 4-byte frame length of design §2.2, then the
#: same 34 bytes with the fields fixed for one kind of frame grouped:
#: magic/version/kind/status (4 bytes), the generation, then the session with the
#: operation length (18 bytes), and the payload length. An encoder that has these two
#: groups ready packs a head from five values instead of nine.
FRAME_PARTS: Final = struct.Struct(">I4sQ18sI")

#: Kind name → its code byte.
KIND_CODES: Final = {
    "startup": 1,
    "ready": 2,
    "job": 3,
    "cancel": 4,
    "progress": 5,
    "reply": 6,
    "shutdown": 7,
}
#: Code byte → kind name; None for a byte that is no kind (a tuple: one index per frame).
KIND_NAMES: Final = tuple(
    {code: name for name, code in KIND_CODES.items()}.get(byte) for byte in range(256)
)
#: Bit of the status byte set when a binary part follows the payload.
BINARY_FLAG: Final = 0x80
#: Size of a binary part's length field, in bytes (unsigned, big-endian).
BINARY_LENGTH_SIZE: Final = 4

#: Status → its code byte.
STATUS_CODES: Final = {None: 0, "ok": 1, "error": 2, "cancelled": 3}
#: Code byte → status; bytes past the table are no status.
STATUS_NAMES: Final = (None, "ok", "error", "cancelled")
