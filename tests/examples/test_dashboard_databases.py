"""The dashboard of a folder of databases in a real headless Chromium (design §7.5, §7.6).

The preview server runs in this process on a folder holding two copies of the real
sample, with the front door a default command-line start makes (a fresh token). The page
shows a database picker; its images are ``<img>`` elements loaded by URL. The test
checks that a reload takes every image from the browser's cache or a 304 (the server's
count of 200 answers does not move), that an image URL without the token is refused
(403, from the page itself), that choosing the other database shows its runs and
images, and that a file copied into the folder while the page is open appears in the
picker. Skipped when no chromium is installed. Real clock, generous deadlines.
"""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING

import trio
from frontdoor_support import assert_no_children
from preview_support import server_config
from test_dashboard import chromium, open_page, pytestmark, wait_for

from examples.preview.app.image_urls import database_id
from examples.preview.app.preview_app import open_database
from examples.preview.server import dashboard_page_url, open_preview_server
from examples.web.cli import OneLineParser
from examples.web.launch import add_server_options, front_door_config

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["pytestmark"]  # the browser marker and the skip, as in test_dashboard

BODY = "document.body.dataset"


async def test_the_picker_switches_databases_and_images_are_cached(
    real_db: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    first = shutil.copyfile(real_db, folder / "a_cooldown.db")
    second = shutil.copyfile(real_db, folder / "b_warmup.db")
    config = server_config(first, tmp_path, helpers=1, stall_after=1.0, scan_interval=0.2)
    identity = await trio.to_thread.run_sync(open_database, config.db)
    parser = OneLineParser(prog="preview_server")
    add_server_options(parser, port=8765)
    front_config = front_door_config(parser, parser.parse_args(["--port", "0"]))
    token = front_config.token
    assert token is not None
    server = open_preview_server(config, front_config, identity, paths=[folder])
    async with server as (front, _app), chromium(tmp_path / "profile") as devtools:
        session = await open_page(devtools, dashboard_page_url(front.url, token))
        await wait_for(
            devtools, session,
            f"{BODY}.databases === '2' && {BODY}.thumbnails === '12' && {BODY}.finished === '12'",
        )  # fmt: skip
        options = json.loads(await devtools.evaluate(
            session, "JSON.stringify([...document.querySelectorAll('#db option')]"
            ".map(o => [o.value, o.textContent]))",
        ))  # fmt: skip
        assert options == [
            [database_id(first), "a_cooldown.db (12 runs)"],
            [database_id(second), "b_warmup.db (12 runs)"],
        ]
        assert await devtools.evaluate(session, "document.getElementById('db').hidden") is False
        src = await devtools.evaluate(session, "document.querySelector('img.thumb').src")
        assert src.startswith(f"http://127.0.0.1:{front.port}/db/{database_id(first)}/runs/")

        # A reload takes every image from the cache (or a 304): no image is sent again.
        sent = front.statistics().route_answers.get("200", 0)
        assert sent >= 12
        await devtools.evaluate(session, "window.before = 1; location.reload()")
        await wait_for(devtools, session, f"!window.before && {BODY}.thumbnails === '12'")
        assert front.statistics().route_answers.get("200", 0) == sent

        # Without the token an image URL is refused, also for the page itself.
        refused_before = front.statistics().refusals.get("missing_token", 0)
        bare = src.split("&token=")[0]
        loaded = await devtools.call(
            "Runtime.evaluate", session, awaitPromise=True, returnByValue=True,
            expression="new Promise((done) => { const i = new Image(); "
            "i.onload = () => done('loaded'); i.onerror = () => done('refused'); "
            f"i.src = {json.dumps(bare + '&again=1')}; }})",
        )  # fmt: skip
        assert loaded["result"]["value"] == "refused"
        assert front.statistics().refusals["missing_token"] == refused_before + 1

        # The picker switches to the other database: its runs, its images.
        await devtools.evaluate(
            session,
            f"const s = document.getElementById('db'); s.value = '{database_id(second)}';"
            "s.dispatchEvent(new Event('change'))",
        )
        await wait_for(
            devtools, session,
            f"{BODY}.database === '{database_id(second)}' && {BODY}.thumbnails === '12'",
        )  # fmt: skip
        src = await devtools.evaluate(session, "document.querySelector('img.thumb').src")
        assert f"/db/{database_id(second)}/runs/" in src

        # A file copied into the folder while the page is open appears in the picker.
        shutil.copyfile(real_db, folder / "c_new.part")
        (folder / "c_new.part").rename(folder / "c_new.db")
        await wait_for(devtools, session, f"{BODY}.databases === '3'")
        names = await devtools.evaluate(
            session, "[...document.querySelectorAll('#db option')].map(o => o.textContent).join()"
        )
        assert "c_new.db (12 runs)" in names
        assert await devtools.evaluate(session, f"{BODY}.errors || '0'") == "0"
    assert_no_children()
