"""Error categories and bounded messages: the data every error record is made of (design §1.5).

Stdlib only, and imported by both :mod:`protocol.errors` and :mod:`protocol.records`, so
the two need not import each other at module level. The public names are re-exported by
:mod:`protocol.errors`.
"""

from __future__ import annotations

# Not typing.TYPE_CHECKING: a helper child imports this module, and importing typing
# (with re and enum) costs it ~4 ms of start-up; the alias is built on first use.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    Category = Literal["transient", "permanent", "stale"]

__all__ = [
    "CATEGORIES",
    "MAX_ERROR_MESSAGE_BYTES",
    "Category",
    "bound_message",
    "describe_exception",
]

CATEGORIES: tuple[Category, ...] = ("transient", "permanent", "stale")


def __getattr__(name: str) -> object:
    """``Category`` at run time (for attrs/cattrs and the API reference)."""
    if name == "Category":
        from typing import Literal

        return Literal["transient", "permanent", "stale"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Bound on an error message that crosses a boundary, in bytes of UTF-8 (design §1.5).
MAX_ERROR_MESSAGE_BYTES = 1024


def bound_message(message: str, limit: int = MAX_ERROR_MESSAGE_BYTES) -> str:
    """Cut ``message`` to at most ``limit`` bytes of UTF-8, on a character boundary.

    A cut message ends with ``"…"`` so a reader can tell it was shortened. A lone
    surrogate (e.g. from a file name decoded with ``surrogateescape``) cannot be
    encoded as UTF-8, so it is written as its escape (``\\udcff``) instead.
    """
    try:
        raw = message.encode("utf-8")
    except UnicodeEncodeError:
        raw = message.encode("utf-8", "backslashreplace")
        message = raw.decode("utf-8")
    if len(raw) <= limit:
        return message
    ellipsis = "…".encode()
    cut = raw[: limit - len(ellipsis)].decode("utf-8", errors="ignore")
    return cut + "…"


def describe_exception(error: BaseException, limit: int = MAX_ERROR_MESSAGE_BYTES) -> str:
    """Return ``"TypeName: text"`` for ``error``, bounded like :func:`bound_message`.

    Never raises: an exception whose ``str()`` itself raises (or returns a non-str) is
    described by its type name alone, so reporting a failure cannot fail in turn.
    """
    name = type(error).__name__
    try:
        text = str(error)
    except Exception:  # __str__ raised (or returned a non-str: TypeError)
        text = "<unprintable>"
    return bound_message(f"{name}: {text}" if text else name, limit)
