"""One worker process of ``benchmarks/cluster.py``: a cluster node, or a PgQueuer consumer.

Usage: ``python benchmarks/cluster_helper.py {node,pgqueuer} URL CONCURRENCY``

The parent drives it over stdin/stdout, one line each way, so that process start and
imports stay outside what is measured:

1. it imports everything, then prints ``ready``;
2. on the line ``go`` it connects and starts taking jobs: a cluster node opens an event
   log (``EventLogConfig(cluster=True)``) whose runner of ``noop`` returns at once; a
   PgQueuer consumer runs a ``QueueManager`` whose entrypoint ``noop`` returns at once.
   Each prints ``started`` once it takes jobs (for a node: its log is open, its drain
   claims);
3. on SIGTERM it stops, then prints one JSON line: ``{"starts": {job: time.time()}}``,
   the wall-clock second at which the runner (entrypoint) of each job began, keyed by the
   job's ``i`` argument (payload), which the parent turns into claim latencies.
"""

from __future__ import annotations

import importlib
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: import the repository's packages

#: The operation (entrypoint) of the benchmark's trivial jobs.
NOOP = "noop"


def run_node(url: str, concurrency: int) -> dict[int, float]:
    """A cluster node on ``url`` with a runner of ``noop``, until SIGTERM."""
    import trio

    from actors import EventLogConfig, OperationSpec, RunStatus, open_event_log

    # The ledger imports psycopg when it opens: imported here, outside the timed part.
    importlib.import_module("psycopg")
    print("ready", flush=True)
    starts: dict[int, float] = {}

    async def noop(run: RunStatus, report: Any) -> None:
        starts[run.arguments["i"]] = time.time()

    async def main() -> None:
        with trio.open_signal_receiver(signal.SIGTERM) as signals:
            await trio.to_thread.run_sync(sys.stdin.readline)
            config = EventLogConfig(
                ledger_path=url, cluster=True, max_concurrency=concurrency, max_inflight=10**6
            )
            spec = OperationSpec(name=NOOP, fields={"i"}, required={"i"})
            async with open_event_log(config, operations=[spec], runners={NOOP: noop}):
                print("started", flush=True)
                async for _ in signals:
                    break

    trio.run(main)
    return starts


def run_pgqueuer(url: str, concurrency: int) -> dict[int, float]:
    """A PgQueuer consumer on ``url`` with an entrypoint ``noop``, until SIGTERM."""
    import asyncio

    import psycopg
    from pgqueuer import Job, PsycopgDriver, Queries, QueueManager

    print("ready", flush=True)
    starts: dict[int, float] = {}

    async def main() -> None:
        await asyncio.to_thread(sys.stdin.readline)
        connection = await psycopg.AsyncConnection.connect(url, autocommit=True)
        async with connection:
            manager = QueueManager(Queries(PsycopgDriver(connection)))

            @manager.entrypoint(NOOP)
            async def noop(job: Job) -> None:
                assert job.payload is not None
                starts[int(job.payload)] = time.time()

            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, manager.shutdown.set)
            print("started", flush=True)
            # Its default dequeue batch; the cap is the node's max_concurrency.
            await manager.run(batch_size=max(1, concurrency // 2), max_concurrent_tasks=concurrency)

    asyncio.run(main())
    return starts


if __name__ == "__main__":
    kind, url, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it, with SIGTERM
    run = run_node if kind == "node" else run_pgqueuer
    found = run(url, concurrency)
    print(json.dumps({"starts": found}), flush=True)
