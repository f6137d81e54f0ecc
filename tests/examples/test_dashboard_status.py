"""The dashboard tells a run's status as QCoDeS records it, in a real headless Chromium.

On :mod:`qcodes_statuses`' database (written by QCoDeS itself): the badges, the header
counts, the status filter (exactly the four statuses QCoDeS records), points per
dependent and the bar of planned points, the exception one click away, "no new data
since …" for a run whose writer is long gone; and "follow newest" on a database whose
unfinished run crashed days ago. Screenshots go to ``$PREVIEW_SHOTS`` when it is set.
Skipped when no chromium is installed. Real clock, generous deadlines.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from frontdoor_support import assert_no_children
from preview_support import preview_server, server_config
from test_dashboard import CHROMIUM, chromium, open_page, wait_for, wait_until
from test_dashboard_views import set_control, text_of

from examples.preview.server import dashboard_page_url

if TYPE_CHECKING:
    from test_dashboard import DevTools

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="needs a headless Chromium (apt install chromium)"),
]
TOKEN = "status-token"
BODY = "document.body.dataset"
DAYS_AGO = 3 * 86400.0


def aged_copy(source: Path, target: Path) -> Path:
    """A copy of ``source`` last written three days ago (its writer long gone)."""
    shutil.copyfile(source, target)
    then = time.time() - DAYS_AGO
    os.utime(target, (then, then))
    return target


async def shoot(devtools: DevTools, session: str, name: str, tmp_path: Path) -> None:
    shot = base64.b64decode(
        (await devtools.call("Page.captureScreenshot", session, format="png"))["data"]
    )
    folder = Path(os.environ.get("PREVIEW_SHOTS") or tmp_path)
    (folder / f"{name}.png").write_bytes(shot)


async def test_statuses_counts_filter_points_and_the_exception(
    status_db: Path, tmp_path: Path
) -> None:
    db = aged_copy(status_db, tmp_path / "statuses.db")
    config = server_config(db, tmp_path, stall_after=0.5)
    async with (
        preview_server(config, token=TOKEN) as (front, app),
        chromium(tmp_path / "profile") as devtools,
    ):
        session = await open_page(devtools, dashboard_page_url(front.url, TOKEN))
        await devtools.call("Emulation.setDeviceMetricsOverride", session, width=1400,
                            height=1000, deviceScaleFactor=1, mobile=False)  # fmt: skip
        want = {"completed": 4, "exception": 1, "empty": 1, "incomplete": 1}
        counted = json.dumps(json.dumps(want, separators=(",", ":")))
        await wait_for(
            devtools, session,
            f"{BODY}.runs === '7' && {BODY}.counts === {counted}"
            " && document.querySelector('[data-run=\"5\"] .note').textContent"
            ".startsWith('no new data since')",
        )  # fmt: skip
        # Nothing being written (the unfinished run stopped days ago): no following.
        assert await devtools.evaluate(session, f"{BODY}.follow") == "0"
        badges = json.loads(await devtools.evaluate(
            session, "JSON.stringify([...document.querySelectorAll('.run')].map(r =>"
            " [r.dataset.run, r.querySelector('.badge').textContent]))",
        ))  # fmt: skip
        assert badges == [
            ["1", "completed"], ["2", "completed"],
            ["3", "completed — ended with an exception"], ["4", "completed, no data"],
            ["5", "running / incomplete"], ["6", "completed"], ["7", "completed"],
        ]  # fmt: skip
        header = await text_of(devtools, session, "counts")
        assert header.startswith(
            "7 runs · 4 completed · 1 completed — ended with an exception · 1 completed, no data"
            " · 1 running / incomplete"
        )
        assert "finished" not in header
        note = await devtools.evaluate(
            session, "document.querySelector('[data-run=\"5\"] .note').textContent"
        )
        assert note.endswith("(3 days ago)")

        # Points per dependent, never SQLite rows; the bar: points of the declared shape.
        def row(run: int, part: str) -> str:
            return f"document.querySelector('[data-run=\"{run}\"] {part}')"

        assert "a 200, b 200, c 20 points" in await devtools.evaluate(
            session, row(6, ".sub") + ".textContent"
        )
        assert "420" not in await devtools.evaluate(session, row(6, ".sub") + ".textContent")
        assert "623 of 1440 points" in await devtools.evaluate(
            session, row(2, ".sub") + ".textContent"
        )
        widths = {
            run: await devtools.evaluate(session, row(run, ".bar > div") + ".style.width")
            for run in (1, 2, 3, 4, 5, 7)
        }
        assert widths == {1: "67%", 2: "43%", 3: "25%", 4: "0%", 5: "40%", 7: "100%"}

        # The filter offers exactly the four statuses.
        options = json.loads(await devtools.evaluate(
            session, "JSON.stringify([...document.getElementById('fstatus').options]"
            ".map(o => [o.value, o.textContent]))",
        ))  # fmt: skip
        assert options == [
            ["", "any status"], ["completed", "completed"],
            ["exception", "completed — ended with an exception"],
            ["empty", "completed, no data"], ["incomplete", "running / incomplete"],
        ]  # fmt: skip
        for value, order in (("completed", "1,2,6,7"), ("exception", "3"), ("empty", "4"),
                             ("incomplete", "5"), ("", "1,2,3,4,5,6,7")):  # fmt: skip
            await set_control(devtools, session, "fstatus", value)
            await wait_for(devtools, session, f"{BODY}.order === '{order}'")
        await shoot(devtools, session, "status-list", tmp_path)

        # The run that raised: its exception one click away, under the title.
        await devtools.evaluate(session, row(3, "") + ".click()")
        await wait_for(devtools, session, f"{BODY}.details === '3'")
        await wait_for(devtools, session, "!document.getElementById('exception').hidden")
        summary = await devtools.evaluate(
            session, "document.querySelector('#exception summary').textContent"
        )
        assert summary == (
            "The measurement ended with an exception: RuntimeError: lock-in overload at point 50"
        )
        assert (
            await devtools.evaluate(session, "document.getElementById('exception').open") is False
        )
        await devtools.evaluate(session, "document.querySelector('#exception summary').click()")
        assert await devtools.evaluate(session, "document.getElementById('exception').open")
        traceback = await devtools.evaluate(
            session, "document.querySelector('#exception pre').innerText"
        )
        assert traceback.startswith("Traceback")
        facts = await text_of(devtools, session, "facts")
        assert "completed — ended with an exception" in facts
        assert "signal: 50 of 200 planned (25%)" in facts
        assert "50 (QCoDeS number_of_results)" in facts
        await shoot(devtools, session, "status-exception", tmp_path)

        # A completed run with fewer points than declared: no exception, no "interrupted".
        await devtools.evaluate(session, row(2, "") + ".click()")
        await wait_for(devtools, session, f"{BODY}.details === '2'")
        assert await devtools.evaluate(session, "document.getElementById('exception').hidden")
        facts = await text_of(devtools, session, "facts")
        assert "statuscompleted" in facts.replace("\n", "")
        assert "current: 623 of 1440 planned (43%)" in facts
        await wait_until(lambda: app.selected == 2)

        # The unfinished run: how long nothing came.
        await devtools.evaluate(session, row(5, "") + ".click()")
        await wait_for(devtools, session, f"{BODY}.details === '5'")
        facts = await text_of(devtools, session, "facts")
        assert "running / incomplete · no new data since" in facts
        await shoot(devtools, session, "status-incomplete", tmp_path)
        assert await devtools.evaluate(session, f"{BODY}.errors || '0'") == "0"
    assert_no_children()


async def test_follow_newest_skips_a_run_that_crashed_long_ago(
    real_db: Path, tmp_path: Path
) -> None:
    # Run 12 of the sample was never completed; its file was last written days ago.
    db = aged_copy(real_db, tmp_path / "crashed.db")
    config = server_config(db, tmp_path)
    async with (
        preview_server(config, token=TOKEN) as (front, app),
        chromium(tmp_path / "profile") as devtools,
    ):
        page = await open_page(devtools, dashboard_page_url(front.url, TOKEN))
        await wait_for(devtools, page, f"{BODY}.runs === '12'")
        assert await devtools.evaluate(page, f"{BODY}.follow") == "0"
        assert await devtools.evaluate(page, "selected") is None
        # Asked to follow: it opens on the newest completed run, not the crashed one.
        following = await open_page(devtools, dashboard_page_url(front.url, TOKEN) + "&follow=1")
        await wait_for(devtools, following, f"{BODY}.runs === '12' && {BODY}.follow === '1'")
        await wait_until(lambda: app.selected == 11)
        assert await devtools.evaluate(following, "selected") == 11
    assert_no_children()
