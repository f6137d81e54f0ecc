"""Downsampling that keeps extremes, for exploring a run in the browser (design §7.7).

Pure numpy, no I/O, no trio: the helper process that reads the database calls these
(:mod:`examples.preview.child.run_data`), so the work stays off the server's event loop.

* :func:`trace_extremes` cuts a 1-D trace into at most ``buckets`` runs of consecutive
  samples (acquisition order) and keeps, from each, its lowest and its highest finite
  sample, in their original order: at most ``2 * buckets`` points, every one a real
  sample, and the trace's global minimum and maximum always among them, so a one-sample
  spike in a 400 000-point trace is still drawn at its true height.
* :func:`grid_blocks` shrinks a 2-D grid by whole blocks of cells until each side is at
  most ``max_side``, and keeps each block's **mean**, **min** and **max** (NaN-aware):
  the heat map shows the mean (the landscape, with noise averaged rather than biased
  upwards or downwards), the readout shows the block's min..max, so no extreme hides.

Missing and non-finite values (NaN, ±Inf) are never a bucket's extreme; a bucket or a
block with no finite value keeps NaN, a gap. :func:`json_numbers` writes NaN and ±Inf
as JSON ``null``.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

__all__ = ["Blocks", "grid_blocks", "json_numbers", "trace_extremes"]


def trace_extremes(y: np.ndarray, buckets: int) -> np.ndarray:
    """Indices of the samples of ``y`` to keep: each bucket's min and max (module doc).

    Args:
        y: The trace's values (1-D floats), in acquisition order.
        buckets: Most buckets (at least 1); the trace is cut into
            ``ceil(len(y) / ceil(len(y) / buckets))`` buckets of equal size (the last
            one shorter).

    Returns:
        Ascending indices into ``y``: at most ``2 * buckets``; all of them when
        ``len(y) <= 2 * buckets``. A bucket with no finite value keeps its first sample.

    Raises:
        ValueError: ``buckets`` is below 1 or ``y`` is not 1-D.
    """
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D, got {y.ndim} dimensions")
    n = y.size
    if n <= 2 * buckets:
        return np.arange(n, dtype=np.int64)
    size = math.ceil(n / buckets)
    count = math.ceil(n / size)
    padded = np.full(count * size, np.nan)
    padded[:n] = y
    blocks = padded.reshape(count, size)
    finite = np.isfinite(blocks)
    low = np.argmin(np.where(finite, blocks, np.inf), axis=1)
    high = np.argmax(np.where(finite, blocks, -np.inf), axis=1)
    # A bucket without a finite value: argmin/argmax give 0, its first sample (a gap).
    starts = np.arange(count, dtype=np.int64) * size
    keep = np.concatenate([starts + low, starts + high])
    return np.unique(keep[keep < n])  # sorted: the original order; one when min is max


class Blocks(NamedTuple):
    """A grid reduced by :func:`grid_blocks`: block means, minima and maxima.

    A named tuple, not an attrs class: helper processes import no attrs (design §3.9).
    """

    axis0: np.ndarray
    """Row centres (the mean setpoint of each block of rows), ascending."""
    axis1: np.ndarray
    """Column centres, ascending."""
    mean: np.ndarray
    """Each block's mean of its finite cells (NaN: none), shape ``(rows, columns)``."""
    low: np.ndarray
    """Each block's smallest finite cell (NaN: none)."""
    high: np.ndarray
    """Each block's largest finite cell (NaN: none)."""
    factors: tuple[int, int]
    """Cells per block along rows and columns; ``(1, 1)``: the grid as it was."""


def grid_blocks(axis0: np.ndarray, axis1: np.ndarray, grid: np.ndarray, max_side: int) -> Blocks:
    """Shrink ``grid`` by whole blocks until each side is at most ``max_side`` (module doc).

    Args:
        axis0: Row setpoints, ascending (``len == grid.shape[0]``).
        axis1: Column setpoints, ascending (``len == grid.shape[1]``).
        grid: The values, NaN where missing.
        max_side: Most rows, and most columns, of the result (at least 1).

    Returns:
        The blocks; ``ceil(rows / f0)`` by ``ceil(columns / f1)`` with the smallest
        factors ``f0 = ceil(rows / max_side)`` and ``f1 = ceil(columns / max_side)``.

    Raises:
        ValueError: ``max_side`` is below 1, or the shapes do not match.
    """
    if max_side < 1:
        raise ValueError(f"max_side must be at least 1, got {max_side}")
    if grid.ndim != 2 or grid.shape != (axis0.size, axis1.size):
        raise ValueError(f"grid shape {grid.shape} does not match the axes")
    n0, n1 = grid.shape
    f0 = max(1, math.ceil(n0 / max_side))
    f1 = max(1, math.ceil(n1 / max_side))
    if f0 == 1 and f1 == 1:
        cells = np.where(np.isfinite(grid), grid, np.nan)  # ±Inf is no value, as below
        return Blocks(axis0=axis0, axis1=axis1, mean=cells, low=cells, high=cells, factors=(1, 1))
    m0, m1 = math.ceil(n0 / f0), math.ceil(n1 / f1)
    padded = np.full((m0 * f0, m1 * f1), np.nan)
    padded[:n0, :n1] = grid
    cells = padded.reshape(m0, f0, m1, f1)
    finite = np.isfinite(cells)
    counts = finite.sum(axis=(1, 3))
    sums = np.where(finite, cells, 0.0).sum(axis=(1, 3))
    low = np.where(finite, cells, np.inf).min(axis=(1, 3))
    high = np.where(finite, cells, -np.inf).max(axis=(1, 3))
    empty = counts == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        # Clipped: rounding must never put a mean outside its block's own range.
        mean = np.where(empty, np.nan, np.clip(sums / np.maximum(counts, 1), low, high))
    return Blocks(
        axis0=_axis_blocks(axis0, f0),
        axis1=_axis_blocks(axis1, f1),
        mean=mean,
        low=np.where(empty, np.nan, low),
        high=np.where(empty, np.nan, high),
        factors=(f0, f1),
    )


def _axis_blocks(values: np.ndarray, factor: int) -> np.ndarray:
    if factor == 1:
        return values
    padded = np.full(math.ceil(values.size / factor) * factor, np.nan)
    padded[: values.size] = values
    blocks = padded.reshape(-1, factor)
    finite = np.isfinite(blocks)
    with np.errstate(invalid="ignore", divide="ignore"):
        centres: np.ndarray = np.where(finite, blocks, 0.0).sum(axis=1) / np.maximum(
            finite.sum(axis=1), 1
        )
    return np.where(finite.any(axis=1), centres, np.nan)


def json_numbers(values: np.ndarray, digits: int = 7) -> list[Any]:
    """A 1-D float array as a JSON list: ``digits`` significant digits, NaN/±Inf → ``null``.

    JSON has no NaN or infinity; ``null`` is the explicit "no value here" (a gap).
    """
    fmt = f"{{:.{digits}g}}"
    return [float(fmt.format(v)) if math.isfinite(v) else None for v in values.tolist()]
