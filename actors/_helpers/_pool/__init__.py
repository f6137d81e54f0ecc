"""The helper pool (design §3.1, §3.4, §3.7, §3.8, §3.14, §3.15, §1.7): the pool of
helper slots and its spawner, its configuration, ``run_sync``/``map`` calls, the
supervised restart, the pool actor and the handle that follows it across restarts.

The façade other rooms import; everything else here is private.
"""

from __future__ import annotations

from ._actor import PoolActor as PoolActor
from ._config import PoolConfig as PoolConfig
from ._config import PoolSnapshot as PoolSnapshot
from ._config import PoolStatistics as PoolStatistics
from ._handle import PoolHandle as PoolHandle
from ._handle import RefSource as RefSource
from ._open import open_helper_pool as open_helper_pool
from ._pool import HelperPool as HelperPool
from ._requests import CancelJob as CancelJob
from ._requests import GetPoolStatistics as GetPoolStatistics
from ._requests import GetSnapshot as GetSnapshot
from ._requests import RestartPool as RestartPool
from ._requests import RetireIdle as RetireIdle
from ._requests import RunJob as RunJob

__all__ = [
    "CancelJob",
    "GetSnapshot",
    "GetPoolStatistics",
    "HelperPool",
    "PoolActor",
    "PoolConfig",
    "PoolHandle",
    "PoolSnapshot",
    "PoolStatistics",
    "RefSource",
    "RestartPool",
    "RetireIdle",
    "RunJob",
    "open_helper_pool",
]
