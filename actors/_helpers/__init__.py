"""Helper processes, parent side (design §3): one incarnation (``_process``), the pool and
its actor (``_pool``), the pool's events and the second-interrupt guard. The child side
is ``actors._child``.

The façade other rooms import (:mod:`actors` re-exports the public names); the
sub-rooms and modules here are private.
"""

from __future__ import annotations

from ._events import POOL_EVENT_KINDS as POOL_EVENT_KINDS
from ._events import PoolEvent as PoolEvent
from ._events import PoolEvents as PoolEvents
from ._events import PoolEventStream as PoolEventStream
from ._interrupt import second_interrupt as second_interrupt
from ._pool import CancelJob as CancelJob
from ._pool import GetPoolStatistics as GetPoolStatistics
from ._pool import GetSnapshot as GetSnapshot
from ._pool import HelperPool as HelperPool
from ._pool import PoolActor as PoolActor
from ._pool import PoolConfig as PoolConfig
from ._pool import PoolHandle as PoolHandle
from ._pool import PoolSnapshot as PoolSnapshot
from ._pool import PoolStatistics as PoolStatistics
from ._pool import RefSource as RefSource
from ._pool import RestartPool as RestartPool
from ._pool import RetireIdle as RetireIdle
from ._pool import RunJob as RunJob
from ._pool import open_helper_pool as open_helper_pool
from ._process import CONTAINMENT_MODES as CONTAINMENT_MODES
from ._process import HelperSnapshot as HelperSnapshot
from ._process import HelperSpec as HelperSpec
from ._process import HelperTimeouts as HelperTimeouts

__all__ = [
    "CONTAINMENT_MODES",
    "POOL_EVENT_KINDS",
    "CancelJob",
    "GetSnapshot",
    "GetPoolStatistics",
    "HelperPool",
    "HelperSnapshot",
    "HelperSpec",
    "HelperTimeouts",
    "PoolActor",
    "PoolConfig",
    "PoolEvent",
    "PoolEventStream",
    "PoolEvents",
    "PoolHandle",
    "PoolSnapshot",
    "PoolStatistics",
    "RefSource",
    "RestartPool",
    "RetireIdle",
    "RunJob",
    "open_helper_pool",
    "second_interrupt",
]
