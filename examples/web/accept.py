"""The front door's accept loops: out of file descriptors is an episode, not a flood (§7.3).

When the process (EMFILE) or the system (ENFILE) has no file descriptor left, or the
kernel no buffer memory (ENOBUFS, ENOMEM), ``accept()`` fails until a connection
closes. :func:`trio.serve_listeners` logs an error with a traceback for every attempt,
ten a second. :class:`Acceptor` instead logs one warning when such an episode starts
and one when accepting works again (each with its fields as ``extra``), and retries
after a capped exponential backoff (:class:`actors.Backoff`) in between. Any other
error of ``accept()`` ends the loop and propagates.
"""

from __future__ import annotations

import errno
import logging
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
        where = _where(listener)
        episode = 0  # failures in the current episode
        started = 0.0
        async with listener:
            while True:
                try:
                    stream = await listener.accept()
                except trio.ClosedResourceError:
                    return
                except OSError as exc:
                    if exc.errno not in CAPACITY_ERRNOS:
                        raise
                    self.failures += 1
                    episode += 1
                    delay = self.backoff.delay(episode)
                    if episode == 1:
                        started = trio.current_time()
                        name = errno.errorcode.get(exc.errno, str(exc.errno))
                        LOGGER.warning(
                            "accept on %s failed with %s (%s); retrying with backoff, "
                            "quietly until it works again",
                            where, name, os.strerror(exc.errno),
                            extra={"event": "accept_failing", "listener": where,
                                   "errno": name, "retry_in": delay},
                        )  # fmt: skip
                    await trio.sleep(delay)
                    continue
                if episode:
                    waited = trio.current_time() - started
                    LOGGER.warning(
                        "accept on %s works again after %d failures in %.3f s",
                        where, episode, waited,
                        extra={"event": "accept_recovered", "listener": where,
                               "failures": episode, "seconds": waited},
                    )  # fmt: skip
                    episode = 0
                handler_nursery.start_soon(self.handler, stream)


def _where(listener: trio.abc.Listener[trio.SocketStream]) -> str:
    if isinstance(listener, trio.SocketListener):
        try:
            address = listener.socket.getsockname()
        except OSError:
            return "a closed socket"
        return f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
    return type(listener).__name__
