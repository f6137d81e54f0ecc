"""Ctrl-C that works: a second SIGINT during the shutdown skips every grace (§3.13).

A real program in a subprocess (a runtime whose helper ignores SIGTERM, runs a job that
never checks for a cancel, and has 30-second graces): the first SIGINT starts the
graceful shutdown; the second one must end it within the kill timeout, leave no helper
behind, and leave as a bare ``KeyboardInterrupt``. Real clock, bounded waits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
import trio
from helper_support import HERE, assert_no_children, spec, wait_gone
from process_support import interruptible, pid_gone

from actors import ForcedTermination, HelperTimeouts, PoolClosed, open_helper_pool

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

KILL = 1.0

#: The program: prints each pool event's kind (and the helpers' pids once a job runs).
PROGRAM = r"""
import contextlib, sys, trio
from actors import ActorError, HelperSpec, HelperTimeouts, PoolConfig, RuntimeConfig, open_runtime

async def execute(job, runtime):
    return None

def render(observation, kind, options, check_cancel):
    return b""

@trio.lowlevel.enable_ki_protection  # Ctrl-C goes to the main task, not this reporter
async def watch(stream, runtime):
    async for event in stream:
        if event.kind == "job_started":
            pids = [h.pid for h in (await runtime.pool.snapshot()).helpers]
            print("pids", *pids, flush=True)
        print(event.kind, flush=True)

@trio.lowlevel.enable_ki_protection
async def job(runtime):
    with contextlib.suppress(ActorError):
        await runtime.pool.run_job("sleep", 300, timeout=300)

async def main():
    timeouts = HelperTimeouts(cancel_grace=30, shutdown=30, terminate=30, kill=%(kill)r)
    spec = HelperSpec(entry="helper_entry:main", cwd=%(cwd)r, fault="ignore_sigterm")
    config = RuntimeConfig(
        helper=spec, pool=PoolConfig(size=2, timeouts=timeouts), render_fn=render,
        execute=execute, shutdown_grace=0.5,
    )
    async with open_runtime(config) as runtime:
        runtime.nursery.start_soon(watch, runtime.pool_events.subscribe(), runtime)
        runtime.nursery.start_soon(job, runtime)
        await trio.sleep_forever()

trio.run(main)
"""


async def _lines(stream, seen: list[str], until: str, within: float) -> None:
    buffer = b""
    with trio.fail_after(within):
        while until not in seen:
            chunk = await stream.receive_some(4096)
            assert chunk, f"the program ended before {until!r}: {seen}"
            buffer += chunk
            *lines, rest = buffer.split(b"\n")
            buffer = rest
            seen.extend(line.decode() for line in lines)


@asynccontextmanager
async def _interrupted_once(
    program: str,
) -> AsyncIterator[tuple[trio.Process, list[str], list[int]]]:
    """Start ``program``, wait for its job, press Ctrl-C once and wait for the cancel;
    yield the process, the lines it printed and its helpers' pids. Leaves nothing behind."""
    code = program % {"kill": KILL, "cwd": str(HERE)}
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=interruptible,  # Ctrl-C acts, whatever this worker inherited
    )
    seen: list[str] = []
    pids: list[int] = []
    try:
        await _lines(process.stdout, seen, "job_started", within=30)
        pids += [
            int(pid) for pid in next(line for line in seen if line.startswith("pids")).split()[1:]
        ]
        process.send_signal(signal.SIGINT)  # the graceful shutdown begins...
        await _lines(process.stdout, seen, "cancel_sent", within=30)
        yield process, seen, pids
    finally:
        if process.returncode is None:  # the test failed: leave nothing behind
            process.kill()
            await process.wait()
            for pid in pids:
                if not pid_gone(pid):
                    os.kill(pid, signal.SIGKILL)
        await process.stdout.aclose()
        await process.stderr.aclose()


async def test_a_second_ctrl_c_skips_every_grace_and_leaves_a_bare_keyboard_interrupt():
    async with _interrupted_once(PROGRAM) as (process, seen, pids):
        start = trio.current_time()
        process.send_signal(signal.SIGINT)  # ...and the second Ctrl-C cuts it short
        with trio.move_on_after(15):
            await process.wait()
        if process.returncode is None:  # say what the program was doing
            process.kill()
            await process.wait()
            said = (await process.stderr.receive_some(1 << 20)).decode()
            rest = (await process.stdout.receive_some(1 << 20)).decode().split()
            pytest.fail(f"still running 15 s after the second Ctrl-C; saw {seen + rest}\n{said}")
        elapsed = trio.current_time() - start
        errors = await process.stderr.receive_some(1 << 20)
        seen.extend((await process.stdout.receive_some(1 << 20)).decode().split())
    assert elapsed < KILL + 3.0  # the graces are 30 s each
    assert process.returncode == -signal.SIGINT  # the interpreter died of KeyboardInterrupt
    text = errors.decode()
    assert "KeyboardInterrupt" in text
    assert "ExceptionGroup" not in text
    assert "every helper gets SIGKILL now" in text or "stopping at once" in text
    for pid in pids:
        await wait_gone(pid)
    assert "sigkill_sent" in seen


async def test_hurry_cuts_a_pools_close_to_the_kill_timeout():
    timeouts = HelperTimeouts(cancel_grace=30, shutdown=30, terminate=30, kill=KILL)
    async with (
        trio.open_nursery() as nursery,
        open_helper_pool(spec(fault="ignore_sigterm"), timeouts=timeouts) as pool,
    ):
        nursery.start_soon(_job, pool)
        await trio.testing.wait_all_tasks_blocked()
        pid = pool.snapshot().helpers[0].pid
        with pool.events.subscribe() as stream:
            closer = trio.CancelScope()

            async def close() -> None:
                with closer:
                    await pool.aclose()

            nursery.start_soon(close)
            async for event in stream:
                if event.kind == "cancel_sent":
                    break
            start = trio.current_time()
            pool.hurry()
            await pool.aclose()  # waits for the first close
            elapsed = trio.current_time() - start
    assert elapsed < KILL + 1.0  # not the 30 s graces
    assert pid_gone(pid)
    assert_no_children()


async def _job(pool) -> None:
    with pytest.raises((PoolClosed, ForcedTermination)):
        await pool.run_job("sleep", 300)


#: A script whose main task awaits the job itself: the first Ctrl-C lands in ``run_job``,
#: whose ladder starts before the pool's close (and its own Ctrl-C handling) does.
SCRIPT = r"""
import sys, trio
from actors import HelperSpec, HelperTimeouts, open_helper_pool

@trio.lowlevel.enable_ki_protection  # Ctrl-C goes to the main task, not this reporter
async def watch(stream, pool):
    async for event in stream:
        if event.kind == "job_started":
            print("pids", *[h.pid for h in pool.snapshot().helpers], flush=True)
        print(event.kind, flush=True)

async def main():
    timeouts = HelperTimeouts(cancel_grace=10, shutdown=10, terminate=10, kill=%(kill)r)
    spec = HelperSpec(entry="helper_entry:main", cwd=%(cwd)r, fault="ignore_sigterm")
    async with open_helper_pool(spec, size=2, timeouts=timeouts) as pool:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch, pool.events.subscribe(), pool)
            await pool.run_job("sleep", 300)

trio.run(main)
"""


@pytest.mark.parametrize("program", [SCRIPT, PROGRAM], ids=["job_in_main_task", "runtime"])
async def test_a_second_ctrl_c_kills_every_helper_at_once(program):
    # The helpers ignore SIGTERM and the job never checks for a cancel: only SIGKILL
    # ends them. After the second Ctrl-C no rung may be waited out: every helper process
    # is gone within 0.3 s (the kill timeout, 1 s, bounds only the reaping).
    async with _interrupted_once(program) as (process, _, pids):
        start = trio.current_time()
        process.send_signal(signal.SIGINT)
        with trio.fail_after(30):
            # Foreign pids (the program's children) have no exit event here: poll /proc.
            while not all(pid_gone(pid) for pid in pids):  # noqa: ASYNC110
                await trio.sleep(0.005)
        gone_after = trio.current_time() - start
        with trio.fail_after(15):
            await process.wait()
        errors = (await process.stderr.receive_some(1 << 20)).decode()
    assert gone_after <= 0.3, f"helpers gone {gone_after:.3f} s after the second Ctrl-C"
    assert process.returncode == -signal.SIGINT
    assert "KeyboardInterrupt" in errors
    assert "ExceptionGroup" not in errors
