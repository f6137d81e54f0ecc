"""A ledger that cannot commit pauses admission; it never ends the log (design §6.13).

``PRAGMA max_page_count`` makes SQLite answer ``SQLITE_FULL`` exactly as a full disk does
(and ``query_only`` an I/O-like refusal), in process and deterministically; the real
full disk, a small tmpfs, runs in a child process of its own mount namespace.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from ledger_support import events_until

from actors._eventlog import EventLogActor, EventLogClient
from actors._eventlog._eventlog import EventLog, open_event_log
from actors._eventlog._ledger import SQLiteLedger
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import LedgerError, LedgerUnavailable

OPS = [OperationSpec(name="job", fields={"n"})]
DISK_FULL_APP = Path(__file__).with_name("diskfull_app.py")


def cfg(path: Path, **kwargs: object) -> EventLogConfig:
    return EventLogConfig(
        ledger_path=path,
        synchronous="NORMAL",
        ledger_retry_min=0.01,
        ledger_retry_max=0.02,
        **kwargs,  # type: ignore[arg-type]
    )


async def pragma(log: EventLog, sql: str) -> None:
    """Run a pragma on the log's own connection, in its worker thread."""
    ledger = log._ledger
    assert ledger is not None
    await ledger._reads.call(lambda: ledger._store.conn.execute(sql).fetchall())  # type: ignore[union-attr]


async def full_disk(log: EventLog) -> None:
    ledger = log._ledger
    assert ledger is not None
    pages = await ledger._reads.call(
        lambda: ledger._store.conn.execute("PRAGMA page_count").fetchone()[0]  # type: ignore[union-attr]
    )
    await pragma(log, f"PRAGMA max_page_count = {pages}")


async def test_disk_full_refuses_new_work_keeps_answering_and_resumes_by_itself(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    async with open_event_log(cfg(path, window=2), operations=OPS) as log:
        port = log.subscribe("watcher")
        acknowledged = [await log.submit("job", {"n": k}, request_id=f"r{k}") for k in range(3)]
        await full_disk(log)
        big = {"n": "x" * 8000}  # needs new pages
        with pytest.raises(LedgerUnavailable) as info:
            await log.submit("job", big, request_id="big")
        error = info.value
        assert (error.code, error.category, error.retryable) == (
            "ledger_unavailable",
            "transient",
            True,
        )
        assert "SQLITE_FULL" in error.details["cause"]
        assert 0 < error.details["retry_after"] <= 0.02
        assert "\n" not in str(error)
        assert log.statistics().paused
        # New work is refused at once, with the real cause ...
        with pytest.raises(LedgerUnavailable, match="database or disk is full"):
            await log.submit("job", {"n": 100})
        # ... while status and watch keep answering, from memory and from what is durable.
        assert (await log.status(acknowledged[0].run_id)).state == "queued"
        assert [e.seq for e in (await log.watch(0, limit=3)).events] == [1, 2, 3]
        await pragma(log, "PRAGMA max_page_count = 1000000")  # space again
        seen = await events_until(port, "admission_resumed")
        assert (
            "admission_paused",
            {"reason": "ledger_unavailable", "cause": error.details["cause"]},
        ) in seen
        assert seen[-1] == ("admission_resumed", {"reason": "ledger_available"})
        assert not log.statistics().paused
        # The request decided before the failure was kept and is durable now.
        kept = await log.submit("job", big, request_id="big")
        assert (kept.admitted, kept.run_id) == (True, 4)
        assert (await log.submit("job", {"n": 5})).run_id == 5
        stats = log.statistics().ledger
        assert stats is not None
        assert stats.failed_commits >= 1
        assert stats.unavailable is None
    async with open_event_log(cfg(path), operations=OPS) as log:
        assert [s.run_id for s in log.boot_report().survivors] == [1, 2, 3, 4, 5]


async def test_a_read_only_ledger_is_unavailable_too_and_recovers(tmp_path: Path) -> None:
    async with open_event_log(cfg(tmp_path / "ledger.db"), operations=OPS) as log:
        port = log.subscribe("watcher")
        await pragma(log, "PRAGMA query_only = 1")
        with pytest.raises(LedgerUnavailable) as info:
            await log.submit("job", {"n": 1})
        assert "SQLITE_READONLY" in info.value.details["cause"]
        await pragma(log, "PRAGMA query_only = 0")
        await events_until(port, "admission_resumed")
        assert (await log.submit("job", {"n": 1})).run_id == 1


async def test_the_actor_never_stops_on_a_full_disk(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        actor = EventLogActor(cfg(tmp_path / "ledger.db"), operations=OPS)
        client = EventLogClient(await nursery.start(actor.run), timeout=5)
        first = await client.submit("job", {"n": 1})
        await full_disk(actor.log)
        for k in range(3):
            with pytest.raises(LedgerUnavailable):
                await client.submit("job", {"n": "y" * 8000 + str(k)})
        assert (await client.status(first.run_id)).state == "queued"
        assert (await client.statistics()).paused
        await client.ref.stop(grace=5)  # a clean stop, not a crash


async def test_a_full_disk_at_close_keeps_the_log_for_the_next_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.db"
    async with open_event_log(cfg(path), operations=OPS) as log:
        acknowledged = await log.submit("job", {"n": 1}, request_id="kept")
        await full_disk(log)
        log.finish(acknowledged.run_id, "ok", {"rows": "r" * 8000})  # cannot be committed
    # The close said so, and did not raise: the decision was never acknowledged.
    assert any("final commit failed" in r.getMessage() for r in caplog.records)
    assert (tmp_path / "ledger.db-wal").exists()  # kept, as after a crash
    async with open_event_log(cfg(path), operations=OPS) as log:
        held = log.boot_report().survivors
        assert [(s.run_id, s.state) for s in held] == [(acknowledged.run_id, "held")]
        assert await log.submit("job", {"n": 1}, request_id="kept") == acknowledged


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare(1)")
def test_a_real_full_disk_loses_no_acknowledged_run(tmp_path: Path) -> None:
    # A 1 MiB tmpfs in a mount namespace of the child's own: nothing to clean up after.
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {tmp_path}"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.decode().strip()}")
    mount = tmp_path / "disk"
    mount.mkdir()
    script = (
        f"mount -t tmpfs -o size=1m tmpfs {mount} && exec {sys.executable} {DISK_FULL_APP} {mount}"
    )
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["refused_cause"].startswith("SQLITE_FULL")
    assert report["status_while_full"] == "queued"
    assert report["watch_while_full"] == 5
    assert report["refused_at_once"] is True
    assert report["resumed"] is True
    assert report["after_resume"] is True
    assert report["acknowledged"] >= 3
    assert report["lost"] == []


async def test_sqlite_errors_stay_the_cause_of_ours(tmp_path: Path) -> None:
    async with open_event_log(cfg(tmp_path / "read.db"), operations=OPS) as log:
        ledger = log._ledger
        assert ledger is not None
        with pytest.raises(LedgerError) as info:
            await ledger._reads.query("SELECT * FROM nowhere", ())
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    ledger = SQLiteLedger(str(tmp_path / "close.db"))
    await ledger.open(keep_requests=10)
    ledger.stage_meta("revision", "1")

    def broken(batch: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    ledger._commit_sync = broken  # type: ignore[method-assign]
    with pytest.raises(LedgerError) as info:
        await ledger.close()
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
