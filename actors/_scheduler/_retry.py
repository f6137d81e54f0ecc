"""Retry policy of one kind of work: backoff, attempt limits, deadlines (design §4.12).

Modelled on Temporal's ``RetryPolicy``: an initial interval grown by a backoff
coefficient up to a maximum interval, optional jitter, a maximum number of attempts,
error codes that are never retried, plus the per-attempt deadline (start-to-close) and
an overall deadline across all attempts (schedule-to-close). Pure data and arithmetic:
no trio, no clock; the random source for the jitter is passed in.

Every explicit zero that has a meaning is honoured: ``initial_interval=0`` retries at
once, ``maximum_attempts=1`` never retries, ``jitter=0`` is exact. A value without a
meaning (a negative interval, zero attempts, a coefficient below 1, a maximum interval
below the initial one) raises ``ValueError`` naming the field.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

import attrs

from .._core import show_value, validate_count, validate_duration

if TYPE_CHECKING:
    import random

__all__ = ["CRASH_CODES", "RetryPolicy"]

#: Error codes that mean "the attempt took its helper process down" (design §3.5-§3.7):
#: such attempts also count toward ``maximum_crashes`` (design §4.12).
CRASH_CODES: Final = frozenset(
    {"helper_exited", "forced_termination", "reply_timeout", "protocol_violation"}
)

#: Largest backoff coefficient accepted: beyond it every retry after the first waits
#: the maximum interval anyway.
MAX_COEFFICIENT: Final = 1000.0


def _float_unless_bool(value: object) -> object:
    # Converters run before validators: keep bools and junk for the validator to name.
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**53:
        return float(value)
    return value


def _duration(*, allow_zero: bool) -> Any:
    def check(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
        validate_duration(attribute.name, value, allow_zero=allow_zero)

    return check


def _optional_duration(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        validate_duration(attribute.name, value, allow_zero=False)


def _optional_count(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        validate_count(attribute.name, value, minimum=1)


def _check_coefficient(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 1.0 <= value <= MAX_COEFFICIENT  # also rejects NaN
    ):
        raise ValueError(
            f"{attribute.name} must be a number from 1 to {MAX_COEFFICIENT:g}, "
            f"got {show_value(value)}"
        )


def _check_jitter(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(
            f"{attribute.name} must be a fraction from 0 to 1, got {show_value(value)}"
        )


def _codes(value: Any) -> frozenset[str]:
    if isinstance(value, str | bytes):
        return value  # type: ignore[return-value]  # the validator names the field
    try:
        return frozenset(value)
    except TypeError:
        return value  # type: ignore[no-any-return]


def _check_codes(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, frozenset):
        raise ValueError(
            f"{attribute.name} must be a collection of error codes, got {show_value(value)}"
        )
    for code in value:
        if (
            not isinstance(code, str)
            or not code
            or not code.replace("_", "a").isalnum()
            or (not code.islower())
        ):
            raise ValueError(
                f"{attribute.name}: every code must be a snake_case str, got {show_value(code)}"
            )


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How one kind of work is retried and bounded in time (design §4.12).

    After attempt ``n`` (1-based) fails with a ``transient`` error, the next attempt
    waits ``min(maximum_interval, initial_interval * backoff_coefficient**(n-1))``
    seconds, shortened by up to ``jitter`` of itself. The work item ends ``failed``
    after ``maximum_attempts`` attempts or ``maximum_crashes`` attempts that took their
    helper down (with the last error), at once on a ``permanent`` error or a code in
    ``non_retryable_codes``, and ``deadline_exceeded`` when the next attempt could not
    start before the overall deadline.

    Durations are seconds on the scheduler's clock (trio's, for the actor).

    Raises:
        ValueError: a field is out of range or of the wrong type; the message names it.
    """

    initial_interval: float = attrs.field(
        default=0.025, converter=_float_unless_bool, validator=_duration(allow_zero=True)
    )
    """Delay before the first retry, in seconds; 0 retries at once."""
    backoff_coefficient: float = attrs.field(
        default=2.0, converter=_float_unless_bool, validator=_check_coefficient
    )
    """Factor between consecutive delays, from 1 (constant) to 1000."""
    maximum_interval: float = attrs.field(
        default=1.0, converter=_float_unless_bool, validator=_duration(allow_zero=True)
    )
    """Longest delay between attempts, in seconds; at least ``initial_interval``."""
    jitter: float = attrs.field(default=0.0, converter=_float_unless_bool, validator=_check_jitter)
    """Fraction from 0 to 1: a delay ``d`` becomes uniform in ``[d * (1 - jitter), d]``,
    so jitter never lengthens a delay past ``maximum_interval``."""
    maximum_attempts: int | None = attrs.field(default=10, validator=_optional_count)
    """Attempts in all, the first included (1: never retry); None: no limit."""
    maximum_crashes: int | None = attrs.field(default=2, validator=_optional_count)
    """Attempts that ended with one of ``crash_codes`` (the attempt took its helper
    process down) after which the item ends ``failed``; None: no separate limit. Keeps
    one item's crash loop from using up the helper pool's restart intensity (§4.12)."""
    non_retryable_codes: frozenset[str] = attrs.field(
        factory=frozenset, converter=_codes, validator=_check_codes
    )
    """Error codes that end the item at once even when their category is transient."""
    crash_codes: frozenset[str] = attrs.field(
        default=CRASH_CODES, converter=_codes, validator=_check_codes
    )
    """Error codes counted as crashes for ``maximum_crashes``."""
    attempt_timeout: float | None = attrs.field(
        default=None, converter=_float_unless_bool, validator=_optional_duration
    )
    """Per-attempt deadline (start-to-close), seconds from the claim, > 0; None: the
    scheduler's ``job_deadline``."""
    overall_timeout: float | None = attrs.field(
        default=None, converter=_float_unless_bool, validator=_optional_duration
    )
    """Overall deadline across all attempts (schedule-to-close), seconds from the first
    attempt's claim, > 0; None: no overall deadline."""

    def __attrs_post_init__(self) -> None:
        if self.maximum_interval < self.initial_interval:
            raise ValueError(
                f"maximum_interval must be >= initial_interval ({self.initial_interval:g} s), "
                f"got {self.maximum_interval!r}"
            )

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based).

        Args:
            attempt: The attempt that just failed, ``>= 1``.
            rng: Random source for the jitter; required when ``jitter > 0`` (pass a
                seeded ``random.Random`` for determinism).

        Raises:
            ValueError: ``attempt`` is not an int ``>= 1``, or ``jitter > 0`` and no
                ``rng`` was given.
        """
        validate_count("attempt", attempt, minimum=1)
        base = self.initial_interval
        if base == 0.0:
            return 0.0
        coefficient = self.backoff_coefficient
        if coefficient == 1.0:
            raw = base
        else:
            # Past log_coefficient(maximum / base) the cap applies: no need to overflow.
            # In logs, as maximum / base itself overflows for a subnormal base.
            steps = (math.log(self.maximum_interval) - math.log(base)) / math.log(coefficient)
            if attempt - 1 > steps:
                raw = math.inf
            else:
                try:
                    raw = base * coefficient ** (attempt - 1)
                except OverflowError:  # the power alone overflows; with a subnormal base
                    raw = math.exp(math.log(base) + (attempt - 1) * math.log(coefficient))
        delay = min(self.maximum_interval, raw)
        if self.jitter:
            if rng is None:
                raise ValueError("rng is required when jitter > 0")
            delay *= 1.0 - self.jitter * rng.random()
        return delay

    def gives_up(self, code: str, *, attempts: int, crashes: int) -> str | None:
        """Why a ``transient`` failure with ``code`` ends the work; None: retry it.

        The one rule of the scheduler and of ``run_sync`` (design §3.14, §4.12); the
        overall deadline is each caller's own check.

        Args:
            code: The failed attempt's error code.
            attempts: Attempts made so far, the failed one included.
            crashes: Of those, the attempts that ended with one of ``crash_codes``, the
                failed one counted.

        Returns:
            ``"non_retryable"``, ``"crash_loop"`` or ``"attempts_exhausted"`` (a
            failure reason of the scheduler's ``Failed`` event), or None.
        """
        if code in self.non_retryable_codes:
            return "non_retryable"
        if self.maximum_crashes is not None and crashes >= self.maximum_crashes:
            return "crash_loop"
        if self.maximum_attempts is not None and attempts >= self.maximum_attempts:
            return "attempts_exhausted"
        return None

    def attempt_seconds(self, default: float) -> float:
        """The per-attempt deadline in seconds: ``attempt_timeout``, else ``default``."""
        return default if self.attempt_timeout is None else self.attempt_timeout
