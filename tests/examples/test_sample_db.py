"""The sample database writer: QCoDeS schema, determinism, and the reader on its output."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from examples.preview.app.config import default_cache_dir
from examples.preview.child.qcodes.source import open_source
from examples.preview.sample_db import (
    LIVE_RUN_ID,
    SAMPLE_RUNS,
    append_live_rows,
    create_sample_database,
    default_sample_path,
    ensure_sample_database,
)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return create_sample_database(tmp_path_factory.mktemp("sample") / "sample.db")


@pytest.fixture(scope="module")
def observations(sample):
    with open_source(sample) as src:
        return {run_id: src.read_run(run_id) for run_id in SAMPLE_RUNS}


def columns(path, table):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [(row[1], row[2]) for row in conn.execute(f'PRAGMA table_info("{table}")')]
    finally:
        conn.close()


def query(path, sql, *args):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def test_same_tables_and_columns_as_the_real_file(sample, real_db):
    for table in ("experiments", "runs", "layouts", "dependencies"):
        assert columns(sample, table)[:16] == columns(real_db, table)[:16], table
    assert ("operator", "") in columns(sample, "runs")  # metadata column, no declared type
    assert query(sample, "PRAGMA user_version") == [(9,)]
    assert query(sample, "PRAGMA journal_mode") == [("wal",)]
    indexes = {r[0] for r in query(sample, "SELECT name FROM sqlite_master WHERE type='index'")}
    assert indexes == {"IX_runs_exp_id", "IX_runs_guid", "IX_runs_captured_run_id"}


def test_run_description_has_the_qcodes_v3_layout(sample, real_db):
    def layout(path, run_id):
        ((text,),) = query(path, "SELECT run_description FROM runs WHERE run_id = ?", run_id)
        data = json.loads(text)
        spec = data["interdependencies"]["paramspecs"][0]
        return (
            sorted(data),
            sorted(spec),
            sorted(data["interdependencies_"]),
            sorted(next(iter(data["interdependencies_"]["parameters"].values()))),
        )

    assert layout(sample, 4) == layout(real_db, 4)


def test_values_are_stored_as_qcodes_stores_them(sample):
    # NaN as text, +-Inf as real, whole floats as integers, arrays and complex as .npy
    kinds = dict(query(sample, 'SELECT typeof(resistance), count(*) FROM "results-1-2" GROUP BY 1'))
    assert kinds == {"real": 247, "text": 3}
    infinite = query(
        sample, 'SELECT resistance FROM "results-1-2" WHERE typeof(resistance) = "real"'
    )
    assert sorted(v for (v,) in infinite if abs(v) == float("inf")) == [float("-inf"), float("inf")]
    assert query(sample, 'SELECT DISTINCT typeof(repetition) FROM "results-2-1"') == [("integer",)]
    ((blob,),) = query(sample, 'SELECT noise_psd FROM "results-2-1" LIMIT 1')
    assert blob.startswith(b"\x93NUMPY")
    ((blob,),) = query(sample, 'SELECT "S21" FROM "results-2-2" LIMIT 1')
    assert b"'descr': '<c16'" in blob
    # several dependents: one row per dependent, the others NULL
    rows = query(sample, 'SELECT eps_real, eps_imag, tan_delta FROM "results-1-3"')
    assert len(rows) == 360
    assert all(sum(v is not None for v in row) == 1 for row in rows)
    ((trace,),) = query(sample, "SELECT measurement_exception FROM runs WHERE run_id = 10")
    assert trace.startswith("Traceback")
    assert query(
        sample, "SELECT is_completed, completed_timestamp FROM runs WHERE run_id = 11"
    ) == [(0, None)]


def test_writing_is_deterministic(tmp_path, sample):
    again = create_sample_database(tmp_path / "again.db")
    assert again.read_bytes() == sample.read_bytes()
    assert not (tmp_path / "again.db-wal").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.db"]


def test_the_reader_lists_every_run_with_its_status(sample):
    with open_source(sample) as src:
        runs = src.list_runs()
    assert {r["run_id"]: (r["name"], r["status"]) for r in runs} == SAMPLE_RUNS
    assert runs[0]["metadata"] == {"operator": "sample-bot"}
    assert runs[1]["parameters"][1]["unit"] == "Ω"
    assert runs[2]["parameters"][1]["label"] == "Permittivity \u03b5\u2032"


def test_every_run_with_data_gives_plottable_series(observations):
    for run_id, o in observations.items():
        assert o["status"] == SAMPLE_RUNS[run_id][1]
        if run_id != 9:
            assert all(d["points"] > 0 for d in o["dependents"]), run_id
        json.dumps(o, allow_nan=False)
    assert observations[2]["dependents"][0]["nonfinite"] == 5
    assert observations[4]["dependents"][0]["source_shape"] == [40, 100]
    assert observations[6]["dependents"][0]["source_shape"] == [20, 256]
    assert [d["component"] for d in observations[7]["dependents"]] == ["magnitude", "phase"]
    assert observations[8]["dependents"][0]["levels"] == ["ground", "excited"]


def test_serpentine_map_swept_downwards_comes_out_ascending(observations):
    dep = observations[5]["dependents"][0]
    p1 = np.array(dep["axes"][0]["values"])
    p2 = np.array(dep["axes"][1]["values"])
    grid = np.array(dep["values"], dtype=float)
    assert p1[0] == pytest.approx(-0.2)
    assert np.all(np.diff(p1) > 0)
    assert np.all(np.diff(p2) > 0)
    x, y = np.meshgrid(p2, p1)
    model = 1e-10 * (0.3 + y + np.sin(2 * np.pi * (x + 0.6 * y) / 0.15) ** 8)
    assert np.mean(np.abs(grid - model)) < 1e-11  # the noise is 5 pA


def test_live_run_grows_and_completes(tmp_path):
    path = create_sample_database(tmp_path / "live.db")
    with open_source(path) as src:
        before = src.probe([LIVE_RUN_ID])["runs"][0]
        assert before[1:3] == [150, 0]
        assert append_live_rows(path, 100) == {"rows": 250, "is_completed": False}
        assert src.probe([LIVE_RUN_ID])["runs"][0][1:3] == [250, 0]
        assert src.read_run(LIVE_RUN_ID)["status"] == "incomplete"
        assert append_live_rows(path, 100) == {"rows": 300, "is_completed": True}
        after = src.read_run(LIVE_RUN_ID)
        assert after["status"] == "ok"
        assert after["dependents"][0]["points"] == 300
        assert append_live_rows(path, 5) == {"rows": 300, "is_completed": True}


def test_default_path_honours_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = default_sample_path()
    assert path.parent == tmp_path / "trio-actors" == default_cache_dir()  # the server's
    assert ensure_sample_database() == path
    assert path.is_file()


def test_ensure_reuses_a_good_file_and_replaces_a_broken_one(tmp_path):
    path = ensure_sample_database(tmp_path / "s.db")
    stamp = path.stat().st_mtime_ns
    assert ensure_sample_database(path) == path
    assert path.stat().st_mtime_ns == stamp
    path.write_bytes(b"garbage" * 100)
    ensure_sample_database(path)
    with open_source(path) as src:
        assert len(src.list_runs()) == len(SAMPLE_RUNS)
