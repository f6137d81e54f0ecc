"""What the helper benchmarks measure per call: wall time, CPU time of this process,
and the CPU time of the child that served it (Linux ``/proc/PID/schedstat``)."""

from __future__ import annotations

import math
import statistics
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


def child_cpu(pid: int) -> float | None:
    """Seconds of CPU the process ``pid`` has used so far (Linux), else None."""
    try:
        with open(f"/proc/{pid}/schedstat") as file:
            return int(file.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


class Figures:
    """Per call, one value per measured round: ``wall``, ``cpu`` (this process),
    ``child`` (the serving child) and ``total`` (this process + the child), seconds."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.child: list[float] = []
        self.total: list[float] = []

    async def measure(self, run: Callable[[], Awaitable[object]], child_pid: int) -> None:
        """Time one round: ``await run()`` makes :attr:`calls` calls served by
        ``child_pid``."""
        child_before = child_cpu(child_pid)
        cpu_before, wall_before = time.process_time(), time.perf_counter()
        await run()
        wall, cpu = time.perf_counter() - wall_before, time.process_time() - cpu_before
        child_after = child_cpu(child_pid)
        self.wall.append(wall / self.calls)
        self.cpu.append(cpu / self.calls)
        if child_before is not None and child_after is not None:
            self.child.append((child_after - child_before) / self.calls)
            self.total.append((cpu + child_after - child_before) / self.calls)

    def median(self, kind: str) -> float:
        """The median of ``kind`` (``wall``, ``cpu``, ``child``, ``total``); NaN if none."""
        values = getattr(self, kind)
        return statistics.median(values) if values else math.nan
