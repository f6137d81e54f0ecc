"""Tests of the ledger's event rows: each row is its event, whatever path staged it.

The log builds some rows' JSON by hand (``job_queued``, ``job_finished``, progress) and
stages progress rows as floats in segments; these tests read the file back and compare
every row with the event the log holds in memory (design §6.8, §6.10).
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

import pytest
import trio

from actors._eventlog._eventlog import open_event_log
from actors._eventlog._ledger import SQLiteLedger
from actors._eventlog._ports import ResyncRequired
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import InvalidCommand

if TYPE_CHECKING:
    from pathlib import Path

    from actors._eventlog._eventlog import EventLog

OPS = [OperationSpec(name="job", fields={"n", "text"})]


def config(tmp_path: Path, **kwargs: Any) -> EventLogConfig:
    return EventLogConfig(ledger_path=tmp_path / "ledger.db", synchronous="NORMAL", **kwargs)


def rows_on_disk(path: object) -> list[tuple[int, str, int | None, Any]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT seq, kind, run_id, data FROM events ORDER BY seq").fetchall()
    finally:
        conn.close()
    return [(seq, kind, run_id, json.loads(data)) for seq, kind, run_id, data in rows]


async def rows_in_memory(log: EventLog) -> list[tuple[int, str, int | None, Any]]:
    events = (await log.watch(0, limit=10_000)).events
    return [(e.seq, e.kind, e.run_id, e.data) for e in events]


async def test_every_kind_of_event_is_stored_as_its_own_data(tmp_path: Path) -> None:
    cfg = config(tmp_path, max_inflight=3)
    async with open_event_log(cfg, operations=OPS) as log:
        one = (await log.submit("job", {"n": 1, "text": 'é \u2603 "q" \\'})).run_id
        two = (await log.submit("job", {"n": 2})).run_id
        three = (await log.submit("job", {"n": 3})).run_id
        refused = await log.submit("job", {"n": 4})  # admission_paused
        assert not refused.admitted
        log.progress(two, 0.25)  # buffered while queued, flushed at start
        log.start(one)  # job_started + a synthetic 0.0
        log.start(two)
        log.start(three)
        # Interleaved progress of three runs, with and without notes, in one batch.
        for i in range(1, 50):
            log.progress(one, i / 49)
            log.progress(two, 1 / (i + 2))
            if i % 7 == 0:
                log.progress(three, i / 100, note=f"step {i} \u00e9 \ud800")
        log.apply_edit()  # revision_bumped
        log.finish(one, "ok", {"rows": [1, 2.5, None, True], "name": "\u00fcber"})
        log.finish(two, "NOT_RUN", error={"category": "permanent", "code": "x", "message": "m"})
        await log.cancel(three, "tester")  # job_cancelled, admission_resumed
        assert (await log.submit("job", {"n": 5})).admitted
        await log.flush()
        memory = await rows_in_memory(log)
    kinds = {kind for _, kind, _, _ in memory}
    assert kinds == {
        "job_queued",
        "job_started",
        "job_progress",
        "job_finished",
        "job_cancelled",
        "admission_paused",
        "admission_resumed",
        "revision_bumped",
    }
    assert rows_on_disk(cfg.ledger_path) == memory


async def test_rows_of_resumed_and_interrupted_runs_match(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    async with open_event_log(cfg, operations=OPS) as log:
        run_id = (await log.submit("job", {"n": 1})).run_id
        log.start(run_id)
        log.progress(run_id, 0.5)
    async with open_event_log(cfg, operations=OPS) as log:  # job_interrupted at boot
        await log.resume(run_id)  # job_queued with resumed / interruptions
        log.start(run_id)
        log.progress(run_id, 1.0)
        await log.flush()
        memory = await rows_in_memory(log)
        assert [kind for _, kind, _, _ in memory[-4:]] == [
            "job_interrupted",
            "job_queued",
            "job_started",
            "job_progress",
        ]
    assert rows_on_disk(cfg.ledger_path) == memory
    queued = [data for _, kind, _, data in memory if kind == "job_queued"]
    assert queued[-1]["resumed"] is True
    assert queued[-1]["interruptions"] == 1


async def test_segments_keep_seq_order_across_kinds_and_runs(tmp_path: Path) -> None:
    ledger = SQLiteLedger(str(tmp_path / "l.db"), synchronous="NORMAL")
    await ledger.open(keep_requests=0)
    staged: list[tuple[int, str, int | None, str]] = []

    def text(seq: int, kind: str, run_id: int | None, data: str) -> None:
        ledger.stage_event(seq, kind, run_id, data)
        staged.append((seq, kind, run_id, data))

    def progress(seq: int, run_id: int, fraction: float) -> None:
        ledger.stage_progress(seq, run_id, fraction)
        staged.append((seq, "job_progress", run_id, json.dumps({"fraction": fraction})))

    text(1, "job_queued", 1, '{"a":1}')
    progress(2, 1, 0.5)
    progress(3, 1, 1e-05)
    progress(4, 2, 0.1)  # another run: a new segment
    text(5, "revision_bumped", None, '{"revision":1}')
    text(6, "job_started", 2, "{}")
    progress(7, 2, 1.0)
    progress(8, 1, 0.0)
    assert ledger.pending_rows == 8
    with pytest.raises(ValueError, match="seq 10 does not follow 8"):
        ledger.stage_event(10, "job_started", 3, "{}")
    with pytest.raises(ValueError, match="seq 8 does not follow 8"):
        ledger.stage_progress(8, 1, 0.5)
    async with trio.open_nursery() as nursery:
        await nursery.start(ledger.run_writer)
        await ledger.flush()
        progress(9, 1, 0.75)  # the next batch starts with a progress row
        await ledger.flush()
        nursery.cancel_scope.cancel()
    await ledger.close()
    on_disk = rows_on_disk(tmp_path / "l.db")
    assert on_disk == [(s, k, r, json.loads(d)) for s, k, r, d in staged]
    assert ledger.statistics().rows == 9


async def test_text_sqlite_cannot_store_is_refused_and_the_log_goes_on(tmp_path: Path) -> None:
    # A lone surrogate cannot be encoded to UTF-8: it used to escape as a bare
    # UnicodeEncodeError (arguments) or to fail the ledger's commit (request id, actor).
    cfg = config(tmp_path)
    async with open_event_log(cfg, operations=OPS) as log:
        for call in (
            lambda: log.submit("job", {"n": "\ud800"}),
            lambda: log.submit("job", {"n": 1}, request_id="r-\udfff"),
        ):
            with pytest.raises(InvalidCommand):
                await call()
        run_id = (await log.submit("job", {"n": 1}, request_id="r-\u00e9")).run_id
        log.start(run_id)
        log.progress(run_id, 0.5, note="\ud800 kept, escaped")
        with pytest.raises(InvalidCommand, match="verdict"):
            log.finish(run_id, "\ud800")
        with pytest.raises(InvalidCommand, match="actor"):
            await log.cancel(run_id, "\ud800")
        with pytest.raises(InvalidCommand, match="result"):
            log.finish(run_id, "ok", {"text": "\ud800"})
        log.finish(run_id, "ok", {"text": "\u00e9"})
        other = (await log.submit("job", {"n": 2})).run_id
        error = {"category": "permanent", "code": "failed", "message": "bad \udc80 byte"}
        log.finish(other, "NOT_RUN", error=error)  # a runner's message may hold one
        await log.flush()
        memory = await rows_in_memory(log)
    assert rows_on_disk(cfg.ledger_path) == memory
    assert memory[3][3] == {"fraction": 0.5, "note": "\ud800 kept, escaped"}


async def test_a_port_reenabled_while_nothing_listened_resyncs_from_the_head() -> None:
    # While no port is enabled the log skips the fan-out call; the head stays right.
    async with open_event_log(operations=OPS) as log:
        port = log.subscribe("p")
        log.set_port_enabled("p", False, local=True)
        run_id = (await log.submit("job", {"n": 1})).run_id
        log.start(run_id)
        log.progress(run_id, 0.5)
        log.set_port_enabled("p", True, local=True)
        notice = port.receive_nowait()
        assert notice == ResyncRequired(head=log.head, cursor=0)
        assert log.head == 4
        port.resync(log.head)
        log.progress(run_id, 0.75)
        event = port.receive_nowait()
        assert (event.seq, event.kind, event.data) == (5, "job_progress", {"fraction": 0.75})
