"""A stalled disk never hangs the event log: every wait on the ledger is bounded (§6.19).

A commit held in its worker thread by a :class:`StalledDisk` (a ``threading.Event`` the
test releases) stands for an ``fsync`` that does not return. The virtual clock is moved
by hand (``mock_clock.jump``): an autojump clock would also jump while the worker thread
is busy, so each deadline is checked exactly, just before and at its time.
"""

from __future__ import annotations

import logging
import sqlite3

import pytest
import trio
from ledger_support import StalledDisk, at, ledger_of
from trio.testing import wait_all_tasks_blocked

from actors._eventlog._eventlog import EventLog, open_event_log
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import LedgerUnavailable

OPS = [OperationSpec(name="job", fields={"n"})]


def config(tmp_path, **kwargs: object) -> EventLogConfig:
    return EventLogConfig(
        ledger_path=tmp_path / "ledger.db",
        synchronous="NORMAL",
        **kwargs,  # type: ignore[arg-type]
    )


async def test_a_stalled_commit_pauses_admission_until_it_ends(tmp_path, mock_clock, caplog):
    caplog.set_level(logging.WARNING, logger="actors.eventlog")
    async with open_event_log(config(tmp_path, commit_stall_timeout=2.0), operations=OPS) as log:
        port = log.subscribe("watcher")
        disk = StalledDisk(ledger_of(log))
        try:
            admission = log.admit("job", {"n": 1}, "r1")
            await disk.stalled()
            await at(mock_clock, 1.5)
            assert not log.statistics().paused  # still a slow commit at 1.5 s
            await at(mock_clock, 0.5)
            stats = log.statistics()  # stalled at 2.0 s: the ledger is unavailable
            assert stats.paused
            assert stats.ledger is not None
            assert stats.ledger.stalled_commits == 1
            with pytest.raises(LedgerUnavailable) as info:
                await admission.wait()  # the decision stands, not durable yet
            assert info.value.details == {"cause": "commit stalled", "retry_after": 2.0}
            with pytest.raises(LedgerUnavailable, match="commit stalled"):
                await log.submit("job", {"n": 2})
        finally:
            disk.release.set()
        await disk.finished()
        seen = []
        async for event in port:
            seen.append((event.kind, event.data))
            if event.kind == "admission_resumed":
                break
        assert seen[-2:] == [
            ("admission_paused", {"reason": "ledger_unavailable", "cause": "commit stalled"}),
            ("admission_resumed", {"reason": "ledger_available"}),
        ]
        assert (await admission.wait()).run_id == 1  # committed once the disk came back
        assert (await log.submit("job", {"n": 2})).run_id == 2
        assert trio.current_time() == 2.0
    stalled = [r for r in caplog.records if getattr(r, "cause", None) == "commit stalled"]
    assert [(r.seconds, r.stall_timeout) for r in stalled[:1]] == [(2.0, 2.0)]


async def test_reads_behind_a_stalled_commit_give_up_after_ledger_read_timeout(
    tmp_path, mock_clock
):
    cfg = config(tmp_path, ledger_read_timeout=1.0, commit_stall_timeout=60, retain_runs=0)
    async with open_event_log(cfg, operations=OPS) as log:
        first = await log.submit("job", {"n": 1})
        await log.cancel(first.run_id, "ops")  # decided: memory forgets it (retain_runs=0)
        disk = StalledDisk(ledger_of(log))
        answers: list[object] = []

        async def ask(read) -> None:
            try:
                answers.append(await read())
            except LedgerUnavailable as exc:
                answers.append((trio.current_time(), exc.details))

        try:
            log.admit("job", {"n": 2}, "r2")
            await disk.stalled()
            async with trio.open_nursery() as nursery:
                # A status waits for the commit before it; a raw read for the connection.
                nursery.start_soon(ask, lambda: log.status(first.run_id))
                nursery.start_soon(ask, lambda: ledger_of(log).fetch_run(first.run_id))
                await wait_all_tasks_blocked()
                await at(mock_clock, 0.9)
                assert answers == []
                await at(mock_clock, 0.1)
        finally:
            disk.release.set()
        assert sorted(answers, key=str) == [
            (1.0, {"cause": "the read took longer than 1 s", "retry_after": 1.0}),
            (1.0, {"cause": "waiting for the commit before it took longer than 1 s",
                   "retry_after": 1.0}),
        ]  # fmt: skip
        await disk.finished()
        assert (await log.status(first.run_id)).cancelled_by == "ops"  # reads work again
        stats = log.statistics().ledger
        assert stats is not None
        assert stats.read_timeouts == 2


async def test_a_finished_runs_page_behind_a_stalled_commit_gives_up_after_ledger_read_timeout(
    tmp_path, mock_clock
):
    # finished_runs (design §6.18) reads the ledger like status does: bounded (§6.19).
    cfg = config(tmp_path, ledger_read_timeout=1.0, commit_stall_timeout=60)
    async with open_event_log(cfg, operations=OPS) as log:
        first = await log.submit("job", {"n": 1})
        await log.cancel(first.run_id, "ops")
        disk = StalledDisk(ledger_of(log))
        answers: list[object] = []

        async def page() -> None:
            try:
                answers.append(await log.finished_runs())
            except LedgerUnavailable as exc:
                answers.append((trio.current_time(), exc.details))

        try:
            log.admit("job", {"n": 2}, "r2")
            await disk.stalled()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(page)
                await at(mock_clock, 0.9)
                assert answers == []
                await at(mock_clock, 0.1)
        finally:
            disk.release.set()
        assert answers == [
            (1.0, {"cause": "waiting for the commit before it took longer than 1 s",
                   "retry_after": 1.0}),
        ]  # fmt: skip
        await disk.finished()
        (run,) = (await log.finished_runs()).runs  # reads work again
        assert (run.run_id, run.cancelled_by) == (first.run_id, "ops")
        stats = log.statistics().ledger
        assert stats is not None
        assert stats.read_timeouts == 1


async def test_a_stalled_final_commit_is_abandoned_after_close_timeout(
    tmp_path, mock_clock, caplog
):
    cfg = config(tmp_path, close_timeout=3.0, commit_stall_timeout=60)
    log = EventLog(cfg, operations=OPS)
    closed = trio.Event()

    async def close() -> None:
        await log.aclose()
        closed.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        await log.submit("job", {"n": 1}, request_id="r1")  # durable
        disk = StalledDisk(ledger_of(log))
        try:
            log.admit("job", {"n": 2}, "r2")
            await disk.stalled()
            nursery.start_soon(close)
            await wait_all_tasks_blocked()
            await at(mock_clock, 2.9)
            assert not closed.is_set()  # the close waits for the commit ...
            await at(mock_clock, 0.1)
            assert closed.is_set()  # ... for close_timeout, then abandons it
            assert trio.current_time() == 3.0
        finally:
            disk.release.set()
        await disk.finished()
    (record,) = [r for r in caplog.records if hasattr(r, "close_timeout")]
    assert (record.levelno, record.close_timeout) == (logging.ERROR, 3.0)
    conn = sqlite3.connect(f"file:{cfg.ledger_path}?mode=ro", uri=True)
    try:
        (session,) = conn.execute("SELECT value FROM meta WHERE key = 'session'").fetchone()
        requests = conn.execute("SELECT request_id FROM requests ORDER BY 1").fetchall()
    finally:
        conn.close()
    # Not closed cleanly: the next open finds the session unfinished (design §6.12).
    # The held commit could not finish r2 once the ledger had let go of its connection.
    assert session.startswith("open")
    assert requests == [("r1",)]


async def test_progress_is_coalesced_while_the_ledger_is_backlogged(tmp_path, mock_clock):
    cfg = config(tmp_path, max_pending_rows=5, commit_stall_timeout=60)
    async with open_event_log(cfg, operations=OPS) as log:
        ledger = ledger_of(log)
        first = await log.submit("job", {"n": 1})
        second = await log.submit("job", {"n": 2})
        disk = StalledDisk(ledger)
        try:
            log.start(first.run_id)
            log.start(second.run_id)
            await disk.stalled()  # these six rows are being committed
            for step in range(1, 51):
                log.progress(first.run_id, step / 100)
                log.progress(second.run_id, step / 100)
            # Six reports staged (the bound is 5), then only the newest per run is kept.
            assert ledger.pending_rows == 6
            assert log.statistics().progress_folded == 92
            assert (await log.status(first.run_id)).progress == 0.5  # at once
            log.finish(second.run_id, "ok")  # its newest progress comes first
        finally:
            disk.release.set()
        await log.flush()
        log.progress(first.run_id, 0.6)  # below the bound again: no longer coalesced
        assert log.statistics().progress_folded == 93
        events = (await log.watch(0, limit=100)).events
    fractions = {
        run_id: [e.data["fraction"] for e in events if e.run_id == run_id and "fraction" in e.data]
        for run_id in (first.run_id, second.run_id)
    }
    assert fractions == {
        first.run_id: [0.0, 0.01, 0.02, 0.03, 0.6],
        second.run_id: [0.0, 0.01, 0.02, 0.03, 0.5],
    }
    assert events[-2].kind == "job_finished"
