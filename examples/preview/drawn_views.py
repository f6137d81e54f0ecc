"""DrawnViews: the newest pictures ``draw`` made, held for their URLs (design §7.6).

A ``draw`` answer names its picture by URL (``/db/<db>/views/<n>.png?v=<version>``)
instead of carrying it. :class:`DrawnViews` keeps the newest ``keep`` pictures, at most
``max_bytes`` bytes of PNG in all, numbered from 1 in the order drawn; a number is
never reused while the app runs, and the version (of the bytes) in the address tells a
picture from one of an earlier run of the server with the same number. An older
picture is forgotten (its URL then answers 404); a client asks ``draw`` again.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .push import StoredImage

__all__ = ["DrawnViews"]


class DrawnViews:
    """The newest drawn pictures by number (see the module docstring).

    Args:
        keep: Most pictures held.
        max_bytes: Most bytes of PNG held (the newest picture is always held).
    """

    def __init__(self, *, keep: int = 32, max_bytes: int = 16 * 1024 * 1024) -> None:
        if keep < 1 or max_bytes < 0:
            raise ValueError(f"keep must be >= 1 and max_bytes >= 0, got {keep}, {max_bytes}")
        self._keep = keep
        self._max_bytes = max_bytes
        self._views: OrderedDict[int, StoredImage] = OrderedDict()
        self._bytes = 0
        self._next = 1

    def add(self, image: StoredImage) -> int:
        """Hold ``image``; return its number (never waits)."""
        number = self._next
        self._next += 1
        self._views[number] = image
        self._bytes += len(image.data)
        while len(self._views) > 1 and (
            len(self._views) > self._keep or self._bytes > self._max_bytes
        ):
            _, dropped = self._views.popitem(last=False)
            self._bytes -= len(dropped.data)
        return number

    def get(self, number: int) -> StoredImage | None:
        """The picture numbered ``number``, or None if it was never drawn or is forgotten."""
        return self._views.get(number)

    def statistics(self) -> dict[str, int]:
        """Pictures and bytes held."""
        return {"views": len(self._views), "view_bytes": self._bytes}
