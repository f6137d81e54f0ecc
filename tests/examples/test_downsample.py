"""Downsampling that keeps extremes (design §7.7): examples and properties (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from examples.preview.child.downsample import grid_blocks, json_numbers, trace_extremes

FLOATS = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)
SPECIAL = st.one_of(FLOATS, st.just(math.nan), st.just(math.inf), st.just(-math.inf))


def test_a_one_sample_spike_in_400000_points_survives() -> None:
    y = np.sin(np.linspace(0, 40, 400_000))
    y[123_457] = 12.5
    keep = trace_extremes(y, 2000)
    assert keep.size <= 4000
    assert 123_457 in keep
    assert y[keep].max() == 12.5
    assert y[keep].min() == y.min()


def test_each_bucket_keeps_its_min_and_max_in_order() -> None:
    y = np.array([3.0, 1.0, 2.0, 9.0, 0.0, 5.0, 4.0, 4.0])
    assert trace_extremes(y, 2).tolist() == [1, 3, 4, 5]  # buckets [0:4] and [4:8]


def test_a_short_trace_is_kept_whole() -> None:
    y = np.arange(6, dtype=float)
    assert trace_extremes(y, 3).tolist() == [0, 1, 2, 3, 4, 5]


def test_non_finite_values_are_never_an_extreme() -> None:
    y = np.array([math.nan, math.inf, 2.0, 1.0, -math.inf, math.nan, math.nan, math.nan, 7.0])
    keep = trace_extremes(y, 3)  # buckets [0:3], [3:6], [6:9]
    assert keep.tolist() == [2, 3, 8]
    gap = trace_extremes(np.array([1.0, 2.0, math.nan, math.nan, 3.0, 0.0]), 3)
    assert gap.tolist() == [0, 1, 2, 3, 4, 5]  # short: whole
    empty = trace_extremes(np.full(10, math.nan), 2)
    assert empty.tolist() == [0, 5]  # each empty bucket keeps its first sample: a gap


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="buckets"):
        trace_extremes(np.zeros(3), 0)
    with pytest.raises(ValueError, match="1-D"):
        trace_extremes(np.zeros((2, 2)), 4)
    with pytest.raises(ValueError, match="max_side"):
        grid_blocks(np.zeros(2), np.zeros(2), np.zeros((2, 2)), 0)
    with pytest.raises(ValueError, match="shape"):
        grid_blocks(np.zeros(3), np.zeros(2), np.zeros((2, 2)), 4)


@settings(max_examples=200, deadline=None)
@given(
    y=hnp.arrays(np.float64, st.integers(0, 3000), elements=SPECIAL),
    buckets=st.integers(1, 300),
)
def test_trace_properties(y: np.ndarray, buckets: int) -> None:
    keep = trace_extremes(y, buckets)
    assert keep.size <= 2 * buckets
    if y.size <= 2 * buckets:
        assert keep.tolist() == list(range(y.size))
    assert np.all(np.diff(keep) > 0)  # original order, no repeats
    assert keep.size == 0 or (keep[0] >= 0 and keep[-1] < y.size)
    finite = y[np.isfinite(y)]
    kept = y[keep]
    kept = kept[np.isfinite(kept)]
    if finite.size:
        assert kept.max() == finite.max()
        assert kept.min() == finite.min()
    else:
        assert kept.size == 0


@settings(max_examples=100, deadline=None)
@given(
    x=hnp.arrays(np.float64, st.integers(1, 2000), elements=FLOATS, unique=True),
    buckets=st.integers(1, 100),
)
def test_a_monotone_x_stays_monotone(x: np.ndarray, buckets: int) -> None:
    x = np.sort(x)
    y = np.cos(x)
    keep = trace_extremes(y, buckets)
    assert np.all(np.diff(x[keep]) > 0)


def test_a_grid_that_fits_is_kept_as_it_is() -> None:
    grid = np.arange(12, dtype=float).reshape(3, 4)
    grid[1, 2] = math.inf
    blocks = grid_blocks(np.arange(3.0), np.arange(4.0), grid, 4)
    assert blocks.factors == (1, 1)
    assert blocks.mean[0].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert math.isnan(blocks.mean[1, 2])  # an infinity is no value, as in a block
    assert blocks.low is blocks.mean
    assert blocks.high is blocks.mean


def test_blocks_keep_mean_min_and_max() -> None:
    grid = np.array(
        [
            [1.0, 2.0, 3.0, 4.0, 5.0],
            [6.0, 7.0, math.nan, 9.0, 100.0],
            [math.nan, math.nan, 1.0, 1.0, math.inf],
        ]
    )
    blocks = grid_blocks(np.array([0.0, 1.0, 2.0]), np.arange(5.0) * 10, grid, 3)
    assert blocks.factors == (1, 2)
    assert blocks.axis1.tolist() == [5.0, 25.0, 40.0]
    assert blocks.axis0.tolist() == [0.0, 1.0, 2.0]
    assert blocks.mean[0].tolist() == [1.5, 3.5, 5.0]
    assert blocks.low[1].tolist() == [6.0, 9.0, 100.0]
    assert blocks.high[1].tolist() == [7.0, 9.0, 100.0]
    assert math.isnan(blocks.mean[2, 0])  # no finite cell: a gap
    assert math.isnan(blocks.mean[2, 2])  # +inf is not a value
    assert blocks.low[2, 1] == blocks.high[2, 1] == 1.0


@settings(max_examples=100, deadline=None)
@given(
    grid=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=60),
        elements=SPECIAL,
    ),
    side=st.integers(1, 20),
)
def test_grid_properties(grid: np.ndarray, side: int) -> None:
    axis0 = np.arange(grid.shape[0], dtype=float)
    axis1 = np.arange(grid.shape[1], dtype=float)
    blocks = grid_blocks(axis0, axis1, grid, side)
    rows, cols = blocks.mean.shape
    assert rows <= side
    assert cols <= side
    assert blocks.axis0.size == rows
    assert blocks.axis1.size == cols
    assert np.all(np.diff(blocks.axis0) > 0)
    assert np.all(np.diff(blocks.axis1) > 0)
    finite = grid[np.isfinite(grid)]
    if finite.size:
        assert np.nanmax(blocks.high) == finite.max()
        assert np.nanmin(blocks.low) == finite.min()
        with np.errstate(invalid="ignore"):
            assert np.all((blocks.low <= blocks.mean) | np.isnan(blocks.mean))
            assert np.all((blocks.mean <= blocks.high) | np.isnan(blocks.mean))
    else:
        assert np.all(np.isnan(blocks.mean))


def test_json_numbers_writes_null_for_nan_and_infinities() -> None:
    values = np.array([1.0, math.nan, math.inf, -math.inf, 1 / 3, 12.5])
    assert json_numbers(values) == [1.0, None, None, None, 0.3333333, 12.5]
