"""The addresses of the preview server's images (design §7.5, §7.6); pure functions.

Every image a client may show is fetched over HTTP from the server that announced it
(``image_ready``, ``drawing``), under the id of its database:

================================================  ======================================
path                                              what
================================================  ======================================
``/db/<db>/runs/<run>/<kind>.png?rev=<r>&v=<h>``  the newest image of a run, ``kind``
                                                  one of :data:`IMAGE_KINDS` (the sizes
                                                  the app draws), at revision ``r``
``/db/<db>/views/<n>.png?v=<h>``                  the ``n``-th picture a ``draw`` asked
                                                  for
================================================  ======================================

``v`` is the image's version, the start of the SHA-256 of its bytes: revisions and
picture numbers count from 1 again when a database's app starts again (the server
restarted, the file was replaced by another database), and a run may be drawn again at
the same revision, so only the version makes an address name one content for good.

A database id (:func:`database_id`) is the file's name made safe for a URL plus a hash
of its absolute path: the same file has the same id at every start, two files of the
same name in different folders differ, and no client ever sees the path itself."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Final

import attrs

from ..child.drawing.image_kinds import KINDS

__all__ = [
    "IMAGE_KINDS",
    "ImagePath",
    "database_id",
    "image_url",
    "listed_path",
    "parse_image_path",
    "view_url",
]

#: The kinds of image (sizes) a run has: (width, height) in pixels.
IMAGE_KINDS: Final = KINDS
#: Longest readable part of a database id, in characters.
_NAME_CHARS: Final = 40
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]+")
_ID: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: A number as the server writes it: decimal, no sign, no leading zero (one address
#: per image).
_NUMBER: Final = r"(0|[1-9][0-9]{0,14})"
_RUN: Final = re.compile(rf"/db/([^/]+)/runs/{_NUMBER}/([a-z]+)\.png")
_VIEW: Final = re.compile(rf"/db/([^/]+)/views/{_NUMBER}\.png")


def listed_path(path: Path) -> Path:
    """``path`` absolute, its folder resolved but not its name: a symbolic link keeps its
    own name (its target's name and place are never shown, design §7.5)."""
    return path.absolute().parent.resolve() / path.name


def database_id(path: str | os.PathLike[str]) -> str:
    """The URL-safe, stable id of the database file at ``path`` (module docstring).

    ``<name>-<8 hex digits>``: the file name without ``.db``, characters other than
    letters, digits, ``_``, ``.`` and ``-`` replaced by ``_``, at most 40 characters;
    then the start of the SHA-256 of the absolute path (:func:`listed_path`: a link's
    own name, never its target's).
    """
    resolved = listed_path(Path(path))
    name = _UNSAFE.sub("_", resolved.stem).strip("._-")[:_NAME_CHARS] or "db"
    digest = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:8]
    return f"{name}-{digest}"


def image_url(db: str, run_id: int, kind: str, revision: int, version: str) -> str:
    """The address of a run's image at ``revision`` with bytes of ``version`` (a path and
    query, no token)."""
    return f"/db/{db}/runs/{run_id}/{kind}.png?rev={revision}&v={version}"


def view_url(db: str, number: int, version: str) -> str:
    """The address of the ``number``-th drawing of a ``draw``, with bytes of ``version``
    (a path and query, no token)."""
    return f"/db/{db}/views/{number}.png?v={version}"


@attrs.frozen(kw_only=True)
class ImagePath:
    """What an image path names (see :func:`parse_image_path`)."""

    db: str
    """The database id."""
    run_id: int | None = None
    """The run, for a run's image."""
    kind: str | None = None
    """The kind, for a run's image (not yet checked against :data:`IMAGE_KINDS`)."""
    view: int | None = None
    """The drawing's number, for a ``draw`` picture."""


def parse_image_path(path: str) -> ImagePath | None:
    """What ``path`` (percent-decoded, without the query) names, or None if nothing."""
    match = _RUN.fullmatch(path)
    if match is not None and _ID.fullmatch(match[1]):
        return ImagePath(db=match[1], run_id=int(match[2]), kind=match[3])
    match = _VIEW.fullmatch(path)
    if match is not None and _ID.fullmatch(match[1]):
        return ImagePath(db=match[1], view=int(match[2]))
    return None
