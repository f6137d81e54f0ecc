"""The :class:`Envelope` value: one helper frame's fields (design §2.3).

Used by :mod:`protocol.envelope`, which re-exports it. Stdlib-only, like it: the helper
child imports both and must start fast.
"""

from __future__ import annotations

from operator import itemgetter

from ._envelope_checks import validate

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the child ~3 ms
if TYPE_CHECKING:
    from typing import Any, Final

__all__ = ["Envelope", "trusted"]

_FIELDS: Final = (
    "version",
    "kind",
    "session",
    "generation",
    "operation",
    "status",
    "payload",
    "error",
)


def _frozen(name: str) -> AttributeError:
    import dataclasses  # only on a misuse: keep the child's start fast

    return dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


_tuple_new = tuple.__new__


def _unordered(operator: str) -> TypeError:
    return TypeError(f"{operator!r} is not supported for Envelope: envelopes have no order")


def _field(index: int, doc: str) -> Any:
    return property(itemgetter(index), doc=doc)


class Envelope(tuple):  # type: ignore[type-arg]
    """One helper frame's content (design §2.3). Validated on construction.

    Frozen, keyword-only, compared and hashed by value like a frozen dataclass
    (assigning a field raises ``dataclasses.FrozenInstanceError``), and equal only to
    another ``Envelope``. Underneath it is a tuple of the eight fields in the order
    below, because a decoder builds one per frame and a tuple is the cheapest object
    Python builds; do not rely on that. Written by hand rather than with attrs or
    dataclasses: see the module docstring.

    Raises:
        ValueError: a field is out of its domain; the message names the field.
    """

    __slots__ = ()

    if TYPE_CHECKING:
        version: int
        kind: str
        session: str
        generation: int
        operation: str
        status: str | None
        payload: Any
        error: dict[str, str] | None
    else:
        version = _field(
            0,
            "Protocol version; :data:`PROTOCOL_VERSION` when we build it. Any int in "
            "``[0, MAX_VERSION]`` (one byte) decodes, so that :func:`check_reply` can "
            "name a mismatch.",
        )
        kind = _field(1, "One of :data:`ENVELOPE_KINDS`.")
        session = _field(
            2,
            "The helper incarnation's id: 32 lowercase hex characters (:func:`new_session`).",
        )
        generation = _field(
            3, "Job number within the session, an int in ``[0, MAX_GENERATION]`` (no bool)."
        )
        operation = _field(4, "Operation name, 1..:data:`MAX_OPERATION_LENGTH` characters.")
        status = _field(
            5, "For ``ready``/``reply``: one of :data:`REPLY_STATUSES` (required); else None."
        )
        payload = _field(
            6,
            "Any JSON value: the job's arguments or the reply's result. For ``progress``: "
            '``{"fraction": number in [0, 1], "note": str | None}`` (note <= 1 KiB of UTF-8).',
        )
        error = _field(
            7,
            '``{"category", "code", "message"}`` (message <= 1 KiB of UTF-8); present '
            'exactly when ``status == "error"``. Build it with '
            "``ActorError(...).to_record().to_dict()``.",
        )

    def __new__(
        cls,
        *,
        version: int,
        kind: str,
        session: str,
        generation: int,
        operation: str,
        status: str | None = None,
        payload: Any = None,
        error: dict[str, str] | None = None,
    ) -> Envelope:
        validate(version, kind, session, generation, operation, status, payload, error)
        return _tuple_new(
            cls, (version, kind, session, generation, operation, status, payload, error)
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise _frozen(name)

    def __delattr__(self, name: str) -> None:
        raise _frozen(name)

    # Not NotImplemented for other objects: Python would then ask tuple.__eq__, and a
    # plain tuple of the same fields would compare equal.
    def __eq__(self, other: object) -> bool:
        return other.__class__ is Envelope and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return other.__class__ is not Envelope or tuple.__ne__(self, other)

    def __lt__(self, other: object) -> bool:
        raise _unordered("<")

    def __le__(self, other: object) -> bool:
        raise _unordered("<=")

    def __gt__(self, other: object) -> bool:
        raise _unordered(">")

    def __ge__(self, other: object) -> bool:
        raise _unordered(">=")

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in zip(_FIELDS, self, strict=True))
        return f"Envelope({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (trusted, tuple(self))

    def to_json(self) -> dict[str, Any]:
        """Return the dict of every field (``None`` kept as ``null``): JSON-compatible,
        but for a payload with a binary part, which stays a :class:`~protocol.envelope.Blob`
        (bytes are not JSON)."""
        return dict(zip(_FIELDS, self, strict=True))


def trusted(
    version: int,
    kind: str,
    session: str,
    generation: int,
    operation: str,
    status: str | None,
    payload: Any,
    error: dict[str, str] | None,
) -> Envelope:
    """Build an :class:`Envelope` from fields already proven valid (no re-validation)."""
    return _tuple_new(
        Envelope, (version, kind, session, generation, operation, status, payload, error)
    )
