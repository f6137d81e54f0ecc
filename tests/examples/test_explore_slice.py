"""The explore view of a run with four sweep dimensions follows the slice picked above it,
and its axes read in SI prefixes (``GHz``, never ``6.1e+9``).

Run 7 of :mod:`qcodes_statuses` (written by QCoDeS): v(w, z, y, x) with 2 x 3 slices of
20 x 30, ``v = 100 w + 10 z + y (f - 6.1 GHz) / 100 MHz``, so each slice's values say
which slice they are. The helper-level test checks ``run_data``'s slice; the browser test
picks slices in the dashboard. Skipped without QCoDeS or Chromium.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from frontdoor_support import assert_no_children as _no_children
from preview_support import preview_server, server_config
from test_dashboard import CHROMIUM, chromium, wait_until
from test_explore import TOKEN, _open, _ticks, _titles

from examples.preview.child.qcodes.source import open_source
from examples.preview.child.run_data import run_data
from examples.preview.server import dashboard_page_url

FOUR_D = 7


def _values_of(answer: dict) -> list[float]:
    return [v for v in answer["series"][0]["values"] if v is not None]


def test_run_data_gives_the_slice_asked_for(status_db) -> None:
    with open_source(status_db) as source:
        summary, series = source.read_series(FOUR_D)

    def data(slice_index: int | None) -> dict:
        return run_data(summary, series, buckets=100, side=64, max_bytes=1 << 20,
                        check_cancel=lambda: None, slice_index=slice_index)  # fmt: skip

    newest = data(None)["series"][0]
    assert (newest["slice"], newest["slice_count"]) == (5, 6)
    assert newest["slice_label"] == "w = 2 K, z = 1 T · slice 6 of 6"
    first = data(0)
    entry = first["series"][0]
    assert (entry["slice"], entry["slice_count"], entry["shape"]) == (0, 6, [20, 30])
    assert entry["slice_label"] == "w = 1 K, z = 0 T · slice 1 of 6"
    assert 100 <= min(_values_of(first)) <= max(_values_of(first)) <= 101
    third = data(2)
    assert 110 <= min(_values_of(third)) <= max(_values_of(third)) <= 111  # w = 1 K, z = 1 T
    assert data(99)["series"][0]["slice"] == 5  # past the last: the last


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="needs a headless Chromium (apt install chromium)")
async def test_explore_shows_and_labels_the_picked_slice(status_db, tmp_path) -> None:
    config = server_config(status_db, tmp_path, helpers=2)
    async with (
        preview_server(config, token=TOKEN) as (front, app),
        chromium(tmp_path / "profile") as devtools,
    ):
        page = await _open(devtools, dashboard_page_url(front.url, TOKEN) + f"&select={FOUR_D}")
        await wait_until(lambda: app.selected == FOUR_D)
        # Unpicked: the newest slice, named.
        await page.wait(f"(document.body.dataset.explore || '').startsWith('{FOUR_D}:0:')")
        assert await page.js("document.body.dataset.exploreSlice") == "5"
        info = await page.js("document.getElementById('xinfo').textContent")
        assert info.endswith("w = 2 K, z = 1 T · slice 6 of 6"), info
        # Picked in the slice picker: the explore view shows that slice.
        await page.wait("!document.getElementById('sliceblock').hidden")
        await page.js("(() => { const e = document.getElementById('slice'); e.value = '0';"
                      " e.dispatchEvent(new Event('input')); })()")  # fmt: skip
        await page.wait("document.body.dataset.exploreSlice === '0'")
        info = await page.js("document.getElementById('xinfo').textContent")
        assert info.endswith("w = 1 K, z = 0 T · slice 1 of 6"), info
        values = await page.json("explore.data.series[0].values.filter((v) => v !== null)")
        assert 100 <= min(values) <= max(values) <= 101
        # Hover and line cuts come from that slice.
        await page.js("document.getElementById('explore').scrollIntoView()")
        x, y = await page.at(6.15e9, 0.5)
        hover = await page.hover(x, y)
        assert 100 <= hover["z"] <= 101
        await page.click(x, y)
        await page.wait("document.body.dataset.cut !== undefined")
        cut = await page.json("explore.cuts.h.y.filter((v) => v !== null)")
        assert 100 <= min(cut) <= max(cut) <= 101
        # The frequency axis in GHz, every tick its value, none in exponent notation.
        frequency, _outer = await _ticks(page, "explore.plot")
        assert (await _titles(page, "explore.plot"))[0] == "frequency (GHz)"
        assert all("e" not in label for label, _ in frequency)
        for label, value in frequency:
            assert float(label) == pytest.approx(value, rel=1e-6)
        assert len({label for label, _ in frequency}) == len(frequency) >= 3
        # The next slice: 2 of 6 (w = 1 K, z = 0.5 T).
        await page.js("document.getElementById('slicenext').click()")
        await page.wait("document.body.dataset.exploreSlice === '1'")
        values = await page.json("explore.data.series[0].values.filter((v) => v !== null)")
        assert 105 <= min(values) <= max(values) <= 106
        # The readout of the slice before is gone; a hover reads the slice now shown.
        assert not (await page.js("document.getElementById('xreadout').textContent")).strip()
        x, y = await page.at(6.12e9, 0.25)
        assert 105 <= (await page.hover(x, y))["z"] <= 106
        readout = await page.js("document.getElementById('xreadout').textContent")
        assert float(readout.rsplit("v = ", 1)[1].split()[0]) == pytest.approx(105.1, abs=0.2)
        await page.screenshot(
            Path(os.environ.get("PREVIEW_SHOTS") or tmp_path) / "explore-slice.png"
        )
        assert await page.js("document.body.dataset.errors || '0'") == "0"
    _no_children()
