"""A pool that restarts itself after its restart intensity is exceeded (design §3.15).

:func:`restart_when_failed` runs in the pool's own nursery when
``PoolConfig(restart=Backoff(...))`` is given (:func:`open_helper_pool` starts it). Each
time the pool fails (``intensity_exceeded``), it waits the backoff's next delay
(``restart_scheduled``, with ``delay`` and ``attempt``), then calls
:meth:`HelperPool.restart` (``pool_restarted``). A restart that fails (an eager respawn
that does not start: ``startup_failed``) counts as the next attempt and is scheduled
again, longer each time up to the cap. Attempts count from 1 again after the backoff's
``reset_after`` quiet seconds (:class:`~actors.BackoffTracker`).

While it waits, the pool is marked ``recovering``: jobs fail at once with the transient
:class:`~actors.errors.PoolRestarting` rather than wait. Failing fast is the choice
because the wait may be long (up to the cap) and a caller usually holds a deadline of
its own; a caller that wants to wait retries with a policy (``run_sync(...,
retry=RetryPolicy(...))``), which retries ``PoolRestarting`` as any transient error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import trio
from trio.lowlevel import enable_ki_protection

from .._core._backoff import BackoffTracker
from ..errors import ActorError, PoolClosed

if TYPE_CHECKING:
    from .._core._backoff import Backoff
    from ._events import PoolEvents
    from ._spec import HelperSpec

__all__ = ["RestartingPool", "restart_when_failed"]


class RestartingPool(Protocol):
    """What the restarter uses of its pool (the public face of a ``HelperPool``)."""

    recovering: bool

    @property
    def spec(self) -> HelperSpec: ...

    @property
    def events(self) -> PoolEvents: ...

    async def wait_failed(self) -> None: ...

    async def restart(self) -> None: ...


@enable_ki_protection
async def restart_when_failed(pool: RestartingPool, backoff: Backoff) -> None:
    """Restart ``pool`` after ``backoff`` each time it fails; runs until cancelled.

    Args:
        pool: The pool to watch; it is marked ``recovering`` at once.
        backoff: The delay before each restart attempt (design §1.4, §3.15).
    """
    pool.recovering = True
    tracker = BackoffTracker(backoff)
    name = pool.spec.name
    while True:
        await pool.wait_failed()
        failed: str | None = None  # the code of the last restart attempt's failure
        while True:
            delay = tracker.next_delay(trio.current_time())
            after = "" if failed is None else f" (the last attempt failed: {failed})"
            pool.events.emit(
                "restart_scheduled",
                f"pool {name!r} failed: restarting it in {delay:g} s "
                f"(attempt {tracker.attempt}){after}",
                delay=delay,
                attempt=tracker.attempt,
                last_failure=failed,
            )
            await trio.sleep(delay)
            try:
                await pool.restart()
            except PoolClosed:
                return  # closed meanwhile (aclose() inside the block): nothing to restart
            except ActorError as exc:
                # The spawn has reported how (startup_failed); try again, later.
                failed = exc.code
                continue
            break
