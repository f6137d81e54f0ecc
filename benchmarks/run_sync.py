"""Per-call cost of ``run_sync`` against trio-parallel and the named-handler path.

Run from the repository root: ``python benchmarks/run_sync.py [--quick]`` (``--quick``:
3 rounds of 100 calls, pinned only, a smoke run of a few seconds; quote a full run,
about 30 s). trio-parallel is optional
(``pip install -e '.[bench]'``); without it that comparison prints a SKIP line.

What is measured (targets in brackets): one call of the same small module-level function
(``square(i)``, an int in, an int out), one after the other, in three ways:

* ``HelperPool.run_sync(square, i)`` — by reference (design §3.14); an int argument
  and result are plain values, which travel as JSON; for reference, also
  ``run_sync(square, x=i)``, whose keyword makes both sides pickle (the cost of any
  other argument type);
* ``trio_parallel.run_sync(square, i)`` in a worker context of its own (one worker
  process, warmed) [run_sync <= 0.3x trio-parallel];
* ``HelperPool.run_job("square", i)`` — the named-handler path, JSON payloads, on the
  **same pool** as run_sync [run_sync <= 1.2x the named handler].

Each figure is the median over rounds of the per-call mean of a round; the rounds of
the three ways are interleaved, each round with fresh processes (one process can be
lastingly faster than another of the same program), so all see the same machine load.

The house method (``benchmarks/supervisor.py``): the **verdict is pinned** — this
process and every child on one CPU (``os.sched_setaffinity``; the children inherit it),
so each call is the same sequence of work and context switches — and is given twice:
in **wall time** per call (what a caller waits), and in **CPU time of this process plus
the child** per call (``time.process_time`` and Linux ``/proc/PID/schedstat``: all the
work a call costs, which load from other programs inflates less than wall time). The
CPU time of this process alone is printed for reference, and the unpinned wall times
last (on a 2-vCPU VM they swing with where the kernel runs the two ends).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: import the repository's packages
sys.path.insert(0, str(Path(__file__).resolve().parent))  # run_sync_helper

import trio  # noqa: E402
from measure import Figures  # noqa: E402
from run_sync_helper import square  # noqa: E402

from actors import HelperSpec, open_helper_pool  # noqa: E402

try:
    import trio_parallel
except ImportError:  # optional: the "bench" extra
    trio_parallel = None

#: Children get bytecode caching back, as in ``benchmarks/supervisor.py``.
CHILD_ENV = {"PYTHONDONTWRITEBYTECODE": ""}
SPEC = HelperSpec(entry="run_sync_helper:main", env=CHILD_ENV, name="bench")
QUICK = "--quick" in sys.argv
ROUNDS = 3 if QUICK else 11
CALLS = 100 if QUICK else 1000
#: The targets: run_sync per call at most these times the named handler / trio-parallel.
NAMED_TARGET = 1.2
PARALLEL_TARGET = 0.3
NAMES = ("run_sync", "pickled", "named", "trio_parallel")


def verdict(value: float, target: float) -> str:
    """``OK`` or ``MISS``: every target line says plainly whether it was met."""
    return "OK" if value <= target else "MISS"


async def bench() -> dict[str, Figures]:
    """Interleaved rounds of the three ways, fresh processes each round."""
    figures = {name: Figures(CALLS) for name in NAMES}
    for round_ in range(ROUNDS):
        async with open_helper_pool(SPEC) as pool:
            helper = pool.snapshot().helpers[0].pid
            assert helper is not None

            async def by_reference() -> None:
                for i in range(CALLS):
                    await pool.run_sync(square, i)

            async def pickled() -> None:
                for i in range(CALLS):
                    await pool.run_sync(square, x=i)

            async def by_name() -> None:
                for i in range(CALLS):
                    await pool.run_job("square", i)

            await by_reference()  # warm: the helper imports run_sync_helper's module
            await by_name()
            ways = [("run_sync", by_reference), ("named", by_name), ("pickled", pickled)]
            shift = round_ % len(ways)  # each way goes first in turn: no order bias
            for name, run in ways[shift:] + ways[:shift]:
                await figures[name].measure(run, helper)
            if trio_parallel is not None:
                async with trio_parallel.open_worker_context() as context:
                    worker = await context.run_sync(os.getpid)  # warm: one worker

                    async def by_trio_parallel() -> None:
                        for i in range(CALLS):
                            await context.run_sync(square, i)

                    await by_trio_parallel()
                    await figures["trio_parallel"].measure(by_trio_parallel, worker)
                    assert await context.run_sync(os.getpid) == worker  # one worker
    return figures


def report(label: str, figures: dict[str, Figures], *, pinned: bool) -> None:
    us = 1e6
    kinds = ("wall", "total") if pinned else ("wall",)
    for kind in kinds:
        value = {name: f.median(kind) for name, f in figures.items()}
        what = "wall time" if kind == "wall" else "CPU time, this process + the child"
        named = value["run_sync"] / value["named"]
        line = (
            f"{label}, {what}: run_sync {value['run_sync'] * us:.1f} us | named handler "
            f"{value['named'] * us:.1f} us -> run_sync {named:.2f}x named "
            f"(target <= {NAMED_TARGET}x: {verdict(named, NAMED_TARGET)})"
        )
        if trio_parallel is None:
            print(line)
            print(f"  SKIP trio-parallel comparison ({what}): trio-parallel is not installed")
        else:
            parallel = value["run_sync"] / value["trio_parallel"]
            print(
                f"{line} | trio-parallel {value['trio_parallel'] * us:.1f} us -> run_sync "
                f"{parallel:.2f}x trio-parallel "
                f"(target <= {PARALLEL_TARGET}x: {verdict(parallel, PARALLEL_TARGET)})"
            )
    for kind in kinds:
        value = {name: f.median(kind) for name, f in figures.items()}
        print(
            f"  for reference, run_sync with pickled arguments and result ({kind}): "
            f"{value['pickled'] * us:.1f} us = {value['pickled'] / value['named']:.2f}x named"
        )
    if pinned:
        cpu = {name: f.median("cpu") for name, f in figures.items()}
        shown = " | ".join(
            f"{name} {cpu[name] * us:.1f} us" for name in NAMES if not math.isnan(cpu[name])
        )
        print(f"  for reference, CPU time of this process alone: {shown}")


async def main() -> None:
    mode = "quick: fewer rounds, noisier; quote a full run" if QUICK else "full"
    print(f"run_sync benchmarks ({mode}; medians of {ROUNDS} rounds of {CALLS} calls)")
    if trio_parallel is None:
        print("SKIP trio-parallel: not installed (pip install -e '.[bench]')")
    if hasattr(os, "sched_setaffinity"):
        everywhere = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {min(everywhere)})  # children inherit it
        try:
            pinned = await bench()
        finally:
            os.sched_setaffinity(0, everywhere)
        report(f"pinned to CPU {min(everywhere)}", pinned, pinned=True)
        if not QUICK:
            report("unpinned (not the verdict)", await bench(), pinned=False)
    else:  # no CPU affinity here (not Linux)
        report("not pinned (no CPU affinity here)", await bench(), pinned=True)


if __name__ == "__main__":
    trio.run(main)
