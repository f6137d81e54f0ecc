"""Querying finished runs and their results, a page at a time (design §6.18).

Served from the ledger (real SQLite in ``tmp_path``; the pages on PostgreSQL too): what
finished before a restart and what memory no longer retains is listed; a damaged row is
reported for its run and the page goes on (design §6.11). Without a ledger, the decided
runs memory holds.
"""

from __future__ import annotations

import sqlite3
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio

from actors import (
    EventLogActor,
    EventLogClient,
    EventLogConfig,
    OperationSpec,
    open_event_log,
)
from actors.errors import InvalidCommand

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

OPS = [OperationSpec(name="job", fields={"n"})]


def cfg(path: Path | None, **kwargs: Any) -> EventLogConfig:
    return EventLogConfig(ledger_path=path, synchronous="NORMAL", **kwargs)


@asynccontextmanager
async def client(config: EventLogConfig) -> AsyncIterator[EventLogClient]:
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(EventLogActor(config, operations=OPS).run)
        try:
            yield EventLogClient(ref, timeout=5)
        finally:
            await ref.stop(grace=5)


async def decide_five(log: EventLogClient) -> None:
    """Runs 1..5: 1, 3, 5 finished ok with result {"n": n}; 2 failed; 4 cancelled; 6 queued."""
    for n in range(1, 7):
        await log.submit("job", {"n": n})
    for n in (1, 3, 5):
        await log.finish(n, "ok", {"n": n})
    await log.finish(2, "failed", error={"category": "permanent", "code": "bad", "message": "x"})
    await log.cancel(4, "ops")


class WallClock:
    """Stands in for the wall clock the log stamps decisions with: 1000.0, 1001.0, ..."""

    def __init__(self) -> None:
        self.now = 999.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


async def test_pages_of_finished_runs_survive_a_restart_and_memory_forgetting(
    ledger_at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("actors._eventlog._runs._wall_clock", WallClock())
    config = cfg(ledger_at, retain_runs=0)  # memory keeps no decided run
    async with client(config) as log:
        await decide_five(log)
        page = await log.finished_runs()
        assert [(r.run_id, r.state, r.verdict) for r in page.runs] == [
            (1, "finished", "ok"),
            (2, "finished", "failed"),
            (3, "finished", "ok"),
            (4, "cancelled", None),
            (5, "finished", "ok"),
        ]
        assert (page.cursor, page.more, page.damaged) == (5, False, ())
        # Decided in the order 1, 3, 5, 2, 4 (see decide_five): one second apart.
        assert [r.finished_at for r in page.runs] == [1000.0, 1003.0, 1001.0, 1004.0, 1002.0]
    async with client(config) as log:  # a new process: only the ledger knows them
        first = await log.finished_runs(limit=2, state="finished", verdict="ok")
        assert [(r.run_id, r.operation, r.result) for r in first.runs] == [
            (1, "job", {"n": 1}),
            (3, "job", {"n": 3}),
        ]
        assert (first.cursor, first.more) == (3, True)
        second = await log.finished_runs(
            after=first.cursor, limit=2, state="finished", verdict="ok"
        )
        assert [r.run_id for r in second.runs] == [5]
        assert (second.cursor, second.more) == (5, False)
        failed = (await log.finished_runs(verdict="failed")).runs
        assert [(r.run_id, r.error) for r in failed] == [
            (2, {"category": "permanent", "code": "bad", "message": "x"})
        ]
        cancelled = (await log.finished_runs(state="cancelled")).runs
        assert [(r.run_id, r.cancelled_by, r.arguments) for r in cancelled] == [
            (4, "ops", {"n": 4})
        ]
        recent = await log.finished_runs(since=1002.5)
        assert [(r.run_id, r.finished_at) for r in recent.runs] == [(2, 1003.0), (4, 1004.0)]
        empty = await log.finished_runs(after=5)
        assert (empty.runs, empty.cursor, empty.more) == ((), 5, False)
        # A run decided now is listed at once: the query waits for its commit.
        await log.discard(6)  # held since the restart
        receipt = await log.submit("job", {"n": 7})
        await log.finish(receipt.run_id or 0, "ok", [7])
        page = await log.finished_runs(after=5)
        assert [(r.run_id, r.state) for r in page.runs] == [(6, "cancelled"), (7, "finished")]


@pytest.mark.parametrize(
    ("column", "value"), [("result", "'[1,'"), ("finished_at", "'yesterday'"), ("state", "1")]
)
async def test_a_damaged_row_is_named_in_the_page_and_the_others_are_served(
    tmp_path: Path, column: str, value: str
) -> None:
    path = tmp_path / "ledger.db"
    async with client(cfg(path, retain_runs=0)) as log:
        await decide_five(log)
        await log.status(5)  # a ledger read: everything decided so far is committed
        conn = sqlite3.connect(path, isolation_level=None, timeout=5)
        try:
            conn.execute(f"UPDATE runs SET {column} = {value} WHERE run_id = 3")
        finally:
            conn.close()
        page = await log.finished_runs(limit=4)
        assert [r.run_id for r in page.runs] == [1, 2, 4]
        assert [d.run_id for d in page.damaged] == [3]
        error = page.damaged[0].error
        assert error.code == "ledger_corrupt"
        assert f"table runs, run_id 3, column {column}" in error.message
        assert (page.cursor, page.more) == (4, True)
        assert (await log.statistics()).queued == 1  # the actor keeps serving


async def test_without_a_ledger_the_runs_memory_holds_are_listed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("actors._eventlog._runs._wall_clock", WallClock())
    async with open_event_log(cfg(None, retain_runs=3), operations=OPS) as log:
        for n in range(1, 6):
            await log.submit("job", {"n": n})
            log.finish(n, "ok", n)
        page = await log.finished_runs(limit=2)
        assert [(r.run_id, r.result) for r in page.runs] == [(3, 3), (4, 4)]
        assert (page.cursor, page.more) == (4, True)
        rest = await log.finished_runs(after=page.cursor)
        assert ([r.run_id for r in rest.runs], rest.more) == ([5], False)
        assert [r.run_id for r in (await log.finished_runs(since=1003.0)).runs] == [4, 5]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"after": -1}, "after"),
        ({"after": True}, "after"),
        ({"limit": 0}, "limit"),
        ({"limit": 11}, "limit"),
        ({"limit": 2.0}, "limit"),
        ({"state": "running"}, "state"),
        ({"verdict": ""}, "verdict"),
        ({"since": -1.0}, "since"),
        ({"since": float("nan")}, "since"),
        ({"since": "yesterday"}, "since"),
    ],
)
async def test_a_bad_query_names_its_field(kwargs: dict[str, Any], field: str) -> None:
    async with client(cfg(None, finished_runs_limit=10)) as log:
        with pytest.raises(InvalidCommand) as info:
            await log.finished_runs(**kwargs)
        assert info.value.details["fields"] == [field]
        assert (await log.finished_runs(limit=10)).runs == ()  # the maximum itself is fine


@pytest.mark.parametrize("ledger", [True, False])
@pytest.mark.parametrize("after", [2**63, 2**64, -(2**63) - 1])
async def test_an_after_beyond_sqlite_integers_names_after_with_or_without_a_ledger(
    tmp_path: Path, ledger: bool, after: int
) -> None:
    async with client(cfg(tmp_path / "ledger.db" if ledger else None)) as log:
        await decide_five(log)
        with pytest.raises(InvalidCommand) as info:
            await log.finished_runs(after=after)
        assert info.value.details["fields"] == ["after"]
        # The largest SQLite integer is a fine cursor: nothing comes after it.
        page = await log.finished_runs(after=2**63 - 1)
        assert (page.runs, page.cursor, page.more) == ((), 2**63 - 1, False)
        assert (await log.status(1)).state == "finished"  # the log goes on
