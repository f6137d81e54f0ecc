"""Claim-and-finish throughput of a cluster on one PostgreSQL ledger, against PgQueuer.

Usage: ``python benchmarks/cluster.py [--quick]`` (``--quick``: a smoke run of every
line, a few seconds, its figures noise; quote a full run, about a minute).

It starts a throwaway PostgreSQL server (``tests/pg_support.PostgresServer``: a temporary
data directory, a Unix socket, ``fsync=off``) and measures, on that one server, with its
one ``synchronous_commit`` setting (printed), each line in a fresh schema:

* **ours, 1 node / 3 nodes**: ``N`` trivial jobs (a runner that returns at once) are
  submitted through the public API (a cluster ``EventLog`` of this process, with no
  runner, so it claims nothing) and committed; then 1 or 3 node *processes*
  (``cluster_helper.py node``: ``open_event_log(EventLogConfig(cluster=True), runners=...)``,
  ``max_concurrency`` = :data:`CONCURRENCY`), started and imported beforehand, are told
  to go at once, and the line is timed from that moment until no run is queued or
  running in the ledger: each node opens its log, claims (``FOR UPDATE SKIP LOCKED``),
  runs and records each finish (conditional on its ownership, with its ordered, dense
  events). Every run is then checked to have finished ``ok``, and each exactly once.
* **PgQueuer, 1 / 3 consumers**: the same ``N`` jobs enqueued by PgQueuer (one batch
  ``enqueue``) into its own tables in a fresh schema, then 1 or 3 consumer processes
  (``cluster_helper.py pgqueuer``: a ``QueueManager`` on a psycopg ``AsyncConnection``
  in its own asyncio loop, ``batch_size`` = :data:`CONCURRENCY` / 2, its default 10, and
  ``max_concurrent_tasks`` = :data:`CONCURRENCY`), timed the same way until its queue
  table is empty.

Each line gives two rates: **from the go** (all ``N`` jobs over the time from the go to
an empty queue, so with the workers' start: connecting, a node opening its log) and
**steady** (the jobs done between the polls that saw 10 % and 90 % of them done, over
that time: claiming and finishing alone). Targets, on the steady rates: ours >= 1.0x
PgQueuer's jobs/s, for 1 node against 1 consumer and for 3 against 3. Each line's figure
is the median over :data:`ROUNDS` rounds, the four lines interleaved in each round
(their order rotating).

**Claim latency**, after each round's drain, with the same workers idle: ``L`` jobs
submitted one at a time, one every 20 ms (an idle cluster, not a backlog); a job's
latency is from its submit's return (the receipt: committed) to its runner's start in a
node process (wall clocks of one machine). Goal: p50 <= 5 ms, p99 <= 20 ms. PgQueuer's,
measured the same way (from ``enqueue``'s return to its entrypoint's start), for
reference.

**Connections per node**: ``pg_stat_activity`` rows by ``application_name``
(``trio-actors <node> <role>``), sampled while the nodes drain; the most any node held.
Target: <= 5.

Without PostgreSQL's binaries, psycopg or PgQueuer, it prints why and exits 0, except
in CI (``CI=true``), where that is a failure (exit 1), as for the PostgreSQL tests.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: import the repository's packages
sys.path.insert(0, str(ROOT / "tests"))  # pg_support: the throwaway PostgreSQL server

if TYPE_CHECKING:
    from pg_support import PostgresServer

QUICK = "--quick" in sys.argv
#: Interleaved rounds; jobs per throughput line; jobs of a latency line.
ROUNDS, JOBS, LATENCY_JOBS = (1, 100, 10) if QUICK else (3, 2000, 100)
#: Jobs a worker runs at once: a node's ``max_concurrency``, PgQueuer's task cap.
CONCURRENCY = 20
#: The steady part of a drain: from this share of the jobs done to this share left.
STEADY = 0.1
#: Seconds between two jobs of the latency line.
SPACING = 0.02
#: Seconds a line may take before the benchmark gives up (a hang, not a figure).
TIMEOUT = 120.0
HELPER = ROOT / "benchmarks" / "cluster_helper.py"
NOOP = "noop"


def missing() -> str | None:
    """Why the benchmark cannot run here, or None."""
    for module, hint in (("psycopg", "the postgresql extra"), ("pgqueuer", "pip install pgqueuer")):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed ({hint})"
    try:
        from pg_support import find_binaries
    except ImportError as exc:  # it needs pytest, which the test extra installs
        return f"tests/pg_support.py cannot be imported: {exc}"
    if find_binaries() is None:
        return "PostgreSQL is not installed (apt-get install postgresql)"
    return None


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    from pg_support import committed

    return committed(url, sql)


class Workers:
    """``count`` helper processes of ``kind`` on ``url``, started and imported, not yet
    taking jobs; :meth:`go` starts them at once, :meth:`stop` ends them and returns the
    start time of each job they ran."""

    def __init__(self, kind: str, url: str, count: int) -> None:
        self.processes = [
            subprocess.Popen(
                [sys.executable, str(HELPER), kind, url, str(CONCURRENCY)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
            for _ in range(count)
        ]
        for process in self.processes:
            self._expect(process, "ready")

    @staticmethod
    def _expect(process: subprocess.Popen[str], word: str) -> None:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if line != word:
            raise SystemExit(f"cluster benchmark: a worker said {line!r}, not {word!r}")

    def go(self) -> None:
        for process in self.processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()

    def wait_started(self) -> None:
        for process in self.processes:
            self._expect(process, "started")

    def stop(self) -> dict[int, list[float]]:
        starts: dict[int, list[float]] = {}
        for process in self.processes:
            process.send_signal(signal.SIGTERM)
        for process in self.processes:
            assert process.stdout is not None
            output = process.stdout.read()
            process.wait(timeout=TIMEOUT)
            found = json.loads(output.strip().splitlines()[-1])["starts"]
            for job, at in found.items():
                starts.setdefault(int(job), []).append(at)
        return starts

    def kill(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    stream.close()


def drain(url: str, workers: Workers, remaining_sql: str) -> tuple[float, float, int]:
    """Tell ``workers`` to go; (jobs/s from the go to the end, jobs/s in the steady part,
    the most connections any node held meanwhile).

    The steady part is from the poll that first saw :data:`STEADY` of the jobs left
    undone to the one that first saw that share or less left: the workers' start
    (connecting, opening, the first claims) and the last stragglers are outside it, the
    same for every line."""
    import psycopg

    connections = 0
    samples: list[tuple[float, int]] = []
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        workers.go()
        polls = 0
        while True:
            ((remaining,),) = conn.execute(remaining_sql.encode()).fetchall()
            elapsed = time.perf_counter() - started
            samples.append((elapsed, remaining))
            if remaining == 0:
                break
            if elapsed > TIMEOUT:
                raise SystemExit(f"cluster benchmark: {remaining} jobs left after {TIMEOUT:g} s")
            if polls % 10 == 0:
                per_node: dict[str, int] = {}
                for (name,) in conn.execute(
                    b"SELECT application_name FROM pg_stat_activity"
                    b" WHERE application_name LIKE 'trio-actors node-%'"
                ).fetchall():
                    node = name.split()[1]
                    per_node[node] = per_node.get(node, 0) + 1
                connections = max([connections, *per_node.values()])
            polls += 1
            time.sleep(0.005)  # another process's progress: the database is all there is
    total = samples[0][1] if samples[0][1] else JOBS
    first = next((t, r) for t, r in samples if r <= total * (1 - STEADY))
    last = next((t, r) for t, r in samples if r <= total * STEADY)
    steady = (first[1] - last[1]) / (last[0] - first[0]) if last[0] > first[0] else JOBS / elapsed
    return JOBS / elapsed, steady, connections


# -- ours ---------------------------------------------------------------------------------


def _config(url: str) -> Any:
    from actors import EventLogConfig

    return EventLogConfig(ledger_path=url, cluster=True, max_inflight=10**6)


def _spec() -> Any:
    from actors import OperationSpec

    return OperationSpec(name=NOOP, fields={"i"}, required={"i"})


async def submit_all(url: str, jobs: range, spacing: float | None) -> dict[int, float]:
    """Submit ``jobs`` through a cluster node with no runner; the wall-clock time each
    receipt came back. ``spacing`` None: 64 submitters at once; else one by one."""
    import trio

    from actors import open_event_log

    returned: dict[int, float] = {}
    async with open_event_log(_config(url), operations=[_spec()]) as log:

        async def submit(i: int) -> None:
            receipt = await log.submit(NOOP, {"i": i}, f"job-{i}")
            returned[i] = time.time()
            if not receipt.admitted:
                raise SystemExit(f"cluster benchmark: job {i} refused: {receipt.code}")

        if spacing is None:
            async with trio.open_nursery() as nursery:
                limit = trio.CapacityLimiter(64)
                for i in jobs:

                    async def one(i: int = i) -> None:
                        async with limit:
                            await submit(i)

                    nursery.start_soon(one)
        else:
            for i in jobs:
                await submit(i)
                await trio.sleep(spacing)
    return returned


def ours(server: PostgresServer, nodes: int) -> tuple[float, float, int, list[float]]:
    """(jobs/s from the go, steady jobs/s, most connections of a node, claim latencies
    in seconds)."""
    import trio

    url = server.fresh_url()
    trio.run(submit_all, url, range(JOBS), None)
    workers = Workers("node", url, nodes)
    try:
        jobs_s, steady, connections = drain(
            url, workers, "SELECT count(*) FROM cluster_runs WHERE state IN ('queued', 'running')"
        )
        workers.wait_started()
        returned = trio.run(submit_all, url, range(JOBS, JOBS + LATENCY_JOBS), SPACING)
        wait_empty(url, "SELECT count(*) FROM cluster_runs WHERE state IN ('queued', 'running')")
        starts = workers.stop()
    finally:
        workers.kill()
    total = JOBS + LATENCY_JOBS
    check(sorted(starts) == list(range(total)), "every job ran")
    check(all(len(at) == 1 for at in starts.values()), "no job ran twice")
    check(
        query(url, "SELECT count(*) FROM cluster_runs WHERE verdict = 'ok'") == [(total,)],
        "every run finished ok",
    )
    latencies = [starts[i][0] - returned[i] for i in returned]
    return jobs_s, steady, connections, latencies


# -- PgQueuer -----------------------------------------------------------------------------


async def enqueue(url: str, jobs: range, spacing: float | None) -> dict[int, float]:
    """Enqueue ``jobs`` with PgQueuer (installing its tables first when ``spacing`` is
    None: one batch ``enqueue``; else one by one); the time each ``enqueue`` returned."""
    import psycopg
    from pgqueuer import PsycopgDriver, Queries

    returned: dict[int, float] = {}
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        queries = Queries(PsycopgDriver(connection))
        if spacing is None:
            await queries.install()
            await queries.enqueue(
                [NOOP] * len(jobs), [str(i).encode() for i in jobs], [0] * len(jobs)
            )
            return returned
        for i in jobs:
            await queries.enqueue(NOOP, str(i).encode())
            returned[i] = time.time()
            await asyncio.sleep(spacing)
    return returned


def theirs(server: PostgresServer, consumers: int) -> tuple[float, float, list[float]]:
    """(jobs/s from the go, steady jobs/s, claim latencies in seconds)."""
    url = server.fresh_url()
    asyncio.run(enqueue(url, range(JOBS), None))
    workers = Workers("pgqueuer", url, consumers)
    try:
        jobs_s, steady, _ = drain(url, workers, "SELECT count(*) FROM pgqueuer")
        workers.wait_started()
        returned = asyncio.run(enqueue(url, range(JOBS, JOBS + LATENCY_JOBS), SPACING))
        wait_empty(url, "SELECT count(*) FROM pgqueuer")
        starts = workers.stop()
    finally:
        workers.kill()
    check(sorted(starts) == list(range(JOBS + LATENCY_JOBS)), "every PgQueuer job ran")
    check(all(len(at) == 1 for at in starts.values()), "no PgQueuer job ran twice")
    latencies = [starts[i][0] - returned[i] for i in returned]
    return jobs_s, steady, latencies


# -- the report ---------------------------------------------------------------------------


def wait_empty(url: str, sql: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while query(url, sql) != [(0,)]:
        if time.monotonic() > deadline:
            raise SystemExit("cluster benchmark: the latency jobs did not finish")
        time.sleep(0.02)  # other processes' work: the database is all there is to read


def check(condition: bool, message: str) -> None:
    """A benchmark's integrity check: unlike ``assert``, ``python -O`` keeps it."""
    if not condition:
        raise SystemExit(f"cluster benchmark: check failed: {message}")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISS"


def main() -> None:
    reason = missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            raise SystemExit(f"cluster benchmark: {reason}; CI must run it")
        print(f"cluster benchmark skipped: {reason}")
        return
    from pg_support import PostgresServer, find_binaries

    binaries = find_binaries()
    assert binaries is not None
    server = PostgresServer(binaries)
    try:
        server.start()
        report(server)
    finally:
        server.close()


def report(server: PostgresServer) -> None:
    import pgqueuer

    (setting,) = server.admin("SHOW synchronous_commit")[0]
    (fsync,) = server.admin("SHOW fsync")[0]
    print(
        f"cluster benchmark: {JOBS} trivial jobs per line, {ROUNDS} rounds, {CONCURRENCY}"
        f" jobs at once per worker; PostgreSQL synchronous_commit={setting}, fsync={fsync};"
        f" PgQueuer {pgqueuer.__version__}; load {os.getloadavg()[0]:.2f}"
    )
    rate: dict[str, list[float]] = {"ours 1": [], "ours 3": [], "pgq 1": [], "pgq 3": []}
    steady_rate: dict[str, list[float]] = {key: [] for key in rate}
    latency: dict[str, list[float]] = {key: [] for key in rate}
    connections = 0
    for round_ in range(ROUNDS):
        lines = list(rate)
        lines = lines[round_ % 4 :] + lines[: round_ % 4]
        for line in lines:
            kind, count = line.split()
            if kind == "ours":
                jobs_s, steady, held, waits = ours(server, int(count))
                connections = max(connections, held)
            else:
                jobs_s, steady, waits = theirs(server, int(count))
            rate[line].append(jobs_s)
            steady_rate[line].append(steady)
            latency[line] += waits
            print(
                f"  round {round_ + 1}: {line}: {jobs_s:8.0f} jobs/s from the go,"
                f" {steady:8.0f} steady"
            )
    median = {line: statistics.median(values) for line, values in rate.items()}
    steady_median = {line: statistics.median(values) for line, values in steady_rate.items()}
    names = {"ours 1": "ours, 1 node", "ours 3": "ours, 3 nodes",
             "pgq 1": "PgQueuer, 1 consumer", "pgq 3": "PgQueuer, 3 consumers"}  # fmt: skip
    print(
        "claim-and-finish throughput (median jobs/s: steady, from the go)"
        " and claim latency (ms, p50 / p99):"
    )
    for line, name in names.items():
        p50, p99 = (1000 * percentile(latency[line], p) for p in (50, 99))
        print(
            f"  {name:24} {steady_median[line]:8.0f} / {median[line]:8.0f} jobs/s"
            f"   claim {p50:6.2f} / {p99:6.2f} ms"
        )
    for nodes in ("1", "3"):
        ratio = steady_median[f"ours {nodes}"] / steady_median[f"pgq {nodes}"]
        whole = median[f"ours {nodes}"] / median[f"pgq {nodes}"]
        print(
            f"ours / PgQueuer, {nodes} worker(s): {ratio:.2f}x steady"
            f" (target >= 1.00x: {verdict(ratio >= 1.0)}); {whole:.2f}x from the go"
        )
    print(f"ours 3 nodes / 1 node: {median['ours 3'] / median['ours 1']:.2f}x (for reference)")
    ours_latency = latency["ours 1"] + latency["ours 3"]
    p50, p99 = (1000 * percentile(ours_latency, p) for p in (50, 99))
    print(
        f"claim latency, ours: p50 {p50:.2f} ms (goal <= 5: {verdict(p50 <= 5)}),"
        f" p99 {p99:.2f} ms (goal <= 20: {verdict(p99 <= 20)})"
    )
    print(
        f"connections per node, most held: {connections} (target <= 5: {verdict(connections <= 5)})"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
