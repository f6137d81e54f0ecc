"""Checks of caller-supplied values shared by the event log's parts (design §6.2)."""

from __future__ import annotations

import math

from ..errors import InvalidCommand

__all__ = ["check_fraction", "check_text", "is_run_id"]


def is_run_id(value: object) -> bool:
    """True for an int >= 1 that is not a bool (run ids start at 1)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


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
