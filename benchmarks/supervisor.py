"""Benchmarks of the helper supervisor (SPEC §3), as ratios against same-run baselines.

Run from the repository root: ``python benchmarks/supervisor.py [--quick]``.

1. Job round trip through the pool (and through the supervisor actor) vs. a raw
   length-prefixed echo over the same kind of pipe to a bare Python child that does
   nothing but copy frames back. Target: pool <= 1.5x.
2. Spawn-to-ready of a helper (bootstrap, ``actors.helper`` imports, startup handshake)
   vs. a bare ``trio.run_process`` of the same interpreter running ``pass``.
   Target: <= 1.2x.
3. Cancel-to-reaped for a cooperative helper: a running job is cancelled and the pool
   closed; time until the helper is reaped. Target: <= grace + 50 ms (the cooperative
   cancel needs far less than the grace period; the grace is an upper bound).

Each figure is the median of several rounds, rounds of the measured and the baseline
interleaved so that both see the same machine load.
"""

from __future__ import annotations

import itertools
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
    PoolClosed,
    PoolConfig,
    SupervisorActor,
    SupervisorHandle,
    open_helper_pool,
)
from actors._helper_process import HelperProcess  # noqa: E402
from protocol.envelope import (  # noqa: E402
    Envelope,
    check_reply,
    decode_envelope,
    encode_envelope,
    new_session,
)
from protocol.framing import DEFAULT_MAX_REPLY, FrameDecoder  # noqa: E402

SPEC = HelperSpec(entry="supervisor_helper:main", cwd=str(Path(__file__).resolve().parent))
QUICK = "--quick" in sys.argv
ROUNDS = 3 if QUICK else 7
ROUND_TRIPS = 500 if QUICK else 2000
SPAWNS = 5 if QUICK else 15
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

#: The same echo, but speaking the envelope protocol with the real codec: decode the
#: job, build and encode the reply (what actors.helper does, minus the serve loop).
CODEC_ECHO = r"""
import os, sys, types
for name, path in (("actors", sys.argv[1]), ("protocol", sys.argv[2])):
    package = types.ModuleType(name)
    package.__path__ = [path]
    sys.modules[name] = package
import actors._helper_errors
sys.modules["protocol.errors"] = actors._helper_errors
from protocol.envelope import Envelope, decode_envelope, encode_envelope
from protocol.framing import FrameDecoder
decoder = FrameDecoder(max_size=65536)
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        raise SystemExit
    for body in decoder.feed(chunk):
        job = decode_envelope(body)
        reply = Envelope(version=1, kind="reply", session=job.session,
                         generation=job.generation, operation=job.operation,
                         status="ok", payload=job.payload)
        os.write(1, encode_envelope(reply))
"""


#: The standard-library modules protocol.envelope imports (the child cannot avoid them).
ENVELOPE_IMPORTS = "import dataclasses, json, re, secrets"


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


async def codec_round_trip(process: trio.Process) -> float:
    assert process.stdin is not None
    assert process.stdout is not None
    session = new_session()
    decoder = FrameDecoder(max_size=DEFAULT_MAX_REPLY)
    start = time.perf_counter()
    for i in range(ROUND_TRIPS):
        job = Envelope(
            version=1, kind="job", session=session, generation=i, operation="echo", payload=i
        )
        await process.stdin.send_all(encode_envelope(job))
        frames: list[bytes] = []
        while not frames:
            frames = decoder.feed(await process.stdout.receive_some(65536))
        check_reply(decode_envelope(frames[0]), session=session, generation=i, operation="echo")
    return (time.perf_counter() - start) / ROUND_TRIPS


async def pool_round_trip(pool) -> float:
    start = time.perf_counter()
    for i in range(ROUND_TRIPS):
        await pool.run_job("echo", i)
    return (time.perf_counter() - start) / ROUND_TRIPS


async def actor_round_trip(handle: SupervisorHandle) -> float:
    start = time.perf_counter()
    for i in range(ROUND_TRIPS):
        await handle.run_job("echo", i, timeout=10)
    return (time.perf_counter() - start) / ROUND_TRIPS


async def bench_round_trip() -> dict[str, float]:
    # The raw echo carries the same bytes as a job frame, so only the machinery differs.
    job = Envelope(
        version=1, kind="job", session=new_session(), generation=1, operation="echo", payload=1
    )
    frame = encode_envelope(job)
    raw = await trio.lowlevel.open_process(
        [sys.executable, "-c", RAW_ECHO],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    codec = await trio.lowlevel.open_process(
        [sys.executable, "-c", CODEC_ECHO, str(ROOT / "actors"), str(ROOT / "protocol")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    figures: dict[str, list[float]] = {"raw": [], "codec": [], "pool": [], "actor": []}
    async with open_helper_pool(SPEC) as pool, trio.open_nursery() as nursery:
        ref = await nursery.start(SupervisorActor(SPEC, PoolConfig()).run)
        handle = SupervisorHandle(ref)
        for _ in range(ROUNDS):
            figures["raw"].append(await raw_round_trip(raw, frame))
            figures["codec"].append(await codec_round_trip(codec))
            figures["pool"].append(await pool_round_trip(pool))
            figures["actor"].append(await actor_round_trip(handle))
        await ref.stop()
    for process in (raw, codec):
        assert process.stdin is not None
        await process.stdin.aclose()
        await process.wait()
    return {name: statistics.median(values) for name, values in figures.items()}


async def bench_spawn(nursery: trio.Nursery) -> dict[str, float]:
    bare: list[float] = []
    imports: list[float] = []
    ready: list[float] = []
    for _ in range(SPAWNS):
        start = time.perf_counter()
        await trio.run_process([sys.executable, "-c", "pass"])
        bare.append(time.perf_counter() - start)
        start = time.perf_counter()
        await trio.run_process([sys.executable, "-c", ENVELOPE_IMPORTS])
        imports.append(time.perf_counter() - start)
        helper = HelperProcess(SPEC, HelperTimeouts())
        start = time.perf_counter()
        await helper.start(nursery)
        ready.append(time.perf_counter() - start)
        await helper.shutdown()
        helper.discard()
    return {
        "bare": statistics.median(bare),
        "imports": statistics.median(imports),
        "ready": statistics.median(ready),
    }


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
                pool.cancel_job(job_id)  # SPEC §3.5 step 1: the helper answers, stays
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


async def main() -> None:
    print(f"helper supervisor benchmarks ({'quick' if QUICK else 'full'}; medians)")
    trips = await bench_round_trip()
    raw = trips["raw"]
    print(
        f"round trip: raw echo {raw * 1e6:.1f} us | pool {trips['pool'] * 1e6:.1f} us"
        f" = {trips['pool'] / raw:.2f}x (target <= 1.5x)"
        f" | supervisor actor {trips['actor'] * 1e6:.1f} us = {trips['actor'] / raw:.2f}x"
    )
    print(
        f"  floor: envelope-codec echo (same codec both sides, no supervision) "
        f"{trips['codec'] * 1e6:.1f} us = {trips['codec'] / raw:.2f}x raw; "
        f"pool = {trips['pool'] / trips['codec']:.2f}x that floor"
    )
    async with trio.open_nursery() as nursery:
        spawn = await bench_spawn(nursery)
    print(
        f"spawn: bare run_process {spawn['bare'] * 1e3:.1f} ms | spawn-to-ready "
        f"{spawn['ready'] * 1e3:.1f} ms = {spawn['ready'] / spawn['bare']:.2f}x "
        "(target <= 1.2x)"
    )
    print(
        f"  floor: bare interpreter importing protocol.envelope's stdlib modules "
        f"{spawn['imports'] * 1e3:.1f} ms = {spawn['imports'] / spawn['bare']:.2f}x"
    )
    cancel = await bench_cancel(itertools.count(1))
    print(
        f"cancel (grace {GRACE * 1e3:.0f} ms): cancel-to-acknowledged "
        f"{cancel['acknowledged'] * 1e3:6.1f} ms | "
        f"cancel-to-reaped {cancel['reaped'] * 1e3:6.1f} ms "
        f"(target <= {(GRACE + 0.05) * 1e3:.0f} ms)"
    )


if __name__ == "__main__":
    trio.run(main)
