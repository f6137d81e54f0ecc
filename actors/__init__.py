"""trio-actors: an actor-model runtime built on trio.

Public names are re-exported here; modules and packages starting with ``_`` are private.
They are grouped by room: the actor core (``_core``), helper processes (``_helpers``),
the scheduler and its caches (``_scheduler``), the renderer (``_renderer``), the event
log with its ledger and ports (``_eventlog``) and the runtime that starts them all
(``_runtime``); see "Where a change goes" in the design document's overview.
"""

from __future__ import annotations

from ._core._config import MAX_DURATION as MAX_DURATION
from ._core._config import validate_count as validate_count
from ._core._config import validate_duration as validate_duration
from ._core._config import count_field as count_field
from ._core._config import duration_field as duration_field
from .errors import *  # noqa: F403  (the error hierarchy is public as a whole)
from .errors import __all__ as _error_names

# isort: split
from ._core._actor import Actor as Actor
from ._core._backoff import Backoff as Backoff
from ._core._backoff import BackoffTracker as BackoffTracker
from ._core._lifecycle import ActorEvent as ActorEvent
from ._core._lifecycle import ActorState as ActorState
from ._core._lifecycle import StateMachine as StateMachine
from ._core._mailbox import MailboxStatistics as MailboxStatistics
from ._core._ref import ActorRef as ActorRef
from ._core._ref import Reply as Reply
from ._core._live_ref import LiveRef as LiveRef
from ._core._supervisor_spec import BRUTAL_KILL as BRUTAL_KILL
from ._core._supervisor_spec import INFINITY as INFINITY
from ._core._supervisor_spec import ChildCounts as ChildCounts
from ._core._supervisor_spec import ChildInfo as ChildInfo
from ._core._supervisor_spec import ChildSpec as ChildSpec
from ._core._supervisor_spec import SupervisorEvent as SupervisorEvent
from ._core._supervisor_spec import ChildRef as ChildRef
from ._core._supervisor import Supervisor as Supervisor
from ._core._supervisor_ref import SupervisorRef as SupervisorRef
from ._core._dynamic_supervisor import DynamicSupervisor as DynamicSupervisor
from ._core._dynamic_supervisor import DynamicSupervisorRef as DynamicSupervisorRef


from ._helpers._spec import HelperSnapshot as HelperSnapshot
from ._helpers._spec import HelperSpec as HelperSpec
from ._helpers._spec import HelperTimeouts as HelperTimeouts
from ._core._lifecycle import HelperEvent as HelperEvent
from ._core._lifecycle import HelperState as HelperState
from ._helpers._pool import HelperPool as HelperPool
from ._helpers._pool import PoolConfig as PoolConfig
from ._helpers._pool import PoolSnapshot as PoolSnapshot
from ._helpers._pool import PoolStatistics as PoolStatistics
from ._helpers._pool_open import open_helper_pool as open_helper_pool
from ._helpers._events import POOL_EVENT_KINDS as POOL_EVENT_KINDS
from ._helpers._events import PoolEvent as PoolEvent
from ._helpers._events import PoolEvents as PoolEvents
from ._helpers._events import PoolEventStream as PoolEventStream
from ._helpers._containment import CONTAINMENT_MODES as CONTAINMENT_MODES
from ._helpers._pool_actor import CancelJob as CancelJob
from ._helpers._pool_actor import GetSnapshot as GetSnapshot
from ._helpers._pool_actor import GetStatistics as GetStatistics
from ._helpers._pool_actor import RestartPool as RestartPool
from ._helpers._pool_actor import RetireIdle as RetireIdle
from ._helpers._pool_actor import RunJob as RunJob
from ._helpers._pool_actor import PoolActor as PoolActor
from ._helpers._pool_handle import PoolHandle as PoolHandle
from ._helpers._pool_handle import RefSource as RefSource

# isort: split
from ._scheduler._cache import CacheStatistics as CacheStatistics
from ._scheduler._cache import DiskCache as DiskCache
from ._scheduler._cache import DiskCacheStatistics as DiskCacheStatistics
from ._scheduler._cache import LRUCache as LRUCache
from ._scheduler._cache import ObservationCache as ObservationCache
from ._scheduler._cache import PayloadCache as PayloadCache
from ._scheduler._cache import PayloadKey as PayloadKey
from ._scheduler._scheduler import Scheduler as Scheduler
from ._scheduler._config import SchedulerConfig as SchedulerConfig
from ._scheduler._kinds import Kind as Kind
from ._scheduler._retry import CRASH_CODES as CRASH_CODES
from ._scheduler._retry import RetryPolicy as RetryPolicy
from ._scheduler._actor import SchedulerActor as SchedulerActor
from ._scheduler._messages import FormatChanged as FormatChanged
from ._scheduler._messages import GetSchedulerStatistics as GetSchedulerStatistics
from ._scheduler._messages import HelperRestarted as HelperRestarted
from ._scheduler._messages import Reconcile as Reconcile
from ._scheduler._messages import RunStarted as RunStarted
from ._scheduler._messages import SchedulerActorStatistics as SchedulerActorStatistics
from ._scheduler._messages import SchedulerJob as SchedulerJob
from ._scheduler._messages import SetPriority as SetPriority
from ._scheduler._messages import SetTiers as SetTiers
from ._scheduler._messages import SourceChanged as SourceChanged
from ._scheduler._messages import SwitchSource as SwitchSource
from ._scheduler._state import TIERS as TIERS
from ._scheduler._state import Claim as Claim
from ._scheduler._state import Produced as Produced
from ._scheduler._state import Progressive as Progressive
from ._scheduler._state import RunInfo as RunInfo
from ._scheduler._events import FAILURE_REASONS as FAILURE_REASONS
from ._scheduler._events import Dropped as Dropped
from ._scheduler._events import Failed as Failed
from ._scheduler._events import Invalidated as Invalidated
from ._scheduler._events import Parked as Parked
from ._scheduler._events import Published as Published
from ._scheduler._events import Retrying as Retrying
from ._scheduler._events import SchedulerEvent as SchedulerEvent
from ._scheduler._events import SchedulerStatistics as SchedulerStatistics
from ._scheduler._events import Settled as Settled


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
from ._eventlog import LedgerStatistics as LedgerStatistics
from ._eventlog import Port as Port
from ._eventlog import PortStatistics as PortStatistics
from ._eventlog import ResyncRequired as ResyncRequired

# isort: split
from ._renderer._config import CancelRender as CancelRender
from ._renderer._config import GetRendererStatistics as GetRendererStatistics
from ._renderer._config import PayloadCheck as PayloadCheck
from ._renderer._config import Render as Render
from ._renderer._config import Rendered as Rendered
from ._renderer._config import RendererConfig as RendererConfig
from ._renderer._config import RendererStatistics as RendererStatistics
from ._renderer._job import validate_payload as validate_payload
from ._renderer._renderer import Renderer as Renderer

# isort: split
from ._runtime._runtime import Runtime as Runtime
from ._runtime._runtime import RuntimeConfig as RuntimeConfig
from ._runtime._runtime import open_runtime as open_runtime

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
    "GetStatistics",
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
    "Runtime",
    "RuntimeConfig",
    "open_runtime",
]
