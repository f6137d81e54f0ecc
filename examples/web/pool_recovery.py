"""Restart a failed helper pool after a backoff: app-level recovery (design §1.4, §3.7).

Past its restart intensity the helper pool fails every job with
:class:`~actors.errors.PoolFailed` (code ``pool_failed``) until someone calls
:meth:`actors.PoolHandle.restart` (design §3.7). Both example servers recover like an
OTP supervisor one level up: the first ``PoolFailed`` of an *episode* is logged once
(a warning with the cause) and wakes the recovery task, which waits a capped exponential
backoff (:class:`actors._core._backoff.Backoff`; the count starts again after a quiet period of
``reset_after`` seconds) and restarts the pool. Further ``PoolFailed`` errors during the
episode (concurrent jobs) change nothing: one restart per episode, no restart storm. A
restart that itself fails is logged and tried again after the next backoff step.

The recovery task is a long-running service: the app starts it in its own nursery with
``nursery.start_soon(recovery.run)``; it sleeps on an event until a failure is noted
(no polling) and ends with that nursery.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import attrs
import trio

from actors import Backoff, BackoffTracker, duration_field
from actors.errors import ActorError, PoolFailed

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["PoolRecovery", "RecoveryConfig"]

LOGGER = logging.getLogger("examples.pool_recovery")


def _default_backoff() -> Backoff:
    return Backoff(base=1.0, cap=30.0, reset_after=60.0)


@attrs.frozen(kw_only=True)
class RecoveryConfig:
    """How a failed helper pool is restarted; validated at construction (design §1.6).

    Raises:
        ValueError: a duration is invalid (the message names it), or ``cap < base``.
    """

    backoff: Backoff = attrs.field(
        factory=_default_backoff, validator=attrs.validators.instance_of(Backoff)
    )
    """Delay before each restart attempt, in seconds (trio clock): ``base`` 1 s doubling
    up to ``cap`` 30 s; the count starts again ``reset_after`` (60 s) after the last
    failure (design §1.4)."""
    restart_timeout: float = duration_field(30.0, allow_zero=False)
    """Seconds (trio clock) one restart of the pool may take (eager respawn included)."""


class PoolRecovery:
    """Restarts the helper pool once per failure episode, after a backoff (see module doc).

    Args:
        restart: Restarts the pool, e.g. :meth:`actors.PoolHandle.restart`;
            called as ``await restart(timeout=config.restart_timeout)``.
        config: The backoff and the restart deadline.
        on_restarted: Awaited after each successful restart (e.g. to tell the scheduler
            ``HelperRestarted``); an :class:`~actors.errors.ActorError` from it is logged.
    """

    def __init__(
        self,
        restart: Callable[..., Awaitable[None]],
        config: RecoveryConfig,
        *,
        on_restarted: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._restart = restart
        self.config = config
        self._on_restarted = on_restarted
        self._tracker = BackoffTracker(config.backoff)
        self._failure: PoolFailed | None = None
        self._wake = trio.Event()
        self._idle = trio.Event()
        self._idle.set()
        self.episodes = 0
        """Failure episodes seen (each logged once)."""
        self.restarts = 0
        """Successful restarts of the pool."""

    @property
    def recovering(self) -> bool:
        """True from a noted failure until the pool was restarted."""
        return self._failure is not None

    def note(self, error: BaseException) -> None:
        """Note a job's error (sync, never blocks): a ``PoolFailed`` starts an episode.

        Other errors, and a ``PoolFailed`` while an episode is under way, are ignored.
        """
        if not isinstance(error, PoolFailed) or self._failure is not None:
            return
        self._failure = error
        self._idle = trio.Event()
        self.episodes += 1
        LOGGER.warning("helper pool failed (%s); restarting it after a backoff", error)
        self._wake.set()

    async def wait_idle(self) -> None:
        """Return once no episode is under way (the pool was restarted); a checkpoint."""
        await self._idle.wait()

    async def run(self) -> None:
        """Serve forever: restart the pool after each noted failure (a checkpoint)."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            await self._recover()

    async def _recover(self) -> None:
        while True:
            delay = self._tracker.next_delay(trio.current_time())
            await trio.sleep(delay)
            try:
                await self._restart(timeout=self.config.restart_timeout)
            except ActorError as exc:
                LOGGER.warning("helper pool restart failed (%s); trying again", exc)
                continue
            break
        self._failure = None
        self._idle.set()
        self.restarts += 1
        LOGGER.info("helper pool restarted after a %g s backoff", delay)
        if self._on_restarted is not None:
            try:
                await self._on_restarted()
            except ActorError as exc:
                LOGGER.warning("after the helper pool restart: %s", exc)
