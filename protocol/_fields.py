"""The limits and field validators shared by every message module (design §2.1, §2.4).

Each validator is an attrs validator that raises :class:`FieldError` naming the field,
so the codec reports the exact path of a bad field. The message modules
(``_eventlog_messages``, ``_run_messages``, ``_database_messages``) import them; the
public limits are re-exported by :mod:`protocol.messages`.

All integers are bounded by ``2**53 - 1`` so a JavaScript client reads them exactly.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

import attrs

from ._envelope_checks import is_error_code
from ._field_error import FieldError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "ADDED_OPTIONAL",
    "MAX_JSON_INT",
    "MAX_OPERATION_LENGTH",
    "MAX_REQUEST_ID_LENGTH",
    "MAX_TEXT_LENGTH",
    "MAX_URL_LENGTH",
    "MAX_VISIBLE_RUNS",
]

#: Largest integer in any message: what a JSON double (and JavaScript) holds exactly.
MAX_JSON_INT: Final = 2**53 - 1
#: Longest ``request_id``, in characters (design §2.4).
MAX_REQUEST_ID_LENGTH: Final = 128
#: Longest operation name, in characters.
MAX_OPERATION_LENGTH: Final = 128
#: Most run ids in one ``visible`` message.
MAX_VISIBLE_RUNS: Final = 1024
#: Longest URL (a path and query on the server), in characters.
MAX_URL_LENGTH: Final = 2048
#: Longest free-text field (names, states, mime types), in characters.
MAX_TEXT_LENGTH: Final = 4096

#: Field metadata key of an optional field added after the first release: the codec
#: leaves it out of the JSON while it is ``None``, so a message that does not use it
#: reads exactly as before (older clients' strict decoders are not surprised by it).
ADDED_OPTIONAL: Final = "added_optional"


def _text(max_length: int = MAX_TEXT_LENGTH, min_length: int = 1) -> Callable[..., None]:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, str):
            raise FieldError(attribute.name, f"must be a string, got {type(value).__name__}")
        if not min_length <= len(value) <= max_length:
            raise FieldError(
                attribute.name, f"must be {min_length}..{max_length} characters, got {len(value)}"
            )

    return check


def _count(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(attribute.name, f"must be an int, got {type(value).__name__}")
    if not 0 <= value <= MAX_JSON_INT:
        raise FieldError(attribute.name, f"must be in [0, 2**53-1], got {value}")


def _flag(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise FieldError(attribute.name, f"must be a bool, got {type(value).__name__}")


#: True if a value is a snake_case code of at most 64 characters (an error code, an
#: event kind): the envelope's rule, one definition for both protocols.
is_code: Final = is_error_code


def _code(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not is_code(value):
        raise FieldError(attribute.name, f"must be a snake_case code, got {value!r:.80}")


def _json_object(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise FieldError(attribute.name, "must be a JSON object (a dict with str keys)")


def _counts(max_items: int) -> Callable[..., None]:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, tuple):
            raise FieldError(attribute.name, f"must be a tuple, got {type(value).__name__}")
        if len(value) > max_items:
            raise FieldError(attribute.name, f"must have at most {max_items} items")
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= MAX_JSON_INT:
                raise FieldError(
                    attribute.name, f"items must be ints in [0, 2**53-1], got {item!r}"
                )

    return check


def _optional(check: Callable[..., None]) -> Callable[..., None]:
    def optional(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None:
            check(instance, attribute, value)

    return optional


def _items_of(cls: type) -> Callable[..., None]:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, tuple) or not all(type(item) is cls for item in value):
            raise FieldError(attribute.name, f"must be a tuple of {cls.__name__}")

    return check


def _finite(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FieldError(attribute.name, f"must be a finite number, got {value!r:.80}")
    if abs(value) > MAX_JSON_INT:  # seconds: no time needs more, and a double stays exact
        raise FieldError(attribute.name, f"must be at most 2**53-1 in size, got {value!r:.80}")


def _seconds(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FieldError(attribute.name, f"must be a finite number of seconds, got {value!r:.80}")
    if not 0 <= value <= MAX_JSON_INT:
        raise FieldError(attribute.name, f"must be in [0, 2**53-1] seconds, got {value!r:.80}")


def _one_of(*choices: str) -> Callable[..., None]:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value not in choices:
            raise FieldError(
                attribute.name, f"must be one of {', '.join(choices)}, got {value!r:.80}"
            )

    return check


def _path_url(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= MAX_URL_LENGTH
        or not value.startswith("/")
        or value.startswith("//")
        or not all("!" <= char <= "~" for char in value)
    ):
        raise FieldError(
            attribute.name,
            f"must be a path on the server ('/...', printable ASCII, at most "
            f"{MAX_URL_LENGTH} characters), got {value!r:.80}",
        )


def _request_id() -> Any:
    return attrs.field(validator=_text(MAX_REQUEST_ID_LENGTH))


def _reply_id() -> Any:
    return attrs.field(validator=_optional(_text(MAX_REQUEST_ID_LENGTH)))


def _run_id() -> Any:
    return attrs.field(validator=_count)


def _added(check: Callable[..., None]) -> Any:
    """An optional field added after the first release (see :data:`ADDED_OPTIONAL`)."""
    return attrs.field(default=None, validator=_optional(check), metadata={ADDED_OPTIONAL: True})
