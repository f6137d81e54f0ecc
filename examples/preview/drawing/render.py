"""Draw PNG thumbnails and previews of QCoDeS observations (design §5.2, §7.2).

:func:`render` is a pure function: the same observation, kind and options always give
the same PNG bytes. It runs in a worker thread of the renderer actor
(:mod:`actors._renderer._renderer`), so it checks for cancellation between drawing stages through
the ``check_cancel`` callable.

* ``thumbnail`` (160 x 120 pixels): the first dependent, no axis titles;
* ``preview`` (640 x 480 pixels): up to four dependents as small multiples, with tick
  labels, axis titles with units (SI prefixes folded in, e.g. ``mV``, ``GHz``), and a
  colour bar for 2-D maps.

1-D data is a line plot (points for text categories, labelled by category); 2-D data
is a heatmap (viridis) with the outer setpoint vertical, lowest value at the bottom.
An empty run gives a placeholder with the status text; an interrupted or incomplete
run is plotted with a coloured status band, so the partial data stays visible.
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, ImageDraw

from examples.preview.drawing import plotting as plot

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["KINDS", "RENDERER_VERSION", "MIME", "render", "render_image"]

#: Default size (width, height) in pixels of each kind.
KINDS: dict[str, tuple[int, int]] = {"thumbnail": (160, 120), "preview": (640, 480)}
#: Part of every cache key (design §4.10): bump when the pictures change.
RENDERER_VERSION = "1"
MIME = "image/png"

_OPTIONS = frozenset({"width", "height", "dependent", "max_panels", "transpose"})
_STATUS_COLOURS = {
    "interrupted": (196, 78, 0),
    "incomplete": (33, 102, 172),
    "empty": (110, 110, 110),
}


def render(
    observation: Mapping[str, Any],
    kind: str,
    options: Mapping[str, Any] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> bytes:
    """Draw one observation as a PNG.

    Args:
        observation: As returned by ``QcodesSource.read_run`` (JSON-compatible).
        kind: ``"thumbnail"`` or ``"preview"`` (:data:`KINDS`).
        options: Optional ``width``/``height`` (pixels, 48..2048), ``dependent`` (index
            or name of the one dependent to draw), ``max_panels`` (1..4) and
            ``transpose`` (bool: draw 2-D maps with the outer setpoint horizontal, as
            QCoDeS's ``plot_dataset`` does; by default it is vertical).
        check_cancel: Called between drawing stages; whatever it raises ends the
            drawing and propagates unchanged.

    Returns:
        PNG bytes.

    Raises:
        ValueError: unknown ``kind`` or option, or a malformed observation (the
            renderer actor reports it as ``RenderError``, code ``render_failed``).
    """
    image = render_image(observation, kind, options, check_cancel)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False, compress_level=6)
    return buffer.getvalue()


def render_image(
    observation: Mapping[str, Any],
    kind: str,
    options: Mapping[str, Any] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> Image.Image:
    """As :func:`render`, but return the Pillow image (RGB) instead of PNG bytes."""
    check = check_cancel or (lambda: None)
    width, height, choice, max_panels = _options(kind, options or {})
    transpose = (options or {}).get("transpose", False)
    if not isinstance(transpose, bool):
        raise ValueError(f"transpose must be true or false, got {transpose!r}")
    check()
    try:
        if transpose:
            observation = _transposed(observation)
        return _draw(observation, kind, (width, height), choice, max_panels, check)
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise ValueError(f"malformed observation: {type(exc).__name__}: {exc}") from exc


def _transposed(observation: Mapping[str, Any]) -> dict[str, Any]:
    """The observation with every 2-D map's axes swapped (rows become columns)."""
    dependents = []
    for dep in observation["dependents"]:
        if dep["ndim"] == 2:
            grid = _floats(dep["values"])
            values = grid.T.tolist() if grid.ndim == 2 else dep["values"]
            dep = {**dep, "axes": dep["axes"][::-1], "values": values}
        dependents.append(dep)
    return {**observation, "dependents": dependents}


def _options(kind: str, options: Mapping[str, Any]) -> tuple[int, int, Any, int]:
    if kind not in KINDS:
        raise ValueError(f"unknown render kind {kind!r}; expected one of {sorted(KINDS)}")
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise ValueError(f"unknown render options: {', '.join(map(str, unknown))}")
    width, height = KINDS[kind]
    for key in ("width", "height"):
        if key in options:
            value = options[key]
            if isinstance(value, bool) or not isinstance(value, int) or not 48 <= value <= 2048:
                raise ValueError(f"{key} must be an integer from 48 to 2048 pixels, got {value!r}")
    width, height = int(options.get("width", width)), int(options.get("height", height))
    max_panels = options.get("max_panels", 1 if kind == "thumbnail" else 4)
    if isinstance(max_panels, bool) or max_panels not in (1, 2, 3, 4):
        raise ValueError(f"max_panels must be 1 to 4, got {max_panels!r}")
    return width, height, options.get("dependent"), int(max_panels)


class _Style:
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


def _draw(
    observation: Mapping[str, Any],
    kind: str,
    size: tuple[int, int],
    choice: Any,
    max_panels: int,
    check: Callable[[], None],
) -> Image.Image:
    dependents = [d for d in observation["dependents"] if d["points"] > 0]
    if choice is not None:
        dependents = [_pick(observation["dependents"], choice)]
    shown = dependents[:max_panels]
    style = _Style(kind, size, len(shown))
    image = Image.new("RGB", size, plot.BACKGROUND)
    draw = ImageDraw.Draw(image)
    top = _title(draw, observation, style, size)
    status = observation.get("status", "ok")
    bottom = size[1]
    if status in ("interrupted", "incomplete") and shown:
        band = _status_band(draw, observation, style, size, top)
        if style.small:
            bottom -= band
        else:
            top += band
    check()
    if not shown:
        _placeholder(draw, observation, style, (0, top, size[0], size[1]))
        return image
    for index, (dep, box) in enumerate(zip(shown, _layout(len(shown), size, top, bottom),
                                           strict=True)):  # fmt: skip
        colour = plot.LINE_COLOURS[index % len(plot.LINE_COLOURS)]
        if dep["ndim"] == 2:
            _heatmap(image, draw, box, dep, style)
        else:
            _trace(image, draw, box, dep, style, colour)
        check()
    hidden = len(dependents) - len(shown)
    if hidden > 0 and not style.small:
        plot.put_text(draw, (size[0] - 6, size[1] - 4), f"+{hidden} more", style.tick,
                      anchor="rd")  # fmt: skip
    return image


def _pick(dependents: list[Mapping[str, Any]], choice: Any) -> Mapping[str, Any]:
    if isinstance(choice, int) and not isinstance(choice, bool):
        if 0 <= choice < len(dependents):
            return dependents[choice]
    elif isinstance(choice, str):
        for dep in dependents:
            if dep["name"] == choice:
                return dep
    raise ValueError(f"dependent {choice!r} is not in this observation")


def _title(
    draw: ImageDraw.ImageDraw, observation: Mapping[str, Any], style: _Style, size: tuple[int, int]
) -> int:
    width = size[0]
    name = str(observation.get("name") or "run")
    run_id = observation.get("run_id")
    tag = f"#{run_id}" if run_id is not None else ""
    if style.small:
        line = plot.fit(draw, f"{tag} {name}".strip(), style.title, width - 6)
        plot.put_text(draw, (3, 2), line, style.title)
        return plot.text_size(draw, "Ag", style.title)[1] + 6
    tag_width = plot.text_size(draw, tag, style.title)[0]
    plot.put_text(draw, (width - 8, 6), tag, style.title, fill=plot.FRAME, anchor="ra")
    plot.put_text(draw, (8, 6), plot.fit(draw, name, style.title, width - tag_width - 24),
                  style.title)  # fmt: skip
    title_height = plot.text_size(draw, "Ag", style.title)[1]
    parts = [observation.get("exp_name"), observation.get("sample_name")]
    sub = " · ".join(str(p) for p in parts if p)
    if sub:
        plot.put_text(draw, (8, 10 + title_height), plot.fit(draw, sub, style.subtitle, width - 16),
                      style.subtitle, fill=plot.FRAME)  # fmt: skip
        return 16 + title_height + plot.text_size(draw, "Ag", style.subtitle)[1]
    return 14 + title_height


def band_text(observation: Mapping[str, Any], *, small: bool) -> str:
    """The words of a run's status band: ``INTERRUPTED 73/200`` on a thumbnail.

    The status and the points come first, so fitting the line to the image never cuts
    them; a preview adds the reason without its own "N of M planned points" part.
    """
    words = str(observation["status"]).upper()
    points = [(d.get("points"), d.get("planned_points")) for d in observation["dependents"]]
    if points and points[0][1]:
        words = f"{words} {points[0][0]}/{points[0][1]}"
    if small:
        return words
    reason = _POINTS_NOTE.sub("", str(observation.get("status_reason") or ""))
    return f"{words}: {reason}" if reason else words


#: "(73 of 200 planned points of dmm_v1)" or "; 120 of 200 planned points of ..." at the
#: end of a status reason: the band shows "73/200" instead.
_POINTS_NOTE = re.compile(r"\s*[;(,]?\s*\d+ of \d+ planned points[^)]*\)?\s*$")


def _status_band(
    draw: ImageDraw.ImageDraw,
    observation: Mapping[str, Any],
    style: _Style,
    size: tuple[int, int],
    top: int,
) -> int:
    status = str(observation["status"])
    colour = _STATUS_COLOURS.get(status, plot.FRAME)
    face = style.subtitle
    height = plot.text_size(draw, "Ag", face)[1] + 6
    y0 = size[1] - height if style.small else top - 2
    words = band_text(observation, small=style.small)
    draw.rectangle((0, y0, size[0], y0 + height), fill=colour)
    plot.put_text(draw, (6, y0 + height / 2), plot.fit(draw, words, face, size[0] - 12), face,
                  fill=(255, 255, 255), anchor="lm")  # fmt: skip
    return height + (0 if style.small else 4)


def _placeholder(
    draw: ImageDraw.ImageDraw, observation: Mapping[str, Any], style: _Style, box: plot.Box
) -> None:
    left, top, right, bottom = box
    status = str(observation.get("status") or "ok")
    word = "EMPTY" if status in ("ok", "empty") else status.upper()
    colour = _STATUS_COLOURS.get(status, plot.FRAME)
    inset = 4 if style.small else 16
    draw.rectangle((left + inset, top + 2, right - inset, bottom - inset), outline=colour,
                   fill=(246, 246, 246), width=1 if style.small else 2)  # fmt: skip
    big = plot.font(14 if style.small else 30, bold=True)
    centre_x, centre_y = (left + right) / 2, (top + bottom) / 2
    plot.put_text(draw, (centre_x, centre_y - (6 if style.small else 14)), word, big,
                  fill=colour, anchor="mm")  # fmt: skip
    reason = str(observation.get("status_reason") or "no data to plot")
    face = style.subtitle if style.small else plot.font(13)
    line = plot.fit(draw, reason, face, right - left - 2 * inset - 8)
    plot.put_text(draw, (centre_x, centre_y + (8 if style.small else 18)), line, face,
                  fill=plot.INK, anchor="mm")  # fmt: skip


def _layout(count: int, size: tuple[int, int], top: int, bottom: int) -> list[plot.Box]:
    width = size[0]
    if count == 1:
        return [(0, top, width, bottom)]
    if count == 2:
        middle = (top + bottom) // 2
        return [(0, top, width, middle), (0, middle, width, bottom)]
    middle_y, middle_x = (top + bottom) // 2, width // 2
    boxes = [(0, top, middle_x, middle_y), (middle_x, top, width, middle_y),
             (0, middle_y, middle_x, bottom), (middle_x, middle_y, width, bottom)]  # fmt: skip
    return boxes[:count]


def _floats(values: Any) -> np.ndarray:
    return np.array(values, dtype=np.float64)


class _Frame:
    """One panel's plot rectangle and its data-to-pixel mapping."""

    def __init__(self, box: plot.Box, xr: tuple[float, float], yr: tuple[float, float]) -> None:
        self.box = box
        self.xr, self.yr = xr, yr

    def px(self, x: np.ndarray) -> np.ndarray:
        left, _, right, _ = self.box
        return left + (x - self.xr[0]) / (self.xr[1] - self.xr[0]) * (right - 1 - left)

    def py(self, y: np.ndarray) -> np.ndarray:
        _, top, _, bottom = self.box
        return bottom - 1 - (y - self.yr[0]) / (self.yr[1] - self.yr[0]) * (bottom - 1 - top)


def _axes(
    image: Image.Image,
    draw: ImageDraw.ImageDraw,
    box: plot.Box,
    style: _Style,
    x: tuple[tuple[float, float], Mapping[str, Any]],
    y: tuple[tuple[float, float], Mapping[str, Any]],
    right_reserve: int = 0,
) -> _Frame:
    """Lay out ticks and titles inside ``box``; return the plot frame (not yet drawn)."""
    (xr, xmeta), (yr, ymeta) = x, y
    left, top, right, bottom = box
    if style.small:
        return _Frame((left + 3, top + 1, right - 3 - right_reserve, bottom - 3), xr, yr)
    x_scale = plot.Scale(*xr, str(xmeta.get("unit") or ""))
    y_scale = plot.Scale(*yr, str(ymeta.get("unit") or ""))
    y_ticks, y_labels = _ticks(yr, y_scale, ymeta.get("levels"), 5)
    tick_h = plot.text_size(draw, "0", style.tick)[1]
    label_h = plot.text_size(draw, "Ag", style.label)[1]
    y_tick_w = max((plot.text_size(draw, t, style.tick)[0] for t in y_labels), default=0)
    frame = _Frame(
        (left + 10 + label_h + 6 + y_tick_w + 4, top + 8,
         right - 14 - right_reserve, bottom - (6 + tick_h + 6 + label_h + 6)),
        xr, yr,
    )  # fmt: skip
    fl, ft, fr, fb = frame.box
    x_count = max(3, (fr - fl) // 80)
    x_ticks, x_labels = _ticks(xr, x_scale, xmeta.get("levels"), x_count)
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
    x_title = plot.axis_title(str(xmeta.get("label") or ""), str(xmeta.get("name")), x_scale)
    y_title = plot.axis_title(str(ymeta.get("label") or ""), str(ymeta.get("name")), y_scale)
    plot.put_text(draw, ((fl + fr) / 2, bottom - 6), plot.fit(draw, x_title, style.label,
                  right - left - 10), style.label, anchor="md")  # fmt: skip
    plot.put_vertical_text(image, (left + 8 + label_h // 2, (ft + fb) // 2),
                           plot.fit(draw, y_title, style.label, fb - ft), style.label)  # fmt: skip
    return frame


def _ticks(
    vrange: tuple[float, float], scale: plot.Scale, levels: Any, count: int
) -> tuple[list[float], list[str]]:
    if levels:
        ticks = [float(k) for k in range(len(levels)) if vrange[0] <= k <= vrange[1]]
        return ticks, [str(levels[int(k)]) for k in ticks]
    ticks = plot.nice_ticks(vrange[0], vrange[1], count)
    return ticks, plot.tick_labels(ticks, scale)


def _trace(
    image: Image.Image,
    draw: ImageDraw.ImageDraw,
    box: plot.Box,
    dep: Mapping[str, Any],
    style: _Style,
    colour: tuple[int, int, int],
) -> None:
    axis = dep["axes"][0]
    x, y = _floats(axis["values"]), _floats(dep["values"])
    xr, yr = plot.data_range(x), plot.data_range(y)
    if xr is None or yr is None:
        _panel_message(draw, box, style, "no finite data")
        return
    levels = dep.get("levels")
    yr = (-0.5, len(levels) - 0.5) if levels else plot.padded(*yr, 0.06)
    if axis.get("levels"):
        xr = (-0.5, len(axis["levels"]) - 0.5)
    frame = _axes(image, draw, box, style, (xr, axis), (yr, dep))
    _ink_trace(
        image, frame, x, y, style, colour, line=not levels, dots=bool(levels) or y.size <= 60
    )
    draw.rectangle(frame.box, outline=plot.FRAME)


_SUPERSAMPLE = 3


def _ink_trace(
    image: Image.Image,
    frame: _Frame,
    x: np.ndarray,
    y: np.ndarray,
    style: _Style,
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


def _heatmap(
    image: Image.Image,
    draw: ImageDraw.ImageDraw,
    box: plot.Box,
    dep: Mapping[str, Any],
    style: _Style,
) -> None:
    rows_axis, cols_axis = dep["axes"]
    rows, cols = _floats(rows_axis["values"]), _floats(cols_axis["values"])
    grid = _floats(dep["values"])
    vrange = plot.data_range(grid) if grid.size else None
    if vrange is None or grid.ndim != 2 or rows.size == 0 or cols.size == 0:
        _panel_message(draw, box, style, "no finite data")
        return
    if dep.get("levels"):
        vrange = (-0.5, len(dep["levels"]) - 0.5)
    row_edges, col_edges = plot.cell_edges(rows), plot.cell_edges(cols)
    yr = (float(row_edges[0]), float(row_edges[-1]))
    xr = (float(col_edges[0]), float(col_edges[-1]))
    bar_scale = plot.Scale(*vrange, str(dep.get("unit") or ""))
    bar_ticks, bar_labels = _ticks(vrange, bar_scale, dep.get("levels"), 5)
    reserve = 0
    if not style.small:
        label_h = plot.text_size(draw, "Ag", style.label)[1]
        bar_w = max((plot.text_size(draw, t, style.tick)[0] for t in bar_labels), default=0)
        reserve = 12 + 14 + 6 + bar_w + 8 + label_h
    frame = _axes(image, draw, box, style, (xr, cols_axis), (yr, rows_axis), reserve)
    fl, ft, fr, fb = frame.box
    if fr - fl < 2 or fb - ft < 2:
        return
    image.paste(plot.heatmap_pixels(grid, rows, cols, (fr - fl, fb - ft), vrange), (fl, ft))
    draw.rectangle((fl - 1, ft - 1, fr, fb), outline=plot.FRAME)
    if style.small:
        return
    bx0, bx1 = fr + 12, fr + 26
    image.paste(plot.colour_bar(fb - ft, bx1 - bx0), (bx0, ft))
    draw.rectangle((bx0 - 1, ft - 1, bx1, fb), outline=plot.FRAME)
    span = vrange[1] - vrange[0]
    for value, text in zip(bar_ticks, bar_labels, strict=True):
        py = fb - 1 - (value - vrange[0]) / span * (fb - 1 - ft)
        draw.line((bx1, py, bx1 + 4, py), fill=plot.FRAME)
        plot.put_text(draw, (bx1 + 6, py), text, style.tick, anchor="lm")
    title = plot.axis_title(str(dep.get("label") or ""), str(dep.get("name")), bar_scale)
    label_h = plot.text_size(draw, "Ag", style.label)[1]
    plot.put_vertical_text(image, (box[2] - 6 - label_h // 2, (ft + fb) // 2),
                           plot.fit(draw, title, style.label, fb - ft), style.label)  # fmt: skip


def _panel_message(draw: ImageDraw.ImageDraw, box: plot.Box, style: _Style, message: str) -> None:
    left, top, right, bottom = box
    draw.rectangle((left + 4, top + 4, right - 5, bottom - 5), outline=plot.GRID)
    plot.put_text(draw, ((left + right) / 2, (top + bottom) / 2), message, style.label,
                  fill=plot.FRAME, anchor="mm")  # fmt: skip
