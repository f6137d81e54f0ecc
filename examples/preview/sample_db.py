"""Write a sample measurement database in the QCoDeS schema (design §7.2).

The preview server uses it when it is started without a database: it needs no QCoDeS
install, only the standard library's :mod:`sqlite3` and numpy. The tables, columns,
``run_description`` JSON (version 3) and value encodings follow ``shared/data/README.md``
(the schema of a file written by QCoDeS 0.58), so
:mod:`examples.preview.child.qcodes.source` reads it exactly like a real file:

* ``numeric`` columns with NUMERIC affinity (whole floats stored as integers, NaN as the
  text ``'nan'``, ±Inf as REAL);
* ``array`` and ``complex`` values as ``.npy`` BLOBs;
* several dependents in one sweep written as one row per dependent, in shuffled order;
* ``measurement_exception`` (and an ``operator`` metadata column) added with
  ``ALTER TABLE``; ``layouts`` and ``dependencies`` filled in; ``PRAGMA user_version``
  9; WAL journal mode.

Everything is deterministic (fixed seeds, fixed timestamps and GUIDs): two calls write
the same content. Runs (see :data:`SAMPLE_RUNS`):

==  =========================  ================================================
 1  iv_curve                   1-D, 300 points, current in nA
 2  magnetoresistance          1-D, 250 points, unit Ω, with NaN and ±Inf values
 3  dielectric_multi           3 dependents (permittivity, loss, tan delta) sharing one setpoint
 4  coulomb_diamonds           2-D raster 40 x 100
 5  charge_stability_serpent   2-D serpentine 40 x 64, outer axis swept downwards
 6  noise_spectra              ``array`` paramtype, 20 rows x 256-point BLOBs
 7  resonator_s21              ``complex`` paramtype, 301 points
 8  qubit_readout              ``text`` dependent plus a numeric one
 9  empty_run                  no results
10  aborted_sweep              80 of 200 points, ``measurement_exception`` set
11  live_sweep                 ``is_completed`` 0: 150 of 300 points so far
==  =========================  ================================================
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "SAMPLE_VERSION",
    "SAMPLE_RUNS",
    "LIVE_RUN_ID",
    "create_many_runs_database",
    "create_sample_database",
    "default_sample_path",
    "ensure_sample_database",
    "append_live_rows",
]

#: Bumped when the sample's content changes (it is part of the cached file name).
SAMPLE_VERSION = 1
#: run_id → (name, status the reader reports).
SAMPLE_RUNS: dict[int, tuple[str, str]] = {
    1: ("iv_curve", "ok"),
    2: ("magnetoresistance", "ok"),
    3: ("dielectric_multi", "ok"),
    4: ("coulomb_diamonds", "ok"),
    5: ("charge_stability_serpent", "ok"),
    6: ("noise_spectra", "ok"),
    7: ("resonator_s21", "ok"),
    8: ("qubit_readout", "ok"),
    9: ("empty_run", "empty"),
    10: ("aborted_sweep", "interrupted"),
    11: ("live_sweep", "incomplete"),
}
#: The run left unfinished (``is_completed`` 0); :func:`append_live_rows` grows it.
LIVE_RUN_ID = 11
_LIVE_POINTS = 300
_LIVE_START = 150

_T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z, epoch seconds

_SCHEMA = """
CREATE TABLE experiments (
    exp_id INTEGER PRIMARY KEY,
    name TEXT,
    sample_name TEXT,
    start_time INTEGER,
    end_time INTEGER,
    run_counter INTEGER,
    format_string TEXT
);
CREATE TABLE runs (
    run_id INTEGER PRIMARY KEY,
    exp_id INTEGER,
    name TEXT,
    result_table_name TEXT,
    result_counter INTEGER,
    run_timestamp INTEGER,
    completed_timestamp INTEGER,
    is_completed BOOL,
    parameters TEXT, guid TEXT, run_description TEXT, "snapshot" TEXT, captured_run_id,
    captured_counter, "parent_datasets" TEXT,
    FOREIGN KEY(exp_id) REFERENCES experiments(exp_id)
);
CREATE TABLE layouts (
    layout_id INTEGER PRIMARY KEY,
    run_id INTEGER,
    parameter TEXT,
    label TEXT,
    unit TEXT,
    inferred_from TEXT,
    FOREIGN KEY(run_id) REFERENCES runs(run_id)
);
CREATE TABLE dependencies (
    dependent INTEGER,
    independent INTEGER,
    axis_num INTEGER
);
CREATE INDEX IX_runs_exp_id ON runs (exp_id DESC);
CREATE INDEX IX_runs_guid ON runs (guid DESC);
CREATE INDEX IX_runs_captured_run_id ON runs (captured_run_id DESC);
ALTER TABLE runs ADD COLUMN "measurement_exception";
ALTER TABLE runs ADD COLUMN "operator";
"""


def default_sample_path() -> Path:
    """``$XDG_CACHE_HOME/trio-actors/qcodes-sample-v<N>.db`` (``~/.cache`` by default)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "trio-actors" / f"qcodes-sample-v{SAMPLE_VERSION}.db"


def ensure_sample_database(path: str | os.PathLike[str] | None = None) -> Path:
    """Return the sample database's path, writing it first if it is missing or broken.

    Args:
        path: Where it lives; :func:`default_sample_path` when None.
    """
    target = Path(path) if path is not None else default_sample_path()
    if target.is_file():
        try:
            uri = "file:" + urllib.parse.quote(str(target.resolve())) + "?mode=ro"
            conn = sqlite3.connect(uri, uri=True)
            try:
                count = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
            finally:
                conn.close()
            if count == len(SAMPLE_RUNS):
                return target
        except sqlite3.Error:
            pass
    return create_sample_database(target)


def create_sample_database(path: str | os.PathLike[str]) -> Path:
    """Write the sample database to ``path``, replacing any file there.

    The file is built beside ``path`` under a temporary name and moved into place, so a
    reader never sees half a database. No other process may hold the old file open
    (its ``-wal``/``-shm`` files are removed).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    return _write_database(Path(path), _RUNS)


def _write_database(target: Path, builds: Sequence[Callable[[_Writer], None]]) -> Path:
    """Write the runs of ``builds`` (in order) to ``target``, replacing it atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temp.unlink(missing_ok=True)
    conn = sqlite3.connect(temp, isolation_level=None)
    try:
        conn.executescript(_SCHEMA)
        conn.execute("BEGIN")
        _Writer(conn).write_all(builds)
        conn.execute("COMMIT")
        conn.execute("PRAGMA user_version = 9")
        conn.execute("PRAGMA journal_mode = WAL").fetchone()
    finally:
        conn.close()  # the last connection of a WAL database removes -wal and -shm
    for suffix in ("-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    os.replace(temp, target)
    return target


def create_many_runs_database(path: str | os.PathLike[str], runs: int) -> Path:
    """Write a database of ``runs`` finished runs, for benchmarks (design §7.2).

    The sample's finished runs (1 to 10 of :data:`SAMPLE_RUNS`: traces, maps, spectra,
    complex, text, an empty and an interrupted run) repeated in order until there are
    ``runs`` of them; no unfinished run, so a server settles every run. Deterministic,
    written like :func:`create_sample_database` (under a temporary name, then moved).

    Args:
        path: Where to write it (replaced if present).
        runs: How many runs, 1 to 100 000.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: ``runs`` is out of range.
    """
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= 100_000:
        raise ValueError(f"runs must be an integer from 1 to 100000, got {runs!r}")
    finished = [build for build in _RUNS if build is not _run_live]
    return _write_database(Path(path), [finished[k % len(finished)] for k in range(runs)])


def append_live_rows(path: str | os.PathLike[str], count: int) -> dict[str, Any]:
    """Grow the unfinished run (:data:`LIVE_RUN_ID`) by up to ``count`` points.

    Lets a demo show a progressive source (design §4.5): when the planned 300 points are
    reached, the run is marked completed, as QCoDeS does at the end of a measurement.

    Returns:
        ``rows`` (points now in the run) and ``is_completed``.
    """
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    try:
        conn.execute("BEGIN IMMEDIATE")
        table, completed = conn.execute(
            "SELECT result_table_name, is_completed FROM runs WHERE run_id = ?", (LIVE_RUN_ID,)
        ).fetchone()
        quoted = _q(table)
        have = conn.execute(f"SELECT count(*) FROM {quoted}").fetchone()[0]
        stop = min(_LIVE_POINTS, have + max(0, count))
        rows = [_live_point(i) for i in range(have, stop)]
        conn.executemany(f'INSERT INTO {quoted} ("bias", "current") VALUES (?, ?)', rows)
        if stop >= _LIVE_POINTS and not completed:
            conn.execute(
                "UPDATE runs SET is_completed = 1, completed_timestamp = ? WHERE run_id = ?",
                (_T0 + 3600.0, LIVE_RUN_ID),
            )
            completed = 1
        conn.execute("COMMIT")
    finally:
        conn.close()
    return {"rows": stop, "is_completed": bool(completed)}


def _live_point(i: int) -> tuple[float, float]:
    x = float(np.linspace(-1.0, 1.0, _LIVE_POINTS)[i])
    noise = np.random.default_rng(10_000 + i).standard_normal()
    return x, 2e-9 * np.tanh(3 * x) + 1e-10 * float(noise)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _cell(value: Any) -> Any:
    """A value as QCoDeS stores it: NaN as text, arrays as .npy BLOBs."""
    if isinstance(value, np.ndarray):
        return _npy(value)
    if isinstance(value, complex | np.complexfloating):
        return _npy(np.array([value], dtype="<c16"))
    if isinstance(value, float | np.floating) and np.isnan(value):
        return "nan"
    if isinstance(value, np.floating | np.integer):
        return value.item()
    return value


Param = tuple[str, str, str, str]  # name, label, unit, paramtype


class _Writer:
    """Writes experiments, runs and result tables, keeping the QCoDeS counters."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.counters: dict[int, int] = {}
        self.run_id = 0
        self.layout_id = 0

    def write_all(self, builds: Sequence[Callable[[_Writer], None]]) -> None:
        self.experiment(1, "demo_transport", "demo_device_A")
        self.experiment(2, "demo_rf", "demo_resonator_B")
        for build in builds:
            build(self)
        for exp_id, counter in self.counters.items():
            self.conn.execute(
                "UPDATE experiments SET run_counter = ? WHERE exp_id = ?", (counter, exp_id)
            )

    def experiment(self, exp_id: int, name: str, sample: str) -> None:
        self.conn.execute(
            "INSERT INTO experiments VALUES (?, ?, ?, ?, NULL, 0, '{}-{}-{}')",
            (exp_id, name, sample, _T0 + exp_id),
        )
        self.counters[exp_id] = 0

    def run(
        self,
        exp_id: int,
        name: str,
        params: Sequence[Param],
        dependencies: dict[str, list[str]],
        rows: Sequence[dict[str, Any]],
        *,
        shapes: dict[str, list[int]] | None,
        completed: bool = True,
        exception: str | None = None,
        operator: str | None = None,
    ) -> None:
        self.run_id += 1
        self.counters[exp_id] += 1
        counter = self.counters[exp_id]
        table = f"results-{exp_id}-{counter}"
        started = _T0 + 60.0 * self.run_id
        digest = hashlib.sha256(f"trio-actors sample {self.run_id}".encode()).hexdigest()
        guid = f"{digest[:8]}-0000-0000-0000-{digest[8:20]}"
        names = [p[0] for p in params]
        self.conn.execute(
            "INSERT INTO runs (run_id, exp_id, name, result_table_name, result_counter, "
            "run_timestamp, completed_timestamp, is_completed, parameters, guid, "
            "run_description, snapshot, captured_run_id, captured_counter, parent_datasets, "
            "measurement_exception, operator) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                self.run_id, exp_id, name, table, counter, started,
                started + 30.0 if completed else None, int(completed), ",".join(names), guid,
                _description(params, dependencies, shapes), _snapshot(params),
                self.run_id, counter, "[]", exception, operator,
            ),
        )  # fmt: skip
        columns = ", ".join(f"{_q(p[0])} {p[3]}" for p in params)
        self.conn.execute(f"CREATE TABLE {_q(table)} (id INTEGER PRIMARY KEY, {columns})")
        for row in rows:
            keys = list(row)
            self.conn.execute(
                f"INSERT INTO {_q(table)} ({', '.join(map(_q, keys))}) "
                f"VALUES ({', '.join('?' * len(keys))})",
                [_cell(row[k]) for k in keys],
            )
        ids = {}
        for pname, label, unit, _ in params:
            self.layout_id += 1
            ids[pname] = self.layout_id
            self.conn.execute(
                "INSERT INTO layouts VALUES (?, ?, ?, ?, ?, '')",
                (self.layout_id, self.run_id, pname, label, unit),
            )
        for dep, setpoints in dependencies.items():
            for axis, setpoint in enumerate(setpoints):
                self.conn.execute(
                    "INSERT INTO dependencies VALUES (?, ?, ?)", (ids[dep], ids[setpoint], axis)
                )


def _description(params: Sequence[Param], dependencies: dict[str, list[str]], shapes: Any) -> str:
    specs = [
        {"name": n, "paramtype": t, "label": lab, "unit": u, "inferred_from": [],
         "depends_on": dependencies.get(n, [])}
        for n, lab, u, t in params
    ]  # fmt: skip
    return json.dumps(
        {
            "version": 3,
            "interdependencies": {"paramspecs": specs},
            "interdependencies_": {
                "parameters": {
                    n: {"name": n, "paramtype": t, "label": lab, "unit": u}
                    for n, lab, u, t in params
                },
                "dependencies": dependencies,
                "inferences": {},
                "standalones": [],
            },
            "shapes": shapes,
        }
    )


def _snapshot(params: Sequence[Param]) -> str:
    return json.dumps(
        {"parameters": {n: {"name": n, "label": lab, "unit": u} for n, lab, u, _ in params}}
    )


def _sweep(
    setpoint: str, xs: np.ndarray, values: dict[str, np.ndarray], rng: np.random.Generator
) -> list[dict[str, Any]]:
    """One row per dependent per point, in a shuffled order per point (as QCoDeS does)."""
    rows = []
    names = list(values)
    for i, x in enumerate(xs):
        for k in rng.permutation(len(names)):
            rows.append({setpoint: float(x), names[k]: float(values[names[k]][i])})
    return rows


def _run_iv(w: _Writer) -> None:
    rng = np.random.default_rng(101)
    v = np.linspace(-0.01, 0.01, 300)
    i = 2e-9 * np.sinh(v / 0.004) + 2e-11 * rng.standard_normal(v.size)
    params = [
        ("bias", "Bias voltage", "V", "numeric"),
        ("current", "Drain current", "A", "numeric"),
    ]
    rows = [{"bias": float(a), "current": float(b)} for a, b in zip(v, i, strict=True)]
    w.run(1, "iv_curve", params, {"current": ["bias"]}, rows, shapes={"current": [300]},
          operator="sample-bot")  # fmt: skip


def _run_magnetoresistance(w: _Writer) -> None:
    rng = np.random.default_rng(102)
    b = np.linspace(-2.0, 2.0, 250)
    r = 1200.0 + 85.0 * b**2 + 40.0 * np.cos(9 * b) + 3.0 * rng.standard_normal(b.size)
    r[[40, 41, 170]] = np.nan
    r[100], r[200] = np.inf, -np.inf
    params = [("field", "Magnetic field", "T", "numeric"),
              ("resistance", "Resistance", "Ω", "numeric")]  # fmt: skip
    rows = [{"field": float(x), "resistance": float(y)} for x, y in zip(b, r, strict=True)]
    w.run(1, "magnetoresistance", params, {"resistance": ["field"]}, rows,
          shapes={"resistance": [250]})  # fmt: skip


def _run_dielectric(w: _Writer) -> None:
    rng = np.random.default_rng(103)
    f = np.linspace(1e3, 2e5, 120)
    w_tau = f / 3e4
    eps1 = 3.0 + 7.0 / (1 + w_tau**2) + 0.02 * rng.standard_normal(f.size)
    eps2 = 7.0 * w_tau / (1 + w_tau**2) + 0.02 * rng.standard_normal(f.size)
    params = [("frequency", "Frequency", "Hz", "numeric"),
              ("eps_real", "Permittivity \u03b5\u2032", "", "numeric"),
              ("eps_imag", "Loss \u03b5\u2033", "", "numeric"),
              ("tan_delta", "Loss tangent tan δ", "", "numeric")]  # fmt: skip
    deps = {"eps_real": ["frequency"], "eps_imag": ["frequency"], "tan_delta": ["frequency"]}
    values = {"eps_real": eps1, "eps_imag": eps2, "tan_delta": eps2 / eps1}
    w.run(1, "dielectric_multi", params, deps, _sweep("frequency", f, values, rng),
          shapes={name: [120] for name in deps})  # fmt: skip


def _map_rows(
    outer: np.ndarray, inner: np.ndarray, z: Callable[[float, np.ndarray], np.ndarray],
    names: tuple[str, str, str], serpentine: bool,
) -> list[dict[str, Any]]:  # fmt: skip
    rows = []
    for j, y in enumerate(outer):
        line = inner[::-1] if serpentine and j % 2 else inner
        for x, value in zip(line, z(float(y), line), strict=True):
            rows.append({names[0]: float(y), names[1]: float(x), names[2]: float(value)})
    return rows


def _run_diamonds(w: _Writer) -> None:
    rng = np.random.default_rng(104)
    bias = np.linspace(-0.004, 0.004, 40)  # outer (slow) axis: drawn vertically
    gate = np.linspace(-0.5, 0.5, 100)  # inner (fast) axis: drawn horizontally

    def z(vsd: float, vg: np.ndarray) -> np.ndarray:
        phase = (vg / 0.25) % 1.0 - 0.5
        gap = 0.003 * (1 - 2 * np.abs(phase))
        g = 1e-6 / (1 + np.exp(-(abs(vsd) - gap) / 2e-4))
        return g + 2e-8 * rng.standard_normal(vg.size)

    params = [("bias", "Source-drain bias", "V", "numeric"), ("gate", "Plunger gate", "V",
              "numeric"), ("conductance", "Differential conductance", "S", "numeric")]  # fmt: skip
    rows = _map_rows(bias, gate, z, ("bias", "gate", "conductance"), serpentine=False)
    w.run(1, "coulomb_diamonds", params, {"conductance": ["bias", "gate"]}, rows,
          shapes={"conductance": [40, 100]})  # fmt: skip


def _run_serpentine(w: _Writer) -> None:
    rng = np.random.default_rng(105)
    p1 = np.linspace(0.2, -0.2, 40)  # swept downwards
    p2 = np.linspace(-0.3, 0.3, 64)

    def z(y: float, x: np.ndarray) -> np.ndarray:
        lines = np.sin(2 * np.pi * (x + 0.6 * y) / 0.15) ** 8
        return 1e-10 * (0.3 + y + lines) + 5e-12 * rng.standard_normal(x.size)

    params = [("plunger_1", "Plunger P1", "V", "numeric"),
              ("plunger_2", "Plunger P2", "V", "numeric"),
              ("sensor", "Charge sensor current", "A", "numeric")]  # fmt: skip
    rows = _map_rows(p1, p2, z, ("plunger_1", "plunger_2", "sensor"), serpentine=True)
    w.run(1, "charge_stability_serpent", params, {"sensor": ["plunger_1", "plunger_2"]}, rows,
          shapes={"sensor": [40, 64]})  # fmt: skip


def _run_spectra(w: _Writer) -> None:
    rng = np.random.default_rng(106)
    freq = np.linspace(1e3, 1e5, 256)
    params = [("repetition", "Repetition", "", "numeric"),
              ("noise_freq", "Frequency", "Hz", "array"),
              ("noise_psd", "Noise density", "V²/Hz", "array")]  # fmt: skip
    rows = []
    for r in range(20):
        psd = 1e-14 / (1 + freq / 1e4) * (1 + 0.05 * r) * rng.gamma(20, 1 / 20, freq.size)
        rows.append({"repetition": r, "noise_freq": freq, "noise_psd": psd})
    w.run(2, "noise_spectra", params, {"noise_psd": ["repetition", "noise_freq"]}, rows,
          shapes={"noise_psd": [20, 256]})  # fmt: skip


def _run_s21(w: _Writer) -> None:
    rng = np.random.default_rng(107)
    f = np.linspace(7.49e9, 7.51e9, 301)
    s = 1 - 0.8e6 / (1.0e6 + 2j * (f - 7.5e9))
    s = s * np.exp(-2j * np.pi * f * 25e-9) + 0.008 * (
        rng.standard_normal(f.size) + 1j * rng.standard_normal(f.size)
    )
    params = [("frequency", "Frequency", "Hz", "numeric"),
              ("S21", "Transmission S21", "", "complex")]  # fmt: skip
    rows = [{"frequency": float(a), "S21": complex(b)} for a, b in zip(f, s, strict=True)]
    w.run(2, "resonator_s21", params, {"S21": ["frequency"]}, rows, shapes={"S21": [301]})


def _run_readout(w: _Writer) -> None:
    rng = np.random.default_rng(108)
    amp = np.linspace(0.0, 1.0, 60)
    p = 1 / (1 + np.exp(-10 * (amp - 0.5)))
    states = np.where(rng.random(amp.size) < p, "excited", "ground")
    signal = (states == "excited") * 1.0 + 0.15 * rng.standard_normal(amp.size)
    params = [("drive_amp", "Drive amplitude", "V", "numeric"),
              ("state", "Assigned state", "", "text"),
              ("iq_signal", "Readout signal", "V", "numeric")]  # fmt: skip
    rows: list[dict[str, Any]] = []
    for i, x in enumerate(amp):
        pair = [{"drive_amp": float(x), "state": str(states[i])},
                {"drive_amp": float(x), "iq_signal": float(signal[i])}]  # fmt: skip
        rows.extend(pair[k] for k in rng.permutation(2))
    w.run(2, "qubit_readout", params, {"state": ["drive_amp"], "iq_signal": ["drive_amp"]},
          rows, shapes=None)  # fmt: skip


def _run_empty(w: _Writer) -> None:
    params = [
        ("bias", "Bias voltage", "V", "numeric"),
        ("current", "Drain current", "A", "numeric"),
    ]
    w.run(2, "empty_run", params, {"current": ["bias"]}, [], shapes=None)


def _run_aborted(w: _Writer) -> None:
    rng = np.random.default_rng(110)
    x = np.linspace(0.0, 5.0, 200)[:80]
    y = np.exp(-x) + 0.01 * rng.standard_normal(x.size)
    params = [("time", "Delay", "s", "numeric"), ("population", "Excited population", "",
              "numeric")]  # fmt: skip
    rows = [{"time": float(a) * 1e-6, "population": float(b)} for a, b in zip(x, y, strict=True)]
    trace = (
        "Traceback (most recent call last):\n"
        '  File "sample_db.py", line 1, in measure\n'
        "TimeoutError: sample instrument did not answer at point 80\n"
    )
    w.run(1, "aborted_sweep", params, {"population": ["time"]}, rows,
          shapes={"population": [200]}, exception=trace)  # fmt: skip


def _run_live(w: _Writer) -> None:
    params = [
        ("bias", "Bias voltage", "V", "numeric"),
        ("current", "Drain current", "A", "numeric"),
    ]
    rows = [dict(zip(("bias", "current"), _live_point(i), strict=True)) for i in range(_LIVE_START)]
    w.run(1, "live_sweep", params, {"current": ["bias"]}, rows,
          shapes={"current": [_LIVE_POINTS]}, completed=False)  # fmt: skip


_RUNS: tuple[Callable[[_Writer], None], ...] = (
    _run_iv, _run_magnetoresistance, _run_dielectric, _run_diamonds, _run_serpentine,
    _run_spectra, _run_s21, _run_readout, _run_empty, _run_aborted, _run_live,
)  # fmt: skip
