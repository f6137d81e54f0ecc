"""The dashboard page in a real headless Chromium, driven over the DevTools protocol (§7.2).

The preview server runs in this process on a copy of the real sample, with the front
door a default command-line start makes (a fresh random token, Host and Origin checks,
design §7.3); Debian's ``chromium`` loads the page from the server itself
(``http://127.0.0.1:PORT/?token=T&select=4``: the page connects back to the same port
with the token from its address, then takes the token out of the address bar), and once
more under another loopback name (``http://localhost:PORT/``) as a late client. A
``file://`` copy of the page (origin ``null``) and the page under a rebound DNS name
(``evil.example``, mapped to 127.0.0.1 by ``--host-resolver-rules``) are refused.
The test talks to the browser with trio-websocket (Chrome DevTools Protocol,
``--remote-debugging-port=0``):
it waits until the page has loaded every thumbnail and run 4's preview, takes a
screenshot into the test's tmp dir and checks the pictures are really there (image
sizes in the DOM, pixel spread in the screenshot); then it scrolls the run list and
clicks a run, and checks that the server got ``visible`` and ``select``. A page with a
wrong token or none says in a banner why it cannot connect, and one whose server went
away says it is reconnecting. Skipped
when no chromium is installed. Real clock, generous deadlines (contributing §F.3).
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any

import pytest
import trio
from frontdoor_support import assert_no_children
from PIL import Image, ImageStat
from preview_support import server_config
from trio_websocket import open_websocket_url

from examples.preview.app.preview_app import open_database
from examples.preview.server import dashboard_page_url, dashboard_url, open_preview_server
from examples.web.cli import OneLineParser
from examples.web.frontdoor import FrontDoorConfig
from examples.web.launch import add_server_options, front_door_config

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from trio_websocket import WebSocketConnection

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="needs a headless Chromium (apt install chromium)"),
]
#: Seconds allowed for the browser to start and for the page to fill in.
BROWSER_TIMEOUT = 30.0
#: A DNS name the browser resolves to 127.0.0.1, as a rebinding attacker's would.
REBOUND = "evil.example"


class DevToolsError(Exception):
    """Chromium answered a DevTools call with an error (the reply is the argument)."""

    def __init__(self, reply: dict[str, Any]) -> None:
        super().__init__(reply)
        self.reply = reply

    @property
    def between_documents(self) -> bool:
        """The page was navigating: its old document is gone, the new one not yet there."""
        message = str(self.reply.get("error", {}).get("message", ""))
        return "navigated or closed" in message or "context" in message.lower()


class DevTools:
    """A minimal Chrome DevTools Protocol client: one call at a time, events ignored."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self._ids = itertools.count(1)

    async def call(self, method: str, session: str | None = None, **params: Any) -> Any:
        call_id = next(self._ids)
        message: dict[str, Any] = {"id": call_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        await self.ws.send_message(json.dumps(message))
        while True:
            reply = json.loads(await self.ws.get_message())
            if reply.get("id") == call_id:
                if "error" in reply:
                    raise DevToolsError(reply)
                return reply.get("result", {})

    async def evaluate(self, session: str, expression: str) -> Any:
        result = await self.call(
            "Runtime.evaluate", session, expression=expression, returnByValue=True
        )
        return result["result"].get("value")


@asynccontextmanager
async def chromium(profile: Path) -> AsyncIterator[DevTools]:
    """A headless Chromium in its own session; closed (or killed) on exit."""
    assert CHROMIUM is not None
    argv = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
        "--window-size=1200,900", "--hide-scrollbars", "--remote-debugging-port=0",
        f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1", "about:blank",
    ]  # fmt: skip
    process = await trio.lowlevel.open_process(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    assert process.stderr is not None
    try:
        text = b""
        with trio.fail_after(BROWSER_TIMEOUT):
            while (match := re.search(rb"DevTools listening on (ws://\S+)\s", text)) is None:
                chunk = await process.stderr.receive_some(65536)
                assert chunk, text.decode(errors="replace")
                text += chunk
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, process.stderr)  # the pipe must never fill up
            url = match.group(1).decode()
            async with open_websocket_url(url, max_message_size=64 * 1024 * 1024) as ws:
                devtools = DevTools(ws)
                yield devtools
                with suppress(Exception), trio.move_on_after(5):
                    await devtools.call("Browser.close")
            nursery.cancel_scope.cancel()
        with trio.move_on_after(10):
            await process.wait()
    finally:
        if process.returncode is None:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await process.wait()


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    while await stream.receive_some(65536):
        pass


async def wait_for(devtools: DevTools, session: str, expression: str) -> Any:
    """Poll ``expression`` in the page until it is truthy; return its value.

    An evaluation that meets the page between two documents (a reload or a navigation
    the test started) is answered with an error, not a value: that is "not yet".
    """
    with trio.fail_after(BROWSER_TIMEOUT):
        while True:
            try:
                if value := await devtools.evaluate(session, expression):
                    return value
            except DevToolsError as error:
                if not error.between_documents:
                    raise
            await trio.sleep(0.1)  # the page is in another process: polling is the way


async def wait_until(predicate: Callable[[], bool]) -> None:
    """Poll the server's state until ``predicate()``: the browser changes it remotely."""
    with trio.fail_after(BROWSER_TIMEOUT):
        while not predicate():  # noqa: ASYNC110 - set by requests from another process
            await trio.sleep(0.05)


async def test_dashboard_shows_thumbnails_and_the_selected_preview(
    real_db: Path, tmp_path: Path
) -> None:
    config = server_config(real_db, tmp_path, stall_after=1.0)
    identity = await trio.to_thread.run_sync(open_database, config.db)
    parser = OneLineParser(prog="preview_server")
    add_server_options(parser, port=8765)
    front_config = front_door_config(parser, parser.parse_args(["--port", "0"]))  # defaults
    token = front_config.token
    assert token is not None
    assert re.fullmatch(r"[\w-]{32}", token)  # a fresh random one
    server = open_preview_server(config, front_config, identity)
    async with server as (front, app), chromium(tmp_path / "profile") as devtools:
        page = dashboard_page_url(front.url, token) + "&select=4"
        assert page == f"http://127.0.0.1:{front.port}/?token={token}&select=4"
        session = await open_page(devtools, page)
        await devtools.call(
            "Emulation.setDeviceMetricsOverride",
            session,
            width=1200,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )
        body = "document.body.dataset"
        await wait_for(
            devtools,
            session,
            f"{body}.thumbnails === '12' && {body}.preview === '4' && {body}.finished === '12'",
        )
        await wait_until(lambda: app.selected == 4)
        sizes = await devtools.evaluate(
            session,
            "JSON.stringify([...document.querySelectorAll('img.thumb')]"
            ".map(i => [i.naturalWidth, i.naturalHeight]))",
        )
        assert json.loads(sizes) == [[160, 120]] * 12
        preview = await devtools.evaluate(
            session, "document.getElementById('preview').naturalWidth"
        )
        assert preview == 640
        badges = await devtools.evaluate(
            session,
            "JSON.stringify([...document.querySelectorAll('.badge')].map(b => b.textContent))",
        )
        assert json.loads(badges) == [
            *["completed"] * 9, "completed, no data", "completed — ended with an exception",
            "running / incomplete",
        ]  # fmt: skip

        shot = await devtools.call("Page.captureScreenshot", session, format="png")
        data = base64.b64decode(shot["data"])
        (tmp_path / "shot.png").write_bytes(data)
        image = Image.open(io.BytesIO(data)).convert("RGB")
        assert image.size == (1200, 900)
        rects = json.loads(
            await devtools.evaluate(
                session,
                "JSON.stringify([...document.querySelectorAll('img.thumb, #preview')]"
                ".map(i => i.getBoundingClientRect()).filter(r => r.bottom <= innerHeight)"
                ".map(r => [r.left, r.top, r.right, r.bottom]))",
            )
        )
        assert len(rects) >= 5  # the preview and the thumbnails on screen
        for left, top, right, bottom in rects:
            crop = image.crop((int(left), int(top), int(right), int(bottom)))
            spread = ImageStat.Stat(crop).stddev
            assert max(spread) > 20, (left, top, spread)  # drawn, not a blank box

        # Scrolling reports the rows on screen; a click selects another run.
        await devtools.evaluate(session, "document.getElementById('runs').scrollTop = 1e6")
        await wait_until(lambda: 12 in app.visible and 1 not in app.visible)
        await devtools.evaluate(session, "document.querySelector('[data-run=\"9\"]').click()")
        await wait_for(devtools, session, f"{body}.preview === '9'")
        await wait_until(lambda: app.selected == 9)  # the select may still be on its way
        assert await devtools.evaluate(session, f"{body}.errors || '0'") == "0"
        shot = await devtools.call("Page.captureScreenshot", session, format="png")
        (tmp_path / "shot-scrolled.png").write_bytes(base64.b64decode(shot["data"]))
        assert front.statistics().http_requests >= 1
        assert front.statistics().rejected == 0  # the page passed the token on
        # The token left the address bar; a reload still connects (the tab kept it).
        address = f"http://127.0.0.1:{front.port}/?select=4"
        assert await devtools.evaluate(session, "location.href") == address
        await devtools.evaluate(session, "window.before = 1; location.reload()")
        await wait_for(
            devtools, session, f"!window.before && {body}.connected === '1' && {body}.runs === '12'"
        )
        assert await devtools.evaluate(session, "location.href") == address

        # A late client, under another name the server answers to, sees every status.
        late = await open_page(devtools, dashboard_page_url(f"ws://localhost:{front.port}", token))
        await wait_for(devtools, late, f"{body}.thumbnails === '12' && {body}.finished === '12'")
        late_badges = await devtools.evaluate(
            late,
            "JSON.stringify([...document.querySelectorAll('.badge')].map(b => b.textContent))",
        )
        assert json.loads(late_badges) == json.loads(badges)
        # Selecting a run finished before the page came asks its event-log run's result.
        await devtools.evaluate(late, "document.querySelector('[data-run=\"4\"]').click()")
        await wait_for(
            devtools, late, "document.getElementById('facts').textContent.includes('Gate v1 (V)')"
        )
        assert await devtools.evaluate(late, f"{body}.errors || '0'") == "0"
        assert front.statistics().rejected == 0

        # Refused by default: the page as a file (origin "null") and under a rebound name.
        await open_page(devtools, dashboard_url(front.url, token))
        await wait_until(lambda: front.statistics().refusals.get("foreign_origin", 0) >= 1)
        rebound = await open_page(
            devtools, dashboard_page_url(f"ws://{REBOUND}:{front.port}", token)
        )
        text = await wait_for(devtools, rebound, "document.body && document.body.innerText")
        assert text.startswith(f"403 Forbidden: Host '{REBOUND}:{front.port}' is not a loopback")
        assert front.statistics().refusals["foreign_host"] >= 1  # the page (and its icon)
        assert front.statistics().rejected == 1  # the file page's handshake

        # A run being written: the bar shows the points of the note, not the fraction
        # (which also counts the kinds drawn: 249/300/3 would be 28%).
        job = await devtools.evaluate(late, "[...jobs].find(([, run]) => run === 12)[0]")
        await devtools.evaluate(
            late,
            f"onEvent({{seq: 1e9, kind: 'job_progress', run_id: {job}, data: "
            "{fraction: 0.277, note: 'being written: 249 of 300 points'}})",
        )
        width = await devtools.evaluate(
            late, "document.querySelector('[data-run=\"12\"] .bar > div').style.width"
        )
        assert width == "83%"
    assert_no_children()


async def test_a_page_that_cannot_connect_says_why(real_db: Path, tmp_path: Path) -> None:
    # A browser does not show a page why its websocket was refused: the page says it.
    config = server_config(real_db, tmp_path, helpers=1)
    identity = await trio.to_thread.run_sync(open_database, config.db)
    front_config = FrontDoorConfig(port=0, token="right-token-0123456789")
    server = open_preview_server(config, front_config, identity)
    async with server as (front, _app), chromium(tmp_path / "profile") as devtools:
        body = "document.body.dataset"
        text = "document.getElementById('notice').textContent"
        address = f"http://127.0.0.1:{front.port}/?token=…"
        for token, cause in (("wrong-token", "may be from an earlier start"), ("", "no token")):
            page = await open_page(devtools, dashboard_page_url(front.url, token or None))
            await wait_for(devtools, page, f"{body}.notice === 'refused'")
            said = await devtools.evaluate(page, text)
            assert f"the server at ws://127.0.0.1:{front.port} refused the connection" in said
            assert cause in said
            assert (
                f"open the dashboard address the server printed when it started ({address})" in said
            )
            assert await devtools.evaluate(page, f"{body}.connected") == "0"
        refusals = front.statistics().refusals
        assert refusals["wrong_token"] >= 1
        assert refusals["missing_token"] >= 1
        # The right token: no banner; the server going away: the page says so.
        page = await open_page(devtools, dashboard_page_url(front.url, front_config.token))
        await wait_for(devtools, page, f"{body}.connected === '1' && {body}.runs === '12'")
        assert await devtools.evaluate(page, "document.getElementById('notice').hidden")
        assert await devtools.evaluate(page, f"{body}.notice === undefined")
        front.close()
        await wait_for(devtools, page, f"{body}.notice === 'lost'")
        said = await devtools.evaluate(page, text)
        assert said == f"Connection to ws://127.0.0.1:{front.port} lost; reconnecting…"
        assert await devtools.evaluate(page, f"{body}.errors || '0'") == "0"
    assert_no_children()


async def open_page(devtools: DevTools, url: str) -> str:
    """Open ``url`` in a new tab; return its DevTools session."""
    target = await devtools.call("Target.createTarget", url=url)
    return (  # type: ignore[no-any-return]
        await devtools.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)
    )["sessionId"]
