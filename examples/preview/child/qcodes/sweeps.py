"""What a run's setpoints say about its sweep: spacing, planned range, slices (design §7.2).

Pure numpy, no SQLite, no trio; :mod:`examples.preview.child.qcodes.shaping` calls these while
it builds an observation.

* :func:`spacing`: whether the setpoints were swept evenly on a linear or on a
  logarithmic scale (a log-spaced ``do1d`` gives ``"log"``), so the renderer can pick
  its axis from the sweep and not only from the numbers.
* :func:`planned_range`: the range a sweep will cover once it has all its planned
  points, extrapolated from its even steps so far; a live run's axis then stays put
  while it is written.
* :func:`slice_table`: the distinct combinations of the outer setpoints of a run with
  more than two sweep dimensions, in ascending order: each one is a 2-D slice.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .observation import clusters

__all__ = ["SPACING_TOLERANCE", "describe_slice", "planned_range", "slice_table", "spacing"]

#: Steps are "even" when each differs from the median step by at most this fraction.
SPACING_TOLERANCE = 1e-3


def _distinct_in_order(values: np.ndarray) -> np.ndarray:
    """Finite values with consecutive repeats removed (a setpoint held for many rows)."""
    finite: np.ndarray = values[np.isfinite(values)]
    if finite.size == 0:
        return finite
    keep = np.concatenate([[True], np.diff(finite) != 0])
    distinct: np.ndarray = finite[keep]
    return distinct


def _even(steps: np.ndarray) -> bool:
    if steps.size == 0:
        return False
    median = float(np.median(steps))
    if median == 0:
        return False
    return bool(np.all(np.abs(steps - median) <= SPACING_TOLERANCE * abs(median)))


def spacing(values: np.ndarray) -> str:
    """How a setpoint was swept: ``"linear"``, ``"log"`` or ``"irregular"``.

    Args:
        values: The setpoint values in acquisition order (repeats allowed: an outer
            axis repeats each value for a whole inner line), or ascending grid centres.

    Returns:
        ``"linear"`` for equal steps; ``"log"`` for equal ratios between values of one
        sign (at least three distinct values, and not also linear); ``"irregular"``
        otherwise, and for fewer than three distinct values.
    """
    distinct = _distinct_in_order(np.asarray(values, dtype=np.float64))
    if distinct.size < 3:
        return "irregular"
    if _even(np.diff(distinct)):
        return "linear"
    one_sign = bool(np.all(distinct > 0) or np.all(distinct < 0))
    if one_sign and _even(np.diff(np.log(np.abs(distinct)))):
        return "log"
    return "irregular"


def planned_range(values: np.ndarray, planned: int | None) -> list[float] | None:
    """The range a sweep covers once it has ``planned`` distinct values, or None.

    Extrapolated from the even steps seen so far (linear or logarithmic, see
    :func:`spacing`); None when the sweep is irregular, has fewer than two distinct
    values, already has all its planned values (its data range is then the range), or
    would end beyond the float range.
    """
    distinct = _distinct_in_order(np.asarray(values, dtype=np.float64))
    if planned is None or planned < 2 or distinct.size < 2 or distinct.size >= planned:
        return None
    kind = spacing(distinct) if distinct.size >= 3 else "linear"
    first = float(distinct[0])
    try:  # a planned count from the run description may be any size
        if kind == "linear":
            step = float(np.median(np.diff(distinct)))
            last = first + step * (planned - 1)
        elif kind == "log":
            ratio = float(np.exp(np.median(np.diff(np.log(np.abs(distinct))))))
            last = first * ratio ** (planned - 1)
        else:
            return None
    except OverflowError:
        return None
    if not math.isfinite(last):
        return None
    return [float(f"{v:.10g}") for v in (min(first, last), max(first, last))]


def slice_table(outer: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The 2-D slices of a run with more than two sweep dimensions.

    Args:
        outer: The values of each outer setpoint (all but the last two), one array per
            setpoint, outermost first, all of one length (one entry per point).

    Returns:
        ``(combos, index)``: ``combos[k]`` holds the outer setpoint values of slice
        ``k`` (slices in ascending order, outermost setpoint first) and ``index[i]``
        the slice of point ``i`` (-1 for a point with a non-finite outer setpoint).
    """
    count = outer[0].size if outer else 0
    finite = np.ones(count, dtype=bool)
    for values in outer:
        finite &= np.isfinite(values)
    ids = []
    centres = []
    for values in outer:
        if finite.any():
            centre, index = clusters(values[finite])
        else:
            centre, index = np.array([]), np.array([], dtype=np.int64)
        centres.append(centre)
        ids.append(index)
    index = np.full(count, -1, dtype=np.int64)
    if not finite.any():
        return np.zeros((0, len(outer))), index
    keys = np.stack(ids, axis=1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    index[finite] = inverse.reshape(-1)
    combos = np.stack([centres[k][unique[:, k]] for k in range(len(outer))], axis=1)
    return combos, index


def describe_slice(combo: np.ndarray, infos: list[Any], index: int, count: int) -> dict[str, Any]:
    """The JSON description of one slice: which it is and its fixed setpoint values.

    Args:
        combo: The outer setpoint values of the slice.
        infos: The outer setpoints'
            :class:`~examples.preview.child.qcodes.rundescription.ParamInfo`.
        index: The slice's number, from 0.
        count: How many slices the run has.
    """
    fixed = [
        {
            "name": info.name,
            "label": info.label,
            "unit": info.unit,
            "value": float(f"{value:.10g}") if math.isfinite(value) else None,
        }
        for info, value in zip(infos, combo.tolist(), strict=True)
    ]
    return {"index": index, "count": count, "fixed": fixed}
