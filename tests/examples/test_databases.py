"""A preview server of several databases: ids, the picker's requests, a watched folder
(design §7.5).

The server runs real helper processes for each database started, so the test uses the
real clock with a short scan interval and generous deadlines (contributing §F.3), and checks
that no child process is left.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
from typing import TYPE_CHECKING, Any

import pytest
import trio
from frontdoor_support import TIMEOUT, assert_no_children, children
from preview_support import (
    Seen,
    connect,
    decode_png,
    fetch,
    fetch_png,
    preview_server,
    pump,
    server_config,
)

from examples.preview.app.databases import DatabaseEntry, Databases, file_stamp, find_databases
from examples.preview.app.image_urls import database_id
from examples.preview.app.images import IMMUTABLE
from examples.preview.app.preview_app import PreviewApp, open_database
from examples.preview.server import main as preview_server_main
from protocol import messages
from protocol.codec import encode_message

if TYPE_CHECKING:
    from pathlib import Path

    from frontdoor_support import Client


def test_a_folder_gives_its_db_files_sorted_and_not_recursively(tmp_path: Path) -> None:
    folder = tmp_path / "measurements"
    (folder / "sub").mkdir(parents=True)
    for name in ("b.db", "a.db", "notes.txt", "sub/c.db"):
        (folder / name).write_bytes(b"")
    (folder / "dir.db").mkdir()
    named = tmp_path / "other.sqlite"
    named.write_bytes(b"")
    found = find_databases([named, folder, folder / "a.db", tmp_path / "missing"])
    assert [path.name for path in found] == ["other.sqlite", "a.db", "b.db"]
    assert all(path.is_absolute() for path in found)


async def _wait_push(client: Client, kind: str, **fields: Any) -> dict[str, Any]:
    """The next push of type ``kind`` with ``fields`` (others are skipped)."""
    with trio.fail_after(TIMEOUT):
        while True:
            message = await client.next_push()
            if message["type"] == kind and all(message[k] == v for k, v in fields.items()):
                return message


async def test_two_databases_a_broken_file_and_one_added_while_running(
    writable_db: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    first = shutil.copyfile(writable_db, folder / "a_first.db")
    second = shutil.copyfile(writable_db, folder / "b_second.db")
    (folder / "c_broken.db").write_bytes(b"not a database at all")
    config = server_config(first, tmp_path, helpers=1, scan_interval=0.1)
    ids = {path.name: database_id(path) for path in (first, second)}
    async with preview_server(config, paths=[folder]) as (front, app):
        assert app.db_id == ids["a_first.db"]
        async with connect(front) as client:
            listed = await client.request("list_databases")
            entries = {entry["name"]: entry for entry in listed["databases"]}
            assert listed["current"] == ids["a_first.db"]
            assert list(entries) == ["a_first.db", "b_second.db", "c_broken.db"]
            assert entries["a_first.db"]["state"] == "ready"
            assert entries["b_second.db"]["state"] == "idle"
            assert entries["b_second.db"]["runs"] == 12
            assert entries["c_broken.db"]["state"] == "error"
            assert (
                "not a SQLite" in entries["c_broken.db"]["error"] or entries["c_broken.db"]["error"]
            )
            assert all(str(tmp_path) not in str(entry) for entry in listed["databases"])

            unknown = await client.request("use_database", db="nope-00000000")
            assert (unknown["code"], unknown["details"]["fields"]) == ("invalid_command", ["db"])
            broken = await client.request("use_database", db=entries["c_broken.db"]["db"])
            assert broken["code"] == "source_unreadable"

            # The second database starts on first use; its runs and images are its own.
            used = await client.request("use_database", db=ids["b_second.db"])
            assert used["type"] == "ok"
            ready = await _wait_push(client, "database_added")
            while ready["database"]["state"] != "ready":
                ready = await _wait_push(client, "database_added")
            assert ready["database"]["db"] == ids["b_second.db"]
            runs = await client.request("list_runs")
            assert len(runs["runs"]) == 12
            seen = Seen()
            with trio.fail_after(40):
                await pump(client, seen, lambda: seen.newest(1, "thumbnail") is not None)
            notice = seen.newest(1, "thumbnail")
            assert notice is not None
            assert notice["db"] == ids["b_second.db"]
            assert decode_png(await fetch_png(front.url, notice)).size == (160, 120)
            gone = await fetch(front.url, notice["url"].replace(ids["b_second.db"], "x-1"))
            assert gone.status == 404

            # The file in use goes away: its helpers are reaped, it stays listed in error.
            helpers = len(children(os.getpid()))
            second.unlink()
            gone = await _wait_push(client, "database_added")
            assert gone["database"] == {
                "db": ids["b_second.db"], "name": "b_second.db", "state": "error",
                "error": "the file is gone", "runs": 12,
            }  # fmt: skip
            refused = await client.request("list_runs")
            assert refused["code"] == "source_unreadable"
            assert "the file is gone" in refused["message"]
            with trio.fail_after(TIMEOUT):
                while len(children(os.getpid())) > helpers - 1:  # noqa: ASYNC110
                    await trio.sleep(0.05)  # the helper exits in its own time

            # The file is back: listed idle, and served again (new helpers) on its next use.
            shutil.copyfile(writable_db, folder / "b_second.tmp")
            (folder / "b_second.tmp").rename(second)
            back = await _wait_push(client, "database_added")
            while back["database"]["db"] != ids["b_second.db"]:
                back = await _wait_push(client, "database_added")
            assert (back["database"]["state"], back["database"]["error"]) == ("idle", None)
            idle = await client.request("list_runs")
            assert idle["code"] == "source_unreadable"
            assert "use_database starts it" in idle["message"]
            used = await client.request("use_database", db=ids["b_second.db"])
            assert used["type"] == "ok"
            runs = await client.request("list_runs")
            assert len(runs["runs"]) == 12
            seen = Seen()
            with trio.fail_after(40):
                await pump(client, seen, lambda: seen.newest(1, "thumbnail") is not None)
            notice = seen.newest(1, "thumbnail")
            assert notice is not None
            assert decode_png(await fetch_png(front.url, notice)).size == (160, 120)

            # Damaged in place while in use: in error, its helpers reaped.
            helpers = len(children(os.getpid()))
            with second.open("r+b") as file:
                file.write(b"garbage garbage!")
            damaged = await _wait_push(client, "database_added")
            while damaged["database"]["state"] != "error":  # past an earlier notice
                damaged = await _wait_push(client, "database_added")
            assert (damaged["database"]["db"], damaged["database"]["error"]) == (
                ids["b_second.db"], "not an SQLite database",
            )  # fmt: skip
            refused = await client.request("list_runs")
            assert "not an SQLite database" in refused["message"]
            with trio.fail_after(TIMEOUT):
                while len(children(os.getpid())) > helpers - 1:  # noqa: ASYNC110
                    await trio.sleep(0.05)  # the helper exits in its own time

            # A file copied in while running is listed live, and removed again.
            third = folder / "d_third.db"
            shutil.copyfile(writable_db, folder / "d_third.tmp")
            (folder / "d_third.tmp").rename(third)
            added = await _wait_push(client, "database_added")
            while added["database"]["name"] != "d_third.db":
                added = await _wait_push(client, "database_added")
            assert added["database"]["state"] == "idle"
            third.unlink()
            removed = await _wait_push(client, "database_removed")
            assert removed["db"] == database_id(third)
            listed = await client.request("list_databases")
            assert [e["name"] for e in listed["databases"]] == [
                "a_first.db", "b_second.db", "c_broken.db",
            ]  # fmt: skip
            assert listed["current"] == ids["b_second.db"]
    assert_no_children()


def test_the_command_line_refuses_what_it_cannot_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert preview_server_main([str(empty), "--port", "0"]) == 2
    assert capsys.readouterr().err == (
        f"preview_server: no readable QCoDeS database in {empty}: no *.db file there\n"
    )
    (empty / "broken.db").write_bytes(b"not a database")
    assert preview_server_main([str(empty), "--port", "0"]) == 2
    assert capsys.readouterr().err == (
        f"preview_server: no readable QCoDeS database in {empty}: not an SQLite database "
        f"(bad file header): {empty / 'broken.db'}\n"
    )  # why, so a person need not open each file
    sqlite3.connect(empty / "other.db").execute("CREATE TABLE x (a)").connection.close()
    assert preview_server_main([str(empty), "--port", "0"]) == 2
    assert capsys.readouterr().err.endswith(f"{empty / 'broken.db'} (and 1 more unreadable)\n")
    assert preview_server_main([str(empty), str(tmp_path / "missing.db"), "--port", "0"]) == 2
    line = capsys.readouterr().err
    assert line.startswith("preview_server: ")
    assert line.count("\n") == 1
    with pytest.raises(SystemExit):
        preview_server_main(["--scan", "0"])
    assert "argument --scan: must be > 0 seconds" in capsys.readouterr().err


async def test_a_scan_bounds_rechecks_and_drops_entries(
    writable_db: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # No runtime is needed to scan: the entries are checked, not started.
    folder = tmp_path / "folder"
    folder.mkdir()
    first = shutil.copyfile(writable_db, folder / "a.db")
    (folder / "b.db").write_bytes(b"being written")
    shutil.copyfile(writable_db, folder / "c.db")
    shutil.copyfile(writable_db, folder / "d.db")
    config = server_config(first, tmp_path, max_databases=3)
    identity = await trio.to_thread.run_sync(open_database, first)
    databases = Databases(PreviewApp(config, identity), [folder], config)
    await databases.scan()
    await databases.scan()
    states = {entry.name: (entry.state, entry.error) for entry in databases.entries.values()}
    assert states == {
        "a.db": ("ready", None),
        "b.db": ("error", "not an SQLite database"),
        "c.db": ("idle", None),
    }
    ignored = [r for r in caplog.records if getattr(r, "event", None) == "database_ignored"]
    assert [r.database for r in ignored] == ["d.db"]  # type: ignore[attr-defined]  # once

    shutil.copyfile(writable_db, folder / "b.db")  # the writer finished it
    (folder / "c.db").unlink()
    await databases.scan()
    states = {entry.name: entry.state for entry in databases.entries.values()}
    assert states == {"a.db": "ready", "b.db": "idle", "d.db": "idle"}
    assert databases.scans == 3


def _events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    """(event, database id) of the records so far, then forgets them."""
    seen = [
        (str(record.event), str(record.database))  # type: ignore[attr-defined]
        for record in caplog.records
        if getattr(record, "event", None) in {"database_removed", "database_state"}
    ]
    caplog.clear()
    return seen


async def test_a_file_changed_in_place_is_checked_again(
    writable_db: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="examples.preview")
    folder = tmp_path / "folder"
    folder.mkdir()
    first = shutil.copyfile(writable_db, folder / "a.db")
    written = shutil.copyfile(writable_db, folder / "b.db")
    damaged = shutil.copyfile(writable_db, folder / "c.db")
    replaced = shutil.copyfile(writable_db, folder / "d.db")
    config = server_config(first, tmp_path)
    identity = await trio.to_thread.run_sync(open_database, first)
    databases = Databases(PreviewApp(config, identity), [folder], config)
    await databases.scan()
    entries = {entry.name: entry for entry in databases.entries.values()}
    assert {name: entry.state for name, entry in entries.items()} == dict.fromkeys(
        ("a.db", "b.db", "c.db", "d.db"), "idle"
    ) | {"a.db": "ready"}
    caplog.clear()

    # Written to (a run grows): the same database, nothing to tell.
    with sqlite3.connect(written) as conn:
        conn.execute("CREATE TABLE grown (x)")
    conn.close()
    # Damaged in place (same inode): not served any more.
    with damaged.open("r+b") as file:
        file.write(b"garbage garbage!")
    # Replaced by a rename: another file, another database under the same name.
    shutil.copyfile(writable_db, folder / "d.tmp")
    os.replace(folder / "d.tmp", replaced)
    await databases.scan()
    after = {entry.name: entry for entry in databases.entries.values()}
    assert after["b.db"] is entries["b.db"]
    assert (after["b.db"].state, after["b.db"].error) == ("idle", None)
    assert after["c.db"] is entries["c.db"]
    assert (after["c.db"].state, after["c.db"].error) == ("error", "not an SQLite database")
    assert after["d.db"] is not entries["d.db"]
    assert (after["d.db"].db, after["d.db"].state) == (entries["d.db"].db, "idle")
    assert after["d.db"].identity["source_id"] != entries["d.db"].identity["source_id"]
    assert _events(caplog) == [
        ("database_state", entries["c.db"].db),
        ("database_removed", entries["d.db"].db),
        ("database_state", entries["d.db"].db),
    ]
    await databases.scan()  # nothing changed since: nothing to tell
    assert _events(caplog) == []


def test_a_link_is_listed_by_its_own_name_and_only_to_a_regular_file(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    secret = tmp_path / "secret_target.txt"
    secret.write_bytes(b"root:x:0:0")
    (folder / "passwd.db").symlink_to(secret)
    (folder / "tree.db").symlink_to(tmp_path)
    (folder / "null.db").symlink_to("/dev/null")
    (folder / "dangling.db").symlink_to(tmp_path / "nothing")
    found = find_databases([folder])
    assert found == [folder.resolve() / "passwd.db"]
    entry = DatabaseEntry.found(found[0])
    info = entry.info()
    assert info.name == "passwd.db"
    assert info.db.startswith("passwd-")
    assert "secret" not in repr(info)


async def test_odd_file_names_are_listed_safely_and_never_stop_the_scan(
    writable_db: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="examples.preview")
    folder = tmp_path / "folder"
    folder.mkdir()
    first = shutil.copyfile(writable_db, folder / "a.db")
    # Bytes that are not UTF-8 (Python keeps them as surrogates) and a newline.
    shutil.copyfile(writable_db, os.fsdecode(os.fsencode(folder) + b"/bad\xff\xfename.db"))
    shutil.copyfile(writable_db, folder / "new\nline.db")
    config = server_config(first, tmp_path)
    identity = await trio.to_thread.run_sync(open_database, first)
    databases = Databases(PreviewApp(config, identity), [folder], config)
    await databases.scan()
    states = {entry.name: (entry.state, entry.error) for entry in databases.entries.values()}
    assert states == {
        "a.db": ("ready", None),
        # The helpers get the path in JSON: it could never be opened there.
        "bad\ufffd\ufffdname.db": ("error", "its path is not UTF-8 (rename it)"),
        "new\ufffdline.db": ("idle", None),
    }
    for entry in databases.entries.values():  # every name goes out as UTF-8 text
        encode_message(messages.DatabaseAdded(database=entry.info())).encode("utf-8")
    logged = [r.getMessage() for r in caplog.records if getattr(r, "event", None)]
    assert logged
    assert not any("\n" in line for line in logged)


async def test_a_check_that_fails_unexpectedly_is_an_error_entry_and_the_scan_goes_on(
    writable_db: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    folder = tmp_path / "folder"
    folder.mkdir()
    first = shutil.copyfile(writable_db, folder / "a.db")
    shutil.copyfile(writable_db, folder / "b.db")
    shutil.copyfile(writable_db, folder / "c.db")
    config = server_config(first, tmp_path)
    identity = await trio.to_thread.run_sync(open_database, first)
    databases = Databases(PreviewApp(config, identity), [folder], config)

    def check(path: Path) -> dict[str, Any]:
        if path.name == "b.db":
            raise RuntimeError("a bug of the reader")
        return open_database(path)

    monkeypatch.setattr("examples.preview.app.databases.open_database", check)
    await databases.scan()
    states = {entry.name: (entry.state, entry.error) for entry in databases.entries.values()}
    assert states == {
        "a.db": ("ready", None),
        "b.db": ("error", "checking it failed (see the server's log)"),
        "c.db": ("idle", None),
    }
    (failed,) = [r for r in caplog.records if getattr(r, "event", None) == "database_check_failed"]
    assert (failed.database, failed.error) == ("b.db", "RuntimeError")  # type: ignore[attr-defined]
    assert failed.exc_info is not None


async def test_a_database_replaced_by_another_never_answers_the_old_ones_addresses(
    writable_db: Path, plots_db: Path, tmp_path: Path
) -> None:
    # The new app counts revisions from 1 again, under the same database id: only the
    # version in the address tells its images from the old ones a browser may hold
    # (immutable, for a year).
    folder = tmp_path / "folder"
    folder.mkdir()
    first = shutil.copyfile(writable_db, folder / "a.db")
    second = shutil.copyfile(writable_db, folder / "b.db")
    config = server_config(first, tmp_path, helpers=1, scan_interval=0.1)
    db = database_id(second)
    async with preview_server(config, paths=[folder]) as (front, _), connect(front) as client:

        async def run_1_preview() -> dict[str, Any]:
            assert (await client.request("use_database", db=db))["type"] == "ok"
            await client.request("list_runs")
            seen = Seen()
            with trio.fail_after(40):
                await pump(client, seen, lambda: seen.newest(1, "preview") is not None)
            notice = seen.newest(1, "preview")
            assert notice is not None
            return notice

        old = await run_1_preview()
        held = await fetch(front.url, old["url"])
        assert (held.status, held.headers["cache-control"]) == (200, IMMUTABLE)
        shutil.copyfile(plots_db, folder / "b.tmp")
        os.replace(folder / "b.tmp", second)
        await _wait_push(client, "database_removed", db=db)
        listed = await _wait_push(client, "database_added")
        while listed["database"]["db"] != db:
            listed = await _wait_push(client, "database_added")
        assert listed["database"]["state"] == "idle"
        new = await run_1_preview()
        assert new["revision"] == old["revision"]  # counted again from 1
        assert new["url"] != old["url"]
        stale = await fetch(front.url, old["url"])
        assert stale.status == 404
        assert b"is not held" in stale.body
        fresh = await fetch(front.url, new["url"])
        assert (fresh.status, fresh.headers["cache-control"]) == (200, IMMUTABLE)
        assert fresh.body != held.body
    assert_no_children()


async def test_a_scan_that_fails_is_logged_and_the_watch_goes_on(
    writable_db: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    folder = tmp_path / "folder"
    folder.mkdir()
    first = shutil.copyfile(writable_db, folder / "a.db")
    config = server_config(first, tmp_path, scan_interval=0.01)
    identity = await trio.to_thread.run_sync(open_database, first)
    databases = Databases(PreviewApp(config, identity), [folder], config)
    looks = 0

    def look(paths: list[Path]) -> list[tuple[Path, Any]]:
        nonlocal looks
        looks += 1
        if looks == 2:  # the watch's first scan
            raise RuntimeError("a bug of the scan")
        return [(path, file_stamp(path)) for path in find_databases(paths)]

    monkeypatch.setattr("examples.preview.app.databases._look", look)
    # No database is started here: neither the event log nor the front door is used.
    async with databases.running(None, None):  # type: ignore[arg-type]
        with trio.fail_after(TIMEOUT):
            while databases.scans < 3:  # noqa: ASYNC110 - the watch's own pace
                await trio.sleep(0.01)
    (failed,) = [r for r in caplog.records if getattr(r, "event", None) == "scan_failed"]
    assert failed.error == "RuntimeError"  # type: ignore[attr-defined]
    assert failed.exc_info is not None
