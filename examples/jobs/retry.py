"""How the job client retries a refused submit: never before ``retry_after``, with full jitter.

A server that refuses work says when to come back (``retry_after`` seconds, design §6.16):
a ``receipt`` with ``admission_full``, an ``error`` with ``ledger_unavailable``. If every
client refused in one burst came back after exactly that hint they would be refused
together again, so each waits the hint **plus** a random share of a spread that doubles
with each refusal (full jitter)::

    wait = hint + uniform(0, min(cap, max(base, hint) * 2 ** attempt))

The spread starts at the hint itself (at least ``base``), so clients refused together
come back spread over as long as the server asked them to wait. The hint is read as at
most ``max_hint`` seconds (a server cannot park a person's client for hours), and after
``give_up_after`` seconds of refusals the last refusal is the answer. The same request
id is sent each time: refusals are not stored (design §6.3), and an answer lost on the
way is then not a second run.

:func:`submit_with_retry` is pure apart from ``trio.sleep``: the tests drive it with a
seeded :class:`random.Random` on a virtual clock.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors import duration_field

if TYPE_CHECKING:
    import random
    from collections.abc import Awaitable, Callable

__all__ = ["RETRYABLE_CODES", "SubmitRetryPolicy", "retry_hint", "submit_with_retry"]

#: Error codes of a refusal worth retrying: the server is busy or its disk is.
RETRYABLE_CODES = frozenset({"admission_full", "ledger_unavailable"})


@attrs.frozen(kw_only=True)
class SubmitRetryPolicy:
    """When a refused submit is tried again (see the module docstring); all in seconds.

    Raises:
        ValueError: a field is not a valid duration; the message names it.
    """

    base: float = duration_field(0.1, allow_zero=False)
    """The smallest jitter spread, seconds."""
    cap: float = duration_field(10.0, allow_zero=False)
    """The largest jitter spread, seconds (the doubling stops there)."""
    max_hint: float = duration_field(60.0)
    """A ``retry_after`` above this is read as this, seconds."""
    give_up_after: float = duration_field(300.0)
    """Seconds (trio clock) of refusals after which the last refusal is the answer."""

    def delay(self, attempt: int, retry_after: float, rng: random.Random) -> float:
        """Seconds to wait after refusal number ``attempt`` (0 for the first).

        Never less than ``retry_after`` (as capped by ``max_hint``).
        """
        hint = min(max(retry_after, 0.0), self.max_hint)
        spread = min(self.cap, max(self.base, hint) * 2.0 ** min(attempt, 32))
        return hint + rng.uniform(0.0, spread)


def retry_hint(answer: dict[str, Any]) -> float | None:
    """The ``retry_after`` of a refusal worth retrying (0.0 if it gave none), else None.

    A refusal worth retrying is a ``receipt`` with ``admitted`` false and ``retryable``
    true, or an ``error`` with ``retryable`` true and a code in :data:`RETRYABLE_CODES`.
    """
    kind = answer.get("type")
    if kind == "receipt":
        refused = answer.get("admitted") is False and answer.get("retryable") is True
    elif kind == "error":
        refused = answer.get("retryable") is True and answer.get("code") in RETRYABLE_CODES
    else:
        refused = False
    if not refused:
        return None
    hint = answer.get("retry_after")
    if isinstance(hint, bool) or not isinstance(hint, int | float) or not math.isfinite(hint):
        return 0.0
    return max(float(hint), 0.0)


async def submit_with_retry(
    attempt: Callable[[], Awaitable[dict[str, Any]]],
    *,
    policy: SubmitRetryPolicy,
    rng: random.Random,
    on_wait: Callable[[int, float, dict[str, Any]], object] | None = None,
) -> dict[str, Any]:
    """Call ``attempt()`` until its answer is not a retryable refusal; return that answer.

    Args:
        attempt: Sends the submit (the same request id each time) and returns the answer.
        policy: When to retry.
        rng: The jitter's source (seeded in tests).
        on_wait: Called as ``on_wait(retry, seconds, refusal)`` before each wait, with
            the number of the retry to come (1, 2, ...), e.g. to show that it waits.

    Returns:
        The first answer that is not a retryable refusal, or the last refusal once the
        next retry would start after ``give_up_after`` seconds.
    """
    deadline = trio.current_time() + policy.give_up_after
    for refusals in itertools.count():
        answer = await attempt()
        hint = retry_hint(answer)
        if hint is None:
            return answer
        delay = policy.delay(refusals, hint, rng)
        if trio.current_time() + delay > deadline:
            return answer
        if on_wait is not None:
            on_wait(refusals + 1, delay, answer)
        await trio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover - count() never ends
