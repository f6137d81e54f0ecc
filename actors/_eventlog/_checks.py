"""Checks of caller-supplied values shared by the event log's parts (design §6.2)."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from protocol.messages import is_code

from ..errors import InvalidCommand

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "MAX_ROW_ID",
    "RESERVED_PREFIXES",
    "check_fraction",
    "check_kind",
    "check_text",
    "is_run_id",
    "json_mapping",
]

#: Kind prefixes of the event log's own events; ``EventLog.record`` refuses them.
RESERVED_PREFIXES = ("job_", "admission_", "request_", "revision_")


#: The largest integer SQLite stores (a run id is a rowid): a larger int sent to it
#: raises OverflowError, so bounds are checked against it before any query.
MAX_ROW_ID = 2**63 - 1


def is_run_id(value: object) -> bool:
    """True for an int in ``[1, MAX_ROW_ID]`` that is not a bool (run ids start at 1)."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_ROW_ID


def check_text(name: str, value: object, limit: int = 128) -> str:
    """Return ``value`` if it is a str of 1..``limit`` chars that UTF-8 can encode.

    Raises:
        InvalidCommand: (``invalid_command``) otherwise; ``details["fields"]`` is ``[name]``.
    """
    if not isinstance(value, str) or not 1 <= len(value) <= limit or not _encodable(value):
        raise InvalidCommand(f"{name} must be a str of 1..{limit} chars", fields=[name])
    return value


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate: SQLite could not store it
        return False
    return True


def check_fraction(fraction: object) -> float:
    """Return a progress fraction as a float.

    Raises:
        InvalidCommand: (``invalid_command``) not a finite number in [0, 1].
    """
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, int | float)
        or not math.isfinite(fraction)
        or not 0.0 <= fraction <= 1.0
    ):
        raise InvalidCommand(
            f"fraction must be a number in [0, 1], got {fraction!r}", fields=["fraction"]
        )
    return float(fraction)


def check_kind(kind: object) -> str:
    """Return the kind of a log-wide event recorded by the runtime (design §6.8).

    Raises:
        ValueError: ``kind`` is not snake_case of at most 64 characters, or one of the
            log's own kinds (starting with one of :data:`RESERVED_PREFIXES`); the
            message names ``kind``.
    """
    if not is_code(kind):  # the protocol's rule, so a recorded event always encodes
        raise ValueError(f"kind must be a snake_case name of <= 64 chars, got {kind!r:.80}")
    if kind.startswith(RESERVED_PREFIXES):
        raise ValueError(f"kind {kind!r} is one of the event log's own kinds")
    return kind


def json_mapping(data: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``data`` as a dict once it is known to encode as JSON (no NaN/infinity).

    Raises:
        ValueError: ``data`` is not a JSON-compatible mapping (the message names it).
    """
    try:
        payload = dict(data)
        json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"data must be a JSON-compatible mapping: {exc}") from None
    return payload
