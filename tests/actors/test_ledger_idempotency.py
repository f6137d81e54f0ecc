"""Idempotency that does not depend on memory (design §6.3).

A request id is deduplicated against the ledger, whatever ``retain_requests`` is: a
duplicate decided while the first is in flight gets the stored receipt, never a second
run and never the ledger's UNIQUE constraint.
"""

from __future__ import annotations

import pytest
import trio
from pg_support import committed

from actors._eventlog import EventLogActor, EventLogClient
from actors._eventlog._eventlog import open_event_log
from actors._eventlog._types import EventLogConfig, OperationSpec

OPS = [OperationSpec(name="job", fields={"n"}, mutating=True)]


def cfg(path: str, **kwargs: object) -> EventLogConfig:
    return EventLogConfig(ledger_path=path, synchronous="NORMAL", **kwargs)  # type: ignore[arg-type]


def rows(path: str, sql: str) -> list[tuple[object, ...]]:
    return committed(path, sql)


@pytest.mark.parametrize("retain", [0, 1, 100_000])
async def test_fifty_concurrent_submits_of_one_id_make_one_run(ledger_at: str, retain: int) -> None:
    path = ledger_at
    async with trio.open_nursery() as nursery:
        actor = EventLogActor(cfg(path, retain_requests=retain), operations=OPS)
        log = EventLogClient(await nursery.start(actor.run), timeout=10)
        await log.submit("job", {"n": 0}, request_id="warm-up")  # memory may forget it
        receipts = []

        async def submit() -> None:
            receipts.append(await log.submit("job", {"n": 1}, request_id="same"))

        async with trio.open_nursery() as burst:
            for _ in range(50):
                burst.start_soon(submit)
        assert len(receipts) == 50
        assert all(r == receipts[0] for r in receipts)
        assert (receipts[0].run_id, receipts[0].admitted) == (2, True)
        stats = await log.statistics()
        assert (stats.queued, stats.ledger.failed_commits) == (2, 0)  # type: ignore[union-attr]
        await log.ref.stop(grace=5)
    assert rows(path, "SELECT request_id, run_id FROM requests ORDER BY position") == [
        ("warm-up", 1),
        ("same", 2),
    ]


async def test_an_id_memory_forgot_is_found_in_the_ledger_and_never_runs_twice(
    ledger_at: str,
) -> None:
    path = ledger_at
    async with open_event_log(cfg(path, retain_requests=1), operations=OPS) as log:
        first = await log.submit("job", {"n": 1}, request_id="a")
        for k in range(5):  # memory keeps one: "a" is forgotten
            await log.submit("job", {"n": 10 + k}, request_id=f"other-{k}")
        receipts = []

        async def again() -> None:
            receipts.append(await log.submit("job", {"n": 1}, request_id="a"))

        async with trio.open_nursery() as nursery:
            for k in range(20):
                nursery.start_soon(again)
                nursery.start_soon(log.submit, "job", {"n": 100 + k})  # churn meanwhile
        assert receipts == [first] * 20
        assert log.statistics().ledger.failed_commits == 0  # type: ignore[union-attr]
    assert rows(path, "SELECT count(*) FROM runs WHERE request_id = 'a'") == [(1,)]


async def test_memory_keeps_a_request_until_its_row_is_committed(ledger_at: str) -> None:
    async with open_event_log(cfg(ledger_at, retain_requests=0), operations=OPS) as log:
        admission = log.admit("job", {"n": 1}, "x")  # decided, not yet durable
        duplicate = log.admit("job", {"n": 1}, "x")  # decided from memory: the same
        assert duplicate.receipt == admission.receipt
        assert await duplicate.wait() == await admission.wait()
        assert len(log._intake._requests) <= 1


async def test_without_a_ledger_memory_is_the_window_of_idempotency() -> None:
    async with open_event_log(EventLogConfig(retain_requests=2), operations=OPS) as log:
        first = await log.submit("job", {"n": 1}, request_id="a")
        assert await log.submit("job", {"n": 1}, request_id="a") == first
        for k in range(2):
            await log.submit("job", {"n": 2 + k}, request_id=f"b{k}")
        assert (await log.submit("job", {"n": 1}, request_id="a")).run_id != first.run_id


async def test_nothing_leaves_memory_while_a_look_up_is_in_flight(
    ledger_at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race: a look-up misses "x", then "x" is admitted, committed and (retain 0)
    # dropped from memory by another request before the look-up decides.
    async with open_event_log(cfg(ledger_at, retain_requests=0), operations=OPS) as log:
        for k in range(2):  # the first is forgotten once the second is stored
            await log.submit("job", {"n": -k}, request_id=f"warm-up-{k}")
        ledger = log._ledger
        assert ledger is not None
        real = ledger.fetch_request
        missed, release = trio.Event(), trio.Event()

        async def held_open(request_id: str):
            row = await real(request_id)
            if not missed.is_set():
                missed.set()
                await release.wait()
            return row

        monkeypatch.setattr(ledger, "fetch_request", held_open)
        with trio.fail_after(10):
            await _race(log, missed, release)
        assert log.statistics().ledger.failed_commits == 0  # type: ignore[union-attr]


async def _race(log, missed: trio.Event, release: trio.Event) -> None:
    async with trio.open_nursery() as nursery:
        late: list[object] = []

        async def slow() -> None:
            late.append(await log.submit("job", {"n": 1}, request_id="x"))

        nursery.start_soon(slow)
        await missed.wait()
        first = await log.submit("job", {"n": 1}, request_id="x")
        await log.submit("job", {"n": 2}, request_id="y")  # would drop "x" from memory
        release.set()
    assert late == [first]


async def test_ids_read_back_from_the_ledger_do_not_grow_memory(ledger_at: str) -> None:
    config = cfg(ledger_at, retain_requests=2)
    async with open_event_log(config, operations=OPS) as log:
        receipts = [await log.submit("job", {"n": n}, request_id=f"r{n}") for n in range(6)]
        store = log._intake._requests
        assert len(store) == 2
        for _ in range(3):  # retries of old ids, one at a time: each is read back ...
            for n in range(6):
                assert await log.submit("job", {"n": n}, request_id=f"r{n}") == receipts[n]
                assert len(store) <= 3  # ... and memory is trimmed after each look-up

        async def retry(n: int) -> None:
            assert await log.submit("job", {"n": n}, request_id=f"r{n}") == receipts[n]

        async with trio.open_nursery() as burst:  # look-ups overlapping one another
            for n in range(6):
                burst.start_soon(retry, n)
        assert len(store) <= 3  # trimmed once the last one ended
        assert log.statistics().queued == 6  # never a second run
