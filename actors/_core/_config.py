"""Validation of durations and capacities, shared by every configurable part (design §1.6).

All durations in this project are seconds on trio's clock (``trio.current_time()``),
given as ``int`` or ``float``. They are checked once, at construction, so no actor ever
meets a NaN deadline or an unbounded wait.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import attrs

#: Upper bound on any configured duration, in seconds (design §1.6).
MAX_DURATION = 300.0


def validate_duration(
    name: str, value: object, *, allow_zero: bool = True, maximum: float = MAX_DURATION
) -> float:
    """Check one duration and return it as a float (design §1.6).

    Args:
        name: The parameter's name, used in the error message.
        value: The candidate, in seconds.
        allow_zero: False where zero is meaningless (e.g. a period or a timeout).
        maximum: Inclusive upper bound in seconds (default 300).

    Returns:
        ``float(value)``.

    Raises:
        ValueError: ``value`` is a bool, not a real number, NaN or infinite, negative,
            zero when ``allow_zero`` is False, or above ``maximum``. The message names
            ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of seconds, got {show_value(value)}")
    if isinstance(value, int) and abs(value) > _FLOAT_INT_LIMIT:
        # float() would raise OverflowError; such an int is far outside any bound.
        seconds = sys.float_info.max if value > 0 else -sys.float_info.max
    else:
        seconds = float(value) + 0.0  # + 0.0 turns -0.0 into 0.0
    if not math.isfinite(seconds):
        raise ValueError(f"{name} must be finite, got {show_value(value)}")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound} seconds, got {show_value(value)}")
    if seconds > maximum:
        raise ValueError(f"{name} must be <= {maximum:g} seconds, got {show_value(value)}")
    return seconds


#: Ints beyond this magnitude do not convert to float (they overflow).
_FLOAT_INT_LIMIT = int(sys.float_info.max)


def show_value(value: object, limit: int = 40) -> str:
    """Return ``repr(value)`` cut to ``limit`` characters, for validation messages.

    Never raises: a huge int's ``repr()`` itself raises ``ValueError`` (Python's
    int-to-str digit limit), and a huge string must not flood an error message.
    """
    try:
        text = repr(value)
    except ValueError:
        text = f"<{type(value).__name__} too large to print>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def validate_count(
    name: str, value: object, *, minimum: int = 0, maximum: int | None = None
) -> int:
    """Check a whole-number setting such as a capacity or a pool size.

    Raises:
        ValueError: ``value`` is a bool or not an ``int``, or outside
            ``[minimum, maximum]``; the message names ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {show_value(value)}")
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f" and <= {maximum}"
        raise ValueError(f"{name} must be >= {minimum}{upper}, got {show_value(value)}")
    return value


def duration_field(
    default: float, *, allow_zero: bool = True, maximum: float = MAX_DURATION
) -> Any:
    """An ``attrs.field`` holding a validated duration in seconds (design §1.6).

    The field's own name is used in the error, so ``HelperTimeouts(reply=-1)`` raises
    ``ValueError("reply must be >= 0 seconds, got -1")``.
    """

    def check(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
        validate_duration(attribute.name, value, allow_zero=allow_zero, maximum=maximum)

    return attrs.field(default=default, validator=check, converter=_to_float_unless_bool)


def count_field(default: int, *, minimum: int = 0, maximum: int | None = None) -> Any:
    """An ``attrs.field`` holding a validated whole number (capacities, sizes, counts)."""

    def check(instance: object, attribute: attrs.Attribute[int], value: object) -> None:
        validate_count(attribute.name, value, minimum=minimum, maximum=maximum)

    return attrs.field(default=default, validator=check)


def _to_float_unless_bool(value: object) -> object:
    # Converters run before validators; keep bools and junk as they are so the
    # validator can name the field instead of float() raising a bare TypeError.
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= _FLOAT_INT_LIMIT:
        return float(value)
    return value


def check_hashable(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """attrs validator: ``value`` is hashable (an id that keys a table of running jobs).

    Raises:
        ValueError: it is not; the message names the field.
    """
    try:
        hash(value)
    except TypeError:
        raise ValueError(f"{attribute.name} must be hashable, got {show_value(value)}") from None
