"""Drawing primitives for :mod:`~examples.preview.child.drawing.render`: fonts, ticks, axes, plots.

Pillow and numpy only. Everything here is deterministic: the same inputs give the same
pixels.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from . import glyphs
from .viridis import VIRIDIS_RGB8

Font = ImageFont.FreeTypeFont | ImageFont.ImageFont
Box = tuple[int, int, int, int]  # left, top, right, bottom (pixels, right/bottom exclusive)

BACKGROUND = (255, 255, 255)
INK = (34, 34, 34)
FRAME = (120, 120, 120)
GRID = (232, 232, 232)
MISSING = (214, 214, 214)
LINE_COLOURS = ((31, 119, 180), (214, 39, 40), (44, 160, 44), (255, 127, 14))

#: Fonts tried in order; Pillow also searches the system font folders for a bare name.
_FONT_FILES = (
    "DejaVuSans.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
)
_BOLD_FILES = (
    "DejaVuSans-Bold.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans-Bold.ttf",
    "/usr/share/fonts/TTF/DejaVuSans-Bold.ttf",
)
# Pillow's built-in font (Aileron) has no Greek letters and no micro sign; when it is
# the only font, such characters are spelled out so a label never shows tofu boxes.
_ASCII_NAMES = {
    "Ω": "Ohm", "µ": "u", "μ": "u", "ε": "eps", "°": "deg", "\u2212": "-", "…": "...",
    "\u00d7": "x", "·": "-", "⁻": "^-", "⁰": "0", "¹": "1", "²": "2", "³": "3", "⁴": "4",
    "⁵": "5", "⁶": "6", "⁷": "7", "⁸": "8", "⁹": "9", "|": "|",
}  # fmt: skip


@functools.lru_cache(maxsize=8)
def _find_font(bold: bool) -> str | None:
    for candidate in _BOLD_FILES if bold else _FONT_FILES:
        try:
            found = ImageFont.truetype(candidate, 10)
        except OSError:
            continue
        # Pillow resolves a bare name in the system font folders: keep the real path,
        # whose cmap says which characters it can draw (``glyphs.covered``).
        return str(getattr(found, "path", candidate))
    return None


def font_family() -> str:
    """The font file in use, or ``"pillow-default"`` (labels then spell out Ω, µ, ε)."""
    return _find_font(False) or "pillow-default"


@functools.lru_cache(maxsize=64)
def font(size: int, bold: bool = False) -> Font:
    """A FreeType font of ``size`` pixels: DejaVu Sans when installed, else Pillow's."""
    path = _find_font(bold) or _find_font(False)
    if path is not None:
        return ImageFont.truetype(path, size)
    try:
        return ImageFont.load_default(size=size)  # FreeType-based since Pillow 10.1
    except TypeError:  # pragma: no cover - Pillow 10.0: a fixed-size bitmap font
        return ImageFont.load_default()


def text(value: str, face: Font | None = None) -> str:
    """``value`` made drawable with the font in use (see :func:`font_family`).

    A character the font has no glyph for (an emoji, in DejaVu Sans) becomes the
    visible replacement mark :data:`~examples.preview.child.drawing.glyphs.REPLACEMENT`,
    never the font's empty box.
    """
    path = getattr(face, "path", None) or _find_font(False)
    return _drawable(value, None if path is None else str(path))


# Tick labels, titles and their measurements repeat from picture to picture (the same
# few hundred strings in a few fonts); measuring and checking them each time was about
# a sixth of the drawing (design §5.4), so both are kept, bounded.
@functools.lru_cache(maxsize=4096)
def _drawable(value: str, path: str | None) -> str:
    if path is not None:
        return glyphs.drawable(value, path)
    return "".join(_ASCII_NAMES.get(ch, ch if ch.isascii() else "?") for ch in value)


_SIZES: dict[tuple[str, Font, str], tuple[int, int]] = {}
_MAX_SIZES = 4096


def text_size(draw: ImageDraw.ImageDraw, value: str, face: Font) -> tuple[int, int]:
    """Width and height in pixels of one line of text."""
    shown = text(value, face)
    key = (shown, face, draw.fontmode)
    size = _SIZES.get(key)
    if size is None:
        left, top, right, bottom = draw.textbbox((0, 0), shown, font=face)
        if len(_SIZES) >= _MAX_SIZES:
            _SIZES.clear()
        size = _SIZES[key] = (int(right - left), int(bottom - top))
    return size


def fit(draw: ImageDraw.ImageDraw, value: str, face: Font, width: int) -> str:
    """``value`` cut with an ellipsis so that it is at most ``width`` pixels wide."""
    if text_size(draw, value, face)[0] <= width:
        return value
    while value and text_size(draw, value + "…", face)[0] > width:
        value = value[:-1]
    return value + "…" if value else ""


def put_text(
    draw: ImageDraw.ImageDraw,
    xy: tuple[float, float],
    value: str,
    face: Font,
    *,
    fill: tuple[int, int, int] = INK,
    anchor: str = "la",
) -> None:
    """Draw one line of text at ``xy`` with a Pillow ``anchor`` (e.g. ``"mm"``)."""
    draw.text(xy, text(value, face), font=face, fill=fill, anchor=anchor)


def put_vertical_text(image: Image.Image, centre: tuple[int, int], value: str, face: Font) -> None:
    """Draw text rotated 90° counter-clockwise, centred on ``centre``."""
    probe = ImageDraw.Draw(image)
    width, height = text_size(probe, value, face)
    if width <= 0:
        return
    strip = Image.new("L", (width + 4, height + 6), 0)
    ImageDraw.Draw(strip).text(
        ((width + 4) / 2, (height + 6) / 2), text(value, face), font=face, fill=255, anchor="mm"
    )
    rotated = strip.rotate(90, expand=True)
    ink = Image.new("RGB", rotated.size, INK)
    x = centre[0] - rotated.size[0] // 2
    y = centre[1] - rotated.size[1] // 2
    image.paste(ink, (x, y), rotated)


# -- numbers and units ---------------------------------------------------------------

_PREFIXES = {-15: "f", -12: "p", -9: "n", -6: "µ", -3: "m", 0: "", 3: "k", 6: "M", 9: "G",
             12: "T"}  # fmt: skip
_PREFIXABLE = frozenset(
    {"V", "A", "Hz", "s", "W", "Ω", "F", "H", "T", "K", "S", "m", "g", "J", "eV", "Pa",
     "N", "C", "Ohm", "ohm"}
)  # fmt: skip
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


class Scale:
    """How an axis shows its numbers: a power of ten folded into the unit's prefix.

    ``factor`` multiplies data values into displayed values; ``unit`` is the label's
    unit text (e.g. ``"mV"``, ``"GHz"``, ``"\u00d710⁻³"``).
    """

    def __init__(self, lo: float, hi: float, unit: str) -> None:
        biggest = max(abs(lo), abs(hi))
        exponent = 0
        if biggest > 0 and math.isfinite(biggest):
            e = math.floor(math.log10(biggest))
            exponent = 0 if e == -1 or abs(e) > 300 else 3 * math.floor(e / 3)
        if unit in _PREFIXABLE and exponent in _PREFIXES:
            self.factor = 10.0**-exponent
            self.unit = _PREFIXES[exponent] + unit
        elif exponent and (biggest >= 1e4 or biggest < 1e-2):
            # Beyond the prefixes (1e15 V, 1e-30 A) as a power of ten: a prefix kept
            # at its end would make labels hundreds of digits wide.
            self.factor = 10.0**-exponent
            power = f"\u00d710{str(exponent).translate(_SUPERSCRIPT)}"
            self.unit = f"{power} {unit}".strip()
        else:
            self.factor = 1.0
            self.unit = unit


def axis_title(label: str, name: str, scale: Scale) -> str:
    """``"Label (unit)"``, falling back to the parameter name when there is no label."""
    base = label or name
    return f"{base} ({scale.unit})" if scale.unit else base


def fit_title(draw: ImageDraw.ImageDraw, label: str, unit: str, face: Font, width: int) -> str:
    """``"Label (unit)"`` within ``width`` pixels: the label is shortened, never the unit.

    A unit read wrongly is a factor of 1000 wrong, a shortened label only less
    descriptive; when even ``"… (unit)"`` does not fit, the unit alone is kept.
    """
    suffix = f" ({unit})" if unit else ""
    whole = label + suffix
    if text_size(draw, whole, face)[0] <= width or not suffix:
        return fit(draw, whole, face, width)
    room = width - text_size(draw, suffix, face)[0]
    short = fit(draw, label, face, room) if room > 0 else ""
    if not short or short == "…":
        return f"({unit})"
    return short + suffix


def quantity(value: object, unit: str) -> str:
    """One value with its unit and an SI prefix, e.g. ``20 mK``, ``1 T``."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return f"? {unit}".strip()
    scale = Scale(float(value), float(value), unit)
    shown = f"{value * scale.factor:.4g}".replace("-", "\u2212")
    return f"{shown} {scale.unit}".strip()


def nice_ticks(lo: float, hi: float, count: int) -> list[float]:
    """About ``count`` round tick values (steps of 1, 2 or 5 times 10^k) within [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo or count < 1:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(1, count)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    k = 0
    while first + k * step <= hi + step * 1e-9 and k < 100:
        ticks.append(first + k * step)
        k += 1
    return ticks


def tick_labels(ticks: list[float], scale: Scale) -> list[str]:
    """Tick texts with just enough decimals to tell neighbours apart."""
    shown = [t * scale.factor for t in ticks]
    step = min((abs(b - a) for a, b in itertools.pairwise(shown)), default=0.0)
    decimals = 0 if step <= 0 else max(0, min(6, -math.floor(math.log10(step) + 1e-9)))
    if step > 0 and round(step, decimals) != round(step, decimals + 1):
        decimals += 1
    labels = [f"{v:.{decimals}f}" for v in shown]
    return [("0" if float(lab) == 0 else lab).replace("-", "\u2212") for lab in labels]


def data_range(values: np.ndarray) -> tuple[float, float] | None:
    """Finite min and max of ``values``, widened when they are equal; None if none."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None
    lo, hi = float(finite.min()), float(finite.max())
    if hi <= lo:
        pad = abs(lo) * 0.05 or 1.0
        return lo - pad, hi + pad
    return lo, hi


def padded(lo: float, hi: float, fraction: float = 0.04) -> tuple[float, float]:
    """``[lo, hi]`` widened by ``fraction`` of its span on each side."""
    pad = (hi - lo) * fraction
    return lo - pad, hi + pad


# -- colour map ------------------------------------------------------------------------

#: The exact 256-entry viridis table, as 8-bit RGB (:mod:`~examples.preview.child.drawing.viridis`).
LUT = VIRIDIS_RGB8


def colourise(grid: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Map a float grid to RGB (uint8, shape ``grid.shape + (3,)``); NaN → grey.

    As matplotlib's colormaps do: ``[lo, hi]`` is cut into 256 equal bins, one per
    table entry (``hi`` itself falls in the last one).
    """
    finite = np.isfinite(grid)
    span = hi - lo if hi > lo else 1.0
    with np.errstate(invalid="ignore"):
        scaled = (np.where(finite, grid, lo) - lo) / span * len(LUT)
    index = np.clip(np.floor(scaled), 0, len(LUT) - 1).astype(np.int64)
    rgb = LUT[index]
    rgb[~finite] = MISSING
    return rgb


def cell_edges(centres: np.ndarray) -> np.ndarray:
    """Boundaries between ascending cell centres, with half-steps added at both ends."""
    if centres.size == 1:
        half = abs(float(centres[0])) * 0.05 or 0.5
        return np.array([centres[0] - half, centres[0] + half])
    mids = (centres[:-1] + centres[1:]) / 2
    first = centres[0] - (mids[0] - centres[0])
    last = centres[-1] + (centres[-1] - mids[-1])
    return np.concatenate([[first], mids, [last]])


def heatmap_pixels(
    grid: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    size: tuple[int, int],
    vrange: Any,
    ranges: tuple[tuple[float, float], tuple[float, float]] | None = None,
) -> Image.Image:
    """Resample a grid onto ``size`` pixels (width, height), honouring uneven axes.

    Row 0 of ``grid`` (the lowest ``rows`` value) is drawn at the bottom. ``ranges``
    (x, y) is the span of the frame when wider than the cells (a live run's planned
    sweep); pixels outside every cell stay the background colour.
    """
    width, height = size
    row_edges, col_edges = cell_edges(rows), cell_edges(cols)
    (x0, x1), (y0, y1) = ranges or (
        (col_edges[0], col_edges[-1]),
        (row_edges[0], row_edges[-1]),
    )
    xs = x0 + (np.arange(width) + 0.5) / width * (x1 - x0)
    ys = y1 - (np.arange(height) + 0.5) / height * (y1 - y0)
    col_index = np.clip(np.searchsorted(col_edges, xs) - 1, 0, cols.size - 1)
    row_index = np.clip(np.searchsorted(row_edges, ys) - 1, 0, rows.size - 1)
    rgb = colourise(grid, *vrange)[row_index][:, col_index]
    outside_x = (xs < col_edges[0]) | (xs > col_edges[-1])
    outside_y = (ys < row_edges[0]) | (ys > row_edges[-1])
    rgb[outside_y, :] = BACKGROUND
    rgb[:, outside_x] = BACKGROUND
    return Image.fromarray(np.ascontiguousarray(rgb), "RGB")


def colour_bar(height: int, width: int) -> Image.Image:
    """A vertical gradient strip: the top is the highest value."""
    index = np.linspace(255, 0, height).round().astype(np.int64)
    rgb = np.repeat(LUT[index][:, None, :], width, axis=1)
    return Image.fromarray(np.ascontiguousarray(rgb), "RGB")


def polyline_segments(px: np.ndarray, py: np.ndarray) -> list[list[tuple[float, float]]]:
    """Split a pixel path at non-finite points into drawable segments."""
    ok = np.isfinite(px) & np.isfinite(py)
    segments: list[list[tuple[float, float]]] = []
    current: list[tuple[float, float]] = []
    for good, x, y in zip(ok.tolist(), px.tolist(), py.tolist(), strict=True):
        if good:
            current.append((x, y))
        elif current:
            segments.append(current)
            current = []
    if current:
        segments.append(current)
    return segments
