"""trio-actors: an actor-model runtime built on trio.

Public names are re-exported here; modules and packages starting with ``_`` are private.
They are grouped by room: the actor core (``_core``), helper processes (``_helpers``),
the scheduler and its caches (``_scheduler``), the renderer (``_renderer``), the event
log with its ledger and ports (``_eventlog``) and the runtime that starts them all
(``_runtime``); see "Where a change goes" in the design document's overview.
"""

from __future__ import annotations

from ._core import MAX_DURATION as MAX_DURATION
from ._core import validate_count as validate_count
from ._core import validate_duration as validate_duration
from ._core import count_field as count_field
from ._core import duration_field as duration_field
from .errors import *  # noqa: F403  (the error hierarchy is public as a whole)
from .errors import __all__ as _error_names

# isort: split
from ._core import Actor as Actor
from ._core import Backoff as Backoff
from ._core import BackoffTracker as BackoffTracker
from ._core import ActorEvent as ActorEvent
from ._core import ActorState as ActorState
from ._core import StateMachine as StateMachine
from ._core import MailboxStatistics as MailboxStatistics
from ._core import ActorRef as ActorRef
from ._core import Reply as Reply
from ._core import LiveRef as LiveRef
from ._core import BRUTAL_KILL as BRUTAL_KILL
from ._core import INFINITY as INFINITY
from ._core import ChildCounts as ChildCounts
from ._core import ChildInfo as ChildInfo
from ._core import ChildSpec as ChildSpec
from ._core import SupervisorEvent as SupervisorEvent
from ._core import ChildRef as ChildRef
from ._core import Supervisor as Supervisor
from ._core import SupervisorRef as SupervisorRef
from ._core import DynamicSupervisor as DynamicSupervisor
from ._core import DynamicSupervisorRef as DynamicSupervisorRef


from ._helpers import HelperSnapshot as HelperSnapshot
from ._helpers import HelperSpec as HelperSpec
from ._helpers import HelperTimeouts as HelperTimeouts
from ._core import HelperEvent as HelperEvent
from ._core import HelperState as HelperState
from ._helpers import HelperPool as HelperPool
from ._helpers import PoolConfig as PoolConfig
from ._helpers import PoolSnapshot as PoolSnapshot
from ._helpers import PoolStatistics as PoolStatistics
from ._helpers import open_helper_pool as open_helper_pool
from ._helpers import POOL_EVENT_KINDS as POOL_EVENT_KINDS
from ._helpers import PoolEvent as PoolEvent
from ._helpers import PoolEvents as PoolEvents
from ._helpers import PoolEventStream as PoolEventStream
from ._helpers import CONTAINMENT_MODES as CONTAINMENT_MODES
from ._helpers import CancelJob as CancelJob
from ._helpers import GetSnapshot as GetSnapshot
from ._helpers import GetPoolStatistics as GetPoolStatistics
from ._helpers import RestartPool as RestartPool
from ._helpers import RetireIdle as RetireIdle
from ._helpers import RunJob as RunJob
from ._helpers import PoolActor as PoolActor
from ._helpers import PoolHandle as PoolHandle
from ._helpers import RefSource as RefSource

# isort: split
from ._scheduler import CacheStatistics as CacheStatistics
from ._scheduler import DiskCache as DiskCache
from ._scheduler import DiskCacheStatistics as DiskCacheStatistics
from ._scheduler import LRUCache as LRUCache
from ._scheduler import ObservationCache as ObservationCache
from ._scheduler import PayloadCache as PayloadCache
from ._scheduler import PayloadKey as PayloadKey
from ._scheduler import Scheduler as Scheduler
from ._scheduler import SchedulerConfig as SchedulerConfig
from ._scheduler import Kind as Kind
from ._scheduler import CRASH_CODES as CRASH_CODES
from ._scheduler import RetryPolicy as RetryPolicy
from ._scheduler import SchedulerActor as SchedulerActor
from ._scheduler import FormatChanged as FormatChanged
from ._scheduler import GetSchedulerStatistics as GetSchedulerStatistics
from ._scheduler import HelperRestarted as HelperRestarted
from ._scheduler import Reconcile as Reconcile
from ._scheduler import RunStarted as RunStarted
from ._scheduler import SchedulerActorStatistics as SchedulerActorStatistics
from ._scheduler import SchedulerJob as SchedulerJob
from ._scheduler import SetPriority as SetPriority
from ._scheduler import SetTiers as SetTiers
from ._scheduler import SourceChanged as SourceChanged
from ._scheduler import SwitchSource as SwitchSource
from ._scheduler import TIERS as TIERS
from ._scheduler import Claim as Claim
from ._scheduler import Produced as Produced
from ._scheduler import Progressive as Progressive
from ._scheduler import RunInfo as RunInfo
from ._scheduler import FAILURE_REASONS as FAILURE_REASONS
from ._scheduler import Dropped as Dropped
from ._scheduler import Interrupted as Interrupted
from ._scheduler import Failed as Failed
from ._scheduler import Invalidated as Invalidated
from ._scheduler import Parked as Parked
from ._scheduler import Published as Published
from ._scheduler import Retrying as Retrying
from ._scheduler import SchedulerEvent as SchedulerEvent
from ._scheduler import SchedulerStatistics as SchedulerStatistics
from ._scheduler import Settled as Settled


# isort: split
from ._eventlog import EventLog as EventLog
from ._eventlog import EventLogStatistics as EventLogStatistics
from ._eventlog import open_event_log as open_event_log
from ._eventlog import EventLogActor as EventLogActor
from ._eventlog import EventLogClient as EventLogClient
from ._eventlog import Admission as Admission
from ._eventlog import VERDICT_NOT_RUN as VERDICT_NOT_RUN
from ._eventlog import VERDICT_OK as VERDICT_OK
from ._eventlog import BootReport as BootReport
from ._eventlog import Drift as Drift
from ._eventlog import Decision as Decision
from ._eventlog import Recovered as Recovered
from ._eventlog import Survivor as Survivor
from ._eventlog import DamagedRun as DamagedRun
from ._eventlog import FinishedRun as FinishedRun
from ._eventlog import FinishedRunsPage as FinishedRunsPage
from ._eventlog import Event as Event
from ._eventlog import EventLogConfig as EventLogConfig
from ._eventlog import EventLogSnapshot as EventLogSnapshot
from ._eventlog import OperationSpec as OperationSpec
from ._eventlog import ProgressReporter as ProgressReporter
from ._eventlog import Runner as Runner
from ._eventlog import Receipt as Receipt
from ._eventlog import RunStatus as RunStatus
from ._eventlog import WatchResult as WatchResult
from ._eventlog import WIRE_FORMS as WIRE_FORMS
from ._eventlog import EventLogRequest as EventLogRequest
from ._eventlog import RequestSpec as RequestSpec
from ._eventlog import WireForm as WireForm
from ._eventlog import LedgerStatistics as LedgerStatistics
from ._eventlog import Port as Port
from ._eventlog import PortStatistics as PortStatistics
from ._eventlog import ResyncRequired as ResyncRequired

# isort: split
from ._renderer import CancelRender as CancelRender
from ._renderer import GetRendererStatistics as GetRendererStatistics
from ._renderer import PayloadCheck as PayloadCheck
from ._renderer import Render as Render
from ._renderer import Rendered as Rendered
from ._renderer import RendererConfig as RendererConfig
from ._renderer import RendererStatistics as RendererStatistics
from ._renderer import validate_payload as validate_payload
from ._renderer import Renderer as Renderer

# isort: split
from ._runtime import Runtime as Runtime
from ._runtime import RuntimeConfig as RuntimeConfig
from ._runtime import open_runtime as open_runtime
from ._runtime import LiveChild as LiveChild

__all__ = [
    "MAX_DURATION",
    "validate_count",
    "validate_duration",
    "count_field",
    "duration_field",
    *_error_names,
    "Actor",
    "ActorRef",
    "Reply",
    "ActorState",
    "ActorEvent",
    "StateMachine",
    "MailboxStatistics",
    "Backoff",
    "BackoffTracker",
    "LiveRef",
    "Supervisor",
    "SupervisorRef",
    "DynamicSupervisor",
    "DynamicSupervisorRef",
    "SupervisorEvent",
    "ChildRef",
    "ChildSpec",
    "ChildInfo",
    "ChildCounts",
    "BRUTAL_KILL",
    "INFINITY",
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
    "PoolEvent",
    "PoolEvents",
    "PoolEventStream",
    "POOL_EVENT_KINDS",
    "CONTAINMENT_MODES",
    "PoolActor",
    "PoolHandle",
    "RefSource",
    "RunJob",
    "CancelJob",
    "GetSnapshot",
    "GetPoolStatistics",
    "RestartPool",
    "RetireIdle",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerStatistics",
    "Kind",
    "RetryPolicy",
    "CRASH_CODES",
    "RunInfo",
    "Claim",
    "Progressive",
    "Produced",
    "TIERS",
    "FAILURE_REASONS",
    "SchedulerEvent",
    "Published",
    "Parked",
    "Retrying",
    "Failed",
    "Dropped",
    "Interrupted",
    "Invalidated",
    "Settled",
    "SchedulerActor",
    "SchedulerActorStatistics",
    "SchedulerJob",
    "RunStarted",
    "SetPriority",
    "SetTiers",
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
    "EventLog",
    "EventLogConfig",
    "EventLogSnapshot",
    "EventLogStatistics",
    "open_event_log",
    "EventLogActor",
    "EventLogClient",
    "Admission",
    "OperationSpec",
    "ProgressReporter",
    "Runner",
    "Receipt",
    "Event",
    "RunStatus",
    "WatchResult",
    "WIRE_FORMS",
    "EventLogRequest",
    "RequestSpec",
    "WireForm",
    "BootReport",
    "Drift",
    "Decision",
    "Recovered",
    "Survivor",
    "DamagedRun",
    "FinishedRun",
    "FinishedRunsPage",
    "VERDICT_OK",
    "VERDICT_NOT_RUN",
    "LedgerStatistics",
    "Port",
    "PortStatistics",
    "ResyncRequired",
    "Renderer",
    "RendererConfig",
    "RendererStatistics",
    "Render",
    "Rendered",
    "CancelRender",
    "GetRendererStatistics",
    "PayloadCheck",
    "validate_payload",
    "LiveChild",
    "Runtime",
    "RuntimeConfig",
    "open_runtime",
]
