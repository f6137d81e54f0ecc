"""A run's data for exploring it in the browser, bounded in bytes (design §7.7).

Runs in the helper process that reads the database (:mod:`examples.preview.child.helper`,
operation ``run_data``): no trio, only numpy and the pure modules it calls. From the
full-size series of :meth:`QcodesSource.read_series
<examples.preview.child.qcodes.source.QcodesSource.read_series>` it builds one JSON-ready
entry per plottable series:

* a 1-D trace keeps each bucket's min and max sample
  (:func:`~examples.preview.child.downsample.trace_extremes`, at most ``2 * buckets``
  points), ``x`` and ``values`` side by side;
* a 2-D map is put on its grid (:func:`~examples.preview.child.qcodes.observation.grid_2d`)
  and shrunk to at most ``side`` x ``side`` blocks
  (:func:`~examples.preview.child.downsample.grid_blocks`): ``values`` are block means, and
  ``low``/``high`` the block minima and maxima (empty when no cell was merged, so the
  grid is sent once), all row-major; a run with more than two sweep dimensions gives
  the slice asked for (``slice``, ``slice_count`` and ``slice_label`` say which), by
  default the slice of its newest point.

Missing and non-finite values are JSON ``null`` (``nonfinite`` counts them in the
source). When the JSON text would exceed ``max_bytes``, ``buckets`` and ``side`` are
halved until it fits; the answer says which were used and its size in bytes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from .downsample import grid_blocks, json_numbers, trace_extremes
from .drawing.panels import slice_caption
from .qcodes.observation import grid_2d
from .qcodes.rundescription import ParamInfo
from .qcodes.sweeps import describe_slice, slice_table

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["MIN_BUCKETS", "MIN_SIDE", "run_data"]

#: Smallest bucket count and map side the byte bound may shrink to.
MIN_BUCKETS = 16
MIN_SIDE = 8


def run_data(
    summary: dict[str, Any],
    series: list[dict[str, Any]],
    *,
    buckets: int,
    side: int,
    max_bytes: int,
    check_cancel: Callable[[], None],
    slice_index: int | None = None,
) -> dict[str, Any]:
    """The ``run_data`` answer of one run (see the module docstring).

    Args:
        summary: The run summary (``run_id``, ``name``, ``is_completed``...).
        series: Its plottable series at full size.
        buckets: Most buckets per 1-D trace.
        side: Most rows, and most columns, per 2-D map.
        max_bytes: Most bytes of the answer's compact JSON text.
        check_cancel: Called between series; raises to abandon the work.
        slice_index: For series with more than two setpoints, the 2-D slice to give
            (from 0; past the last: the last); None for the slice of the newest point.

    Returns:
        ``run_id``, ``name``, ``completed``, ``buckets``, ``side`` (as used), ``bytes``
        (the size of the answer's JSON text) and ``series``.
    """
    grids = [_grid(s, slice_index) if len(s["axes"]) >= 2 else None for s in series]
    while True:
        entries = []
        for item, grid in zip(series, grids, strict=True):
            check_cancel()
            entries.append(_trace(item, buckets) if grid is None else _map(item, grid, side))
        answer = {
            "run_id": int(summary["run_id"]),
            "name": str(summary.get("name") or ""),
            "completed": bool(summary.get("is_completed")),
            "buckets": buckets,
            "side": side,
            "series": entries,
        }
        size = len(json.dumps(answer, separators=(",", ":"), ensure_ascii=False).encode())
        size += len(str(size)) + len(',"bytes":')  # the field that says it
        if size <= max_bytes or (buckets <= MIN_BUCKETS and side <= MIN_SIDE):
            answer["bytes"] = size
            return answer
        # Never below the floors, nor above what was asked.
        buckets = min(buckets, max(MIN_BUCKETS, buckets // 2))
        side = min(side, max(MIN_SIDE, side // 2))


def _header(item: dict[str, Any]) -> dict[str, Any]:
    info = item["info"]
    values: np.ndarray = item["values"]
    return {
        "name": info.name,
        "label": info.label,
        "unit": "deg" if item["component"] == "phase" else info.unit,
        "component": item["component"],
        "levels": list(item["levels"] or []),
        "nonfinite": int(values.size - np.isfinite(values).sum()),
    }


def _axis(axis: dict[str, Any], values: np.ndarray) -> dict[str, Any]:
    info = axis["info"]
    return {
        "name": info.name,
        "label": info.label,
        "unit": info.unit,
        "levels": list(axis["levels"] or []),
        "values": json_numbers(values, 10),
    }


def _values(item: dict[str, Any]) -> np.ndarray:
    values: np.ndarray = item["values"].astype(np.float64)
    if item["component"] == "phase":
        degrees: np.ndarray = np.degrees(values)
        return degrees
    return values


def _trace(item: dict[str, Any], buckets: int) -> dict[str, Any]:
    y = _values(item)
    if item["axes"]:
        axis = item["axes"][0]
    else:  # a dependent without setpoints: plotted against its point number
        index = np.arange(y.size, dtype=np.float64)
        axis = {"info": ParamInfo(name="index", label="Point"), "values": index, "levels": None}
    keep = trace_extremes(y, buckets)
    return {
        **_header(item),
        "axes": [_axis(axis, axis["values"][keep])],
        "shape": [int(keep.size)],
        "source_shape": [int(y.size)],
        "values": json_numbers(y[keep]),
        "low": [],
        "high": [],
    }


def _grid(item: dict[str, Any], slice_index: int | None) -> tuple[Any, ...]:
    axes = item["axes"]
    values = _values(item)
    chosen: dict[str, Any] = {"slice": None, "slice_count": 0, "slice_label": ""}
    if len(axes) > 2:
        # More than two sweep dimensions: the slice asked for, else the newest point's.
        combos, index = slice_table([a["values"] for a in axes[:-2]])
        count = int(combos.shape[0])
        if slice_index is not None and count:
            picked = min(slice_index, count - 1)
        else:
            picked = (int(index[-1]) if index[-1] >= 0 else count - 1) if index.size else -1
        keep = index == picked
        if picked >= 0:
            described = describe_slice(
                combos[picked], [a["info"] for a in axes[:-2]], picked, count
            )
            label = slice_caption({"slice": described}, small=False) or ""
            chosen = {"slice": picked, "slice_count": count, "slice_label": label}
        axes = [{**a, "values": a["values"][keep]} for a in axes[-2:]]
        values = values[keep]
    outer, inner = axes
    axis0, axis1, grid, _ = grid_2d(outer["values"], inner["values"], values)
    return outer, inner, axis0, axis1, grid, chosen


def _map(item: dict[str, Any], gridded: tuple[Any, ...], side: int) -> dict[str, Any]:
    outer, inner, axis0, axis1, grid, chosen = gridded
    blocks = grid_blocks(axis0, axis1, grid, side)
    reduced = blocks.factors != (1, 1)
    return {
        **_header(item),
        "axes": [_axis(outer, blocks.axis0), _axis(inner, blocks.axis1)],
        "shape": [int(blocks.mean.shape[0]), int(blocks.mean.shape[1])],
        "source_shape": [int(grid.shape[0]), int(grid.shape[1])],
        "values": json_numbers(blocks.mean.ravel()),
        "low": json_numbers(blocks.low.ravel()) if reduced else [],
        "high": json_numbers(blocks.high.ravel()) if reduced else [],
        **chosen,
    }
