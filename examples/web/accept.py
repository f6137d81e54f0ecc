"""The front door's accept loops: out of file descriptors is an episode, not a flood (§7.3).

When the process (EMFILE) or the system (ENFILE) has no file descriptor left, or the
kernel no buffer memory (ENOBUFS, ENOMEM), ``accept()`` fails until a connection
closes. :func:`trio.serve_listeners` logs an error with a traceback for every attempt,
ten a second. :class:`Acceptor` instead logs one warning when such an episode starts
and one when it is over (each with its fields as ``extra``), and retries after a capped
exponential backoff (:class:`actors.Backoff`, attempt ``n`` of the episode) in between.
An episode is over once ``accept()`` was tried again and did not fail for
``reset_after`` seconds (the backoff's): a descriptor freed for a moment, taken by the
next connection, does not make a new episode. Any other error
of ``accept()`` ends the loop and propagates.
"""

from __future__ import annotations

import errno
import logging
import math
import os
from typing import TYPE_CHECKING, Final

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from actors import Backoff

__all__ = ["CAPACITY_ERRNOS", "Acceptor"]

LOGGER = logging.getLogger("examples.frontdoor")
#: ``accept()`` errors that mean "no resources now, try again later".
CAPACITY_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class Acceptor:
    """Accept connections on listeners and start a handler task for each (design §7.3).

    Args:
        handler: ``await handler(stream)`` serves one connection; it runs in the
            ``handler_nursery`` given to :meth:`serve`, so closing the listeners spares
            the connections being served.
        backoff: Delays between attempts while ``accept()`` lacks resources.

    Attributes:
        failures: Failed ``accept()`` attempts so far (every one counted, logged once
            per episode).
    """

    def __init__(
        self, handler: Callable[[trio.SocketStream], Awaitable[object]], *, backoff: Backoff
    ) -> None:
        self.handler = handler
        self.backoff = backoff
        self.failures = 0

    async def serve(
        self,
        listeners: Sequence[trio.abc.Listener[trio.SocketStream]],
        handler_nursery: trio.Nursery,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept on every listener until cancelled; closes the listeners on the way out.

        ``task_status.started()`` once every loop runs.

        Raises:
            OSError: ``accept()`` failed for another reason than lacking resources.
        """
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                nursery.start_soon(self._accept_loop, listener, handler_nursery)
            task_status.started()

    async def _accept_loop(
        self, listener: trio.abc.Listener[trio.SocketStream], handler_nursery: trio.Nursery
    ) -> None:
        episode = _Episode(_where(listener), self.backoff)
        async with listener:
            while True:
                # An episode ends after reset_after seconds without a failure; accepting
                # in between (a descriptor freed for a moment) does not end it.
                delay: float | None = None
                with trio.move_on_at(episode.quiet_at()) as quiet:
                    try:
                        stream = await listener.accept()
                    except trio.ClosedResourceError:
                        return
                    except OSError as exc:
                        if exc.errno not in CAPACITY_ERRNOS:
                            raise
                        self.failures += 1
                        delay = episode.failed(exc.errno, trio.current_time())
                    else:
                        handler_nursery.start_soon(self.handler, stream)
                if delay is not None:
                    await trio.sleep(delay)
                    episode.retrying(trio.current_time())
                elif quiet.cancelled_caught:
                    episode.over()


class _Episode:
    """The failures of one listener's ``accept()`` that follow each other closely."""

    def __init__(self, where: str, backoff: Backoff) -> None:
        self.where = where
        self.backoff = backoff
        self.failures = 0
        self.started = self.last = self.retried = 0.0

    def quiet_at(self) -> float:
        """When the episode is over if nothing fails before (trio clock), or inf.

        Counted from the last retry, not the last failure: the backoff's delay may be
        longer than ``reset_after``.
        """
        return self.retried + self.backoff.reset_after if self.failures else math.inf

    def failed(self, code: int, now: float) -> float:
        """Count a failure at ``now``; log the first one; return the delay before retrying."""
        self.failures += 1
        delay = self.backoff.delay(self.failures)
        if self.failures == 1:
            self.started = now
            name = errno.errorcode.get(code, str(code))
            LOGGER.warning(
                "accept on %s failed with %s (%s); retrying with backoff, "
                "quietly until it works again",
                self.where, name, os.strerror(code),
                extra={"event": "accept_failing", "listener": self.where, "errno": name,
                       "retry_in": delay},
            )  # fmt: skip
        self.last = now
        return delay

    def retrying(self, now: float) -> None:
        """The backoff's delay is over: ``accept()`` is tried again at ``now``."""
        self.retried = now

    def over(self) -> None:
        """Log the end of the episode and forget it."""
        seconds = self.last - self.started
        LOGGER.warning(
            "accept on %s works again: no failure for %g s after %d failures over %.3f s",
            self.where, self.backoff.reset_after, self.failures, seconds,
            extra={"event": "accept_recovered", "listener": self.where,
                   "failures": self.failures, "seconds": seconds},
        )  # fmt: skip
        self.failures = 0


def _where(listener: trio.abc.Listener[trio.SocketStream]) -> str:
    if isinstance(listener, trio.SocketListener):
        try:
            address = listener.socket.getsockname()
        except OSError:
            return "a closed socket"
        return f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
    return type(listener).__name__
