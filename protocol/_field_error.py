"""The error a message field's validator raises (design §2.1)."""

from __future__ import annotations

__all__ = ["FieldError"]


class FieldError(ValueError):
    """A message field failed its validator; ``field`` names it.

    The codec uses ``field`` to report the exact path of the offending field.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
