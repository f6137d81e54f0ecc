"""No wedged lanes (design §5.3): a render that ignores its abort flag cannot hold a lane,
nor the renderer's shutdown, past its deadline plus ``abandon_after``.

The wedged render functions block in real worker threads on a ``threading.Event`` the
test releases at the end. As in ``test_renderer.py``, the mock clock jumps to the next
deadline once trio has been idle for ``IDLE_BEFORE_JUMP`` real seconds (a quick render
needs a moment of real time to finish), so the assertions name exact virtual times.
"""

from __future__ import annotations

import threading
import time

import pytest
import trio
import trio.testing

from actors import (
    CancelRender,
    GetRendererStatistics,
    Render,
    Renderer,
    RendererConfig,
)
from actors.errors import ActorStopped, DeadlineExceeded, JobCancelled, JobStalled

WAIT = 10.0  # real seconds for things that happen at once unless the code is broken
IDLE_BEFORE_JUMP = 0.3  # real seconds


@pytest.fixture
def jump_clock():
    return trio.testing.MockClock(autojump_threshold=IDLE_BEFORE_JUMP)


class Wedge:
    """Render functions: ``"wedge"`` blocks, never checking its flag, until released;
    anything else draws at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)
        self.lock = threading.Lock()
        self.running = 0

    def __call__(self, observation, kind, options, check_cancel):
        if observation != "wedge":
            check_cancel()
            return b"drawn"
        with self.lock:
            self.running += 1
        self.entered.release()
        try:
            self.release.wait(WAIT)
            return b"too late"
        finally:
            with self.lock:
                self.running -= 1


def render(observation, deadline, **fields) -> Render:
    return Render(observation=observation, kind="thumbnail", deadline=deadline, **fields)


async def statistics(ref):
    return await ref.ask(GetRendererStatistics(), timeout=WAIT)


async def until_threads_end(ref, wedge: Wedge) -> None:
    """Release the wedged threads and wait (bounded) until the renderer saw them end."""
    wedge.release.set()
    with trio.fail_after(WAIT):
        # The threads report their end to the event loop on their own schedule.
        while (await statistics(ref)).abandoned:
            await trio.to_thread.run_sync(time.sleep, 0.01)


@pytest.fixture
def wedge():
    wedge = Wedge()
    try:
        yield wedge
    finally:
        wedge.release.set()  # no test leaves a thread blocked


async def test_a_wedged_render_is_abandoned_and_its_lane_replaced(
    nursery, jump_clock, wedge, caplog
):
    config = RendererConfig(threads=1, abandon_after=0.5)
    ref = await nursery.start(Renderer(wedge, config).run)
    start = trio.current_time()
    with pytest.raises(JobStalled) as info:
        await ref.ask(render("wedge", start + 2.0), timeout=WAIT)
    assert trio.current_time() == start + 2.5  # the deadline plus abandon_after
    assert info.value.details["abandoned"] is True
    (record,) = [r for r in caplog.records if getattr(r, "renderer_event", None) == "abandoned"]
    assert (record.levelname, record.kind, record.abandoned, record.lanes_lost) == (
        "WARNING",
        "thumbnail",
        1,
        0,
    )
    stats = await statistics(ref)
    assert (stats.abandoned, stats.abandoned_total, stats.lanes_lost) == (1, 1, 0)
    assert wedge.running == 1  # still blocked in its thread...
    done = await ref.ask(render("ok", trio.current_time() + 5.0), timeout=WAIT)
    assert done.data == b"drawn"  # ...and the one lane drew the next job meanwhile
    await until_threads_end(ref, wedge)
    stats = await statistics(ref)
    assert (stats.abandoned, stats.abandoned_total, stats.drawing, stats.active) == (0, 1, 0, 0)
    await ref.stop()


async def test_a_render_that_stops_making_progress_ends_stalled(nursery, jump_clock, wedge):
    # It never reached check_cancel after its abort flag went up at the deadline: no
    # activity for abandon_after seconds is a stall, not a missed deadline.
    config = RendererConfig(threads=1, abandon_after=0.5)
    ref = await nursery.start(Renderer(wedge, config).run)
    start = trio.current_time()
    with pytest.raises(JobStalled) as info:
        await ref.ask(render("wedge", start + 2.0, job_id="j"), timeout=WAIT)
    assert trio.current_time() == start + 2.5
    error = info.value
    assert (error.code, error.category) == ("job_stalled", "transient")
    assert not isinstance(error, DeadlineExceeded)
    assert error.details == {"kind": "thumbnail", "abandoned": True, "abandon_after": 0.5}
    stats = await statistics(ref)
    assert (stats.stalled, stats.deadline_exceeded, stats.failed) == (1, 0, 0)
    await until_threads_end(ref, wedge)
    await ref.stop()


async def test_past_the_cap_an_abandoned_thread_keeps_its_lane(nursery, jump_clock, wedge):
    config = RendererConfig(threads=1, max_abandoned=1, abandon_after=0.5)
    ref = await nursery.start(Renderer(wedge, config).run)
    for _ in range(2):
        with pytest.raises(JobStalled):
            await ref.ask(render("wedge", trio.current_time() + 1.0), timeout=WAIT)
    stats = await statistics(ref)
    assert (stats.abandoned, stats.lanes_lost, stats.drawing) == (2, 1, 0)
    start = trio.current_time()
    with pytest.raises(DeadlineExceeded, match="waiting for a lane"):
        await ref.ask(render("ok", start + 2.0), timeout=WAIT)
    assert trio.current_time() == start + 2.0
    await until_threads_end(ref, wedge)
    stats = await statistics(ref)
    assert (stats.abandoned, stats.lanes_lost) == (0, 0)
    done = await ref.ask(render("ok", trio.current_time() + 5.0), timeout=WAIT)
    assert done.data == b"drawn"  # the lane came back when its thread returned
    await ref.stop()


async def test_a_cancelled_wedged_render_is_abandoned_after_the_bound(nursery, jump_clock, wedge):
    ref = await nursery.start(Renderer(wedge, RendererConfig(abandon_after=0.75)).run)
    start = trio.current_time()
    outcome = {}

    async def asker():
        with pytest.raises(JobCancelled) as info:
            await ref.ask(render("wedge", start + 100.0, job_id="w"), timeout=WAIT)
        outcome["at"] = trio.current_time()
        outcome["error"] = info.value

    async with trio.open_nursery() as inner:
        inner.start_soon(asker)
        assert await trio.to_thread.run_sync(wedge.entered.acquire, True, WAIT)
        cancelled_at = trio.current_time()
        assert await ref.ask(CancelRender(job_id="w"), timeout=WAIT) is True
    assert outcome["at"] == cancelled_at + 0.75
    assert outcome["error"].code == "job_cancelled"
    assert (await statistics(ref)).abandoned == 1
    await until_threads_end(ref, wedge)
    await ref.stop()


async def test_a_wedged_render_cannot_hold_up_the_shutdown(nursery, jump_clock, wedge):
    ref = await nursery.start(Renderer(wedge, RendererConfig(threads=2)).run)
    outcome = {}

    async def asker():
        with pytest.raises(ActorStopped) as info:
            await ref.ask(render("wedge", trio.current_time() + 100.0), timeout=200)
        outcome["error"] = info.value

    async with trio.open_nursery() as inner:
        for _ in range(2):
            inner.start_soon(asker)
        for _ in range(2):
            assert await trio.to_thread.run_sync(wedge.entered.acquire, True, WAIT)
        start = trio.current_time()
        await ref.stop(grace=0.25)
        assert trio.current_time() == start + 0.25  # the grace, not the 100 s deadline
    assert outcome["error"].code == "actor_stopped"
    assert wedge.running == 2  # the threads were left behind, abandoned
