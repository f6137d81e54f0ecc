"""The reader's sweep facts and run details on ``tests/data/qcodes_plots.db``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from actors.errors import UnknownRun
from examples.preview.child.qcodes import details as details_module
from examples.preview.child.qcodes.source import open_source
from examples.preview.child.qcodes.sweeps import planned_range, slice_table, spacing


@pytest.fixture(scope="module")
def source(plots_db):
    with open_source(plots_db) as src:
        yield src


def test_spacing_of_sweeps():
    assert spacing(np.linspace(-1, 1, 50)) == "linear"
    assert spacing(np.geomspace(1, 1e5, 50)) == "log"
    assert spacing(-np.geomspace(1, 1e5, 50)) == "log"
    assert spacing(np.repeat(np.linspace(0, 1, 5), 10)) == "linear"  # an outer axis
    assert spacing(np.array([0.0, 0.1, 0.5, 0.55])) == "irregular"
    assert spacing(np.array([1.0, 2.0])) == "irregular"  # too few to tell
    assert spacing(np.array([np.nan, 1.0, 2.0, 3.0])) == "linear"


def test_planned_range_extrapolates_even_steps():
    assert planned_range(np.linspace(-1, 1, 100)[:40], 100) == [-1.0, 1.0]
    assert planned_range(np.linspace(1, -1, 100)[:40], 100) == [-1.0, 1.0]
    assert planned_range(np.geomspace(1, 1e5, 121)[:30], 121) == pytest.approx([1.0, 1e5])
    assert planned_range(np.linspace(-1, 1, 100), 100) is None  # complete
    assert planned_range(np.array([0.0, 0.1, 0.5, 0.55]), 10) is None  # uneven
    assert planned_range(np.linspace(0, 1, 5), None) is None


def test_slice_table_orders_the_outer_setpoints():
    outer = [np.array([1.0, 1.0, 0.0, 0.0, 1.0, np.nan]), np.array([5.0, 6, 5, 6, 5, 5])]
    combos, index = slice_table(outer)
    assert combos.tolist() == [[0.0, 5.0], [0.0, 6.0], [1.0, 5.0], [1.0, 6.0]]
    assert index.tolist() == [2, 3, 0, 1, 2, -1]


def test_axes_report_spacing_and_the_planned_range(source):
    psd = source.read_run(1)["dependents"][0]["axes"][0]
    assert (psd["spacing"], psd["planned_range"]) == ("log", None)
    crashed = source.read_run(8)
    axis = crashed["dependents"][0]["axes"][0]
    assert axis["spacing"] == "linear"
    assert axis["planned_range"] == [-1.0, 1.0]
    assert crashed["status"] == "incomplete"


def test_run_details_have_times_metadata_and_snapshot(source):
    run = source.run_details(1)
    assert run["name"] == "psd_log_sweep"
    assert run["exp_name"] == "noise_spectroscopy"
    assert run["sample_name"] == "S3_resonator_C"
    assert run["started"] == run["run_timestamp"]
    assert run["ended"] == run["completed_timestamp"]
    assert run["duration"] == pytest.approx(run["ended"] - run["started"])
    assert run["duration"] > 0
    assert run["metadata"] == {"operator": "Ada", "amplifier": "femto DLPCA-200, 10⁸ V/A"}
    snapshot = run["snapshot"]
    assert set(snapshot["station"]["instruments"]) == {"dac", "magnet"}
    assert snapshot["station"]["instruments"]["dac"]["parameters"]["gate"]["unit"] == "V"
    assert run["snapshot_pruned"] is False
    assert run["snapshot_bytes"] > 1000
    json.dumps(run, allow_nan=False)  # strict JSON for the helper frame


def test_unfinished_run_has_no_end_or_duration(source):
    run = source.run_details(8)
    assert run["started"] is not None
    assert run["ended"] is None
    assert run["duration"] is None
    assert run["status"] == "incomplete"


def test_parent_and_child_links(source):
    child = source.run_details(4)
    assert [(p["run_id"], p["name"], p["edge_type"]) for p in child["parents"]] == [
        (2, "leakage_current", "calibration")
    ]
    assert child["parents"][0]["description"] == "gate leakage check"
    parent = source.run_details(2)
    assert [(c["run_id"], c["name"], c["edge_type"]) for c in parent["children"]] == [
        (4, "magnet_gate_bias_3d", "calibration")
    ]
    assert parent["children"][0]["guid"] == child["guid"]
    assert source.run_details(1)["parents"] == []


def test_unknown_run_details(source):
    with pytest.raises(UnknownRun):
        source.run_details(999)


def test_malformed_links_are_left_out():
    assert details_module.parse_links("not json") == []
    assert details_module.parse_links('["{\\"tail\\": 3}", "x", 5]') == []
    good = json.dumps([json.dumps({"head": "a", "tail": "b", "edge_type": "e"})])
    assert details_module.parse_links(good) == [
        {"head": "a", "tail": "b", "edge_type": "e", "description": ""}
    ]


def test_an_oversized_snapshot_is_pruned(monkeypatch):
    monkeypatch.setattr(details_module, "MAX_SNAPSHOT_BYTES", 200)
    parameter = {"__class__": "Parameter", "value": 1.5, "unit": "V", "label": "Gate",
                 "vals": "<Numbers>" * 20, "ts": "2026-01-01"}  # fmt: skip
    snapshot = {"station": {"instruments": {"dac": {"parameters": {"g": parameter}}}}}
    text = json.dumps(snapshot)
    pruned, size, was_pruned = details_module._bounded_snapshot(text)
    assert was_pruned is True
    assert size == len(text.encode())
    assert pruned["station"]["instruments"]["dac"]["parameters"]["g"] == {
        "value": 1.5,
        "unit": "V",
        "label": "Gate",
    }


def test_a_planned_shape_beyond_the_float_range_gives_no_planned_range():
    # ratio ** (planned - 1) raised OverflowError for a log sweep planned with 10**9
    # points (and step * (planned - 1) for a planned count beyond 1e308): read_run
    # failed with handler_failed instead of drawing the run without a planned range.
    assert planned_range(np.geomspace(1, 100, 5), 10**9) is None
    assert planned_range(np.linspace(0, 1, 5), 10**400) is None
    assert planned_range(np.geomspace(1, 1e-3, 4), 10**9) == [0.0, 1.0]  # shrinking
    assert planned_range(np.linspace(0, 1, 5), 10**9) == [0.0, 249999999.8]
