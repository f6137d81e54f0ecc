"""One execution per (run, kind) and truthful deadlines in the scheduler actor (§4.13, §4.14).

Under ``autojump_clock`` with exact virtual times.
"""

from __future__ import annotations

import math
import random
import threading
import time

import pytest
import trio
import trio.testing
from scheduler_support import config, running, settled

from actors import (
    DiskCache,
    Failed,
    Kind,
    PayloadCache,
    Produced,
    Published,
    Retrying,
    RetryPolicy,
    RunInfo,
    SchedulerConfig,
    SwitchSource,
)

ONE = [RunInfo(run_id=1, guid="g1", revision="r1")]


def single(**policy) -> SchedulerConfig:
    return SchedulerConfig(
        kinds=(Kind(name="job", retry=RetryPolicy(**policy)),), deadline_grace=0, workers=4
    )


# --- at most one execution per (run, kind) (design §4.13) -------------------------------------


async def test_a_retry_waits_until_the_stopped_attempt_has_really_ended(autojump_clock):
    spans: list[list[float]] = []

    async def execute(job):
        span = [trio.current_time()]
        spans.append(span)
        try:
            if job.claim.attempt == 1:
                await trio.sleep_forever()
            return b"ok"
        finally:
            if job.claim.attempt == 1:
                with trio.CancelScope(shield=True):  # it keeps running after the cancel
                    await trio.sleep(0.75)
            span.append(trio.current_time())

    async with running(execute, runs=ONE, config=single(attempt_timeout=1.0)) as (
        _a,
        _r,
        rec,
    ):
        await rec.until(settled(1))
    t0 = spans[0][0]
    assert [[t - t0 for t in span] for span in spans] == [[0.0, 1.75], [1.775, 1.775]]
    (retry,) = rec.of(Retrying)
    assert retry.error.code == "deadline_exceeded"
    assert retry.not_before - t0 == 1.775  # the backoff counts from the real end


async def test_a_new_generation_of_the_same_run_waits_for_the_old_execution(autojump_clock):
    spans: dict[int, list[float]] = {}

    async def execute(job):
        generation = job.claim.generation
        spans[generation] = [trio.current_time()]
        try:
            if generation == 0:
                await trio.sleep_forever()
            return b"ok"
        finally:
            if generation == 0:
                with trio.CancelScope(shield=True):
                    await trio.sleep(2.0)  # stopping takes 2 s (a cancel ladder)
            spans[generation].append(trio.current_time())

    async with running(execute, runs=ONE, config=single()) as (actor, ref, rec):
        await trio.sleep(1.0)
        await ref.ask(SwitchSource(source="same.db", runs=ONE), timeout=1.0)
        await trio.sleep(0.5)
        assert actor.scheduler.statistics().held == 1
        await rec.until(settled(1))
    t0 = spans[0][0]
    assert [t - t0 for t in spans[0]] == [0.0, 3.0]
    assert [t - t0 for t in spans[1]] == [3.0, 3.0]  # not at 1.0, when it was switched
    assert [p.generation for p in rec.of(Published)] == [1]


# --- truthful deadlines (design §4.14) -----------------------------------------------------------


async def outcome_of(produce_at: float, deliver_after: float, grace: float) -> object:
    """One attempt (deadline 1 s) whose worker side finishes ``produce_at`` seconds after
    the deadline and whose result reaches the executor ``deliver_after`` seconds later;
    returns the event that ended it."""

    async def execute(job):
        await trio.sleep_until(job.claim.deadline + produce_at)
        produced = trio.current_time()
        await trio.sleep(deliver_after)  # in flight: a thread's result, a reply
        return Produced(b"result", at=produced)

    policy = RetryPolicy(attempt_timeout=1.0, maximum_attempts=1)
    cfg = SchedulerConfig(kinds=(Kind(name="job", retry=policy),), deadline_grace=grace)
    async with running(execute, runs=ONE, config=cfg) as (_a, _r, rec):
        await rec.until(settled(1))
    (end,) = [e for e in rec.events if isinstance(e, Published | Failed)]
    return end


async def test_a_result_produced_in_time_but_noticed_late_is_a_success(autojump_clock):
    end = await outcome_of(-0.1, 0.3, grace=0.5)  # produced at 0.9, noticed at 1.2
    assert isinstance(end, Published)


async def test_a_result_produced_exactly_at_the_deadline_is_a_success(autojump_clock):
    assert isinstance(await outcome_of(0.0, 0.0, grace=0.5), Published)


async def test_a_production_time_after_the_return_counts_as_the_return(autojump_clock):
    # A result cannot be produced after execute returned it. An executor that stamps
    # its result with another clock (time.time(), some 1.7e9 s ahead of trio's) had
    # every result judged "came 1.7e+09 s after its deadline" and retried to failure.
    async def execute(job):
        await trio.sleep(0.5)
        return Produced(b"result", at=time.time())

    policy = RetryPolicy(attempt_timeout=1.0, maximum_attempts=1)
    cfg = SchedulerConfig(kinds=(Kind(name="job", retry=policy),), deadline_grace=0)
    async with running(execute, runs=ONE, config=cfg) as (_a, _r, rec):
        await rec.until(settled(1))
    (end,) = [e for e in rec.events if isinstance(e, Published | Failed)]
    assert isinstance(end, Published)


@pytest.mark.parametrize("at", [math.nan, math.inf, -math.inf])
def test_a_production_time_must_be_a_finite_time(at):
    # -inf made any result, however late, a success; inf any result a failure.
    with pytest.raises(ValueError, match="at"):
        Produced(b"result", at=at)


async def test_a_result_produced_after_the_deadline_is_deadline_exceeded(autojump_clock):
    end = await outcome_of(0.1, 0.1, grace=0.5)
    assert isinstance(end, Failed)
    assert end.error.code == "deadline_exceeded"
    assert "came 0.1 s after its deadline" in end.error.message


async def test_an_attempt_still_waiting_at_the_grace_end_is_stopped(autojump_clock):
    end = await outcome_of(-0.1, 0.7, grace=0.5)  # would arrive at 1.6, stopped at 1.5
    assert isinstance(end, Failed)
    assert "was stopped" in end.error.message


async def test_the_deadline_race_mislabels_nothing_in_1000_attempts(autojump_clock):
    """1 000 attempts racing their deadlines: each worker side finishes between 0.3 s
    before and 0.3 s after the deadline, its result reaching the executor 0 to 0.8 s
    later (grace 0.5 s). Success exactly when produced by the deadline and handed back
    before the stop; never a success labelled deadline_exceeded, nor the reverse."""
    rng = random.Random(20240613)
    grace = 0.5
    plan = {
        run_id: (rng.randrange(-30, 31) / 100, rng.randrange(0, 80) / 100 + 0.005)
        for run_id in range(1, 1001)
    }

    async def execute(job):
        produce_at, deliver_after = plan[job.claim.run_id]
        await trio.sleep_until(job.claim.deadline + produce_at)
        produced = trio.current_time()
        await trio.sleep(deliver_after)
        return Produced(job.claim.run_id, at=produced)

    policy = RetryPolicy(attempt_timeout=1.0, maximum_attempts=1)
    cfg = SchedulerConfig(
        kinds=(Kind(name="job", retry=policy),), deadline_grace=grace, workers=1000
    )
    runs = [RunInfo(run_id=i, guid=f"g{i}", revision="r") for i in plan]
    async with running(execute, runs=runs, config=cfg, events_capacity=1024) as (_a, _r, rec):
        await rec.until(settled(1000))
    labels = {e.run_id: "ok" for e in rec.of(Published)}
    labels.update({e.run_id: e.error.code for e in rec.of(Failed)})
    truth = {
        run_id: "ok" if produce_at <= 0 and produce_at + deliver_after < grace else "late"
        for run_id, (produce_at, deliver_after) in plan.items()
    }
    mislabelled = [
        run_id
        for run_id in plan
        if (labels[run_id] == "ok") != (truth[run_id] == "ok")
        or (labels[run_id] != "ok" and labels[run_id] != "deadline_exceeded")
    ]
    assert mislabelled == []
    assert 300 < sum(label == "ok" for label in labels.values()) < 700  # both sides raced


class HeldDisk(DiskCache):
    """A disk cache whose writes wait, in the worker thread, until the test lets go."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.entered = threading.Event()
        self.release = threading.Event()

    def put(self, key, data, **options):
        self.entered.set()
        assert self.release.wait(10)
        return super().put(key, data, **options)


async def test_cache_writes_are_outside_the_attempts_deadline(tmp_path, mock_clock):
    """The write is still going 0.3 s (virtual, moved by hand) into an attempt with a
    0.1 s deadline: the attempt has already ended, so nothing is retried or failed."""

    async def execute(job):
        return b"payload"

    cache = PayloadCache()
    cache.disk = disk = HeldDisk(tmp_path, max_bytes=100_000)
    cfg = config(
        kinds=(Kind(name="thumbnail", cached=True, retry=RetryPolicy(attempt_timeout=0.1)),),
        deadline_grace=0,
    )
    async with running(execute, runs=ONE, config=cfg, payload_cache=cache) as (_a, _r, rec):
        assert await trio.to_thread.run_sync(disk.entered.wait, 10)
        mock_clock.jump(0.3)
        await trio.testing.wait_all_tasks_blocked()  # a deadline that fired has acted
        disk.release.set()
        await rec.until(settled(1), seconds=10)
    assert [p.result for p in rec.of(Published)] == [b"payload"]
    assert not rec.of(Retrying)
    assert cache.disk.statistics().entries == 1
