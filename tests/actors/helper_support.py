"""Shared pieces of the helper-process tests: specs, timeouts and leak checks.

Helper tests use real subprocesses, so they run on the real clock with short timeouts
(contributing §F.3), and every test checks afterwards that no child and no zombie is left.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
from process_support import assert_no_children as assert_no_children
from process_support import children as children
from process_support import pid_gone

from actors import HelperSpec, HelperTimeouts
from actors._helpers._process._containment import available_mode

HERE = Path(__file__).resolve().parent
#: The test entry point; the child runs with ``tests/actors`` as its working directory.
ENTRY = "helper_entry:main"

#: Short deadlines for tests. Startup and reply are generous, and grace/terminate leave
#: room for a loaded machine (two cores, several test runs at once) to schedule the
#: child: tests that need tighter steps set their own timeouts.
FAST = HelperTimeouts(
    startup=10.0, reply=10.0, cancel_grace=0.5, shutdown=1.0, terminate=0.5, kill=0.5
)

#: Child-script source of ``next_frame()``: the body of the next frame on stdin (exit 0
#: at end of input). Needs ``os`` and ``sys`` imported.
FRAME_READER = r"""
buffer = b""
def next_frame():
    global buffer
    while True:
        if len(buffer) >= 4:
            size = int.from_bytes(buffer[:4], "big")
            if len(buffer) >= 4 + size:
                body, buffer = buffer[4 : 4 + size], buffer[4 + size :]
                return body
        chunk = os.read(0, 65536)
        if not chunk:
            sys.exit(0)
        buffer += chunk
"""

#: A tiny raw-argv helper: answers *ready*, then exits with status 3 at its first job.
#: Stdlib only (not even json: the startup frame is turned into a ready frame by setting
#: two bytes of its envelope head, the kind and the status; see
#: ``protocol._envelope_wire``) and started with ``-I -S``, so one crash/restart cycle
#: is cheap.
TINY_CRASHER = r"""
import os, sys
"""
TINY_CRASHER += FRAME_READER
TINY_CRASHER += r"""
ready = bytearray(next_frame())
ready[2] = 2  # kind: ready
ready[3] = 1  # status: ok
os.write(1, len(ready).to_bytes(4, "big") + ready)
next_frame()
os._exit(3)
"""


def spec(**fields: object) -> HelperSpec:
    """The test entry's spec, with ``fields`` overriding the defaults."""
    fields.setdefault("entry", ENTRY)
    fields.setdefault("cwd", str(HERE))
    return HelperSpec(**fields)  # type: ignore[arg-type]


async def wait_gone(pid: int, within: float = 2.0) -> None:
    """Wait (bounded, real clock) until ``pid`` is gone; fail after ``within`` s."""
    with trio.fail_after(within):
        # A foreign process's exit has no event to wait on: poll /proc, bounded.
        while not pid_gone(pid):  # noqa: ASYNC110
            await trio.sleep(0.01)


def open_fds() -> int:
    """Number of this process's open file descriptors."""
    return len(os.listdir("/proc/self/fd"))


def has_containment(mode: str) -> bool:
    """True if this machine offers containment ``mode`` (``cgroup`` needs cgroup v2)."""
    try:
        return available_mode(mode) == mode
    except ValueError:
        return False


#: The containment modes a helper's tree can have here, as test parameters.
MODES = [
    pytest.param(
        "cgroup", marks=pytest.mark.skipif(not has_containment("cgroup"), reason="no cgroup v2")
    ),
    "tree",
]
