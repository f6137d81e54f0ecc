"""The preview's images by URL: addresses, ETag, 304, 404, 400 (design §7.5, §7.6).

The route is asked directly (no server) for the rules; the last test fetches from a
real preview server with real helpers: a token is needed, and a revalidation is a 304.
"""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

import attrs
import pytest
import trio
from frontdoor_support import assert_no_children
from PIL import Image
from preview_support import (
    Seen,
    connect,
    decode_png,
    fetch,
    fetch_png,
    preview_server,
    pump,
    server_config,
)

from examples.preview.app.image_urls import database_id, image_url, parse_image_path, view_url
from examples.preview.app.images import (
    IMMUTABLE,
    REVALIDATE,
    DrawnViews,
    ImageRoute,
    ImageStore,
    StoredImage,
)
from examples.web.routes import HttpRequest

if TYPE_CHECKING:
    from pathlib import Path

DB = "sample-1a2b3c4d"


def png(width: int, height: int, shade: int) -> bytes:
    out = io.BytesIO()
    Image.new("L", (width, height), shade).save(out, format="PNG")
    return out.getvalue()


@attrs.frozen
class Source:
    images: ImageStore
    views: DrawnViews


def request(target: str, **headers: str) -> HttpRequest:
    path, _, query = target.partition("?")
    pairs = dict(item.split("=", 1) for item in query.split("&") if item)
    return HttpRequest(
        method="GET",
        path=path,
        query=pairs,
        headers={
            name.lower().replace("_", "-").encode(): value.encode()
            for name, value in headers.items()
        },
    )


@pytest.fixture
def route() -> tuple[ImageRoute, Source]:
    source = Source(images=ImageStore(db=DB), views=DrawnViews(keep=2))
    source.images.put(StoredImage(run_id=3, kind="preview", revision=2, data=png(64, 48, 1)))
    return ImageRoute({DB: source}.get), source


async def test_a_versioned_url_is_immutable_and_revalidates_to_304(route):
    images, source = route
    image = source.images.get((3, "preview"))
    assert image is not None
    url = image_url(DB, 3, "preview", 2, image.version)
    assert url == f"/db/{DB}/runs/3/preview.png?rev=2&v={image.version}"
    answer = await images.answer(request(url))
    assert (answer.status, answer.body, answer.content_type) == (200, image.data, "image/png")
    assert answer.cache_control == IMMUTABLE
    assert answer.headers == (("ETag", image.etag),)
    assert image.etag == f'"r2-{image.version}"'
    revalidate = request(url, If_None_Match=image.etag)
    again = await images.answer(revalidate)
    assert (again.status, again.body, again.headers) == (304, b"", (("ETag", image.etag),))
    # Without the version, the address may name other bytes one day: revalidated.
    for unversioned in ("", "?rev=2"):
        newest = await images.answer(request(f"/db/{DB}/runs/3/preview.png{unversioned}"))
        assert (newest.status, newest.body, newest.cache_control) == (200, image.data, REVALIDATE)


async def test_an_image_held_in_memory_is_answered_without_a_thread(route, monkeypatch):
    images, source = route
    image = source.images.get((3, "preview"))
    assert image is not None

    async def no_thread(*args: object, **kwargs: object) -> None:
        raise AssertionError("an image held in memory went through a worker thread")

    monkeypatch.setattr(trio.to_thread, "run_sync", no_thread)
    answer = await images.answer(request(image_url(DB, 3, "preview", 2, image.version)))
    assert answer.status == 200
    assert answer.body is image.data  # the bytes held, not a copy


async def test_an_address_never_names_other_bytes_than_its_own(route):
    # Revisions count from 1 again when a database's app starts again (the server
    # restarted, the file was replaced by another database under the same id), and a
    # run may be drawn again at its revision: the version tells the bytes apart.
    images, source = route
    old = source.images.get((3, "preview"))
    assert old is not None
    held = request(image_url(DB, 3, "preview", 2, old.version))
    restarted = Source(images=ImageStore(db=DB), views=DrawnViews(keep=2))
    restarted.images.put(StoredImage(run_id=3, kind="preview", revision=2, data=png(64, 48, 7)))
    for store in (ImageRoute({DB: restarted}.get), images):
        if store is images:  # drawn again at the same revision, in the same app
            assert source.images.put(
                StoredImage(run_id=3, kind="preview", revision=2, data=png(64, 48, 9))
            )
        answer = await store.answer(held)
        assert answer.status == 404
        assert f"version {old.version} of run 3's preview is not held" in answer.body.decode()
    newest = source.images.get((3, "preview"))
    assert newest is not None
    assert newest.version != old.version
    answer = await images.answer(request(image_url(DB, 3, "preview", 2, newest.version)))
    assert (answer.status, answer.body, answer.cache_control) == (200, newest.data, IMMUTABLE)


@pytest.mark.parametrize(
    ("target", "status", "words"),
    [
        (f"/db/{DB}/runs/3/preview.png?rev=1", 404, "revision 1 of run 3's preview is not held"),
        (f"/db/{DB}/runs/3/preview.png?rev=9", 404, "(the newest is 2)"),
        (f"/db/{DB}/runs/4/preview.png", 404, "run 4 has no preview"),
        (f"/db/{DB}/runs/3/thumbnail.png", 404, "run 3 has no thumbnail"),
        (f"/db/{DB}/runs/3/huge.png", 404, "no image kind 'huge' (one of thumbnail, preview)"),
        (f"/db/{DB}/runs/3/preview.png?size=4000x4000", 400, "unknown query parameter 'size'"),
        (f"/db/{DB}/runs/3/preview.png?rev=-1", 400, "rev must be a revision number"),
        (f"/db/{DB}/runs/3/preview.png?rev=2e3", 400, "rev must be a revision number"),
        ("/db/other-00000000/runs/3/preview.png", 404, "no database 'other-00000000'"),
        (f"/db/{DB}/runs/x/preview.png", 404, "no such image address"),
        (f"/db/{DB}/../../etc/passwd", 404, "no such image address"),
        (f"/db/{DB}/views/1.png", 404, "picture 1 is not held"),
        # One address per image: numbers only as the server writes them.
        (f"/db/{DB}/runs/03/preview.png", 404, "no such image address"),
        (f"/db/{DB}/runs/+3/preview.png", 404, "no such image address"),
        (f"/db/{DB}/views/01.png", 404, "no such image address"),
        (f"/db/{DB}/runs/3/preview.png?rev=02", 400, "rev must be a revision number"),
        (f"/db/{DB}/runs/3/preview.png?rev=\u0662", 400, "rev must be a revision number"),
        (f"/db/{DB}/runs/3/preview.png?v=abc", 400, "v must be an image version"),
        (f"/db/{DB}/runs/3/preview.png?v={'A' * 24}", 400, "v must be an image version"),
        (f"/db/{DB}/runs/3/preview.png?v={'0' * 24}", 404, "of run 3's preview is not held"),
        (f"/db/{DB}/runs/3/preview.png?rev=1&v={'0' * 24}", 404, "revision 1 of run 3's"),
    ],
)
async def test_what_is_not_there_or_not_allowed_is_named(route, target, status, words):
    images, _ = route
    answer = await images.answer(request(target))
    assert answer.status == status
    assert words in answer.body.decode()
    assert answer.content_type.startswith("text/plain")


async def test_drawn_views_are_held_newest_first_by_number(route):
    images, source = route
    pictures = [
        StoredImage(run_id=1, kind="preview", revision=0, data=png(64, 48, shade))
        for shade in range(3)
    ]
    numbers = [source.views.add(picture) for picture in pictures]
    assert numbers == [1, 2, 3]
    assert source.views.get(1) is None  # keep=2: the oldest is forgotten
    answer = await images.answer(request(view_url(DB, 3, pictures[2].version)))
    assert (answer.status, answer.body, answer.cache_control) == (200, pictures[2].data, IMMUTABLE)
    unversioned = await images.answer(request(f"/db/{DB}/views/3.png"))
    assert (unversioned.status, unversioned.cache_control) == (200, REVALIDATE)
    # Numbers count from 1 again in a new app: another picture's version is a 404.
    other = await images.answer(request(view_url(DB, 3, pictures[1].version)))
    assert other.status == 404
    assert source.views.statistics()["views"] == 2


def test_database_ids_are_stable_safe_and_never_the_path(tmp_path: Path):
    one = tmp_path / "a" / "My run (2026).db"
    other = tmp_path / "b" / "My run (2026).db"
    first = database_id(one)
    assert first == database_id(tmp_path / "a" / "." / "My run (2026).db")  # resolved
    assert first != database_id(other)
    assert first.startswith("My_run_2026-")
    assert str(tmp_path) not in first
    assert "/" not in first
    parsed = parse_image_path(image_url(first, 5, "thumbnail", 1, "0" * 24).split("?")[0])
    assert parsed is not None
    assert (parsed.db, parsed.run_id, parsed.kind) == (first, 5, "thumbnail")
    assert database_id(tmp_path / "....db").startswith("db-")


async def test_a_real_server_serves_images_by_url_with_the_token(
    writable_db: Path, tmp_path: Path
) -> None:
    token = "image-token-123"
    config = server_config(writable_db, tmp_path)
    seen = Seen()
    async with preview_server(config, token=token) as (front, app):
        async with connect(front, token=token) as client:
            await client.request("list_runs")
            with trio.fail_after(30):
                await pump(client, seen, lambda: seen.newest(1, "preview") is not None)
        notice = seen.newest(1, "preview")
        assert notice is not None
        assert notice["db"] == app.db_id
        image = app.images.get((1, "preview"))
        assert image is not None
        assert notice["url"] == (
            f"/db/{app.db_id}/runs/1/preview.png?rev={notice['revision']}&v={image.version}"
        )
        assert str(writable_db.parent) not in notice["url"]
        data = await fetch_png(front.url, notice, token)
        assert decode_png(data).size == (640, 480)
        refused = await fetch(front.url, notice["url"])
        assert refused.status == 403
        assert data not in refused.body
        assert refused.body.startswith(b"403 Forbidden")
        wrong = await fetch(front.url, notice["url"] + "&token=not-the-token")
        assert wrong.status == 403
        first = await fetch(front.url, notice["url"], token)
        assert first.headers["cache-control"] == IMMUTABLE
        etag = first.headers["etag"]
        again = await fetch(front.url, notice["url"], token, **{"If-None-Match": etag})
        assert (again.status, again.body) == (304, b"")
        stats = front.statistics()
        assert stats.route_answers["304"] == 1
        assert stats.refusals == {"missing_token": 1, "wrong_token": 1}
    assert_no_children()


async def test_without_metrics_the_preview_server_answers_404_there_and_still_serves(
    writable_db: Path, tmp_path: Path
) -> None:
    token = "metrics-token-123"
    config = server_config(writable_db, tmp_path)
    seen = Seen()
    async with preview_server(config, token=token, metrics=False) as (front, app):
        assert app.runtime.metrics is None  # unmeasured, not merely unserved
        async with connect(front, token=token) as client:
            await client.request("list_runs")
            with trio.fail_after(30):
                await pump(client, seen, lambda: seen.newest(1, "preview") is not None)
        # The dashboard and the images are served as ever...
        page = await fetch(front.url, "/", token)
        assert (page.status, page.headers["content-type"]) == (200, "text/html; charset=utf-8")
        preview = seen.newest(1, "preview")
        assert preview is not None
        decode_png(await fetch_png(front.url, preview, token))
        # ... and the metrics and the Observer are unknown paths, with a valid token.
        for target in ("/metrics", "/observer", "/observer/state", "/nowhere"):
            assert (await fetch(front.url, target, token)).status == 404, target
    assert_no_children()


async def test_the_preview_server_serves_its_metrics_with_the_token(
    writable_db: Path, tmp_path: Path
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    token = "metrics-token-123"
    config = server_config(writable_db, tmp_path)
    seen = Seen()
    async with preview_server(config, token=token) as (front, _):
        async with connect(front, token=token) as client:
            await client.request("list_runs")
            with trio.fail_after(30):
                await pump(client, seen, lambda: seen.newest(1, "preview") is not None)
        assert (await fetch(front.url, "/metrics")).status == 403
        assert (await fetch(front.url, "/metrics", "not-the-token")).status == 403
        scraped = await fetch(front.url, "/metrics", token)
        # The Observer's data wants the token too (its page holds no data).
        assert (await fetch(front.url, "/observer/state")).status == 403
        assert (await fetch(front.url, "/observer/state", "not-the-token")).status == 403
        observed = await fetch(front.url, "/observer/state", token)
        assert observed.status == 200
        assert {"tree", "helpers"} <= set(json.loads(observed.body))
    assert scraped.status == 200
    families = {f.name: f for f in text_string_to_metric_families(scraped.body.decode())}
    published = {s.labels["kind"]: s.value for s in families["trio_actors_work_published"].samples
                 if s.name.endswith("_total")}  # fmt: skip
    assert published["preview"] >= 1
    assert {s.labels["actor"] for s in families["trio_actors_mailbox_depth"].samples} == {
        "event_log", "pool", "renderer", "scheduler"
    }  # fmt: skip
