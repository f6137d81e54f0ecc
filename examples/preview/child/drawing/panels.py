"""One panel of a picture: a trace or a map, with its axes (design §5.2).

Called by :mod:`~examples.preview.child.drawing.render` for each dependent it shows. Every
panel function draws into the image and returns its *report*: the decisions a reader
of the picture needs to trust it (each axis's scale and why, its range and where the
range came from, the titles as drawn, the slice shown, or why nothing was drawn).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, ImageDraw

from . import plotting as plot
from .scales import AxisScale, choose

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Style", "heatmap", "slice_caption", "trace"]

_SUPERSAMPLE = 3


class Style:
    """Sizes for one kind of picture, scaled to the canvas."""

    def __init__(self, kind: str, size: tuple[int, int], panels: int) -> None:
        width, height = size
        self.small = kind == "thumbnail" or min(width, height) < 200
        scale = min(width / 640, height / 480)
        shrink = 0.85 if panels > 2 else 1.0
        self.title = plot.font(max(9, round(16 * scale)), bold=True)
        self.subtitle = plot.font(max(8, round(11 * scale)))
        self.tick = plot.font(max(8, round(11 * scale * shrink)))
        self.label = plot.font(max(8, round(12 * scale * shrink)))
        self.line_width = 1 if self.small else 2
        self.marker = 1 if self.small else 3


class _Frame:
    """One panel's plot rectangle and its mapping from drawing coordinates to pixels."""

    def __init__(self, box: plot.Box, xr: tuple[float, float], yr: tuple[float, float]) -> None:
        self.box = box
        self.xr, self.yr = xr, yr

    def px(self, x: np.ndarray) -> np.ndarray:
        left, _, right, _ = self.box
        return left + (x - self.xr[0]) / (self.xr[1] - self.xr[0]) * (right - 1 - left)

    def py(self, y: np.ndarray) -> np.ndarray:
        _, top, _, bottom = self.box
        return bottom - 1 - (y - self.yr[0]) / (self.yr[1] - self.yr[0]) * (bottom - 1 - top)


def _floats(values: Any) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def _title_parts(meta: Mapping[str, Any], unit: str) -> tuple[str, str]:
    return str(meta.get("label") or meta.get("name") or ""), unit


def _ticks(
    coords: tuple[float, float], scale: AxisScale, folded: plot.Scale, levels: Any, count: int
) -> tuple[list[float], list[str]]:
    """Tick positions (drawing coordinates) and labels for one axis."""
    if levels:
        ticks = [float(k) for k in range(len(levels)) if coords[0] <= k <= coords[1]]
        return ticks, [str(levels[int(k)]) for k in ticks]
    special = scale.ticks(coords[0], coords[1], count)
    if special is not None:
        return [float(scale.forward(np.array(v))) for v, _ in special], [t for _, t in special]
    ticks = plot.nice_ticks(coords[0], coords[1], count)
    return ticks, plot.tick_labels(ticks, folded)


def _unit_scale(coords: tuple[float, float], scale: AxisScale, unit: str) -> plot.Scale:
    """SI prefixes fold into a linear axis's unit; a log axis keeps the unit as stored."""
    if scale.kind == "linear":
        return plot.Scale(*coords, unit)
    return plot.Scale(1.0, 1.0, unit)


def _axes(
    image: Image.Image,
    draw: ImageDraw.ImageDraw,
    box: plot.Box,
    style: Style,
    x: tuple[tuple[float, float], Mapping[str, Any], AxisScale],
    y: tuple[tuple[float, float], Mapping[str, Any], AxisScale],
    right_reserve: int = 0,
) -> tuple[_Frame, dict[str, str]]:
    """Lay out ticks and titles inside ``box``; the plot frame and the titles drawn."""
    (xr, xmeta, xscale), (yr, ymeta, yscale) = x, y
    left, top, right, bottom = box
    if style.small:
        return _Frame((left + 3, top + 1, right - 3 - right_reserve, bottom - 3), xr, yr), {}
    x_units = _unit_scale(xr, xscale, str(xmeta.get("unit") or ""))
    y_units = _unit_scale(yr, yscale, str(ymeta.get("unit") or ""))
    y_ticks, y_labels = _ticks(yr, yscale, y_units, ymeta.get("levels"), 5)
    tick_h = plot.text_size(draw, "0", style.tick)[1]
    label_h = plot.text_size(draw, "Ag", style.label)[1]
    y_tick_w = max((plot.text_size(draw, t, style.tick)[0] for t in y_labels), default=0)
    frame = _Frame(
        (left + 10 + label_h + 6 + y_tick_w + 4, top + 8,
         right - 14 - right_reserve, bottom - (6 + tick_h + 6 + label_h + 6)),
        xr, yr,
    )  # fmt: skip
    fl, ft, fr, fb = frame.box
    x_ticks, x_labels = _ticks(xr, xscale, x_units, xmeta.get("levels"), max(3, (fr - fl) // 80))
    for value, text in zip(x_ticks, x_labels, strict=True):
        px = float(frame.px(np.array(value)))
        draw.line((px, ft, px, fb), fill=plot.GRID)
        draw.line((px, fb, px, fb + 4), fill=plot.FRAME)
        plot.put_text(draw, (px, fb + 6), text, style.tick, anchor="mt")
    for value, text in zip(y_ticks, y_labels, strict=True):
        py = float(frame.py(np.array(value)))
        draw.line((fl, py, fr, py), fill=plot.GRID)
        draw.line((fl - 4, py, fl, py), fill=plot.FRAME)
        plot.put_text(draw, (fl - 6, py), text, style.tick, anchor="rm")
    x_title = plot.fit_title(draw, *_title_parts(xmeta, x_units.unit), style.label,
                             right - left - 10)  # fmt: skip
    y_title = plot.fit_title(draw, *_title_parts(ymeta, y_units.unit), style.label, fb - ft)
    plot.put_text(draw, ((fl + fr) / 2, bottom - 6), x_title, style.label, anchor="md")
    plot.put_vertical_text(image, (left + 8 + label_h // 2, (ft + fb) // 2), y_title, style.label)
    return frame, {"x_title": x_title, "y_title": y_title}


def _axis_report(
    meta: Mapping[str, Any], scale: AxisScale, reason: str, data: tuple[float, float] | None
) -> dict[str, Any]:
    out = {"name": str(meta.get("name") or ""), **scale.report(), "reason": reason}
    if data is not None:
        out["range"] = [float(f"{v:.6g}") for v in data]
    return out


def _range(coords: np.ndarray, scale: AxisScale) -> tuple[float, float] | None:
    """Data range of drawing coordinates (widened if flat), back in data values."""
    found = plot.data_range(coords)
    if found is None:
        return None
    return float(scale.inverse(np.array(found[0]))), float(scale.inverse(np.array(found[1])))


def _with_planned(
    coords: tuple[float, float], axis: Mapping[str, Any], scale: AxisScale
) -> tuple[tuple[float, float], bool]:
    """Widen an axis to its planned sweep range (a live run keeps a stable axis)."""
    planned = axis.get("planned_range")
    if not planned or len(planned) != 2:
        return coords, False
    ends = scale.forward(_floats(planned))
    if not np.all(np.isfinite(ends)):
        return coords, False
    lo, hi = min(coords[0], float(ends.min())), max(coords[1], float(ends.max()))
    return (lo, hi), (lo, hi) != coords


def panel_message(
    draw: ImageDraw.ImageDraw,
    box: plot.Box,
    style: Style,
    dep: Mapping[str, Any],
    why: str,
) -> dict[str, Any]:
    """An empty panel that names its parameter and says why nothing is drawn."""
    left, top, right, bottom = box
    draw.rectangle((left + 4, top + 4, right - 5, bottom - 5), outline=plot.GRID)
    name = str(dep.get("name") or "?")
    label = str(dep.get("label") or "")
    first = name if not label or label == name else f"{name} · {label}"
    width = right - left - 16
    centre = (left + right) / 2, (top + bottom) / 2
    gap = plot.text_size(draw, "Ag", style.label)[1] * 0.7
    plot.put_text(draw, (centre[0], centre[1] - gap), plot.fit(draw, first, style.label, width),
                  style.label, anchor="mm")  # fmt: skip
    plot.put_text(draw, (centre[0], centre[1] + gap), plot.fit(draw, why, style.label, width),
                  style.label, fill=plot.FRAME, anchor="mm")  # fmt: skip
    return {"name": name, "message": f"{name}: {why}"}


def _why_empty(
    dep: Mapping[str, Any], values: np.ndarray | None = None, coords: np.ndarray | None = None
) -> str:
    """Why a panel shows nothing; ``values`` and their drawing ``coords`` when known."""
    points = int(dep.get("points") or 0)
    bad = int(dep.get("nonfinite") or 0)
    if points == 0:
        return "no points recorded"
    if values is not None and coords is not None and not np.any(np.isfinite(coords)):
        finite = int(np.sum(np.isfinite(values)))
        if finite:  # finite, but none with a place on the axis (scales.DRAWABLE)
            return f"{finite} finite values, none within what an axis can draw"
    if bad >= points:
        return f"no finite data: all {points} values are NaN or infinite"
    return "no finite data"


def slice_caption(dep: Mapping[str, Any], *, small: bool) -> str | None:
    """Which slice of a run with more than two sweep dimensions a map shows, or None.

    ``"magnet_field = 1 T · slice 6 of 6"``; a thumbnail says ``"6/6 magnet_field = 1 T"``.
    """
    chosen = dep.get("slice")
    if not chosen:
        return None
    fixed = ", ".join(
        f"{item.get('name')} = {plot.quantity(item.get('value'), str(item.get('unit') or ''))}"
        for item in chosen.get("fixed") or []
    )
    number, count = int(chosen["index"]) + 1, int(chosen["count"])
    if small:
        return f"{number}/{count} {fixed}"
    return f"{fixed} · slice {number} of {count}"


def _caption(draw: ImageDraw.ImageDraw, box: plot.Box, style: Style, text: str) -> plot.Box:
    left, top, right, bottom = box
    face = style.subtitle
    height = plot.text_size(draw, "Ag", face)[1] + 4
    line = plot.fit(draw, text, face, right - left - 8)
    plot.put_text(draw, (left + 4, top + 1), line, face, fill=(120, 40, 0))
    return left, top + height, right, bottom


def _scale_tag(
    draw: ImageDraw.ImageDraw, frame: _Frame, style: Style, scales: dict[str, AxisScale]
) -> None:
    """On a thumbnail (no tick labels), say which axes are not linear: ``log x, symlog y``."""
    if not style.small:
        return
    words = ", ".join(f"{s.kind} {axis}" for axis, s in scales.items() if s.kind != "linear")
    if not words:
        return
    _fl, ft, fr, _fb = frame.box
    width, height = plot.text_size(draw, words, style.subtitle)
    x0, y0 = fr - width - 4, ft + 1
    draw.rectangle((x0 - 2, y0, fr - 1, y0 + height + 3), fill=plot.BACKGROUND)
    plot.put_text(draw, (fr - 3, y0 + 1), words, style.subtitle, fill=(120, 40, 0), anchor="ra")


def trace(
    image: Image.Image,
    draw: ImageDraw.ImageDraw,
    box: plot.Box,
    dep: Mapping[str, Any],
    style: Style,
    colour: tuple[int, int, int],
    scales: tuple[str, str],
) -> dict[str, Any]:
    """Draw a 1-D dependent as a line (points for text categories); its report.

    Args:
        scales: The asked value scale and setpoint scale (``auto`` or a scale name).
    """
    axis = dep["axes"][0]
    x, y = _floats(axis["values"]), _floats(dep["values"])
    levels = dep.get("levels")
    xscale, xwhy = choose(x, scales[1], spacing=axis.get("spacing") or "irregular",
                          categorical=bool(axis.get("levels")))  # fmt: skip
    yscale, ywhy = choose(y, scales[0], categorical=bool(levels))
    tx, ty = xscale.forward(x), yscale.forward(y)
    xr, yr = plot.data_range(tx), plot.data_range(ty)
    if xr is None or yr is None or not np.any(np.isfinite(tx) & np.isfinite(ty)):
        return panel_message(draw, box, style, dep, _why_empty(dep, y, ty))
    x_data, y_data = _range(tx, xscale), _range(ty, yscale)
    xr, planned = _with_planned(xr, axis, xscale)
    yr = (-0.5, len(levels) - 0.5) if levels else plot.padded(*yr, 0.06)
    if axis.get("levels"):
        xr = (-0.5, len(axis["levels"]) - 0.5)
    frame, titles = _axes(image, draw, box, style, (xr, axis, xscale), (yr, dep, yscale))
    _ink_trace(image, frame, tx, ty, style, colour, line=not levels,
               dots=bool(levels) or y.size <= 60)  # fmt: skip
    draw.rectangle(frame.box, outline=plot.FRAME)
    _scale_tag(draw, frame, style, {"x": xscale, "y": yscale})
    x_report = _axis_report(axis, xscale, xwhy, x_data)
    x_report["range_from"] = "planned sweep" if planned else "data"
    x_report["axis_range"] = [float(f"{v:.6g}") for v in xscale.inverse(np.array(xr))]
    hidden = int(np.sum(np.isfinite(y) & ~np.isfinite(ty)))
    y_report = _axis_report(dep, yscale, ywhy, y_data)
    if hidden:
        y_report["hidden"] = hidden  # e.g. values <= 0 on an asked-for log axis
    return {"name": str(dep.get("name")), "ndim": 1, "x": x_report, "y": y_report, **titles}


def _ink_trace(
    image: Image.Image,
    frame: _Frame,
    x: np.ndarray,
    y: np.ndarray,
    style: Style,
    colour: tuple[int, int, int],
    *,
    line: bool,
    dots: bool,
) -> None:
    """Draw a trace antialiased: into a mask at 3 times the resolution, then box-filtered down."""
    pad = 4
    fl, ft, fr, fb = frame.box
    left, top = fl - pad, ft - pad
    width, height = fr - fl + 2 * pad, fb - ft + 2 * pad
    k = _SUPERSAMPLE
    mask = Image.new("L", (width * k, height * k), 0)
    pen = ImageDraw.Draw(mask)
    segments = plot.polyline_segments((frame.px(x) - left + 0.5) * k, (frame.py(y) - top + 0.5) * k)
    if line:
        for segment in segments:
            if len(segment) > 1:
                pen.line(segment, fill=255, width=style.line_width * k, joint="curve")
    if dots:
        r = style.marker * k
        for segment in segments:
            for px, py in segment:
                pen.ellipse((px - r, py - r, px + r, py + r), fill=255)
    small = mask.resize((width, height), Image.Resampling.BOX)
    image.paste(Image.new("RGB", (width, height), colour), (left, top), small)


def heatmap(
    image: Image.Image,
    draw: ImageDraw.ImageDraw,
    box: plot.Box,
    dep: Mapping[str, Any],
    style: Style,
    scales: tuple[str, str],
) -> dict[str, Any]:
    """Draw a 2-D dependent as a map (viridis) with its colour bar; its report.

    Args:
        scales: The asked colour (value) scale and setpoint scale.
    """
    caption = slice_caption(dep, small=style.small)
    if caption:
        box = _caption(draw, box, style, caption)
    rows_axis, cols_axis = dep["axes"]
    rows, cols = _floats(rows_axis["values"]), _floats(cols_axis["values"])
    grid = _floats(dep["values"])
    levels = dep.get("levels")
    vscale, vwhy = choose(grid.ravel() if grid.size else grid, scales[0], categorical=bool(levels))
    yscale, ywhy = choose(rows, scales[1], spacing=rows_axis.get("spacing") or "irregular")
    xscale, xwhy = choose(cols, scales[1], spacing=cols_axis.get("spacing") or "irregular")
    if yscale.kind == "log" and not np.all(rows > 0):
        yscale, ywhy = AxisScale("linear"), "asked for log, but a value is not positive"
    if xscale.kind == "log" and not np.all(cols > 0):
        xscale, xwhy = AxisScale("linear"), "asked for log, but a value is not positive"
    tgrid = vscale.forward(grid) if grid.size else grid
    vrange = plot.data_range(tgrid) if grid.size else None
    if vrange is None or grid.ndim != 2 or rows.size == 0 or cols.size == 0:
        empty = panel_message(draw, box, style, dep, _why_empty(dep, grid, tgrid))
        if caption:
            empty["slice"] = caption
        return empty
    if levels:
        vrange = (-0.5, len(levels) - 0.5)
    v_data = _range(tgrid, vscale)
    trows, tcols = yscale.forward(rows), xscale.forward(cols)
    if not (np.all(np.isfinite(trows)) and np.all(np.isfinite(tcols))):
        why = "setpoint values beyond what an axis can draw"  # scales.DRAWABLE
        empty = panel_message(draw, box, style, dep, why)
        if caption:
            empty["slice"] = caption
        return empty
    row_edges, col_edges = plot.cell_edges(trows), plot.cell_edges(tcols)
    yr, y_planned = _with_planned((float(row_edges[0]), float(row_edges[-1])), rows_axis, yscale)
    xr, x_planned = _with_planned((float(col_edges[0]), float(col_edges[-1])), cols_axis, xscale)
    bar_units = _unit_scale(vrange, vscale, str(dep.get("unit") or ""))
    bar_ticks, bar_labels = _ticks(vrange, vscale, bar_units, levels, 5)
    reserve = 0
    if not style.small:
        label_h = plot.text_size(draw, "Ag", style.label)[1]
        bar_w = max((plot.text_size(draw, t, style.tick)[0] for t in bar_labels), default=0)
        reserve = 12 + 14 + 6 + bar_w + 8 + label_h
    frame, titles = _axes(image, draw, box, style, (xr, cols_axis, xscale),
                          (yr, rows_axis, yscale), reserve)  # fmt: skip
    report: dict[str, Any] = {
        "name": str(dep.get("name")),
        "ndim": 2,
        "x": {**_axis_report(cols_axis, xscale, xwhy, _range(tcols, xscale)),
              "range_from": "planned sweep" if x_planned else "data"},
        "y": {**_axis_report(rows_axis, yscale, ywhy, _range(trows, yscale)),
              "range_from": "planned sweep" if y_planned else "data"},
        "colour": _axis_report(dep, vscale, vwhy, v_data),
        **titles,
    }  # fmt: skip
    hidden = int(np.sum(np.isfinite(grid) & ~np.isfinite(tgrid)))
    if hidden:
        report["colour"]["hidden"] = hidden  # values with no place on the colour scale
    if caption:
        report["slice"] = caption
    fl, ft, fr, fb = frame.box
    if fr - fl < 2 or fb - ft < 2:
        return report
    pixels = plot.heatmap_pixels(tgrid, trows, tcols, (fr - fl, fb - ft), vrange, (xr, yr))
    image.paste(pixels, (fl, ft))
    draw.rectangle((fl - 1, ft - 1, fr, fb), outline=plot.FRAME)
    if style.small:
        _scale_tag(draw, frame, style, {"x": xscale, "y": yscale, "colour": vscale})
        return report
    _colour_bar(image, draw, box, style, frame, (vrange, bar_ticks, bar_labels))
    title = plot.fit_title(draw, *_title_parts(dep, bar_units.unit), style.label, fb - ft)
    label_h = plot.text_size(draw, "Ag", style.label)[1]
    plot.put_vertical_text(image, (box[2] - 6 - label_h // 2, (ft + fb) // 2), title, style.label)
    report["colour_title"] = title
    return report


def _colour_bar(
    image: Image.Image,
    draw: ImageDraw.ImageDraw,
    box: plot.Box,
    style: Style,
    frame: _Frame,
    bar: tuple[tuple[float, float], list[float], list[str]],
) -> None:
    vrange, ticks, labels = bar
    _fl, ft, fr, fb = frame.box
    bx0, bx1 = fr + 12, fr + 26
    image.paste(plot.colour_bar(fb - ft, bx1 - bx0), (bx0, ft))
    draw.rectangle((bx0 - 1, ft - 1, bx1, fb), outline=plot.FRAME)
    span = vrange[1] - vrange[0]
    for value, text in zip(ticks, labels, strict=True):
        if not math.isfinite(value):
            continue
        py = fb - 1 - (value - vrange[0]) / span * (fb - 1 - ft)
        draw.line((bx1, py, bx1 + 4, py), fill=plot.FRAME)
        plot.put_text(draw, (bx1 + 6, py), text, style.tick, anchor="lm")
