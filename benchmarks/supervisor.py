"""Benchmarks of the helper supervisor (design §3), as ratios against same-run baselines.

Run from the repository root: ``python benchmarks/supervisor.py [--quick]`` (``--quick``:
fewer rounds, a smoke run; the figures to quote come from a full run, about 10 s).

What is measured, exactly (issue 3 targets in brackets):

1. **Round trip** of one small job (``echo`` of an int) vs. a **raw echo**: a bare
   Python child (``python -c RAW_ECHO``) that reads length-prefixed frames from its stdin
   pipe and writes them back unchanged, driven from trio with ``send_all`` /
   ``receive_some`` over the same kind of pipes, with frames of the same size as a job
   frame. Measured: the pool (``HelperPool.run_job``) [<= 1.5x] and the supervisor
   actor (``PoolHandle.run_job``: ask → mailbox → job task → pool). Also printed,
   for reference: an **envelope echo**, the raw echo (same trio streams) plus the
   envelope codec on both sides (the child decodes and fences the job and encodes a
   reply; the parent encodes the job and decodes and fences the reply), with no
   supervision at all. The pool can beat it: its pipe I/O takes one pass of trio's run
   loop per job where ``send_all`` + ``receive_some`` take two.

   Measured twice. **Pinned** (the verdict): this process and every child on one CPU
   (``os.sched_setaffinity``), so each round trip is the same sequence of work and
   context switches and the ratio is the cost the supervisor adds per job; rounds agree
   within a few per cent. **Unpinned** (printed with the spread of per-round ratios):
   on this 2-vCPU VM a round's raw echo takes anywhere from 10 to 80 us depending on
   whether the kernel happens to run both ends on one CPU or must wake the other, so
   that ratio swings from run to run by more than the supervisor costs.
2. **Spawn-to-ready** of a helper (``open_process`` in a new session, interpreter start,
   bootstrap, ``actors.helper`` and its imports, startup frame → ready frame) vs. a
   **bare** ``trio.run_process([python, "-c", "pass"])`` of the same interpreter, same
   environment and same site-packages (it includes the exit and reaping, which
   spawn-to-ready does not) [<= 1.2x]. Also printed, as a stricter baseline without
   the exit: spawn-to-first-byte of a bare interpreter (new session, it writes one
   byte to its stdout pipe as soon as it runs ``-c``). All run with bytecode caching
   on (the ``PYTHONDONTWRITEBYTECODE`` of the parent is cleared for the children, and
   the cache is warmed first): with it off and no ``__pycache__`` yet, every helper spawn
   would also compile the helper library from source (about 10 ms here), a cost of
   the environment rather than of the helper. Also printed, as a floor: the bare
   interpreter importing just the standard modules the helper library needs (``json``,
   ``select``, ``struct``) and, as it stands, ``typing`` (imported by ``protocol.errors``).
3. **Cancel-to-reaped** for a cooperative helper: a running job is cancelled by closing
   the pool; time until the helper is reaped (cancel frame → ``cancelled`` reply →
   shutdown frame → exit → reaped) [<= grace + 50 ms]. Also: cancel-to-acknowledged
   (``cancel_job``: the helper answers ``cancelled`` and stays).

Each figure is the median over rounds; the rounds of a measurement and its baseline are
interleaved so both see the same machine load (this machine has 2 cores and other work
may run on it: expect noise, and compare ratios, not absolute times).
"""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: import the repository's packages

import trio  # noqa: E402
import trio.testing  # noqa: E402

from actors import (  # noqa: E402
    HelperSpec,
    HelperTimeouts,
    JobCancelled,
    PoolActor,
    PoolClosed,
    PoolConfig,
    PoolHandle,
    open_helper_pool,
)
from actors._helpers._process import HelperProcess  # noqa: E402
from protocol.envelope import decode_fenced, encode_fields, new_session  # noqa: E402
from protocol.framing import DEFAULT_MAX_REPLY, FrameDecoder  # noqa: E402

#: Children get bytecode caching back (see the module docstring).
CHILD_ENV = {"PYTHONDONTWRITEBYTECODE": ""}
HERE = str(Path(__file__).resolve().parent)
SPEC = HelperSpec(entry="supervisor_helper:main", cwd=HERE, env=CHILD_ENV)
QUICK = "--quick" in sys.argv
ROUNDS = 5 if QUICK else 11
ROUND_TRIPS = 500 if QUICK else 1000
SPAWNS = 7 if QUICK else 21
GRACE = 0.75

RAW_ECHO = r"""
import os
buffer = b""
while True:
    while len(buffer) < 4 or len(buffer) < 4 + int.from_bytes(buffer[:4], "big"):
        chunk = os.read(0, 65536)
        if not chunk:
            raise SystemExit
        buffer += chunk
    size = 4 + int.from_bytes(buffer[:4], "big")
    os.write(1, buffer[:size])
    buffer = buffer[size:]
"""

#: The raw echo speaking the envelope protocol with the real codec, as the helper does:
#: decode and fence each job, encode a reply with the same payload.
CODEC_ECHO = r"""
import os, sys
for name, path in (("actors", sys.argv[1]), ("protocol", sys.argv[2])):
    package = type(sys)(name)
    package.__path__ = [path]
    sys.modules[name] = package
from protocol.envelope import decode_fenced, encode_fields
from protocol.framing import FrameDecoder
decoder = FrameDecoder(max_size=65536)
session = sys.argv[3]
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        raise SystemExit
    for body in decoder.feed(chunk):
        job = decode_fenced(body, session=session, kinds=("job",))
        os.write(1, encode_fields(kind="reply", session=session, generation=job.generation,
                                  operation=job.operation, status="ok", payload=job.payload))
"""

#: The standard modules the helper library needs (``struct`` for the envelope head),
#: plus ``typing`` (protocol.errors).
#: (``signal`` is imported only for the fault modes.)
HELPER_STDLIB = "import json, select, struct, typing"


def child_env() -> dict[str, str]:
    return {**os.environ, **CHILD_ENV}


async def raw_round_trip(process: trio.Process, frame: bytes) -> float:
    assert process.stdin is not None
    assert process.stdout is not None
    start = time.perf_counter()
    for _ in range(ROUND_TRIPS):
        await process.stdin.send_all(frame)
        got = 0
        while got < len(frame):
            got += len(await process.stdout.receive_some(65536))
    return (time.perf_counter() - start) / ROUND_TRIPS


async def codec_round_trip(process: trio.Process, session: str) -> float:
    assert process.stdin is not None
    assert process.stdout is not None
    decoder = FrameDecoder(max_size=DEFAULT_MAX_REPLY)
    start = time.perf_counter()
    for i in range(1, ROUND_TRIPS + 1):
        frame = encode_fields(
            kind="job", session=session, generation=i, operation="echo", payload=i
        )
        await process.stdin.send_all(frame)
        frames: list[bytes] = []
        while not frames:
            frames = decoder.feed(await process.stdout.receive_some(65536))
        decode_fenced(frames[0], session=session, kinds=("reply",), generation=i, operation="echo")
    return (time.perf_counter() - start) / ROUND_TRIPS


async def pool_round_trip(pool) -> float:
    start = time.perf_counter()
    for i in range(ROUND_TRIPS):
        await pool.run_job("echo", i)
    return (time.perf_counter() - start) / ROUND_TRIPS


async def actor_round_trip(handle: PoolHandle) -> float:
    start = time.perf_counter()
    for i in range(ROUND_TRIPS):
        await handle.run_job("echo", i, timeout=10)
    return (time.perf_counter() - start) / ROUND_TRIPS


async def bench_round_trip() -> dict[str, list[float]]:
    """Interleaved rounds of each round trip; seconds per round trip, one per round."""
    # The raw echo carries as many bytes as a job frame, so only the machinery differs.
    frame = encode_fields(
        kind="job", session=new_session(), generation=1000, operation="echo", payload=1000
    )
    raw = await trio.lowlevel.open_process(
        [sys.executable, "-c", RAW_ECHO],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
        env=child_env(),
    )
    session = new_session()
    codec = await trio.lowlevel.open_process(
        [sys.executable, "-c", CODEC_ECHO, str(ROOT / "actors"), str(ROOT / "protocol"), session],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
        env=child_env(),
    )
    figures: dict[str, list[float]] = {"raw": [], "codec": [], "pool": [], "actor": []}
    async with open_helper_pool(SPEC) as pool, trio.open_nursery() as nursery:
        ref = await nursery.start(PoolActor(SPEC, PoolConfig()).run)
        handle = PoolHandle(ref)
        for _ in range(ROUNDS):
            figures["raw"].append(await raw_round_trip(raw, frame))
            figures["codec"].append(await codec_round_trip(codec, session))
            figures["pool"].append(await pool_round_trip(pool))
            figures["actor"].append(await actor_round_trip(handle))
        await ref.stop()
    for process in (raw, codec):
        assert process.stdin is not None
        await process.stdin.aclose()
        await process.wait()
    return figures


def report_round_trip(label: str, figures: dict[str, list[float]], *, verdict_line: bool) -> None:
    """Print one pass: medians, ratios to the raw echo, the spread of per-round ratios."""
    median = {name: statistics.median(values) for name, values in figures.items()}
    raw = median["raw"]
    paired = sorted(p / r for p, r in zip(figures["pool"], figures["raw"], strict=True))
    spread = f"per-round pool/raw {paired[0]:.2f}..{paired[-1]:.2f}"
    pool = median["pool"] / raw
    target = f" (target <= 1.5x: {verdict(pool, 1.5)})" if verdict_line else " (not the verdict)"
    print(
        f"round trip, {label}: raw echo {raw * 1e6:.1f} us | pool {median['pool'] * 1e6:.1f} us"
        f" = {pool:.2f}x{target} | pool actor {median['actor'] * 1e6:.1f} us"
        f" = {median['actor'] / raw:.2f}x | {spread}"
    )
    print(
        f"  reference: envelope echo (raw echo + the envelope codec on both sides, no "
        f"supervision) {median['codec'] * 1e6:.1f} us = {median['codec'] / raw:.2f}x raw; "
        f"pool = {median['pool'] / median['codec']:.2f}x that"
    )


async def _spawn_to_ready(nursery: trio.Nursery, spec: HelperSpec) -> float:
    helper = HelperProcess(spec, HelperTimeouts())
    start = time.perf_counter()
    await helper.start(nursery)
    elapsed = time.perf_counter() - start
    await helper.shutdown()
    helper.discard()
    return elapsed


async def _run_process(code: str) -> float:
    start = time.perf_counter()
    await trio.run_process([sys.executable, "-c", code], env=child_env())
    return time.perf_counter() - start


#: A bare interpreter that says it is up (one byte on stdout), then waits for EOF.
FIRST_BYTE = "import sys; sys.stdout.buffer.write(b'r'); sys.stdout.flush(); sys.stdin.read()"


async def _first_byte() -> float:
    """Seconds from spawn (in a new session, like a helper) to the child's first byte."""
    start = time.perf_counter()
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", FIRST_BYTE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
        env=child_env(),
    )
    assert process.stdout is not None
    assert process.stdin is not None
    await process.stdout.receive_some(1)
    elapsed = time.perf_counter() - start
    await process.stdin.aclose()
    await process.wait()
    await process.stdout.aclose()
    return elapsed


async def bench_spawn(nursery: trio.Nursery) -> dict[str, float]:
    await _spawn_to_ready(nursery, SPEC)  # warm the bytecode cache of the helper library
    figures: dict[str, list[float]] = {"bare": [], "stdlib": [], "ready": [], "first": []}
    for _ in range(SPAWNS):
        figures["bare"].append(await _run_process("pass"))
        figures["ready"].append(await _spawn_to_ready(nursery, SPEC))
        figures["stdlib"].append(await _run_process(HELPER_STDLIB))
        figures["first"].append(await _first_byte())
    return {name: statistics.median(values) for name, values in figures.items()}


async def bench_cancel(job_ids: itertools.count[int]) -> dict[str, float]:
    """Median seconds from cancel to acknowledged (helper kept) and to reaped (closed)."""
    acknowledged: list[float] = []
    reaped: list[float] = []
    timeouts = HelperTimeouts(cancel_grace=GRACE)
    for _ in range(SPAWNS):
        async with open_helper_pool(SPEC, timeouts=timeouts) as pool:
            async with trio.open_nursery() as nursery:
                job_id = next(job_ids)
                nursery.start_soon(_expect_cancelled, pool, job_id)
                await trio.testing.wait_all_tasks_blocked()
                start = trio.current_time()
                pool.cancel_job(job_id)  # design §3.5 step 1: the helper answers, stays
            acknowledged.append(trio.current_time() - start)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_expect_closed, pool)
                await trio.testing.wait_all_tasks_blocked()
                start = trio.current_time()
                await pool.aclose()  # cancel the job (step 1), shut down, reap
                reaped.append(trio.current_time() - start)
    return {"acknowledged": statistics.median(acknowledged), "reaped": statistics.median(reaped)}


async def _expect_cancelled(pool, job_id: int) -> None:
    try:
        await pool.run_job("cooperative", 30, job_id=job_id)
    except JobCancelled:
        return
    raise AssertionError("the job was not cancelled")


async def _expect_closed(pool) -> None:
    try:
        await pool.run_job("cooperative", 30)
    except PoolClosed:
        return
    raise AssertionError("the job was not stopped by close")


def verdict(value: float, target: float) -> str:
    """``OK`` or ``MISS``: every target line says plainly whether it was met."""
    return "OK" if value <= target else "MISS"


async def main() -> None:
    mode = "quick: fewer rounds, noisier; quote a full run" if QUICK else "full"
    print(f"helper supervisor benchmarks ({mode}; medians)")
    if hasattr(os, "sched_setaffinity"):
        everywhere = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {min(everywhere)})  # children inherit it
        try:
            pinned = await bench_round_trip()
        finally:
            os.sched_setaffinity(0, everywhere)
        report_round_trip(f"pinned to CPU {min(everywhere)}", pinned, verdict_line=True)
        report_round_trip("unpinned", await bench_round_trip(), verdict_line=False)
    else:  # no CPU affinity here (not Linux): the unpinned figure is all there is
        report_round_trip("unpinned", await bench_round_trip(), verdict_line=True)
    async with trio.open_nursery() as nursery:
        spawn = await bench_spawn(nursery)
    bare = spawn["bare"]
    print(
        f"spawn: bare run_process(python -c pass) {bare * 1e3:.1f} ms | spawn-to-ready "
        f"{spawn['ready'] * 1e3:.1f} ms = {spawn['ready'] / bare:.2f}x "
        f"(target <= 1.2x: {verdict(spawn['ready'] / bare, 1.2)})"
    )
    print(
        f"  stricter baseline, spawn-to-first-byte of a bare interpreter (no exit, no reap) "
        f"{spawn['first'] * 1e3:.1f} ms: spawn-to-ready = {spawn['ready'] / spawn['first']:.2f}x"
    )
    print(
        f"  floor: run_process(python -c '{HELPER_STDLIB}') {spawn['stdlib'] * 1e3:.1f} ms"
        f" = {spawn['stdlib'] / bare:.2f}x"
    )
    cancel = await bench_cancel(itertools.count(1))
    print(
        f"cancel (grace {GRACE * 1e3:.0f} ms): cancel-to-acknowledged "
        f"{cancel['acknowledged'] * 1e3:.1f} ms | cancel-to-reaped "
        f"{cancel['reaped'] * 1e3:.1f} ms (target <= {(GRACE + 0.05) * 1e3:.0f} ms: "
        f"{verdict(cancel['reaped'], GRACE + 0.05)})"
    )


if __name__ == "__main__":
    trio.run(main)
