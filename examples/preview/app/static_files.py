"""The dashboard's own static files, served beside it by the front door (design §7.7).

``examples/preview/static/`` ships with the package (package data, no build step, no
CDN): uPlot 1.6.32 (``uPlot.iife.min.js``, ``uPlot.min.css``, MIT, its licence in
``uPlot.LICENSE``, from the npm registry's ``uplot@1.6.32``) and the page's explore
code ``explore.js``. Each is served at ``/static/<name>`` with its ``Content-Type`` and
a ``Cache-Control`` that lets the browser keep it for an hour (the dashboard itself
stays ``no-store``). Like the dashboard these files are public; the websocket keeps its
token, and the Host check applies to them too (design §7.3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import trio

from ...web.frontdoor import Page

__all__ = ["STATIC", "STATIC_CACHE", "STATIC_FILES", "static_pages"]

#: The folder of the static files.
STATIC: Final = Path(__file__).resolve().parents[1] / "static"
#: Each served file and its ``Content-Type``.
STATIC_FILES: Final = {
    "uPlot.iife.min.js": "text/javascript; charset=utf-8",
    "uPlot.min.css": "text/css; charset=utf-8",
    "explore.js": "text/javascript; charset=utf-8",
}
#: Their ``Cache-Control``: an hour, so a new version is picked up the same day.
STATIC_CACHE: Final = "public, max-age=3600"


async def static_pages() -> dict[str, Page]:
    """Read every static file (a checkpoint): path (``/static/<name>``) → page.

    Raises:
        OSError: a file is missing from the installed package.
    """
    pages = {}
    for name, content_type in STATIC_FILES.items():
        body = await trio.Path(STATIC / name).read_bytes()
        pages[f"/static/{name}"] = Page(
            body=body, content_type=content_type, cache_control=STATIC_CACHE
        )
    return pages
