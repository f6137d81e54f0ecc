"""The command-line client picks a database (``--db``) and lists them (``--databases``)
on a server of several databases (design §7.5).

Real servers with real helpers on the real clock (contributing §F.3); no child is left.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest
from frontdoor_support import assert_no_children
from preview_support import preview_server, server_config

from examples.preview.app.image_urls import database_id
from examples.preview.cli.client import DatabaseRefused, collect, database_lines, databases

if TYPE_CHECKING:
    from pathlib import Path


async def test_the_client_lists_databases_and_saves_the_images_of_the_one_named(
    writable_db: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    first = shutil.copyfile(writable_db, folder / "a_first.db")
    second = shutil.copyfile(writable_db, folder / "b_second.db")
    config = server_config(first, tmp_path, helpers=1)
    async with preview_server(config, paths=[folder]) as (front, _app):
        listed = await databases(front.url, timeout=20)
        lines = database_lines(listed)
        assert [line.split()[:3] for line in lines] == [
            ["*", database_id(first), "ready"],
            [database_id(second), "idle", "12"],
        ]
        assert lines[1].endswith("b_second.db")

        out = tmp_path / "out"
        seen = await collect(front.url, out, db=database_id(second), timeout=60)
        assert seen.complete
        assert seen.db == database_id(second)
        assert len(seen.runs) == 12
        assert {kind for _run, kind in seen.images} == {"thumbnail", "preview"}
        assert all(image.path.parent == out for image in seen.images.values())

        with pytest.raises(DatabaseRefused, match="nope-00000000"):
            await collect(front.url, out, db="nope-00000000", timeout=20)
    assert_no_children()
