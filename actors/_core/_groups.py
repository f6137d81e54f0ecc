"""One exception out of a nursery instead of a group holding it (design §1.2, §3.13).

Trio's nurseries wrap whatever a task raised in an exception group. An actor or an
``open_*`` block that runs one body beside its own tasks reports a single failure bare
(``LedgerCorrupt``, not an ``ExceptionGroup`` holding it), so that ``except`` clauses
around it work, and a Ctrl-C always leaves as a bare ``KeyboardInterrupt``, whatever
else failed meanwhile.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["only_cancelled", "sole_exception", "unwrap_sole_exception"]


def only_cancelled(error: BaseException) -> bool:
    """True if ``error`` is ``trio.Cancelled``, or a group holding nothing else."""
    if isinstance(error, trio.Cancelled):
        return True
    if isinstance(error, BaseExceptionGroup):
        _, rest = error.split(trio.Cancelled)
        return rest is None
    return False


def sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """What to raise instead of ``group``, or None to keep the group (design §3.13).

    A ``KeyboardInterrupt`` anywhere in it wins (Ctrl-C leaves bare, whatever else
    failed meanwhile); otherwise the only leaf of a chain of one-item groups.
    """
    interrupts, _ = group.split(KeyboardInterrupt)
    if interrupts is not None:
        leaf: BaseException = interrupts
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        return leaf
    leaf = group
    while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
        leaf = leaf.exceptions[0]
    return None if isinstance(leaf, BaseExceptionGroup) else leaf


@contextmanager
def unwrap_sole_exception() -> Iterator[None]:
    """Re-raise a group escaping the block as its :func:`sole_exception`, bare.

    A group with several failures (and no ``KeyboardInterrupt``) is raised unchanged.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        leaf = sole_exception(group)
        if leaf is None:
            raise
        raise leaf from None
