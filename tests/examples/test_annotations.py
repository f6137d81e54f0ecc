"""The notes file beside a database: a bad file is no notes, never a failed request
(design §7.2). A hand-edited file may hold anything."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
import trio

from examples.preview.app.annotations import Annotations, notes_path

if TYPE_CHECKING:
    from pathlib import Path


@dataclass
class Row:
    guid: str
    starred: bool = False
    note: str = ""


@dataclass
class Table:
    runs: dict[int, Row] = field(default_factory=lambda: {4: Row("guid-4")})


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("[" * 100_000 + "]" * 100_000, {}),  # nested too deep for the json module
        ("{not json", {}),
        ('{"runs": [1]}', {}),
        (json.dumps({"runs": {"guid-4": {"note": 5, "starred": "yes"}}}), {}),
        (json.dumps({"runs": {"guid-4": {"note": "kept", "starred": 1}}}), {"note": "kept"}),
    ],
    ids=["deep", "not-json", "runs-list", "wrong-types", "some-right"],
)
async def test_a_bad_notes_file_is_read_as_no_notes_and_starring_still_works(
    tmp_path: Path, text: str, kept: dict[str, Any]
) -> None:
    db = tmp_path / "runs.db"
    db.write_bytes(b"")
    notes_path(db).write_text(text)
    notes, table = Annotations(db), Table()
    await notes.load()
    notes.apply(table)
    assert (table.runs[4].starred, table.runs[4].note) == (False, kept.get("note", ""))
    await notes.set(table, 4, starred=True, note=None)
    notes.apply(table)
    assert table.runs[4].starred
    written = json.loads(notes_path(db).read_text())
    assert written["runs"] == {"guid-4": {**kept, "run_id": 4, "starred": True}}


async def test_a_star_set_while_another_load_reads_the_file_is_kept(tmp_path: Path) -> None:
    """Two clients' first ``list_runs`` load the file at once: the later read must not
    replace the state a star was already set in."""
    db = tmp_path / "runs.db"
    db.write_bytes(b"")
    notes, table = Annotations(db), Table()
    slow_read, release = trio.Event(), threading.Event()
    read = notes._read

    def read_slowly() -> dict[str, dict[str, Any]]:
        found = read()
        trio.from_thread.run_sync(slow_read.set)
        release.wait(timeout=10)
        return found

    async with trio.open_nursery() as nursery:
        notes._read = read_slowly  # type: ignore[method-assign]
        nursery.start_soon(notes.load)  # the slow one: its read is held
        await slow_read.wait()
        notes._read = read  # type: ignore[method-assign]
        await notes.set(table, 4, starred=True, note=None)
        release.set()
    notes.apply(table)
    assert table.runs[4].starred
