"""The websocket client protocol's messages, as attrs frozen classes (design §2.1, §2.4, §6, §7).

Every message is a JSON object with a ``"type"`` tag (see :data:`TAGS`); the tag is
added and checked by the converter in :mod:`protocol.codec`, not stored on the class.
Client → server messages are *requests* and carry a client-chosen ``request_id``
(1..128 characters) that the server echoes in its answer.

Requests (:data:`ClientRequest`):

===================  ==================================================================
``submit``           run an operation (design §6.1); answered by ``receipt``
``cancel``           cancel a run, or detach one waiter (§6.7, §6.14); ``status_reply``
``status``           a run's state, or one waiter's view of it; ``status_reply``
``snapshot``         every live run and the cursor it is consistent with (§6.15);
                     answered by ``snapshot_reply``
``watch``            events after a cursor, once (§6.8); answered by ``events``
``subscribe``        push events after a cursor (§6.9); ``events`` then ``event`` pushes
``unsubscribe``      stop the pushes; answered by ``ok``
``ack``              the client has processed events up to ``seq`` (§6.9); ``ok``
``boot_report``      survivors after a restart (§6.10); ``boot_report_reply``
``resume``           resume an interrupted run (§6.10); ``receipt``
``discard``          give up an interrupted run (§6.10); ``status_reply``
``select``           the selected run of the preview server (§4.2, §7.2); ``ok``
``visible``          the runs in the viewport (§4.2, §7.2); ``ok``
``list_runs``        the runs of the preview server's database; ``run_list``
``list_run_times``   every run's start and end (for sorting by date); ``run_times``
``run_details``      a run's times, snapshot, metadata and links (§7.2); ``run_details_reply``
``annotate``         star a run or note on it, kept beside the database (§7.2); ``ok``
``draw``             one picture of a run: a slice, a scale (§5.2, §7.2); ``drawing``
``run_data``         a run's data, downsampled keeping extremes (§7.7); ``run_data_reply``
``list_databases``   the preview server's databases (§7.5); ``database_list``
``use_database``     switch this connection to another database (§7.5); ``ok``
===================  ==================================================================

Server → client (:data:`ServerMessage`): ``receipt``, ``event``, ``events``, ``error``
(:class:`ErrorReply`), ``status_reply``, ``snapshot_reply``, ``boot_report_reply``,
``ok``, ``run_list``, ``image_ready``, ``resync_required``, ``run_times``,
``run_details_reply``, ``drawing``, ``run_data_reply``, ``database_list``,
``database_added``, ``database_removed``. Any request may instead be answered by
``error``.
A refusal that may succeed later (a ``receipt`` with ``admission_full``, an ``error`` with
``ledger_unavailable``) says when to retry in ``retry_after`` (design §6.16).

All integers are bounded by ``2**53 - 1`` so a JavaScript client reads them exactly.
"""

from __future__ import annotations

import re
from typing import Final, Union, get_args

from ._database_messages import DATABASE_STATES as DATABASE_STATES
from ._database_messages import DatabaseAdded as DatabaseAdded
from ._database_messages import DatabaseInfo as DatabaseInfo
from ._database_messages import DatabaseList as DatabaseList
from ._database_messages import DatabaseRemoved as DatabaseRemoved
from ._database_messages import ListDatabases as ListDatabases
from ._database_messages import UseDatabase as UseDatabase
from ._eventlog_messages import Ack as Ack
from ._eventlog_messages import BootReportReply as BootReportReply
from ._eventlog_messages import Cancel as Cancel
from ._eventlog_messages import Discard as Discard
from ._eventlog_messages import ErrorReply as ErrorReply
from ._eventlog_messages import Event as Event
from ._eventlog_messages import Events as Events
from ._eventlog_messages import GetBootReport as GetBootReport
from ._eventlog_messages import OkReply as OkReply
from ._eventlog_messages import Receipt as Receipt
from ._eventlog_messages import Resume as Resume
from ._eventlog_messages import ResyncRequired as ResyncRequired
from ._eventlog_messages import Snapshot as Snapshot
from ._eventlog_messages import SnapshotReply as SnapshotReply
from ._eventlog_messages import Status as Status
from ._eventlog_messages import StatusReply as StatusReply
from ._eventlog_messages import Submit as Submit
from ._eventlog_messages import Subscribe as Subscribe
from ._eventlog_messages import Unsubscribe as Unsubscribe
from ._eventlog_messages import Watch as Watch
from ._field_error import FieldError as FieldError
from ._fields import ADDED_OPTIONAL as ADDED_OPTIONAL
from ._fields import MAX_JSON_INT as MAX_JSON_INT
from ._fields import MAX_OPERATION_LENGTH as MAX_OPERATION_LENGTH
from ._fields import MAX_REQUEST_ID_LENGTH as MAX_REQUEST_ID_LENGTH
from ._fields import MAX_TEXT_LENGTH as MAX_TEXT_LENGTH
from ._fields import MAX_URL_LENGTH as MAX_URL_LENGTH
from ._fields import MAX_VISIBLE_RUNS as MAX_VISIBLE_RUNS
from ._fields import is_code as is_code
from ._run_data import MAX_DATA_BUCKETS as MAX_DATA_BUCKETS
from ._run_data import MAX_DATA_SIDE as MAX_DATA_SIDE
from ._run_data import DataAxis as DataAxis
from ._run_data import DataSeries as DataSeries
from ._run_data import RunData as RunData
from ._run_data import RunDataReply as RunDataReply
from ._run_messages import MAX_NOTE as MAX_NOTE
from ._run_messages import SCALES as SCALES
from ._run_messages import XSCALES as XSCALES
from ._run_messages import Annotate as Annotate
from ._run_messages import DependentPoints as DependentPoints
from ._run_messages import Draw as Draw
from ._run_messages import Drawing as Drawing
from ._run_messages import ImageReady as ImageReady
from ._run_messages import ListRuns as ListRuns
from ._run_messages import ListRunTimes as ListRunTimes
from ._run_messages import RunDetails as RunDetails
from ._run_messages import RunDetailsReply as RunDetailsReply
from ._run_messages import RunLink as RunLink
from ._run_messages import RunList as RunList
from ._run_messages import RunSummary as RunSummary
from ._run_messages import RunTime as RunTime
from ._run_messages import RunTimes as RunTimes
from ._run_messages import Select as Select
from ._run_messages import Visible as Visible

__all__ = [
    "MAX_DATA_BUCKETS",
    "MAX_DATA_SIDE",
    "MAX_JSON_INT",
    "MAX_NOTE",
    "MAX_URL_LENGTH",
    "is_code",
    "MAX_REQUEST_ID_LENGTH",
    "MAX_VISIBLE_RUNS",
    "TAGS",
    "Ack",
    "BootReportReply",
    "Cancel",
    "ClientRequest",
    "DataAxis",
    "DataSeries",
    "DATABASE_STATES",
    "DatabaseAdded",
    "DatabaseInfo",
    "DatabaseList",
    "DatabaseRemoved",
    "Discard",
    "Draw",
    "Drawing",
    "ErrorReply",
    "Event",
    "Events",
    "GetBootReport",
    "ImageReady",
    "ListDatabases",
    "ListRunTimes",
    "ListRuns",
    "Message",
    "OkReply",
    "Receipt",
    "ResyncRequired",
    "Resume",
    "Annotate",
    "RunDetails",
    "RunData",
    "RunDataReply",
    "RunDetailsReply",
    "RunLink",
    "RunList",
    "DependentPoints",
    "RunSummary",
    "RunTime",
    "RunTimes",
    "Select",
    "ServerMessage",
    "Snapshot",
    "SnapshotReply",
    "Status",
    "StatusReply",
    "Submit",
    "Subscribe",
    "Unsubscribe",
    "UseDatabase",
    "Visible",
    "Watch",
]

#: Every client → server request.
ClientRequest = Union[  # noqa: UP007 - cattrs needs a typing.Union object at runtime
    Submit,
    Cancel,
    Status,
    Snapshot,
    Watch,
    Subscribe,
    Unsubscribe,
    Ack,
    GetBootReport,
    Resume,
    Discard,
    Select,
    Visible,
    ListRuns,
    ListRunTimes,
    RunDetails,
    Annotate,
    Draw,
    RunData,
    ListDatabases,
    UseDatabase,
]
#: Every server → client message.
ServerMessage = Union[  # noqa: UP007 - see above
    Receipt,
    Event,
    Events,
    ErrorReply,
    StatusReply,
    SnapshotReply,
    BootReportReply,
    OkReply,
    RunList,
    ImageReady,
    ResyncRequired,
    RunTimes,
    RunDetailsReply,
    Drawing,
    RunDataReply,
    DatabaseList,
    DatabaseAdded,
    DatabaseRemoved,
]
#: Any message, either direction.
Message = Union[ClientRequest, ServerMessage]  # noqa: UP007 - see above


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


#: The ``"type"`` tag of each message class (stable: clients match on it).
TAGS: Final[dict[type, str]] = {
    cls: _snake(cls.__name__) for cls in (*get_args(ClientRequest), *get_args(ServerMessage))
}
TAGS[ErrorReply] = "error"
TAGS[OkReply] = "ok"
# Named for what it asks, as the event log's in-process request is; the tag is older.
TAGS[GetBootReport] = "boot_report"
