"""Errors as data: the record that crosses an actor or process boundary (design §1.5).

Kept apart from :mod:`protocol.errors` so that module stays stdlib-only (the helper
child imports it and must start fast); this one needs attrs.
"""

from __future__ import annotations

import attrs

from ._error_data import CATEGORIES, Category, bound_message

__all__ = ["ErrorRecord"]


def _check_code(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not value or not value.replace("_", "a").isalnum() or not value.islower():
        raise ValueError(f"{attribute.name} must be a snake_case code, got {value!r}")


@attrs.frozen(kw_only=True)
class ErrorRecord:
    """An error as data: what crosses an actor or process boundary (design §1.5).

    Never carries an exception or traceback object; the message is bounded.
    """

    category: Category = attrs.field(validator=attrs.validators.in_(CATEGORIES))
    """``transient``, ``permanent`` or ``stale``."""
    code: str = attrs.field(validator=[attrs.validators.instance_of(str), _check_code])
    """Stable snake_case code, e.g. ``"reply_timeout"``."""
    message: str = attrs.field(
        default="", converter=bound_message, validator=attrs.validators.instance_of(str)
    )
    """Human-readable text, at most 1 KiB of UTF-8 (longer text is cut)."""

    def to_dict(self) -> dict[str, str]:
        """Return the JSON-compatible form ``{"category", "code", "message"}``."""
        return {"category": self.category, "code": self.code, "message": self.message}
