"""Dynamic GET routes on the front door's port: token, Host, HEAD, 304, limits (design §7.6).

A real event-log actor and front door on port 0 with a few routes, raw TCP clients that
speak HTTP/1.1 by hand; real clock, short timeouts.
"""

from __future__ import annotations

import functools
import logging
import urllib.parse
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
import trio
from frontdoor_support import assert_no_children
from test_ws_http import PAGES, exchange, get, split

from actors import EventLogActor, EventLogClient, EventLogConfig
from examples.web.fetch import FetchError, http_get
from examples.web.frontdoor import FrontDoor, FrontDoorConfig, open_front_door
from examples.web.routes import HttpAnswer, HttpRequest, Route, Router, etag_matches

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

TOKEN = "route-token-123"
IMAGE = b"\x89PNG\r\n\x1a\n" + b"x" * 100
ETAG = '"r1-abc"'


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


async def image(request: HttpRequest) -> HttpAnswer:
    await trio.lowlevel.checkpoint()
    if request.path != "/img/a.png":
        return HttpAnswer.text(404, "no such image")
    if etag_matches(request.headers, ETAG):
        return HttpAnswer(status=304, cache_control="private, no-cache", headers=(("ETag", ETAG),))
    return HttpAnswer(
        status=200, body=IMAGE, content_type="image/png", cache_control="private, no-cache",
        headers=(("ETag", ETAG),),
    )  # fmt: skip


async def broken(request: HttpRequest) -> HttpAnswer:
    await trio.lowlevel.checkpoint()
    raise RuntimeError("a bug in a route")


async def huge(request: HttpRequest) -> HttpAnswer:
    await trio.lowlevel.checkpoint()
    return HttpAnswer(status=200, body=b"x" * 5000)


ROUTES = [
    Route(prefix="/img/", handler=image),
    Route(prefix="/broken/", handler=broken),
    Route(prefix="/huge/", handler=huge),
    Route(prefix="/public/", handler=image, protected=False),
]


@asynccontextmanager
async def serving(config: FrontDoorConfig) -> AsyncIterator[FrontDoor]:
    actor = EventLogActor(EventLogConfig())
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(actor.run)
        log = EventLogClient(ref, timeout=5.0)
        async with open_front_door(log, config, pages=PAGES, routes=ROUTES) as front:
            yield front
        await ref.stop(1.0)


def config(**fields: object) -> FrontDoorConfig:
    return FrontDoorConfig(token=TOKEN, max_route_body=4096, **fields)  # type: ignore[arg-type]


async def test_a_route_needs_the_token_and_answers_with_its_headers():
    async with serving(config()) as front:
        for path, extra in [
            ("/img/a.png", ""),
            ("/img/a.png?token=wrong-token-0", ""),
            ("/img/a.png", "Authorization: Bearer wrong-token-0\r\n"),
        ]:
            status, headers, body = split(await exchange(front, get(front, path, extra=extra)))
            assert status == "HTTP/1.1 403 Forbidden", path
            assert IMAGE not in body
            assert body.startswith(b"403 Forbidden: missing or wrong token")
        for path, extra in [
            (f"/img/a.png?token={TOKEN}", ""),
            ("/img/a.png", f"Authorization: Bearer {TOKEN}\r\n"),
        ]:
            status, headers, body = split(await exchange(front, get(front, path, extra=extra)))
            assert (status, body) == ("HTTP/1.1 200 OK", IMAGE)
            assert headers["content-type"] == "image/png"
            assert headers["content-length"] == str(len(IMAGE))
            assert headers["cache-control"] == "private, no-cache"
            assert headers["etag"] == ETAG
            assert headers["x-content-type-options"] == "nosniff"
            assert headers["referrer-policy"] == "no-referrer"
        stats = front.statistics()
        assert stats.refusals == {"missing_token": 1, "wrong_token": 2}
        assert stats.route_answers == {"200": 2}


async def test_every_token_given_must_be_right_and_a_parameter_comes_once():
    async with serving(config()) as front:
        right, wrong = f"Authorization: Bearer {TOKEN}\r\n", "Authorization: Bearer wrong-0\r\n"
        for path, extra in [
            ("/img/a.png?token=wrong-token-0", right),
            (f"/img/a.png?token={TOKEN}", wrong),
            (f"/img/a.png?token={TOKEN}&token=wrong-token-0", ""),
        ]:
            status, _, body = split(await exchange(front, get(front, path, extra=extra)))
            assert status == "HTTP/1.1 403 Forbidden", (path, extra)
            assert IMAGE not in body
        status, _, body = split(
            await exchange(front, get(front, f"/img/a.png?token={TOKEN}", extra=right))
        )
        assert (status, body) == ("HTTP/1.1 200 OK", IMAGE)
        repeated = f"/img/a.png?rev=1&token={TOKEN}&rev=2"
        status, _, body = split(await exchange(front, get(front, repeated)))
        assert (status, body) == (
            "HTTP/1.1 400 Bad Request", b"400 Bad Request: query parameter 'rev' is repeated\n",
        )  # fmt: skip
        assert front.statistics().refusals == {"wrong_token": 3}
        assert front.statistics().route_answers == {"200": 1, "400": 1}


async def test_head_304_404_and_methods():
    async with serving(config()) as front:
        target = f"/img/a.png?token={TOKEN}"
        status, headers, body = split(await exchange(front, get(front, target, "HEAD")))
        assert (status, headers["content-length"], body) == (
            "HTTP/1.1 200 OK", str(len(IMAGE)), b"",
        )  # fmt: skip
        revalidate = f'If-None-Match: W/"other", {ETAG}\r\n'
        status, headers, body = split(await exchange(front, get(front, target, extra=revalidate)))
        assert (status, body) == ("HTTP/1.1 304 Not Modified", b"")
        assert "content-length" not in headers
        assert "content-type" not in headers  # a cache would relabel the image it holds
        assert headers["etag"] == ETAG
        status, _, body = split(await exchange(front, get(front, f"/img/b.png?token={TOKEN}")))
        assert (status, body) == ("HTTP/1.1 404 Not Found", b"404 Not Found: no such image\n")
        post = get(front, target, "POST", "Content-Length: 0\r\n")
        status, headers, _ = split(await exchange(front, post))
        assert (status, headers["allow"]) == ("HTTP/1.1 405 Method Not Allowed", "GET, HEAD")
        assert front.statistics().route_answers == {"200": 1, "304": 1, "404": 1}


async def test_an_encoded_slash_never_reaches_a_route():
    # Decoded, /img%2Fa.png would be /img/a.png: one segment read as two.
    async with serving(config()) as front:
        for path in ("/img%2Fa.png", "/img/x%2f..%2Fa.png"):
            target = f"{path}?token={TOKEN}"
            status, _, body = split(await exchange(front, get(front, target)))
            assert (status, body) == (
                "HTTP/1.1 404 Not Found",
                b"404 Not Found: no such address: an encoded '/' in the path\n",
            )
        assert front.statistics().route_answers == {"404": 2}


async def test_a_path_is_logged_as_sent_so_an_encoded_newline_forges_no_line(
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.INFO, logger="examples.frontdoor")
    forged = "/img/x%0A%20%2099%20ms%20examples.frontdoor:%20FORGED.png"
    async with serving(config()) as front:
        status, _, _ = split(await exchange(front, get(front, f"{forged}?token={TOKEN}")))
        assert status == "HTTP/1.1 404 Not Found"
    (record,) = [r for r in caplog.records if getattr(r, "event", None) == "http_route"]
    assert record.path == forged  # type: ignore[attr-defined]
    assert "\n" not in record.getMessage()


async def test_the_host_is_checked_before_the_token():
    async with serving(config()) as front:
        rebound = (
            f"GET /img/a.png?token={TOKEN} HTTP/1.1\r\nHost: evil.example:{front.port}\r\n\r\n"
        )
        status, _, body = split(await exchange(front, rebound.encode()))
        assert status == "HTTP/1.1 403 Forbidden"
        assert IMAGE not in body
        assert front.statistics().refusals == {"foreign_host": 1}


async def test_pages_stay_public_and_an_unprotected_route_needs_no_token():
    async with serving(config()) as front:
        status, _, body = split(await exchange(front, get(front, "/")))
        assert (status, body) == ("HTTP/1.1 200 OK", PAGES["/"].body)
        # No token, yet the route itself answers (its 404: it serves /img/a.png only).
        status, _, body = split(await exchange(front, get(front, "/public/../img/a.png")))
        assert (status, body) == ("HTTP/1.1 404 Not Found", b"404 Not Found: no such image\n")
        status, _, body = split(await exchange(front, get(front, "/nothing")))
        assert (status, body) == ("HTTP/1.1 404 Not Found", b"404 Not Found\n")
        assert front.statistics().route_answers == {"404": 1}
        assert front.statistics().refusals == {}


async def test_a_failing_or_oversized_route_is_a_500_and_the_server_goes_on(caplog):
    caplog.set_level(logging.INFO, logger="examples.frontdoor")
    async with serving(config()) as front:
        status, _, body = split(await exchange(front, get(front, f"/broken/x?token={TOKEN}")))
        assert (status, body) == (
            "HTTP/1.1 500 Internal Server Error",
            b"500 Internal Server Error: the server failed to answer this request\n",
        )
        status, _, body = split(await exchange(front, get(front, f"/huge/x?token={TOKEN}")))
        assert status == "HTTP/1.1 500 Internal Server Error"
        assert b"x" * 5000 not in body
        status, _, body = split(await exchange(front, get(front, f"/img/a.png?token={TOKEN}")))
        assert (status, body) == ("HTTP/1.1 200 OK", IMAGE)
    records = [r for r in caplog.records if getattr(r, "event", None) == "http_route"]
    assert [(r.path, r.status) for r in records] == [  # type: ignore[attr-defined]
        ("/broken/x", 500), ("/huge/x", 500), ("/img/a.png", 200),
    ]  # fmt: skip
    assert all(TOKEN not in r.getMessage() for r in caplog.records)
    assert any(getattr(r, "event", None) == "http_route_too_large" for r in caplog.records)


def test_etag_matching_and_route_validation():
    assert etag_matches({b"if-none-match": b'"a", "b"'}, '"b"')
    assert etag_matches({b"if-none-match": b'W/"b"'}, '"b"')
    assert etag_matches({b"if-none-match": b"*"}, '"b"')
    assert not etag_matches({b"if-none-match": b'"bb"'}, '"b"')
    assert not etag_matches({}, '"b"')
    with pytest.raises(ValueError, match="prefix"):
        Route(prefix="img/", handler=image)
    # A path without the closing '/' is served alone, exactly.
    router = Router([Route(prefix="/metrics", handler=image)], max_body=100)
    for target, served in (("/metrics", True), ("/metrics?x=1", True),
                           ("/metricsx", False), ("/metrics/x", False)):  # fmt: skip
        path, _, query = target.partition("?")
        request = HttpRequest(method="GET", path=path, query={"x": "1"} if query else {},
                              headers={}, target=target)  # fmt: skip
        assert (router.match(request) is not None) is served, target
    with pytest.raises(ValueError, match="same prefix"):
        Router([ROUTES[0], ROUTES[0]], max_body=1024)
    router = Router([*ROUTES, Route(prefix="/img/sub/", handler=huge)], max_body=1024)
    assert router.match(_request("GET", "/img/sub/x?token=1")) is router.routes[0]
    assert router.match(_request("GET", "/img/x")).prefix == "/img/"  # type: ignore[union-attr]
    assert router.match(_request("POST", "/img/x")) is None
    assert router.match(_request("GET", "/img/"), pages={"/img/": object()}) is None
    with pytest.raises(ValueError, match="max_route_body"):
        FrontDoorConfig(max_route_body=10)


def _request(method: str, target: str) -> HttpRequest:
    path, _, query = target.partition("?")
    return HttpRequest(
        method=method, path=path, query=dict(urllib.parse.parse_qsl(query)), headers={},
        target=target,
    )  # fmt: skip


async def test_the_client_get_reads_answers_and_refuses_broken_or_oversized_ones():
    async with serving(config()) as front:
        base = f"ws://127.0.0.1:{front.port}"
        fetched = await http_get(base, "/img/a.png", token=TOKEN, max_body=1024)
        assert (fetched.status, fetched.body) == (200, IMAGE)
        assert fetched.headers["etag"] == ETAG
        again = await http_get(
            base, "/img/a.png", token=TOKEN, max_body=1024, headers={"If-None-Match": ETAG}
        )
        assert (again.status, again.body) == (304, b"")
        refused = await http_get(base, "/img/a.png", max_body=1024)
        assert refused.status == 403
        with pytest.raises(FetchError, match="over 10 bytes"):
            await http_get(base, "/img/a.png", token=TOKEN, max_body=10)

    async def garbage(stream: trio.SocketStream) -> None:
        async with stream:
            await stream.receive_some(65536)
            await stream.send_all(b"SMTP ready\r\n\r\n")

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, garbage, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        with pytest.raises(FetchError, match="not an HTTP answer"):
            await http_get(f"http://127.0.0.1:{port}", "/", max_body=1024)
        nursery.cancel_scope.cancel()
