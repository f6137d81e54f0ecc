"""The QCoDeS reader on the real sample file (shared/data/README.md) and on bad input."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sqlite3

import numpy as np
import pytest

from actors.errors import SourceUnreadable, UnknownRun
from examples.preview.child.qcodes import observation as obs
from examples.preview.child.qcodes.source import MAX_OBSERVATION_VALUES, open_source, revision

# run_id: (name, status, rows) from the README's table.
README_RUNS = {
    1: ("sine_sweep", "ok", 200),
    2: ("lorentzian_sweep", "ok", 200),
    3: ("lockin_multi", "ok", 600),
    4: ("map_2d", "ok", 2400),
    5: ("map_2d_serpentine", "ok", 2400),
    6: ("map_2d_reversed_y", "ok", 2400),
    7: ("spectra_array", "ok", 25),
    8: ("state_text", "ok", 100),
    9: ("s21_complex", "ok", 201),
    10: ("empty_run", "empty", 0),
    11: ("aborted_exception", "interrupted", 73),
    12: ("crashed_incomplete", "incomplete", 120),
}

# run_id: [(dependent, component, ndim, source_shape)] for every plotted series.
EXPECTED_SERIES = {
    1: [("dmm_v1", None, 1, [200])],
    2: [("dmm_v2", None, 1, [200])],
    3: [(n, None, 1, [150]) for n in ("lockin_X", "lockin_Y", "lockin_R", "lockin_phase")],
    4: [("dmm_v1", None, 2, [40, 60])],
    5: [("dmm_v1", None, 2, [40, 60])],
    6: [("dmm_v1", None, 2, [40, 60])],
    7: [("psd", None, 2, [25, 128])],
    8: [("qubit_state", None, 1, [50]), ("dmm_v2", None, 1, [50])],
    9: [("S21", "magnitude", 1, [201]), ("S21", "phase", 1, [201])],
    10: [("dmm_v1", None, 1, [0])],
    11: [("dmm_v1", None, 1, [73])],
    12: [("dmm_v1", None, 1, [120])],
}


@pytest.fixture(scope="module")
def source(real_db):
    with open_source(real_db) as src:
        yield src


@pytest.fixture(scope="module")
def observations(source):
    return {run_id: source.read_run(run_id) for run_id in README_RUNS}


def floats(values):
    return np.array(values, dtype=np.float64)


# -- listing -------------------------------------------------------------------------


def test_list_runs_matches_the_readme_table(source):
    runs = source.list_runs()
    assert [r["run_id"] for r in runs] == list(README_RUNS)
    for run in runs:
        name, status, rows = README_RUNS[run["run_id"]]
        assert (run["name"], run["status"], run["row_count"]) == (name, status, rows)
        assert run["problem"] is None


def test_summaries_count_points_per_dependent_not_rows(source):
    by_id = {r["run_id"]: r for r in source.list_runs()}
    # 600 rows, one per dependent per setpoint: 150 points of each of the four.
    assert by_id[3]["row_count"] == 600
    assert by_id[3]["points"] == {
        "lockin_X": 150, "lockin_Y": 150, "lockin_R": 150, "lockin_phase": 150
    }  # fmt: skip
    assert by_id[3]["planned_points"] == dict.fromkeys(by_id[3]["points"], 150)
    # 25 rows of 128-element arrays (read from the .npy headers, nothing decoded).
    assert (by_id[7]["row_count"], by_id[7]["points"]) == (25, {"psd": 25 * 128})
    assert by_id[8]["points"] == {"qubit_state": 50, "dmm_v2": 50}
    assert by_id[8]["planned_points"] == {}
    assert by_id[10]["points"] == {"dmm_v1": 0}
    assert (by_id[12]["points"], by_id[12]["planned_points"]) == ({"dmm_v1": 120}, {"dmm_v1": 200})
    assert all(isinstance(r["file_modified"], float) for r in by_id.values())


def test_summary_has_names_units_dependencies_and_shapes(source):
    run = source.list_runs(after=3, limit=1)[0]
    assert run["run_id"] == 4
    assert run["exp_name"] == "transport_characterisation"
    assert run["sample_name"] == "S1_device_A"
    assert run["result_table_name"] == "results-1-4"
    assert run["shapes"] == {"dmm_v1": [40, 60]}
    assert run["dependencies"] == {"dmm_v1": ["dac_gate2", "dac_gate1"]}
    params = {p["name"]: p for p in run["parameters"]}
    assert params["dmm_v1"]["label"] == "Gate v1"
    assert params["dmm_v1"]["unit"] == "V"
    assert params["dmm_v1"]["paramtype"] == "numeric"
    assert params["dmm_v1"]["depends_on"] == ["dac_gate2", "dac_gate1"]
    assert run["is_completed"] is True
    assert run["completed_timestamp"] > run["run_timestamp"] > 1.7e9
    assert run["measurement_exception"] is False
    assert run["metadata"] == {}
    json.dumps(run)  # JSON-compatible


def test_summary_of_exception_and_unfinished_runs(source):
    by_id = {r["run_id"]: r for r in source.list_runs()}
    aborted, crashed = by_id[11], by_id[12]
    assert aborted["measurement_exception"] is True
    assert aborted["exception_summary"] == (
        "RuntimeError: simulated instrument timeout at point 73"
    )
    assert "73 of 200" in aborted["status_reason"]
    assert crashed["is_completed"] is False
    assert crashed["completed_timestamp"] is None
    assert "120 of 200" in crashed["status_reason"]
    assert by_id[7]["parameters"][1]["paramtype"] == "array"
    assert by_id[9]["parameters"][1]["paramtype"] == "complex"
    assert by_id[8]["shapes"] is None


def test_paging(source):
    first = source.list_runs(limit=5)
    rest = source.list_runs(after=first[-1]["run_id"])
    assert [r["run_id"] for r in first + rest] == list(range(1, 13))


def test_identity(source, real_db):
    ident = source.identity()
    assert ident["path"] == str(real_db.resolve())
    assert ident["size_bytes"] == real_db.stat().st_size
    assert ident["run_count"] == 12
    assert ident["user_version"] == 9
    assert len(ident["source_id"]) == 16


def test_a_file_name_that_is_not_utf8_is_opened_as_it_is(real_db, tmp_path):
    # Python keeps the bytes as surrogates: the SQLite URI and the identity use them as
    # they are.
    odd = os.fsdecode(os.fsencode(tmp_path) + b"/run\xff.db")
    shutil.copyfile(real_db, odd)
    with open_source(odd) as src:
        ident = src.identity()
        assert ident["run_count"] == 12
        assert [r["run_id"] for r in src.list_runs()] == list(README_RUNS)


# -- observations --------------------------------------------------------------------


@pytest.mark.parametrize("run_id", list(README_RUNS))
def test_observation_has_the_expected_series(observations, run_id):
    o = observations[run_id]
    got = [(d["name"], d["component"], d["ndim"], d["source_shape"]) for d in o["dependents"]]
    assert got == EXPECTED_SERIES[run_id]
    assert o["status"] == README_RUNS[run_id][1]
    for dep in o["dependents"]:
        assert dep["shape"] == dep["source_shape"]  # all small enough: nothing dropped
        assert len(dep["axes"]) == dep["ndim"]
        if dep["ndim"] == 1:
            assert len(dep["values"]) == len(dep["axes"][0]["values"]) == dep["shape"][0]
        else:
            assert len(dep["values"]) == dep["shape"][0] == len(dep["axes"][0]["values"])
            assert {len(row) for row in dep["values"]} == {dep["shape"][1]}
    encoded = json.dumps(o, allow_nan=False)  # strict JSON: no NaN/Infinity tokens
    assert len(encoded) < 256 * 1024


def _model(x, y):
    # make_qcodes_sample.py's map, without the noise (sigma 0.05).
    return np.exp(-((x - 0.15 * y) ** 2) / 0.02) * (1 + 0.3 * y) + 0.5 * np.sin(4 * x + 2 * y)


@pytest.mark.parametrize("run_id", [4, 5, 6])
def test_maps_come_out_on_an_ascending_grid_whatever_the_sweep_order(observations, run_id):
    dep = observations[run_id]["dependents"][0]
    outer, inner = dep["axes"]
    assert (outer["name"], inner["name"]) == ("dac_gate2", "dac_gate1")
    y, x, grid = floats(outer["values"]), floats(inner["values"]), floats(dep["values"])
    assert grid.shape == (40, 60)
    assert np.all(np.diff(y) > 0)
    assert np.all(np.diff(x) > 0)
    assert y[0] == pytest.approx(-1)
    assert y[-1] == pytest.approx(1)
    assert x[0] == pytest.approx(-0.5)
    assert x[-1] == pytest.approx(0.5)
    xx, yy = np.meshgrid(x, y)
    assert np.mean(np.abs(grid - _model(xx, yy))) < 0.06  # only the noise is left


@pytest.mark.parametrize("run_id", [4, 5, 6])
def test_grid_cells_hold_the_rows_with_those_setpoints(observations, real_db, run_id):
    dep = observations[run_id]["dependents"][0]
    table = f"results-{1 if run_id < 6 else 2}-{run_id if run_id < 6 else 1}"
    conn = sqlite3.connect(f"file:{real_db}?mode=ro", uri=True)
    try:
        for i, j in [(0, 0), (1, 0), (1, 59), (20, 33), (39, 59)]:
            y, x = dep["axes"][0]["values"][i], dep["axes"][1]["values"][j]
            (value,) = conn.execute(
                f'SELECT dmm_v1 FROM "{table}" WHERE abs(dac_gate2 - ?) < 1e-9 '
                "AND abs(dac_gate1 - ?) < 1e-9",
                (y, x),
            ).fetchone()
            assert dep["values"][i][j] == pytest.approx(value, rel=1e-6)
    finally:
        conn.close()


def test_array_blobs_make_a_25_by_128_map(observations):
    dep = observations[7]["dependents"][0]
    assert dep["paramtype"] == "array"
    assert dep["points"] == dep["planned_points"] == 25 * 128
    reps, freqs = floats(dep["axes"][0]["values"]), floats(dep["axes"][1]["values"])
    assert list(reps) == list(range(25))
    assert freqs[0] == pytest.approx(1e6)
    assert freqs[-1] == pytest.approx(50e6)
    grid = floats(dep["values"])
    peaks = freqs[np.argmax(grid, axis=1)]
    expected = 20e6 + np.arange(25) * 0.6e6  # the peak drifts 0.6 MHz per repetition
    assert np.max(np.abs(peaks - expected)) < 1.5e6


def test_complex_blobs_give_magnitude_and_unwrapped_phase(observations):
    magnitude, phase = observations[9]["dependents"]
    f = floats(magnitude["axes"][0]["values"])
    mag = floats(magnitude["values"])
    assert f[0] == pytest.approx(6.09e9)
    assert f[-1] == pytest.approx(6.11e9)
    assert f[np.argmin(mag)] == pytest.approx(6.1e9, abs=0.3e6)  # the resonance dip
    assert mag.min() < 0.4
    assert mag[0] == pytest.approx(1.0, abs=0.05)
    assert phase["unit"] == "deg"
    ph = floats(phase["values"])
    assert np.all(np.abs(np.diff(ph)) < 90)  # unwrapped: no 360 degree jumps
    # 40 ns cable delay over 20 MHz winds the phase by about -288 degrees
    assert ph[-1] - ph[0] == pytest.approx(-288, abs=40)


def test_text_dependent_maps_to_levels(observations):
    state, signal = observations[8]["dependents"]
    assert state["levels"] == ["ground", "excited"]
    codes = floats(state["values"])
    assert set(codes.tolist()) == {0.0, 1.0}
    assert state["points"] == signal["points"] == 50
    assert state["axes"][0]["values"] == signal["axes"][0]["values"]
    sig = floats(signal["values"])
    assert sig[codes == 1].mean() > 0.7
    assert sig[codes == 0].mean() < 0.3


def test_multi_dependent_rows_are_grouped_by_column(observations):
    x, y, r, _ = observations[3]["dependents"]
    assert [d["points"] for d in (x, y, r)] == [150, 150, 150]
    r_from_xy = np.hypot(floats(x["values"]), floats(y["values"]))
    assert np.allclose(r_from_xy, floats(r["values"]), rtol=1e-5)


def test_statuses_of_empty_interrupted_and_incomplete_runs(observations):
    assert observations[10]["status"] == "empty"
    assert observations[10]["dependents"][0]["points"] == 0
    assert observations[11]["status"] == "interrupted"
    assert "simulated instrument timeout" in observations[11]["status_reason"]
    assert observations[12]["status"] == "incomplete"
    assert observations[12]["dependents"][0]["planned_points"] == 200


def test_downsampling_keeps_the_real_sizes(source):
    small = source.read_run(4, max_values=1000)
    dep = small["dependents"][0]
    assert dep["source_shape"] == [40, 60]
    rows, cols = dep["shape"]
    assert rows * cols + rows + cols <= 1000
    assert small["sizes"]["downsampled"] is True
    assert small["sizes"]["values"] <= 1000
    assert dep["points"] == 2400


def test_check_cancel_is_called_and_can_abort(source):
    calls = []

    class Stop(Exception):
        pass

    source.read_run(4, check_cancel=lambda: calls.append(1))
    assert len(calls) >= 2

    def stop():
        raise Stop

    with pytest.raises(Stop):
        source.read_run(4, check_cancel=stop)


def test_unknown_run(source):
    with pytest.raises(UnknownRun) as info:
        source.read_run(99)
    assert info.value.code == "unknown_run"


def test_reading_leaves_the_file_unchanged(real_db):
    before = hashlib.sha256(real_db.read_bytes()).hexdigest()
    with open_source(real_db) as src:
        for run_id in README_RUNS:
            src.read_run(run_id)
        src.probe()
        with pytest.raises(sqlite3.OperationalError):
            src._conn.execute("DELETE FROM runs")
    assert hashlib.sha256(real_db.read_bytes()).hexdigest() == before


# -- a run being written -------------------------------------------------------------


def test_probe_and_reads_see_rows_committed_by_a_writer(writable_db):
    with open_source(writable_db) as src:
        first = src.probe()
        assert first["max_run_id"] == 12
        assert first["run_count"] == 12
        assert first["runs"][11] == [12, 120, 0, 0]
        assert first["runs"][10] == [11, 73, 1, 1]
        assert src.probe([12, 99])["runs"] == [[12, 120, 0, 0]]
        writer = sqlite3.connect(writable_db)
        try:
            writer.execute('INSERT INTO "results-1-7" (dac_gate1, dmm_v1) VALUES (0.21, 0.5)')
            writer.commit()
            second = src.probe([12])
            assert second["runs"] == [[12, 121, 0, 0]]
            assert second["data_version"] != first["data_version"]
            assert revision(second["runs"][0]) != revision(first["runs"][11])
            assert src.read_run(12)["dependents"][0]["points"] == 121
            writer.execute("UPDATE runs SET is_completed = 1 WHERE run_id = 12")
            writer.commit()
            assert src.probe([12])["runs"] == [[12, 121, 1, 0]]
            read = src.read_run(12)  # completed with 121 of 200 planned: still "ok"
            assert (read["status"], read["status_reason"]) == (
                "ok",
                "completed with 121 of 200 planned points of dmm_v1",
            )
        finally:
            writer.close()


def test_a_probe_of_an_unchanged_database_reads_no_table_again(writable_db):
    with open_source(writable_db) as src:
        first = src.probe()
        statements: list[str] = []
        src._conn.set_trace_callback(statements.append)
        again = src.probe()
        assert again == first
        assert not any("max(id)" in s or "FROM runs" in s for s in statements)
        again["runs"][11][1] = -1  # each answer is its own: the next one is unchanged
        assert src.probe()["runs"][11] == [12, 120, 0, 0]
        writer = sqlite3.connect(writable_db)
        try:
            writer.execute('INSERT INTO "results-1-7" (dac_gate1, dmm_v1) VALUES (0.21, 0.5)')
            writer.commit()
        finally:
            writer.close()
        statements.clear()
        assert src.probe([12])["runs"] == [[12, 121, 0, 0]]
        assert any("max(id)" in s for s in statements)


# -- awkward values ------------------------------------------------------------------


def test_numeric_cells_of_every_storage_class():
    assert obs.to_float(5412100000) == 5412100000.0
    assert obs.to_float(0) == 0.0
    assert math.isnan(obs.to_float("nan"))
    assert obs.to_float(float("inf")) == math.inf
    assert obs.to_float("-inf") == -math.inf
    assert math.isnan(obs.to_float(None))
    assert math.isnan(obs.to_float("ground"))


def test_json_floats_are_strict_json():
    values = np.array([1.0, math.nan, math.inf, -math.inf, 1.23456789e-9])
    assert obs.json_floats(values) == [1.0, None, None, None, 1.234568e-9]


def test_min_max_decimation_keeps_a_spike():
    x = np.arange(100_000, dtype=float)
    y = np.zeros_like(x)
    y[54_321] = 7.0
    xs, ys = obs.downsample_trace(x, y, 4096)
    assert xs.size <= 4096
    assert ys.max() == 7.0
    assert np.all(np.diff(xs) > 0)  # acquisition order kept


def test_jittered_setpoints_are_binned():
    rng = np.random.default_rng(0)
    outer = np.repeat(np.linspace(0, 1, 20), 30) + 1e-4 * rng.standard_normal(600)
    inner = np.tile(np.linspace(0, 1, 30), 20) + 1e-4 * rng.standard_normal(600)
    axis0, axis1, grid, method = obs.grid_2d(outer, inner, outer + inner, planned=[20, 30])
    assert method == "binned"
    assert grid.shape == (20, 30)
    assert np.nanmax(np.abs(grid - (axis0[:, None] + axis1[None, :]))) < 0.05


# -- bad input -----------------------------------------------------------------------


def test_missing_file(tmp_path):
    path = tmp_path / "nope.db"
    with pytest.raises(SourceUnreadable) as info:
        open_source(path)
    assert info.value.code == "source_unreadable"
    assert info.value.details["reason"] == "missing"
    assert "not found" in str(info.value)
    assert str(path) in str(info.value)


def test_a_folder_is_not_a_database(tmp_path):
    with pytest.raises(SourceUnreadable) as info:
        open_source(tmp_path)
    assert info.value.details["reason"] == "not_a_file"


def test_not_sqlite(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("this is a text file, not a database\n" * 20)
    with pytest.raises(SourceUnreadable) as info:
        open_source(path)
    assert info.value.details["reason"] == "not_sqlite"
    assert "not an SQLite database" in str(info.value)


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ("CREATE TABLE other (x)", "no 'runs' table"),
        ("CREATE TABLE runs (run_id INTEGER PRIMARY KEY, name TEXT)", "lacks"),
        ("", "no 'runs' table"),  # an empty SQLite file
    ],
)
def test_sqlite_without_the_qcodes_schema(tmp_path, schema, words):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    if schema:
        conn.execute(schema)
    conn.commit()
    conn.close()
    with pytest.raises(SourceUnreadable) as info:
        open_source(path)
    assert info.value.details["reason"] == "not_qcodes"
    assert "not a QCoDeS database" in str(info.value)
    assert words in str(info.value)


def test_broken_run_description_falls_back_to_layouts_then_fails_cleanly(writable_db):
    conn = sqlite3.connect(writable_db)
    conn.execute("UPDATE runs SET run_description = 'not json' WHERE run_id = 1")
    conn.commit()
    with open_source(writable_db) as src:
        run = src.list_runs(limit=1)[0]
        assert run["problem"] is None  # layouts/dependencies give the structure
        assert run["dependencies"] == {"dmm_v1": ["dac_gate1"]}
        assert src.read_run(1)["dependents"][0]["points"] == 200
        conn.execute("DELETE FROM layouts WHERE run_id = 1")
        conn.commit()
        runs = src.list_runs()
        assert len(runs) == 12
        assert "run_description" in runs[0]["problem"]
        with pytest.raises(SourceUnreadable) as info:
            src.read_run(1)
        assert info.value.details["reason"] == "unreadable"
    conn.close()


def test_observation_bounds_hold_for_large_runs(tmp_path):
    from examples.preview.sample_db import _SCHEMA, _Writer

    conn = sqlite3.connect(tmp_path / "big.db", isolation_level=None)
    conn.executescript(_SCHEMA)
    conn.execute("BEGIN")
    writer = _Writer(conn)
    writer.experiment(1, "big", "big")
    n = 20_000
    writer.run(
        1, "long_trace",
        [("t", "Time", "s", "numeric"), ("v", "Voltage", "V", "numeric")],
        {"v": ["t"]},
        [{"t": float(i), "v": math.sin(i / 50)} for i in range(n)],
        shapes={"v": [n]},
    )  # fmt: skip
    rows = [
        {"a": float(i), "b": float(j), "z": float(i * j)} for i in range(300) for j in range(90)
    ]
    writer.run(
        1, "big_map",
        [("a", "A", "V", "numeric"), ("b", "B", "V", "numeric"), ("z", "Z", "A", "numeric")],
        {"z": ["a", "b"]}, rows, shapes={"z": [300, 90]},
    )  # fmt: skip
    conn.execute("COMMIT")
    conn.close()
    with open_source(tmp_path / "big.db") as src:
        trace = src.read_run(1)
        dep = trace["dependents"][0]
        assert dep["source_shape"] == [n]
        assert dep["shape"][0] <= 4096
        assert max(v for v in dep["values"] if v is not None) == pytest.approx(1, abs=1e-3)
        grid = src.read_run(2)
        dep = grid["dependents"][0]
        assert dep["source_shape"] == [300, 90]
        assert max(dep["shape"]) <= 256
        assert grid["sizes"]["values"] <= MAX_OBSERVATION_VALUES
        assert len(json.dumps(grid)) < 1024 * 1024 // 2
