"""``run_sync`` retries and ``map`` (design §3.14).

Real helpers on the real clock for crashes, order, the bound and cancel-on-failure; the
map's scheduling itself (:func:`ordered_map`) on the MockClock with exact times.
"""

from __future__ import annotations

import functools
import math
import os
from typing import TYPE_CHECKING

import pytest
import run_sync_functions as fns
import trio
import trio.testing
from helper_support import FAST, assert_no_children

from actors import (
    FunctionRaised,
    HelperExited,
    HelperSpec,
    RetryPolicy,
    open_helper_pool,
)
from actors._helpers._pool._map import ordered_map

if TYPE_CHECKING:
    from pathlib import Path

CALLS = HelperSpec(entry="actors.helper:serve_calls", name="calls")
QUICK = RetryPolicy(initial_interval=0.01, maximum_interval=0.01, maximum_crashes=None)


@pytest.fixture
def _no_child_left():
    yield
    assert_no_children()


def retried(stream) -> list[dict]:
    found = []
    while (event := stream.receive_nowait()) is not None:
        if event.kind == "call_retried":
            found.append(event.details)
    return found


@pytest.mark.usefixtures("_no_child_left")
async def test_a_crash_is_retried_and_the_next_attempt_succeeds(tmp_path):
    marker = str(tmp_path / "crashed")
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        with pool.events.subscribe(kinds={"call_retried"}) as stream:
            assert await pool.run_sync(fns.crash_once, marker, retry=QUICK) == "second time lucky"
            events = retried(stream)
        statistics = pool.statistics()
    assert events == [
        {
            "function": "run_sync_functions:crash_once",
            "attempt": 1,
            "code": "helper_exited",
            "delay": 0.01,
        }
    ]
    assert (statistics.jobs_failed, statistics.jobs_succeeded, statistics.spawns) == (1, 1, 2)


@pytest.mark.usefixtures("_no_child_left")
async def test_crashes_count_as_attempts_until_the_policy_gives_up():
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        with pool.events.subscribe(kinds={"call_retried"}) as stream:
            three = RetryPolicy(initial_interval=0.01, maximum_attempts=3, maximum_crashes=None)
            with pytest.raises(HelperExited) as caught:
                await pool.run_sync(fns.crash, 5, retry=three)
            assert [e["attempt"] for e in retried(stream)] == [1, 2]
            with pytest.raises(HelperExited):  # maximum_crashes (2) ends it sooner
                await pool.run_sync(fns.crash, 5, retry=RetryPolicy(initial_interval=0.01))
            assert [e["attempt"] for e in retried(stream)] == [1]
        assert pool.statistics().jobs_failed == 5
    assert caught.value.details["exit_code"] == 5


@pytest.mark.usefixtures("_no_child_left")
async def test_permanent_errors_and_non_retryable_codes_are_not_retried():
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        with pytest.raises(FunctionRaised):
            await pool.run_sync(fns.fail, "always", retry=QUICK)  # permanent
        with pytest.raises(FunctionRaised):  # transient, but its code is excluded
            await pool.run_sync(
                fns.fail_transiently,
                "busy",
                retry=RetryPolicy(initial_interval=0.01, non_retryable_codes={"disk_busy"}),
            )
        with pytest.raises(FunctionRaised):  # transient: retried until the attempts end
            await pool.run_sync(
                fns.fail_transiently,
                "busy",
                retry=RetryPolicy(initial_interval=0.01, maximum_attempts=3),
            )
        assert pool.statistics().jobs_started == 5


@pytest.mark.usefixtures("_no_child_left")
async def test_map_returns_results_in_input_order():
    async with open_helper_pool(CALLS, size=3, timeouts=FAST) as pool:
        assert await pool.map(fns.square, range(20)) == [x * x for x in range(20)]
        assert await pool.map(fns.add, [1, 2, 3], [10, 20, 30, 40]) == [11, 22, 33]
        assert await pool.map(fns.square, []) == []
        with pytest.raises(ValueError, match="limit must be"):
            await pool.map(fns.square, [1], limit=0)


def release_gates(folder: Path, items: int) -> None:
    """Open each call's gate for writing and close it (a worker thread: opening a FIFO
    for writing waits for its reader). Calls 1 and 0 are both held at their gates
    before either is let go, so the first two calls overlap for certain."""
    with open(folder / "gate-1", "wb"), open(folder / "gate-0", "wb"):
        pass
    for item in range(2, items):
        with open(folder / f"gate-{item}", "wb"):
            pass


@pytest.mark.usefixtures("_no_child_left")
async def test_map_never_has_more_in_flight_than_its_limit(tmp_path: Path):
    for item in range(6):
        os.mkfifo(tmp_path / f"gate-{item}")
    release = functools.partial(release_gates, tmp_path, 6)
    async with open_helper_pool(CALLS, size=4, timeouts=FAST) as pool:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    functools.partial(trio.to_thread.run_sync, release, abandon_on_cancel=True)
                )
                runs = await pool.map(fns.gated, range(6), [str(tmp_path)] * 6, limit=2)
    assert [item for item, _ in runs] == list(range(6))
    # No call started while two others were in flight; and two did overlap.
    assert max(in_flight for _, in_flight in runs) == 2


@pytest.mark.usefixtures("_no_child_left")
async def test_a_failing_item_cancels_the_others_and_starts_no_more():
    async with open_helper_pool(CALLS, size=2, timeouts=FAST) as pool:
        with pool.events.subscribe(kinds={"job_started", "cancel_sent"}) as stream:
            start = trio.current_time()
            with pytest.raises(FunctionRaised) as caught:
                await pool.map(fns.fail_at, range(10), [1] * 10)
            elapsed = trio.current_time() - start
            kinds = []
            while (event := stream.receive_nowait()) is not None:
                kinds.append(event.kind)
    assert caught.value.remote_message == "item 1 is bad"
    assert kinds.count("job_started") == 2  # items 0 and 1; no item after the failure
    assert kinds.count("cancel_sent") == 1  # item 0, stopped through its ladder
    assert elapsed < FAST.ladder + 2.0  # item 0 never returns by itself


# --- ordered_map on the MockClock -------------------------------------------------------


class Boom(FunctionRaised):
    def __init__(self, item: int) -> None:
        super().__init__(f"item {item}", remote_type="X", remote_message="", remote_traceback="")


async def test_ordered_map_bounds_orders_and_reads_lazily(autojump_clock):
    in_flight = peak = 0
    started: list[tuple[int, float]] = []
    read: list[int] = []

    def items():
        for item in range(5):
            read.append(item)
            yield (item,)

    async def call(args: tuple[int]) -> int:
        nonlocal in_flight, peak
        (item,) = args
        started.append((item, trio.current_time()))
        in_flight += 1
        peak = max(peak, in_flight)
        await trio.sleep(5 - item)  # later items finish sooner
        in_flight -= 1
        return item * 10

    assert await ordered_map(call, items(), 2) == [0, 10, 20, 30, 40]
    assert peak == 2
    # Each worker starts the next item when its own ends.
    assert started == [(0, 0.0), (1, 0.0), (2, 4.0), (3, 5.0), (4, 7.0)]
    assert read == [0, 1, 2, 3, 4]


async def test_ordered_map_cancels_the_rest_at_the_first_failure(autojump_clock):
    ended: list[tuple[int, str, float]] = []

    async def call(args: tuple[int]) -> int:
        (item,) = args
        try:
            await trio.sleep({0: 10, 1: 1, 2: 3}.get(item, 1))
            if item in (1, 2):
                raise Boom(item)
        except trio.Cancelled:
            ended.append((item, "cancelled", trio.current_time()))
            raise
        ended.append((item, "done", trio.current_time()))
        return item

    with pytest.raises(Boom, match="item 1"):
        await ordered_map(call, ((i,) for i in range(100)), 3)
    assert trio.current_time() == 1.0
    assert sorted(ended) == [(0, "cancelled", 1.0), (2, "cancelled", 1.0)]


async def test_ordered_map_is_cancelled_with_its_caller(autojump_clock):
    async def call(args: tuple[int]) -> int:
        await trio.sleep(math.inf)
        return 0

    with trio.move_on_after(2) as scope:
        await ordered_map(call, ((i,) for i in range(10)), 4)
    assert scope.cancelled_caught
    assert trio.current_time() == 2.0
