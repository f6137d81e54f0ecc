"""The renderer's lanes: worker threads that a wedged render cannot hold (design §5.3).

A render runs in a worker thread; a thread cannot be killed. A render that ignores its
abort flag is therefore **abandoned**: ``abandon_after`` seconds after its deadline (or
its cancel) the job ends without it, and its lane is handed to a replacement thread,
as long as fewer than ``max_abandoned`` abandoned threads are still running. Past that
cap an abandoned thread keeps its lane until it returns, so a renderer whose render
function keeps wedging loses lanes instead of starting threads without bound. Trio's
worker threads are daemon threads, so an abandoned one never holds up the process's
exit.

Lanes are a :class:`trio.CapacityLimiter` held by the job's task on behalf of its
:class:`JobThread`; the thread reports its own end back to the event loop
(``run_sync_soon``), which is where an abandoned thread's lane is given back.
"""

from __future__ import annotations

import threading

import trio

__all__ = ["JobThread", "Lanes"]


class JobThread:
    """One render job's worker-thread state, shared between the loop and the thread."""

    __slots__ = ("abandoned", "finished", "holds_lane", "kept", "lock", "produced_at",
                 "replaced", "started")  # fmt: skip

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = False
        """The thread began running (set by the thread, under ``lock``)."""
        self.abandoned = False
        """The job gave up waiting for the thread (set by the loop, under ``lock``)."""
        self.finished = False
        """The thread's end reached the event loop."""
        self.holds_lane = False
        self.replaced = False
        """Abandoned while running, its lane went to a replacement thread."""
        self.kept = False
        """Abandoned while running past the cap: it keeps its lane until it returns."""
        self.produced_at: float | None = None
        """When the thread had the payload, seconds on trio's clock (set by the thread)."""


class Lanes:
    """``threads`` lanes plus replacements for up to ``max_abandoned`` abandoned threads.

    Every method runs on the event loop's thread.

    Args:
        threads: Lanes (render functions running at once).
        max_abandoned: Abandoned threads still running that get a replacement lane.
    """

    def __init__(self, threads: int, max_abandoned: int) -> None:
        self.limiter = trio.CapacityLimiter(threads)
        # Passed to trio.to_thread: bounds the real threads (lanes plus replaced ones),
        # never contended; keeps abandoned threads off trio's process-wide default.
        self.threads = trio.CapacityLimiter(threads + max_abandoned)
        self.max_abandoned = max_abandoned
        self.replaced = 0
        """Abandoned threads still running whose lane went to a replacement."""
        self.lost = 0
        """Abandoned threads still running that kept their lane (past the cap)."""
        self.abandoned_total = 0

    @property
    def abandoned(self) -> int:
        """Abandoned threads still running."""
        return self.replaced + self.lost

    async def acquire(self, job: JobThread) -> None:
        """Wait for a lane for ``job`` (a checkpoint)."""
        await self.limiter.acquire_on_behalf_of(job)
        job.holds_lane = True

    def release(self, job: JobThread) -> None:
        """The job's task is done with its lane (unless its abandoned thread kept it)."""
        if job.holds_lane and not job.kept:
            self._free(job)

    def give_up(self, job: JobThread) -> bool:
        """The job stops waiting for its thread: abandon it if it runs (design §5.3).

        Returns:
            True if the thread was running (now abandoned), False if it had ended or
            never started (it then sees ``abandoned`` and skips the render function).
        """
        with job.lock:
            job.abandoned = True
            started = job.started
        if not started or job.finished:
            return False
        self.abandoned_total += 1
        if self.replaced < self.max_abandoned:
            self.replaced += 1
            job.replaced = True
            self._free(job)  # the replacement lane
        else:
            self.lost += 1
            job.kept = True  # past the cap: the lane stays with the wedged thread
        return True

    def thread_ended(self, job: JobThread) -> None:
        """The job's thread returned (called on the loop by the thread, via the token)."""
        job.finished = True
        if job.replaced:
            job.replaced = False
            self.replaced -= 1
        elif job.kept:
            job.kept = False
            self.lost -= 1
            self._free(job)

    def _free(self, job: JobThread) -> None:
        job.holds_lane = False
        self.limiter.release_on_behalf_of(job)
