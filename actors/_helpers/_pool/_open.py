"""Opening a helper pool: :func:`open_helper_pool` (design §3.1, §3.8, §3.13)."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio
from trio.lowlevel import enable_ki_protection

from ..._core import unwrap_sole_exception
from ...errors import HelperAbandoned
from .._interrupt import second_interrupt
from ._config import PoolConfig
from ._pool import HelperPool
from ._restart import restart_when_failed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ..._core import Backoff
    from .._events import PoolEvents
    from .._process import HelperSpec

__all__ = ["open_helper_pool"]


@asynccontextmanager
@enable_ki_protection
async def open_helper_pool(
    spec: HelperSpec,
    config: PoolConfig | None = None,
    *,
    events: PoolEvents | None = None,
    **fields: Any,
) -> AsyncIterator[HelperPool]:
    """Open a pool of helper processes; close it on exit (design §3.1, §3.8).

    Args:
        spec: What each helper runs.
        config: The pool's configuration; or give its fields as keywords instead
            (``size=2, timeouts=HelperTimeouts(reply=5)``), not both.
        events: The event hub to report to (design §3.10); by default the pool makes
            its own (:attr:`HelperPool.events`), closed with the pool.

    Yields:
        The :class:`HelperPool`.

    Entering is a checkpoint; with ``eager`` (the default) it returns once every
    helper is ready. Exiting is a checkpoint that runs shielded: it cancels running jobs
    (design §3.5 ladder each), sends every helper a shutdown frame, waits up to
    ``timeouts.shutdown`` seconds, escalates (SIGTERM, SIGKILL), and returns when every
    helper is reaped and nothing of its tree is left, so no child and no zombie remains;
    it takes at most ``timeouts.close_bound`` seconds (``cancel_grace + shutdown +
    terminate + kill``), and only ``kill`` after a second Ctrl-C (design §3.13). A
    ``KeyboardInterrupt`` leaves it bare, not in an exception group.

    With ``config.restart`` (a :class:`~actors.Backoff`), the pool restarts itself after
    that backoff whenever its restart intensity is exceeded (design §3.15); meanwhile
    jobs fail at once with the transient ``PoolRestarting``.

    Raises:
        HelperStartupFailed: (code ``helper_startup_failed``) an eager spawn failed
            (the helpers already started are closed).
        HelperExited: (code ``helper_exited``) an eager helper exited in startup.
        HelperAbandoned: (code ``helper_abandoned``) the close had to leave a helper
            process alive (its signals refused to the end); not raised over an error
            of the block itself.
        ValueError: a configuration field is out of range, or ``spec.containment``
            names a mode this platform does not have.
        TypeError: both ``config`` and keyword fields were given.
    """
    if config is None:
        config = PoolConfig(**fields)
    elif fields:
        raise TypeError("give either config or its fields as keywords, not both")
    own_events = events is None
    # The nursery holds only reaper and stderr tasks, which never raise: a group
    # carries the body's (or the spawn's) exception. A lone one leaves bare, so that
    # ``except HelperStartupFailed`` (or KeyboardInterrupt) around the ``async with`` works.
    with unwrap_sole_exception():
        async with trio.open_nursery() as nursery:
            pool = HelperPool(spec, config, nursery, events=events)
            opened = pool.events.pools_opened
            pool.events.pools_opened += 1
            if opened:
                pool.events.emit(
                    "pool_restarted", f"pool {spec.name!r} opened again", opened=opened + 1
                )
            restarter = trio.CancelScope()
            if config.restart is not None:
                pool.recovering = True  # jobs see PoolRestarting while it waits (§3.15)
                nursery.start_soon(_restart_until, restarter, pool, config.restart)
            raised = True
            try:
                if config.eager:
                    await pool.spawn_all()
                yield pool
                raised = False
            finally:
                restarter.cancel()
                # Shielded: the close must run whatever cancelled the block; a Ctrl-C
                # meanwhile skips its graces (design §3.13).
                with trio.CancelScope(shield=True):
                    async with second_interrupt(pool.hurry):
                        try:
                            await pool.aclose()
                        except HelperAbandoned:
                            # The block's own error goes on; the abandoned processes
                            # were reported (events, ERROR records).
                            if not raised:
                                raise
                if own_events:
                    pool.events.close()


async def _restart_until(scope: trio.CancelScope, pool: HelperPool, backoff: Backoff) -> None:
    with scope:
        await restart_when_failed(pool, backoff)
