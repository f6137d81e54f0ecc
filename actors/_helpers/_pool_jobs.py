"""The helper pool's records of jobs off its fast path (design §3.4, §3.5).

:class:`~actors._helpers._pool.HelperPool` keeps a :class:`PoolJob` for a job that
:meth:`~actors._helpers._pool.HelperPool.cancel_job` or the close must reach, and a
:class:`SlotWaiter` for a job waiting for a free slot; the close ends each helper with
:func:`close_helper`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import trio
from trio.lowlevel import enable_ki_protection

if TYPE_CHECKING:
    from ._process import HelperProcess
    from ._spawner import Slot

__all__ = ["PoolJob", "SlotWaiter", "close_helper", "expected"]

T = TypeVar("T")


class PoolJob:
    """A job :meth:`HelperPool.cancel_job` or the close must reach off the fast path."""

    __slots__ = ("cancelled", "helper", "scope")

    def __init__(self) -> None:
        self.cancelled = False
        #: The helper running it, once the job frame may be out.
        self.helper: HelperProcess | None = None
        #: The scope of the slow path (waiting for a slot, spawning), while it runs.
        self.scope: trio.CancelScope | None = None


class SlotWaiter:
    """A job waiting for a free slot; ``HelperPool._release`` hands one over."""

    __slots__ = ("event", "slot")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.slot: Slot | None = None


@enable_ki_protection
async def close_helper(helper: HelperProcess, bound: float) -> None:
    """The close's end of one helper (design §3.8): wait up to ``bound`` seconds (trio's
    clock) for its job to stop (its ladder), then shut it down if it is still there."""
    with trio.move_on_after(bound):
        await helper.wait_job_done()
    if not helper.exited:
        await helper.shutdown()


def expected(result: Any, expect: type[T], operation: str) -> T:
    """``result`` if it is an instance of ``expect`` (``run_job(..., expect=)``).

    Raises:
        TypeError: it is not; the message names the operation and both types.
    """
    if isinstance(result, expect):
        return result
    raise TypeError(
        f"job {operation!r} returned {type(result).__name__}, not {expect.__name__} (expect=)"
    )
