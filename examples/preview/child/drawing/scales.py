"""Axis scales: linear, logarithmic and symmetric-log, and when each is chosen (design §5.2).

Pure numpy. :func:`choose` decides an axis's scale from the sweep and the numbers, and
says why; an :class:`AxisScale` maps data values to the coordinate the renderer draws
in (linear in that coordinate) and gives the axis its ticks.

The rules (``auto``):

* a setpoint axis is logarithmic when the sweep was log-spaced (the reader's
  ``spacing``), or when its positive values span at least three decades;
* a value axis (or a map's colour scale) is logarithmic when its values are positive
  and span at least three decades (:data:`DECADES`), with the middle 80 % of them
  spread over at least two (:data:`SPREAD_DECADES`) — one dip towards zero does not
  make a log axis;
* it is symmetric-log when its values cross zero, their sizes span three decades the
  same way, and both signs reach at least two decades (:data:`SIDE_DECADES`) beyond
  the small values (noise around zero under one peak is not enough): linear within
  ``±threshold`` (a power of ten at the 10th percentile of the sizes), logarithmic
  beyond;
* otherwise linear. Text categories are always linear.

A size beyond :data:`DRAWABLE` (1e300), or other than zero below 1e-300, has no place
on any axis: like a value <= 0 on a log axis it is left out and counted (``hidden``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "DECADES",
    "DRAWABLE",
    "SCALES",
    "SIDE_DECADES",
    "SPREAD_DECADES",
    "AxisScale",
    "choose",
    "superscript",
]

#: The scale names an option may ask for.
SCALES = ("auto", "linear", "log", "symlog")
#: Decades that data must span (1st to 99th percentile) for a log or symlog axis.
DECADES = 3.0
#: Decades that the middle 80 % of the data must span as well.
SPREAD_DECADES = 2.0
#: Decades that each sign must reach above a symlog axis's threshold.
SIDE_DECADES = 2.0
#: Largest size an axis draws; a size beyond it, or (but zero) below its inverse, has
#: no place on any axis and is counted as hidden (its span would overflow a float).
DRAWABLE = 1e300

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def superscript(exponent: int) -> str:
    """``10`` to the power ``exponent`` as text, e.g. ``10⁻¹⁶``."""
    return "10" + str(exponent).translate(_SUPERSCRIPT)


def _decades(sizes: np.ndarray, low: float, high: float) -> float:
    lo, hi = np.percentile(sizes, [low, high])
    if lo <= 0 or hi <= 0:
        return 0.0
    return math.log10(hi) - math.log10(lo)  # hi / lo may overflow


def _spans_decades(sizes: np.ndarray) -> bool:
    """True if positive ``sizes`` span :data:`DECADES`, spread as the module says."""
    if sizes.size < 3:
        return False
    return _decades(sizes, 1, 99) >= DECADES and _decades(sizes, 10, 90) >= SPREAD_DECADES


class AxisScale:
    """One axis's scale: ``kind`` is ``linear``, ``log`` or ``symlog``.

    Args:
        kind: The scale.
        threshold: For ``symlog``, the size below which the axis is linear (> 0).
    """

    def __init__(self, kind: str, threshold: float = 1.0) -> None:
        self.kind = kind
        self.threshold = threshold

    def forward(self, values: np.ndarray) -> np.ndarray:
        """Data values to drawing coordinates (NaN where the scale has no place).

        No scale has a place for a size beyond :data:`DRAWABLE` or, other than zero,
        below its inverse: spans, ticks and prefixes of such numbers leave the float
        range.
        """
        values = np.asarray(values, dtype=np.float64)
        sizes = np.abs(values)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            placed = (sizes <= DRAWABLE) & ((sizes >= 1.0 / DRAWABLE) | (values == 0))
            if self.kind == "log":
                placed &= values > 0
                out = np.where(placed, np.log10(np.where(placed, values, 1.0)), np.nan)
            elif self.kind == "symlog":
                out = np.sign(values) * np.log10(1.0 + sizes / self.threshold)
                out = np.where(placed, out, np.nan)
            else:
                out = np.where(placed, values, np.nan)
        return out

    def inverse(self, coords: np.ndarray) -> np.ndarray:
        """Drawing coordinates back to data values."""
        coords = np.asarray(coords, dtype=np.float64)
        out: np.ndarray = coords
        with np.errstate(over="ignore"):  # a padded range's end may be beyond floats
            if self.kind == "log":
                out = np.power(10.0, coords)
            elif self.kind == "symlog":
                out = np.sign(coords) * (np.power(10.0, np.abs(coords)) - 1.0) * self.threshold
        return out

    def report(self) -> dict[str, Any]:
        """The JSON form of the scale for the renderer's report."""
        out: dict[str, Any] = {"scale": self.kind}
        if self.kind == "symlog":
            out["threshold"] = self.threshold
        return out

    def ticks(self, lo: float, hi: float, count: int) -> list[tuple[float, str]] | None:
        """Ticks ``(data value, label)`` between drawing coordinates ``lo`` and ``hi``.

        None for a linear scale (the caller uses round numbers and SI prefixes).
        """
        if self.kind == "log":
            return _log_ticks(lo, hi, count)
        if self.kind == "symlog":
            return self._symlog_ticks(lo, hi, count)
        return None

    def _symlog_ticks(self, lo: float, hi: float, count: int) -> list[tuple[float, str]]:
        base = round(math.log10(self.threshold))
        with np.errstate(over="ignore"):
            top = max(
                abs(float(self.inverse(np.array(lo)))), abs(float(self.inverse(np.array(hi))))
            )
        top = min(top, DRAWABLE)
        highest = math.floor(math.log10(top)) if top > 0 else base
        exponents = list(range(base, highest + 1))
        step = max(1, math.ceil(2 * len(exponents) / max(2, count - 1)))
        exponents = exponents[::-1][::step][::-1]
        values = [0.0]
        for k in exponents:
            values += [10.0**k, -(10.0**k)]
        picked = []
        for value in sorted(values):
            coord = float(self.forward(np.array(value)))
            if lo - 1e-9 <= coord <= hi + 1e-9:
                label = (
                    "0"
                    if value == 0
                    else ("\u2212" if value < 0 else "")
                    + superscript(round(math.log10(abs(value))))
                )
                picked.append((value, label))
        return picked


def _log_ticks(lo: float, hi: float, count: int) -> list[tuple[float, str]]:
    """Decades (and 2, 5 times them when fewer than two decades fit) within the range."""
    limit = round(math.log10(DRAWABLE))  # the padded range may reach past it
    first = max(-limit, math.ceil(lo - 1e-9))
    last = min(limit, math.floor(hi + 1e-9))
    exponents = list(range(first, last + 1))
    if len(exponents) >= 2:
        step = max(1, math.ceil(len(exponents) / max(2, count)))
        return [(10.0**k, superscript(k)) for k in exponents[::step]]
    ticks = []
    for k in range(max(-limit, math.floor(lo) - 1), min(limit, math.ceil(hi)) + 1):
        for mantissa in (1, 2, 5):
            value = mantissa * 10.0**k
            if lo - 1e-9 <= math.log10(value) <= hi + 1e-9:
                text = superscript(k) if mantissa == 1 else f"{mantissa}\u00d7{superscript(k)}"
                ticks.append((value, text))
    return ticks


def choose(
    values: np.ndarray, asked: str, *, spacing: str | None = None, categorical: bool = False
) -> tuple[AxisScale, str]:
    """Pick an axis's scale; return it and the reason, in words.

    Args:
        values: The axis's data values (NaN allowed).
        asked: ``auto`` or a scale name (:data:`SCALES`).
        spacing: For a setpoint axis, how it was swept (``linear``, ``log``,
            ``irregular``); None for a value axis.
        categorical: Text categories: always linear.

    Raises:
        ValueError: ``asked`` is not one of :data:`SCALES`.
    """
    if asked not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {asked!r}")
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if categorical:
        return AxisScale("linear"), "text categories"
    positive = finite.size > 0 and bool(np.all(finite > 0))
    if asked == "linear":
        return AxisScale("linear"), "asked"
    if asked == "log":
        if not np.any(finite > 0):
            return AxisScale("linear"), "asked for log, but no value is positive"
        return AxisScale("log"), "asked"
    if asked == "symlog":
        return AxisScale("symlog", _threshold(finite)), "asked"
    if spacing == "log" and positive:
        return AxisScale("log"), "log-spaced sweep"
    if spacing == "linear":
        return AxisScale("linear"), "linear sweep"
    if positive and _spans_decades(finite):
        return AxisScale("log"), f"values span ≥ {DECADES:g} decades"
    crosses = finite.size > 0 and finite.min() < 0 < finite.max()
    if crosses and spacing is None:
        sizes = np.abs(finite[finite != 0])
        threshold = _threshold(finite)
        reach = 10.0**SIDE_DECADES * threshold
        both = -finite.min() >= reach and finite.max() >= reach
        if both and _spans_decades(sizes):
            return AxisScale("symlog", threshold), (
                f"values cross zero and span ≥ {DECADES:g} decades"
            )
    return AxisScale("linear"), "linear data"


def _threshold(finite: np.ndarray) -> float:
    """The linear zone of a symlog axis: a power of ten at the 10th percentile of sizes."""
    sizes = np.abs(finite[finite != 0])
    if sizes.size == 0:
        return 1.0
    small = min(max(float(np.percentile(sizes, 10)), 1.0 / DRAWABLE), DRAWABLE)
    return 10.0 ** math.floor(math.log10(small))
