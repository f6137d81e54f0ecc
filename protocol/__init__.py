"""Sans-io protocol of trio-actors: messages, codec, framing, envelope (SPEC §2).

This package never imports trio; only ``actors`` and ``examples`` do I/O.
"""

from __future__ import annotations

from .errors import ActorError as ActorError
from .errors import ErrorRecord as ErrorRecord
from .errors import FrameTooLarge as FrameTooLarge
from .errors import InvalidMessage as InvalidMessage
from .errors import MessageTooLarge as MessageTooLarge
from .errors import ProtocolError as ProtocolError
from .errors import ProtocolViolation as ProtocolViolation
from .errors import TruncatedFrame as TruncatedFrame

# --- PROTOCOL builder exports ---
# --- end PROTOCOL ---

__all__ = [
    "ActorError",
    "ErrorRecord",
    "FrameTooLarge",
    "InvalidMessage",
    "MessageTooLarge",
    "ProtocolError",
    "ProtocolViolation",
    "TruncatedFrame",
]
