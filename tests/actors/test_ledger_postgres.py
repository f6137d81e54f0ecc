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
from ledger_support import events_until
from pg_support import committed

from actors._eventlog._eventlog import open_event_log
from actors._eventlog._ledger import BatchLedger, PostgresStore
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import LedgerInUse, LedgerUnavailable

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


def ledger_of(log: EventLog) -> BatchLedger:
    ledger = log._ledger
    assert isinstance(ledger, BatchLedger)
    assert isinstance(ledger._store, PostgresStore)
    return ledger


def store_of(log: EventLog) -> PostgresStore:
    store = ledger_of(log)._store
    assert isinstance(store, PostgresStore)
    return store


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
            assert store_of(log).connects >= 2  # the writer reconnected
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
        ledger = ledger_of(log)
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


@pytest.mark.parametrize(
    ("read_timeout", "statement_timeout", "cause"),
    [
        # The read's deadline fires first: its statement is cancelled on the server
        # (without the cancel it would wait on the lock for 60 s).
        (0.5, 60.0, "took longer than 0.5 s"),
        # The server's statement_timeout fires first.
        (30.0, 0.3, "statement timeout"),
    ],
)
async def test_a_read_blocked_on_the_server_ends_with_its_deadline_and_its_statement(
    postgres_server: PostgresServer, read_timeout: float, statement_timeout: float, cause: str
) -> None:
    url = postgres_server.fresh_url()
    config = cfg(
        url,
        ledger_read_timeout=read_timeout,
        ledger_statement_timeout=statement_timeout,
        retain_runs=0,
    )
    async with open_event_log(config, operations=OPS) as log:
        receipt = await log.submit("job", {"n": 1})
        await log.cancel(receipt.run_id, "t")  # decided and out of memory: read back
        with psycopg.connect(url) as locker:
            locker.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
            began = time.monotonic()
            with pytest.raises(LedgerUnavailable) as info:
                await log.status(receipt.run_id)
            assert time.monotonic() - began < 5
            assert cause in info.value.details["cause"]
            with trio.fail_after(5):
                while any(state == "active" for _, state, _ in backends(postgres_server, "reader")):  # noqa: ASYNC110 - the server's state
                    await trio.sleep(0.02)
            locker.rollback()
        assert (await log.status(receipt.run_id)).cancelled_by == "t"


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
        store = store_of(log)
        assert store.connections == 2
        assert store.connects == 2
        opened = backends(postgres_server, "writer") + backends(postgres_server, "reader")
        assert len(opened) == 2
    with trio.fail_after(5):  # a backend exits just after its client closes
        while backends(postgres_server, "writer") + backends(postgres_server, "reader"):  # noqa: ASYNC110 - the server's state
            await trio.sleep(0.02)


async def test_a_second_event_log_on_one_ledger_is_refused_while_the_first_writes(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.fresh_url()
    other = postgres_server.fresh_url()
    async with open_event_log(cfg(url), operations=OPS) as first:
        await first.submit("job", {"n": 1}, request_id="a")
        with pytest.raises(LedgerInUse) as info:
            async with open_event_log(cfg(url), operations=OPS):
                pass  # pragma: no cover
        assert info.value.code == "ledger_in_use"
        assert "trio-actors ledger writer" in info.value.message
        assert "\n" not in info.value.message
        # Another schema of the same database is another ledger.
        async with open_event_log(cfg(other), operations=OPS) as elsewhere:
            assert (await elsewhere.submit("job", {"n": 1})).run_id == 1
    assert committed(url, "SELECT request_id FROM requests") == [("a",)]
    async with open_event_log(cfg(url), operations=OPS) as second:  # free again
        assert [s.run_id for s in second.boot_report().survivors] == [1]
