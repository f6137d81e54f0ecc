"""Ctrl-C during a shutdown, and bare exceptions out of ``open_*`` blocks (design §3.13).

A first Ctrl-C (SIGINT) raises ``KeyboardInterrupt``, and the ``open_helper_pool`` /
``open_runtime`` block shuts down gracefully: every grace of the ladder applies. While
that shutdown runs, :func:`second_interrupt` takes SIGINT over: another Ctrl-C then
calls ``hurry`` (every grace left is skipped, every helper tree gets SIGKILL at once),
and once the shutdown is done it is raised as ``KeyboardInterrupt``. So a user who
presses Ctrl-C twice waits at most the kill timeout, and never leaves a helper behind.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio
from trio.lowlevel import enable_ki_protection

from .._core import unwrap_sole_exception

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

__all__ = ["second_interrupt"]

_log = logging.getLogger("actors.helpers")


@asynccontextmanager
@enable_ki_protection
async def second_interrupt(hurry: Callable[[], None]) -> AsyncIterator[None]:
    """Run the block (a shutdown) with SIGINT turned into ``hurry()`` (design §3.13).

    Entering and leaving are checkpoints. Outside the main thread (where no signal
    handler can be set) the block just runs.

    Raises:
        KeyboardInterrupt: a SIGINT came while the block ran (raised after it).
    """
    stack = contextlib.ExitStack()
    try:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("signals are for the main thread")
        signals = stack.enter_context(trio.open_signal_receiver(signal.SIGINT))
    except (RuntimeError, ValueError):  # no signal handling here: just run the block
        yield
        return
    interrupted = False

    async def watch() -> None:
        nonlocal interrupted
        async for _ in signals:
            if not interrupted:
                interrupted = True
                _log.warning("Ctrl-C during the shutdown: every helper gets SIGKILL now")
                hurry()

    with stack, unwrap_sole_exception():  # the block's own error, bare
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()
    if interrupted:
        raise KeyboardInterrupt
