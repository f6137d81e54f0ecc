"""The runtime's errors: one hierarchy rooted at :class:`ActorError` (design §1.5).

Every class has a class-level ``code`` (stable, snake_case) and ``category``
(``transient``, ``permanent`` or ``stale``). The protocol's errors share the root; they
are defined in :mod:`protocol.errors` and re-exported here.

Errors that cross an actor or process boundary travel as
:class:`protocol.records.ErrorRecord` (see :meth:`ActorError.to_record` and
:func:`error_from_record`), never as exception objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.errors import (
    ActorError,
    FrameTooLarge,
    InvalidMessage,
    MessageTooLarge,
    ProtocolError,
    ProtocolViolation,
    TruncatedFrame,
    UnknownType,
)

from ._core_errors import ActorCrashed as ActorCrashed
from ._core_errors import ActorRestarting as ActorRestarting
from ._core_errors import ActorStopped as ActorStopped
from ._core_errors import AskTimeout as AskTimeout
from ._core_errors import ChildAlreadyPresent as ChildAlreadyPresent
from ._core_errors import ChildNotFound as ChildNotFound
from ._core_errors import ChildRunning as ChildRunning
from ._core_errors import ChildStartFailed as ChildStartFailed
from ._core_errors import InvalidTransition as InvalidTransition
from ._core_errors import MailboxFull as MailboxFull
from ._core_errors import MaxChildren as MaxChildren
from ._core_errors import RestartIntensityExceeded as RestartIntensityExceeded
from ._eventlog_errors import AdmissionFull as AdmissionFull
from ._eventlog_errors import AlreadyDecided as AlreadyDecided
from ._eventlog_errors import CursorExpired as CursorExpired
from ._eventlog_errors import InvalidCommand as InvalidCommand
from ._eventlog_errors import LedgerCorrupt as LedgerCorrupt
from ._eventlog_errors import LedgerError as LedgerError
from ._eventlog_errors import LedgerInUse as LedgerInUse
from ._eventlog_errors import LedgerUnavailable as LedgerUnavailable
from ._eventlog_errors import LedgerVersionUnsupported as LedgerVersionUnsupported
from ._eventlog_errors import RemoteToggleDenied as RemoteToggleDenied
from ._eventlog_errors import RequestConflict as RequestConflict
from ._eventlog_errors import RunQuarantined as RunQuarantined
from ._eventlog_errors import ServerShuttingDown as ServerShuttingDown
from ._eventlog_errors import UnknownRun as UnknownRun
from ._eventlog_errors import UnsupportedOperation as UnsupportedOperation
from ._helper_errors import ForcedTermination as ForcedTermination
from ._helper_errors import FunctionNotImportable as FunctionNotImportable
from ._helper_errors import FunctionRaised as FunctionRaised
from ._helper_errors import HelperAbandoned as HelperAbandoned
from ._helper_errors import HelperError as HelperError
from ._helper_errors import HelperExited as HelperExited
from ._helper_errors import HelperLost as HelperLost
from ._helper_errors import HelperStartupFailed as HelperStartupFailed
from ._helper_errors import JobCancelled as JobCancelled
from ._helper_errors import JobFailed as JobFailed
from ._helper_errors import JobStalled as JobStalled
from ._helper_errors import NotPicklable as NotPicklable
from ._helper_errors import PoolBusy as PoolBusy
from ._helper_errors import PoolClosed as PoolClosed
from ._helper_errors import PoolFailed as PoolFailed
from ._helper_errors import PoolRestarting as PoolRestarting
from ._helper_errors import ReplyTimeout as ReplyTimeout
from ._helper_errors import SignalFailed as SignalFailed
from ._scheduler_errors import DeadlineExceeded as DeadlineExceeded
from ._scheduler_errors import PayloadInvalid as PayloadInvalid
from ._scheduler_errors import RenderFailed as RenderFailed
from ._scheduler_errors import ScheduleRejected as ScheduleRejected
from ._scheduler_errors import SourceNotReady as SourceNotReady
from ._scheduler_errors import SourceUnreadable as SourceUnreadable
from ._scheduler_errors import StaleResult as StaleResult
from ._scheduler_errors import WorkCancelled as WorkCancelled

if TYPE_CHECKING:
    from protocol.records import ErrorRecord

__all__ = [
    "ActorError",
    "ErrorRecord",
    "ProtocolError",
    "ProtocolViolation",
    "FrameTooLarge",
    "TruncatedFrame",
    "InvalidMessage",
    "MessageTooLarge",
    "UnknownType",
    "ActorStopped",
    "ActorCrashed",
    "MailboxFull",
    "AskTimeout",
    "InvalidTransition",
    "RestartIntensityExceeded",
    "ActorRestarting",
    "ChildNotFound",
    "ChildRunning",
    "ChildAlreadyPresent",
    "ChildStartFailed",
    "MaxChildren",
    "HelperError",
    "HelperStartupFailed",
    "HelperExited",
    "HelperLost",
    "ReplyTimeout",
    "ForcedTermination",
    "JobCancelled",
    "JobFailed",
    "PoolClosed",
    "PoolFailed",
    "PoolBusy",
    "PoolRestarting",
    "JobStalled",
    "SignalFailed",
    "HelperAbandoned",
    "FunctionNotImportable",
    "NotPicklable",
    "FunctionRaised",
    "DeadlineExceeded",
    "StaleResult",
    "RenderFailed",
    "PayloadInvalid",
    "SourceUnreadable",
    "SourceNotReady",
    "WorkCancelled",
    "ScheduleRejected",
    "UnsupportedOperation",
    "InvalidCommand",
    "RequestConflict",
    "AdmissionFull",
    "AlreadyDecided",
    "CursorExpired",
    "RemoteToggleDenied",
    "UnknownRun",
    "RunQuarantined",
    "LedgerError",
    "LedgerInUse",
    "LedgerCorrupt",
    "LedgerVersionUnsupported",
    "LedgerUnavailable",
    "ServerShuttingDown",
    "error_from_record",
]


def __getattr__(name: str) -> Any:
    # ErrorRecord (attrs) is loaded on first use, so this module stays stdlib-only and
    # a helper child can raise these errors without paying for attrs at start-up.
    if name == "ErrorRecord":
        from protocol.records import ErrorRecord

        return ErrorRecord
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _all_error_classes() -> dict[str, type[ActorError]]:
    found: dict[str, type[ActorError]] = {}
    pending: list[type[ActorError]] = [ActorError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    return found


def error_from_record(record: ErrorRecord) -> ActorError:
    """Rebuild an exception from a record that crossed a boundary.

    A known ``code`` gives its class; an unknown one gives :class:`JobFailed`
    carrying the record, so ``code`` and ``category`` are kept either way.
    """
    cls = _all_error_classes().get(record.code)
    if cls is None or cls.category != record.category or cls is JobFailed:
        return JobFailed(record)
    return cls(record.message)
