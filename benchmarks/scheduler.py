"""Benchmark of the scheduler core (design §4.3, §4.11): claim cost and memory per run.

Run: ``python benchmarks/scheduler.py [--quick]`` (about a minute; ``--quick``: a smoke
run at 1 000, 2 000 and 5 000 runs, one repetition, a few seconds). The runs have five declared
kinds forming a DAG (:data:`KINDS`: a source read, three kinds that need it, and a
report that needs two of those). Prints:

* claim + complete cost per item at 1 000, 10 000 and 100 000 runs x 5 kinds, with no
  priorities and with a moving viewport (a new selected run and 20 visible runs every
  50 claims, within the first 1 000 runs); target: the cost per item at 100 000 runs is
  at most 1.5x the cost at 1 000 runs (claims never scan the run table);
* scheduler state memory per run at 100 000 runs (``tracemalloc``); target < 1 KiB.

Figures are ratios within one run of this script, so the machine's speed cancels out.
Costs are process CPU time (other processes on a busy machine count less), sizes are
interleaved, and the best of several repetitions is kept for each size.
"""

from __future__ import annotations

import gc
import hashlib
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors import Kind, RunInfo, Scheduler, SchedulerConfig

QUICK = "--quick" in sys.argv
SIZES = (1_000, 2_000, 5_000) if QUICK else (1_000, 10_000, 100_000)
REPEAT = 1 if QUICK else 5
#: Five kinds: read -> summary, thumb, preview; report needs summary and thumb.
KINDS = (
    Kind(name="read", helper=True, progressive=True),
    Kind(name="summary", needs=("read",)),
    Kind(name="thumb", needs=("read",), cached=True),
    Kind(name="preview", needs=("read",), cached=True),
    Kind(name="report", needs=("summary", "thumb")),
)
CONFIG = SchedulerConfig(workers=1, kinds=KINDS)


def make_runs(n: int) -> list[RunInfo]:
    """Runs with realistic ids: a 36-character GUID and a 16-hex-digit revision."""
    runs = []
    for i in range(n):
        digest = hashlib.blake2b(i.to_bytes(8, "big"), digest_size=16).hexdigest()
        guid = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
        runs.append(RunInfo(run_id=i + 1, guid=guid, revision=digest[:16]))
    return runs


def drain(s: Scheduler, *, viewport: bool) -> int:
    claim_ = s.claim
    complete = s.complete
    items = 0
    now = 0.0
    while True:
        if viewport and items % 50 == 0:
            # The viewport moves over the first 1 000 runs at every size, so the mix of
            # foreground and remaining work is the same and only the table size differs.
            start = (items * 37) % 1000
            s.set_priority(start + 1, [(start + k) % 1000 + 1 for k in range(1, 21)])
        claim = claim_(now)
        if claim is None:
            return items
        complete(claim.claim_id, None, now=now)
        items += 1
        now += 1e-6


def per_item_costs(*, viewport: bool, repeat: int) -> dict[int, float]:
    """Best CPU seconds per claim + complete, per size; sizes interleaved."""
    tables = {n: make_runs(n) for n in SIZES}
    best = dict.fromkeys(SIZES, float("inf"))
    for _ in range(repeat):
        for n in SIZES:
            s = Scheduler(tables[n], source="bench", config=CONFIG)
            gc.collect()
            start = time.process_time()
            items = drain(s, viewport=viewport)
            elapsed = time.process_time() - start
            assert items == len(KINDS) * n, items
            best[n] = min(best[n], elapsed / items)
            del s
    return best


def memory_per_run(n: int) -> tuple[float, float]:
    """Bytes per run: (scheduler structures only, including the runs' id strings)."""
    gc.collect()
    runs = make_runs(n)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    s = Scheduler(runs, source="bench", config=CONFIG)
    structures = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del s, runs
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    s = Scheduler(make_runs(n), source="bench", config=CONFIG)
    gc.collect()
    with_strings = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del s
    return structures / n, with_strings / n


def main() -> None:
    if QUICK:
        print("quick: smaller sizes, fewer repetitions, noisier; quote a full run")
    print(f"Python {sys.version.split()[0]}; scheduler core, K = 1, {len(KINDS)}-kind DAG per run")
    print()
    for viewport in (False, True):
        label = "moving viewport" if viewport else "no priorities"
        costs = per_item_costs(viewport=viewport, repeat=REPEAT)
        print(f"claim + complete, {label}:")
        for n in SIZES:
            ratio = costs[n] / costs[SIZES[0]]
            print(
                f"  {n:>7} runs x {len(KINDS)} kinds: {costs[n] * 1e6:6.2f} us/item"
                f"  ({ratio:.2f}x of 1 000)"
            )
        verdict = "OK" if costs[SIZES[-1]] <= 1.5 * costs[SIZES[0]] else "MISSED"
        print(f"  target {SIZES[-1]:,} <= 1.5x {SIZES[0]:,}: {verdict}".replace(",", " "))
        print()
    structures, with_strings = memory_per_run(SIZES[-1])
    print(f"scheduler state memory at {SIZES[-1]:,} runs (tracemalloc):".replace(",", " "))
    print(f"  structures only:            {structures:7.1f} bytes/run")
    print(f"  with GUID/revision strings: {with_strings:7.1f} bytes/run")
    verdict = "OK" if with_strings < 1024 else "MISSED"
    print(f"  target < 1 KiB per run: {verdict}")


if __name__ == "__main__":
    main()
