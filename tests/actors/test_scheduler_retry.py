"""Retry policies (design §4.12): every field validated and honoured, zeros included.

The policy's arithmetic is tested directly; its effect on the scheduler actor under
``autojump_clock`` (``MockClock(autojump_threshold=0)``) with exact virtual times: each
test's executor records when every attempt started, relative to the first.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
import trio
from scheduler_support import running, settled

from actors import (
    Failed,
    Kind,
    Published,
    Retrying,
    RetryPolicy,
    RunInfo,
    SchedulerConfig,
)
from actors.errors import HelperExited, JobCancelled, PoolBusy, SourceUnreadable

# --- validation ------------------------------------------------------------------------------

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("initial_interval", -0.001),
        ("initial_interval", NAN),
        ("initial_interval", INF),
        ("initial_interval", True),
        ("initial_interval", "0.1"),
        ("initial_interval", 300.5),
        ("backoff_coefficient", 0),
        ("backoff_coefficient", 0.99),
        ("backoff_coefficient", NAN),
        ("backoff_coefficient", INF),
        ("backoff_coefficient", 1000.5),
        ("backoff_coefficient", True),
        ("maximum_interval", -1),
        ("maximum_interval", 0.01),  # below the initial interval (25 ms)
        ("maximum_interval", NAN),
        ("jitter", -0.1),
        ("jitter", 1.5),
        ("jitter", NAN),
        ("jitter", False),
        ("maximum_attempts", 0),
        ("maximum_attempts", -3),
        ("maximum_attempts", 2.0),
        ("maximum_attempts", True),
        ("maximum_crashes", 0),
        ("maximum_crashes", "2"),
        ("non_retryable_codes", "pool_busy"),  # a str is not a collection of codes
        ("non_retryable_codes", ["Pool-Busy"]),
        ("non_retryable_codes", [""]),
        ("non_retryable_codes", [7]),
        ("non_retryable_codes", 7),
        ("crash_codes", ["helper exited"]),
        ("attempt_timeout", 0),
        ("attempt_timeout", -1),
        ("attempt_timeout", 301),
        ("attempt_timeout", NAN),
        ("overall_timeout", 0),
        ("overall_timeout", INF),
        ("overall_timeout", False),
    ],
)
def test_nonsense_is_a_value_error_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        RetryPolicy(**{field: value})


def test_zeros_with_a_meaning_are_accepted():
    policy = RetryPolicy(initial_interval=0, maximum_interval=0, jitter=0, maximum_attempts=1)
    assert (policy.initial_interval, policy.maximum_interval, policy.jitter) == (0.0, 0.0, 0.0)
    assert policy.delay(1) == policy.delay(50) == 0.0
    assert RetryPolicy(maximum_attempts=None, maximum_crashes=None).maximum_attempts is None


def test_delays_grow_by_the_coefficient_up_to_the_maximum():
    policy = RetryPolicy(initial_interval=0.125, backoff_coefficient=3, maximum_interval=2)
    assert [policy.delay(n) for n in range(1, 7)] == [0.125, 0.375, 1.125, 2.0, 2.0, 2.0]
    assert RetryPolicy().delay(10**9) == 1.0  # no overflow, however many attempts
    constant = RetryPolicy(initial_interval=0.5, backoff_coefficient=1, maximum_interval=5)
    assert {constant.delay(n) for n in range(1, 20)} == {0.5}
    with pytest.raises(ValueError, match="attempt"):
        policy.delay(0)


@pytest.mark.parametrize(
    "policy",
    [
        RetryPolicy(initial_interval=1e-320, maximum_attempts=None),  # a subnormal interval
        RetryPolicy(initial_interval=5e-324, maximum_interval=300, backoff_coefficient=1.5),
    ],
)
def test_a_subnormal_initial_interval_grows_to_the_maximum_without_overflow(policy):
    # maximum_interval / initial_interval overflowed to inf, so the cap's shortcut never
    # applied and initial * coefficient ** (n - 1) raised OverflowError from about the
    # 1025th attempt: inside the scheduler core, where it crashed the scheduler actor.
    delays = [policy.delay(attempt) for attempt in (1, 1025, 1100, 1900, 10**6, 10**18)]
    assert delays[0] == policy.initial_interval
    assert delays == sorted(delays)  # grows, never past the maximum
    assert delays[-3:] == [policy.maximum_interval] * 3


def test_jitter_only_shortens_and_is_reproducible_with_a_seed():
    policy = RetryPolicy(initial_interval=1, maximum_interval=8, jitter=0.5)
    first = [policy.delay(n, random.Random(3)) for n in range(1, 6)]
    assert first == [policy.delay(n, random.Random(3)) for n in range(1, 6)]
    for n, delay in enumerate(first, start=1):
        plain = min(8.0, 2.0 ** (n - 1))
        assert plain * 0.5 <= delay <= plain
    with pytest.raises(ValueError, match="rng"):
        policy.delay(1)


@pytest.mark.parametrize(
    ("code", "attempts", "crashes", "reason"),
    [
        ("source_unreadable", 1, 0, None),
        ("bad_input", 1, 0, "non_retryable"),  # at once, whatever else
        ("helper_exited", 2, 2, "crash_loop"),
        ("helper_exited", 3, 1, "attempts_exhausted"),
        ("helper_exited", 3, 2, "crash_loop"),  # the crash limit is said first
        ("source_unreadable", 2, 1, None),
    ],
)
def test_one_rule_says_when_a_transient_failure_ends_the_work(code, attempts, crashes, reason):
    policy = RetryPolicy(maximum_attempts=3, maximum_crashes=2, non_retryable_codes={"bad_input"})
    assert policy.gives_up(code, attempts=attempts, crashes=crashes) == reason
    unlimited = RetryPolicy(maximum_attempts=None, maximum_crashes=None)
    assert unlimited.gives_up(code, attempts=10**6, crashes=10**6) is None


# --- the policy drives the actor (exact virtual times) -----------------------------------------


async def attempts(
    policy: RetryPolicy, outcomes: list[Any], *, grace: float = 0.0, **kwargs: Any
) -> tuple[list[float], list[object]]:
    """Run one work item of one kind under ``policy``; attempt n does ``outcomes[n-1]``
    (an exception to raise, ``"hang"`` to sleep forever, else a value to return). Returns
    the attempts' start times relative to the first, and the events."""
    starts: list[float] = []

    async def execute(job):
        starts.append(trio.current_time())
        outcome = outcomes[len(starts) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        if outcome == "hang":
            await trio.sleep_forever()
        return outcome

    config = SchedulerConfig(
        kinds=(Kind(name="job", retry=policy),), deadline_grace=grace, job_deadline=10
    )
    runs = [RunInfo(run_id=1, guid="g1", revision="r1")]
    async with running(execute, runs=runs, config=config, **kwargs) as (_a, _r, rec):
        await rec.until(settled(1))
    return [t - starts[0] for t in starts], rec.events


BUSY = PoolBusy("no helper free")  # transient, not a crash
CRASH = HelperExited("helper exited", exit_code=70)


def end(events: list[object]) -> Failed | Published:
    (last,) = [e for e in events if isinstance(e, Failed | Published)]
    return last


async def test_initial_interval_zero_retries_at_once(autojump_clock):
    policy = RetryPolicy(initial_interval=0, maximum_interval=0, maximum_attempts=3)
    starts, events = await attempts(policy, [BUSY, BUSY, b"ok"])
    assert starts == [0.0, 0.0, 0.0]
    assert [r.attempt for r in events if isinstance(r, Retrying)] == [1, 2]
    assert isinstance(end(events), Published)
    assert end(events).attempt == 3


async def test_coefficient_and_maximum_interval_set_exact_retry_times(autojump_clock):
    policy = RetryPolicy(
        initial_interval=0.125, backoff_coefficient=3, maximum_interval=2, maximum_attempts=6
    )
    starts, events = await attempts(policy, [BUSY] * 6)
    assert starts == [0.0, 0.125, 0.5, 1.625, 3.625, 5.625]
    failed = end(events)
    assert isinstance(failed, Failed)
    assert (failed.reason, failed.attempts, failed.error.code) == (
        "attempts_exhausted",
        6,
        "pool_busy",
    )


async def test_a_coefficient_of_one_keeps_the_interval_constant(autojump_clock):
    policy = RetryPolicy(initial_interval=0.25, backoff_coefficient=1, maximum_interval=0.25)
    starts, _events = await attempts(policy, [BUSY, BUSY, BUSY, b"ok"])
    assert starts == [0.0, 0.25, 0.5, 0.75]


async def test_jittered_delays_are_exact_with_a_seeded_rng(autojump_clock):
    policy = RetryPolicy(initial_interval=1, maximum_interval=8, jitter=0.5)
    starts, _events = await attempts(policy, [BUSY] * 4 + [b"ok"], rng=random.Random(11))
    expected, t, rng = [0.0], 0.0, random.Random(11)
    for n in range(1, 5):
        t += policy.delay(n, rng)
        expected.append(t)
    assert starts == expected
    assert starts != [0.0, 1.0, 3.0, 7.0, 15.0]  # the jitter did shorten them


async def test_maximum_attempts_one_never_retries(autojump_clock):
    starts, events = await attempts(RetryPolicy(maximum_attempts=1), [BUSY])
    assert starts == [0.0]
    assert not [e for e in events if isinstance(e, Retrying)]
    failed = end(events)
    assert (failed.reason, failed.attempts, failed.error.code) == (
        "attempts_exhausted",
        1,
        "pool_busy",
    )


async def test_no_attempt_limit_retries_until_success(autojump_clock):
    policy = RetryPolicy(maximum_attempts=None, initial_interval=0, maximum_interval=0)
    starts, events = await attempts(policy, [BUSY] * 40 + [b"ok"])
    assert len(starts) == 41
    assert end(events).attempt == 41


async def test_a_non_retryable_code_ends_the_item_at_once(autojump_clock):
    policy = RetryPolicy(non_retryable_codes={"pool_busy"})
    starts, events = await attempts(policy, [BUSY])
    assert starts == [0.0]
    assert (end(events).reason, end(events).attempts) == ("non_retryable", 1)


async def test_a_permanent_error_is_never_retried(autojump_clock):
    starts, events = await attempts(RetryPolicy(), [SourceUnreadable("no such table")])
    assert starts == [0.0]
    assert (end(events).reason, end(events).error.code) == ("permanent", "source_unreadable")


async def test_crashes_count_toward_maximum_crashes_and_other_errors_do_not(autojump_clock):
    policy = RetryPolicy(maximum_crashes=2, initial_interval=0.5, backoff_coefficient=1,
                         maximum_interval=0.5)  # fmt: skip
    starts, events = await attempts(policy, [CRASH, BUSY, BUSY, CRASH])
    assert starts == [0.0, 0.5, 1.0, 1.5]
    failed = end(events)
    assert (failed.reason, failed.attempts, failed.error.code) == ("crash_loop", 4, "helper_exited")


async def test_crash_codes_are_the_policys(autojump_clock):
    policy = RetryPolicy(maximum_crashes=1, crash_codes={"pool_busy"})
    starts, events = await attempts(policy, [BUSY])
    assert starts == [0.0]
    assert end(events).reason == "crash_loop"
    starts, events = await attempts(RetryPolicy(maximum_crashes=1, crash_codes=()), [CRASH, b"ok"])
    assert isinstance(end(events), Published)


async def test_the_attempt_timeout_stops_an_attempt_at_its_deadline(autojump_clock):
    policy = RetryPolicy(attempt_timeout=0.5)
    starts, events = await attempts(policy, ["hang", b"ok"])  # deadline_grace 0
    assert starts == [0.0, 0.525]
    (retry,) = [e for e in events if isinstance(e, Retrying)]
    assert (retry.error.code, retry.attempt) == ("deadline_exceeded", 1)
    assert "was stopped" in retry.error.message


async def test_the_deadline_grace_delays_the_stop_exactly(autojump_clock):
    policy = RetryPolicy(attempt_timeout=0.5)
    starts, _events = await attempts(policy, ["hang", b"ok"], grace=0.25)
    assert starts == [0.0, 0.775]


async def test_the_overall_deadline_ends_the_item_as_deadline_exceeded(autojump_clock):
    policy = RetryPolicy(attempt_timeout=1, overall_timeout=2.5, initial_interval=0.25,
                         backoff_coefficient=1, maximum_interval=0.25)  # fmt: skip
    seen: list[float] = []

    async def execute(job):
        seen.append((trio.current_time(), job.claim.deadline, job.claim.overall_deadline))
        await trio.sleep_forever()

    config = SchedulerConfig(kinds=(Kind(name="job", retry=policy),), deadline_grace=0)
    async with running(execute, runs=[RunInfo(run_id=1, guid="g", revision="r")],
                       config=config) as (_a, _r, rec):  # fmt: skip
        await rec.until(settled(1))
        done = trio.current_time()
    t0 = seen[0][0]
    assert [(s - t0, d - t0, o - t0) for s, d, o in seen] == [
        (0.0, 1.0, 2.5),
        (1.25, 2.25, 2.5),  # the third would start at 2.5: not before the end
    ]
    assert done - t0 == 2.25
    failed = end(rec.events)
    assert (failed.reason, failed.attempts, failed.error.code) == (
        "overall_deadline",
        2,
        "deadline_exceeded",
    )
    assert "last error deadline_exceeded" in failed.error.message


async def test_the_overall_deadline_cuts_the_last_attempts_deadline(autojump_clock):
    policy = RetryPolicy(attempt_timeout=1, overall_timeout=1.5, initial_interval=0.25)
    deadlines: list[float] = []

    async def execute(job):
        deadlines.append(job.claim.deadline - trio.current_time())
        await trio.sleep_forever()

    config = SchedulerConfig(kinds=(Kind(name="job", retry=policy),), deadline_grace=0)
    async with running(execute, runs=[RunInfo(run_id=1, guid="g", revision="r")],
                       config=config) as (_a, _r, rec):  # fmt: skip
        await rec.until(settled(1))
    assert deadlines == [1.0, 0.25]  # claimed at 1.25: 0.25 s left of the 1.5 s
    assert end(rec.events).reason == "overall_deadline"


async def test_past_the_attempt_limit_the_last_error_wins_over_the_deadline(autojump_clock):
    policy = RetryPolicy(maximum_attempts=2, overall_timeout=0.03)  # 2nd backoff: 50 ms
    starts, events = await attempts(policy, [BUSY, CRASH])
    assert starts == [0.0, 0.025]
    failed = end(events)
    assert (failed.reason, failed.error.code) == ("attempts_exhausted", "helper_exited")


async def test_an_attempt_whose_overall_deadline_passed_in_the_queue_does_not_run(autojump_clock):
    policy = RetryPolicy(overall_timeout=1.0, initial_interval=0.5)
    calls: list[tuple[str, float]] = []

    async def execute(job):
        calls.append((job.claim.kind, trio.current_time()))
        if job.claim.kind == "a":
            raise BUSY
        await trio.sleep(2.0)  # kind b holds the only worker past a's overall deadline
        return b"ok"

    config = SchedulerConfig(kinds=(Kind(name="a", retry=policy), Kind(name="b")))
    async with running(execute, runs=[RunInfo(run_id=1, guid="g", revision="r")],
                       config=config) as (_a, _r, rec):  # fmt: skip
        await rec.until(settled(1))
    t0 = calls[0][1]
    assert [(kind, t - t0) for kind, t in calls] == [("a", 0.0), ("b", 0.0)]  # a: never again
    (failed,) = [e for e in rec.events if isinstance(e, Failed)]
    assert (failed.kind, failed.reason, failed.attempts) == ("a", "overall_deadline", 2)
    assert "the overall deadline passed before attempt 2 could start" in failed.error.message


async def test_an_attempt_timeout_below_the_clocks_resolution_is_named_as_such(autojump_clock):
    # On trio's clock (seconds since an arbitrary start, often 1e4..2e5) an
    # attempt_timeout of 1e-12 s disappears: the claim's deadline is the claim's time.
    # The attempt failed saying "the overall deadline passed" with no overall deadline.
    autojump_clock.jump(100_000.0)
    policy = RetryPolicy(attempt_timeout=1e-12, maximum_attempts=1)
    calls: list[float] = []

    async def execute(job):
        calls.append(trio.current_time())
        return b"ok"

    config = SchedulerConfig(kinds=(Kind(name="a", retry=policy),))
    async with running(execute, runs=[RunInfo(run_id=1, guid="g", revision="r")],
                       config=config) as (_a, _r, rec):  # fmt: skip
        await rec.until(settled(1))
    assert calls == []
    (failed,) = [e for e in rec.events if isinstance(e, Failed)]
    assert failed.error.code == "deadline_exceeded"
    assert "overall" not in failed.error.message
    assert "its deadline passed before attempt 1 could start" in failed.error.message


async def test_a_stale_attempt_is_given_back(autojump_clock):
    policy = RetryPolicy(maximum_attempts=1, initial_interval=0.1)
    starts, events = await attempts(policy, [JobCancelled("superseded"), b"ok"])
    assert starts == [0.0, 0.1]
    assert end(events).attempt == 1  # the stale one did not count


# --- every end is an event and a logging record ----------------------------------------------


async def test_every_end_is_a_logging_record_with_its_fields(autojump_clock, caplog):
    caplog.set_level(logging.DEBUG, logger="actors.scheduler")
    policy = RetryPolicy(maximum_attempts=2, initial_interval=0)
    outcomes = {1: [BUSY, b"ok"], 2: [BUSY, BUSY]}

    async def execute(job):
        outcome = outcomes[job.claim.run_id].pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    config = SchedulerConfig(kinds=(Kind(name="job", retry=policy),))
    runs = [RunInfo(run_id=i, guid=f"g{i}", revision="r") for i in (1, 2)]
    async with running(execute, runs=runs, config=config) as (_a, _r, rec):
        await rec.until(settled(2))
    records = {
        (r.scheduler_event, r.run_id): r for r in caplog.records if hasattr(r, "scheduler_event")
    }
    published = records["published", 1]
    assert (published.levelname, published.kind, published.attempt) == ("INFO", "job", 2)
    failed = records["failed", 2]
    assert (failed.levelname, failed.reason, failed.attempt, failed.code) == (
        "WARNING",
        "attempts_exhausted",
        2,
        "pool_busy",
    )
    (retry,) = [e for e in rec.events if isinstance(e, Retrying) and e.run_id == 1]
    assert (records["retrying", 1].not_before, records["retrying", 1].code) == (
        retry.not_before,
        "pool_busy",
    )
    assert set(records) >= {("settled", 1), ("settled", 2), ("retrying", 2)}
