"""A database to explore (design §7.7): the sample database plus runs with known values.

:func:`explore_database` writes the project's sample (:mod:`examples.preview.sample_db`,
runs 1-11) and appends, in the same QCoDeS schema (``shared/data/README.md``):

* run :data:`SPIKE_RUN`, ``long_trace``: 400 000 points of a slow sine with one
  one-sample spike of :data:`SPIKE_VALUE` at :data:`SPIKE_INDEX`;
* run :data:`MAP_RUN`, ``known_map``: a 2-D raster, ``MAP_ROWS`` x ``MAP_COLUMNS``, with
  ``current = 1000 * row + column`` at ``gate = column / 10`` (inner, V) and
  ``bias = row / 100`` (outer, V): every value says where it is;
* run :data:`BIG_MAP_RUN`, ``big_map``: 600 x 300 points, too many for one answer.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

import numpy as np

from examples.preview.sample_db import create_sample_database

if TYPE_CHECKING:
    from pathlib import Path

SPIKE_RUN = 12
SPIKE_POINTS = 400_000
SPIKE_INDEX = 271_828
SPIKE_VALUE = 12.5
MAP_RUN = 13
MAP_ROWS = 12
MAP_COLUMNS = 20
BIG_MAP_RUN = 14
BIG_MAP_SHAPE = (600, 300)


def spike_trace() -> tuple[np.ndarray, np.ndarray]:
    """The spike run's ``time`` (s) and ``signal`` (V)."""
    t = np.arange(SPIKE_POINTS, dtype=np.float64) * 1e-3
    y = np.sin(t / 20.0)
    y[SPIKE_INDEX] = SPIKE_VALUE
    return t, y


def explore_database(path: Path) -> Path:
    """Write the sample database and the three runs above to ``path``; return it."""
    create_sample_database(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        t, y = spike_trace()
        _run(conn, SPIKE_RUN, "long_trace",
             [("time", "Time", "s"), ("signal", "Signal", "V")], {"signal": ["time"]},
             list(zip(t.tolist(), y.tolist(), strict=True)), [SPIKE_POINTS])  # fmt: skip
        rows = [
            (r / 100, c / 10, float(1000 * r + c))
            for r in range(MAP_ROWS)
            for c in range(MAP_COLUMNS)
        ]
        _run(conn, MAP_RUN, "known_map",
             [("bias", "Bias", "V"), ("gate", "Gate", "V"), ("current", "Current", "A")],
             {"current": ["bias", "gate"]}, rows, [MAP_ROWS, MAP_COLUMNS])  # fmt: skip
        n0, n1 = BIG_MAP_SHAPE
        big = [(float(r), float(c), float(np.sin(r / 50) * np.cos(c / 30)))
               for r in range(n0) for c in range(n1)]  # fmt: skip
        _run(conn, BIG_MAP_RUN, "big_map",
             [("y", "Y", "m"), ("x", "X", "m"), ("z", "Z", "")],
             {"z": ["y", "x"]}, big, [n0, n1])  # fmt: skip
        conn.execute("COMMIT")
    finally:
        conn.close()
    return path


def _run(
    conn: sqlite3.Connection,
    run_id: int,
    name: str,
    params: list[tuple[str, str, str]],
    dependencies: dict[str, list[str]],
    rows: list[tuple[float, ...]],
    shape: list[int],
) -> None:
    table = f"results-1-{run_id}"
    specs = [
        {"name": n, "paramtype": "numeric", "label": lab, "unit": u, "inferred_from": [],
         "depends_on": dependencies.get(n, [])}
        for n, lab, u in params
    ]  # fmt: skip
    dependent = next(iter(dependencies))
    description = {
        "version": 3,
        "interdependencies": {"paramspecs": specs},
        "interdependencies_": {
            "parameters": {
                n: {"name": n, "paramtype": "numeric", "label": lab, "unit": u}
                for n, lab, u in params
            },
            "dependencies": dependencies,
            "inferences": {},
            "standalones": [],
        },
        "shapes": {dependent: shape},
    }
    started = 1_767_300_000.0 + run_id
    conn.execute(
        "INSERT INTO runs (run_id, exp_id, name, result_table_name, result_counter, "
        "run_timestamp, completed_timestamp, is_completed, parameters, guid, "
        "run_description, snapshot, captured_run_id, captured_counter, parent_datasets) "
        "VALUES (?,1,?,?,?,?,?,1,?,?,?,'{}',?,?,'[]')",
        (run_id, name, table, run_id, started, started + 10.0,
         ",".join(p[0] for p in params), f"{run_id:08x}-0000-0000-0000-00000000e7e7",
         json.dumps(description), run_id, run_id),
    )  # fmt: skip
    columns = ", ".join(f'"{p[0]}" NUMERIC' for p in params)
    conn.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY, {columns})')
    names = ", ".join(f'"{p[0]}"' for p in params)
    marks = ", ".join("?" * len(params))
    conn.executemany(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', rows)
