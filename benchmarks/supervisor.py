"""Benchmarks of the helper pool (design §3), as ratios against same-run baselines.

Run from the repository root: ``python benchmarks/supervisor.py [--quick]`` (``--quick``:
fewer rounds, a smoke run; the figures to quote come from a full run, about 20 s).

What is measured, exactly (targets in brackets):

1. **Round trip** of one small job (``echo`` of an int) vs. a **raw echo**: a bare
   Python child (``python -c RAW_ECHO``) that reads length-prefixed frames from its stdin
   pipe and writes them back unchanged, driven from trio with ``send_all`` /
   ``receive_some`` over the same kind of pipes, with frames of the same size as a job
   frame. Measured: the bare pool (``HelperPool.run_job``) [<= 1.2x the raw echo] and the
   path ``open_runtime`` users call, the pool actor's handle (``PoolHandle.run_job``)
   [<= 1.1x the bare pool]; and the same pool actor **measured for Prometheus**
   (:class:`actors.metrics.RuntimeMetrics` following its events, as ``open_runtime``
   with ``metrics=True`` does) and **scraped every second** (``generate_latest``, which
   reads the pool's statistics and snapshot) [<= 1.03x the pool actor without, measured
   right after or before it in each round: the median of the rounds' ratios]. All
   with nobody subscribed to the pool's events (but the metrics' own subscription) and the
   ``actors.helpers`` logger at its default level (design §3.10: then no event is
   built); also printed, for reference, the bare pool with a subscriber of every event
   kind. Also printed: an **envelope echo**, the raw echo plus the envelope codec on
   both sides (the child decodes and fences the job and encodes a reply; the parent
   encodes the job and decodes and fences the reply), with no supervision at all.

   Pinned and in CPU time (the verdict): this process and every child run on one CPU
   (``os.sched_setaffinity``), so each round trip is the same sequence of work and
   context switches, and each figure is the **CPU time of this process** per round trip
   (``time.process_time``): the supervising side's cost, which load from other programs
   on the machine (it has 2 cores and other work may run) does not inflate the way it
   inflates wall time. Printed beside it, for reference: the wall time of the same
   pinned rounds, and the CPU time of the child too (Linux ``/proc/PID/schedstat``): the
   helper's side of the protocol (frame decoding, the envelope codec) weighs on those,
   not on the supervisor's cost. Unpinned rounds are printed last (wall time): on this
   2-vCPU VM a raw echo takes 10 to 80 us depending on whether the kernel runs both
   ends on one CPU, so that ratio swings by more than the supervisor costs.
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
   The helper's containment (design §3.11) is the default (``auto``).
   **From the zygote** (design §3.17): spawn-to-ready of a helper forked from a running
   zygote (fork, pipes over the zygote's socket, containment, startup frame → ready)
   [<= 0.5x the bare ``python -c pass``], and **restart after a crash** (the helper exits
   in a job; from that error to the reply of the next job, which waits for the
   replacement: retire, reap, fork, ready, one round trip) [<= 0.5x the same bare
   interpreter]; the same restart of a spawning pool is printed beside it.
3. **Cancel-to-reaped** for a cooperative helper: a running job is cancelled by closing
   the pool; time until the helper is reaped and its tree swept (cancel frame →
   ``cancelled`` reply → shutdown frame → exit → reaped) [<= grace + 50 ms]. Also:
   cancel-to-acknowledged (``cancel_job``: the helper answers ``cancelled`` and stays).

Each figure is the median over rounds; the rounds of a measurement and its baseline are
interleaved so both see the same machine load.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: import the repository's packages

import attrs  # noqa: E402
import trio  # noqa: E402
import trio.testing  # noqa: E402
from measure import Figures  # noqa: E402
from prometheus_client import generate_latest  # noqa: E402

from actors import (  # noqa: E402
    POOL_EVENT_KINDS,
    HelperExited,
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
from actors.metrics import RuntimeMetrics  # noqa: E402
from protocol.envelope import decode_fenced, encode_fields, new_session  # noqa: E402
from protocol.framing import DEFAULT_MAX_REPLY, FrameDecoder  # noqa: E402

#: Children get bytecode caching back (see the module docstring).
CHILD_ENV = {"PYTHONDONTWRITEBYTECODE": ""}
HERE = str(Path(__file__).resolve().parent)
#: Spawned: the spawn rows measure an interpreter's start; the zygote rows fork.
SPEC = HelperSpec(entry="supervisor_helper:main", cwd=HERE, env=CHILD_ENV, start_method="spawn")
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


async def raw_round_trip(process: trio.Process, frame: bytes) -> None:
    assert process.stdin is not None
    assert process.stdout is not None
    for _ in range(ROUND_TRIPS):
        await process.stdin.send_all(frame)
        got = 0
        while got < len(frame):
            got += len(await process.stdout.receive_some(65536))


async def codec_round_trip(process: trio.Process, session: str, start: int) -> None:
    assert process.stdin is not None
    assert process.stdout is not None
    decoder = FrameDecoder(max_size=DEFAULT_MAX_REPLY)
    for i in range(start, start + ROUND_TRIPS):
        frame = encode_fields(
            kind="job", session=session, generation=i, operation="echo", payload=i
        )
        await process.stdin.send_all(frame)
        frames: list[bytes] = []
        while not frames:
            frames = decoder.feed(await process.stdout.receive_some(65536))
        decode_fenced(frames[0], session=session, kinds=("reply",), generation=i, operation="echo")


async def pool_round_trip(pool) -> None:
    for i in range(ROUND_TRIPS):
        await pool.run_job("echo", i)


async def actor_round_trip(handle: PoolHandle) -> None:
    for i in range(ROUND_TRIPS):
        await handle.run_job("echo", i, timeout=10)


async def _scrape_every_second(metrics: RuntimeMetrics) -> None:
    """A Prometheus server's scrape, once a second, for as long as the round lasts."""
    while True:
        generate_latest(metrics.registry)
        await trio.sleep(1.0)


async def _drain(stream) -> None:
    async for _ in stream:
        pass


async def _echo_process(*argv: str) -> trio.Process:
    return await trio.lowlevel.open_process(
        [sys.executable, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
        env=child_env(),
    )


async def _close_echo(process: trio.Process) -> None:
    assert process.stdin is not None
    await process.stdin.aclose()
    await process.wait()


async def bench_round_trip() -> dict[str, Figures]:
    """Interleaved rounds of each round trip, each round with fresh processes.

    Fresh processes every round: one process can be lastingly slower than another of
    the same program (its hash seed, its memory layout), and a median over rounds that
    all use the same processes would keep that luck.
    """
    # The pool actor with and without metrics side by side, and every other round in
    # the reverse order: a load that comes and goes weighs on both alike.
    names = ("raw", "codec", "pool", "actor", "metered", "watched")
    figures = {name: Figures(ROUND_TRIPS) for name in names}
    # The raw echo carries as many bytes as a job frame, so only the machinery differs.
    frame = encode_fields(
        kind="job", session=new_session(), generation=1000, operation="echo", payload=1000
    )
    for round_number in range(ROUNDS):
        session = new_session()
        raw = await _echo_process("-c", RAW_ECHO)
        codec = await _echo_process(
            "-c", CODEC_ECHO, str(ROOT / "actors"), str(ROOT / "protocol"), session
        )
        async with (
            open_helper_pool(SPEC) as pool,
            open_helper_pool(SPEC) as watched,
            trio.open_nursery() as nursery,
        ):
            actor = PoolActor(SPEC, PoolConfig())
            ref = await nursery.start(actor.run)
            handle = PoolHandle(ref)
            stream = watched.events.subscribe(bound=4096)
            nursery.start_soon(_drain, stream)
            metered_actor = PoolActor(SPEC, PoolConfig())
            metered_ref = await nursery.start(metered_actor.run)
            metrics = RuntimeMetrics()
            metrics.watch(
                pool=functools.partial(getattr, metered_actor, "pool"),
                mailboxes=functools.partial(dict, pool=metered_ref),
            )
            kinds = POOL_EVENT_KINDS - {"job_started"}  # as open_runtime subscribes
            nursery.start_soon(
                metrics.follow_pool, metered_actor.events.subscribe(bound=1024, kinds=kinds)
            )
            nursery.start_soon(_scrape_every_second, metrics)
            runs = {
                "raw": (functools.partial(raw_round_trip, raw, frame), raw.pid),
                "codec": (functools.partial(codec_round_trip, codec, session, 1), codec.pid),
                "pool": (functools.partial(pool_round_trip, pool), pool.snapshot().helpers[0].pid),
                "actor": (
                    functools.partial(actor_round_trip, handle),
                    actor.pool.snapshot().helpers[0].pid,
                ),
                "watched": (
                    functools.partial(pool_round_trip, watched),
                    watched.snapshot().helpers[0].pid,
                ),
                "metered": (
                    functools.partial(actor_round_trip, PoolHandle(metered_ref)),
                    metered_actor.pool.snapshot().helpers[0].pid,
                ),
            }
            for name in names if round_number % 2 == 0 else reversed(names):
                run, pid = runs[name]
                await figures[name].measure(run, pid)
            stream.close()
            await ref.stop()
            await metered_ref.stop()
            nursery.cancel_scope.cancel()
        await _close_echo(raw)
        await _close_echo(codec)
    return figures


def report_round_trip(label: str, figures: dict[str, Figures], *, pinned: bool) -> None:
    """Print one pass: the verdict (pinned, CPU time) or the unpinned wall times."""
    us = 1e6
    if pinned:
        cpu = {name: f.median("cpu") for name, f in figures.items()}
        pool, actor = cpu["pool"] / cpu["raw"], cpu["actor"] / cpu["pool"]
        print(
            f"round trip, {label}, CPU time of this process: raw echo {cpu['raw'] * us:.1f} us"
            f" | pool {cpu['pool'] * us:.1f} us = {pool:.2f}x raw (target <= 1.2x: "
            f"{verdict(pool, 1.2)}) | pool actor {cpu['actor'] * us:.1f} us = {actor:.2f}x"
            f" the pool (target <= 1.1x: {verdict(actor, 1.1)})"
        )
        # The median of each round's ratio: the two were measured one after the other.
        metered = statistics.median(
            m / a for m, a in zip(figures["metered"].cpu, figures["actor"].cpu, strict=True)
        )
        print(
            f"  with metrics, scraped every second: pool actor {cpu['metered'] * us:.1f} us ="
            f" {metered:.3f}x the pool actor without (target <= 1.03x: {verdict(metered, 1.03)})"
        )
        watched = cpu["watched"] / cpu["pool"]
        print(
            f"  with a subscriber of every event: pool {cpu['watched'] * us:.1f} us ="
            f" {watched:.2f}x the pool without | envelope echo (no supervision)"
            f" {cpu['codec'] * us:.1f} us = {cpu['codec'] / cpu['raw']:.2f}x raw"
        )
        wall = {name: f.median("wall") for name, f in figures.items()}
        child = {name: f.median("child") for name, f in figures.items()}
        total = {name: cpu[name] + child[name] for name in cpu}
        print(
            f"  for reference, wall time (pinned): raw {wall['raw'] * us:.1f} us | pool "
            f"{wall['pool'] * us:.1f} us = {wall['pool'] / wall['raw']:.2f}x | pool actor "
            f"{wall['actor'] * us:.1f} us = {wall['actor'] / wall['pool']:.2f}x the pool"
        )
        print(
            f"  for reference, CPU time of this process + the child: raw "
            f"{total['raw'] * us:.1f} us | pool {total['pool'] * us:.1f} us = "
            f"{total['pool'] / total['raw']:.2f}x | pool actor {total['actor'] * us:.1f} us ="
            f" {total['actor'] / total['pool']:.2f}x the pool (the child's side: raw "
            f"{child['raw'] * us:.1f} us, helper {child['pool'] * us:.1f} us)"
        )
    else:
        wall = {name: f.median("wall") for name, f in figures.items()}
        print(
            f"round trip, {label}, wall time (not the verdict): raw echo "
            f"{wall['raw'] * us:.1f} us | pool {wall['pool'] * us:.1f} us ="
            f" {wall['pool'] / wall['raw']:.2f}x | pool actor {wall['actor'] * us:.1f} us ="
            f" {wall['actor'] / wall['pool']:.2f}x the pool"
        )


async def _spawn_to_ready(nursery: trio.Nursery, spec: HelperSpec, zygote=None) -> float:
    helper = HelperProcess(spec, HelperTimeouts(), zygote=zygote)
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


async def _restart_to_ready(pool) -> float:
    """Seconds from a crash's error to the next job's reply (the replacement's start)."""
    with contextlib.suppress(HelperExited):
        await pool.run_sync(os._exit, 3)
    start = time.perf_counter()
    await pool.run_job("echo", 1)
    return time.perf_counter() - start


async def bench_zygote(nursery: trio.Nursery) -> dict[str, float]:
    """Medians: bare interpreter, forked-to-ready, restart (forked), restart (spawned)."""
    config = PoolConfig(size=1, max_restarts=4 * SPAWNS)
    figures: dict[str, list[float]] = {"bare": [], "forked": [], "restart": [], "spawned": []}
    forking = attrs.evolve(SPEC, start_method="zygote")
    # Each crash is a WARNING record by design; the figures are what this prints.
    logging.getLogger("actors").addHandler(logging.NullHandler())
    logging.getLogger("actors").propagate = False
    async with open_helper_pool(forking, config) as pool, open_helper_pool(SPEC, config) as plain:
        assert pool.zygote is not None, "no zygote on this platform"
        await _restart_to_ready(pool)  # warm both
        await _restart_to_ready(plain)
        for _ in range(SPAWNS):
            figures["bare"].append(await _run_process("pass"))
            figures["forked"].append(await _spawn_to_ready(nursery, forking, pool.zygote))
            figures["restart"].append(await _restart_to_ready(pool))
            figures["spawned"].append(await _restart_to_ready(plain))
        assert pool.zygote.unavailable is None, pool.zygote.unavailable
    return {name: statistics.median(values) for name, values in figures.items()}


def report_zygote(figures: dict[str, float]) -> None:
    bare = figures["bare"]
    forked, restart = figures["forked"] / bare, figures["restart"] / bare
    print(
        f"zygote: bare run_process(python -c pass) {bare * 1e3:.1f} ms | forked spawn-to-ready "
        f"{figures['forked'] * 1e3:.1f} ms = {forked:.2f}x (target <= 0.5x: "
        f"{verdict(forked, 0.5)})"
    )
    print(
        f"  restart after a crash, forked: {figures['restart'] * 1e3:.1f} ms = {restart:.2f}x "
        f"(target <= 0.5x: {verdict(restart, 0.5)}) | spawned: "
        f"{figures['spawned'] * 1e3:.1f} ms = {figures['spawned'] / bare:.2f}x"
    )


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
        report_round_trip(f"pinned to CPU {min(everywhere)}", pinned, pinned=True)
        report_round_trip("unpinned", await bench_round_trip(), pinned=False)
    else:  # no CPU affinity here (not Linux): CPU time of the unpinned rounds it is
        report_round_trip(
            "not pinned (no CPU affinity here)", await bench_round_trip(), pinned=True
        )
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
    async with trio.open_nursery() as nursery:
        report_zygote(await bench_zygote(nursery))
    cancel = await bench_cancel(itertools.count(1))
    print(
        f"cancel (grace {GRACE * 1e3:.0f} ms): cancel-to-acknowledged "
        f"{cancel['acknowledged'] * 1e3:.1f} ms | cancel-to-reaped "
        f"{cancel['reaped'] * 1e3:.1f} ms (target <= {(GRACE + 0.05) * 1e3:.0f} ms: "
        f"{verdict(cancel['reaped'], GRACE + 0.05)})"
    )


if __name__ == "__main__":
    trio.run(main)
