"""Exploring the selected run in a real headless Chromium (design §7.7).

The preview server runs in this process on the sample database plus runs with known
values (:mod:`explore_support`); Chromium loads the dashboard from the server (which
also serves uPlot and ``explore.js``), driven over the DevTools protocol with real
mouse events (:mod:`test_dashboard`'s driver). Checked: a 400 000-point trace shows its
one-sample spike at its true height; a drag zooms (the plot's scale is read back from
the page), the readout under the cursor gives the value of the known point there, and a
double-click shows the whole run again; on a 2-D map the readout gives both setpoints
and the value with their names and units, a box drag zooms both axes, and a click draws
the horizontal and vertical cuts through the cell with the map's exact values; the
tick labels of nA and µS values in SI units (A, S) read as the values they mark; a
newer answer keeps a zoom but shows a whole run whole again. Skipped
without chromium. Real clock, generous deadlines (contributing §F.3).
"""

from __future__ import annotations

import base64
import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio
from explore_support import (
    MAP_COLUMNS,
    MAP_ROWS,
    MAP_RUN,
    SPIKE_INDEX,
    SPIKE_POINTS,
    SPIKE_RUN,
    SPIKE_VALUE,
    explore_database,
    spike_trace,
)
from frontdoor_support import assert_no_children
from preview_support import preview_server, server_config
from test_dashboard import CHROMIUM, DevTools, chromium, open_page, wait_for

from examples.preview.server import dashboard_page_url

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from examples.preview.app.config import PreviewConfig

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="needs a headless Chromium (apt install chromium)"),
]
TOKEN = "explore-token-0123456789abcdef"
#: Pixels a position read back from the page may be off by (rounding to device pixels).
SLACK_PX = 1.5


@pytest.fixture(scope="module")
def explore_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return explore_database(tmp_path_factory.mktemp("explore") / "explore.db")


class Page:
    """One tab of the dashboard: evaluate, and mouse events at page coordinates."""

    def __init__(self, devtools: DevTools, session: str) -> None:
        self.devtools = devtools
        self.session = session

    async def js(self, expression: str) -> Any:
        return await self.devtools.evaluate(self.session, expression)

    async def json(self, expression: str) -> Any:
        return json.loads(await self.js(f"JSON.stringify({expression})"))

    async def wait(self, expression: str) -> Any:
        return await wait_for(self.devtools, self.session, expression)

    async def mouse(self, kind: str, x: float, y: float, **fields: Any) -> None:
        await self.devtools.call(
            "Input.dispatchMouseEvent", self.session, type=kind, x=x, y=y, **fields
        )

    async def drag(self, start: tuple[float, float], end: tuple[float, float]) -> None:
        await self.mouse("mouseMoved", *start)
        await self.mouse("mousePressed", *start, button="left", buttons=1, clickCount=1)
        for step in range(1, 6):  # a few moves, as a hand makes them
            x = start[0] + (end[0] - start[0]) * step / 5
            y = start[1] + (end[1] - start[1]) * step / 5
            await self.mouse("mouseMoved", x, y, button="left", buttons=1)
        # uPlot follows the mouse once per frame: release once its box covers the drag.
        await self.wait(f"Math.abs(explore.plot.select.width - {abs(end[0] - start[0])}) < 2")
        await self.mouse("mouseReleased", *end, button="left", buttons=0, clickCount=1)

    async def click(self, x: float, y: float, count: int = 1) -> None:
        await self.mouse("mouseMoved", x, y)
        for n in range(1, count + 1):
            await self.mouse("mousePressed", x, y, button="left", buttons=1, clickCount=n)
            await self.mouse("mouseReleased", x, y, button="left", buttons=0, clickCount=n)

    async def hover(self, x: float, y: float) -> Any:
        """Move the mouse to (x, y); once the plot's cursor is there, its readout state."""
        await self.mouse("mouseMoved", x, y)
        await self.wait(
            "(() => { const u = explore.plot, r = u.over.getBoundingClientRect();"
            f" return Math.abs(u.cursor.left - ({x} - r.left)) < 1"
            f" && Math.abs(u.cursor.top - ({y} - r.top)) < 1; }})()"
        )
        return await self.json("explore.hover")

    async def zoom_x(self, left: float, right: float, y: float) -> tuple[list[float], float]:
        """Drag from ``left`` to ``right`` (page x) at height ``y``; return the x range
        those pixels stood for before the drag, and what 1.5 pixels are worth."""
        before = await self.json(
            "(() => { const u = explore.plot, r = u.over.getBoundingClientRect();"
            f" return [u.posToVal({left} - r.left, 'x'), u.posToVal({right} - r.left, 'x'),"
            " (u.scales.x.max - u.scales.x.min) / r.width]; })()"
        )
        await self.drag((left, y), (right, y))
        return before[:2], SLACK_PX * before[2]

    async def at(self, x: float, y: float) -> tuple[float, float]:
        """The page coordinates of the plot's point (x, y), in its current scales."""
        where = await self.json(
            "(() => { const u = explore.plot, r = u.over.getBoundingClientRect();"
            f" return [r.left + u.valToPos({x}, 'x'), r.top + u.valToPos({y}, 'y')]; }})()"
        )
        return where[0], where[1]

    async def screenshot(self, path: Path) -> None:
        """A picture of the page (for a person looking into a failure)."""
        shot = await self.devtools.call("Page.captureScreenshot", self.session, format="png")
        await trio.Path(path).write_bytes(base64.b64decode(shot["data"]))

    async def scales(self) -> dict[str, list[float]]:
        return await self.json(  # type: ignore[no-any-return]
            "{x: [explore.plot.scales.x.min, explore.plot.scales.x.max],"
            " y: [explore.plot.scales.y.min, explore.plot.scales.y.max]}"
        )


async def _open(devtools: DevTools, url: str) -> Page:
    page = Page(devtools, await open_page(devtools, url))
    await devtools.call(
        "Emulation.setDeviceMetricsOverride", page.session,
        width=1300, height=1400, deviceScaleFactor=1, mobile=False,
    )  # fmt: skip
    return page


async def _shown(page: Page, run: int) -> None:
    await page.wait(f"(document.body.dataset.explore || '').startsWith('{run}:0:')")
    await page.js("document.getElementById('explore').scrollIntoView()")


@asynccontextmanager
async def _explore(config: PreviewConfig, tmp_path: Path, run: int) -> AsyncIterator[Page]:
    """A preview server and a browser page on its dashboard, ``run`` shown in the explorer."""
    async with (
        preview_server(config, token=TOKEN) as (front, _),
        chromium(tmp_path / "profile") as devtools,
    ):
        page = await _open(devtools, dashboard_page_url(front.url, TOKEN) + f"&select={run}")
        await _shown(page, run)
        yield page


async def test_zoom_hover_and_a_spike_in_a_long_trace(explore_db: Path, tmp_path: Path) -> None:
    config = server_config(explore_db, tmp_path, helpers=2)
    async with _explore(config, tmp_path, SPIKE_RUN) as page:
        # The spike, one sample of 400 000, is drawn at its true height.
        assert await page.js("explore.plot.data[0].length") <= 2 * config.data_buckets
        top = await page.js("Math.max(...explore.plot.data[1].filter((v) => v !== null))")
        assert top == SPIKE_VALUE
        assert 2 * config.data_buckets < SPIKE_POINTS
        info = await page.js("document.getElementById('xinfo').textContent")
        assert info.startswith(f"{SPIKE_POINTS} points shown as ")

        # Two drags, each a tenth of the width around the spike: the x scale is what
        # was dragged over (read back from the page), the y scale follows the data.
        t, y = spike_trace()
        spike_t = float(f"{t[SPIKE_INDEX]:.10g}")  # setpoints travel with 10 digits
        full = await page.scales()
        assert full["x"] == [t[0], t[-1]]
        for _ in range(2):
            centre, _ = await page.at(spike_t, SPIKE_VALUE)
            middle = await page.js(
                "(() => { const r = explore.plot.over.getBoundingClientRect();"
                " return r.top + r.height / 2; })()"
            )
            expected, slack = await page.zoom_x(centre - 26, centre + 26, middle)
            zoomed = await page.scales()
            assert zoomed["x"] == pytest.approx(expected, abs=slack)
        assert zoomed["x"][1] - zoomed["x"][0] < 400 / 50
        assert zoomed["y"][1] == SPIKE_VALUE

        # Hover over the spike: the readout says what it is.
        x, y_px = await page.at(spike_t, SPIKE_VALUE)
        assert await page.hover(x, y_px + 3) == {"x": spike_t, "y": SPIKE_VALUE}
        readout = await page.js("document.getElementById('xreadout').textContent")
        assert readout == f"Time = {spike_t:g} s · Signal = 12.5 V"
        # And over another known point of the trace, in view.
        neighbour = await page.json(f"explore.plot.data[0].findIndex((x) => x > {spike_t} + 0.2)")
        point = await page.json(
            f"[explore.plot.data[0][{neighbour}], explore.plot.data[1][{neighbour}]]"
        )
        x, y_px = await page.at(point[0], point[1])
        assert await page.hover(x, y_px) == {"x": point[0], "y": point[1]}
        index = round(point[0] / 1e-3)
        assert point[1] == pytest.approx(float(y[index]), rel=1e-6)  # the sample's own value

        await page.screenshot(tmp_path / "trace-zoomed.png")
        # A double-click shows the whole run again.
        await page.click(x, y_px, count=2)
        assert (await page.scales())["x"] == full["x"]
        assert await page.js("document.body.dataset.errors || '0'") == "0"
        assert await page.js("typeof uPlot") == "function"
    assert_no_children()


async def test_a_map_hover_zoom_and_line_cuts(explore_db: Path, tmp_path: Path) -> None:
    config = server_config(explore_db, tmp_path, helpers=2)
    async with _explore(config, tmp_path, MAP_RUN) as page:
        shape = await page.json("explore.data.series[0].shape")
        assert shape == [MAP_ROWS, MAP_COLUMNS]

        # The heat map: viridis from the smallest value (row 0, column 0) to the largest.
        corners = {(0, 0): [68, 1, 84], (MAP_ROWS - 1, MAP_COLUMNS - 1): [253, 231, 37]}
        for (row, column), rgb in corners.items():
            x, y = await page.at(column / 10, row / 100)
            pixel = await page.json(
                "(() => { const u = explore.plot, r = u.over.getBoundingClientRect();"
                f" return [...u.ctx.getImageData(u.bbox.left + {x} - r.left,"
                f" u.bbox.top + {y} - r.top, 1, 1).data]; }})()"
            )
            assert pixel == [*rgb, 255], (row, column)

        # Hover over cell (row 5, column 7): gate 0.7 V, bias 0.05 V, current 5007 A.
        x, y = await page.at(0.7, 0.05)
        hover = await page.hover(x, y)
        assert hover == {"x": 0.7, "y": 0.05, "z": 5007, "row": 5, "column": 7}
        readout = await page.js("document.getElementById('xreadout').textContent")
        assert readout == "Gate = 0.7 V · Bias = 0.05 V · Current = 5007 A"

        # A click draws both cuts through that cell, with the map's exact values.
        await page.click(x, y)
        await page.wait("document.body.dataset.cut === '5:7'")
        cuts = await page.json(
            "{h: [explore.cuts.h.plot.data[0], explore.cuts.h.plot.data[1]],"
            " v: [explore.cuts.v.plot.data[0], explore.cuts.v.plot.data[1]]}"
        )
        assert cuts["h"][0] == [c / 10 for c in range(MAP_COLUMNS)]
        assert cuts["h"][1] == [5000 + c for c in range(MAP_COLUMNS)]
        assert cuts["v"][0] == [r / 100 for r in range(MAP_ROWS)]
        assert cuts["v"][1] == [1000 * r + 7 for r in range(MAP_ROWS)]
        titles = await page.json(
            "[...document.querySelectorAll('#xcuts .u-title')].map((t) => t.textContent)"
        )
        assert titles == ["Bias = 0.05 V", "Gate = 0.7 V"]

        await page.screenshot(tmp_path / "map-cuts.png")
        # A box drag zooms both axes; a double-click shows the whole map again.
        full = await page.scales()
        start = await page.at(0.3, 0.02)
        end = await page.at(1.2, 0.08)
        await page.drag(start, end)
        zoomed = await page.scales()
        per_px_x = (full["x"][1] - full["x"][0]) / 640
        per_px_y = (full["y"][1] - full["y"][0]) / 320
        assert zoomed["x"][0] == pytest.approx(0.3, abs=SLACK_PX * per_px_x)
        assert zoomed["x"][1] == pytest.approx(1.2, abs=SLACK_PX * per_px_x)
        assert zoomed["y"][0] == pytest.approx(0.02, abs=SLACK_PX * per_px_y)
        assert zoomed["y"][1] == pytest.approx(0.08, abs=SLACK_PX * per_px_y)
        assert await page.js("document.body.dataset.cut") == "5:7"  # a drag is no click
        x, y = await page.at(0.5, 0.05)
        await page.click(x, y, count=2)
        assert await page.scales() == full
        assert await page.js("document.body.dataset.errors || '0'") == "0"
        await page.js("document.getElementById('xseries').scrollIntoView()")
        await page.screenshot(tmp_path / "map.png")

        # Every other kind of run is shown too: gaps for NaN and ±Inf, magnitude and
        # phase, text levels, a run with no points, a big map in blocks.
        for run in (2, 7, 8, 9, 6, 14):
            await page.js(f"document.querySelector('[data-run=\"{run}\"]').click()")
            await page.wait(f"(document.body.dataset.explore || '').startsWith('{run}:')")
            if run == 2:
                assert await page.js("explore.plot.data[1].filter((v) => v === null).length") == 5
            if run == 7:
                assert await page.js("document.getElementById('xseries').options.length") == 2
        assert await page.js("document.body.dataset.explore") == "14:0:" + str(
            await page.js("explore.data.bytes")
        )
        assert await page.js("explore.data.series[0].low.length") > 0
        assert await page.js("document.body.dataset.errors || '0'") == "0"

    assert_no_children()


#: The tick labels of each axis of a plot, the values they stand for, its SI factor and title.
TICKS = (
    "[0, 1].map((k) => [u.axes[k]._values, u.axes[k]._splits, u.axes[k].si.factor,"
    " u.axes[k].label])"
)


async def _ticks(page: Page, plot: str) -> list[list[tuple[str, float]]]:
    """Each axis of ``plot`` (a JS expression): its (label, value in SI units) pairs with
    a label; the label is in the axis's prefixed unit (``nA``), so it is scaled back."""
    axes = await page.json(f"((u) => {TICKS})({plot})")
    return [
        [(label, value * factor) for label, value in zip(labels, splits, strict=True) if label]
        for labels, splits, factor, _title in axes
    ]


async def _titles(page: Page, plot: str) -> list[str]:
    return [axis[3] for axis in await page.json(f"((u) => {TICKS})({plot})")]


def _assert_labels_tell(axis: list[tuple[str, float]]) -> None:
    """Every label is its tick's value (in the axis's unit), and no two are alike."""
    assert len(axis) >= 3, axis
    for label, value in axis:
        assert float(label) == pytest.approx(value, rel=1e-5, abs=1e-9), axis
    assert len({label for label, _ in axis}) == len(axis), axis


async def test_axis_labels_of_tiny_si_values(explore_db: Path, tmp_path: Path) -> None:
    # The sample's currents are nA and its conductances µS, in A and S: rounded to a
    # few decimals, every tick would read 0.
    config = server_config(explore_db, tmp_path, helpers=2)
    async with _explore(config, tmp_path, 1) as page:
        bias, current = await _ticks(page, "explore.plot")
        _assert_labels_tell(bias)  # ±0.01 V: ticks in mV
        _assert_labels_tell(current)  # ±12 nA: ticks in nA, never "1e-8"
        assert max(abs(float(label)) for label, _ in current) < 1000
        assert not any("e" in label for label, _ in [*bias, *current])
        bias_title, current_title = await _titles(page, "explore.plot")
        assert (bias_title[-5:], current_title[-5:]) == (" (mV)", " (nA)")

        await page.js("document.querySelector('[data-run=\"4\"]').click()")
        await page.wait("(document.body.dataset.explore || '').startsWith('4:0:')")
        info = await page.js("document.getElementById('xinfo').textContent")
        assert info.endswith("… 1.060846e-6"), info  # the colour range, one notation
        x, y = await page.at(0.1, 0.0)
        await page.click(x, y)
        await page.wait("document.body.dataset.cut !== undefined")
        for cut in ("explore.cuts.h.plot", "explore.cuts.v.plot"):
            setpoint, conductance = await _ticks(page, cut)
            _assert_labels_tell(setpoint)
            _assert_labels_tell(conductance)
        assert await page.js("document.body.dataset.errors || '0'") == "0"
    assert_no_children()


#: A newer answer for the shown run, as a run being written gives: every value doubled.
GROWN = (
    "explore.data = {...explore.data, series: explore.data.series.map((s) =>"
    " ({...s, values: s.values.map((v) => v === null ? v : 2 * v)}))}; explore.draw(true)"
)


async def test_a_newer_answer_keeps_a_zoom_but_shows_a_whole_run_whole(
    explore_db: Path, tmp_path: Path
) -> None:
    config = server_config(explore_db, tmp_path, helpers=2)
    async with _explore(config, tmp_path, 1) as page:
        full = await page.scales()
        # Shown whole: the newer data are shown whole too, not in the old ranges.
        await page.js(GROWN)
        grown = await page.scales()
        assert grown["x"] == full["x"]
        assert grown["y"] == pytest.approx([2 * full["y"][0], 2 * full["y"][1]], rel=1e-12)
        # Zoomed in by the person: the zoom stays.
        left, _ = await page.at(-0.005, 0.0)
        right, middle = await page.at(0.005, 0.0)
        await page.zoom_x(left, right, middle)
        zoomed = await page.scales()
        assert zoomed["x"][1] - zoomed["x"][0] < 0.6 * (full["x"][1] - full["x"][0])
        await page.js(GROWN)
        assert await page.scales() == zoomed
        assert await page.js("document.body.dataset.errors || '0'") == "0"
    assert_no_children()
