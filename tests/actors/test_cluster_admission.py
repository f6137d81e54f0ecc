"""Admission, finishes and cancels of a cluster under concurrency (docs/cluster.rst).

Finishes and cancels take no shared row but ``head`` (they count released runs on their
node's own row), and every batch locks in one order: these tests hold that order to its
guarantees with three nodes on one real PostgreSQL (``tests/pg_support.py``): the bound
is never exceeded and is reached, a finish racing a coalescing submit of the same key
decides both, and mixed admit/finish/cancel load from three nodes never deadlocks (a
deadlock would fail a batch: PostgreSQL aborts one of the two transactions). The real
clock, with short deadlines.
"""

from __future__ import annotations

import json
import logging
import random
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import psycopg
import trio
from pg_support import committed

from actors import EventLogConfig, OperationSpec, open_event_log

if TYPE_CHECKING:
    import pytest

    from actors import EventLog, RunStatus
    from actors._eventlog._operations import ProgressReporter

#: ``work`` never coalesces (mutating); ``look`` coalesces equal arguments.
OPS = [
    OperationSpec(name="work", fields={"n"}, required={"n"}, mutating=True),
    OperationSpec(name="look", fields={"n"}, required={"n"}),
]
_LIVE_DELTA = {"job_queued": 1, "job_finished": -1, "job_cancelled": -1, "job_interrupted": -1}


def _config(url: str, **fields: Any) -> EventLogConfig:
    return EventLogConfig(ledger_path=url, cluster=True, **fields)


def _most_live(url: str) -> tuple[int, int]:
    """(the most live runs after any commit, the live runs now), replayed from the
    ledger's dense, commit-ordered events."""
    live = most = 0
    for (kind,) in committed(url, "SELECT kind FROM cluster_events ORDER BY seq"):
        live += _LIVE_DELTA.get(kind, 0)
        most = max(most, live)
    return most, live


def _counted_live(url: str) -> int:
    """The live runs as admission counts them: inflight - the nodes' released counts."""
    ((value,),) = committed(
        url,
        "SELECT (SELECT value FROM cluster_counters WHERE name = 'inflight')"
        " - (SELECT coalesce(sum(value), 0) FROM cluster_counters"
        " WHERE name LIKE 'released:%')",
    )
    return int(value)


def _waiting_writers(url: str) -> int:
    ((count,),) = committed(
        url,
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND application_name LIKE 'trio-actors node-%writer'",
    )
    return int(count)


def _failed_batches(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "decisions failed" in r.getMessage()]


async def test_max_inflight_is_never_exceeded_while_three_nodes_admit_and_finish(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    bound, jobs = 5, 60
    gate = trio.Event()

    async def runner(run: RunStatus, report: ProgressReporter) -> int:
        await gate.wait()
        return int(run.arguments["n"])

    caplog.set_level(logging.WARNING, logger="actors.eventlog")
    async with AsyncExitStack() as stack:
        nodes: list[EventLog] = [
            await stack.enter_async_context(
                open_event_log(
                    _config(pg_url, max_inflight=bound, max_concurrency=2),
                    operations=OPS,
                    runners={"work": runner},
                )
            )
            for _ in range(3)
        ]
        # The runners wait: 12 submits at once from three nodes admit the bound exactly.
        first: list[Any] = []
        async with trio.open_nursery() as nursery:
            for i in range(12):

                async def submit(log: EventLog = nodes[i % 3], i: int = i) -> None:
                    first.append(await log.submit("work", {"n": i}, f"r{i}"))

                nursery.start_soon(submit)
        assert sum(r.admitted for r in first) == bound
        assert {r.code for r in first if not r.admitted} == {"admission_full"}
        # Then the runs finish (on every node) while every node keeps submitting, each
        # refused request again until admitted: the bound holds at every commit.
        gate.set()
        admitted = {r.request_id for r in first if r.admitted}
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for i in range(jobs):

                    async def until_admitted(log: EventLog = nodes[i % 3], i: int = i) -> None:
                        while f"r{i}" not in admitted:
                            receipt = await log.submit("work", {"n": i}, f"r{i}")
                            if receipt.admitted:
                                admitted.add(f"r{i}")
                            else:
                                await trio.sleep(0.01)

                    nursery.start_soon(until_admitted)
            while committed(  # noqa: ASYNC110 (the ledger, polled as a client would)
                pg_url, "SELECT count(*) FROM cluster_runs WHERE state = 'finished'"
            ) != [(jobs,)]:
                await trio.sleep(0.02)
    most, live = _most_live(pg_url)
    assert (most, live) == (bound, 0)  # reached, never passed, and all released
    assert _counted_live(pg_url) == 0
    assert committed(pg_url, "SELECT count(*) FROM cluster_runs") == [(jobs,)]
    assert _failed_batches(caplog) == []


async def test_a_finish_racing_a_coalescing_submit_of_the_same_key_decides_both(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="actors.eventlog")
    gates: dict[int, trio.Event] = {}
    started: dict[int, trio.Event] = {}

    async def runner(run: RunStatus, report: ProgressReporter) -> int:
        started.setdefault(run.run_id, trio.Event()).set()
        await gates.setdefault(run.run_id, trio.Event()).wait()
        return int(run.arguments["n"])

    async with AsyncExitStack() as stack:
        owner = await stack.enter_async_context(
            open_event_log(_config(pg_url), operations=OPS, runners={"look": runner})
        )
        others = [
            await stack.enter_async_context(open_event_log(_config(pg_url), operations=OPS))
            for _ in range(2)
        ]
        for round_ in range(5):
            first = await others[0].submit("look", {"n": round_}, f"a{round_}")
            run_id = first.run_id
            assert run_id is not None
            with trio.fail_after(10):
                await started.setdefault(run_id, trio.Event()).wait()
            # The run's row is held by a third transaction while the owner finishes the
            # run (its batch waits on the row) and two nodes submit the same arguments
            # (their batches hold the inflight row and wait on it too); then it goes.
            with psycopg.connect(pg_url) as hold:
                hold.execute("SELECT 1 FROM cluster_runs WHERE run_id = %s FOR UPDATE", (run_id,))
                receipts: list[Any] = []
                async with trio.open_nursery() as nursery:
                    gates.setdefault(run_id, trio.Event()).set()
                    for k, log in enumerate(others):

                        async def submit(
                            log: EventLog = log,
                            k: int = k,
                            n: int = round_,
                            into: list[Any] = receipts,
                        ) -> None:
                            into.append(await log.submit("look", {"n": n}, f"b{n}-{k}"))

                        nursery.start_soon(submit)
                    with trio.fail_after(10):
                        # The finish and one submit wait on the row, the other submit
                        # on that one's inflight row.
                        while _waiting_writers(pg_url) < 3:  # noqa: ASYNC110 (polled)
                            await trio.sleep(0.01)
                    hold.rollback()
            assert all(r.admitted for r in receipts)
            # The finish committed first (it was queued first on the row) or not: each
            # submit joined the run while it was live, or made the one new live run.
            joined = [r for r in receipts if r.coalesced and r.run_id == run_id]
            fresh = {r.run_id for r in receipts if r.run_id != run_id}
            assert len(joined) + sum(r.run_id != run_id for r in receipts) == 2
            assert len(fresh) <= 1  # never two live runs of one key
            for new in fresh:
                assert new is not None
                with trio.fail_after(10):
                    await started.setdefault(new, trio.Event()).wait()
                gates.setdefault(new, trio.Event()).set()
            with trio.fail_after(10):
                for r in receipts:
                    status = await owner.status(r.run_id)
                    while status.state != "finished":
                        await trio.sleep(0.02)
                        status = await owner.status(r.run_id)
                    assert status.result == round_
    assert _most_live(pg_url)[1] == 0
    assert _counted_live(pg_url) == 0
    assert _failed_batches(caplog) == []


async def test_mixed_admits_finishes_and_cancels_from_three_nodes_never_deadlock(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="actors.eventlog")
    rng = random.Random(7)

    async def runner(run: RunStatus, report: ProgressReporter) -> int:
        report(0.5)
        await trio.sleep(rng.random() * 0.02)
        return 1

    runners = {"work": runner, "look": runner}
    async with AsyncExitStack() as stack:
        nodes: list[EventLog] = [
            await stack.enter_async_context(
                open_event_log(
                    _config(pg_url, max_inflight=40, max_concurrency=4),
                    operations=OPS,
                    runners=runners,
                )
            )
            for _ in range(3)
        ]
        run_ids: list[int] = []

        async def client(k: int) -> None:
            for i in range(40):
                log = nodes[(k + i) % 3]
                if i % 3 == 2 and run_ids:
                    # A cancel of a recent run: queued, or running on any node.
                    await log.cancel(rng.choice(run_ids[-4:]), f"client-{k}")
                    continue
                # Half of them share arguments across clients: they coalesce.
                op, n = ("look", i % 5) if i % 2 else ("work", 1000 * k + i)
                receipt = await log.submit(op, {"n": n}, f"c{k}-{i}")
                if receipt.admitted:
                    assert receipt.run_id is not None
                    run_ids.append(receipt.run_id)

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for k in range(6):
                    nursery.start_soon(client, k)
            while committed(  # noqa: ASYNC110 (the ledger, polled as a client would)
                pg_url, "SELECT count(*) FROM cluster_runs WHERE state IN ('queued', 'running')"
            ) != [(0,)]:
                await trio.sleep(0.02)
    states = dict(committed(pg_url, "SELECT state, count(*) FROM cluster_runs GROUP BY state"))
    assert set(states) <= {"finished", "cancelled"}
    assert states.get("cancelled", 0) > 0
    assert states.get("finished", 0) > 0
    most, live = _most_live(pg_url)
    assert most <= 40
    assert live == 0
    assert _counted_live(pg_url) == 0
    seqs = [seq for (seq,) in committed(pg_url, "SELECT seq FROM cluster_events ORDER BY seq")]
    assert seqs == list(range(1, len(seqs) + 1))  # dense
    for (data,) in committed(pg_url, "SELECT data FROM cluster_events"):
        json.loads(data)
    assert _failed_batches(caplog) == []
