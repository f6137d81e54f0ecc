"""Capped exponential backoff (design §1.4, §4.6, §1.6)."""

from __future__ import annotations

import math
import random

import pytest

from actors import Backoff, BackoffTracker


def test_default_sequence_is_exact() -> None:
    policy = Backoff()
    got = [policy.delay(n) for n in range(1, 10)]
    assert got == [0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]


def test_formula_min_cap_base_times_two_to_the_n_minus_one() -> None:
    policy = Backoff(base=0.3, cap=2.0)
    for n in range(1, 12):
        assert policy.delay(n) == min(2.0, 0.3 * 2 ** (n - 1))


def test_huge_attempt_is_the_cap() -> None:
    assert Backoff().delay(10**6) == 1.0
    assert Backoff(base=1e-300, cap=300).delay(10**6) == 300.0


def test_attempt_cap_for_the_scheduler() -> None:
    # design §4.6: min(1 s, 25 ms * 2**(attempt-1)), attempt capped at 8.
    policy = Backoff(base=0.025, cap=300.0, max_attempt=8)
    assert policy.delay(8) == 0.025 * 2**7
    assert policy.delay(9) == policy.delay(8) == policy.delay(1000)


def test_jitter_is_seedable_and_bounded() -> None:
    policy = Backoff(jitter=0.5)
    first = [policy.delay(n, rng=random.Random(7)) for n in range(1, 9)]
    again = [policy.delay(n, rng=random.Random(7)) for n in range(1, 9)]
    assert first == again
    rng = random.Random(1)
    for n in range(1, 50):
        d = policy.delay(n, rng=rng)
        plain = Backoff().delay(n)
        assert plain * 0.5 <= d <= plain <= 1.0


def test_jitter_needs_a_random_source() -> None:
    with pytest.raises(ValueError, match="rng"):
        Backoff(jitter=0.1).delay(1)


def test_tracker_counts_and_resets_after_quiet_period() -> None:
    tracker = BackoffTracker(Backoff(reset_after=5.0))
    assert tracker.attempt == 0
    assert tracker.next_delay(0.0) == 0.025
    assert tracker.next_delay(1.0) == 0.05
    assert tracker.next_delay(5.9) == 0.1  # 4.9 s after the previous failure
    assert tracker.attempt == 3
    assert tracker.next_delay(10.9) == 0.025  # exactly 5 s quiet: back to attempt 1
    tracker.next_delay(11.0)
    tracker.reset()
    assert tracker.next_delay(11.0) == 0.025


def test_tracker_with_seeded_jitter_is_deterministic() -> None:
    policy = Backoff(jitter=1.0)
    a = BackoffTracker(policy, rng=random.Random(3))
    b = BackoffTracker(policy, rng=random.Random(3))
    assert [a.next_delay(t) for t in range(5)] == [b.next_delay(t) for t in range(5)]
    assert BackoffTracker(policy).next_delay(0.0) <= 0.025  # unseeded source by default


@pytest.mark.parametrize("field", ["base", "cap", "reset_after"])
@pytest.mark.parametrize(
    ("value", "why"),
    [
        (math.nan, "finite"),
        (math.inf, "finite"),
        (-1.0, "> 0"),
        (0, "> 0"),
        (True, "number of seconds"),
        (301, "<= 300"),
        ("1", "number of seconds"),
    ],
)
def test_durations_are_validated_by_name(field: str, value: object, why: str) -> None:
    with pytest.raises(ValueError, match=rf"^{field} must .*{why}"):
        Backoff(**{field: value})  # type: ignore[arg-type]


def test_other_validation() -> None:
    with pytest.raises(ValueError, match="cap must be >= base"):
        Backoff(base=2.0, cap=1.0)
    for jitter in (-0.1, 1.5, math.nan, True):
        with pytest.raises(ValueError, match="jitter"):
            Backoff(jitter=jitter)
    with pytest.raises(ValueError, match="max_attempt"):
        Backoff(max_attempt=0)
    with pytest.raises(ValueError, match="attempt"):
        Backoff().delay(0)
    with pytest.raises(ValueError, match="attempt"):
        Backoff().delay(True)
