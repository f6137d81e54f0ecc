"""The actor core's façade: what the other rooms (and :mod:`actors`) use of it.

Actors, their refs and replies, supervision, the lifecycle tables, backoff and the
validation of configuration values (design §1). Other rooms import these names from
here, never from a ``_module`` of this room (contributing §A.3).
"""

from __future__ import annotations

from ._actor import Actor as Actor
from ._actor import ActorRef as ActorRef
from ._actor import Reply as Reply
from ._backoff import Backoff as Backoff
from ._backoff import BackoffTracker as BackoffTracker
from ._config import MAX_DURATION as MAX_DURATION
from ._config import check_hashable as check_hashable
from ._config import count_field as count_field
from ._config import duration_field as duration_field
from ._config import show_value as show_value
from ._config import validate_count as validate_count
from ._config import validate_duration as validate_duration
from ._groups import unwrap_sole_exception as unwrap_sole_exception
from ._lifecycle import ActorEvent as ActorEvent
from ._lifecycle import ActorState as ActorState
from ._lifecycle import HelperEvent as HelperEvent
from ._lifecycle import HelperState as HelperState
from ._lifecycle import StateMachine as StateMachine
from ._lifecycle import new_helper_lifecycle as new_helper_lifecycle
from ._live_ref import LiveRef as LiveRef
from ._mailbox import MailboxStatistics as MailboxStatistics
from ._supervisor import DynamicSupervisor as DynamicSupervisor
from ._supervisor import DynamicSupervisorRef as DynamicSupervisorRef
from ._supervisor import Supervisor as Supervisor
from ._supervisor import SupervisorRef as SupervisorRef
from ._supervisor_spec import BRUTAL_KILL as BRUTAL_KILL
from ._supervisor_spec import INFINITY as INFINITY
from ._supervisor_spec import ChildCounts as ChildCounts
from ._supervisor_spec import ChildInfo as ChildInfo
from ._supervisor_spec import ChildRef as ChildRef
from ._supervisor_spec import ChildSpec as ChildSpec
from ._supervisor_spec import SupervisorEvent as SupervisorEvent

__all__ = [
    "BRUTAL_KILL",
    "INFINITY",
    "MAX_DURATION",
    "Actor",
    "ActorEvent",
    "ActorRef",
    "ActorState",
    "Backoff",
    "BackoffTracker",
    "ChildCounts",
    "ChildInfo",
    "ChildRef",
    "ChildSpec",
    "DynamicSupervisor",
    "DynamicSupervisorRef",
    "HelperEvent",
    "HelperState",
    "LiveRef",
    "MailboxStatistics",
    "Reply",
    "StateMachine",
    "Supervisor",
    "SupervisorEvent",
    "SupervisorRef",
    "check_hashable",
    "count_field",
    "duration_field",
    "new_helper_lifecycle",
    "show_value",
    "unwrap_sole_exception",
    "validate_count",
    "validate_duration",
]
