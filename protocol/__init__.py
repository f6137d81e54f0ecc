"""Sans-io protocol of trio-actors: messages, codec, framing, envelope (design §2).

This package never imports trio; only ``actors`` and ``examples`` do I/O.
"""

from __future__ import annotations

from .codec import DEFAULT_MAX_MESSAGE as DEFAULT_MAX_MESSAGE
from .codec import DEFAULT_MAX_SERVER_MESSAGE as DEFAULT_MAX_SERVER_MESSAGE
from .codec import decode_client_message as decode_client_message
from .codec import decode_server_message as decode_server_message
from .codec import encode_message as encode_message
from .codec import make_converter as make_converter
from .codec import structure_message as structure_message
from .codec import unstructure_message as unstructure_message

from .envelope import MAX_GENERATION as MAX_GENERATION
from .envelope import PROTOCOL_VERSION as PROTOCOL_VERSION
from .envelope import Blob as Blob
from .envelope import Envelope as Envelope
from .envelope import check_reply as check_reply
from .envelope import decode_envelope as decode_envelope
from .envelope import encode_envelope as encode_envelope
from .envelope import new_session as new_session
from .errors import ActorError as ActorError
from .errors import FrameTooLarge as FrameTooLarge
from .errors import InvalidMessage as InvalidMessage
from .errors import MessageTooLarge as MessageTooLarge
from .errors import ProtocolError as ProtocolError
from .errors import ProtocolViolation as ProtocolViolation
from .errors import TruncatedFrame as TruncatedFrame
from .errors import UnknownType as UnknownType
from .framing import DEFAULT_MAX_REPLY as DEFAULT_MAX_REPLY
from .framing import DEFAULT_MAX_REQUEST as DEFAULT_MAX_REQUEST
from .framing import FrameDecoder as FrameDecoder
from .framing import encode_frame as encode_frame
from .messages import MAX_JSON_INT as MAX_JSON_INT
from .messages import MAX_REQUEST_ID_LENGTH as MAX_REQUEST_ID_LENGTH
from .messages import MAX_VISIBLE_RUNS as MAX_VISIBLE_RUNS
from .messages import TAGS as TAGS
from .messages import Ack as Ack
from .messages import BootReportReply as BootReportReply
from .messages import Cancel as Cancel
from .messages import ClientRequest as ClientRequest
from .messages import Discard as Discard
from .messages import Draw as Draw
from .messages import Drawing as Drawing
from .messages import ErrorReply as ErrorReply
from .messages import Event as Event
from .messages import Events as Events
from .messages import GetBootReport as GetBootReport
from .messages import DatabaseAdded as DatabaseAdded
from .messages import DatabaseInfo as DatabaseInfo
from .messages import DatabaseList as DatabaseList
from .messages import DatabaseRemoved as DatabaseRemoved
from .messages import ListDatabases as ListDatabases
from .messages import UseDatabase as UseDatabase
from .messages import ImageReady as ImageReady
from .messages import ListRuns as ListRuns
from .messages import ListRunTimes as ListRunTimes
from .messages import Message as Message
from .messages import OkReply as OkReply
from .messages import Receipt as Receipt
from .messages import Resume as Resume
from .messages import ResyncRequired as ResyncRequired
from .messages import DataAxis as DataAxis
from .messages import DataSeries as DataSeries
from .messages import RunData as RunData
from .messages import RunDataReply as RunDataReply
from .messages import Annotate as Annotate
from .messages import RunDetails as RunDetails
from .messages import RunDetailsReply as RunDetailsReply
from .messages import RunLink as RunLink
from .messages import RunList as RunList
from .messages import DependentPoints as DependentPoints
from .messages import RunSummary as RunSummary
from .messages import RunTime as RunTime
from .messages import RunTimes as RunTimes
from .messages import Select as Select
from .messages import ServerMessage as ServerMessage
from .messages import Snapshot as Snapshot
from .messages import SnapshotReply as SnapshotReply
from .messages import Status as Status
from .messages import StatusReply as StatusReply
from .messages import Submit as Submit
from .messages import Subscribe as Subscribe
from .messages import Unsubscribe as Unsubscribe
from .messages import Visible as Visible
from .messages import Watch as Watch
from .records import ErrorRecord as ErrorRecord

_PROTOCOL_NAMES = [
    "DEFAULT_MAX_REPLY",
    "DEFAULT_MAX_REQUEST",
    "FrameDecoder",
    "encode_frame",
    "MAX_GENERATION",
    "PROTOCOL_VERSION",
    "Blob",
    "Envelope",
    "check_reply",
    "decode_envelope",
    "encode_envelope",
    "new_session",
    "UnknownType",
    "MAX_JSON_INT",
    "MAX_REQUEST_ID_LENGTH",
    "MAX_VISIBLE_RUNS",
    "TAGS",
    "ClientRequest",
    "ServerMessage",
    "Message",
    "Submit",
    "Cancel",
    "Status",
    "Snapshot",
    "Watch",
    "Subscribe",
    "Unsubscribe",
    "Ack",
    "GetBootReport",
    "Resume",
    "DataAxis",
    "DataSeries",
    "Discard",
    "Select",
    "Visible",
    "ListRuns",
    "ListRunTimes",
    "RunData",
    "RunDataReply",
    "Annotate",
    "RunDetails",
    "Draw",
    "ListDatabases",
    "UseDatabase",
    "Receipt",
    "Event",
    "Events",
    "ErrorReply",
    "StatusReply",
    "SnapshotReply",
    "BootReportReply",
    "OkReply",
    "RunList",
    "DependentPoints",
    "RunSummary",
    "ImageReady",
    "ResyncRequired",
    "RunTime",
    "RunTimes",
    "RunLink",
    "RunDetailsReply",
    "Drawing",
    "DatabaseInfo",
    "DatabaseList",
    "DatabaseAdded",
    "DatabaseRemoved",
    "DEFAULT_MAX_MESSAGE",
    "DEFAULT_MAX_SERVER_MESSAGE",
    "make_converter",
    "encode_message",
    "unstructure_message",
    "decode_client_message",
    "decode_server_message",
    "structure_message",
]

__all__ = [
    "ActorError",
    "ErrorRecord",
    "FrameTooLarge",
    "InvalidMessage",
    "MessageTooLarge",
    "ProtocolError",
    "ProtocolViolation",
    "TruncatedFrame",
    *_PROTOCOL_NAMES,
]
