"""The event-log actor's requests, each declared once (design §6).

A request is one message class: its fields are the request's arguments (in the order
and with the defaults callers pass them), its base ``Request[R]`` names the type ``R`` of
its answer, and :func:`request` records how the actor serves it in :data:`REQUESTS`:
the name of the :class:`~actors.EventLog` method that decides it (also the name of the
:class:`~actors.EventLogClient` method that asks it), and whether it waits (for
durability or a ledger read) and then whether it decides something. The actor's
dispatch (:mod:`actors._eventlog._actor`) and the client's methods
(:mod:`actors._eventlog._client`) are derived from this table, not written again.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

# The replies are named at run time too: ``Request[...]`` in each message's bases.
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
    "Request",
    "RequestSpec",
    "Resume",
    "SetPortEnabled",
    "Start",
    "Status",
    "Submit",
    "Subscribe",
    "TakeSnapshot",
    "Watch",
    "request",
]

R = TypeVar("R", covariant=True)
M = TypeVar("M", bound="type[Request[Any]]")


class Request(Generic[R]):
    """Base of the event-log requests: ``R`` is the type of the answer."""

    __slots__ = ()


@attrs.frozen(kw_only=True)
class RequestSpec:
    """How the event-log actor serves one request class (see :func:`request`)."""

    message: type[Request[Any]]
    """The request's message class."""
    method: str
    """The :class:`~actors.EventLog` method that serves it, and the client's method."""
    waits: bool
    """Answered from a task of the actor's nursery (it waits for the ledger)."""
    decides: bool
    """It decides something, so it is carried out even for an asker who left."""

    @property
    def reply(self) -> str:
        """The answer's type, as written in the message's base ``Request[...]``."""
        (base,) = self.message.__orig_bases__  # type: ignore[attr-defined]
        (arg,) = typing.get_args(base)
        if isinstance(arg, typing.ForwardRef):
            return arg.__forward_arg__
        return "None" if arg is type(None) else str(arg.__name__)


#: Every event-log request by message class, in declaration order.
REQUESTS: dict[type[Request[Any]], RequestSpec] = {}


def request(method: str, *, waits: bool = False, decides: bool = True) -> Callable[[M], M]:
    """Declare a message class as the event-log request served by ``EventLog.<method>``.

    Raises:
        ValueError: the class or the method is declared already.
    """

    def declare(message: M) -> M:
        if message in REQUESTS or any(spec.method == method for spec in REQUESTS.values()):
            raise ValueError(f"{message.__name__} ({method!r}) is declared twice")
        REQUESTS[message] = RequestSpec(
            message=message, method=method, waits=waits, decides=decides
        )
        return message

    return declare


@request("submit", waits=True, decides=False)
@attrs.frozen
class Submit(Request[Receipt]):
    """Ask for a receipt (design §6.1-6.5); answered with a :class:`Receipt`."""

    operation: str
    arguments: Mapping[str, Any]
    request_id: str | None = None
    actor: str | None = attrs.field(default=None, kw_only=True)


@request("start", waits=True, decides=False)
@attrs.frozen
class Start(Request[RunStatus]):
    """An executor claims a run (design §6.6); answered with its :class:`RunStatus`."""

    run_id: int
    on_cancel: Callable[[], object] | None = attrs.field(default=None, kw_only=True)


@request("progress")
@attrs.frozen
class Progress(Request[None]):
    """Progress of a run, fraction in [0, 1] (design §6.6); answered with None."""

    run_id: int
    fraction: float
    note: str | None = None


@request("finish")
@attrs.frozen
class Finish(Request[RunStatus]):
    """A verdict for a run (design §6.6); answered with its :class:`RunStatus`."""

    run_id: int
    verdict: str
    result: Any = None
    error: Mapping[str, str] | None = attrs.field(default=None, kw_only=True)


@request("cancel", waits=True)
@attrs.frozen
class Cancel(Request[RunStatus]):
    """Cancel a run or detach requests, by ``actor`` (design §6.7, §6.14); answered with
    the true status."""

    run_id: int
    actor: str = "local"
    request_id: str | None = attrs.field(default=None, kw_only=True)


@request("status", waits=True, decides=False)
@attrs.frozen
class Status(Request[RunStatus]):
    """The state of a run (or of one request joined to it); needs no capacity; answered
    with a :class:`RunStatus`."""

    run_id: int
    request_id: str | None = attrs.field(default=None, kw_only=True)


@request("watch", waits=True, decides=False)
@attrs.frozen
class Watch(Request[WatchResult]):
    """The events after ``cursor`` (design §6.8); answered with a :class:`WatchResult`."""

    cursor: int
    limit: int | None = attrs.field(default=None, kw_only=True)


@request("subscribe")
@attrs.frozen
class Subscribe(Request[Port]):
    """Open a bounded port (design §6.9); answered with the :class:`Port` (in-process)."""

    name: str | None = None
    cursor: int | None = attrs.field(default=None, kw_only=True)
    bound: int | None = attrs.field(default=None, kw_only=True)
    local: bool = attrs.field(default=True, kw_only=True)
    listener: Callable[[Event], object] | None = attrs.field(default=None, kw_only=True)


@request("snapshot")
@attrs.frozen
class TakeSnapshot(Request[EventLogSnapshot]):
    """Every live run and its consistent cursor (design §6.15); answered at once with
    an :class:`EventLogSnapshot`."""


@request("set_port_enabled")
@attrs.frozen
class SetPortEnabled(Request[PortStatistics]):
    """Enable or disable a port; local callers only (design §6.9)."""

    name: str
    enabled: bool
    local: bool = attrs.field(kw_only=True)


@request("apply_edit")
@attrs.frozen
class ApplyEdit(Request[int]):
    """Bump the revision (design §6.4); answered with the new revision."""


@request("boot_report")
@attrs.frozen
class GetBootReport(Request[BootReport]):
    """Answered with the :class:`BootReport` (design §6.10)."""


@request("resume", waits=True)
@attrs.frozen
class Resume(Request[RunStatus]):
    """Queue a held run again (design §6.10); answered with its :class:`RunStatus`."""

    run_id: int
    override: bool = attrs.field(default=False, kw_only=True)


@request("discard", waits=True)
@attrs.frozen
class Discard(Request[RunStatus]):
    """Decide a held run cancelled (design §6.10); answered with its :class:`RunStatus`."""

    run_id: int
    actor: str = attrs.field(default="local", kw_only=True)


@request("check_drift", waits=True, decides=False)
@attrs.frozen
class CheckDrift(Request[Drift]):
    """Compare a run's pinned ingredients with ``current`` (design §6.10)."""

    run_id: int
    current: Mapping[str, Any] | None = None


@request("record")
@attrs.frozen
class Record(Request[int]):
    """Append a log-wide event (design §6.8); answered with its seq.

    Served with its fields checked: a bad ``kind`` or ``data`` is refused with
    ``InvalidCommand`` (``invalid_command``, ``details["fields"]`` names it) where
    :meth:`EventLog.record` raises ``ValueError``.
    """

    kind: str
    data: Mapping[str, Any]


@request("finished_runs", waits=True, decides=False)
@attrs.frozen(kw_only=True)
class QueryFinished(Request[FinishedRunsPage]):
    """One page of decided runs (design §6.18); answered with a ``FinishedRunsPage``."""

    after: int = 0
    limit: int | None = None
    state: str | None = None
    verdict: str | None = None
    since: float | None = None


@request("statistics")
@attrs.frozen
class GetEventLogStatistics(Request[EventLogStatistics]):
    """Answered with the log's :class:`EventLogStatistics`."""
