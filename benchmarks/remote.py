"""Cost of a helper on another host against bare ``ssh -T`` in the same run (design §3.16).

Run from the repository root: ``python benchmarks/remote.py [--quick]`` (``--quick``:
fewer rounds and calls, a smoke run; quote a full run, about 30 s). It needs OpenSSH's
``sshd``: it starts a private one on loopback (``tests/remote_support.private_sshd``), so
"remote" is this machine over real SSH, as in the tests.

Everything (this process, the private sshd, the ssh clients, wardens and helpers) runs
pinned to one CPU, as ``supervisor.py`` pins its verdict. What is measured (targets in
brackets), each the median over interleaved rounds:

* **round trip** of a trivial job (``square``: an int in, an int out) through a remote
  helper (``HelperProcess.run_job`` over ``ssh -T`` and the warden), against the same
  job frames sent through a bare ``ssh -T`` to a remote Python program that echoes each
  frame back (stdlib only, ``os.read``/``os.write``) [helper <= 1.3x the echo];
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
from pathlib import Path

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

QUICK = "--quick" in sys.argv
ROUNDS = 3 if QUICK else 7
CALLS = 50 if QUICK else 400
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


async def helper_round_trip(spec: HelperSpec) -> float:
    """Seconds per job through a remote helper (its start is not counted)."""
    helper = HelperProcess(spec, TIMEOUTS)
    async with trio.open_nursery() as nursery:
        await helper.start(nursery)
        await helper.run_job("square", 1)  # warm
        start = time.perf_counter()
        for i in range(CALLS):
            await helper.run_job("square", i)
        elapsed = time.perf_counter() - start
        await helper.shutdown()
    helper.discard()
    return elapsed / CALLS


async def echo_round_trip(argv: list[str]) -> float:
    """Seconds per job frame echoed through a bare ``ssh -T``."""
    session = new_session()
    frames = [
        encode_positional("job", session, i + 1, "square", None, i, None, DEFAULT_MAX_REQUEST)
        for i in range(CALLS + 1)
    ]
    process = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        decoder = FrameDecoder(max_size=DEFAULT_MAX_REQUEST)

        async def one(frame: bytes) -> None:
            await process.stdin.send_all(frame)  # type: ignore[union-attr]
            while not decoder.feed(await process.stdout.receive_some(65536)):  # type: ignore[union-attr]
                pass

        await one(frames[0])  # warm
        start = time.perf_counter()
        for frame in frames[1:]:
            await one(frame)
        elapsed = time.perf_counter() - start
        await process.stdin.aclose()
        await process.wait()
    finally:
        process.kill()
        await process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                await stream.aclose()
    return elapsed / CALLS


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
    spawns: dict[str, list[float]] = {"helper": [], "bare": []}
    for _ in range(ROUNDS):  # interleaved: both see the same machine load
        trips["helper"].append(await helper_round_trip(spec))
        trips["echo"].append(await echo_round_trip(echo_argv))
        for _ in range(SPAWNS):
            spawns["helper"].append(await helper_spawn(spec))
            spawns["bare"].append(await bare_spawn(bare_argv))
    trip = {name: statistics.median(values) for name, values in trips.items()}
    spawn = {name: statistics.median(values) for name, values in spawns.items()}
    print(f"remote helpers over a private sshd on loopback; {ROUNDS} rounds, medians")
    print(f"  round trip, remote helper      {trip['helper'] * 1e6:9.1f} us")
    print(f"  round trip, bare ssh -T echo   {trip['echo'] * 1e6:9.1f} us")
    print(f"  spawn to ready, remote helper  {spawn['helper'] * 1e3:9.1f} ms")
    print(f"  bare ssh -T python -c pass     {spawn['bare'] * 1e3:9.1f} ms")
    ratio = trip["helper"] / trip["echo"]
    print(f"  round trip / echo              {ratio:9.2f}x (<= {TARGET}x) {verdict(ratio, TARGET)}")
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
