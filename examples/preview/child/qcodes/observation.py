"""Pure numpy helpers that shape QCoDeS result rows into plottable data (design §7.2).

No SQLite, no trio: :mod:`examples.preview.child.qcodes.source` reads the rows and calls these to
decode values, put 2-D data on a grid, downsample, and turn arrays into JSON lists.

Conventions used throughout:

* a *trace* is 1-D: ``x`` (setpoint) and ``y`` (value), in acquisition order;
* a *grid* is 2-D: ``grid[i, j]`` is the value at ``axis0[i]`` (the outer/slow setpoint)
  and ``axis1[j]`` (the inner/fast setpoint); both axes are **ascending**, whatever
  order the instrument swept them in (raster, serpentine, reversed);
* missing or non-finite values are NaN in arrays and ``None`` in JSON lists.
"""

from __future__ import annotations

import io
import itertools
import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.lib import format as npy_format

if TYPE_CHECKING:
    from collections.abc import Sequence

#: Signature of a ``.npy`` blob written by ``np.save`` (QCoDeS ``array``/``complex``).
NPY_MAGIC = b"\x93NUMPY"

#: Significant digits kept for dependent values and for setpoint values in JSON lists.
VALUE_DIGITS = 7
AXIS_DIGITS = 10


class RowShapeError(ValueError):
    """One result row's arrays cannot be broadcast together (the row is skipped)."""


def load_npy(blob: bytes) -> np.ndarray:
    """Decode one ``.npy`` blob (no pickles).

    The header is checked against the blob's size first: np.load allocates the
    declared shape before reading, so a damaged header must not get that far.

    Raises:
        ValueError: ``blob`` is not a ``.npy`` file, is cut short or padded, or holds
            objects.
    """
    if not blob.startswith(NPY_MAGIC):
        raise ValueError("BLOB is not a .npy array")
    stream = io.BytesIO(blob)
    try:
        major, _minor = npy_format.read_magic(stream)
        if major == 1:
            shape, _fortran, dtype = npy_format.read_array_header_1_0(stream)
        else:
            shape, _fortran, dtype = npy_format.read_array_header_2_0(stream)
    except (ValueError, EOFError) as exc:
        raise ValueError(f"BLOB has a damaged .npy header ({exc})") from None
    if dtype.hasobject:
        raise ValueError("BLOB holds Python objects")
    expected = math.prod(shape) * dtype.itemsize
    if len(blob) - stream.tell() != expected:
        raise ValueError(
            f"BLOB holds {len(blob) - stream.tell()} bytes of data, its header says {expected}"
        )
    array = np.load(io.BytesIO(blob), allow_pickle=False)
    if not isinstance(array, np.ndarray):  # pragma: no cover - np.load of .npy is an array
        raise ValueError("BLOB did not decode to an array")
    return array


def to_float(value: object) -> float:
    """One numeric cell as a float: int, real, ``'nan'``/``'inf'`` text, NULL → NaN."""
    if value is None:
        return math.nan
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return math.nan
    if isinstance(value, bytes) and value.startswith(NPY_MAGIC):
        try:
            array = load_npy(value)
        except ValueError:  # a damaged blob is a missing value, like any other junk
            return math.nan
        if array.size == 1:
            return float(np.real(array.ravel()[0]))
    return math.nan


def scalar_column(cells: Sequence[object], paramtype: str) -> np.ndarray:
    """A column of scalar cells: floats (via :func:`to_float`), or objects for ``text``."""
    if paramtype == "text":
        return np.array([v if isinstance(v, str) else None for v in cells], dtype=object)
    return np.fromiter((to_float(v) for v in cells), dtype=np.float64, count=len(cells))


def cell_array(value: object, paramtype: str) -> np.ndarray:
    """One cell as an array: a scalar cell gives a 0-d array, a ``.npy`` blob its array.

    ``text`` cells give a 0-d object array holding the string (or None).
    """
    if paramtype == "text":
        return np.array(value if isinstance(value, str) else None, dtype=object)
    if isinstance(value, bytes):
        if value.startswith(NPY_MAGIC):
            try:
                array = load_npy(value)
            except ValueError:  # a damaged blob is a missing value, like any other junk
                return np.array(math.nan)
            if paramtype == "complex" or np.iscomplexobj(array):
                return array.astype(np.complex128)
            return array.astype(np.float64)
        return np.array(math.nan)
    if paramtype == "complex" and isinstance(value, complex):
        return np.array(value, dtype=np.complex128)
    return np.array(to_float(value))


def expand_rows(rows: Sequence[Sequence[np.ndarray]]) -> tuple[list[np.ndarray], int]:
    """Broadcast each row's cells together and concatenate the rows column-wise.

    A row whose cells are arrays (QCoDeS ``array`` paramtype) becomes as many points as
    its arrays have elements; scalar cells are repeated to match.

    Returns:
        One flat array per column, and the number of rows skipped because their cells
        had incompatible shapes.
    """
    if not rows:
        return [], 0
    ncols = len(rows[0])
    columns: list[list[np.ndarray]] = [[] for _ in range(ncols)]
    skipped = 0
    for row in rows:
        try:
            parts = _broadcast_row(row)
        except RowShapeError:
            skipped += 1
            continue
        for k, part in enumerate(parts):
            columns[k].append(part)
    flat = [np.concatenate(col) if col else np.array([]) for col in columns]
    return flat, skipped


def _broadcast_row(row: Sequence[np.ndarray]) -> list[np.ndarray]:
    try:
        return [a.ravel() for a in np.broadcast_arrays(*row)]
    except ValueError:
        sizes = {a.size for a in row if a.ndim > 0}
        if len(sizes) == 1:  # same element count, different shapes: pair them flat
            n = sizes.pop()
            return [a.ravel() if a.ndim > 0 else np.repeat(a, n) for a in row]
        raise RowShapeError("cells of one row have incompatible shapes") from None


def categorical(values: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Map text values to integer levels in order of first appearance.

    Returns:
        Float codes (NaN where the text is missing) and the level names.
    """
    levels: dict[str, int] = {}
    codes = np.full(values.shape, math.nan)
    for k, text in enumerate(values.tolist()):
        if isinstance(text, str):
            codes[k] = levels.setdefault(text, len(levels))
    return codes, list(levels)


def clusters(values: np.ndarray, *, rel_tol: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """Group nearly equal setpoint values.

    Args:
        values: Finite floats.
        rel_tol: Values closer than ``rel_tol`` times the span are one cluster.

    Returns:
        Ascending cluster centres and, for each input value, its cluster index.
    """
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    span = float(ordered[-1] - ordered[0]) if ordered.size else 0.0
    tol = rel_tol * span if span > 0 else 0.0
    breaks = np.diff(ordered) > tol
    ids_sorted = np.concatenate([[0], np.cumsum(breaks)])
    index = np.empty_like(ids_sorted)
    index[order] = ids_sorted
    count = int(ids_sorted[-1]) + 1 if ordered.size else 0
    sums = np.bincount(ids_sorted, weights=ordered, minlength=count)
    sizes = np.bincount(ids_sorted, minlength=count)
    return sums / np.maximum(sizes, 1), index


def grid_2d(
    outer: np.ndarray,
    inner: np.ndarray,
    values: np.ndarray,
    *,
    planned: Sequence[int] | None = None,
    max_cells_factor: int = 4,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """Place scattered (outer, inner, value) points on an ascending grid.

    The grid is built from the setpoint *values*, never from row order, so raster,
    serpentine and reversed sweeps give the same picture. When the setpoints form a
    lattice (the usual case) every distinct value is one row/column (``"exact"``; a
    repeated point keeps the latest value). Otherwise (jittered read-back setpoints)
    the points are averaged into regular bins (``"binned"``), sized by the planned
    shape when known.

    Returns:
        ``(axis0, axis1, grid, method)``: ``grid.shape == (len(axis0), len(axis1))``.
    """
    keep = np.isfinite(outer) & np.isfinite(inner)
    outer, inner, values = outer[keep], inner[keep], values[keep]
    if outer.size == 0:
        return np.array([]), np.array([]), np.zeros((0, 0)), "exact"
    axis0, i0 = clusters(outer)
    axis1, i1 = clusters(inner)
    if axis0.size * axis1.size <= max(max_cells_factor * outer.size, 16):
        grid = np.full((axis0.size, axis1.size), math.nan)
        grid[i0, i1] = values  # later points overwrite earlier ones: the latest wins
        return axis0, axis1, grid, "exact"
    side = max(2, int(math.sqrt(outer.size)))
    n0 = planned[0] if planned and len(planned) >= 2 else min(axis0.size, side)
    n1 = planned[1] if planned and len(planned) >= 2 else min(axis1.size, side)
    centres0, b0 = _bins(outer, max(1, min(n0, 1024)))
    centres1, b1 = _bins(inner, max(1, min(n1, 1024)))
    flat = b0 * centres1.size + b1
    finite = np.isfinite(values)
    cells = centres0.size * centres1.size
    sums = np.bincount(flat[finite], weights=values[finite], minlength=cells)
    counts = np.bincount(flat[finite], minlength=cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        grid = np.where(counts > 0, sums / np.maximum(counts, 1), math.nan)
    return centres0, centres1, grid.reshape(centres0.size, centres1.size), "binned"


def _bins(values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = float(values.min()), float(values.max())
    if hi <= lo:
        return np.array([lo]), np.zeros(values.size, dtype=np.int64)
    edges = np.linspace(lo, hi, n + 1)
    index = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, n - 1)
    return (edges[:-1] + edges[1:]) / 2, index


def downsample_trace(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, ...]:
    """Reduce a trace to at most ``max_points`` points, keeping its peaks.

    Min/max decimation: the trace is cut into ``max_points // 2`` buckets in acquisition
    order, and each bucket keeps its lowest and highest point (in their original order),
    so a one-sample spike still shows.
    """
    n = y.size
    if n <= max_points:
        return x, y
    buckets = max(1, max_points // 2)
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    keep: list[int] = []
    for start, stop in itertools.pairwise(edges):
        if stop <= start:
            continue
        chunk = y[start:stop]
        finite = np.isfinite(chunk)
        if not finite.any():
            keep.append(int(start))
            continue
        lo = int(np.argmin(np.where(finite, chunk, np.inf))) + int(start)
        hi = int(np.argmax(np.where(finite, chunk, -np.inf))) + int(start)
        keep.extend(sorted({lo, hi}))
    index = np.array(keep, dtype=np.int64)
    return x[index], y[index]


def downsample_grid(
    axis0: np.ndarray, axis1: np.ndarray, grid: np.ndarray, max_cells: int, max_side: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shrink a grid by whole-number block means until it fits the bounds.

    Args:
        max_cells: Upper bound on ``rows * columns``.
        max_side: Upper bound on each of rows and columns.
    """
    n0, n1 = grid.shape
    f0 = max(1, math.ceil(n0 / max_side))
    f1 = max(1, math.ceil(n1 / max_side))
    while math.ceil(n0 / f0) * math.ceil(n1 / f1) > max_cells:
        if math.ceil(n0 / f0) >= math.ceil(n1 / f1):
            f0 += 1
        else:
            f1 += 1
    if f0 == 1 and f1 == 1:
        return axis0, axis1, grid
    return _block_mean(axis0, f0), _block_mean(axis1, f1), _block_mean_2d(grid, f0, f1)


def _block_mean(values: np.ndarray, factor: int) -> np.ndarray:
    if factor == 1:
        return values
    padded = np.full(math.ceil(values.size / factor) * factor, math.nan)
    padded[: values.size] = values
    with np.errstate(invalid="ignore"):
        means: np.ndarray = np.nanmean(padded.reshape(-1, factor), axis=1)  # stubs say Any
    return means


def _block_mean_2d(grid: np.ndarray, f0: int, f1: int) -> np.ndarray:
    n0, n1 = grid.shape
    m0, m1 = math.ceil(n0 / f0), math.ceil(n1 / f1)
    padded = np.full((m0 * f0, m1 * f1), math.nan)
    padded[:n0, :n1] = grid
    blocks = padded.reshape(m0, f0, m1, f1)
    finite = np.isfinite(blocks)
    sums = np.where(finite, blocks, 0.0).sum(axis=(1, 3))
    counts = finite.sum(axis=(1, 3))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), math.nan)


def json_floats(values: np.ndarray, digits: int = VALUE_DIGITS) -> list[Any]:
    """A float array as a (nested) JSON list: ``digits`` significant digits, NaN/Inf → None.

    Rounding keeps an observation small when encoded (each number is at most about 15
    characters) without visible change in a plot.
    """
    if values.ndim > 1:
        return [json_floats(row, digits) for row in values]
    fmt = f"{{:.{digits}g}}"
    return [float(fmt.format(v)) if math.isfinite(v) else None for v in values.tolist()]
