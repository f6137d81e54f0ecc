"""The event-log room (design §6): what it offers the other rooms.

Other rooms import these names from here, never from the room's private modules:
the in-process log (:class:`EventLog`, :func:`open_event_log`), its actor and client
(:class:`EventLogActor`, :class:`EventLogClient`), the requests the actor serves, each
declared once with its reply (:data:`REQUESTS` and the message classes), and the
records they answer with. Inside, the log is a composition of parts: admission
(:mod:`._intake`), the run lifecycle (:mod:`._runs`), the journal and its ports, the
recovery after a restart, and the SQLite ledger (:mod:`._ledger`).
"""

from ._actor import EventLogActor as EventLogActor
from ._admission import Admission as Admission
from ._client import EventLogClient as EventLogClient
from ._eventlog import EventLog as EventLog
from ._eventlog import open_event_log as open_event_log
from ._finished import DamagedRun as DamagedRun
from ._finished import FinishedRun as FinishedRun
from ._finished import FinishedRunsPage as FinishedRunsPage
from ._ledger import LedgerStatistics as LedgerStatistics
from ._messages import REQUESTS as REQUESTS
from ._messages import WIRE_FORMS as WIRE_FORMS
from ._messages import ApplyEdit as ApplyEdit
from ._messages import Cancel as Cancel
from ._messages import CheckDrift as CheckDrift
from ._messages import Discard as Discard
from ._messages import EventLogRequest as EventLogRequest
from ._messages import Finish as Finish
from ._messages import GetBootReport as GetBootReport
from ._messages import GetEventLogStatistics as GetEventLogStatistics
from ._messages import Progress as Progress
from ._messages import QueryFinished as QueryFinished
from ._messages import Record as Record
from ._messages import RequestSpec as RequestSpec
from ._messages import Resume as Resume
from ._messages import SetPortEnabled as SetPortEnabled
from ._messages import Start as Start
from ._messages import Status as Status
from ._messages import Submit as Submit
from ._messages import Subscribe as Subscribe
from ._messages import TakeSnapshot as TakeSnapshot
from ._messages import Watch as Watch
from ._messages import WireForm as WireForm
from ._operations import ProgressReporter as ProgressReporter
from ._operations import Runner as Runner
from ._ports import Port as Port
from ._ports import PortStatistics as PortStatistics
from ._ports import ResyncRequired as ResyncRequired
from ._statistics import EventLogStatistics as EventLogStatistics
from ._survivors import Decision as Decision
from ._survivors import Recovered as Recovered
from ._survivors import Survivor as Survivor
from ._types import VERDICT_NOT_RUN as VERDICT_NOT_RUN
from ._types import VERDICT_OK as VERDICT_OK
from ._types import BootReport as BootReport
from ._types import Drift as Drift
from ._types import Event as Event
from ._types import EventLogConfig as EventLogConfig
from ._types import EventLogSnapshot as EventLogSnapshot
from ._types import OperationSpec as OperationSpec
from ._types import Receipt as Receipt
from ._types import RunStatus as RunStatus
from ._types import WatchResult as WatchResult

__all__ = [
    "REQUESTS",
    "VERDICT_NOT_RUN",
    "VERDICT_OK",
    "WIRE_FORMS",
    "Admission",
    "ApplyEdit",
    "BootReport",
    "Cancel",
    "CheckDrift",
    "DamagedRun",
    "Decision",
    "Discard",
    "Drift",
    "Event",
    "EventLog",
    "EventLogActor",
    "EventLogClient",
    "EventLogConfig",
    "EventLogSnapshot",
    "EventLogStatistics",
    "Finish",
    "FinishedRun",
    "FinishedRunsPage",
    "GetBootReport",
    "GetEventLogStatistics",
    "LedgerStatistics",
    "OperationSpec",
    "Port",
    "PortStatistics",
    "Progress",
    "ProgressReporter",
    "QueryFinished",
    "Receipt",
    "Record",
    "Recovered",
    "EventLogRequest",
    "RequestSpec",
    "ResyncRequired",
    "Resume",
    "RunStatus",
    "Runner",
    "SetPortEnabled",
    "Start",
    "Status",
    "Submit",
    "Subscribe",
    "Survivor",
    "TakeSnapshot",
    "Watch",
    "WatchResult",
    "WireForm",
]
