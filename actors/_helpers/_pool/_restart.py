"""A pool that restarts itself after its restart intensity is exceeded (design §3.15).

:func:`restart_when_failed` runs in the pool's own nursery when
``PoolConfig(restart=Backoff(...))`` is given (:func:`open_helper_pool` starts it). Each
time the pool fails (``intensity_exceeded``), it waits the backoff's next delay
(``restart_scheduled``, with ``delay`` and ``attempt``), then calls
:meth:`HelperPool.restart`; ``pool_restarted`` is published only once that succeeded.
A restart that fails (an eager respawn that does not start: ``startup_failed``) is a
``restart_failed`` event (``attempt``, the error's ``code`` and ``message``) instead;
once the pool has failed again (``intensity_exceeded``, saying its helpers do not
start) the next attempt is scheduled, longer each time up to the cap. Attempts count
from 1 again after the backoff's ``reset_after`` quiet seconds
(:class:`~actors.BackoffTracker`).

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

from ..._core import BackoffTracker
from ...errors import ActorError, PoolClosed
from .._events import holding, release

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..._core import Backoff
    from .._events import HeldEvent, PoolEvents
    from .._process import HelperSpec

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
async def restart_when_failed(
    pool: RestartingPool, backoff: Backoff, *, on_restarted: Callable[[], None] | None = None
) -> None:
    """Restart ``pool`` after ``backoff`` each time it fails; runs until cancelled.

    Args:
        pool: The pool to watch; it is marked ``recovering`` at once.
        backoff: The delay before each restart attempt (design §1.4, §3.15).
        on_restarted: Called (sync) after each restart that succeeded, once its
            ``pool_restarted`` is published.
    """
    pool.recovering = True
    tracker = BackoffTracker(backoff)
    name = pool.spec.name
    failed: ActorError | None = None  # the last restart attempt's failure
    held: list[HeldEvent] = []  # what that attempt's failure said meanwhile
    while True:
        if failed is None:
            await pool.wait_failed()
        else:
            # The failed attempt's helper failing its startup fails the pool again: say
            # so in its order (before the next attempt is scheduled) and in its words.
            with holding(pool.events, "intensity_exceeded") as exceeded:
                await pool.wait_failed()
            for event in [*held, *exceeded]:
                text = f"pool {name!r} is still failed: its helpers do not start ({failed.code})"
                release(pool.events, event, text)
        delay = tracker.next_delay(trio.current_time())
        after = "" if failed is None else f" (the last attempt failed: {failed.code})"
        pool.events.emit(
            "restart_scheduled",
            f"pool {name!r} failed: restarting it in {delay:g} s "
            f"(attempt {tracker.attempt}){after}",
            delay=delay,
            attempt=tracker.attempt,
            last_failure=None if failed is None else failed.code,
        )
        await trio.sleep(delay)
        # ``pool_restarted`` is said only once the restart has succeeded: an eager
        # respawn may fail (and fail the pool again meanwhile).
        with holding(pool.events, "pool_restarted", "intensity_exceeded") as held:
            try:
                await pool.restart()
            except PoolClosed:
                return  # closed meanwhile (aclose() inside the block): nothing to restart
            except ActorError as exc:
                # The spawn has reported how (startup_failed); try again, later.
                failed = exc
            else:
                failed = None
        if failed is None:
            for event in held:
                release(pool.events, event)
            if on_restarted is not None:
                on_restarted()
            continue
        held = [event for event in held if event.kind == "intensity_exceeded"]
        pool.events.emit(
            "restart_failed",
            f"pool {name!r}: restart attempt {tracker.attempt} failed: {failed.message}",
            attempt=tracker.attempt,
            code=failed.code,
            message=failed.message,
        )
