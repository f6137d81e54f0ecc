"""Overlay, export and stars in the dashboard, in a real headless Chromium.

On a copy of the real sample: runs 1, 11 and 12 all sweep ``dmm_v1`` against
``dac_gate1`` (200, 73 and 120 points). Overlaid in the explore view they get one colour
each and a legend naming run id and name; the export buttons save what the plot shows
as CSV and NumPy ``.npz`` (read back here with numpy); stars and notes go to a file
beside the database, and the QCoDeS file is left byte for byte as it was. Skipped when
no chromium is installed. Real clock, generous deadlines.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
import trio
from frontdoor_support import TIMEOUT, assert_no_children
from preview_support import connect, preview_server, server_config
from test_dashboard import CHROMIUM, chromium, open_page, wait_for
from test_dashboard_views import set_control

from examples.preview.app.annotations import notes_path
from examples.preview.server import dashboard_page_url

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="needs a headless Chromium (apt install chromium)"),
]
TOKEN = "overlay-token"
BODY = "document.body.dataset"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def _saved(folder: Path, name: str) -> Path:
    """The file the browser downloaded into ``folder`` (waits for it to be complete)."""
    target = folder / name
    with trio.fail_after(TIMEOUT):
        while not target.exists() or any(  # noqa: ASYNC110
            name.endswith(".crdownload") for name in os.listdir(folder)
        ):
            await trio.sleep(0.05)  # a file another process writes: polling it is the test
    return target


async def test_overlay_export_and_stars(writable_db: Path, tmp_path: Path) -> None:
    before = _digest(writable_db)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    shots = Path(os.environ.get("PREVIEW_SHOTS") or tmp_path)
    config = server_config(writable_db, tmp_path, stall_after=1.0)
    async with (
        preview_server(config, token=TOKEN) as (front, app),
        chromium(tmp_path / "profile") as devtools,
    ):
        await devtools.call("Browser.setDownloadBehavior", behavior="allow",
                            downloadPath=str(downloads))  # fmt: skip
        page = await open_page(devtools, dashboard_page_url(front.url, TOKEN) + "&select=1")
        await devtools.call("Emulation.setDeviceMetricsOverride", page, width=1400,
                            height=1100, deviceScaleFactor=1, mobile=False)  # fmt: skip
        await wait_for(devtools, page, f"(({BODY}.explore) || '').startsWith('1:0:')")

        # Overlay runs 11 and 12 on run 1: one colour each, a legend naming them.
        for run in (11, 12):
            await devtools.evaluate(
                page, f"document.querySelector('[data-run=\"{run}\"] .overlay').click()"
            )
        await wait_for(devtools, page, "explore.plot && explore.plot.series.length === 4")
        labels = json.loads(await devtools.evaluate(
            page,
            "JSON.stringify(explore.plot.series.slice(1)"
            ".map(s => [s.label, s._stroke || s.stroke()]))",
        ))  # fmt: skip
        assert [label for label, _ in labels] == [
            "#1 sine_sweep", "#11 aborted_exception", "#12 crashed_incomplete"
        ]  # fmt: skip
        assert len({colour for _, colour in labels}) == 3
        legend = await devtools.evaluate(
            page, "document.querySelector('#xplot .u-legend').innerText"
        )
        for words in ("#1 sine_sweep", "#11 aborted_exception", "#12 crashed_incomplete"):
            assert words in legend
        assert await devtools.evaluate(page, f"{BODY}.overlays") == "11,12"
        await devtools.evaluate(page, "document.getElementById('explore').scrollIntoView()")
        shot = await devtools.call("Page.captureScreenshot", page, format="png")
        (shots / "overlay.png").write_bytes(base64.b64decode(shot["data"]))

        # Export what the plot shows: CSV, then .npz, read back.
        await devtools.evaluate(page, "document.getElementById('xcsv').click()")
        text = (await _saved(downloads, "run1-dmm_v1-overlay.csv")).read_text()
        rows = list(csv.reader(text.splitlines()))
        assert rows[0] == ["run", "dac_gate1 (V)", "dmm_v1 (V)"]
        counts = {run: sum(1 for row in rows[1:] if row[0] == run) for run in ("1", "11", "12")}
        assert counts == {"1": 200, "11": 73, "12": 120}
        await devtools.evaluate(page, "document.getElementById('xnpz').click()")
        with np.load(await _saved(downloads, "run1-dmm_v1-overlay.npz")) as npz:
            assert sorted(npz.files) == ["labels", "names", "run", "units", "x", "y"]
            assert npz["names"].tolist() == ["dac_gate1", "dmm_v1"]
            assert npz["units"].tolist() == ["V", "V"]
            assert npz["x"].dtype == np.float64
            assert npz["run"].tolist() == [float(row[0]) for row in rows[1:]]
            np.testing.assert_allclose(npz["x"], [float(r[1]) for r in rows[1:]], rtol=1e-12)
            np.testing.assert_allclose(npz["y"], [float(r[2]) for r in rows[1:]], rtol=1e-12)
            own = npz["run"] == 1
            assert -1 <= npz["x"][own].min() < npz["x"][own].max() <= 1

        # A map: its grid, as shown.
        for run in (11, 12):  # overlays off
            await devtools.evaluate(
                page, f"document.querySelector('[data-run=\"{run}\"] .overlay').click()"
            )
        await devtools.evaluate(page, "document.querySelector('[data-run=\"4\"]').click()")
        await wait_for(devtools, page, f"(({BODY}.explore) || '').startsWith('4:0:')")
        await devtools.evaluate(page, "document.getElementById('xnpz').click()")
        with np.load(await _saved(downloads, "run4-dmm_v1.npz")) as npz:
            assert npz["z"].shape == (40, 60)
            assert (npz["x"].shape, npz["y"].shape) == ((60,), (40,))
            assert npz["names"].tolist() == ["dac_gate1", "dac_gate2", "dmm_v1"]

        # Stars and a note: beside the database, never in it.
        await devtools.evaluate(page, "document.querySelector('[data-run=\"4\"] .star').click()")
        await wait_for(
            devtools, page, "document.querySelector('[data-run=\"4\"]').dataset.starred === '1'"
        )
        await set_control(devtools, page, "usernote", "best map of the day")
        await wait_for(devtools, page, "document.querySelector('[data-run=\"4\"] .usernote')"
                                       ".textContent === 'best map of the day'")  # fmt: skip
        await devtools.evaluate(page, "document.getElementById('starred').click()")
        await wait_for(devtools, page, f"{BODY}.order === '4'")
        shot = await devtools.call("Page.captureScreenshot", page, format="png")
        (shots / "starred.png").write_bytes(base64.b64decode(shot["data"]))
        notes = json.loads(notes_path(writable_db).read_text())
        guid = app._table.runs[4].guid
        assert notes["runs"] == {
            guid: {"run_id": 4, "starred": True, "note": "best map of the day"}
        }
        await devtools.evaluate(page, "document.getElementById('starred').click()")
        await wait_for(devtools, page, f"{BODY}.order === '1,2,3,4,5,6,7,8,9,10,11,12'")
        assert await devtools.evaluate(page, f"{BODY}.errors || '0'") == "0"
    assert _digest(writable_db) == before  # the QCoDeS file as it was

    # Another start of the server reads them back.
    async with preview_server(config, token=TOKEN) as (front, _app):
        async with connect(front, token=TOKEN) as client:
            runs = {r["run_id"]: r for r in (await client.request("list_runs"))["runs"]}
        assert (runs[4]["starred"], runs[4]["note"]) == (True, "best map of the day")
        assert not any(runs[k]["starred"] for k in runs if k != 4)
    assert_no_children()
