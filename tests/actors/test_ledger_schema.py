"""The ledger's schema versions: version 1 ledgers are migrated at open (design §6.10)."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

from actors import Receipt
from actors._eventlog._eventlog import open_event_log
from actors._eventlog._ledger._schema import APPLICATION_ID, SCHEMA_VERSION, TABLE_COLUMNS
from actors._eventlog._types import EventLogConfig, OperationSpec

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

OPS = [OperationSpec(name="job", fields={"n"})]

#: The schema version 1 wrote (before requests had their waiter columns).
V1_SCHEMA = f"""
CREATE TABLE requests (request_id TEXT PRIMARY KEY, content TEXT NOT NULL,
    run_id INTEGER NOT NULL, receipt TEXT NOT NULL, position INTEGER NOT NULL);
CREATE TABLE runs (run_id INTEGER PRIMARY KEY, request_id TEXT NOT NULL,
    operation TEXT NOT NULL, arguments TEXT NOT NULL, revision INTEGER NOT NULL,
    snapshot_id TEXT NOT NULL, state TEXT NOT NULL, verdict TEXT, result TEXT, error TEXT,
    cancelled_by TEXT, progress REAL, interruptions INTEGER NOT NULL);
CREATE INDEX runs_open ON runs(state) WHERE state NOT IN ('finished', 'cancelled');
CREATE TABLE events (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, run_id INTEGER,
    data TEXT NOT NULL);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = 1;
"""


def make_v1(path: Path) -> dict[str, object]:
    receipt = {
        "admitted": True,
        "run_id": 1,
        "request_id": "r1",
        "snapshot_id": "abc",
        "revision": 0,
        "event_cursor": 0,
        "coalesced": False,
        "code": None,
        "retryable": None,
        "depth": None,
        "bound": None,
    }
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(V1_SCHEMA)
    conn.execute(
        "INSERT INTO requests VALUES ('r1', ?, 1, ?, 1)",
        ('"job":{"n":1}', json.dumps(receipt)),
    )
    conn.execute(
        "INSERT INTO runs VALUES (1, 'r1', 'job', '{\"n\":1}', 0, 'abc', 'running',"
        " NULL, NULL, NULL, NULL, 0.5, 0)"
    )
    conn.execute("INSERT INTO events VALUES (1, 'job_queued', 1, '{}')")
    conn.close()
    return receipt


async def test_a_version_1_ledger_is_migrated_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    receipt = make_v1(path)
    config = EventLogConfig(ledger_path=path, synchronous="NORMAL")
    async with open_event_log(config, operations=OPS) as log:
        held = log.boot_report().interrupted
        assert [(s.run_id, s.interruptions, s.waiters) for s in held] == [(1, 1, 1)]
        again = await log.submit("job", {"n": 1}, request_id="r1")
        assert again == Receipt(**receipt)  # type: ignore[arg-type]
        assert (await log.cancel(1, "ops", request_id="r1")).cancelled_by == "ops"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
        for table in ("requests", "runs"):
            columns = tuple(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))
            assert columns == TABLE_COLUMNS[3][table]
    finally:
        conn.close()


#: What migrating version 1 to 2 does (the statements version 2 ran).
V1_TO_V2 = """
ALTER TABLE requests ADD COLUMN actor TEXT;
ALTER TABLE requests ADD COLUMN cancelled_by TEXT;
CREATE INDEX requests_run ON requests(run_id);
PRAGMA user_version = 2;
"""


async def test_a_version_2_ledger_is_migrated_and_its_decided_runs_have_no_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # design §6.18: runs decided before version 3 kept no time; those decided after do.
    path = tmp_path / "ledger.db"
    make_v1(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.executescript(V1_TO_V2)
        conn.execute("UPDATE runs SET state = 'finished', verdict = 'ok', result = '7'")
    finally:
        conn.close()
    monkeypatch.setattr("actors._eventlog._runs._wall_clock", lambda: 1_700_000_000.5)
    config = EventLogConfig(ledger_path=path, synchronous="NORMAL")
    async with open_event_log(config, operations=OPS) as log:
        assert log.boot_report().survivors == ()
        receipt = await log.submit("job", {"n": 2})
        log.finish(receipt.run_id or 0, "ok", 8)
        page = await log.finished_runs()
        assert [(r.run_id, r.result, r.finished_at) for r in page.runs] == [
            (1, 7, None),
            (2, 8, 1_700_000_000.5),
        ]
        assert [r.run_id for r in (await log.finished_runs(since=1_700_000_000)).runs] == [2]
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
    finally:
        conn.close()
