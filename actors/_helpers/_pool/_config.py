"""The helper pool's configuration, liveness snapshot and counters (design §3.1, §3.8).

Data only (attrs frozen classes); :mod:`actors._helpers._pool._pool` uses them.
"""

from __future__ import annotations

import attrs

from ..._core import Backoff, count_field, duration_field
from .._process import HelperSnapshot, HelperTimeouts

__all__ = ["PoolConfig", "PoolSnapshot", "PoolStatistics"]


@attrs.frozen(kw_only=True)
class PoolConfig:
    """How many helpers, their deadlines, and the restart intensity (design §3.1, §1.4).

    Durations are seconds on trio's clock, validated at construction (design §1.6).

    Raises:
        ValueError: a field is out of range; the message names it.
    """

    size: int = count_field(1, minimum=1, maximum=256)
    """Number of helpers (N), each running at most one job at a time."""
    timeouts: HelperTimeouts = attrs.field(
        factory=HelperTimeouts, validator=attrs.validators.instance_of(HelperTimeouts)
    )
    """Every helper deadline (design §3.2)."""
    max_restarts: int = count_field(5, minimum=0)
    """Replacements allowed within ``restart_period`` before the pool fails."""
    restart_period: float = duration_field(10.0, allow_zero=False)
    """Sliding window of the restart intensity, in seconds."""
    acquire_timeout: float = duration_field(10.0)
    """Longest a job waits for a free helper, in seconds."""
    eager: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
    """Spawn every helper when the pool opens (startup errors surface at once); if
    False, a slot spawns its helper at its first job."""
    restart: Backoff | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(Backoff))
    )
    """None (the default): past its restart intensity the pool fails until
    :meth:`~actors.HelperPool.restart` is called. A :class:`~actors.Backoff`: the pool
    restarts itself after that capped backoff (attempt ``n`` waits ``min(cap, base *
    2**(n-1))`` seconds, trio clock; attempts count back from 1 after ``reset_after``
    quiet seconds); meanwhile jobs fail at once with the transient ``PoolRestarting``
    (design §3.15)."""


@attrs.frozen(kw_only=True)
class PoolSnapshot:
    """The pool's liveness, taken without waiting (design §3.8)."""

    size: int
    """Number of slots."""
    closing: bool
    """Close has begun: no new job is accepted."""
    closed: bool
    """Close has finished: every helper is reaped (or was given up on)."""
    failed: bool
    """Restart intensity was exceeded; jobs fail with ``PoolFailed`` until restarted."""
    helpers: tuple[HelperSnapshot | None, ...]
    """Per slot: its current (or last) incarnation, None if it never had one."""


@attrs.frozen(kw_only=True)
class PoolStatistics:
    """Counters of a :class:`HelperPool` (contributing §D.7)."""

    size: int
    """Number of slots."""
    idle: int
    """Slots free for a job."""
    busy: int
    """Jobs holding a slot."""
    waiting: int
    """Jobs waiting for a free slot."""
    jobs_started: int
    """Jobs sent to a helper."""
    jobs_succeeded: int
    """Jobs that returned a result."""
    jobs_failed: int
    """Jobs that raised an error other than cancellation."""
    jobs_cancelled: int
    """Jobs cancelled by their caller, by ``cancel_job`` or by close."""
    spawns: int
    """Helper processes started."""
    restarts: int
    """Spawns that replaced an earlier incarnation (counted for restart intensity)."""
