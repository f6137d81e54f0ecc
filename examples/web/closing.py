"""The websocket close codes of the example servers, and the cursor in a close reason (design §7.4).

A client that is closed by the server needs to know two things: whether to come back,
and from which event. The code says the first, the reason the second:

======  ==========================  ===================================================
code    when                        the client should
======  ==========================  ===================================================
1000    a normal close              not come back for this session
1001    the server shuts down       reconnect later (after the restart), and resume
                                    after the reason's ``cursor``
1009    a message over ``max_frame``  send smaller messages (closed by trio-websocket)
1011    no pong within the          reconnect; resume after its last event
        keepalive timeout
4000    it fell behind: its queue   reconnect at once and resume after the reason's
        passed its bound and was    ``cursor`` (``watch`` while the log still holds it,
        dropped                     else ``snapshot`` then ``subscribe``)
======  ==========================  ===================================================

Codes 4000-4999 are reserved by RFC 6455 for applications; these servers use 4000 only.
The reason of 1001 and 4000 ends in ``; cursor=N``: the seq of the newest event the
server sent this client (in an ``event``, an ``events`` answer or a ``snapshot_reply``),
or the event log's head for a client that was sent none. :func:`cursor_of` reads it back.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "GOING_AWAY",
    "KEEPALIVE_TIMEOUT",
    "PROTOCOL_ERRORS",
    "RESYNC_REQUIRED",
    "cursor_of",
    "with_cursor",
]

#: The server shuts down (RFC 6455 "going away"); the reason carries the cursor.
GOING_AWAY: Final = 1001
#: The client did not answer a keepalive ping in time (RFC 6455 "internal error").
KEEPALIVE_TIMEOUT: Final = 1011
#: The client fell behind and was dropped; a ``resync_required`` came first, and the
#: reason carries the cursor.
RESYNC_REQUIRED: Final = 4000
#: Codes trio-websocket closes with when a client breaks the websocket protocol (RFC
#: 6455: a malformed frame, text that is not UTF-8, a message over ``max_frame``).
PROTOCOL_ERRORS: Final = frozenset({1002, 1007, 1009})
#: Longest close reason, in bytes of UTF-8 (a close frame's payload is at most 125).
MAX_REASON_BYTES: Final = 123

_CURSOR = re.compile(r"; cursor=(\d{1,16})\Z")


def with_cursor(text: str, cursor: int) -> str:
    """``text; cursor=N``, short enough for a close frame (``text`` is cut if need be)."""
    suffix = f"; cursor={cursor}"
    room = MAX_REASON_BYTES - len(suffix)
    head = text.encode("utf-8")[:room].decode("utf-8", "ignore")
    return head + suffix


def cursor_of(reason: str | None) -> int | None:
    """The cursor at the end of a close reason (:func:`with_cursor`), or None."""
    if reason is None:
        return None
    match = _CURSOR.search(reason)
    return None if match is None else int(match.group(1))
