"""The event-log actor's requests, each declared once (design §6).

A request is one message class: its fields are the request's arguments (in the order
and with the defaults callers pass them), its base ``EventLogRequest[R]`` names the type ``R`` of
its answer, and :func:`request` records how the actor serves it in :data:`REQUESTS`:
the name of the :class:`~actors.EventLog` method that decides it (also the name of the
:class:`~actors.EventLogClient` method that asks it), and whether it waits (for
durability or a ledger read) and then whether it decides something. A request that
clients also send over the websocket names its wire form there (a :class:`WireForm`:
the :mod:`protocol.messages` class it arrives as, and the reply it leaves as). The
actor's dispatch (:mod:`actors._eventlog._actor`), the client's methods
(:mod:`actors._eventlog._client`) and the web API's handlers (``examples.web.api``) are
derived from this table, not written again.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from protocol import messages

# The replies are named at run time too: ``EventLogRequest[...]`` in each message's bases.
from ._finished import FinishedRunsPage
from ._ports import Port, PortStatistics
from ._statistics import EventLogStatistics
from ._types import BootReport, Drift, EventLogSnapshot, Receipt, RunStatus, WatchResult

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ._types import Event

__all__ = [
    "REQUESTS",
    "ApplyEdit",
    "Cancel",
    "CheckDrift",
    "Discard",
    "Finish",
    "GetBootReport",
    "GetEventLogStatistics",
    "Progress",
    "QueryFinished",
    "Record",
    "EventLogRequest",
    "RequestSpec",
    "Resume",
    "SetPortEnabled",
    "Start",
    "Status",
    "Submit",
    "Subscribe",
    "TakeSnapshot",
    "WIRE_FORMS",
    "Watch",
    "WireForm",
    "field_names",
    "request",
]

R = TypeVar("R", covariant=True)
M = TypeVar("M", bound="type[EventLogRequest[Any]]")


class EventLogRequest(Generic[R]):
    """Base of the event-log requests: ``R`` is the type of the answer."""

    __slots__ = ()


@attrs.frozen(kw_only=True)
class WireForm:
    """How a request arrives over the websocket, and leaves as a reply (design §2.4, §7.1).

    The wire message's fields fill the request's same-named fields (``rename`` maps a
    wire field to another request field); its ``request_id`` is the client's id of the
    message, which fills the request's only if the request has that field and no wire
    field is renamed to it. The server fills ``caller`` with the asking connection's name
    and ``page`` with its page bound (events per answer). Every other field of the
    request keeps its default.
    """

    message: type
    """The :mod:`protocol.messages` request class (its tag is the wire ``type``)."""
    reply: type
    """The :mod:`protocol.messages` class that answers it."""
    rename: Mapping[str, str] = attrs.field(factory=dict)
    """Wire field → request field, where the names differ."""
    caller: str | None = None
    """The request field the server fills with the asking connection's name."""
    page: str | None = None
    """The request field the server fills with its page bound."""


@attrs.frozen(kw_only=True)
class RequestSpec:
    """How the event-log actor serves one request class (declared with ``request``)."""

    message: type[EventLogRequest[Any]]
    """The request's message class."""
    method: str
    """The :class:`~actors.EventLog` method that serves it, and the client's method."""
    waits: bool
    """Answered from a task of the actor's nursery (it waits for the ledger)."""
    decides: bool
    """It decides something, so it is carried out even for an asker who left."""
    wire: WireForm | None
    """How clients send it over the websocket; None: in-process only."""

    def wire_arguments(self, wire: object, *, caller: str, page: int) -> dict[str, Any]:
        """The request's fields from a client's wire message ``wire`` (see :class:`WireForm`).

        They are the keyword arguments of the message class and of the client's method.

        Raises:
            ValueError: the request is not sent over the websocket.
        """
        form = self.wire
        if form is None:
            raise ValueError(f"{self.message.__name__} is not sent over the websocket")
        fields = field_names(self.message)
        renamed = set(form.rename.values())  # a wire field of that name is not the request's
        arguments = {
            form.rename.get(name, name): getattr(wire, name)
            for name in field_names(form.message)
            if form.rename.get(name, name) in fields
            and (name in form.rename or name not in renamed)
        }
        if form.caller is not None:
            arguments[form.caller] = caller
        if form.page is not None:
            arguments[form.page] = page
        return arguments

    @property
    def answer(self) -> type:
        """The answer's class (``R`` of the message's base ``EventLogRequest[R]``)."""
        (base,) = self.message.__orig_bases__  # type: ignore[attr-defined]
        (arg,) = typing.get_args(base)
        return type(None) if arg is None else typing.cast("type", arg)

    @property
    def reply(self) -> str:
        """The answer's type, as written in the message's base ``EventLogRequest[...]``."""
        (base,) = self.message.__orig_bases__  # type: ignore[attr-defined]
        (arg,) = typing.get_args(base)
        if isinstance(arg, typing.ForwardRef):
            return arg.__forward_arg__
        return "None" if arg is type(None) else str(arg.__name__)


def field_names(message: type) -> tuple[str, ...]:
    """The field names of an attrs message class, in order."""
    return tuple(field.name for field in attrs.fields(typing.cast("Any", message)))


#: Every event-log request by message class, in declaration order.
REQUESTS: dict[type[EventLogRequest[Any]], RequestSpec] = {}
#: The requests clients send over the websocket, by wire message class.
WIRE_FORMS: dict[type, RequestSpec] = {}


def request(
    method: str, *, waits: bool = False, decides: bool = True, wire: WireForm | None = None
) -> Callable[[M], M]:
    """Declare a message class as the event-log request served by ``EventLog.<method>``.

    Raises:
        ValueError: the class, the method or the wire message is declared already, or
            ``wire`` names a field the request does not have.
    """

    def declare(message: M) -> M:
        if message in REQUESTS or any(spec.method == method for spec in REQUESTS.values()):
            raise ValueError(f"{message.__name__} ({method!r}) is declared twice")
        spec = RequestSpec(message=message, method=method, waits=waits, decides=decides, wire=wire)
        if wire is not None:
            if wire.message in WIRE_FORMS:
                raise ValueError(f"{wire.message.__name__} is declared twice")
            named = {*wire.rename.values(), wire.caller, wire.page} - {None}
            unknown = sorted(str(name) for name in named - set(field_names(message)))
            if unknown:
                raise ValueError(f"{message.__name__} has no field {unknown}")
            WIRE_FORMS[wire.message] = spec
        REQUESTS[message] = spec
        return message

    return declare


@request(
    "submit",
    waits=True,
    decides=False,
    wire=WireForm(message=messages.Submit, reply=messages.Receipt, caller="actor"),
)
@attrs.frozen
class Submit(EventLogRequest[Receipt]):
    """Ask for a receipt (design §6.1-6.5); answered with a :class:`Receipt`."""

    operation: str
    arguments: Mapping[str, Any]
    request_id: str | None = None
    actor: str | None = attrs.field(default=None, kw_only=True)


@request("start", waits=True, decides=False)
@attrs.frozen
class Start(EventLogRequest[RunStatus]):
    """An executor claims a run (design §6.6); answered with its :class:`RunStatus`."""

    run_id: int
    on_cancel: Callable[[], object] | None = attrs.field(default=None, kw_only=True)


@request("progress")
@attrs.frozen
class Progress(EventLogRequest[None]):
    """Progress of a run, fraction in [0, 1] (design §6.6); answered with None."""

    run_id: int
    fraction: float
    note: str | None = None


@request("finish")
@attrs.frozen
class Finish(EventLogRequest[RunStatus]):
    """A verdict for a run (design §6.6); answered with its :class:`RunStatus`."""

    run_id: int
    verdict: str
    result: Any = None
    error: Mapping[str, str] | None = attrs.field(default=None, kw_only=True)


@request(
    "cancel",
    waits=True,
    wire=WireForm(
        message=messages.Cancel,
        reply=messages.StatusReply,
        rename={"waiter": "request_id"},
        caller="actor",
    ),
)
@attrs.frozen
class Cancel(EventLogRequest[RunStatus]):
    """Cancel a run or detach requests, by ``actor`` (design §6.7, §6.14); answered with
    the true status."""

    run_id: int
    actor: str = "local"
    request_id: str | None = attrs.field(default=None, kw_only=True)


@request(
    "status",
    waits=True,
    decides=False,
    wire=WireForm(
        message=messages.Status, reply=messages.StatusReply, rename={"waiter": "request_id"}
    ),
)
@attrs.frozen
class Status(EventLogRequest[RunStatus]):
    """The state of a run (or of one request joined to it); needs no capacity; answered
    with a :class:`RunStatus`."""

    run_id: int
    request_id: str | None = attrs.field(default=None, kw_only=True)


@request(
    "watch",
    waits=True,
    decides=False,
    wire=WireForm(message=messages.Watch, reply=messages.Events, page="limit"),
)
@attrs.frozen
class Watch(EventLogRequest[WatchResult]):
    """The events after ``cursor`` (design §6.8); answered with a :class:`WatchResult`."""

    cursor: int
    limit: int | None = attrs.field(default=None, kw_only=True)


@request("subscribe")
@attrs.frozen
class Subscribe(EventLogRequest[Port]):
    """Open a bounded port (design §6.9); answered with the :class:`Port` (in-process)."""

    name: str | None = None
    cursor: int | None = attrs.field(default=None, kw_only=True)
    bound: int | None = attrs.field(default=None, kw_only=True)
    local: bool = attrs.field(default=True, kw_only=True)
    listener: Callable[[Event], object] | None = attrs.field(default=None, kw_only=True)


@request("snapshot", wire=WireForm(message=messages.Snapshot, reply=messages.SnapshotReply))
@attrs.frozen
class TakeSnapshot(EventLogRequest[EventLogSnapshot]):
    """Every live run and its consistent cursor (design §6.15); answered at once with
    an :class:`EventLogSnapshot`."""


@request("set_port_enabled")
@attrs.frozen
class SetPortEnabled(EventLogRequest[PortStatistics]):
    """Enable or disable a port; local callers only (design §6.9)."""

    name: str
    enabled: bool
    local: bool = attrs.field(kw_only=True)


@request("apply_edit")
@attrs.frozen
class ApplyEdit(EventLogRequest[int]):
    """Bump the revision (design §6.4); answered with the new revision."""


@request(
    "boot_report",
    wire=WireForm(message=messages.GetBootReport, reply=messages.BootReportReply),
)
@attrs.frozen
class GetBootReport(EventLogRequest[BootReport]):
    """Answered with the :class:`BootReport` (design §6.10)."""


@request("resume", waits=True, wire=WireForm(message=messages.Resume, reply=messages.Receipt))
@attrs.frozen
class Resume(EventLogRequest[RunStatus]):
    """Queue a held run again (design §6.10); answered with its :class:`RunStatus`."""

    run_id: int
    override: bool = attrs.field(default=False, kw_only=True)


@request(
    "discard",
    waits=True,
    wire=WireForm(message=messages.Discard, reply=messages.StatusReply, caller="actor"),
)
@attrs.frozen
class Discard(EventLogRequest[RunStatus]):
    """Decide a held run cancelled (design §6.10); answered with its :class:`RunStatus`."""

    run_id: int
    actor: str = attrs.field(default="local", kw_only=True)


@request("check_drift", waits=True, decides=False)
@attrs.frozen
class CheckDrift(EventLogRequest[Drift]):
    """Compare a run's pinned ingredients with ``current`` (design §6.10)."""

    run_id: int
    current: Mapping[str, Any] | None = None


@request("record")
@attrs.frozen
class Record(EventLogRequest[int]):
    """Append a log-wide event (design §6.8); answered with its seq.

    Served with its fields checked: a bad ``kind`` or ``data`` is refused with
    ``InvalidCommand`` (``invalid_command``, ``details["fields"]`` names it) where
    :meth:`EventLog.record` raises ``ValueError``.
    """

    kind: str
    data: Mapping[str, Any]


@request("finished_runs", waits=True, decides=False)
@attrs.frozen(kw_only=True)
class QueryFinished(EventLogRequest[FinishedRunsPage]):
    """One page of decided runs (design §6.18); answered with a ``FinishedRunsPage``."""

    after: int = 0
    limit: int | None = None
    state: str | None = None
    verdict: str | None = None
    since: float | None = None


@request("statistics")
@attrs.frozen
class GetEventLogStatistics(EventLogRequest[EventLogStatistics]):
    """Answered with the log's :class:`EventLogStatistics`."""
