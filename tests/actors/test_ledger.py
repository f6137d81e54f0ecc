"""Tests of the ledger: durability, boot, resume/discard, damaged files (design §6.10).

The semantics run on both engines (``ledger_at``: a SQLite file, a PostgreSQL schema);
damaged files are SQLite's, a foreign or newer schema both's."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
import trio
from pg_support import committed

from actors._eventlog._eventlog import open_event_log
from actors._eventlog._ledger._schema import SCHEMA_VERSION
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import (
    AdmissionFull,
    AlreadyDecided,
    CursorExpired,
    InvalidCommand,
    LedgerCorrupt,
    LedgerError,
    LedgerVersionUnsupported,
    RunQuarantined,
)

OPS = [OperationSpec(name="job", fields={"n"})]
APP = Path(__file__).with_name("eventlog_app.py")


def config(ledger_at, **kwargs):
    return EventLogConfig(ledger_path=ledger_at, synchronous="NORMAL", **kwargs)


async def test_events_beyond_the_retention_are_pruned_at_open_never_silently(ledger_at):
    # design §6.8, §6.15: a watch cursor below what the ledger keeps is cursor_expired
    # pointing at a snapshot; never a silent gap.
    async with open_event_log(config(ledger_at), operations=OPS) as log:
        for n in range(10):
            await log.submit("job", {"n": n})  # one job_queued event each
        head = (await log.watch(0, limit=1000)).head
    assert head == 10
    path = ledger_at
    cfg = config(ledger_at, ledger_retain_events=4, window=2)
    async with open_event_log(cfg, operations=OPS) as log:
        assert committed(path, "SELECT min(seq), max(seq), count(*) FROM events") == [(7, 10, 4)]
        for cursor in (0, 5):
            with pytest.raises(CursorExpired) as info:
                await log.watch(cursor)
            assert info.value.details == {"resync": "snapshot", "floor": 7}
        kept = await log.watch(6, limit=100)
        assert [e.seq for e in kept.events] == [7, 8, 9, 10]
        assert all(e.kind == "job_queued" for e in kept.events)
        await log.submit("job", {"n": 99})  # new events continue the sequence
        assert [e.seq for e in (await log.watch(10)).events] == [11]
    # Keeping more than there is deletes nothing.
    async with open_event_log(config(ledger_at), operations=OPS) as log:
        assert [e.seq for e in (await log.watch(6, limit=100)).events] == [7, 8, 9, 10, 11]


async def test_resume_at_capacity_pauses_admission_like_a_refused_submit(ledger_at):
    # design §6.5: a resume needs capacity like a submit; the first refusal of the episode
    # emits admission_paused, and admission_resumed follows once a run leaves.
    async with open_event_log(config(ledger_at), operations=OPS) as log:
        for n in range(2):
            await log.submit("job", {"n": n})
    async with open_event_log(config(ledger_at, max_inflight=1), operations=OPS) as log:
        assert [s.run_id for s in log.boot_report().survivors] == [1, 2]
        assert (await log.resume(1)).state == "queued"
        for _ in range(2):  # one episode: paused once
            with pytest.raises(AdmissionFull) as info:
                await log.resume(2)
            # No run has left yet: the hint is the longest one (retry_after_max).
            assert info.value.details == {"depth": 1, "bound": 1, "retry_after": 5.0}
        assert log.statistics().paused
        assert (await log.cancel(1, "ops")).state == "cancelled"
        assert not log.statistics().paused
        assert (await log.resume(2)).state == "queued"
        events = (await log.watch(0, limit=1000)).events
        admission = [(e.kind, e.data) for e in events if e.kind.startswith("admission")]
        assert admission == [
            ("admission_paused", {"depth": 1, "bound": 1}),
            ("admission_resumed", {"depth": 0, "bound": 1}),
        ]


async def test_receipt_is_durable_when_returned_and_survives_restart(ledger_at):
    cfg = config(ledger_at)
    async with open_event_log(cfg, operations=OPS) as log:
        first = await log.submit("job", {"n": 1}, request_id="a")
        rows = committed(cfg.ledger_path, "SELECT request_id, run_id FROM requests")
        assert rows == [("a", first.run_id)]  # on disk before the receipt was returned
        log.start(first.run_id)
        log.finish(first.run_id, "ok", {"answer": 42})
        log.apply_edit()
        second = await log.submit("job", {"n": 2}, request_id="b")
        head = log.head
    async with open_event_log(cfg, operations=OPS) as log:
        assert await log.submit("job", {"n": 1}, request_id="a") == first
        assert log.revision == 1
        assert log.head == head + 0
        status = await log.status(first.run_id)
        assert (status.state, status.verdict, status.result) == ("finished", "ok", {"answer": 42})
        # watch from 0 reads the older events from SQLite: no gap across the restart
        result = await log.watch(0, limit=100)
        assert [e.seq for e in result.events] == list(range(1, head + 1))
        assert result.events[-1].kind == "job_queued"
        assert result.events[-1].run_id == 2
        third = await log.submit("job", {"n": 3})
        assert third.run_id == 3
        assert third.event_cursor == head
        assert [s.run_id for s in log.boot_report().survivors] == [second.run_id]


async def test_boot_holds_survivors_until_resume_or_discard(ledger_at):
    # The real clock: the ledger's worker threads would let a virtual clock jump to its
    # deadlines (the commit watchdog, the close timeout). The runner blocks until
    # cancelled; "nothing runs by itself" is checked after a short real wait.
    cfg = config(ledger_at, max_concurrency=1)
    calls = []
    started = [trio.Event() for _ in range(3)]  # the first, second and third call

    async def runner(run, report):
        calls.append(run.run_id)
        started[len(calls) - 1].set()
        await trio.sleep_forever()

    async def until_call(n: int) -> None:
        with trio.fail_after(10):
            await started[n - 1].wait()

    async with open_event_log(cfg, operations=OPS, runners={"job": runner}) as log:
        for n in range(3):
            await log.submit("job", {"n": n})
        await until_call(1)  # run 1 is running, 2 and 3 are queued
        assert log.statistics().queued == 2
    assert calls == [1]
    for boot in (1, 2):
        async with open_event_log(cfg, operations=OPS, runners={"job": runner}) as log:
            report = log.boot_report()
            assert [s.run_id for s in report.survivors] == [1, 2, 3]
            assert [(s.run_id, s.interruptions) for s in report.interrupted] == [(1, boot)]
            assert [s.run_id for s in report.quarantined] == ([1] if boot == 2 else [])
            await trio.sleep(0.05)
            assert calls == [1] * boot  # nothing runs by itself
            stats = log.statistics()
            assert (stats.queued, stats.running, stats.held) == (0, 0, 3)
            if boot == 1:
                assert (await log.resume(1)).state == "queued"
                await until_call(2)
    async with open_event_log(cfg, operations=OPS, runners={"job": runner}) as log:
        with pytest.raises(RunQuarantined) as info:
            await log.resume(1)
        assert info.value.code == "run_quarantined"
        assert (await log.discard(2, actor="ops")).cancelled_by == "ops"
        with pytest.raises(AlreadyDecided):
            await log.resume(2)
        assert (await log.resume(1, override=True)).state == "queued"
        await until_call(3)
        with pytest.raises(InvalidCommand):
            await log.discard(1)  # running, not held
        assert [s.run_id for s in log.boot_report().survivors] == [3]
        kinds = [(e.kind, e.run_id) for e in (await log.watch(0, limit=1000)).events]
        assert kinds.count(("job_interrupted", 1)) == 2
        assert ("job_cancelled", 2) in kinds


async def test_requests_evicted_from_memory_are_read_back(ledger_at):
    cfg = config(ledger_at, retain_requests=2, retain_runs=1)
    async with open_event_log(cfg, operations=OPS) as log:
        receipts = [await log.submit("job", {"n": n}, request_id=f"r{n}") for n in range(5)]
        for r in receipts:
            await log.cancel(r.run_id, "t")
        assert await log.submit("job", {"n": 0}, request_id="r0") == receipts[0]
        assert (await log.status(receipts[0].run_id)).cancelled_by == "t"
        from actors.errors import RequestConflict

        with pytest.raises(RequestConflict):
            await log.submit("job", {"n": 9}, request_id="r1")
        drift = await log.check_drift(receipts[0].run_id, {"arguments": {"n": 0}})
        assert not drift.drifted


async def test_concurrent_submits_share_commits(ledger_at):
    async with open_event_log(config(ledger_at, max_inflight=1000), operations=OPS) as log:
        async with trio.open_nursery() as nursery:
            for n in range(200):
                nursery.start_soon(log.submit, "job", {"n": n})
        stats = log.statistics().ledger
        assert stats.rows >= 400
        assert stats.commits < 100
        assert stats.largest_batch > 4
        assert stats.pending_rows == 0


# -- damaged and foreign files ----------------------------------------------------------


async def make_ledger(path):
    cfg = EventLogConfig(ledger_path=path, synchronous="NORMAL")
    async with open_event_log(cfg, operations=OPS) as log, trio.open_nursery() as nursery:
        for n in range(50):
            nursery.start_soon(log.submit, "job", {"n": n})


@pytest.mark.parametrize("damage", ["garbage", "truncated", "header_only", "bad_page"])
async def test_damaged_ledger_is_refused_and_left_untouched(tmp_path, damage):
    path = tmp_path / "ledger.db"
    await make_ledger(path)
    data = path.read_bytes()
    assert len(data) > 8192
    if damage == "garbage":
        data = b"this is not sqlite at all" * 100
    elif damage == "truncated":
        data = data[: len(data) // 2 + 100]
    elif damage == "header_only":
        data = data[:60]
    else:
        data = data[:4096] + b"\xff" * 4096 + data[8192:]
    path.write_bytes(data)
    with pytest.raises(LedgerCorrupt) as info:
        async with open_event_log(EventLogConfig(ledger_path=path), operations=OPS):
            pass  # pragma: no cover
    assert info.value.code == "ledger_corrupt"
    assert "left untouched" in str(info.value)
    assert str(path) in str(info.value)
    assert path.read_bytes() == data
    assert sorted(os.listdir(tmp_path)) == ["ledger.db"]


async def test_newer_schema_and_foreign_database_are_refused(tmp_path):
    path = tmp_path / "ledger.db"
    await make_ledger(path)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(LedgerVersionUnsupported) as info:
        async with open_event_log(EventLogConfig(ledger_path=path), operations=OPS):
            pass  # pragma: no cover
    assert info.value.code == "ledger_version_unsupported"
    assert info.value.details == {"version": SCHEMA_VERSION + 1, "supported": SCHEMA_VERSION}
    assert path.read_bytes() == before
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE runs (x)")
    conn.close()
    with pytest.raises(LedgerError, match="not an event-log ledger"):
        async with open_event_log(EventLogConfig(ledger_path=other), operations=OPS):
            pass  # pragma: no cover


# -- a real process killed with SIGKILL (real clock) --------------------------------------


class App:
    def __init__(self, ledger, *actions):
        self.proc = subprocess.Popen(
            [sys.executable, str(APP), str(ledger), *actions],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines = []

    def until(self, action):
        for line in self.proc.stdout:
            self.lines.append(json.loads(line))
            if self.lines[-1]["action"] == action:
                return self.lines
        raise AssertionError(f"app ended early: {self.proc.stderr.read()}")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=10) == -signal.SIGKILL
        self.proc.stdout.close()
        self.proc.stderr.close()

    def finish(self):
        out, err = self.proc.communicate(timeout=20)
        assert self.proc.returncode == 0, err
        self.lines += [json.loads(line) for line in out.splitlines()]
        return self.lines


def run_app_killed(ledger, *actions):
    app = App(ledger, *actions, "hold")
    try:
        return app.until("hold")
    finally:
        app.kill()


def test_crash_with_sigkill_holds_survivors_and_keeps_receipts(ledger_at):
    ledger = ledger_at
    submits = [f"submit:req-{n}:{n}" for n in range(3)]
    lines = run_app_killed(ledger, *submits, "running:1")
    receipts = [line["receipt"] for line in lines if line["action"] == "submit"]
    assert [r["run_id"] for r in receipts] == [1, 2, 3]
    assert all(r["admitted"] for r in receipts)
    assert lines[-2] == {"action": "running", "calls": [1]}

    # second life: survivors held, nothing runs; replays return the same receipts
    lines = run_app_killed(ledger, "boot", *submits, "resume:1", "running:1")
    boot = lines[0]
    assert boot["survivors"] == [1, 2, 3]
    assert boot["interrupted"] == {"1": 1}
    assert (boot["quarantined"], boot["queued"], boot["running"], boot["calls"]) == ([], 0, 0, 0)
    assert [line["receipt"] for line in lines[1:4]] == receipts
    assert lines[4] == {"action": "resume", "state": "queued"}

    # third life: run 1 was interrupted twice, so it is quarantined
    app = App(ledger, "boot", "resume:1", "resume!:1", "discard:2", "status:3", *submits)
    lines = app.finish()
    assert lines[0]["interrupted"] == {"1": 2}
    assert lines[0]["quarantined"] == [1]
    assert lines[0]["calls"] == 0
    assert lines[1] == {"action": "resume", "error": "run_quarantined"}
    assert lines[2] == {"action": "resume!", "state": "queued"}
    assert lines[3] == {"action": "discard", "state": "cancelled", "by": "operator"}
    assert lines[4]["status"]["state"] == "held"
    assert [line["receipt"] for line in lines[5:8]] == receipts


async def test_unreadable_path_is_a_clear_ledger_error(tmp_path):
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(LedgerError, match="cannot read ledger"):
        async with open_event_log(EventLogConfig(ledger_path=tmp_path / "dir.db")):
            pass  # pragma: no cover


# -- PostgreSQL: a schema of something else, a newer one ---------------------------------


async def test_postgresql_newer_schema_and_foreign_tables_are_refused(postgres_server):
    url = postgres_server.fresh_url()
    await make_ledger(url)
    before = committed(url, "SELECT count(*) FROM events")
    newer = str(SCHEMA_VERSION + 1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", (newer,))
    with pytest.raises(LedgerVersionUnsupported) as info:
        async with open_event_log(EventLogConfig(ledger_path=url), operations=OPS):
            pass  # pragma: no cover
    assert info.value.details == {"version": SCHEMA_VERSION + 1, "supported": SCHEMA_VERSION}
    assert "\n" not in info.value.message
    assert committed(url, "SELECT count(*) FROM events") == before
    assert committed(url, "SELECT value FROM meta WHERE key = 'schema_version'") == [(newer,)]
    other = postgres_server.fresh_url()
    with psycopg.connect(other, autocommit=True) as conn:
        conn.execute("CREATE TABLE runs (x integer)")
    with pytest.raises(LedgerError, match="not an event-log ledger") as error:
        async with open_event_log(EventLogConfig(ledger_path=other), operations=OPS):
            pass  # pragma: no cover
    assert type(error.value) is LedgerError
    tables = (
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    )
    assert committed(other, tables) == [("runs",)]  # nothing was written


async def test_postgresql_url_password_never_appears_in_messages(postgres_server):
    url = postgres_server.url("nowhere").replace("postgres@", "postgres:secret@")
    cfg = EventLogConfig(ledger_path=url, ledger_statement_timeout=2.0)
    with pytest.raises(LedgerError) as info:
        async with open_event_log(cfg, operations=OPS):
            pass  # pragma: no cover
    assert info.value.code == "ledger_unavailable"
    assert "secret" not in info.value.message
    assert "postgres:***@" in info.value.message
