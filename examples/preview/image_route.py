"""ImageRoute: the preview server's images over HTTP (design §7.6).

One :class:`~examples.web.routes.Route` under ``/db/`` answers the addresses of
:mod:`examples.preview.image_urls` from the image stores of the databases served
(``lookup(db)`` gives a database's :class:`ImageSource`, or None). The front door has
checked the ``Host`` and the token before (design §7.3): a request without the token
never gets here.

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

import re
from typing import TYPE_CHECKING, Final, Protocol

from ..web.routes import HttpAnswer, Route, etag_matches
from .image_urls import IMAGE_KINDS, parse_image_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..web.routes import HttpRequest
    from .drawn_views import DrawnViews
    from .push import ImageStore, StoredImage

__all__ = ["IMMUTABLE", "REVALIDATE", "ImageRoute", "ImageSource"]

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
