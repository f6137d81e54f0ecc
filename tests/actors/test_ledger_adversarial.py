"""Adversarial tests of the SQLite ledger (design §6.10): damaged, foreign and odd files.

Each refused file gets a clear error and keeps every byte (of the database and of its
``-wal``), and no ``-wal``/``-shm`` appears. A crash image taken right after receipts
were acknowledged holds every one of them.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import sqlite3
from typing import TYPE_CHECKING

import pytest
import trio

from actors._eventlog._eventlog import open_event_log
from actors._eventlog._ledger._schema import APPLICATION_ID, SCHEMA_VERSION
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import LedgerCorrupt, LedgerError, LedgerVersionUnsupported

if TYPE_CHECKING:
    from pathlib import Path

OPS = [OperationSpec(name="job", fields={"n"})]


def cfg(path: Path) -> EventLogConfig:
    return EventLogConfig(ledger_path=path, synchronous="NORMAL")


def fingerprint(directory: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


async def refused(path: Path, error: type[Exception]) -> Exception:
    before = fingerprint(path.parent)
    with pytest.raises(error) as info:
        async with open_event_log(cfg(path), operations=OPS):
            pass  # pragma: no cover
    after = fingerprint(path.parent)
    if f"{path.name}-wal" in before:
        # Reading committed pages from a WAL needs its index: SQLite makes a -shm.
        after.pop(f"{path.name}-shm", None)
    assert after == before  # every byte kept, nothing else created
    assert str(path) in str(info.value)
    return info.value


async def fill(path: Path, n: int = 5) -> None:
    async with open_event_log(cfg(path), operations=OPS) as log:
        for k in range(n):
            await log.submit("job", {"n": k}, request_id=f"r{k}")


def wal_size(path: Path) -> int:
    return os.path.getsize(f"{path}-wal")


def crash_image(source: Path, target: Path) -> None:
    """Copy a live ledger's files as a crash would leave them (no checkpoint)."""
    for suffix in ("", "-wal"):
        if os.path.exists(f"{source}{suffix}"):
            shutil.copy(f"{source}{suffix}", f"{target}{suffix}")


async def test_a_zero_length_file_is_refused_never_reused(tmp_path: Path) -> None:
    # design §6.11: it used to be taken for a new ledger, its history gone silently.
    path = tmp_path / "ledger.db"
    path.write_bytes(b"")
    error = await refused(path, LedgerCorrupt)
    assert "0-byte" in str(error)


async def test_a_missing_file_is_a_new_ledger_made_whole_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    async with open_event_log(cfg(path), operations=OPS) as log:
        assert (await log.submit("job", {"n": 1})).admitted
    assert sorted(os.listdir(tmp_path)) == ["ledger.db"]  # no temporary left
    async with open_event_log(cfg(path), operations=OPS) as log:
        assert len(log.boot_report().survivors) == 1


async def test_an_empty_sqlite_database_is_refused_never_reused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 0")
    conn.execute("VACUUM")  # a valid, empty database file
    conn.close()
    assert path.stat().st_size > 0
    error = await refused(path, LedgerError)
    assert "an empty SQLite database but not an event-log ledger" in str(error)


@pytest.mark.parametrize("main", ["empty", "missing"])
async def test_empty_or_missing_file_beside_a_full_wal_is_refused(
    tmp_path: Path, main: str
) -> None:
    # It used to be opened as a brand-new ledger: SQLite then reset the WAL that held
    # the committed (acknowledged) requests.
    live = tmp_path / "live"
    live.mkdir()
    image = tmp_path / "image"
    image.mkdir()
    async with open_event_log(cfg(live / "ledger.db"), operations=OPS) as log:
        for k in range(5):
            await log.submit("job", {"n": k})
        crash_image(live / "ledger.db", image / "ledger.db")
    path = image / "ledger.db"
    assert wal_size(path) > 0
    if main == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
    error = await refused(path, LedgerCorrupt)
    assert "write-ahead log" in str(error)


async def test_our_id_without_our_tables_is_refused_untouched(tmp_path: Path) -> None:
    # Before, the check passed and "PRAGMA journal_mode=WAL" rewrote the header before
    # the first query failed with "no such table".
    path = tmp_path / "ledger.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute("CREATE TABLE unrelated (x)")
    conn.commit()
    conn.close()
    error = await refused(path, LedgerCorrupt)
    assert "events, meta, requests, runs" in str(error)


async def test_a_ledger_with_an_altered_table_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    await fill(path)
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE runs DROP COLUMN interruptions")
    conn.commit()
    conn.close()
    error = await refused(path, LedgerCorrupt)
    assert "(runs)" in str(error)


async def test_older_schema_version_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    await fill(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 0")
    conn.close()
    error = await refused(path, LedgerVersionUnsupported)
    assert error.details == {"version": 0, "supported": SCHEMA_VERSION}  # type: ignore[attr-defined]


async def test_newer_schema_with_a_wal_beside_it_is_refused_untouched(tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    image = tmp_path / "image"
    image.mkdir()
    async with open_event_log(cfg(live / "ledger.db"), operations=OPS) as log:
        await log.submit("job", {"n": 1})
        conn = sqlite3.connect(live / "ledger.db")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 7}")
        conn.close()
        crash_image(live / "ledger.db", image / "ledger.db")
    await refused(image / "ledger.db", LedgerVersionUnsupported)


@pytest.mark.parametrize(
    "content",
    [
        b"SQLite format 3\x00" + random.Random(1).randbytes(200),  # the magic, then noise
        b"SQLite format 3\x00" + b"\x00" * 84,  # a bare 100-byte header
        random.Random(2).randbytes(8192),
        b"plain text, not a database\n" * 50,
        b"\x00" * 4096,
    ],
    ids=["magic_then_noise", "bare_header", "random", "text", "zeros"],
)
async def test_junk_files_are_refused_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "ledger.db"
    path.write_bytes(content)
    await refused(path, LedgerCorrupt)


async def test_truncated_mid_page_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    await fill(path, 50)
    data = path.read_bytes()
    assert len(data) >= 3 * 4096
    path.write_bytes(data[: 2 * 4096 + 1234])
    await refused(path, LedgerCorrupt)


async def test_a_directory_and_a_foreign_database(tmp_path: Path) -> None:
    folder = tmp_path / "ledger.db"
    folder.mkdir()
    with pytest.raises(LedgerError, match="cannot read ledger"):
        async with open_event_log(cfg(folder), operations=OPS):
            pass  # pragma: no cover
    other = tmp_path / "other" / "app.db"
    other.parent.mkdir()
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE runs (x)")
    conn.execute("INSERT INTO runs VALUES (1)")
    conn.commit()
    conn.close()
    error = await refused(other, LedgerError)
    assert "not an event-log ledger" in str(error)


async def test_every_acknowledged_receipt_is_in_a_crash_image(tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    image = tmp_path / "image"
    image.mkdir()
    config = EventLogConfig(
        ledger_path=live / "ledger.db", synchronous="NORMAL", commit_linger=0.005
    )
    receipts: dict[str, object] = {}
    async with open_event_log(config, operations=OPS) as log:

        async def submit(k: int) -> None:
            receipts[f"r{k}"] = await log.submit("job", {"n": k % 150}, request_id=f"r{k}")

        async with trio.open_nursery() as nursery:
            for k in range(300):
                nursery.start_soon(submit, k)
        assert log.statistics().ledger.commits < 300  # type: ignore[union-attr]
        crash_image(live / "ledger.db", image / "ledger.db")  # no close, no checkpoint
    async with open_event_log(cfg(image / "ledger.db"), operations=OPS) as log:
        assert log.statistics().head >= 150
        for request_id, receipt in receipts.items():
            k = int(request_id[1:])
            assert await log.submit("job", {"n": k % 150}, request_id=request_id) == receipt
        assert log.statistics().head == log.statistics().head  # replays emit nothing
        survivors = {s.run_id for s in log.boot_report().survivors}
        assert survivors == {r.run_id for r in receipts.values()}  # type: ignore[attr-defined]


async def test_concurrent_identical_submits_decided_after_a_ledger_lookup(tmp_path: Path) -> None:
    # retain_requests=0: every request id is looked up in the ledger before it is
    # decided, so concurrent submits of one id all wait, then must agree.
    config = EventLogConfig(
        ledger_path=tmp_path / "ledger.db", synchronous="NORMAL", retain_requests=0, window=4
    )
    async with open_event_log(config, operations=OPS) as log:
        receipts: list[object] = []
        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(
                    lambda: _append(receipts, log.submit("job", {"n": 1}, request_id="same"))
                )
        assert len(receipts) == 10
        assert all(r == receipts[0] for r in receipts)
        with pytest.raises(Exception, match="other content") as info:
            await log.submit("job", {"n": 2}, request_id="same")
        assert info.value.code == "request_conflict"  # type: ignore[attr-defined]
        for n in range(10):
            await log.submit("job", {"n": 100 + n})
        # below the 4-event window the ledger serves the events: never a gap
        result = await log.watch(0, limit=1000)
        assert [e.seq for e in result.events] == list(range(1, log.statistics().head + 1))
        assert [e.kind for e in result.events][:1] == ["job_queued"]


async def _append(into: list[object], awaitable: object) -> None:
    into.append(await awaitable)  # type: ignore[misc]
