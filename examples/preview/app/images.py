"""The preview server's images: the newest PNG per (run, kind), pushed and served over HTTP.

:class:`ImageStore` keeps the newest image of every (run, kind): all thumbnails, and the
previews in a least-recently-used set bounded in bytes. A client connection that asked
for ``list_runs`` gets a :class:`ClientPusher`: a task that sends it one
``image_ready`` notice (design §7.2, §7.6: the image's URL, never its bytes) per image
it has not seen yet at its newest revision, the selected
run's images first, then visible runs', thumbnails before previews. It queues the notices of
the images ready at once together (at most :data:`BATCH`), so they leave in one write
(:mod:`examples.web.corking`). The pusher holds
only keys, never a queue of images: a client that reads slowly gets fewer intermediate
revisions, never an unbounded backlog, and never slows the server or other clients
(the connection's send queue is bounded, design §6.9).

**Drawn pictures.** :class:`DrawnViews`: the newest pictures ``draw`` made, held for
their URLs (design §7.6).

A ``draw`` answer names its picture by URL (``/db/<db>/views/<n>.png?v=<version>``)
instead of carrying it. :class:`DrawnViews` keeps the newest ``keep`` pictures, at most
``max_bytes`` bytes of PNG in all, numbered from 1 in the order drawn; a number is
never reused while the app runs, and the version (of the bytes) in the address tells a
picture from one of an earlier run of the server with the same number. An older
picture is forgotten (its URL then answers 404); a client asks ``draw`` again.

**The route** (design §7.6). One :class:`~examples.web.routes.Route` under ``/db/``
answers the addresses of :mod:`examples.preview.app.image_urls` from the image stores
of the databases served (``lookup(db)`` gives a database's :class:`ImageSource`, or
None). The front door has checked the ``Host`` and the token before (design §7.3): a
request without the token never gets here.

========================================  ==============================================
request                                   answer
========================================  ==============================================
an image whose version ``v`` is given     200, ``Cache-Control: private, max-age=<a
(and is the newest image's)               year>, immutable``, strong ``ETag``: the
                                          address names these bytes for good
the same without ``v``                    200, ``Cache-Control: private, no-cache``:
                                          the browser revalidates with the ``ETag``
``If-None-Match`` naming the ``ETag``     304 with the same headers, no body
an unknown database, run, kind or         404 naming what is missing
picture; a revision or a version not
held (older or newer than the newest:
the run was drawn again, the server
restarted, the file was replaced)
a run or picture number not in decimal     404 (one address per image)
with no sign and no leading zero
``rev`` not such a number; ``v`` not 24   400 naming the parameter
lowercase hex digits; another query
parameter than ``rev``, ``v`` and
``token``; a parameter given twice
========================================  ==============================================

Every image has ``Content-Type: image/png`` and its ``Content-Length``; ``HEAD`` gets
the same head without the body (the front door leaves it out).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs
import trio

from protocol import messages

from ...web.routes import HttpAnswer, Route, etag_matches
from .image_urls import IMAGE_KINDS, image_url, parse_image_path

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from ...web.routes import HttpRequest

__all__ = [
    "ClientPusher",
    "ImageStore",
    "PushTarget",
    "StoredImage",
    "png_size",
    "DrawnViews",
    "IMMUTABLE",
    "REVALIDATE",
    "ImageRoute",
    "ImageSource",
]

LOGGER = logging.getLogger("examples.preview")
MIME = "image/png"

#: (run_id, kind)
Key = tuple[int, str]
#: Most ``image_ready`` notices a pusher queues together.
BATCH = 16


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

    async def push_all(self, batch: Sequence[Any], *, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Queue the messages of ``batch`` in order, together; False if the target is
        closed or stayed full."""
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

    def _ready(self) -> list[StoredImage]:
        # The next images to announce, in order, at most BATCH of them: queued together,
        # they leave in one write (examples.web.corking).
        batch: list[StoredImage] = []
        while len(batch) < BATCH:
            key = self._next()
            if key is None:
                break
            image = self.store.get(key)
            if image is not None and self.sent.get(key) is not image:
                batch.append(image)
        return batch

    async def run(self) -> None:
        """Push until cancelled or the target closes (a checkpoint; never returns early)."""
        self.store.pushers.add(self)
        stored = self.store.keys()  # some stored after mark_all, before this task ran
        for stored_key in stored:
            if stored_key not in self.sent:
                self.mark(stored_key)
        try:
            while True:
                batch = self._ready()
                if not batch:
                    self._wake = trio.Event()
                    await self._wake.wait()
                    continue
                db = self.store.db
                notices = [image.message(db) for image in batch]
                if not await self.target.push_all(notices, timeout=self.push_timeout):
                    return  # closed, or marked resync-required: the client re-asks
                for image in batch:
                    self.sent[image.key] = image
                self.pushed += len(batch)
        finally:
            self.ended = True
            self.store.pushers.discard(self)


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


#: ``Cache-Control`` of an address that names its version: it never changes.
IMMUTABLE: Final = "private, max-age=31536000, immutable"
#: ``Cache-Control`` of an address without a version: ask again each time.
REVALIDATE: Final = "private, no-cache"
_PARAMETERS: Final = frozenset({"rev", "v", "token"})
_REV: Final = re.compile(r"0|[1-9][0-9]{0,14}")
_VERSION: Final = re.compile(r"[0-9a-f]{24}")


class ImageSource(Protocol):
    """What the route reads of one database: its images and its drawn pictures."""

    @property
    def images(self) -> ImageStore:
        """The newest image per (run, kind)."""
        ...

    @property
    def views(self) -> DrawnViews:
        """The newest pictures of ``draw``."""
        ...


class ImageRoute:
    """Answers ``GET``/``HEAD`` of the image addresses (see the module docstring).

    Args:
        lookup: The database with an id, or None if the server has none such.
    """

    def __init__(self, lookup: Callable[[str], ImageSource | None]) -> None:
        self._lookup = lookup

    def route(self) -> Route:
        """The front-door route, protected by the token (design §7.3)."""
        return Route(prefix="/db/", handler=self.answer, name="images")

    async def answer(self, request: HttpRequest) -> HttpAnswer:
        """The answer to one request (see the module docstring); never raises."""
        unknown = sorted(set(request.query) - _PARAMETERS)
        if unknown:
            return HttpAnswer.text(400, f"unknown query parameter {unknown[0][:40]!r}")
        version = request.query.get("v")
        if version is not None and _VERSION.fullmatch(version) is None:
            return HttpAnswer.text(
                400, f"v must be an image version (24 hex digits), got {version[:40]!r}"
            )
        named = parse_image_path(request.path)
        if named is None:
            return HttpAnswer.text(404, "no such image address")
        source = self._lookup(named.db)
        if source is None:
            return HttpAnswer.text(404, f"no database {named.db!r}")
        if named.view is not None:
            view = source.views.get(named.view)
            if view is None:
                return HttpAnswer.text(404, f"picture {named.view} is not held (draw again)")
            return _image(request, view, version, f"picture {named.view}")
        if named.run_id is None or named.kind not in IMAGE_KINDS:
            kinds = ", ".join(IMAGE_KINDS)
            return HttpAnswer.text(404, f"no image kind {named.kind!r} (one of {kinds})")
        image = source.images.get((named.run_id, named.kind))
        if image is None:
            return HttpAnswer.text(404, f"run {named.run_id} has no {named.kind} (yet)")
        rev = request.query.get("rev")
        if rev is not None:
            if _REV.fullmatch(rev) is None:  # one form only: ``rev=01`` is not ``rev=1``
                return HttpAnswer.text(400, f"rev must be a revision number, got {rev[:40]!r}")
            if int(rev) != image.revision:
                return HttpAnswer.text(
                    404,
                    f"revision {int(rev)} of run {named.run_id}'s {named.kind} is not held "
                    f"(the newest is {image.revision})",
                )
        return _image(request, image, version, f"run {named.run_id}'s {named.kind}")


def _image(request: HttpRequest, image: StoredImage, version: str | None, what: str) -> HttpAnswer:
    # Only an address with the version names one content for good: immutable.
    if version is None:
        cache_control = REVALIDATE
    elif version == image.version:
        cache_control = IMMUTABLE
    else:
        return HttpAnswer.text(
            404,
            f"version {version} of {what} is not held (drawn again since, or another "
            "start of its database)",
        )
    headers = (("ETag", image.etag),)
    if etag_matches(request.headers, image.etag):
        return HttpAnswer(status=304, cache_control=cache_control, headers=headers)
    return HttpAnswer(
        status=200,
        body=image.data,
        content_type="image/png",
        cache_control=cache_control,
        headers=headers,
    )
