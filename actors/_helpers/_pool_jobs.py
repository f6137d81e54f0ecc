"""The helper pool's records of jobs off its fast path (design §3.4, §3.5).

:class:`~actors._helpers._pool.HelperPool` keeps a :class:`PoolJob` for a job that
:meth:`~actors._helpers._pool.HelperPool.cancel_job` or the close must reach, and a
:class:`SlotWaiter` for a job waiting for a free slot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from ._process import HelperProcess
    from ._spawner import Slot

__all__ = ["PoolJob", "SlotWaiter"]


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
