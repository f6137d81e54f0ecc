"""Benchmarks of the event log (SPEC §6); prints the figures and ratios in one run.

Usage: ``python benchmarks/eventlog.py [--quick] [--verbose]``

1. Durable event append throughput: ``EventLog.progress`` on a running run (each call is
   one event: window, fan-out, staged ledger row; group commits in a worker thread) until
   ``flush()`` returns, vs. raw ``sqlite3`` ``executemany`` of the same rows (seq, kind,
   run_id, JSON data) into the same table with the same pragmas, in one transaction.
   Target: >= 0.5x.
2. Fan-out to 100 subscribers: ``PortHub.publish`` to 100 ports, each drained by its own
   task, vs. ``send_nowait`` to 100 bare trio memory channels drained the same way.
   Target: >= 0.5x.
3. Submit -> receipt latency with 10 000 runs in flight (queued, durable ledger): median
   and p99 of sequential submits, and of 32 concurrent submitters; through the core and
   through the event-log actor (``ask``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time

import trio
import trio.lowlevel

from actors._eventlog import EventLog, open_event_log
from actors._eventlog_actor import EventLogActor, EventLogClient
from actors._eventlog_types import Event, EventLogConfig, OperationSpec
from actors._ledger import _SCHEMA, Ledger
from actors._ports import PortHub

QUICK = "--quick" in sys.argv
VERBOSE = "--verbose" in sys.argv
SYNC = "FULL"
OPS = [OperationSpec(name="job", fields={"n"})]


def raw_append(
    path: str, rows: list[tuple[int, str, int, str]], events: list[Event] | None = None
) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={SYNC}")
    conn.executescript("BEGIN;" + _SCHEMA + "COMMIT;")
    t0 = time.perf_counter()
    conn.execute("BEGIN")
    if events is not None:
        dumps = json.dumps
        rows = [(e.seq, e.kind, e.run_id, dumps(e.data)) for e in events]
    conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


async def durable_append(path: str, n: int, yield_every: int) -> tuple[float, list]:
    config = EventLogConfig(ledger_path=path, synchronous=SYNC, window=4096)
    async with open_event_log(config, operations=OPS) as log:
        receipt = await log.submit("job", {"n": 0})
        log.start(receipt.run_id)
        await log.flush()
        first = log.head + 1
        progress = log.progress
        run_id = receipt.run_id
        t0 = time.perf_counter()
        for i in range(n):
            progress(run_id, i / n)
            if i % yield_every == yield_every - 1:
                await trio.lowlevel.checkpoint()
        await log.flush()
        elapsed = time.perf_counter() - t0
        stats = log.statistics().ledger
        rows = [
            (e.seq, e.kind, e.run_id, json.dumps(e.data))
            for e in (await log.watch(first - 1, limit=n)).events
        ]
    if VERBOSE:
        print(f"    ledger: {stats.commits} commits, largest batch {stats.largest_batch} rows")
    return elapsed, rows


async def ledger_append(path: str, events: list[Event], yield_every: int) -> float:
    ledger = Ledger(path, synchronous=SYNC)
    await ledger.open(keep_requests=0)
    async with trio.open_nursery() as nursery:
        await nursery.start(ledger.run_writer)
        stage = ledger.stage_event
        t0 = time.perf_counter()
        for i, event in enumerate(events):
            stage(event)
            if i % yield_every == yield_every - 1:
                await trio.lowlevel.checkpoint()
        await ledger.flush()
        elapsed = time.perf_counter() - t0
        nursery.cancel_scope.cancel()
    await ledger.close()
    return elapsed


async def bench_append(tmp: str) -> tuple[float, float]:
    n = 20_000 if QUICK else 100_000
    rounds = 5
    print(f"1. durable event append, {n} events, WAL, synchronous={SYNC}")
    print(f"   (best of {rounds} rounds; each round runs every variant once, interleaved)")
    _, rows = await durable_append(os.path.join(tmp, "warm.db"), n, 1000)
    events = [Event(seq=s, kind=k, run_id=r, data=json.loads(d)) for s, k, r, d in rows]
    assert len(rows) == n
    best: dict[str, float] = {}

    def record(name: str, elapsed: float) -> None:
        best[name] = min(best.get(name, float("inf")), elapsed)

    for r in range(rounds):
        record("raw", raw_append(os.path.join(tmp, f"raw-{r}.db"), rows))
        record("raw+json", raw_append(os.path.join(tmp, f"rawj-{r}.db"), rows, events))
        for y in (1000, 10):
            path = os.path.join(tmp, f"ledger-{y}-{r}.db")
            record(f"Ledger.stage_event (yield /{y})", await ledger_append(path, events, y))
            path = os.path.join(tmp, f"log-{y}-{r}.db")
            record(f"EventLog.progress (yield /{y})", (await durable_append(path, n, y))[0])
    raw = best.pop("raw")
    print(f"   raw executemany, pre-encoded rows:   {n / raw:>10,.0f} events/s  (baseline)")
    encoded = best.pop("raw+json")
    print(
        f"   raw executemany, json.dumps in loop: {n / encoded:>10,.0f} events/s"
        f"  ratio {raw / encoded:.2f}x"
    )
    for label, elapsed in best.items():
        print(f"   {label:<37} {n / elapsed:>10,.0f} events/s  ratio {raw / elapsed:.2f}x")
    return raw / best["Ledger.stage_event (yield /1000)"], raw / best[
        "EventLog.progress (yield /1000)"
    ]


async def fan_out(n: int, consumers: int, *, ports: bool) -> float:
    events = [Event(seq=i + 1, kind="job_progress", run_id=1, data={"f": i}) for i in range(n)]
    done = trio.Event()
    remaining = [consumers]

    async def consume(receive) -> None:
        count = 0
        while count < n:
            await receive()
            count += 1
        remaining[0] -= 1
        if not remaining[0]:
            done.set()

    async with trio.open_nursery() as nursery:
        if ports:
            hub = PortHub(lambda cursor: [], default_bound=n)
            for _ in range(consumers):
                nursery.start_soon(consume, hub.open_port().receive)
            publish = hub.publish
        else:
            sends = []
            for _ in range(consumers):
                send, receive = trio.open_memory_channel(n)
                sends.append(send)
                nursery.start_soon(consume, receive.receive)

            def publish(event: Event) -> None:
                for channel in sends:
                    channel.send_nowait(event)

        await trio.testing.wait_all_tasks_blocked()
        t0 = time.perf_counter()
        for i, event in enumerate(events):
            publish(event)
            if i % 64 == 63:
                await trio.lowlevel.checkpoint()
        await done.wait()
        return time.perf_counter() - t0


async def bench_fanout() -> float:
    n = 2_000 if QUICK else 10_000
    print(f"2. fan-out of {n} events to 100 subscribers (deliveries: {n * 100:,})")
    bare = ours = float("inf")
    for _ in range(5):  # interleaved, best of 5
        bare = min(bare, await fan_out(n, 100, ports=False))
        ours = min(ours, await fan_out(n, 100, ports=True))
    print(f"   100 bare memory channels:  {n * 100 / bare:>12,.0f} deliveries/s")
    print(f"   PortHub, 100 ports:        {n * 100 / ours:>12,.0f} deliveries/s")
    ratio = bare / ours
    print(f"   ratio {ratio:.2f}x")
    return ratio


def summary(label: str, samples: list[float]) -> None:
    samples = sorted(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    print(
        f"   {label:<44} median {statistics.median(samples) * 1e3:6.2f} ms"
        f"   p99 {p99 * 1e3:6.2f} ms   (n={len(samples)})"
    )


async def latencies(submit, count: int, concurrency: int) -> list[float]:
    samples: list[float] = []

    async def worker(w: int) -> None:
        for i in range(count // concurrency):
            t0 = time.perf_counter()
            receipt = await submit("job", {"n": 1_000_000 + w * count + i})
            samples.append(time.perf_counter() - t0)
            assert receipt.admitted

    async with trio.open_nursery() as nursery:
        for w in range(concurrency):
            nursery.start_soon(worker, w)
    return samples


async def fill(log: EventLog, inflight: int) -> None:
    async def some(start: int) -> None:
        for n in range(start, inflight, 100):
            await log.submit("job", {"n": n})

    async with trio.open_nursery() as nursery:
        for start in range(100):
            nursery.start_soon(some, start)


async def bench_latency(tmp: str) -> None:
    inflight = 10_000
    count = 200 if QUICK else 1000
    print(f"3. submit -> receipt latency with {inflight:,} runs in flight (queued)")
    for durable in (False, True):
        path = os.path.join(tmp, "latency.db") if durable else None
        config = EventLogConfig(
            ledger_path=path, synchronous=SYNC, max_inflight=inflight + 2 * count + 10
        )
        where = f"ledger, synchronous={SYNC}" if durable else "in memory"
        async with trio.open_nursery() as nursery:
            actor = EventLogActor(config, operations=OPS)
            client = EventLogClient(await nursery.start(actor.run), timeout=60)
            await fill(actor.log, inflight)
            assert actor.log.statistics().queued == inflight
            summary(f"core, sequential ({where})", await latencies(actor.log.submit, count, 1))
            summary(f"core, 32 concurrent ({where})", await latencies(actor.log.submit, count, 32))
            summary(f"actor ask, sequential ({where})", await latencies(client.submit, count, 1))
            summary(
                f"actor ask, 32 concurrent ({where})", await latencies(client.submit, count, 32)
            )
            await client.ref.stop(grace=5)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ledger_ratio, append = await bench_append(tmp)
        fanout = await bench_fanout()
        await bench_latency(tmp)
    print()
    print(
        f"ratios: durable append {ledger_ratio:.2f}x through the ledger, {append:.2f}x through"
        f" EventLog.progress (target >= 0.5); fan-out {fanout:.2f}x (target >= 0.5)"
    )


if __name__ == "__main__":
    import trio.testing

    trio.run(main)
