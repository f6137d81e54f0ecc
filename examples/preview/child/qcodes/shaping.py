"""Turn the decoded columns of each dependent into observation entries (design §7.2).

Called by :meth:`examples.preview.child.qcodes.source.QcodesSource.read_run` after the
rows are read.
Pure numpy; the layout of one entry is documented there.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import observation as obs
from .rundescription import ParamInfo, RunDescription
from .sweeps import describe_slice, planned_range, slice_table, spacing

#: Bounds (see :mod:`examples.preview.child.qcodes.source`).
MAX_TRACE_POINTS = 4096
MAX_GRID_SIDE = 256


def shape_dependents(
    raw: list[dict[str, Any]],
    description: RunDescription,
    *,
    max_values: int,
    slice_index: int | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Build the ``dependents`` list and the ``sizes`` dict of an observation.

    Args:
        raw: One dict per dependent from ``QcodesSource._read_dependent``.
        description: The run's parameters.
        max_values: Bound on the numbers in all entries together.
        slice_index: For a dependent with more than two setpoints, the 2-D slice to
            deliver (from 0, see :func:`~examples.preview.child.qcodes.sweeps.slice_table`);
            None for the slice of the newest point. A dependent with fewer slices gets
            its last one.
    """
    series = [s for item in raw for s in plot_series(item, description)]
    budget = max(64, max_values // max(1, len(series)))
    entries = [_entry(s, budget, slice_index) for s in series]
    delivered = sum(_count_values(e) for e in entries)
    sizes = {
        "rows_read": sum(item["rows"] for item in raw),
        "points": sum(e["points"] for e in entries),
        "values": delivered,
        "max_values": max_values,
        "downsampled": any(e["shape"] != e["source_shape"] for e in entries),
    }
    return entries, sizes


def plot_series(item: dict[str, Any], description: RunDescription) -> list[dict[str, Any]]:
    """Split one dependent into plottable real series (complex → magnitude and phase).

    Each series has ``info`` (the :class:`ParamInfo` shown), ``values`` (floats; text as
    level codes), ``levels``, ``component`` and ``axes`` (each ``info``, ``values``,
    ``levels``), plus ``planned_shape``, ``skipped_rows`` and ``stride``.
    """
    columns: list[np.ndarray] = item["columns"]
    kinds: list[str] = item["kinds"]
    names: list[str] = [*item["setpoints"], item["name"]]
    axes = []
    for name, kind, column in zip(names[:-1], kinds[:-1], columns[:-1], strict=True):
        levels = None
        if kind == "text":
            values, levels = obs.categorical(column)
        else:
            values = np.real(column).astype(np.float64)
        axes.append({"info": description.info(name), "values": values, "levels": levels})
    value = columns[-1]
    info = description.info(item["name"])
    common = {
        "axes": axes,
        "planned_shape": (description.shapes or {}).get(item["name"]),
        "skipped_rows": item["skipped_rows"],
        "stride": item["stride"],
    }
    if kinds[-1] == "text":
        codes, levels = obs.categorical(value)
        return [{**common, "info": info, "values": codes, "levels": levels, "component": None}]
    if kinds[-1] == "complex" or np.iscomplexobj(value):
        complex_values = value.astype(np.complex128)
        phase = np.angle(complex_values)
        return [
            {
                **common,
                "info": _derived(info, f"|{info.label or info.name}|", info.unit),
                "values": np.abs(complex_values),
                "levels": None,
                "component": "magnitude",
            },
            {
                **common,
                "info": _derived(info, f"arg {info.label or info.name}", "deg"),
                "values": phase,
                "levels": None,
                "component": "phase",
            },
        ]
    return [
        {**common, "info": info, "values": value.astype(np.float64), "levels": None,
         "component": None}
    ]  # fmt: skip


def _derived(info: ParamInfo, label: str, unit: str) -> ParamInfo:
    return ParamInfo(name=info.name, label=label, unit=unit, paramtype=info.paramtype)


def _entry(series: dict[str, Any], budget: int, slice_index: int | None) -> dict[str, Any]:
    info: ParamInfo = series["info"]
    values: np.ndarray = series["values"]
    axes: list[dict[str, Any]] = series["axes"]
    planned = series["planned_shape"]
    entry: dict[str, Any] = {
        "name": info.name,
        "label": info.label,
        "unit": info.unit,
        "paramtype": info.paramtype,
        "component": series["component"],
        "levels": series["levels"],
        "points": int(values.size),
        "planned_points": math.prod(planned) if planned else None,
        "planned_shape": planned,
        "nonfinite": int(values.size - np.isfinite(values).sum()),
        "skipped_rows": series["skipped_rows"],
        "stride": series["stride"],
        "sliced": None,
        "slice": None,
    }
    if len(axes) >= 2:
        entry.update(_grid_entry(axes, values, planned, series["component"], budget, slice_index))
    else:
        entry.update(_trace_entry(axes, values, planned, series["component"], budget))
    return entry


def _axis_json(
    axis: dict[str, Any],
    values: np.ndarray,
    source_size: int,
    sweep: np.ndarray | None = None,
    planned: int | None = None,
    centres: np.ndarray | None = None,
) -> dict[str, Any]:
    """One axis of an entry.

    ``sweep`` is its full setpoint array in acquisition order (for the planned range);
    ``centres`` the ascending grid values before downsampling (for the spacing of a
    map's axis, whose raw values jump back at each line).
    """
    info: ParamInfo = axis["info"]
    swept = values if sweep is None else sweep
    steps = swept if centres is None else centres
    numeric = axis["levels"] is None
    return {
        "name": info.name,
        "label": info.label,
        "unit": info.unit,
        "paramtype": info.paramtype,
        "levels": axis["levels"],
        "values": obs.json_floats(values, obs.AXIS_DIGITS),
        "size": int(values.size),
        "source_size": int(source_size),
        "spacing": spacing(steps) if numeric else "irregular",
        "planned_range": planned_range(swept, planned) if numeric else None,
    }


def _trace_entry(
    axes: list[dict[str, Any]],
    values: np.ndarray,
    planned_shape: list[int] | None,
    component: str | None,
    budget: int,
) -> dict[str, Any]:
    if axes:
        axis = axes[0]
    else:
        axis = {
            "info": ParamInfo(name="index", label="Point", unit=""),
            "values": np.arange(values.size, dtype=np.float64),
            "levels": None,
        }
    x = axis["values"]
    y = values
    if component == "phase":
        y = _unwrap_degrees(y)
    max_points = max(2, min(MAX_TRACE_POINTS, budget // 2))
    xs, ys = obs.downsample_trace(x, y, max_points)
    planned = planned_shape[-1] if planned_shape and len(planned_shape) == 1 else None
    return {
        "ndim": 1,
        "axes": [_axis_json(axis, xs, x.size, x, planned)],
        "values": obs.json_floats(ys),
        "source_shape": [int(y.size)],
        "shape": [int(ys.size)],
        "gridding": "trace",
    }


def _unwrap_degrees(phase: np.ndarray) -> np.ndarray:
    out = phase.copy()
    finite = np.isfinite(out)
    if finite.any():
        out[finite] = np.unwrap(out[finite])
    degrees: np.ndarray = np.degrees(out)  # a ufunc: stubs say Any
    return degrees


def _grid_entry(
    axes: list[dict[str, Any]],
    values: np.ndarray,
    planned: list[int] | None,
    component: str | None,
    budget: int,
    slice_index: int | None,
) -> dict[str, Any]:
    sliced = None
    chosen = None
    if len(axes) > 2:
        # More than two setpoints: deliver one 2-D slice (the outer setpoints fixed),
        # by default the one holding the newest point.
        outer_axes = axes[:-2]
        combos, index = slice_table([a["values"] for a in outer_axes])
        count = combos.shape[0]
        if count:
            if slice_index is None:
                picked = int(index[-1]) if index[-1] >= 0 else count - 1
            else:
                picked = min(slice_index, count - 1)
            keep = index == picked
            chosen = describe_slice(combos[picked], [a["info"] for a in outer_axes], picked, count)
            sliced = {item["name"]: item["value"] for item in chosen["fixed"]}
        else:
            keep = np.zeros(values.size, dtype=bool)
        axes = [{**a, "values": a["values"][keep]} for a in axes[-2:]]
        values = values[keep]
    outer, inner = axes
    axis0, axis1, grid, method = obs.grid_2d(
        outer["values"], inner["values"], values, planned=planned[-2:] if planned else None
    )
    if component == "phase":
        grid = np.degrees(grid)
    max_cells = max(4, min(MAX_GRID_SIDE**2, budget - 2 * MAX_GRID_SIDE))
    a0, a1, small = obs.downsample_grid(axis0, axis1, grid, max_cells, MAX_GRID_SIDE)
    n0, n1 = (planned[-2], planned[-1]) if planned and len(planned) >= 2 else (None, None)
    return {
        "ndim": 2,
        "axes": [
            _axis_json(outer, a0, axis0.size, outer["values"], n0, axis0),
            _axis_json(inner, a1, axis1.size, axis1, n1, axis1),
        ],
        "values": obs.json_floats(small),
        "source_shape": [int(grid.shape[0]), int(grid.shape[1])],
        "shape": [int(small.shape[0]), int(small.shape[1])],
        "gridding": method,
        "sliced": sliced,
        "slice": chosen,
    }


def _count_values(entry: dict[str, Any]) -> int:
    shape: list[int] = entry["shape"]
    sizes: list[int] = [axis["size"] for axis in entry["axes"]]
    return (math.prod(shape) if shape else 0) + sum(sizes)
