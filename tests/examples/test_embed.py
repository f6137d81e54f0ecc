"""The README's embedding example runs as documented: every run drawn, selected first."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from PIL import Image
from process_support import assert_no_children

from actors import SchedulerConfig
from actors._scheduler._scheduler import Scheduler
from examples.preview.app.runtime_kinds import PREVIEW_KINDS
from examples.preview.cli.embed import cli, list_runs, main

DATA = Path(__file__).resolve().parent.parent / "data" / "qcodes_sample.db"


async def test_embed_draws_every_run_selected_first(tmp_path: Path) -> None:
    db = tmp_path / "sample.db"
    shutil.copy(DATA, db)  # never open the checked-in file in place (WAL side files)
    out = tmp_path / "out"
    out.mkdir()
    written = await main(db, list_runs(db), out, select=4)
    assert [p.name for p in written[:2]] == ["run4-thumbnail.png", "run4-preview.png"]
    assert len(written) == 12 * 2
    for path in written:
        with Image.open(path) as image:
            expected = (160, 120) if "thumbnail" in path.name else (640, 480)
            assert image.size == expected
    assert_no_children()


def test_embed_cli_refuses_a_non_database(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not sqlite")
    assert cli([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("embed: ")
    assert err.count("\n") == 1


def test_embed_lists_runs_without_or_sharing_a_guid(tmp_path: Path) -> None:
    # RunInfo(guid=None) raised ValueError (a traceback instead of thumbnails), and two
    # runs with one GUID made open_runtime refuse the run list (ScheduleRejected).
    db = tmp_path / "sample.db"
    shutil.copy(DATA, db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET guid = NULL WHERE run_id = 2")
    conn.execute("UPDATE runs SET guid = (SELECT guid FROM runs WHERE run_id = 1) WHERE run_id = 3")
    conn.commit()
    conn.close()
    runs = list_runs(db)
    Scheduler(runs, source="db", config=SchedulerConfig(kinds=PREVIEW_KINDS))
    assert [run.run_id for run in runs] == list(range(1, 13))
    assert len({run.guid for run in runs}) == 12
    assert runs[1].guid == "run-2"
