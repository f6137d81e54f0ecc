"""Damage in the ledger is an error, never a crash (design §6.11).

At run time, a row read back for one request (``status``, ``watch``, an idempotent
resubmit) is checked: a bad cell or a missing row answers that request with
``ledger_corrupt`` naming table, key and column, and everything else keeps working. At
boot the same damage refuses the file with one line, and the file keeps every byte: the
check reads through read-only connections only.
"""

from __future__ import annotations

import hashlib
import sqlite3
from typing import TYPE_CHECKING

import pytest
import trio

from actors._eventlog import EventLogActor, EventLogClient
from actors._eventlog._eventlog import open_event_log
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import LedgerCorrupt

if TYPE_CHECKING:
    from pathlib import Path

OPS = [OperationSpec(name="job", fields={"n"})]


def cfg(path: Path, **kwargs: object) -> EventLogConfig:
    return EventLogConfig(ledger_path=path, synchronous="NORMAL", **kwargs)  # type: ignore[arg-type]


def tamper(path: Path, sql: str, *params: object) -> None:
    """Change the ledger behind the log's back, as a disk error or another program would."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=5)
    try:
        assert conn.execute(sql, params).rowcount >= 1
    finally:
        conn.close()


def fingerprint(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


async def fill(path: Path) -> None:
    """Runs 1 (finished), 2 (cancelled), 3 (queued, revision 1); requests r1..r3."""
    async with open_event_log(cfg(path), operations=OPS) as log:
        for k in (1, 2):
            await log.submit("job", {"n": k}, request_id=f"r{k}")
        log.apply_edit()
        await log.submit("job", {"n": 3}, request_id="r3")
        log.start(1)
        log.progress(1, 0.5)
        log.finish(1, "ok", {"rows": 3})
        await log.cancel(2, "ops")


# -- at run time: the request that touched the row gets ledger_corrupt --------------------


RUNTIME_RUN_DAMAGE = [
    ("UPDATE runs SET arguments = '{\"n\": ' WHERE run_id = 1", "arguments", "not valid JSON"),
    ("UPDATE runs SET revision = 'seven' WHERE run_id = 1", "revision", "not an integer"),
    ("UPDATE runs SET result = '[1,' WHERE run_id = 1", "result", "not valid JSON"),
    ("UPDATE runs SET state = 'exploded' WHERE run_id = 1", "state", "not a run state"),
    ("UPDATE runs SET progress = 7.5 WHERE run_id = 1", "progress", "not a fraction"),
    ("DELETE FROM runs WHERE run_id = 1", None, "row missing"),
]


@pytest.mark.parametrize(("sql", "column", "what"), RUNTIME_RUN_DAMAGE)
async def test_a_damaged_run_row_answers_status_and_nothing_else(
    tmp_path: Path, sql: str, column: str | None, what: str
) -> None:
    path = tmp_path / "ledger.db"
    async with open_event_log(cfg(path, retain_runs=0), operations=OPS) as log:
        for k in (1, 2):
            await log.submit("job", {"n": k})
        log.finish(1, "ok", {"rows": 3})  # decided: memory forgets it (retain_runs=0)
        await log.flush()
        tamper(path, sql)
        with pytest.raises(LedgerCorrupt) as info:
            await log.status(1)
        error = info.value
        assert error.code == "ledger_corrupt"
        assert error.details == {"table": "runs", "key": 1, "column": column}
        assert what in str(error)
        assert "\n" not in str(error)
        # everything else keeps working
        assert (await log.status(2)).state == "queued"
        assert (await log.submit("job", {"n": 3})).admitted
        log.finish(2, "ok")
        assert (await log.status(2)).verdict == "ok"


@pytest.mark.parametrize(
    ("sql", "key", "column", "what"),
    [
        ("UPDATE events SET data = 'nope' WHERE seq = 2", 2, "data", "not valid JSON"),
        ("UPDATE events SET data = '[1, 2]' WHERE seq = 2", 2, "data", "not a JSON object"),
        ("UPDATE events SET run_id = 'x' WHERE seq = 3", 3, "run_id", "not an integer"),
        ("UPDATE events SET kind = x'6a6f62' WHERE seq = 3", 3, "kind", "not a non-empty text"),
        ("DELETE FROM events WHERE seq = 4", 4, None, "row missing"),
        ("DELETE FROM events WHERE seq >= 4", 4, None, "row missing"),  # the newest ones
    ],
)
async def test_a_damaged_event_row_answers_watch_and_nothing_else(
    tmp_path: Path, sql: str, key: int, column: str | None, what: str
) -> None:
    path = tmp_path / "ledger.db"
    async with open_event_log(cfg(path, window=2), operations=OPS) as log:
        for k in range(6):
            await log.submit("job", {"n": k})  # one job_queued each; the window keeps 2
        await log.flush()
        tamper(path, sql)
        with pytest.raises(LedgerCorrupt) as info:
            await log.watch(0, limit=10)
        assert info.value.details == {"table": "events", "key": key, "column": column}
        assert what in str(info.value)
        # before the damage, and in the window, watch still answers
        assert [e.seq for e in (await log.watch(0, limit=1)).events] == [1]
        assert [e.seq for e in (await log.watch(4)).events] == [5, 6]
        assert (await log.submit("job", {"n": 99})).admitted


@pytest.mark.parametrize(
    ("sql", "column", "what"),
    [
        ("UPDATE requests SET receipt = '{' WHERE request_id = 'r1'", "receipt", "not valid"),
        (
            "UPDATE requests SET receipt = json_set(receipt, '$.run_id', 9)"
            " WHERE request_id = 'r1'",
            "receipt",
            "not the admission of run 1",
        ),
        (  # the right type, but no receipt's value
            "UPDATE requests SET receipt = json_set(receipt, '$.revision', -1)"
            " WHERE request_id = 'r1'",
            "receipt",
            "revision: must be in [0, 2**53-1], got -1",
        ),
        ("UPDATE requests SET run_id = 'one' WHERE request_id = 'r1'", "run_id", "not an int"),
    ],
)
async def test_a_damaged_request_row_answers_the_resubmit_and_nothing_else(
    tmp_path: Path, sql: str, column: str, what: str
) -> None:
    path = tmp_path / "ledger.db"
    async with open_event_log(cfg(path, retain_requests=0), operations=OPS) as log:
        first = await log.submit("job", {"n": 1}, request_id="r1")
        await log.submit("job", {"n": 2}, request_id="r2")
        tamper(path, sql)
        with pytest.raises(LedgerCorrupt) as info:
            await log.submit("job", {"n": 1}, request_id="r1")
        assert info.value.details == {"table": "requests", "key": "r1", "column": column}
        assert what in str(info.value)
        assert (await log.submit("job", {"n": 2}, request_id="r2")).run_id == 2
        assert (await log.status(first.run_id)).state == "queued"


async def test_the_actor_answers_ledger_corrupt_and_keeps_serving(tmp_path: Path) -> None:
    # The first report: a plain ValueError in the actor stopped the whole runtime.
    path = tmp_path / "ledger.db"
    async with trio.open_nursery() as nursery:
        actor = EventLogActor(cfg(path, retain_runs=0, window=1), operations=OPS)
        log = EventLogClient(await nursery.start(actor.run), timeout=5)
        for k in (1, 2):
            await log.submit("job", {"n": k})
        await log.finish(1, "ok")
        await actor.log.flush()
        tamper(path, "UPDATE runs SET arguments = 'x' WHERE run_id = 1")
        tamper(path, "UPDATE events SET data = 'x' WHERE seq = 1")
        with pytest.raises(LedgerCorrupt):
            await log.status(1)
        with pytest.raises(LedgerCorrupt):
            await log.watch(0)
        assert (await log.status(2)).state == "queued"
        assert (await log.statistics()).queued == 1
        await log.ref.stop(grace=5)


# -- at boot: one line, the file untouched ----------------------------------------------


BOOT_DAMAGE = [
    # (sql, table, key, column, what)
    (
        "UPDATE runs SET arguments = '{' WHERE run_id = 1",
        "runs",
        1,
        "arguments",
        "not valid JSON",
    ),
    ("UPDATE runs SET interruptions = 'x' WHERE run_id = 3", "runs", 3, "interruptions", "integer"),
    ("UPDATE runs SET error = '[]' WHERE run_id = 2", "runs", 2, "error", "not a JSON object"),
    ("DELETE FROM runs WHERE run_id = 2", "runs", 2, None, "row missing"),
    ("UPDATE events SET data = '{' WHERE seq = 2", "events", 2, "data", "not valid JSON"),
    ("UPDATE events SET run_id = 'one' WHERE seq = 2", "events", 2, "run_id", "integer"),
    ("DELETE FROM events WHERE seq = 3", "events", 3, None, "row missing"),
    (
        "UPDATE requests SET receipt = 'no' WHERE request_id = 'r2'",
        "requests",
        "r2",
        "receipt",
        "not valid JSON",
    ),
    (
        "UPDATE requests SET position = 'p' WHERE request_id = 'r2'",
        "requests",
        "r2",
        "position",
        "never writes",
    ),
    ("DELETE FROM requests WHERE request_id = 'r1'", "requests", "r1", None, "run 1 names it"),
    ("UPDATE meta SET value = 'x' WHERE key = 'revision'", "meta", "revision", "value", "x"),
    ("DELETE FROM meta WHERE key = 'revision'", "meta", "revision", None, "missing"),
    ("UPDATE meta SET value = 'maybe' WHERE key = 'session'", "meta", "session", "value", "marker"),
]


@pytest.mark.parametrize(("sql", "table", "key", "column", "what"), BOOT_DAMAGE)
async def test_damage_at_boot_is_one_line_and_the_file_keeps_every_byte(
    tmp_path: Path, sql: str, table: str, key: object, column: str | None, what: str
) -> None:
    path = tmp_path / "ledger.db"
    await fill(path)
    tamper(path, sql)
    before = fingerprint(tmp_path)
    assert list(before) == ["ledger.db"]
    with pytest.raises(LedgerCorrupt) as info:
        async with open_event_log(cfg(path), operations=OPS):
            pass  # pragma: no cover
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"ledger {str(path)!r}: table {table}, ")
    assert what in message
    assert message.endswith("left untouched")
    assert info.value.details == {"table": table, "key": key, "column": column}
    assert fingerprint(tmp_path) == before  # every byte, and no -wal or -shm appeared


async def test_the_same_ledger_opens_once_the_damage_is_repaired(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    await fill(path)
    good = sqlite3.connect(path).execute("SELECT data FROM events WHERE seq = 2").fetchone()[0]
    tamper(path, "UPDATE events SET data = '{' WHERE seq = 2")
    with pytest.raises(LedgerCorrupt):
        async with open_event_log(cfg(path), operations=OPS):
            pass  # pragma: no cover
    tamper(path, "UPDATE events SET data = ? WHERE seq = 2", good)
    async with open_event_log(cfg(path), operations=OPS) as log:
        assert [s.run_id for s in log.boot_report().survivors] == [3]
        assert log.revision == 1
