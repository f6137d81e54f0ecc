"""The dashboard's static files over plain HTTP (design §7.7): typed, cacheable, guarded.

The front door serves them like the dashboard (same Host rule, design §7.3); these
tests speak raw HTTP to it (:mod:`test_ws_http`'s helpers).
"""

from __future__ import annotations

import re
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
import trio
from frontdoor_support import assert_no_children
from test_ws_http import exchange, get, split

from actors import EventLogActor, EventLogClient, EventLogConfig
from examples.preview.app.static_files import STATIC, STATIC_CACHE, STATIC_FILES, static_pages
from examples.preview.server import DASHBOARD
from examples.web.frontdoor import FrontDoor, FrontDoorConfig, Page, open_front_door

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@asynccontextmanager
async def serving() -> AsyncIterator[FrontDoor]:
    pages = {"/": Page(body=DASHBOARD.read_bytes()), **await static_pages()}
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(EventLogActor(EventLogConfig()).run)
        log = EventLogClient(ref, timeout=5.0)
        async with open_front_door(log, FrontDoorConfig(), pages=pages) as front:
            yield front
        await ref.stop(1.0)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("uPlot.iife.min.js", "text/javascript; charset=utf-8"),
        ("uPlot.min.css", "text/css; charset=utf-8"),
        ("explore.js", "text/javascript; charset=utf-8"),
    ],
)
async def test_each_static_file_is_typed_and_cacheable(name: str, kind: str) -> None:
    async with serving() as front:
        status, headers, body = split(await exchange(front, get(front, f"/static/{name}")))
        assert status == "HTTP/1.1 200 OK"
        assert body == (STATIC / name).read_bytes()
        assert headers["content-type"] == kind
        assert headers["cache-control"] == STATIC_CACHE
        assert headers["x-content-type-options"] == "nosniff"
        status, headers, body = split(await exchange(front, get(front, "/")))
        assert headers["cache-control"] == "no-store"  # the page itself is never cached
        csp = headers["content-security-policy"]
        assert "script-src 'self' 'unsafe-inline'" in csp  # its own files, nothing else
        assert "style-src 'self' 'unsafe-inline'" in csp
    assert_no_children()


async def test_other_static_paths_and_foreign_hosts_are_refused() -> None:
    async with serving() as front:
        for path in ("/static/", "/static/nope.js", "/static/../dashboard.html",
                     "/examples/preview/static/explore.js"):  # fmt: skip
            status, _, _ = split(await exchange(front, get(front, path)))
            assert status == "HTTP/1.1 404 Not Found", path
        foreign = b"GET /static/explore.js HTTP/1.1\r\nHost: evil.example\r\n\r\n"
        status, _, body = split(await exchange(front, foreign))
        assert status == "HTTP/1.1 403 Forbidden"
        assert body.startswith(b"403 Forbidden: Host 'evil.example'")
    assert_no_children()


def test_the_dashboard_loads_exactly_the_served_files() -> None:
    html = DASHBOARD.read_text(encoding="utf-8")
    loaded = set(re.findall(r'(?:src|href)="static/([^"]+)"', html))
    assert loaded == set(STATIC_FILES)
    assert (STATIC / "uPlot.LICENSE").read_text().startswith("The MIT License")
    assert "1.6.32" in (STATIC / "README.md").read_text()
