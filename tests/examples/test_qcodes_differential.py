"""The reader against QCoDeS itself, on every run of both test databases.

QCoDeS (the ``qcodes`` extra, installed by the ``test`` extra) runs in a child
process: it reads each run with its own API and prints what it found as JSON, and this
test compares that with what :mod:`examples.preview.child.qcodes.source` reads: every
dependent's values and setpoints in acquisition order, the planned shapes, labels,
units and paramtypes, and the run metadata (names, experiment, sample, GUID, times,
completion, extra metadata columns, snapshot, parent links), and the counts: rows as
QCoDeS's ``number_of_results``, points per dependent as the values it returns. The
child keeps QCoDeS's side effects (its config folder, its logging) out of the test
process. Skipped when ``qcodes`` is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from examples.preview.child.qcodes.source import open_source

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("qcodes") is None, reason="qcodes is not installed"
)

#: Printed by the child: one JSON object per run, as QCoDeS reads it.
_DUMP = r"""
import json, math, sys, warnings
warnings.simplefilter("ignore")
import numpy as np
import qcodes as qc
from qcodes.dataset import initialise_or_create_database_at, load_by_id

def plain(values):
    values = np.asarray(values).ravel()
    if values.dtype.kind == "c":
        return {"real": plain(values.real), "imag": plain(values.imag)}
    if values.dtype.kind in "fiu":
        return [float(v) if math.isfinite(v) else None for v in values.astype(float)]
    return [None if v is None else str(v) for v in values.tolist()]

qc.config["core"]["db_debug"] = False
initialise_or_create_database_at(sys.argv[1])
out = []
run_id = 1
while True:
    try:
        ds = load_by_id(run_id)
    except (ValueError, NameError, RuntimeError):
        break
    interdeps = ds.description.interdeps
    setpoints = {dep.name: [s.name for s in sps] for dep, sps in interdeps.dependencies.items()}
    specs = {p.name: {"label": p.label, "unit": p.unit, "paramtype": p.type,
                      "depends_on": setpoints.get(p.name, [])}
             for p in interdeps.paramspecs}
    data = {dep: {name: plain(values) for name, values in arrays.items()}
            for dep, arrays in ds.get_parameter_data().items()}
    out.append({
        "run_id": ds.run_id, "name": ds.name, "exp_name": ds.exp_name,
        "sample_name": ds.sample_name, "guid": ds.guid, "completed": ds.completed,
        "run_timestamp": ds.run_timestamp_raw, "completed_timestamp": ds.completed_timestamp_raw,
        "shapes": {k: list(v) for k, v in (ds.description.shapes or {}).items()} or None,
        "metadata": {k: v for k, v in ds.metadata.items()},
        "parents": [link.tail for link in ds.parent_dataset_links],
        "snapshot": ds.snapshot,
        "specs": specs, "data": data, "number_of_results": ds.number_of_results,
    })
    run_id += 1
print(json.dumps(out))
"""


def _qcodes_view(db: Path, tmp_path: Path) -> list[dict[str, Any]]:
    env = dict(os.environ, QCODES_USER_PATH=str(tmp_path / "qcodes-user"))
    done = subprocess.run(
        [sys.executable, "-c", _DUMP, str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    runs: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return runs


def _same(ours: np.ndarray, theirs: Any, where: str) -> None:
    if isinstance(theirs, dict):  # complex
        assert ours.dtype.kind == "c", where
        _same(ours.real, theirs["real"], where + ".real")
        _same(ours.imag, theirs["imag"], where + ".imag")
        return
    if ours.dtype == object:
        assert ours.tolist() == theirs, where
        return
    expected = np.array([math.nan if v is None else v for v in theirs], dtype=np.float64)
    assert ours.shape == expected.shape, where
    # QCoDeS reads a ``numeric`` cell through SQLite's text form, 15 significant
    # digits; the reader takes the stored double as it is. So: equal to 1e-14.
    np.testing.assert_allclose(ours.astype(np.float64), expected, rtol=1e-14, atol=0,
                               err_msg=where)  # fmt: skip


def _compare(source: Any, qc_run: dict[str, Any]) -> None:
    run_id = qc_run["run_id"]
    (summary,) = source.list_runs(after=run_id - 1, limit=1)
    details = source.run_details(run_id)
    assert summary["run_id"] == run_id
    for ours, theirs in (("name", "name"), ("exp_name", "exp_name"),
                         ("sample_name", "sample_name"), ("guid", "guid"),
                         ("run_timestamp", "run_timestamp"),
                         ("completed_timestamp", "completed_timestamp")):  # fmt: skip
        assert summary[ours] == qc_run[theirs], (run_id, ours)
    assert summary["is_completed"] == qc_run["completed"]
    assert summary["shapes"] == qc_run["shapes"]
    # Counts: rows are QCoDeS's number_of_results; points are each dependent's values.
    assert summary["row_count"] == qc_run["number_of_results"], run_id
    counted = {}
    for dep, arrays in qc_run["data"].items():
        values = arrays[dep]
        counted[dep] = len(values["real"]) if isinstance(values, dict) else len(values)
    assert summary["points"] == counted, run_id
    extra = {k: v for k, v in qc_run["metadata"].items() if k != "measurement_exception"}
    assert {k: v for k, v in details["metadata"].items() if k != "measurement_exception"} == extra
    assert [p["guid"] for p in details["parents"]] == qc_run["parents"]
    assert details["snapshot"] == qc_run["snapshot"]
    params = {p["name"]: p for p in summary["parameters"]}
    for name, spec in qc_run["specs"].items():
        ours = params[name]
        assert (ours["label"], ours["unit"], ours["paramtype"]) == (
            spec["label"], spec["unit"], spec["paramtype"],
        ), (run_id, name)  # fmt: skip
        if spec["depends_on"]:
            assert list(ours["depends_on"]) == spec["depends_on"], (run_id, name)
    record = {"run_id": run_id, "run_description": _description_text(source, run_id)}
    description, _ = source._description(record)  # the reader's own parse of this run
    table = summary["result_table_name"]
    for dep, arrays in qc_run["data"].items():
        read = source._read_dependent(table, description, dep, lambda: None)
        names = [*read["setpoints"], dep]
        assert set(names) == set(arrays), (run_id, dep)
        for name, column in zip(names, read["columns"], strict=True):
            _same(column, arrays[name], f"run {run_id} {dep}/{name}")
    observation = source.read_run(run_id)
    for entry in observation["dependents"]:
        qc_values = qc_run["data"][entry["name"]][entry["name"]]
        size = len(qc_values["real"]) if isinstance(qc_values, dict) else len(qc_values)
        assert entry["points"] == size, (run_id, entry["name"])
        spec = qc_run["specs"][entry["name"]]
        if entry["component"] is None:
            assert (entry["label"], entry["unit"]) == (spec["label"], spec["unit"])
        planned = (qc_run["shapes"] or {}).get(entry["name"])
        if planned and qc_run["completed"] and entry["points"] == math.prod(planned):
            slices = entry["slice"]["count"] if entry["slice"] else 1
            assert [slices, *entry["source_shape"]] == [slices, *planned[-entry["ndim"] :]]
            assert slices * math.prod(entry["source_shape"]) == math.prod(planned)


def _description_text(source: Any, run_id: int) -> str:
    row = source._conn.execute(
        "SELECT run_description FROM runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    return str(row[0])


@pytest.mark.parametrize("fixture", ["real_db", "plots_db", "status_db"])
def test_reader_equals_qcodes_on_every_run(
    fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    db: Path = request.getfixturevalue(fixture)
    qc_runs = _qcodes_view(db, tmp_path)
    with open_source(db) as source:
        assert [r["run_id"] for r in qc_runs] == [r["run_id"] for r in source.list_runs()]
        for qc_run in qc_runs:
            _compare(source, qc_run)
