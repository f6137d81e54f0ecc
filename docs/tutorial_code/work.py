"""The work of the tutorial: plain functions a helper process imports and runs.

They live in a module of their own because a helper imports what it runs: a function
defined in the script you start (``__main__``) cannot be sent to a helper.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def count_primes(limit: int) -> int:
    """How many primes are below ``limit``: CPU-bound work that never awaits."""
    return sum(all(n % d for d in range(2, int(n**0.5) + 1)) for n in range(2, limit))


def sleep_forever() -> None:
    """A call that never returns by itself, to show what a timeout does."""
    while True:
        time.sleep(1)


def crash_once(n: int, marker: str) -> int:
    """Square ``n``, but take the helper process down the first time it is called.

    The file ``marker`` remembers the first call across helper processes, so the crash
    happens exactly once: a flaky dependency, made repeatable.
    """
    flag = Path(marker)
    if not flag.exists():
        flag.touch()
        os._exit(3)  # the helper dies without a reply, as on a segfault
    return n * n
