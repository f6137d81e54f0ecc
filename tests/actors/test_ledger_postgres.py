"""Tests of the PostgreSQL ledger on a real server: outages, bounds, cancellation (§6.13).

The ledger semantics shared with SQLite run against both engines in ``test_ledger.py``
(``ledger_at``); these tests are about what only a server has: it goes away and comes
back, its statements are bounded by ``statement_timeout`` and cancelled with their trio
scope, a commit's outcome can be unknown, and a node holds few connections. Real clock:
the ledger works in worker threads (a virtual clock would jump past their deadlines).
"""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING

import psycopg
import pytest
import trio
from pg_support import committed

from actors._eventlog._eventlog import open_event_log
from actors._eventlog._ledger import PostgresLedger
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import LedgerUnavailable

if TYPE_CHECKING:
    from pg_support import PostgresServer

    from actors._eventlog._eventlog import EventLog

OPS = [OperationSpec(name="job", fields={"n"})]


def cfg(url: str, **kwargs: object) -> EventLogConfig:
    return EventLogConfig(
        ledger_path=url,
        ledger_retry_min=0.01,
        ledger_retry_max=0.05,
        **kwargs,  # type: ignore[arg-type]
    )


def store_of(log: EventLog) -> PostgresLedger:
    ledger = log._ledger
    assert isinstance(ledger, PostgresLedger)
    return ledger


async def events_until(port, kind: str) -> list[tuple[str, dict]]:  # type: ignore[no-untyped-def]
    seen = []
    with trio.fail_after(20):
        async for event in port:
            seen.append((event.kind, event.data))
            if event.kind == kind:
                return seen
    raise AssertionError(f"no {kind} in {seen}")


def backends(server: PostgresServer, role: str) -> list[tuple[int, str, str]]:
    """``(pid, state, query)`` of the ledger connections of ``role`` on ``server``."""
    return [
        tuple(row)
        for row in server.admin(
            "SELECT pid, state, query FROM pg_stat_activity WHERE application_name = %s",
            f"trio-actors ledger {role}",
        )
    ]


async def test_a_server_restart_refuses_new_work_then_reconnects_and_loses_nothing(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.fresh_url()
    try:
        async with open_event_log(cfg(url, window=2), operations=OPS) as log:
            port = log.subscribe("watcher")
            acknowledged = [await log.submit("job", {"n": k}, request_id=f"r{k}") for k in range(3)]
            await trio.to_thread.run_sync(postgres_server.stop)
            with pytest.raises(LedgerUnavailable) as info:
                await log.submit("job", {"n": 3}, request_id="during")
            error = info.value
            assert (error.code, error.retryable) == ("ledger_unavailable", True)
            assert 0 < error.details["retry_after"] <= 0.05
            assert "\n" not in str(error)
            assert log.statistics().paused
            with pytest.raises(LedgerUnavailable):
                await log.submit("job", {"n": 100})  # refused at once while it lasts
            # Answers from memory go on meanwhile.
            assert (await log.status(acknowledged[0].run_id)).state == "queued"
            await trio.to_thread.run_sync(postgres_server.launch)
            seen = await events_until(port, "admission_resumed")
            assert seen[-1] == ("admission_resumed", {"reason": "ledger_available"})
            # The request decided during the outage was kept and is durable now.
            kept = await log.submit("job", {"n": 3}, request_id="during")
            assert (kept.admitted, kept.run_id) == (True, 4)
            assert (await log.submit("job", {"n": 5})).run_id == 5
            assert store_of(log).store.connects >= 2  # the writer reconnected
    finally:
        if not postgres_server.running:
            postgres_server.launch()
    rows = committed(url, "SELECT request_id, run_id FROM requests ORDER BY run_id")
    assert [run for _, run in rows] == [1, 2, 3, 4, 5]
    async with open_event_log(cfg(url), operations=OPS) as log:
        assert [s.run_id for s in log.boot_report().survivors] == [1, 2, 3, 4, 5]
        events = (await log.watch(0, limit=1000)).events
        assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_a_cut_connection_is_reconnected_and_a_retried_submit_is_admitted_once(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.fresh_url()
    async with open_event_log(cfg(url), operations=OPS) as log:
        await log.submit("job", {"n": 0}, request_id="before")
        for pid, _, _ in backends(postgres_server, "writer"):
            postgres_server.admin("SELECT pg_terminate_backend(%s)", pid)
        receipts = []
        with trio.fail_after(10):
            while True:
                try:
                    receipts.append(await log.submit("job", {"n": 1}, request_id="after"))
                    break
                except LedgerUnavailable as exc:
                    await trio.sleep(exc.details["retry_after"])
        assert receipts[0].run_id == 2
        assert await log.submit("job", {"n": 1}, request_id="after") == receipts[0]
    assert committed(url, "SELECT request_id FROM requests ORDER BY 1") == [
        ("after",),
        ("before",),
    ]


async def test_a_commit_whose_success_was_not_seen_is_not_written_twice(
    pg_url: str,
) -> None:
    async with open_event_log(cfg(pg_url), operations=OPS) as log:
        ledger = store_of(log)
        real = ledger._commit_sync
        lost = []

        def commit_then_lose_the_answer(batch):  # type: ignore[no-untyped-def]
            real(batch)
            if not lost:  # committed on the server, but we never hear it
                lost.append(batch)
                batch.committed = False
                raise psycopg.OperationalError("server closed the connection unexpectedly")

        ledger._commit_sync = commit_then_lose_the_answer  # type: ignore[method-assign]
        with trio.fail_after(10):
            while True:
                try:
                    receipt = await log.submit("job", {"n": 1}, request_id="once")
                    break
                except LedgerUnavailable as exc:
                    await trio.sleep(exc.details["retry_after"])
        assert lost
        assert receipt.run_id == 1
        assert ledger.statistics().failed_commits == 1
    assert committed(pg_url, "SELECT request_id FROM requests") == [("once",)]


async def test_a_read_cancelled_by_its_deadline_cancels_its_statement(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.fresh_url()
    config = cfg(url, ledger_read_timeout=0.5, ledger_statement_timeout=60.0, retain_runs=0)
    async with open_event_log(config, operations=OPS) as log:
        receipt = await log.submit("job", {"n": 1})
        await log.cancel(receipt.run_id, "t")  # decided and out of memory: read back
        with psycopg.connect(url) as locker:
            locker.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
            began = time.monotonic()
            with pytest.raises(LedgerUnavailable) as info:
                await log.status(receipt.run_id)
            assert time.monotonic() - began < 5
            assert "took longer than 0.5 s" in info.value.details["cause"]
            # Without the cancel the statement would wait on the lock for 60 s.
            with trio.fail_after(5):
                while any(state == "active" for _, state, _ in backends(postgres_server, "reader")):  # noqa: ASYNC110 - the server's state
                    await trio.sleep(0.02)
            locker.rollback()
        assert (await log.status(receipt.run_id)).cancelled_by == "t"


async def test_statement_timeout_bounds_a_statement_the_server_blocks(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.fresh_url()
    config = cfg(url, ledger_read_timeout=30.0, ledger_statement_timeout=0.3, retain_runs=0)
    async with open_event_log(config, operations=OPS) as log:
        receipt = await log.submit("job", {"n": 1})
        await log.cancel(receipt.run_id, "t")
        with psycopg.connect(url) as locker:
            locker.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
            began = time.monotonic()
            with pytest.raises(LedgerUnavailable) as info:
                await log.status(receipt.run_id)
            assert time.monotonic() - began < 5
            assert "statement timeout" in info.value.details["cause"]
            locker.rollback()


async def test_a_node_holds_at_most_two_connections(postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh_url()
    config = cfg(url, retain_runs=0, retain_requests=0)
    async with open_event_log(config, operations=OPS) as log:
        async with trio.open_nursery() as nursery:
            for n in range(50):
                nursery.start_soon(partial(log.submit, "job", {"n": n}, request_id=f"r{n}"))
        for n in range(0, 50, 10):
            await log.cancel(n + 1, "t")
            assert (await log.status(n + 1)).cancelled_by == "t"  # read from the ledger
        store = store_of(log).store
        assert store.connections == 2
        assert store.connects == 2
        opened = backends(postgres_server, "writer") + backends(postgres_server, "reader")
        assert len(opened) == 2
    with trio.fail_after(5):  # a backend exits just after its client closes
        while backends(postgres_server, "writer") + backends(postgres_server, "reader"):  # noqa: ASYNC110 - the server's state
            await trio.sleep(0.02)
