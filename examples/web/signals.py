"""Stop a server on SIGINT or SIGTERM: gracefully at the first, at once at the second
(design §7.1); the same for every example server.
"""

from __future__ import annotations

import logging
import signal
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from .frontdoor import FrontDoor

__all__ = ["shutdown_on_signal"]

LOGGER = logging.getLogger("examples.frontdoor")


async def shutdown_on_signal(
    front: FrontDoor,
    signals: AsyncIterator[int],
    *,
    grace: float,
    prepare: Callable[[], Awaitable[object]] | None = None,
) -> int:
    """Wait for a signal, then shut ``front`` down gracefully (design §7.1).

    Logs ``SIGINT: shutting down (grace G s; a second signal stops at once)`` (a
    warning of ``examples.frontdoor``, the signal by name), the same line for every
    example server.

    Args:
        front: A serving front door.
        signals: The receiver of ``trio.open_signal_receiver(SIGINT, SIGTERM)``, opened
            by the caller *before* starting anything, so an early signal is not lost.
        grace: Seconds (trio clock) :meth:`FrontDoor.shutdown` waits for runs to end;
            a second signal cuts the wait short.
        prepare: Awaited first (e.g. to cancel work that cannot finish within
            ``grace``); a second signal cuts it short too.

    Returns:
        The first signal's number.
    """
    signum = await anext(signals)
    try:  # SIGINT, not 2: as a person knows it
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    LOGGER.warning(
        "%s: shutting down (grace %g s; a second signal stops at once)",
        name, grace, extra={"event": "shutdown_signal", "signum": signum},
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        hurry = trio.CancelScope()

        async def second_signal() -> None:
            await anext(signals)
            LOGGER.warning("second signal: closing now", extra={"event": "shutdown_hurried"})
            hurry.cancel()

        nursery.start_soon(second_signal)
        with hurry:
            if prepare is not None:
                await prepare()
            await front.shutdown(grace=grace)
        front.close()
        nursery.cancel_scope.cancel()
    return signum
