"""The QCoDeS reader on damaged copies of ``tests/data/qcodes_plots.db`` (design §7.2).

Each test changes a private copy the way a crashed writer, a foreign tool or a bad
driver could, then reads it with the helper's handlers in this process. A helper's reply
must be strict JSON (no NaN, no bytes: the frame encoder refuses them), so each answer
is encoded as the helper would; one bad run must never hide the others.
"""

from __future__ import annotations

import gc
import io
import shutil
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from actors.errors import SourceUnreadable
from examples.preview.child.helper import PreviewHandlers
from examples.preview.child.qcodes.source import open_source
from protocol._strict_json import dumps_value

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


class _Context:
    """The helper's job context, for handlers called in-process."""

    def check_cancel(self) -> None:
        return None


CTX = _Context()


@pytest.fixture
def damaged(plots_db: Path, tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A writable connection to a private copy of the plots sample."""
    path = tmp_path / "damaged.db"
    shutil.copyfile(plots_db, path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def reopen(tmp_path: Path) -> Iterator[Callable[[], PreviewHandlers]]:
    """Open the damaged copy with the helper's handlers (after the test damaged it)."""
    opened: list[PreviewHandlers] = []

    def open_handlers() -> PreviewHandlers:
        handlers = PreviewHandlers()
        opened.append(handlers)
        handlers.startup({"db": str(tmp_path / "damaged.db")})
        return handlers

    try:
        yield open_handlers
    finally:
        for handlers in opened:
            if handlers.source is not None:
                handlers.source.close()


def sent(value: Any) -> Any:
    """``value`` as the helper's reply frame would carry it (strict JSON, UTF-8)."""
    dumps_value(value).encode("utf-8")
    return value


def test_text_that_is_not_utf8_is_read_with_replacement_characters(damaged, reopen):
    # SQLite stores whatever bytes a writer gave it; sqlite3 used to raise
    # OperationalError for the whole listing (source_unreadable for every run).
    damaged.execute("UPDATE runs SET name = CAST(X'fffe41' AS TEXT) WHERE run_id = 3")
    damaged.execute("UPDATE experiments SET sample_name = CAST(X'c328' AS TEXT)")
    helper = reopen()
    runs = sent(helper.list_runs({"limit": 500}, CTX))["runs"]
    assert [run["run_id"] for run in runs] == list(range(1, 9))
    assert runs[2]["name"] == "\ufffd\ufffdA"
    assert runs[0]["sample_name"] == "\ufffd("
    observation = sent(helper.read_run({"run_id": 3}, CTX))
    assert observation["dependents"][0]["points"] > 0
    assert sent(helper.run_details({"run_id": 3}, CTX))["name"] == "\ufffd\ufffdA"


def test_odd_cells_of_the_runs_table_do_not_break_the_listing(damaged, reopen):
    # One runs row with an infinite float or a BLOB where text is expected made the
    # whole list_runs page (and that run's read and details) unsendable: the helper's
    # strict JSON frame refused them, so no run of the database could be listed.
    damaged.executescript(
        """
        UPDATE runs SET amplifier = 9e999 WHERE run_id = 2;
        UPDATE runs SET operator = X'00ff' WHERE run_id = 3;
        UPDATE runs SET run_timestamp = 9e999, completed_timestamp = -9e999 WHERE run_id = 4;
        UPDATE runs SET guid = X'ff' WHERE run_id = 5;
        UPDATE runs SET name = X'6869', captured_run_id = -9e999 WHERE run_id = 6;
        UPDATE runs SET result_counter = 9e999, exp_id = X'01' WHERE run_id = 7;
        """
    )
    helper = reopen()
    runs = {run["run_id"]: run for run in sent(helper.list_runs({"limit": 500}, CTX))["runs"]}
    assert sorted(runs) == list(range(1, 9))
    assert runs[2]["metadata"]["amplifier"] is None
    assert runs[3]["metadata"]["operator"] == "<2 bytes>"
    assert (runs[4]["run_timestamp"], runs[4]["completed_timestamp"]) == (None, None)
    assert runs[5]["guid"] is None
    assert runs[6]["name"] == "<2 bytes>"
    assert (runs[7]["result_counter"], runs[7]["exp_id"]) == (None, "<1 bytes>")
    for run_id in range(2, 8):
        observation = sent(helper.read_run({"run_id": run_id}, CTX))
        assert observation["run_id"] == run_id
        details = sent(helper.run_details({"run_id": run_id}, CTX))
        assert details["run_id"] == run_id
    details = sent(helper.run_details({"run_id": 4}, CTX))
    assert (details["started"], details["ended"], details["duration"]) == (None, None, None)
    assert sent(helper.run_details({"run_id": 6}, CTX))["captured_run_id"] is None


def test_a_results_table_whose_ids_are_not_integers_is_still_read(damaged, reopen):
    # A results table rebuilt by a foreign tool (id TEXT instead of INTEGER PRIMARY KEY)
    # made int(max(id)) raise ValueError in every summary: list_runs failed with
    # handler_failed for the whole database.
    damaged.executescript(
        """
        ALTER TABLE "results-1-2" RENAME TO old;
        CREATE TABLE "results-1-2" (id TEXT, dac_gate numeric, leakage numeric);
        INSERT INTO "results-1-2" SELECT 'row' || id, dac_gate, leakage FROM old;
        DROP TABLE old;
        """
    )
    rows = damaged.execute('SELECT count(*) FROM "results-1-2"').fetchone()[0]
    helper = reopen()
    runs = {run["run_id"]: run for run in sent(helper.list_runs({"limit": 500}, CTX))["runs"]}
    assert sorted(runs) == list(range(1, 9))
    assert runs[2]["row_count"] == rows
    observation = sent(helper.read_run({"run_id": 2}, CTX))
    assert observation["dependents"][0]["points"] == rows
    probe = sent(helper.probe({"run_ids": [2]}, CTX))
    assert probe["runs"] == [[2, rows, 1, 0]]  # the row count stands in for max(id)


def test_a_snapshot_with_nan_values_is_sent_with_nulls(damaged, reopen):
    # QCoDeS writes its snapshot with json.dumps, so a parameter whose value is NaN
    # (a lock-in that has not measured yet) is stored as the bare word NaN. json.loads
    # kept it as a float NaN and the helper's strict JSON frame refused the reply:
    # run_details failed for every such run.
    snapshot = (
        '{"station": {"parameters": {"lockin_x": {"__class__": "Parameter", "value": NaN,'
        ' "unit": "V"}, "limit": {"value": Infinity}, "floor": {"value": -Infinity}}}}'
    )
    damaged.execute("UPDATE runs SET snapshot = ? WHERE run_id = 4", (snapshot,))
    details = sent(reopen().run_details({"run_id": 4}, CTX))
    parameters = details["snapshot"]["station"]["parameters"]
    assert parameters["lockin_x"] == {"__class__": "Parameter", "value": None, "unit": "V"}
    assert (parameters["limit"]["value"], parameters["floor"]["value"]) == (None, None)
    assert details["snapshot_bytes"] == len(snapshot)


def test_json_nested_too_deeply_is_left_out_like_any_unreadable_json(damaged, reopen):
    # json.loads raises RecursionError (not ValueError) past about a thousand levels:
    # run_details failed with handler_failed instead of leaving the snapshot (or the
    # links) out as it does for JSON that does not parse.
    deep = "[" * 100_000 + "]" * 100_000
    damaged.execute("UPDATE runs SET snapshot = ?, parent_datasets = ? WHERE run_id = 4",
                    (deep, f"[{deep}]"))  # fmt: skip
    details = sent(reopen().run_details({"run_id": 4}, CTX))
    assert (details["snapshot"], details["snapshot_bytes"]) == (None, len(deep))
    assert details["parents"] == []


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_a_damaged_npy_cell_is_a_missing_value_not_an_unreadable_run(damaged, reopen):
    # A .npy BLOB cut short, or whose header declares more elements than it holds, made
    # np.load raise ValueError or MemoryError (it allocates the declared shape first):
    # read_run failed with handler_failed and the whole run could not be drawn.
    good = npy(np.array([2.5]))
    huge = good.replace(b"'shape': (1,)", b"'shape': (1000000000000,)")
    assert huge != good  # the header really says so
    ids = [row[0] for row in damaged.execute('SELECT id FROM "results-1-2" ORDER BY id')]
    for row_id, cell in zip(ids, (good, good[:20], good[:-3], huge), strict=False):
        damaged.execute('UPDATE "results-1-2" SET leakage = ? WHERE id = ?', (cell, row_id))
    observation = sent(reopen().read_run({"run_id": 2}, CTX))
    entry = observation["dependents"][0]
    assert entry["points"] == len(ids)
    assert entry["nonfinite"] == 3  # the three damaged cells; the good one reads 2.5


def test_a_file_sqlite_cannot_read_leaves_no_descriptor_open(plots_db: Path, tmp_path: Path):
    # A truncated copy: an SQLite header, then nothing SQLite can read. A folder's broken
    # file is checked again at every scan: each check must give its descriptors back
    # at once, not whenever the garbage collector runs (disabled here to show it).
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(plots_db.read_bytes()[:5000])
    descriptors = Path("/proc/self/fd")
    gc.disable()
    try:
        before = len(list(descriptors.iterdir()))
        for _ in range(10):
            with pytest.raises(SourceUnreadable) as failed:
                open_source(truncated)
            assert failed.value.details["reason"] == "not_sqlite"
        assert len(list(descriptors.iterdir())) == before
    finally:
        gc.enable()
