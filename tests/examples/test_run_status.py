"""Status and points as QCoDeS records them, on a database written with QCoDeS' own API
(:mod:`qcodes_statuses`): the reader, the server's run list and its run details.

A run QCoDeS marked completed is ``ok`` whatever its points against the declared shape;
one whose measurement raised is ``interrupted`` (completed, ended with an exception,
the traceback in the details); one with no results ``empty``; one never completed
``incomplete``, with the time after which nothing was written. Points are counted per
dependent, never as SQLite rows. The server tests use the real clock (helper processes).
"""

from __future__ import annotations

import importlib.util
import os
import time
from typing import TYPE_CHECKING, Any

import pytest
import trio
from frontdoor_support import TIMEOUT, assert_no_children
from preview_support import connect, preview_server, server_config
from qcodes_statuses import STATUS_RUNS

from examples.preview.child.qcodes.source import open_source

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("qcodes") is None, reason="qcodes is not installed"
)


def test_the_reader_takes_the_status_qcodes_recorded(status_db: Path) -> None:
    with open_source(status_db) as source:
        runs = {r["run_id"]: r for r in source.list_runs()}
        assert set(runs) == set(STATUS_RUNS)
        for run_id, (name, status, points, planned) in STATUS_RUNS.items():
            run = runs[run_id]
            assert (run["name"], run["status"]) == (name, status), run_id
            assert (run["points"], run["planned_points"]) == (points, planned), run_id
            observation = source.read_run(run_id)
            assert observation["status"] == status, run_id
        # Fewer points than declared, yet completed: said in words, not as a status.
        assert runs[1]["status_reason"] == "completed with 200 of 300 planned points of signal"
        assert runs[2]["status_reason"] == "completed with 623 of 1440 planned points of current"
        assert runs[3]["status_reason"].startswith(
            "ended with an exception: RuntimeError: lock-in overload at point 50"
        )
        assert runs[4]["status_reason"] == "completed, no results were recorded"
        assert runs[5]["is_completed"] is False
        assert runs[6]["row_count"] == 420  # 200 + 200 + 20 points in 420 rows
        details = source.run_details(3)
        assert "RuntimeError: lock-in overload at point 50" in details["exception"]


async def _settled(client: Any) -> dict[int, dict[str, Any]]:
    """The run list once every run has its status (``incomplete`` for the stalled one)."""
    with trio.fail_after(TIMEOUT * 3):
        while True:
            runs = {r["run_id"]: r for r in (await client.request("list_runs"))["runs"]}
            if len(runs) == len(STATUS_RUNS) and all(
                runs[k]["status"] == STATUS_RUNS[k][1] for k in STATUS_RUNS
            ):
                return runs
            await trio.sleep(0.05)  # polling a condition, under the deadline above


async def test_run_list_and_details_report_status_and_points(
    status_db: Path, tmp_path: Path
) -> None:
    config = server_config(status_db, tmp_path, stall_after=0.5)
    before = time.time()
    modified = os.stat(status_db).st_mtime
    async with preview_server(config) as (front, _app), connect(front) as client:
        runs = await _settled(client)
        for run_id, (_name, _status, points, planned) in STATUS_RUNS.items():
            listed = {p["name"]: p for p in runs[run_id]["points"]}
            assert {k: p["points"] for k, p in listed.items()} == points, run_id
            assert {k: p["planned"] for k, p in listed.items() if p["planned"]} == planned
        assert runs[6]["rows"] == 420
        assert runs[2]["shape"] == [40, 36]
        # Only the run never completed has a time after which nothing came: the file's.
        idle = runs[5]["idle_since"]
        assert idle is not None
        assert idle <= before
        assert idle == pytest.approx(modified, abs=1.0)
        assert all(runs[k]["idle_since"] is None for k in STATUS_RUNS if k != 5)

        details = {k: await client.request("run_details", run_id=k) for k in STATUS_RUNS}
        for run_id, (_name, status, points, _planned) in STATUS_RUNS.items():
            reply = details[run_id]
            expected = "incomplete" if status == "incomplete" else status
            assert reply["status"] == expected, run_id
            assert {p["name"]: p["points"] for p in reply["points"]} == points
        assert details[6]["results"] == 420
        assert "lock-in overload at point 50" in details[3]["exception"]
        assert details[1]["exception"] is None
        assert details[2]["status_reason"] == "completed with 623 of 1440 planned points of current"
    assert_no_children()
