"""Benchmarks of the event log (design §6); prints the figures and ratios in one run.

Usage: ``python benchmarks/eventlog.py [--quick] [--verbose]``

1. Durable event append throughput (target >= 0.5x), each line timed from its first
   append until the rows are committed (durable), best of 5 interleaved rounds:

   * baseline: raw ``sqlite3`` ``executemany`` of the rows, already encoded, into the
     ledger's ``events`` table in one transaction, with the ledger's pragmas (WAL,
     ``synchronous=FULL``). The rows are the very ones ``EventLog.progress`` wrote (read
     back from its ledger file): same seq, kind, run_id and data text.
   * raw ``executemany``, encoding each row's data with ``json.dumps`` inside the timed
     part (for reference: what encoding costs).
   * ``Ledger.stage_event`` of the same pre-encoded rows, then ``flush()``: group commits
     by the ledger's writer task, each transaction in a worker thread.
   * ``EventLog.progress(run_id, fraction)`` on a running run, then ``flush()``: the
     durable append path of the log (what the built-in runners' ``report_progress`` and
     the event-log actor's ``Progress`` call): validation, the window entry, the fan-out
     check, the staged row, its JSON text made once (by the writer thread), group
     commits in a worker thread. The fractions are made before timing, like the
     baseline's rows. The producer task checkpoints every 1000 events (the target line).
     Above ``max_pending_rows`` staged rows the log coalesces progress to the newest
     report per run (design §6.19): a producer faster than the disk then gets fewer
     rows than reports, which is not an append. So the log is configured with
     ``max_pending_rows`` = the events of the line (a burst the log must keep whole),
     and every round is checked, outside the timed part, with checks that ``python -O``
     does not remove: the head moved by exactly one per report, nothing was folded, and
     the ledger file, read back by a connection of its own after the log closed, holds
     every report as a ``job_progress`` row, in order, with its fraction.
   * the same two with a checkpoint every 10 events: they add trio's cost of 10 000
     checkpoints (a few us each; the log itself never checkpoints per event) and let the
     writer's thread contend for the GIL while the producer runs.
   * ``EventLogClient.progress`` through the event-log actor (one ``ask`` each, in
     sequence), then ``flush()``: for reference, not a target (the ask round trip is the
     actor core's cost; it runs on a tenth of the events and is scaled up).
2. Fan-out to 100 subscribers: ``PortHub.publish`` to 100 ports, each drained by its own
   task, vs. ``send_nowait`` to 100 bare trio memory channels drained the same way.
   Target: >= 0.5x.
3. Submit -> receipt latency with 10 000 runs in flight (queued; in memory, then with a
   durable ledger): median and p99 of sequential submits, and of 32 concurrent
   submitters; through the core and through the event-log actor (``ask``). A full
   garbage collection during a line is named with its pause: with 10 000 runs alive it
   takes tens of ms, and lands in the p99 of whichever line it falls in.
4. Opening a ledger of 1 000 000 events and 10 000 runs: the
   read-only inspection of design §6.11 (integrity check, every row by SQL rules, the
   rows that must exist) plus loading what boot needs, and the same after a crash (a
   write-ahead log of committed frames to check first, §6.12). Baseline: a bare
   read-only ``PRAGMA quick_check`` of the same file (the integrity check alone),
   interleaved with the opens, best of 3.

Section 3's baseline for the durable lines is a raw ``sqlite3`` one-row commit with the
same pragmas, half of its samples taken before the lines and half after; in memory, the
ask is compared with the core call it makes.

Every ratio is against its baseline measured in the same run, the rounds interleaved.
``--quick`` is a smoke run (a few seconds; smaller sizes, fewer rounds, noisier): it
checks that every line still runs; quote a full run.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time

import trio
import trio.lowlevel
import trio.testing

from actors._eventlog._actor import EventLogActor
from actors._eventlog._client import EventLogClient
from actors._eventlog._eventlog import EventLog, open_event_log
from actors._eventlog._ledger import SQLiteLedger
from actors._eventlog._ledger._schema import SCHEMA
from actors._eventlog._ports import PortHub
from actors._eventlog._types import Event, EventLogConfig, OperationSpec

QUICK = "--quick" in sys.argv
VERBOSE = "--verbose" in sys.argv
SYNC = "FULL"
#: Interleaved rounds of sections 1 and 2, and repetitions of section 4.
ROUNDS, REPEAT = (2, 1) if QUICK else (5, 3)
OPS = [OperationSpec(name="job", fields={"n"})]

Row = tuple[int, str, int, str]


def raw_append(
    path: str, rows: list[Row], decoded: list[tuple[int, str, int, dict]] | None
) -> float:
    """The baseline: one ``executemany`` of ``rows`` (or of ``decoded``, encoded in the loop)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={SYNC}")
    conn.executescript("BEGIN;" + SCHEMA + "COMMIT;")
    t0 = time.perf_counter()
    conn.execute("BEGIN")
    if decoded is not None:
        dumps = json.dumps
        rows = [(s, k, r, dumps(d, separators=(",", ":"))) for s, k, r, d in decoded]
    conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def log_stats(log: EventLog) -> None:
    if VERBOSE:
        stats = log.statistics().ledger
        assert stats is not None
        print(f"      ledger: {stats.commits} commits, largest batch {stats.largest_batch} rows")


def check(condition: bool, message: str) -> None:
    """A benchmark's integrity check: unlike ``assert``, ``python -O`` keeps it."""
    if not condition:
        raise SystemExit(f"eventlog benchmark: check failed: {message}")


async def durable_append(path: str, n: int, yield_every: int) -> tuple[float, int]:
    """``EventLog.progress`` n times, then ``flush()``; returns (seconds, first seq).

    ``max_pending_rows`` is n: the bound above which reports are coalesced (§6.19) is
    not reached, so each report must become a durable row; the caller checks the file.
    """
    config = EventLogConfig(ledger_path=path, synchronous=SYNC, window=4096, max_pending_rows=n)
    async with open_event_log(config, operations=OPS) as log:
        receipt = await log.submit("job", {"n": 0})
        log.start(receipt.run_id)
        await log.flush()
        first = log.head + 1
        progress = log.progress
        run_id = receipt.run_id
        # The inputs are made before timing, as the baseline's rows are.
        chunks = [[i / n for i in range(s, s + yield_every)] for s in range(0, n, yield_every)]
        t0 = time.perf_counter()
        for chunk in chunks:
            for fraction in chunk:
                progress(run_id, fraction)
            await trio.lowlevel.checkpoint()
        await log.flush()
        elapsed = time.perf_counter() - t0
        check(log.head == first + n - 1, f"head {log.head}, expected {first + n - 1}")
        folded = log.statistics().progress_folded
        check(folded == 0, f"{folded} progress reports were coalesced")
        log_stats(log)
    return elapsed, first


def check_durable(path: str, n: int, first: int) -> list[Row]:
    """The ledger file holds every report of :func:`durable_append`, in order."""
    rows = read_rows(path, first)
    check(len(rows) == n, f"{len(rows)} durable rows for {n} reports")
    check([seq for seq, _, _, _ in rows] == list(range(first, first + n)), "a gap in seq")
    check({kind for _, kind, _, _ in rows} == {"job_progress"}, "a row of another kind")
    fractions = [json.loads(data)["fraction"] for _, _, _, data in rows]
    check(fractions == [i / n for i in range(n)], "a fraction differs from its report")
    return rows


async def actor_append(path: str, n: int) -> float:
    """``EventLogClient.progress`` (one ask each) n times, then ``flush()``."""
    config = EventLogConfig(ledger_path=path, synchronous=SYNC, window=4096)
    async with trio.open_nursery() as nursery:
        actor = EventLogActor(config, operations=OPS)
        client = EventLogClient(await nursery.start(actor.run), timeout=60)
        receipt = await client.submit("job", {"n": 0})
        await client.start(receipt.run_id)
        progress = client.progress
        run_id = receipt.run_id
        t0 = time.perf_counter()
        for i in range(n):
            await progress(run_id, i / n)
        await actor.log.flush()
        elapsed = time.perf_counter() - t0
        log_stats(actor.log)
        await client.ref.stop(grace=5)
    return elapsed


async def ledger_append(path: str, rows: list[Row], yield_every: int) -> float:
    """``Ledger.stage_event`` of pre-encoded rows, then ``flush()``."""
    ledger = SQLiteLedger(path, synchronous=SYNC)
    await ledger.open(keep_requests=0)
    async with trio.open_nursery() as nursery:
        await nursery.start(ledger.run_writer)
        stage = ledger.stage_event
        chunks = [rows[s : s + yield_every] for s in range(0, len(rows), yield_every)]
        t0 = time.perf_counter()
        for chunk in chunks:
            for seq, kind, run_id, data in chunk:
                stage(seq, kind, run_id, data)
            await trio.lowlevel.checkpoint()
        await ledger.flush()
        elapsed = time.perf_counter() - t0
        nursery.cancel_scope.cancel()
    await ledger.close()
    return elapsed


def read_rows(path: str, first: int) -> list[Row]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT seq, kind, run_id, data FROM events WHERE seq >= ? ORDER BY seq", (first,)
        ).fetchall()
    finally:
        conn.close()


async def bench_append(tmp: str) -> tuple[float, float]:
    n = 4_000 if QUICK else 100_000
    rounds = ROUNDS
    print(f"1. durable event append, {n:,} events, WAL, synchronous={SYNC}")
    print(f"   (best of {rounds} rounds; each round runs every variant once, interleaved)")
    warm = os.path.join(tmp, "warm.db")
    _, first = await durable_append(warm, n, 1000)
    rows = check_durable(warm, n, first)  # exactly what EventLog.progress wrote
    decoded = [(s, k, r, json.loads(d)) for s, k, r, d in rows]
    n_actor = n // 10
    best: dict[str, float] = {}

    def record(name: str, elapsed: float) -> None:
        best[name] = min(best.get(name, float("inf")), elapsed)

    for r in range(rounds):
        record("raw", raw_append(os.path.join(tmp, f"raw-{r}.db"), rows, None))
        record("raw+json", raw_append(os.path.join(tmp, f"rawj-{r}.db"), rows, decoded))
        for y in (1000, 10):
            path = os.path.join(tmp, f"ledger-{y}-{r}.db")
            record(f"Ledger.stage_event (yield /{y})", await ledger_append(path, rows, y))
            check(read_rows(path, first) == rows, "Ledger.stage_event rows differ")
            path = os.path.join(tmp, f"log-{y}-{r}.db")
            elapsed, first_seq = await durable_append(path, n, y)
            record(f"EventLog.progress (yield /{y})", elapsed)
            check_durable(path, n, first_seq)
        if r < 2:  # slow: two rounds are enough
            path = os.path.join(tmp, f"actor-{r}.db")
            record("EventLogClient.progress (ask)", await actor_append(path, n_actor) * 10)
    raw = best.pop("raw")
    print(f"   raw executemany, pre-encoded rows:     {n / raw:>10,.0f} events/s  (baseline)")
    encoded = best.pop("raw+json")
    print(
        f"   raw executemany, json.dumps in loop:   {n / encoded:>10,.0f} events/s"
        f"  ratio {raw / encoded:.2f}x"
    )
    for label, elapsed in best.items():
        note = f"  ({n_actor:,} asks)" if "ask" in label else ""
        print(f"   {label:<39} {n / elapsed:>10,.0f} events/s  ratio {raw / elapsed:.2f}x{note}")
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
    n = 200 if QUICK else 10_000
    print(
        f"2. fan-out of {n} events to 100 subscribers (deliveries: {n * 100:,}, best of {ROUNDS})"
    )
    bare = ours = float("inf")
    for _ in range(ROUNDS):  # interleaved, best of ROUNDS
        bare = min(bare, await fan_out(n, 100, ports=False))
        ours = min(ours, await fan_out(n, 100, ports=True))
    print(f"   100 bare memory channels:  {n * 100 / bare:>12,.0f} deliveries/s")
    print(f"   PortHub, 100 ports:        {n * 100 / ours:>12,.0f} deliveries/s")
    ratio = bare / ours
    print(f"   ratio {ratio:.2f}x")
    return ratio


class GcPauses:
    """Records the full (generation 2) garbage collections while installed."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if info["generation"] == 2:
            if phase == "start":
                self._t0 = time.perf_counter()
            else:
                self.pauses.append(time.perf_counter() - self._t0)


def summary(
    label: str, measured: tuple[list[float], list[float]], baseline: float | None = None
) -> float:
    """Print a latency line (with its ratio to ``baseline``, seconds); return the median."""
    samples, pauses = sorted(measured[0]), measured[1]
    median = statistics.median(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    gc_note = f"  gen-2 GC pause {max(pauses) * 1e3:.0f} ms" if pauses else ""
    ratio = f"  {median / baseline:5.2f}x" if baseline else ""
    print(
        f"   {label:<44} median {median * 1e3:6.2f} ms{ratio}"
        f"   p99 {p99 * 1e3:6.2f} ms   (n={len(samples)}){gc_note}"
    )
    return median


def raw_commits(path: str, count: int) -> list[float]:
    """The floor of a durable receipt: ``count`` one-row ``sqlite3`` commits (seconds each)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={SYNC}")
    if not conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        conn.executescript("BEGIN;" + SCHEMA + "COMMIT;")
    seq = conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
    samples = []
    for i in range(seq + 1, seq + count + 1):
        t0 = time.perf_counter()
        conn.execute("BEGIN")
        conn.execute("INSERT INTO events VALUES (?, 'job_queued', ?, '{}')", (i, i))
        conn.execute("COMMIT")
        samples.append(time.perf_counter() - t0)
    conn.close()
    return samples


async def latencies(submit, count: int, concurrency: int) -> tuple[list[float], list[float]]:
    """Submit ``count`` requests from ``concurrency`` tasks; (latencies, GC pauses)."""
    samples: list[float] = []

    async def worker(w: int) -> None:
        for i in range(count // concurrency):
            t0 = time.perf_counter()
            receipt = await submit("job", {"n": 1_000_000 + w * count + i})
            samples.append(time.perf_counter() - t0)
            check(receipt.admitted, f"submit refused: {receipt}")

    pauses = GcPauses()
    gc.callbacks.append(pauses)
    try:
        async with trio.open_nursery() as nursery:
            for w in range(concurrency):
                nursery.start_soon(worker, w)
    finally:
        gc.callbacks.remove(pauses)
    return samples, pauses.pauses


async def fill(log: EventLog, inflight: int) -> None:
    async def some(start: int) -> None:
        for n in range(start, inflight, 100):
            await log.submit("job", {"n": n})

    async with trio.open_nursery() as nursery:
        for start in range(100):
            nursery.start_soon(some, start)


async def bench_latency(tmp: str) -> None:
    inflight = 1_000 if QUICK else 10_000
    count = 64 if QUICK else 1000
    print(f"3. submit -> receipt latency with {inflight:,} runs in flight (queued)")
    floor_path = os.path.join(tmp, "latency-raw.db")
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
            check(actor.log.statistics().queued == inflight, "runs in flight")
            # The floor of a durable receipt, half before and half after the lines.
            floor = raw_commits(floor_path, count // 2) if durable else []
            lines = {
                f"core, sequential ({where})": await latencies(actor.log.submit, count, 1),
                f"core, 32 concurrent ({where})": await latencies(actor.log.submit, count, 32),
                f"actor ask, sequential ({where})": await latencies(client.submit, count, 1),
                f"actor ask, 32 concurrent ({where})": await latencies(client.submit, count, 32),
            }
            await client.ref.stop(grace=5)
        if durable:
            floor += raw_commits(floor_path, count - count // 2)
            baseline = summary("floor: a raw sqlite3 one-row commit (baseline)", (floor, []))
            for label, measured in lines.items():
                summary(label, measured, baseline)
        else:  # in memory there is no floor: the ask against the core call it makes
            medians = {label: summary(label, measured) for label, measured in lines.items()}
            for kind in ("sequential", "32 concurrent"):
                ask = medians[f"actor ask, {kind} ({where})"]
                core = medians[f"core, {kind} ({where})"]
                print(f"   actor ask / core, {kind} (in memory): {ask / core:.2f}x")


def build_ledger(path: str, events: int, runs: int) -> None:
    """A ledger as a long-lived log leaves it: mostly progress events, finished runs."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript("BEGIN;" + SCHEMA + "COMMIT;")
    conn.execute("BEGIN")
    receipt = (
        '{{"admitted":true,"run_id":{0},"request_id":"r{0}","snapshot_id":"s","revision":0,'
        '"event_cursor":0,"coalesced":false}}'
    )
    conn.executemany(
        "INSERT INTO requests VALUES (?, ?, ?, ?, ?, NULL, NULL)",
        ((f"r{i}", f'"job":{{"n":{i}}}', i, receipt.format(i), i) for i in range(1, runs + 1)),
    )
    conn.executemany(
        "INSERT INTO runs VALUES (?, ?, 'job', ?, 0, 's', 'finished', 'ok', '{}', NULL, NULL,"
        " 1.0, 0, NULL)",
        ((i, f"r{i}", f'{{"n":{i}}}') for i in range(1, runs + 1)),
    )
    conn.executemany(
        "INSERT INTO events VALUES (?, 'job_progress', ?, ?)",
        ((seq, seq % runs + 1, f'{{"fraction":{seq / events!r}}}') for seq in range(1, events + 1)),
    )
    conn.execute("INSERT INTO meta VALUES ('session', 'closed bench')")
    conn.execute("COMMIT")
    conn.close()


async def open_time(path: str) -> float:
    t0 = time.perf_counter()
    async with open_event_log(EventLogConfig(ledger_path=path), operations=OPS) as log:
        elapsed = time.perf_counter() - t0
        check(log.head > 0, "an empty ledger")
    return elapsed


def quick_check(path: str) -> float:
    """The floor of an open: a bare read-only ``PRAGMA quick_check`` of ``path`` (seconds)."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
    finally:
        conn.close()
    check(problems == ["ok"], f"quick_check of {path}: {problems[:3]}")
    return time.perf_counter() - t0


async def bench_open(tmp: str) -> None:
    events, runs = (10_000, 1_000) if QUICK else (1_000_000, 10_000)
    print(f"4. opening a ledger of {events:,} events and {runs:,} runs (best of {REPEAT})")
    path = os.path.join(tmp, "open.db")
    build_ledger(path, events, runs)
    size = os.path.getsize(path)  # noqa: ASYNC240  (timing code, outside the timed part)
    floor = clean = float("inf")
    for _ in range(REPEAT):  # interleaved with its floor
        floor = min(floor, quick_check(path))
        clean = min(clean, await open_time(path))
    print(f"   floor: PRAGMA quick_check ({size / 1e6:.0f} MB):{floor * 1e3:>7.0f} ms  (baseline)")
    print(f"   after a clean close:{clean * 1e3:>20.0f} ms  {clean / floor:.2f}x")
    crash = os.path.join(tmp, "crash")
    os.mkdir(crash)
    async with open_event_log(EventLogConfig(ledger_path=path), operations=OPS) as log:
        for n in range(200 if QUICK else 2000):  # committed frames only the log holds
            await log.submit("job", {"n": n})
        for copy in ("open", "floor"):
            for suffix in ("", "-wal"):
                shutil.copy(path + suffix, os.path.join(crash, f"{copy}.db{suffix}"))
        wal = os.path.getsize(path + "-wal")  # noqa: ASYNC240
    # Each image is used once (an open checkpoints its log): the floor reads its own copy.
    floor = quick_check(os.path.join(crash, "floor.db"))
    after_crash = await open_time(os.path.join(crash, "open.db"))
    print(
        f"   floor: PRAGMA quick_check, {wal / 1e6:.1f} MB of log:{floor * 1e3:>5.0f} ms"
        "  (baseline)"
    )
    print(f"   after a crash:{after_crash * 1e3:>26.0f} ms  {after_crash / floor:.2f}x")


async def main() -> None:
    # Each section starts with a full garbage collection, so that no section pays for
    # the garbage of the one before (a gen-2 collection here takes tens of ms).
    if QUICK:
        print("quick: a smoke run, small sizes and few rounds; quote a full run")
    with tempfile.TemporaryDirectory() as tmp:
        gc.collect()
        ledger_ratio, append = await bench_append(tmp)
        gc.collect()
        fanout = await bench_fanout()
        gc.collect()
        await bench_latency(tmp)
        gc.collect()
        await bench_open(tmp)
    print()
    print(
        f"ratios: durable append {ledger_ratio:.2f}x through Ledger.stage_event, {append:.2f}x"
        f" through EventLog.progress (target >= 0.5); fan-out {fanout:.2f}x (target >= 0.5)"
    )


if __name__ == "__main__":
    trio.run(main)
