"""Capped exponential backoff, pure and deterministic (design §1.4, §4.6).

The delay before attempt ``n`` (1-based) is ``min(cap, base * 2**(n-1))``, defaults
base 25 ms and cap 1 s, so 0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, ... seconds.
Optional jitter shortens a delay by a random fraction (never lengthens it past the cap);
the random source is passed in, so tests can seed it. No trio: callers pass the time.

:class:`Backoff` is the frozen policy; :class:`BackoffTracker` counts attempts for one
thing that keeps failing and forgets them after a quiet period.
"""

from __future__ import annotations

import math
import random

import attrs

from ._config import duration_field, show_value, validate_count

__all__ = ["Backoff", "BackoffTracker"]


def _check_jitter(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        # (the range test also rejects NaN)
        raise ValueError(f"jitter must be a fraction between 0 and 1, got {show_value(value)}")


def _check_max_attempt(instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    if value is not None:
        validate_count("max_attempt", value, minimum=1)


@attrs.frozen(kw_only=True)
class Backoff:
    """A capped exponential backoff policy (design §1.4; the scheduler's retries, §4.6).

    Raises:
        ValueError: a duration is invalid (design §1.6; names the field), ``cap < base``,
            ``jitter`` is outside ``[0, 1]`` or ``max_attempt`` is not a positive int.
    """

    base: float = duration_field(0.025, allow_zero=False)
    """Delay before the first attempt, in seconds (trio clock), ``> 0``."""
    cap: float = duration_field(1.0, allow_zero=False)
    """Largest delay, in seconds, ``>= base``."""
    jitter: float = attrs.field(default=0.0, validator=_check_jitter)
    """Fraction ``0..1``: a delay ``d`` becomes uniform in ``[d * (1 - jitter), d]``."""
    reset_after: float = duration_field(5.0, allow_zero=False)
    """Quiet period in seconds: a failure this long after the previous one counts as
    attempt 1 again (used by :class:`BackoffTracker`)."""
    max_attempt: int | None = attrs.field(default=None, validator=_check_max_attempt)
    """Attempts above this count as this one (e.g. 8 for the scheduler, design §4.6)."""

    def __attrs_post_init__(self) -> None:
        if self.cap < self.base:
            raise ValueError(f"cap must be >= base ({self.base:g} s), got {self.cap!r}")

    def delay(self, attempt: int, *, rng: random.Random | None = None) -> float:
        """Return the delay in seconds before attempt number ``attempt`` (1-based).

        Args:
            attempt: 1 for the first retry; values above ``max_attempt`` are capped.
            rng: Random source for the jitter; required only when ``jitter > 0``
                (pass a seeded ``random.Random`` for determinism).

        Raises:
            ValueError: ``attempt`` is not an int ``>= 1``, or jitter is configured and
                ``rng`` is None.
        """
        validate_count("attempt", attempt, minimum=1)
        if self.max_attempt is not None:
            attempt = min(attempt, self.max_attempt)
        try:
            raw = math.ldexp(self.base, min(attempt - 1, 4096))
        except OverflowError:
            raw = math.inf
        delay = min(self.cap, raw)
        if self.jitter:
            if rng is None:
                raise ValueError("rng is required when jitter > 0")
            delay *= 1.0 - self.jitter * rng.random()
        return delay


class BackoffTracker:
    """Counts consecutive failures of one thing and gives the delay for each (design §1.4).

    Pure: the caller passes the current time (seconds on its clock, e.g.
    ``trio.current_time()``), so it works under a ``MockClock`` and in sans-io code.

    Args:
        policy: The backoff policy.
        rng: Random source for the policy's jitter (a seeded ``random.Random`` for
            deterministic tests); defaults to a fresh unseeded one when jitter is on.
    """

    __slots__ = ("_attempt", "_last_failure", "_policy", "_rng")

    def __init__(self, policy: Backoff, *, rng: random.Random | None = None) -> None:
        self._policy = policy
        self._rng = rng if rng is not None or not policy.jitter else random.Random()
        self._attempt = 0
        self._last_failure: float | None = None

    @property
    def policy(self) -> Backoff:
        """The policy in use."""
        return self._policy

    @property
    def attempt(self) -> int:
        """The number of the last attempt handed out (0 before any failure)."""
        return self._attempt

    def next_delay(self, now: float) -> float:
        """Record a failure at time ``now`` and return the delay before the next attempt.

        If at least ``policy.reset_after`` seconds passed since the previous failure,
        the count starts again at attempt 1 (the quiet-period reset).

        Args:
            now: Current time in seconds, on the same clock for every call.

        Returns:
            Delay in seconds.
        """
        last = self._last_failure
        if last is not None and now - last >= self._policy.reset_after:
            self._attempt = 0
        self._last_failure = now
        self._attempt += 1
        return self._policy.delay(self._attempt, rng=self._rng)

    def reset(self) -> None:
        """Forget all failures: the next delay is the first attempt's."""
        self._attempt = 0
        self._last_failure = None

    def __repr__(self) -> str:
        return f"<BackoffTracker attempt={self._attempt} {self._policy!r}>"
