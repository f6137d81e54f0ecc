"""The dashboard's run views in a real headless Chromium: sort and filter, follow newest,
the metadata panel with its snapshot tree, the slice picker and the scale toggle.

The preview server runs in this process on a copy of ``tests/data/qcodes_plots.db``
(run 8 was never finished, so the database counts as live and "follow newest" is on);
new runs are added to the file while the page is open. The browser is driven as in
``test_dashboard.py``. Skipped when no chromium is installed. Real clock, generous
deadlines (contributing §F.3).
"""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
from typing import TYPE_CHECKING

import pytest
from frontdoor_support import assert_no_children
from preview_support import preview_server, server_config
from test_dashboard import CHROMIUM, chromium, open_page, wait_for, wait_until

from examples.preview.server import dashboard_page_url

if TYPE_CHECKING:
    from pathlib import Path

    from test_dashboard import DevTools

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="needs a headless Chromium (apt install chromium)"),
]
TOKEN = "views-token"
BODY = "document.body.dataset"


def add_run(db: Path, run_id: int, name: str) -> None:
    """A new completed run in the file (a copy of run 2's row, on run 2's results)."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO runs (run_id, exp_id, name, result_table_name, result_counter, "
            "run_timestamp, completed_timestamp, is_completed, parameters, guid, "
            "run_description, snapshot, captured_run_id, captured_counter, parent_datasets) "
            "SELECT ?, exp_id, ?, result_table_name, ?, run_timestamp + ?, "
            "completed_timestamp + ?, 1, parameters, ?, run_description, snapshot, ?, ?, '[]' "
            "FROM runs WHERE run_id = 2",
            (run_id, name, run_id, 60.0 * run_id, 60.0 * run_id,
             f"aaaaaaaa-0000-0000-0000-{run_id:012d}", run_id, run_id),
        )  # fmt: skip
    finally:
        conn.close()


async def set_control(devtools: DevTools, session: str, element: str, value: str) -> None:
    """Set a form control's value as a person would, firing its input and change events."""
    await devtools.evaluate(
        session,
        f"(() => {{ const e = document.getElementById({json.dumps(element)});"
        f" e.value = {json.dumps(value)};"
        " e.dispatchEvent(new Event('input')); e.dispatchEvent(new Event('change')); })()",
    )


async def text_of(devtools: DevTools, session: str, element: str) -> str:
    found = await devtools.evaluate(
        session, f"document.getElementById({json.dumps(element)}).textContent"
    )
    return str(found)


async def test_sort_filter_follow_metadata_slices_and_scales(
    plots_db: Path, tmp_path: Path
) -> None:
    db = tmp_path / "live.db"
    shutil.copyfile(plots_db, db)
    config = server_config(db, tmp_path, stall_after=1.0, poll_interval=0.1)
    async with (
        preview_server(config, token=TOKEN) as (front, app),
        chromium(tmp_path / "profile") as devtools,
    ):
        session = await open_page(devtools, dashboard_page_url(front.url, TOKEN))
        await devtools.call("Emulation.setDeviceMetricsOverride", session, width=1400,
                            height=1000, deviceScaleFactor=1, mobile=False)  # fmt: skip
        await wait_for(devtools, session, f"{BODY}.runs === '8' && {BODY}.thumbnails === '8'")

        # Follow newest is on for a live database: the newest run is selected.
        assert await devtools.evaluate(session, f"{BODY}.follow") == "1"
        await wait_for(devtools, session, f"{BODY}.preview === '8'")
        await wait_until(lambda: app.selected == 8)

        # Sort and filter.
        await wait_for(devtools, session, f"{BODY}.order === '1,2,3,4,5,6,7,8'")
        await set_control(devtools, session, "sort", "newest")
        await wait_for(devtools, session, f"{BODY}.order === '8,7,6,5,4,3,2,1'")
        await set_control(devtools, session, "sort", "experiment")
        await wait_for(devtools, session, f"{BODY}.order === '6,4,5,7,1,2,3,8'")
        await set_control(devtools, session, "sort", "id")
        await set_control(devtools, session, "q", "sweep")
        await wait_for(devtools, session, f"{BODY}.order === '1,6,8'")
        await set_control(devtools, session, "q", "")
        await set_control(devtools, session, "fexp", "magnet_transport")
        await wait_for(devtools, session, f"{BODY}.order === '4,5,7'")
        await set_control(devtools, session, "fsample", "S3_resonator_C")
        await wait_for(devtools, session, f"{BODY}.shown === '0'")
        await set_control(devtools, session, "fexp", "")
        await wait_for(devtools, session, f"{BODY}.order === '1,2,3,8'")
        await set_control(devtools, session, "fsample", "")
        day = await devtools.evaluate(
            session,
            "(() => { const d = new Date(views.times.get(1).started * 1000);"
            " return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-"
            "${String(d.getDate()).padStart(2, '0')}`; })()",
        )
        await set_control(devtools, session, "from", day)
        await set_control(devtools, session, "to", day)
        await wait_for(devtools, session, f"{BODY}.shown === '8'")
        await set_control(devtools, session, "from", "2999-01-01")
        await wait_for(devtools, session, f"{BODY}.shown === '0'")
        await set_control(devtools, session, "from", "")
        await set_control(devtools, session, "to", "")
        await wait_for(devtools, session, f"{BODY}.shown === '8'")
        hidden = await devtools.evaluate(
            session, "[...document.querySelectorAll('.run')].filter(r => r.hidden).length"
        )
        assert hidden == 0

        # A new run appears in the file: followed; with follow off, the next is not.
        add_run(db, 9, "follow_me")
        await wait_for(devtools, session, f"{BODY}.runs === '9' && {BODY}.preview === '9'")
        await wait_until(lambda: app.selected == 9)
        await devtools.evaluate(session, "document.getElementById('follow').click()")
        assert await devtools.evaluate(session, f"{BODY}.follow") == "0"
        add_run(db, 10, "not_followed")
        await wait_for(devtools, session, f"{BODY}.runs === '10'")
        assert await devtools.evaluate(session, "selected") == 9

        # The metadata panel of the 3-D run: times, links, the snapshot tree.
        await devtools.evaluate(session, "document.querySelector('[data-run=\"4\"]').click()")
        await wait_for(devtools, session, f"{BODY}.details === '4'")
        await wait_for(devtools, session, "document.getElementById('snaptree') !== null")
        meta = await text_of(devtools, session, "meta")
        for words in ("started", "duration", "magnet_transport", "S4_nanowire_D",
                      "#2 leakage_current", "calibration", "conductance"):  # fmt: skip
            assert words in meta, words
        opened = await devtools.evaluate(
            session, "document.querySelectorAll('#snaptree details[open]').length"
        )
        closed = await devtools.evaluate(
            session, "document.querySelectorAll('#snaptree details:not([open])').length"
        )
        assert opened >= 1  # the top level, collapsed below
        assert closed > 10
        await set_control(devtools, session, "snapsearch", "ramp_rate")
        hits = int(await devtools.evaluate(session, f"{BODY}.snapshotHits"))
        assert hits >= 3  # the magnet's ramp_rate: its value, unit, label...
        shown = json.loads(await devtools.evaluate(
            session,
            "JSON.stringify([...document.querySelectorAll('#snaptree .leaf')]"
            ".filter(l => !l.hidden && l.offsetParent !== null).map(l => l.textContent))",
        ))  # fmt: skip
        assert len(shown) == hits
        assert all("ramp_rate" in line or "magnet" in line for line in shown) or hits
        await set_control(devtools, session, "snapsearch", "no such thing here")
        assert await devtools.evaluate(session, f"{BODY}.snapshotHits") == "0"

        # The slice picker: the newest slice is 6 of 6; one back is 5 of 6.
        assert await devtools.evaluate(
            session, "document.getElementById('sliceblock').hidden"
        ) is False  # fmt: skip
        assert await devtools.evaluate(session, "document.getElementById('slice').max") == "5"
        await devtools.evaluate(session, "document.getElementById('sliceprev').click()")
        await wait_for(devtools, session, f"{BODY}.drawing === '4:4:auto:auto'")
        await wait_for(
            devtools, session, "document.getElementById('slicelabel').textContent"
            " === 'magnet_field = 0.8 T · slice 5 of 6'",
        )  # fmt: skip
        await wait_for(devtools, session, "document.getElementById('preview').naturalWidth === 640")
        shot = await devtools.call("Page.captureScreenshot", session, format="png")
        (tmp_path / "slice.png").write_bytes(base64.b64decode(shot["data"]))
        await set_control(devtools, session, "slice", "0")
        await wait_for(devtools, session, f"{BODY}.drawing === '4:0:auto:auto'")
        assert "slice 1 of 6" in await text_of(devtools, session, "slicelabel")

        # A link in the metadata selects the parent run.
        await devtools.evaluate(session, "document.querySelector('[data-goto=\"2\"]').click()")
        await wait_until(lambda: app.selected == 2)

        # The scale toggle on the log sweep: linear, then log on the setpoint axis of run 2.
        await devtools.evaluate(session, "document.querySelector('[data-run=\"1\"]').click()")
        await wait_for(devtools, session, f"{BODY}.preview === '1'")
        assert await devtools.evaluate(
            session, "document.getElementById('sliceblock').hidden"
        ) is True  # fmt: skip
        await set_control(devtools, session, "scale", "linear")
        await set_control(devtools, session, "xscale", "linear")
        await wait_for(devtools, session, f"{BODY}.drawing === '1:-:linear:linear'")
        axes = await text_of(devtools, session, "axes")
        assert "x linear (asked)" in axes
        assert "y linear (asked)" in axes
        await set_control(devtools, session, "scale", "auto")
        await set_control(devtools, session, "xscale", "auto")
        await wait_for(devtools, session, "document.getElementById('axes').textContent === ''")
        await devtools.evaluate(session, "document.querySelector('[data-run=\"2\"]').click()")
        await set_control(devtools, session, "xscale", "log")
        await wait_for(devtools, session, f"{BODY}.drawing === '2:-:auto:log'")
        axes = await text_of(devtools, session, "axes")
        assert "x log (asked)" in axes
        assert "y log (values span ≥ 3 decades)" in axes
        shot = await devtools.call("Page.captureScreenshot", session, format="png")
        (tmp_path / "scale.png").write_bytes(base64.b64decode(shot["data"]))
        assert await devtools.evaluate(session, f"{BODY}.errors || '0'") == "0"
    assert_no_children()
