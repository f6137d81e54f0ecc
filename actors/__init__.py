"""trio-actors: an actor-model runtime built on trio.

Public names are re-exported here; modules starting with ``_`` are private.
"""

from __future__ import annotations

from ._config import MAX_DURATION as MAX_DURATION
from ._config import validate_count as validate_count
from ._config import validate_duration as validate_duration
from .errors import *  # noqa: F403  (the error hierarchy is public as a whole)
from .errors import __all__ as _error_names

# --- CORE builder exports (actor, ref, mailbox, lifecycle, backoff, supervisor) ---
# isort: split
from ._actor import Actor as Actor
from ._backoff import Backoff as Backoff
from ._backoff import BackoffTracker as BackoffTracker
from ._lifecycle import ActorEvent as ActorEvent
from ._lifecycle import ActorState as ActorState
from ._lifecycle import StateMachine as StateMachine
from ._mailbox import MailboxStatistics as MailboxStatistics
from ._ref import ActorRef as ActorRef
from ._ref import Reply as Reply
from ._supervisor import BRUTAL_KILL as BRUTAL_KILL
from ._supervisor import ChildInfo as ChildInfo
from ._supervisor import ChildSpec as ChildSpec
from ._supervisor import Supervisor as Supervisor
from ._supervisor import SupervisorRef as SupervisorRef

# --- end CORE ---

# --- POOL builder exports (helper processes, supervisor actor) ---
from ._helper_spec import HelperSnapshot as HelperSnapshot
from ._helper_spec import HelperSpec as HelperSpec
from ._helper_spec import HelperTimeouts as HelperTimeouts
from ._lifecycle import HelperEvent as HelperEvent
from ._lifecycle import HelperState as HelperState
from ._pool import HelperPool as HelperPool
from ._pool import PoolConfig as PoolConfig
from ._pool import PoolSnapshot as PoolSnapshot
from ._pool import PoolStatistics as PoolStatistics
from ._pool import open_helper_pool as open_helper_pool
from ._supervisor_actor import CancelJob as CancelJob
from ._supervisor_actor import GetSnapshot as GetSnapshot
from ._supervisor_actor import GetStatistics as GetStatistics
from ._supervisor_actor import RestartPool as RestartPool
from ._supervisor_actor import RunJob as RunJob
from ._supervisor_actor import SupervisorActor as SupervisorActor
from ._supervisor_actor import SupervisorHandle as SupervisorHandle
# --- end POOL ---

# --- SCHED builder exports (scheduler, cache) ---
# isort: split
from ._cache import CacheStatistics as CacheStatistics
from ._cache import DiskCache as DiskCache
from ._cache import DiskCacheStatistics as DiskCacheStatistics
from ._cache import LRUCache as LRUCache
from ._cache import ObservationCache as ObservationCache
from ._cache import PayloadCache as PayloadCache
from ._cache import PayloadKey as PayloadKey
from ._scheduler import Scheduler as Scheduler
from ._scheduler_actor import FormatChanged as FormatChanged
from ._scheduler_actor import GetSchedulerStatistics as GetSchedulerStatistics
from ._scheduler_actor import HelperRestarted as HelperRestarted
from ._scheduler_actor import Reconcile as Reconcile
from ._scheduler_actor import RunStarted as RunStarted
from ._scheduler_actor import SchedulerActor as SchedulerActor
from ._scheduler_actor import SchedulerActorStatistics as SchedulerActorStatistics
from ._scheduler_actor import SchedulerJob as SchedulerJob
from ._scheduler_actor import SetPriority as SetPriority
from ._scheduler_actor import SourceChanged as SourceChanged
from ._scheduler_actor import SwitchSource as SwitchSource
from ._scheduler_state import KINDS as KINDS
from ._scheduler_state import TIERS as TIERS
from ._scheduler_state import Claim as Claim
from ._scheduler_state import Dropped as Dropped
from ._scheduler_state import Failed as Failed
from ._scheduler_state import Invalidated as Invalidated
from ._scheduler_state import Parked as Parked
from ._scheduler_state import Progressive as Progressive
from ._scheduler_state import Published as Published
from ._scheduler_state import Retrying as Retrying
from ._scheduler_state import RunInfo as RunInfo
from ._scheduler_state import SchedulerConfig as SchedulerConfig
from ._scheduler_state import SchedulerEvent as SchedulerEvent
from ._scheduler_state import SchedulerStatistics as SchedulerStatistics
from ._scheduler_state import Settled as Settled

# --- end SCHED ---

# --- ELOG builder exports (event log, ledger, ports) ---
# isort: split
from ._eventlog import EventLog as EventLog
from ._eventlog import EventLogStatistics as EventLogStatistics
from ._eventlog import open_event_log as open_event_log
from ._eventlog_actor import EventLogActor as EventLogActor
from ._eventlog_actor import EventLogClient as EventLogClient
from ._eventlog_front import Admission as Admission
from ._eventlog_types import VERDICT_NOT_RUN as VERDICT_NOT_RUN
from ._eventlog_types import VERDICT_OK as VERDICT_OK
from ._eventlog_types import BootReport as BootReport
from ._eventlog_types import Drift as Drift
from ._eventlog_types import Event as Event
from ._eventlog_types import EventLogConfig as EventLogConfig
from ._eventlog_types import OperationSpec as OperationSpec
from ._eventlog_types import Receipt as Receipt
from ._eventlog_types import RunStatus as RunStatus
from ._eventlog_types import WatchResult as WatchResult
from ._ledger import LedgerStatistics as LedgerStatistics
from ._ports import Port as Port
from ._ports import PortStatistics as PortStatistics
from ._ports import ResyncRequired as ResyncRequired
# --- end ELOG ---

# --- EXAMPLES builder exports (renderer actor) ---
# isort: split
from ._renderer import CancelRender as CancelRender
from ._renderer import GetRendererStatistics as GetRendererStatistics
from ._renderer import Render as Render
from ._renderer import Rendered as Rendered
from ._renderer import Renderer as Renderer
from ._renderer import RendererConfig as RendererConfig
from ._renderer import RendererStatistics as RendererStatistics
# --- end EXAMPLES ---

# --- lead exports (runtime) ---
# isort: split
from ._runtime import Runtime as Runtime
from ._runtime import RuntimeConfig as RuntimeConfig
from ._runtime import open_runtime as open_runtime
# --- end lead ---

__all__ = [
    "MAX_DURATION",
    "validate_count",
    "validate_duration",
    *_error_names,
    # CORE
    "Actor",
    "ActorRef",
    "Reply",
    "ActorState",
    "ActorEvent",
    "StateMachine",
    "MailboxStatistics",
    "Backoff",
    "BackoffTracker",
    "Supervisor",
    "SupervisorRef",
    "ChildSpec",
    "ChildInfo",
    "BRUTAL_KILL",
    # end CORE
    # POOL
    "HelperSpec",
    "HelperTimeouts",
    "HelperSnapshot",
    "HelperState",
    "HelperEvent",
    "HelperPool",
    "PoolConfig",
    "PoolSnapshot",
    "PoolStatistics",
    "open_helper_pool",
    "SupervisorActor",
    "SupervisorHandle",
    "RunJob",
    "CancelJob",
    "GetSnapshot",
    "GetStatistics",
    "RestartPool",
    # end POOL
    # SCHED
    "Scheduler",
    "SchedulerConfig",
    "SchedulerStatistics",
    "RunInfo",
    "Claim",
    "Progressive",
    "KINDS",
    "TIERS",
    "SchedulerEvent",
    "Published",
    "Parked",
    "Retrying",
    "Failed",
    "Dropped",
    "Invalidated",
    "Settled",
    "SchedulerActor",
    "SchedulerActorStatistics",
    "SchedulerJob",
    "RunStarted",
    "SetPriority",
    "SourceChanged",
    "Reconcile",
    "SwitchSource",
    "HelperRestarted",
    "FormatChanged",
    "GetSchedulerStatistics",
    "LRUCache",
    "ObservationCache",
    "PayloadCache",
    "PayloadKey",
    "DiskCache",
    "CacheStatistics",
    "DiskCacheStatistics",
    # end SCHED
    # ELOG
    "EventLog",
    "EventLogConfig",
    "EventLogStatistics",
    "open_event_log",
    "EventLogActor",
    "EventLogClient",
    "Admission",
    "OperationSpec",
    "Receipt",
    "Event",
    "RunStatus",
    "WatchResult",
    "BootReport",
    "Drift",
    "VERDICT_OK",
    "VERDICT_NOT_RUN",
    "LedgerStatistics",
    "Port",
    "PortStatistics",
    "ResyncRequired",
    # end ELOG
    # EXAMPLES
    "Renderer",
    "RendererConfig",
    "RendererStatistics",
    "Render",
    "Rendered",
    "CancelRender",
    "GetRendererStatistics",
    # end EXAMPLES
    # lead
    "Runtime",
    "RuntimeConfig",
    "open_runtime",
]
