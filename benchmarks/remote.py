"""Cost of a helper on another host against bare ``ssh -T`` in the same run (design §3.16).

Run from the repository root: ``python benchmarks/remote.py [--quick]`` (``--quick``:
fewer rounds and calls, a smoke run; quote a full run, about 30 s). It needs OpenSSH's
``sshd``: it starts a private one on loopback (``tests/remote_support.private_sshd``), so
"remote" is this machine over real SSH, as in the tests.

Everything (this process, the private sshd, the ssh clients, wardens and helpers) runs
pinned to one CPU, as ``supervisor.py`` pins its verdict. What is measured (targets in
brackets), each the median over interleaved rounds:

* **round trip** of a trivial job (``square``: an int in, an int out) through a remote
  helper (``HelperProcess.run_job`` over ``ssh -T``: the request and the reply straight
  between the parent and the helper, the warden's control frames on a channel of their
  own, design §2.5), against the same job frames sent
  through a bare ``ssh -T`` to a remote Python program that echoes each frame back
  (stdlib only, ``os.read``/``os.write``) [helper <= 1.3x the echo]. Both stay open
  for a round, which alternates batches of calls between them, so that both see the
  same load. Beside the wall time, the **CPU time of the whole path** per round trip
  (Linux ``/proc/PID/task/*/schedstat`` of this process, the ``ssh`` clients and
  everything under the sshd, during the batch: the other path idles meanwhile): what
  each process does for a call, which load from other programs inflates far less than
  wall time (as ``supervisor.py`` takes its verdict);
* **spawn to ready** of a remote helper (``HelperProcess.start``: the SSH login, the
  warden, the helper's interpreter and its *ready*), against a bare
  ``ssh -T host python -c pass`` run to its exit [helper <= 1.3x].
"""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: import the repository's packages
sys.path.insert(0, str(ROOT / "tests"))  # remote_support: the private sshd
sys.path.insert(0, str(ROOT / "benchmarks"))  # supervisor: the local spawn measurement

import trio  # noqa: E402
from remote_support import private_sshd  # noqa: E402
from supervisor import _spawn_to_ready  # noqa: E402

from actors import HelperSpec, HelperTimeouts  # noqa: E402
from actors._helpers._process import HelperProcess  # noqa: E402
from protocol.envelope import encode_positional, new_session  # noqa: E402
from protocol.framing import DEFAULT_MAX_REQUEST, FrameDecoder  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

QUICK = "--quick" in sys.argv
ROUNDS = 3 if QUICK else 7
CALLS = 50 if QUICK else 400
#: Batches per round and path: calls alternate between the two paths batch by batch.
BATCHES = 2 if QUICK else 8
SPAWNS = 1 if QUICK else 3
TARGET = 1.3
TIMEOUTS = HelperTimeouts(startup=30.0, reply=30.0)

#: The bare side's far end: echo every frame as it comes (length prefix and all).
ECHO = r"""
import os
buffer = b""
while True:
    data = os.read(0, 65536)
    if not data:
        break
    buffer += data
    while len(buffer) >= 4 and len(buffer) >= 4 + int.from_bytes(buffer[:4], "big"):
        end = 4 + int.from_bytes(buffer[:4], "big")
        os.write(1, buffer[:end])
        buffer = buffer[end:]
"""


def verdict(value: float, target: float) -> str:
    """``OK`` or ``MISS``: the target line says plainly whether it was met."""
    return "OK" if value <= target else "MISS"


def _tasks_cpu(pid: int) -> int:
    """Nanoseconds on a CPU of every thread of ``pid`` so far (0 once it is gone)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as file:
                total += int(file.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return total


def _descendants(roots: set[int]) -> list[int]:
    """The pids below ``roots`` (``/proc``), the roots excluded."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as file:
                    text = file.read()
                parents[int(name)] = int(text[text.rindex(")") + 2 :].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found = []
    for pid in parents:
        ancestor = parents.get(pid)
        while ancestor is not None and ancestor not in roots:
            ancestor = parents.get(ancestor)
        if ancestor is not None:
            found.append(pid)
    return found


class PathClock:
    """Wall and CPU time of batches of calls: the CPU of this process and of every
    process below it or below the sshd (taken when the round's paths are open)."""

    def __init__(self, sshd: int) -> None:
        self.others = _descendants({os.getpid(), sshd})
        self.wall: list[float] = []
        self.cpu: list[float] = []

    async def batch(self, run: Callable[[int], Awaitable[None]], first: int, count: int) -> None:
        others = self.others
        me = os.getpid()
        # Theirs read first and ours last, ours first and theirs last after: the
        # reading of /proc is not counted in our CPU time.
        before = sum(map(_tasks_cpu, others))
        mine, start = _tasks_cpu(me), time.perf_counter()
        for i in range(first, first + count):
            await run(i)
        wall, mine = time.perf_counter() - start, _tasks_cpu(me) - mine
        theirs = sum(map(_tasks_cpu, others)) - before
        self.wall.append(wall / count)
        self.cpu.append((mine + theirs) / 1e9 / count)


@asynccontextmanager
async def open_helper(spec: HelperSpec) -> AsyncIterator[Callable[[int], Awaitable[None]]]:
    """A started remote helper; the call: one ``square`` job."""
    helper = HelperProcess(spec, TIMEOUTS)
    async with trio.open_nursery() as nursery:
        await helper.start(nursery)

        async def call(i: int) -> None:
            await helper.run_job("square", i)

        await call(1)  # warm
        yield call
        await helper.shutdown()
    helper.discard()


@asynccontextmanager
async def open_echo(argv: list[str]) -> AsyncIterator[Callable[[int], Awaitable[None]]]:
    """A bare ``ssh -T`` running :data:`ECHO`; the call: one job frame echoed back."""
    session = new_session()
    process = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        stdin, stdout = process.stdin, process.stdout
        assert stdin is not None
        assert stdout is not None
        decoder = FrameDecoder(max_size=DEFAULT_MAX_REQUEST)

        async def call(i: int) -> None:
            frame = encode_positional(
                "job", session, i + 1, "square", None, i, None, DEFAULT_MAX_REQUEST
            )
            await stdin.send_all(frame)
            while not decoder.feed(await stdout.receive_some(65536)):
                pass

        await call(0)  # warm
        yield call
        await stdin.aclose()
        await process.wait()
    finally:
        process.kill()
        await process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                await stream.aclose()


async def round_trips(
    spec: HelperSpec, echo_argv: list[str], sshd: int
) -> tuple[PathClock, PathClock]:
    """One round: both paths open, batches of calls alternating between them."""
    async with open_helper(spec) as helper, open_echo(echo_argv) as echo:
        clocks = PathClock(sshd), PathClock(sshd)
        size = CALLS // BATCHES
        for batch in range(BATCHES):
            await clocks[0].batch(helper, batch * size, size)
            await clocks[1].batch(echo, batch * size, size)
    return clocks


async def helper_spawn(spec: HelperSpec) -> float:
    """Seconds from the spawn to *ready* of a remote helper (as ``supervisor.py``
    measures a local one)."""
    async with trio.open_nursery() as nursery:
        return await _spawn_to_ready(nursery, spec)


async def bare_spawn(argv: list[str]) -> float:
    """Seconds of a bare ``ssh -T host python -c pass``, to its exit."""
    start = time.perf_counter()
    await trio.run_process(argv)
    return time.perf_counter() - start


async def main(server: object) -> None:
    from remote_support import SSHServer

    assert isinstance(server, SSHServer)
    options = server.ssh_options()
    spec = HelperSpec(
        entry="run_sync_helper:main",
        host=server.destination,
        ssh_options=options,
        cwd=str(ROOT / "benchmarks"),
        env={"PYTHONPATH": str(ROOT)},  # the checkout, as a deployed project would be
    )
    echo_argv = server.ssh_argv(f"exec {sys.executable} -c {shlex.quote(ECHO)}")
    bare_argv = server.ssh_argv(f"exec {sys.executable} -c pass")
    trips: dict[str, list[float]] = {"helper": [], "echo": []}
    cpus: dict[str, list[float]] = {"helper": [], "echo": []}
    spawns: dict[str, list[float]] = {"helper": [], "bare": []}
    for _ in range(ROUNDS):  # interleaved: both see the same machine load
        clocks = await round_trips(spec, echo_argv, server.pid)
        for name, clock in zip(("helper", "echo"), clocks, strict=True):
            trips[name] += clock.wall
            cpus[name] += clock.cpu
        for _ in range(SPAWNS):
            spawns["helper"].append(await helper_spawn(spec))
            spawns["bare"].append(await bare_spawn(bare_argv))
    trip = {name: statistics.median(values) for name, values in trips.items()}
    cpu = {name: statistics.median(values) for name, values in cpus.items()}
    spawn = {name: statistics.median(values) for name, values in spawns.items()}
    print(
        f"remote helpers over a private sshd on loopback; {ROUNDS} rounds of"
        f" {BATCHES} batches a path, medians"
    )
    print(f"  round trip, remote helper      {trip['helper'] * 1e6:9.1f} us")
    print(f"  round trip, bare ssh -T echo   {trip['echo'] * 1e6:9.1f} us")
    print(f"  CPU of the path, remote helper {cpu['helper'] * 1e6:9.1f} us")
    print(f"  CPU of the path, bare echo     {cpu['echo'] * 1e6:9.1f} us")
    print(f"  spawn to ready, remote helper  {spawn['helper'] * 1e3:9.1f} ms")
    print(f"  bare ssh -T python -c pass     {spawn['bare'] * 1e3:9.1f} ms")
    ratio = trip["helper"] / trip["echo"]
    print(f"  round trip / echo              {ratio:9.2f}x (<= {TARGET}x) {verdict(ratio, TARGET)}")
    ratio = cpu["helper"] / cpu["echo"]
    print(f"  CPU of the path / echo         {ratio:9.2f}x (<= {TARGET}x) {verdict(ratio, TARGET)}")
    ratio = spawn["helper"] / spawn["bare"]
    print(f"  spawn to ready / bare ssh      {ratio:9.2f}x (<= {TARGET}x) {verdict(ratio, TARGET)}")


if __name__ == "__main__":
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if hasattr(os, "sched_setaffinity"):
        # The house method (supervisor.py): this process, the sshd and everything it
        # starts on one CPU, so both sides do the same work with the same switches.
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    with tempfile.TemporaryDirectory() as folder, private_sshd(Path(folder)) as sshd:
        trio.run(main, sshd)
