"""The preview server's images: the newest PNG per (run, kind), pushed to each client.

:class:`ImageStore` keeps the newest image of every (run, kind): all thumbnails, and the
previews in a least-recently-used set bounded in bytes. A client connection that asked
for ``list_runs`` gets a :class:`ClientPusher`: a task that sends it one
``image_ready`` notice (design §7.2, §7.6: the image's URL, never its bytes) per image
it has not seen yet at its newest revision, the selected
run's images first, then visible runs', thumbnails before previews. The pusher holds
only keys, never a queue of images: a client that reads slowly gets fewer intermediate
revisions, never an unbounded backlog, and never slows the server or other clients
(the connection's send queue is bounded, design §6.9).
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from protocol import messages

from .image_urls import image_url

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["ClientPusher", "ImageStore", "PushTarget", "StoredImage", "png_size"]

LOGGER = logging.getLogger("examples.preview")
MIME = "image/png"

#: (run_id, kind)
Key = tuple[int, str]


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height in pixels from a PNG's IHDR chunk; (0, 0) if it is not a PNG."""
    if len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return 0, 0
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@attrs.frozen(kw_only=True)
class StoredImage:
    """One image of a run at one client revision."""

    run_id: int
    kind: str
    """``thumbnail`` or ``preview``."""
    revision: int
    """Client revision of the data it was drawn from (1, 2, ...)."""
    data: bytes = attrs.field(repr=lambda data: f"<{len(data)} bytes>")
    """PNG bytes."""
    live: bool = False
    """True if drawn from a partial read of a run still being written (design §4.5)."""
    version: str = attrs.field(init=False, repr=False)
    """The start of the SHA-256 of the bytes (24 hex digits): in every URL of the image,
    so that a URL names these bytes and no others (design §7.6)."""
    etag: str = attrs.field(init=False, repr=False)
    """A strong HTTP entity tag of these bytes at this revision (design §7.6)."""

    @version.default
    def _version(self) -> str:
        return hashlib.sha256(self.data).hexdigest()[:24]

    @etag.default
    def _etag(self) -> str:
        return f'"r{self.revision}-{self.version}"'

    @property
    def key(self) -> Key:
        """``(run_id, kind)``."""
        return self.run_id, self.kind

    def message(self, db: str) -> messages.ImageReady:
        """The ``image_ready`` notice of this image, in database ``db``."""
        width, height = png_size(self.data)
        return messages.ImageReady(
            db=db,
            run_id=self.run_id,
            kind=self.kind,
            revision=self.revision,
            url=image_url(db, self.run_id, self.kind, self.revision, self.version),
            mime=MIME,
            width=width,
            height=height,
            bytes=len(self.data),
        )


class ImageStore:
    """The newest image per (run, kind) (see the module docstring).

    Args:
        db: The database id, in every notice's URL (design §7.5).
        preview_bytes: Bound of the previews kept, in bytes of PNG (the least recently
            stored are forgotten first; a late client does not get those).
    """

    def __init__(self, *, db: str, preview_bytes: int = 64 * 1024 * 1024) -> None:
        self.db = db
        self._thumbnails: dict[int, StoredImage] = {}
        self._previews: OrderedDict[int, StoredImage] = OrderedDict()
        self._preview_bytes = 0
        self._bound = preview_bytes
        self.pushers: set[ClientPusher] = set()

    def get(self, key: Key) -> StoredImage | None:
        """The newest image of ``key``, or None."""
        run_id, kind = key
        table = self._thumbnails if kind == "thumbnail" else self._previews
        return table.get(run_id)

    def keys(self) -> list[Key]:
        """Every key with an image, in run order."""
        keys = [(r, "thumbnail") for r in self._thumbnails]
        keys += [(r, "preview") for r in self._previews]
        return sorted(keys)

    def put(self, image: StoredImage) -> bool:
        """Keep ``image`` unless a newer revision (or the same bytes) is already kept.

        Returns:
            True if it was kept; every pusher is then told about its key.
        """
        old = self.get(image.key)
        if old is not None and (
            old.revision > image.revision
            or (old.revision == image.revision and old.data == image.data)
        ):
            return False
        if image.kind == "thumbnail":
            self._thumbnails[image.run_id] = image
        else:
            if old is not None:
                self._preview_bytes -= len(old.data)
                del self._previews[image.run_id]
            self._previews[image.run_id] = image
            self._preview_bytes += len(image.data)
            while self._preview_bytes > self._bound and len(self._previews) > 1:
                _, dropped = self._previews.popitem(last=False)
                self._preview_bytes -= len(dropped.data)
        for pusher in self.pushers:
            pusher.mark(image.key)
        return True

    def statistics(self) -> dict[str, int]:
        """Counts and bytes kept."""
        return {
            "thumbnails": len(self._thumbnails),
            "previews": len(self._previews),
            "preview_bytes": self._preview_bytes,
            "pushers": len(self.pushers),
        }


class PushTarget(Protocol):
    """What a pusher sends to: :class:`examples.web.connection.Connection` fits."""

    async def push(self, message: Any, *, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Queue ``message``; False if the target is closed or stayed full."""
        ...


class ClientPusher:
    """Sends one client the images it has not seen (see the module docstring).

    Args:
        store: The image store (the pusher registers itself while it runs).
        target: The client connection.
        priority: Returns ``(selected run or None, visible runs)`` now.
        push_timeout: Seconds (trio clock) to wait for room in the client's queue; if
            it stays full the message is dropped and the client told to resync
            (``resync_required``); it may ask ``list_runs`` again to get every image.
    """

    def __init__(
        self,
        store: ImageStore,
        target: PushTarget,
        priority: Callable[[], tuple[int | None, frozenset[int]]],
        *,
        push_timeout: float,
    ) -> None:
        self.store = store
        self.target = target
        self.priority = priority
        self.push_timeout = push_timeout
        self.sent: dict[Key, StoredImage] = {}
        self._dirty: set[Key] = set()
        self._batch: list[Key] = []
        self._wake = trio.Event()
        self.pushed = 0
        self.ended = False
        """True once :meth:`run` returned (the client closed or fell behind)."""

    def mark(self, key: Key) -> None:
        """``key`` has a new image: send it (never waits)."""
        self._dirty.add(key)
        self._wake.set()

    def mark_all(self, keys: Iterable[Key] | None = None) -> None:
        """Send every stored image again (or those of ``keys``), e.g. for a late client."""
        self.sent.clear()
        for key in self.store.keys() if keys is None else keys:
            self.mark(key)

    def _next(self) -> Key | None:
        dirty = self._dirty
        if not dirty:
            return None
        selected, visible = self.priority()
        first = [] if selected is None else [selected]
        for run_id in (*first, *sorted(visible)):
            for kind in ("thumbnail", "preview"):
                if (run_id, kind) in dirty:
                    dirty.discard((run_id, kind))
                    return run_id, kind
        while True:  # the rest: thumbnails first, in run order (sorted once per batch)
            if not self._batch:
                self._batch = sorted(dirty, key=lambda k: (k[1] != "thumbnail", k[0]))
                self._batch.reverse()
            key = self._batch.pop()
            if key in dirty:
                dirty.discard(key)
                return key

    async def run(self) -> None:
        """Push until cancelled or the target closes (a checkpoint; never returns early)."""
        self.store.pushers.add(self)
        stored = self.store.keys()  # some stored after mark_all, before this task ran
        for stored_key in stored:
            if stored_key not in self.sent:
                self.mark(stored_key)
        try:
            while True:
                key = self._next()
                if key is None:
                    self._wake = trio.Event()
                    await self._wake.wait()
                    continue
                image = self.store.get(key)
                if image is None or self.sent.get(key) is image:
                    continue
                if not await self.target.push(
                    image.message(self.store.db), timeout=self.push_timeout
                ):
                    return  # closed, or marked resync-required: the client re-asks
                self.sent[key] = image
                self.pushed += 1
        finally:
            self.ended = True
            self.store.pushers.discard(self)
