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
is a heatmap (viridis, matplotlib's exact table) with the outer setpoint vertical,
lowest value at the bottom; a run with more than two sweep dimensions is drawn as the
2-D slice the observation holds, named above the map ("magnet_field = 1 T · slice 6 of
6"). Axes are logarithmic or symmetric-log where the sweep or the data call for it
(:mod:`~examples.preview.child.drawing.scales`); a live run's setpoint axis spans its planned
sweep. An axis title is shortened in its label, never in its unit; a panel with no
finite data names its parameter. An empty run gives a placeholder with the status
text; a run that ended with an exception ("EXCEPTION 73/200") or is not completed
("INCOMPLETE 120/200") is plotted with a coloured status band, so the partial data
stays visible; a completed run has none, whatever its points against its shape.

**The report.** Every PNG carries, in a ``tEXt`` chunk named :data:`REPORT_KEY`, the
JSON decisions behind the picture (:func:`report_of` reads it back): for each panel
its axes' scales and the reasons, their ranges and where the ranges came from
(``data`` or ``planned sweep``), the titles as drawn, the slice, or why the panel is
empty.
"""

from __future__ import annotations

import io
import json
import os
import re
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from PIL import Image, ImageDraw

from . import plotting as plot
from .encode import encode_png
from .image_kinds import KINDS as KINDS
from .image_kinds import MIME as MIME
from .image_kinds import RENDERER_VERSION as RENDERER_VERSION
from .image_kinds import REPORT_KEY as REPORT_KEY
from .panels import Style as _Style
from .panels import heatmap, trace
from .scales import SCALES

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "KINDS",
    "MIME",
    "RENDERER_VERSION",
    "REPORT_KEY",
    "render",
    "render_image",
    "render_png_with_report",
    "render_with_report",
    "report_of",
]


_OPTIONS = frozenset({"width", "height", "dependent", "max_panels", "transpose", "scale", "xscale"})
_XSCALES = ("auto", "linear", "log")
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
    """Draw one observation as a PNG, with its report (:func:`report_of`) inside.

    Args:
        observation: As returned by ``QcodesSource.read_run`` (JSON-compatible).
        kind: ``"thumbnail"`` or ``"preview"`` (:data:`KINDS`).
        options: Optional ``width``/``height`` (pixels, 48..2048), ``dependent`` (index
            or name of the one dependent to draw), ``max_panels`` (1..4),
            ``transpose`` (bool: draw 2-D maps with the outer setpoint horizontal, as
            QCoDeS's ``plot_dataset`` does; by default it is vertical), ``scale`` (the
            value axis or colour scale: ``auto``, ``linear``, ``log`` or ``symlog``) and
            ``xscale`` (the setpoint axes: ``auto``, ``linear`` or ``log``).
        check_cancel: Called between drawing stages; whatever it raises ends the
            drawing and propagates unchanged.

    Returns:
        PNG bytes.

    Raises:
        ValueError: unknown ``kind`` or option, or a malformed observation (the
            renderer actor reports it as ``RenderFailed``, code ``render_failed``).
    """
    return _png_and_report(observation, kind, options, check_cancel)[0]


def render_png_with_report(
    observation: Mapping[str, Any],
    kind: str,
    options: Mapping[str, Any] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> tuple[bytes, dict[str, Any]]:
    """As :func:`render`, and the report the PNG carries: what :func:`report_of` would
    read back out of it (JSON types), without reading the PNG again.

    Raises:
        ValueError: as :func:`render`.
    """
    png, text = _png_and_report(observation, kind, options, check_cancel)
    report: dict[str, Any] = json.loads(text)
    return png, report


def _png_and_report(
    observation: Mapping[str, Any],
    kind: str,
    options: Mapping[str, Any] | None,
    check_cancel: Callable[[], None] | None,
) -> tuple[bytes, str]:
    image, report = render_with_report(observation, kind, options, check_cancel)
    if check_cancel is not None:
        check_cancel()  # the encoding is a stage of its own (a few ms for a preview)
    text = json.dumps(report, sort_keys=True, ensure_ascii=True)
    return encode_png(image, {REPORT_KEY: text}), text


def report_of(png: bytes) -> dict[str, Any]:
    """The report that :func:`render` put into ``png``.

    Raises:
        ValueError: ``png`` is not a PNG with a report.
    """
    with Image.open(io.BytesIO(png)) as image:
        text = getattr(image, "text", {}).get(REPORT_KEY)
    if not isinstance(text, str):
        raise ValueError("the PNG carries no drawing report")
    report: dict[str, Any] = json.loads(text)
    return report


def render_image(
    observation: Mapping[str, Any],
    kind: str,
    options: Mapping[str, Any] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> Image.Image:
    """As :func:`render`, but return the Pillow image (RGB) instead of PNG bytes."""
    return render_with_report(observation, kind, options, check_cancel)[0]


def render_with_report(
    observation: Mapping[str, Any],
    kind: str,
    options: Mapping[str, Any] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> tuple[Image.Image, dict[str, Any]]:
    """As :func:`render_image`, and the drawing's report (see the module docstring)."""
    check = check_cancel or (lambda: None)
    options = options or {}
    width, height, choice, max_panels = _options(kind, options)
    transpose = options.get("transpose", False)
    if not isinstance(transpose, bool):
        raise ValueError(f"transpose must be true or false, got {transpose!r}")
    scales = (options.get("scale", "auto"), options.get("xscale", "auto"))
    if scales[0] not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scales[0]!r}")
    if scales[1] not in _XSCALES:
        raise ValueError(f"xscale must be one of {', '.join(_XSCALES)}, got {scales[1]!r}")
    check()
    try:
        if transpose:
            observation = _transposed(observation)
        return _draw(observation, kind, (width, height), (choice, max_panels), scales, check)
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise ValueError(f"malformed observation: {type(exc).__name__}: {exc}") from exc


def _transposed(observation: Mapping[str, Any]) -> dict[str, Any]:
    """The observation with every 2-D map's axes swapped (rows become columns)."""
    dependents = []
    for dep in observation["dependents"]:
        if dep["ndim"] == 2:
            grid = np.array(dep["values"], dtype=np.float64)
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


def _draw(
    observation: Mapping[str, Any],
    kind: str,
    size: tuple[int, int],
    which: tuple[Any, int],
    scales: tuple[str, str],
    check: Callable[[], None],
) -> tuple[Image.Image, dict[str, Any]]:
    choice, max_panels = which
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
    report: dict[str, Any] = {
        "kind": kind,
        "size": list(size),
        "renderer_version": RENDERER_VERSION,
        "font": os.path.basename(plot.font_family()),  # never a path (design §7.5)
        "panels": [],
    }
    if status in ("interrupted", "incomplete") and shown:
        band = _status_band(draw, observation, style, size, top)
        if style.small:
            bottom -= band
        else:
            top += band
    check()
    if not shown:
        _placeholder(draw, observation, style, (0, top, size[0], size[1]))
        return image, report
    for index, (dep, box) in enumerate(zip(shown, _layout(len(shown), size, top, bottom),
                                           strict=True)):  # fmt: skip
        colour = plot.LINE_COLOURS[index % len(plot.LINE_COLOURS)]
        if dep["ndim"] == 2:
            panel = heatmap(image, draw, box, dep, style, scales)
        else:
            panel = trace(image, draw, box, dep, style, colour, scales)
        report["panels"].append(panel)
        check()
    hidden = len(dependents) - len(shown)
    report["hidden_panels"] = hidden
    if hidden > 0 and not style.small:
        plot.put_text(draw, (size[0] - 6, size[1] - 4), f"+{hidden} more", style.tick,
                      anchor="rd")  # fmt: skip
    return image, report


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
    words = _BAND_WORDS.get(str(observation["status"]), str(observation["status"]).upper())
    points = [(d.get("points"), d.get("planned_points")) for d in observation["dependents"]]
    if points and points[0][1]:
        words = f"{words} {points[0][0]}/{points[0][1]}"
    if small:
        return words
    reason = _POINTS_NOTE.sub("", str(observation.get("status_reason") or ""))
    return f"{words}: {reason}" if reason else words


#: A status band's first word: a completed run that raised is not "interrupted" data.
_BAND_WORDS: Final = {"interrupted": "EXCEPTION", "incomplete": "INCOMPLETE"}

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
