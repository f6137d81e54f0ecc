"""Functions the zygote tests run in forked helpers (``run_sync``) and an entry module
that starts a thread at import (which a zygote refuses to hold)."""

from __future__ import annotations

import os
import random
import signal
import time


def random_value() -> float:
    """A number from :mod:`random` (reseeded in each forked helper)."""
    return random.random()


def parent_and_session() -> tuple[int, int, int]:
    """(pid, parent pid, session id) of the helper."""
    return os.getpid(), os.getppid(), os.getsid(0)


def fork_stubborn() -> int:
    """Fork (no exec) a grandchild that leaves the session and ignores SIGTERM; its pid.

    Without an exec its ``/proc/PID/environ`` is the memory it shares with its helper's
    initial environment: the tree tag must be there for ``tree`` containment to find it.
    """
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(300)
        finally:
            os._exit(0)
    return pid


def environ_of(pid: int) -> list[str]:
    """The initial environment of ``pid`` as ``/proc`` shows it."""
    with open(f"/proc/{pid}/environ", "rb") as file:
        return [item.decode() for item in file.read().split(b"\0") if item]
