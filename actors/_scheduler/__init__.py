"""The scheduler's façade: what the other rooms (and :mod:`actors`) use of it (design §4).

The sans-io core (:class:`Scheduler`), the actor around it, their messages, events and
caches. Other rooms import these names from here, never from a ``_module`` of this room
(contributing §A.3).
"""

from __future__ import annotations

from ._actor import SchedulerActor as SchedulerActor
from ._cache import CacheStatistics as CacheStatistics
from ._cache import DiskCache as DiskCache
from ._cache import DiskCacheStatistics as DiskCacheStatistics
from ._cache import LRUCache as LRUCache
from ._cache import ObservationCache as ObservationCache
from ._cache import PayloadCache as PayloadCache
from ._cache import PayloadKey as PayloadKey
from ._config import SchedulerConfig as SchedulerConfig
from ._events import FAILURE_REASONS as FAILURE_REASONS
from ._events import Dropped as Dropped
from ._events import Failed as Failed
from ._events import Interrupted as Interrupted
from ._events import Invalidated as Invalidated
from ._events import Parked as Parked
from ._events import Published as Published
from ._events import Retrying as Retrying
from ._events import SchedulerEvent as SchedulerEvent
from ._events import SchedulerStatistics as SchedulerStatistics
from ._events import Settled as Settled
from ._kinds import Kind as Kind
from ._messages import FormatChanged as FormatChanged
from ._messages import GetSchedulerStatistics as GetSchedulerStatistics
from ._messages import HelperRestarted as HelperRestarted
from ._messages import Reconcile as Reconcile
from ._messages import RunStarted as RunStarted
from ._messages import SchedulerActorStatistics as SchedulerActorStatistics
from ._messages import SchedulerJob as SchedulerJob
from ._messages import SetPriority as SetPriority
from ._messages import SetTiers as SetTiers
from ._messages import SourceChanged as SourceChanged
from ._messages import SwitchSource as SwitchSource
from ._retry import CRASH_CODES as CRASH_CODES
from ._retry import RetryPolicy as RetryPolicy
from ._scheduler import Scheduler as Scheduler
from ._state import TIERS as TIERS
from ._state import Claim as Claim
from ._state import Produced as Produced
from ._state import Progressive as Progressive
from ._state import RunInfo as RunInfo

__all__ = [
    "CRASH_CODES",
    "FAILURE_REASONS",
    "TIERS",
    "CacheStatistics",
    "Claim",
    "DiskCache",
    "DiskCacheStatistics",
    "Dropped",
    "Failed",
    "FormatChanged",
    "GetSchedulerStatistics",
    "HelperRestarted",
    "Interrupted",
    "Invalidated",
    "Kind",
    "LRUCache",
    "ObservationCache",
    "Parked",
    "PayloadCache",
    "PayloadKey",
    "Produced",
    "Progressive",
    "Published",
    "Reconcile",
    "RetryPolicy",
    "Retrying",
    "RunInfo",
    "RunStarted",
    "Scheduler",
    "SchedulerActor",
    "SchedulerActorStatistics",
    "SchedulerConfig",
    "SchedulerEvent",
    "SchedulerJob",
    "SchedulerStatistics",
    "SetPriority",
    "SetTiers",
    "Settled",
    "SourceChanged",
    "SwitchSource",
]
