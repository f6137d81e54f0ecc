"""PNG thumbnails and previews of real observations (design §5.2): sizes, content, labels."""

from __future__ import annotations

import copy
import io

import numpy as np
import pytest
from PIL import Image, ImageDraw

from examples.preview.child.drawing import plotting as plot
from examples.preview.child.drawing.render import KINDS, _Style, band_text, render, report_of
from examples.preview.child.qcodes.source import open_source

RUN_IDS = list(range(1, 13))


@pytest.fixture(scope="module")
def observations(real_db):
    with open_source(real_db) as src:
        return {run_id: src.read_run(run_id) for run_id in RUN_IDS}


def decode(data: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(data))
    image.load()
    assert image.format == "PNG"
    assert image.mode == "RGB"
    return np.asarray(image).astype(np.int64)


def ink(pixels: np.ndarray) -> float:
    """Fraction of pixels that are not (nearly) white."""
    return float(np.mean(pixels.min(axis=2) < 235))


def trace_observation(label="Resistance", unit="Ω", values=None, status="ok"):
    x = np.linspace(0.0, 1.0, 50)
    y = np.sin(6 * x) if values is None else values
    return {
        "run_id": 1,
        "name": "synthetic",
        "status": status,
        "status_reason": "",
        "dependents": [
            {
                "name": "r",
                "label": label,
                "unit": unit,
                "component": None,
                "levels": None,
                "ndim": 1,
                "points": len(y),
                "planned_points": None,
                "axes": [{"name": "b", "label": "Field", "unit": "T", "values": x.tolist()}],
                "values": list(y),
            }
        ],
    }


@pytest.mark.parametrize("run_id", RUN_IDS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_run_renders_at_the_right_size_with_content(observations, run_id, kind):
    pixels = decode(render(observations[run_id], kind))
    assert pixels.shape == (KINDS[kind][1], KINDS[kind][0], 3)
    assert ink(pixels) > 0.02
    packed = (pixels[..., 0] << 16) | (pixels[..., 1] << 8) | pixels[..., 2]
    colours = len(np.unique(packed))
    assert colours > 8  # antialiased text and data, not a flat placeholder colour


def test_output_is_deterministic(observations):
    for run_id in (2, 4, 9):
        assert render(observations[run_id], "preview") == render(observations[run_id], "preview")


def test_maps_are_drawn_with_the_outer_axis_upwards(observations):
    # The three maps hold the same picture (reversed_y was swept from +1 down to -1);
    # after reordering by setpoint value their thumbnails must match, not mirror.
    raster = decode(render(observations[4], "thumbnail"))[20:, :, :]
    reversed_y = decode(render(observations[6], "thumbnail"))[20:, :, :]
    serpentine = decode(render(observations[5], "thumbnail"))[20:, :, :]
    same = np.mean(np.abs(raster - reversed_y))
    mirrored = np.mean(np.abs(raster - reversed_y[::-1]))
    assert same < mirrored / 3
    assert np.mean(np.abs(raster - serpentine)) < mirrored / 3
    # the ridge is brighter at large dac_gate2 (the top): (1 + 0.3 y) in the model
    luma = raster[:, 10:150].sum(axis=2)
    assert luma[:30].max() > luma[-40:-10].max()


def test_transpose_swaps_the_map_axes(observations):
    normal = decode(render(observations[7], "thumbnail"))[20:]
    swapped = decode(render(observations[7], "thumbnail", {"transpose": True}))[20:]
    # swapping the axes mirrors the map about its diagonal: the picture must change
    assert np.mean(np.abs(normal - swapped)) > 10
    with pytest.raises(ValueError, match="transpose"):
        render(observations[7], "thumbnail", {"transpose": 1})


def test_preview_of_a_map_has_a_colour_bar(observations):
    pixels = decode(render(observations[4], "preview"))
    column = pixels[60:420, 565]  # just right of the plot: the bar, top to bottom
    lut = plot.LUT.astype(np.int64)
    top_err = np.abs(lut[-1] - column[2]).sum()
    bottom_err = np.abs(lut[0] - column[-3]).sum()
    assert top_err < 60
    assert bottom_err < 60


def test_the_report_names_the_font_but_never_its_path():
    font = report_of(render(trace_observation(), "thumbnail"))["font"]
    assert "/" not in font
    assert "\\" not in font
    assert font in (plot.font_family().rsplit("/", 1)[-1], "pillow-default")


def test_unicode_units_render_with_a_real_glyph():
    if plot.font_family() == "pillow-default":
        pytest.skip("no DejaVu font installed: labels are transliterated instead")
    with_omega = decode(render(trace_observation(unit="Ω"), "preview"))
    with_missing_glyph = decode(render(trace_observation(unit="\u0378"), "preview"))
    with_ascii = decode(render(trace_observation(unit="O"), "preview"))
    assert np.abs(with_omega - with_missing_glyph).sum() > 0
    assert np.abs(with_omega - with_ascii).sum() > 0
    face = plot.font(12)

    def glyph(char):
        image = Image.new("L", (30, 30))
        ImageDraw.Draw(image).text((5, 5), char, font=face, fill=255)
        return image.tobytes()

    notdef = glyph("\u0378")
    for char in "Ωµεδ\u2032":
        assert glyph(char) != notdef, char


def test_axis_titles_are_drawn_in_the_preview():
    a = decode(render(trace_observation(label="Resistance"), "preview"))
    b = decode(render(trace_observation(label="Conductance of the sample"), "preview"))
    changed = np.any(a != b, axis=2)
    rows, cols = np.nonzero(changed)
    assert cols.min() < 40  # only the vertical y title on the left changed
    assert np.all(cols < 40)
    assert rows.size > 50


def test_thumbnail_of_a_trace_is_a_line_plot(observations):
    pixels = decode(render(observations[1], "thumbnail"))
    blue = (np.abs(pixels - np.array(plot.LINE_COLOURS[0])).sum(axis=2) < 60)[20:]
    # the sine sweep crosses most columns of the plot area
    assert np.mean(blue.any(axis=0)) > 0.8


def test_empty_run_gives_a_placeholder_with_its_status(observations):
    pixels = decode(render(observations[10], "preview"))
    grey = np.all(pixels == (110, 110, 110), axis=2)
    assert grey[200:260].sum() > 200  # "EMPTY" in large letters near the middle
    thumb = decode(render(observations[10], "thumbnail"))
    assert np.all(thumb == (110, 110, 110), axis=2).sum() > 20


@pytest.mark.parametrize(("run_id", "colour"), [(11, (196, 78, 0)), (12, (33, 102, 172))])
def test_interrupted_and_incomplete_runs_carry_a_status_band(observations, run_id, colour):
    preview = decode(render(observations[run_id], "preview"))
    band = np.all(preview == colour, axis=2)
    assert band.any(axis=1).sum() >= 10  # a band some rows high
    assert band.sum(axis=1).max() > 400  # most of the width
    thumb = decode(render(observations[run_id], "thumbnail"))
    assert np.all(thumb[-14:] == colour, axis=2).sum() > 600  # band at the bottom


@pytest.mark.parametrize(
    ("run_id", "thumbnail", "preview_starts"),
    [
        (11, "EXCEPTION 73/200", "EXCEPTION 73/200: ended with an exception: RuntimeError"),
        (12, "INCOMPLETE 120/200", "INCOMPLETE 120/200: not completed"),
    ],
)
def test_status_band_text_fits_and_leads_with_the_points(
    observations, run_id, thumbnail, preview_starts
):
    observation = observations[run_id]
    assert band_text(observation, small=True) == thumbnail
    preview = band_text(observation, small=False)
    assert preview.startswith(preview_starts)
    assert "planned points" not in preview  # said once, as N/M
    draw = ImageDraw.Draw(Image.new("RGB", (160, 120)))
    face = _Style("thumbnail", (160, 120), 1).subtitle
    assert plot.fit(draw, thumbnail, face, 160 - 12) == thumbnail  # not cut off


def test_check_cancel_runs_between_stages_and_aborts(observations):
    calls = []
    render(observations[3], "preview", check_cancel=lambda: calls.append(1))
    assert len(calls) >= 5  # start, after the title, after each of the 4 panels

    class Abort(Exception):
        pass

    def abort():
        if len(calls) > 6:
            raise Abort
        calls.append(1)

    with pytest.raises(Abort):
        render(observations[3], "preview", check_cancel=abort)


def test_options_size_and_dependent(observations):
    pixels = decode(render(observations[9], "preview", {"width": 300, "height": 200}))
    assert pixels.shape == (200, 300, 3)
    phase_only = render(observations[9], "preview", {"dependent": 1})
    both = render(observations[9], "preview")
    assert phase_only != both
    by_name = render(observations[3], "thumbnail", {"dependent": "lockin_Y"})
    assert by_name != render(observations[3], "thumbnail")


@pytest.mark.parametrize(
    ("kind", "options", "words"),
    [
        ("poster", {}, "unknown render kind"),
        ("preview", {"colour": "red"}, "unknown render options"),
        ("preview", {"width": 10}, "width"),
        ("preview", {"width": True}, "width"),
        ("preview", {"max_panels": 9}, "max_panels"),
        ("preview", {"dependent": 7}, "dependent"),
    ],
)
def test_bad_kind_and_options(observations, kind, options, words):
    with pytest.raises(ValueError, match=words):
        render(observations[1], kind, options)


def test_malformed_observation_is_a_value_error():
    with pytest.raises(ValueError, match="malformed observation"):
        render({"name": "x"}, "preview")
    broken = trace_observation()
    del broken["dependents"][0]["axes"]
    with pytest.raises(ValueError, match="malformed observation"):
        render(broken, "thumbnail")


def test_awkward_data_renders():
    nan_and_inf = [None, 1.0, None, 2.0, float("inf"), 3.0] * 5
    for values in (nan_and_inf, [5.0] * 30, [None] * 30, [1.0]):
        obs = trace_observation(values=values)
        obs["dependents"][0]["axes"][0]["values"] = list(np.linspace(0, 1, len(values)))
        for kind in KINDS:
            decode(render(obs, kind))
    empty_grid = copy.deepcopy(trace_observation())
    dep = empty_grid["dependents"][0]
    dep.update(ndim=2, values=[[None, None], [None, None]])
    dep["axes"] = [
        {"name": "a", "label": "A", "unit": "V", "values": [0.0, 1.0]},
        {"name": "b", "label": "B", "unit": "V", "values": [0.0, 1.0]},
    ]
    decode(render(empty_grid, "preview"))


@pytest.mark.parametrize(
    ("values", "hidden"),
    [
        ([1.7e308, -1.7e308] * 10, 20),  # DBL_MAX, a driver's "no data" fill value
        ([1e-9] * 15 + [1.7e308] * 5, 5),  # real data with a few fill values
        ([5e-324 * k for k in range(1, 21)], 20),  # subnormal numbers only
        ([1e300, -1e300] * 10, 0),  # the edge of what is drawn
        ([1e-300 * k for k in range(1, 21)], 0),
        ([1e30, 2e30] * 10, 0),  # beyond the SI prefixes: a power of ten, short labels
    ],
)
@pytest.mark.parametrize("scale", ["auto", "linear", "log", "symlog"])
def test_finite_values_at_the_ends_of_the_float_range_are_drawn(values, hidden, scale):
    # Spans, ticks and SI factors of such numbers left the float range: the drawing
    # raised OverflowError, StopIteration or ValueError (render_failed, permanently),
    # or (1e300 V on a linear axis) drew 290-digit tick labels wider than the picture.
    # A size beyond 1e300 (or, but zero, below 1e-300) now has no place on an axis and
    # is counted as hidden, like a value <= 0 on a log axis.
    obs = trace_observation(values=values)
    obs["dependents"][0]["axes"][0]["values"] = list(np.linspace(0, 1, len(values)))
    for kind in KINDS:
        png = render(obs, kind, {"scale": scale})
        decode(png)
        panel = report_of(png)["panels"][0]
        if hidden == len(values):
            assert panel["message"] == "r: 20 finite values, none within what an axis can draw"
        elif scale == "linear":
            assert panel["y"].get("hidden", 0) == hidden
    grid = copy.deepcopy(obs)
    dep = grid["dependents"][0]
    dep.update(ndim=2, values=[values[:2], values[2:4]])
    dep["axes"] = [
        {"name": "a", "label": "A", "unit": "V", "values": [values[0], values[0] * 3]},
        {"name": "b", "label": "B", "unit": "V", "values": [0.0, 1.0]},
    ]
    png = render(grid, "preview", {"scale": scale})
    decode(png)
    panel = report_of(png)["panels"][0]
    if hidden == len(values):  # neither the values nor the rows' setpoints have a place
        assert "what an axis can draw" in panel["message"]


def test_ticks_and_scales():
    assert plot.nice_ticks(0.0, 1.0, 5) == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ghz = plot.Scale(5.41e9, 5.45e9, "Hz")
    assert ghz.unit == "GHz"
    assert plot.tick_labels([5.42e9, 5.43e9], ghz) == ["5.42", "5.43"]
    assert plot.Scale(-4e-7, 4e-7, "V").unit == "nV"
    assert plot.Scale(0.2, 0.9, "V").unit == "V"
    assert plot.Scale(1e-15, 2e-14, "V²/Hz").unit == "\u00d710⁻¹⁵ V²/Hz"
    assert plot.tick_labels([-1.0, 0.0, 1.0], plot.Scale(-1, 1, "")) == ["\u22121", "0", "1"]


def test_without_dejavu_labels_are_spelled_out(monkeypatch):
    monkeypatch.setattr(plot, "_find_font", lambda bold: None)
    plot.font.cache_clear()
    try:
        assert plot.font_family() == "pillow-default"
        assert plot.text("R (kΩ) 5 µV ε") == "R (kOhm) 5 uV eps"
        pixels = decode(render(trace_observation(unit="Ω"), "preview"))
        assert ink(pixels) > 0.02
    finally:
        plot.font.cache_clear()
