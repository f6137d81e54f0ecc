"""The :class:`Blob` value: a payload with a binary part (design §2.3).

Used by :mod:`protocol.envelope`, which re-exports it, and by the helper child (through
:mod:`actors.helper`). Stdlib-only, like them: the helper child imports it and must start
fast, which is why it is a small hand-written frozen class (a tuple underneath, like
:class:`~protocol.envelope.Envelope`) and not an attrs class.
"""

from __future__ import annotations

from operator import itemgetter

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the child ~3 ms
if TYPE_CHECKING:
    from typing import Any, Final

__all__ = ["MAX_BLOB_BYTES", "Blob", "trusted_blob"]

#: The most bytes a binary part can declare (its 4-byte length); a frame's limit
#: (``max_reply``, ``max_request``) is usually far lower and applies to the whole frame.
MAX_BLOB_BYTES: Final = 2**32 - 1

_tuple_new = tuple.__new__


def _frozen(name: str) -> AttributeError:
    import dataclasses  # only on a misuse: keep the child's start fast

    return dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _field(index: int, doc: str) -> Any:
    return property(itemgetter(index), doc=doc)


class Blob(tuple):  # type: ignore[type-arg]
    """A JSON ``head`` and raw bytes ``data``: one frame's payload and binary part (§2.3).

    A helper handler returns one (or plain ``bytes``, which is ``Blob(data=...)``) to send
    bytes beside its JSON result without base64; the parent's ``run_job`` then returns a
    ``Blob`` whose ``data`` is a read-only :class:`memoryview` of the received frame (no
    copy; ``bytes(blob.data)`` makes one when an owner needs its own). Progress reports
    and error replies carry one the same way (design §2.3, §3.9).

    Frozen, keyword-only, compared by value (``data`` by its bytes) and equal only to
    another ``Blob``. Written by hand rather than with attrs: see the module docstring.

    Args:
        head: Any JSON value (checked when the frame is encoded), None for none.
        data: The bytes: ``bytes``, ``bytearray`` or a C-contiguous ``memoryview``
            (of any item format: it is taken as its raw bytes), at most
            :data:`MAX_BLOB_BYTES` bytes.

    Raises:
        TypeError: ``data`` is not bytes-like; the message names the field ``data``.
        ValueError: ``data`` is a memoryview that is not C-contiguous, or longer than
            :data:`MAX_BLOB_BYTES` bytes; the message names the field ``data``.
    """

    __slots__ = ()

    if TYPE_CHECKING:
        head: Any
        data: bytes | bytearray | memoryview
    else:
        head = _field(0, "The JSON head: any JSON value, or None.")
        data = _field(
            1,
            "The binary part: bytes-like; a read-only memoryview when decoded from a frame.",
        )

    def __new__(cls, *, head: Any = None, data: bytes | bytearray | memoryview) -> Blob:
        kind = type(data)
        if kind is memoryview:
            if not data.c_contiguous:  # type: ignore[union-attr]
                raise ValueError("Blob field 'data': a memoryview must be C-contiguous")
            if data.format != "B" or data.ndim != 1:  # type: ignore[union-attr]
                data = data.cast("B")  # type: ignore[union-attr]
        elif kind is not bytes and kind is not bytearray:
            if isinstance(data, bytes | bytearray):
                data = bytes(data)  # a subclass: its own methods must not run on the wire
            else:
                raise TypeError(
                    f"Blob field 'data' must be bytes, bytearray or memoryview, "
                    f"got {type(data).__name__}"
                )
        if len(data) > MAX_BLOB_BYTES:
            raise ValueError(f"Blob field 'data' is over {MAX_BLOB_BYTES} bytes")
        return _tuple_new(cls, (head, data))

    def __setattr__(self, name: str, value: object) -> None:
        raise _frozen(name)

    def __delattr__(self, name: str) -> None:
        raise _frozen(name)

    # Not NotImplemented for other objects: tuple.__eq__ would then compare a plain tuple.
    def __eq__(self, other: object) -> bool:
        return other.__class__ is Blob and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return other.__class__ is not Blob or tuple.__ne__(self, other)

    __hash__ = tuple.__hash__  # a bytearray ``data`` makes it unhashable, as it should

    def __repr__(self) -> str:
        # The bytes are not shown: a PNG in a log line helps no one.
        return f"Blob(head={self[0]!r}, data=<{len(self[1])} bytes>)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (trusted_blob, (self[0], bytes(self[1])))


def trusted_blob(head: Any, data: bytes | memoryview) -> Blob:
    """Build a :class:`Blob` from a decoder's checked ``data`` (no re-validation)."""
    return _tuple_new(Blob, (head, data))
