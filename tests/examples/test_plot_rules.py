"""Each plot rule on the runs of ``tests/data/qcodes_plots.db`` (written by real QCoDeS).

The renderer reports its decisions inside every PNG (``report_of``); these tests
assert them, and look at the pixels where a decision alone could be drawn wrongly.
"""

from __future__ import annotations

import hashlib
import io

import numpy as np
import pytest
from PIL import Image, ImageDraw

from examples.preview.child.drawing import glyphs, scales
from examples.preview.child.drawing import plotting as plot
from examples.preview.child.drawing.render import render, report_of
from examples.preview.child.qcodes.source import open_source

PSD, LEAKAGE, THERMO, CUBE, HYPERCUBE, UNICODE, DEAD, CRASHED = range(1, 9)
BLUE = np.array(plot.LINE_COLOURS[0])


@pytest.fixture(scope="module")
def source(plots_db):
    with open_source(plots_db) as src:
        yield src


@pytest.fixture(scope="module")
def observations(source):
    return {run["run_id"]: source.read_run(run["run_id"]) for run in source.list_runs()}


def pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGB")).astype(np.int64)


def panel(observation, kind="preview", options=None, index=0):
    png = render(observation, kind, options)
    return report_of(png)["panels"][index], png


def trace_columns(png: bytes, box) -> np.ndarray:
    """Columns of ``box`` (left, top, right, bottom) holding ink of the first trace colour."""
    left, top, right, bottom = box
    area = pixels(png)[top:bottom, left:right]
    near = np.abs(area - BLUE).sum(axis=2) < 90
    return np.nonzero(near.any(axis=0))[0]


def ink_rows(png: bytes, box) -> int:
    """How many rows of ``box`` the first trace colour spans."""
    left, top, right, bottom = box
    area = pixels(png)[top:bottom, left:right]
    rows = np.nonzero((np.abs(area - BLUE).sum(axis=2) < 90).any(axis=1))[0]
    return int(rows.max() - rows.min()) if rows.size else 0


def test_a_log_spaced_sweep_over_decades_gets_log_axes(observations):
    report, png = panel(observations[PSD])
    assert report["x"] == {
        "name": "frequency",
        "scale": "log",
        "reason": "log-spaced sweep",
        "range": [1.0, 100000.0],
        "range_from": "data",
        "axis_range": [1.0, 100000.0],
    }
    assert report["y"]["scale"] == "log"
    assert report["y"]["reason"] == "values span ≥ 3 decades"
    assert report["x_title"] == "Frequency (Hz)"
    assert report["y_title"] == "Current noise PSD (A²/Hz)"  # no power of ten folded in
    # Drawn over the whole width: not a spike at the left edge.
    columns = trace_columns(png, (0, 60, 640, 430))
    assert columns.max() - columns.min() > 500
    linear, linear_png = panel(observations[PSD], options={"xscale": "linear", "scale": "linear"})
    assert (linear["x"]["scale"], linear["y"]["scale"]) == ("linear", "linear")
    assert (linear["x"]["reason"], linear["y"]["reason"]) == ("asked", "asked")
    # The right half of the curve still falls by a decade and a half on log axes; on
    # linear ones it is a flat line on the floor (half the sweep lies below 316 Hz).
    assert ink_rows(png, (350, 60, 620, 430)) > 100
    assert ink_rows(linear_png, (350, 60, 620, 430)) < 15


def test_data_over_decades_on_a_linear_sweep_get_a_log_value_axis_only(observations):
    report, _ = panel(observations[LEAKAGE])
    assert (report["x"]["scale"], report["x"]["reason"]) == ("linear", "linear sweep")
    assert (report["y"]["scale"], report["y"]["reason"]) == ("log", "values span ≥ 3 decades")


def test_sign_changing_data_over_decades_get_a_symmetric_log_axis(observations):
    report, png = panel(observations[THERMO])
    assert report["y"]["scale"] == "symlog"
    assert report["y"]["reason"] == "values cross zero and span ≥ 3 decades"
    assert report["y"]["threshold"] == 1e-9
    # The trace climbs steadily through the middle instead of lying flat on zero with
    # two spikes at the ends: count the rows that hold ink.
    assert ink_rows(png, (70, 60, 620, 430)) > 300
    # Its middle third (|bias| < 1/3: 10⁻⁹ to 10⁻⁷ V) is not flat on zero either.
    assert ink_rows(png, (260, 60, 430, 430)) > 60
    linear, linear_png = panel(observations[THERMO], options={"scale": "linear"})
    assert linear["y"]["scale"] == "linear"
    assert ink_rows(linear_png, (260, 60, 430, 430)) < 10  # flat on zero
    forced, _ = panel(observations[THERMO], options={"scale": "log"})
    assert forced["y"]["scale"] == "log"
    assert forced["y"]["hidden"] == 81  # the values <= 0 have no place on a log axis


def test_noise_around_zero_under_a_peak_stays_linear(observations):
    report, _ = panel(observations[HYPERCUBE])
    assert report["colour"]["scale"] == "linear"
    dead_lockin, _ = panel(observations[DEAD])
    assert dead_lockin["y"]["scale"] == "linear"


def test_the_old_sample_keeps_linear_axes(real_db):
    with open_source(real_db) as src:
        for run in src.list_runs():
            report = report_of(render(src.read_run(run["run_id"]), "preview"))
            for entry in report["panels"]:
                for axis in ("x", "y", "colour"):
                    if axis in entry:
                        assert entry[axis]["scale"] == "linear", (run["run_id"], entry)


def test_a_3d_run_is_drawn_as_a_named_slice(source, observations):
    report, _ = panel(observations[CUBE])
    assert report["slice"] == "magnet_field = 1 T · slice 6 of 6"
    thumb, _ = panel(observations[CUBE], "thumbnail")
    assert thumb["slice"] == "6/6 magnet_field = 1 T"
    third = source.read_run(CUBE, slice_index=2)
    chosen = third["dependents"][0]["slice"]
    assert chosen["index"] == 2
    assert chosen["count"] == 6
    assert chosen["fixed"] == [
        {"name": "magnet_field", "label": "Magnet field", "unit": "T", "value": 0.4}
    ]
    report3, png3 = panel(third)
    assert report3["slice"] == "magnet_field = 0.4 T · slice 3 of 6"
    assert third["dependents"][0]["source_shape"] == [20, 15]
    assert png3 != render(observations[CUBE], "preview")
    assert source.read_run(CUBE, slice_index=99)["dependents"][0]["slice"]["index"] == 5


def test_a_4d_run_names_every_fixed_setpoint(source, observations):
    report, _ = panel(observations[HYPERCUBE])
    assert report["slice"] == "temperature = 0.5 K, magnet_field = 1.5 T · slice 12 of 12"
    first = source.read_run(HYPERCUBE, slice_index=0)
    report0, _ = panel(first)
    assert report0["slice"] == "temperature = 20 mK, magnet_field = 0 T · slice 1 of 12"
    assert first["dependents"][0]["source_shape"] == [10, 12]


def test_a_long_label_is_shortened_but_never_its_unit(observations):
    report, _ = panel(observations[UNICODE])
    title = report["y_title"]
    assert title.startswith("R_{MXC} (Δ")
    assert title.endswith("… (kΩ)")
    flux, _ = panel(observations[UNICODE], index=1)
    assert flux["y_title"].endswith("… (Φ₀)")
    face = plot.font(12)
    draw = ImageDraw.Draw(Image.new("RGB", (10, 10)))
    assert plot.fit_title(draw, "Resistance of the mixing chamber", "kΩ", face, 90).endswith(
        "… (kΩ)"
    )
    assert plot.fit_title(draw, "Resistance of the mixing chamber", "kΩ", face, 30) == "(kΩ)"
    assert plot.fit_title(draw, "Short", "kΩ", face, 200) == "Short (kΩ)"


def test_empty_panels_name_their_parameter(observations):
    png = render(observations[DEAD], "preview")
    report = report_of(png)
    messages = [p.get("message") for p in report["panels"]]
    assert messages == [
        None,
        "lockin_dead: no finite data: all 60 values are NaN or infinite",
        "lockin_dead_map: no finite data: all 60 values are NaN or infinite",
    ]
    thumb = report_of(render(observations[DEAD], "thumbnail", {"dependent": "lockin_dead"}))
    assert thumb["panels"][0]["name"] == "lockin_dead"
    # The message is drawn: the lower-left panel (the all-NaN map) holds text.
    area = pixels(png)[300:470, 20:300]
    assert (area.min(axis=2) < 128).sum() > 100


def test_a_crashed_sweep_keeps_its_planned_axis(observations):
    report, png = panel(observations[CRASHED])
    assert report["x"]["range"] == [-1.0, -0.212121]
    assert report["x"]["axis_range"] == [-1.0, 1.0]
    assert report["x"]["range_from"] == "planned sweep"
    columns = trace_columns(png, (0, 80, 640, 430))
    # 40 of 100 points: the trace ends near 40 % of the frame's width.
    frame_width = 640 - 80
    assert 0.3 < (columns.max() - columns.min()) / frame_width < 0.5


def test_viridis_is_matplotlibs_exact_table():
    lut = plot.LUT
    assert lut.shape == (256, 3)
    # Entries as matplotlib's Colormap("viridis")(i, bytes=True) gives them.
    expected = {0: (68, 1, 84), 1: (68, 2, 85), 64: (58, 82, 139), 128: (32, 144, 140),
                200: (112, 206, 86), 255: (253, 231, 36)}  # fmt: skip
    for index, rgb in expected.items():
        assert tuple(lut[index]) == rgb
    assert hashlib.sha256(lut.tobytes()).hexdigest()[:16] == "96a1f6f37d4041f9"
    grid = np.linspace(0.0, 1.0, 512).reshape(2, 256)
    rgb = plot.colourise(grid, 0.0, 1.0)
    assert tuple(rgb[0, 0]) == expected[0]
    assert tuple(rgb[-1, -1]) == expected[255]


def test_map_pixels_are_viridis_entries(observations):
    png = render(observations[CUBE], "preview")
    area = pixels(png)[80:400, 120:450].reshape(-1, 3)
    table = {tuple(int(v) for v in row) for row in plot.LUT}
    assert {tuple(int(v) for v in p) for p in area} <= table


def test_unicode_names_draw_real_glyphs_or_a_visible_replacement(observations):
    if plot.font_family() == "pillow-default":
        pytest.skip("no DejaVu font: labels are spelled out in ASCII instead")
    covered = glyphs.covered(plot.font_family())
    for char in "ΔεΦ₀µΩ²✓":
        assert ord(char) in covered, char
    assert 0x1F9CA not in covered  # 🧊: not in DejaVu Sans
    assert plot.text("🧊 R(ε)") == "\ufffd R(ε)"
    name = observations[UNICODE]["name"]
    assert name.startswith("🧊")
    renamed = dict(observations[UNICODE], name="\ufffd" + name[1:])
    assert render(observations[UNICODE], "preview") == render(renamed, "preview")
    blank = dict(observations[UNICODE], name=" " + name[1:])
    assert render(observations[UNICODE], "preview") != render(blank, "preview")


def test_scale_rules_on_synthetic_numbers():
    rng = np.random.default_rng(0)
    x = np.linspace(0, 1, 200)
    assert scales.choose(x**2, "auto")[0].kind == "linear"  # a parabola from zero
    assert scales.choose(np.sin(6 * x) + 0.01 * rng.standard_normal(200), "auto")[0].kind == (
        "linear"
    )
    assert scales.choose(10 ** (4 * x), "auto")[0].kind == "log"
    one_dip = np.ones(200)
    one_dip[100] = 1e-9
    assert scales.choose(one_dip, "auto")[0].kind == "linear"
    assert scales.choose(np.geomspace(1, 1e4, 50), "auto", spacing="linear")[0].kind == "linear"
    with pytest.raises(ValueError, match="scale must be one of"):
        scales.choose(x, "cubic")


def test_bad_scale_options_are_refused_by_name(observations):
    with pytest.raises(ValueError, match="scale must be one of"):
        render(observations[PSD], "preview", {"scale": "cubic"})
    with pytest.raises(ValueError, match="xscale must be one of"):
        render(observations[PSD], "preview", {"xscale": "symlog"})


def test_the_report_is_deterministic(observations):
    first = render(observations[THERMO], "thumbnail")
    assert first == render(observations[THERMO], "thumbnail")
    report = report_of(first)
    assert report["kind"] == "thumbnail"
    assert report["size"] == [160, 120]
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buffer, format="PNG")
    with pytest.raises(ValueError, match="no drawing report"):
        report_of(buffer.getvalue())


def test_a_live_map_keeps_its_planned_outer_axis():
    rows = [-1.0, -0.9, -0.8]  # 3 of 21 planned lines of a sweep from -1 to 1
    cols = np.linspace(0.0, 1.0, 11).tolist()
    grid = [[float(r + c) for c in cols] for r in rows]
    axis = {"label": "", "unit": "V", "levels": None, "spacing": "linear"}
    observation = {
        "run_id": 3, "name": "live map", "status": "incomplete",
        "status_reason": "not completed", "dependents": [{
            "name": "z", "label": "Signal", "unit": "V", "component": None, "levels": None,
            "ndim": 2, "points": 33, "planned_points": 231, "slice": None,
            "axes": [{**axis, "name": "outer", "values": rows, "planned_range": [-1.0, 1.0]},
                     {**axis, "name": "inner", "values": cols, "planned_range": None}],
            "values": grid,
        }],
    }  # fmt: skip
    report, png = panel(observation)
    assert report["y"]["range_from"] == "planned sweep"
    assert report["x"]["range_from"] == "data"
    # The three lines sit at the bottom; the rest of the frame waits, blank.
    picture = pixels(png)
    column = picture[60:, 300]  # below the title and the status band
    blank = np.all(column == 255, axis=1)
    coloured = ~blank & (np.abs(column[:, 0] - column[:, 1]) > 20)
    rows_coloured = np.nonzero(coloured)[0]
    assert rows_coloured.size > 10
    assert rows_coloured.min() > 300 - 60  # only the lowest part of the frame holds data
