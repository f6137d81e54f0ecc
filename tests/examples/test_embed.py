"""The README's embedding example runs as documented: every run drawn, selected first."""

from __future__ import annotations

import shutil
from pathlib import Path

from PIL import Image
from process_support import assert_no_children

from examples.preview.embed import cli, list_runs, main

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
