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
``draw``             one picture of a run: a slice, a scale (§5.2, §7.2); ``drawing``
``run_data``         a run's data, downsampled keeping extremes (§7.7); ``run_data_reply``
===================  ==================================================================

Server → client (:data:`ServerMessage`): ``receipt``, ``event``, ``events``, ``error``
(:class:`ErrorReply`), ``status_reply``, ``snapshot_reply``, ``boot_report_reply``,
``ok``, ``run_list``, ``payload``, ``resync_required``, ``run_times``,
``run_details_reply``, ``drawing``, ``run_data_reply``. Any request may instead be
answered by ``error``.
A refusal that may succeed later (a ``receipt`` with ``pool_full``, an ``error`` with
``ledger_unavailable``) says when to retry in ``retry_after`` (design §6.16).

All integers are bounded by ``2**53 - 1`` so a JavaScript client reads them exactly.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Final, Union, get_args

import attrs

from ._field_error import FieldError as FieldError
from ._run_data import MAX_DATA_BUCKETS, MAX_DATA_SIDE, DataAxis, DataSeries, RunData, RunDataReply
from .errors import MAX_ERROR_MESSAGE_BYTES, bound_message

if TYPE_CHECKING:
    from collections.abc import Callable

    from .errors import ActorError

__all__ = [
    "MAX_DATA_BUCKETS",
    "MAX_DATA_SIDE",
    "MAX_JSON_INT",
    "MAX_REQUEST_ID_LENGTH",
    "MAX_VISIBLE_RUNS",
    "TAGS",
    "Ack",
    "BootReport",
    "BootReportReply",
    "Cancel",
    "ClientRequest",
    "DataAxis",
    "DataSeries",
    "Discard",
    "Draw",
    "Drawing",
    "ErrorReply",
    "Event",
    "Events",
    "ListRunTimes",
    "ListRuns",
    "Message",
    "OkReply",
    "Payload",
    "Receipt",
    "ResyncRequired",
    "Resume",
    "RunDetails",
    "RunData",
    "RunDataReply",
    "RunDetailsReply",
    "RunLink",
    "RunList",
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
    "Visible",
    "Watch",
]

#: Largest integer in any message: what a JSON double (and JavaScript) holds exactly.
MAX_JSON_INT: Final = 2**53 - 1
#: Longest ``request_id``, in characters (design §2.4).
MAX_REQUEST_ID_LENGTH: Final = 128
#: Longest operation name, in characters.
MAX_OPERATION_LENGTH: Final = 128
#: Most run ids in one ``visible`` message.
MAX_VISIBLE_RUNS: Final = 1024
#: Longest free-text field (names, states, mime types), in characters.
MAX_TEXT_LENGTH: Final = 4096

_CODE_RE: Final = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
#: Field metadata key of an optional field added after the first release: the codec
#: leaves it out of the JSON while it is ``None``, so a message that does not use it
#: reads exactly as before (older clients' strict decoders are not surprised by it).
ADDED_OPTIONAL: Final = "added_optional"


def _text(max_length: int = MAX_TEXT_LENGTH, min_length: int = 1) -> Callable[..., None]:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, str):
            raise FieldError(attribute.name, f"must be a string, got {type(value).__name__}")
        if not min_length <= len(value) <= max_length:
            raise FieldError(
                attribute.name, f"must be {min_length}..{max_length} characters, got {len(value)}"
            )

    return check


def _count(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(attribute.name, f"must be an int, got {type(value).__name__}")
    if not 0 <= value <= MAX_JSON_INT:
        raise FieldError(attribute.name, f"must be in [0, 2**53-1], got {value}")


def _flag(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise FieldError(attribute.name, f"must be a bool, got {type(value).__name__}")


def _code(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or len(value) > 64 or not _CODE_RE.fullmatch(value):
        raise FieldError(attribute.name, f"must be a snake_case code, got {value!r:.80}")


def _json_object(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise FieldError(attribute.name, "must be a JSON object (a dict with str keys)")


def _counts(max_items: int) -> Callable[..., None]:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, tuple):
            raise FieldError(attribute.name, f"must be a tuple, got {type(value).__name__}")
        if len(value) > max_items:
            raise FieldError(attribute.name, f"must have at most {max_items} items")
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= MAX_JSON_INT:
                raise FieldError(
                    attribute.name, f"items must be ints in [0, 2**53-1], got {item!r}"
                )

    return check


def _optional(check: Callable[..., None]) -> Callable[..., None]:
    def optional(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None:
            check(instance, attribute, value)

    return optional


def _items_of(cls: type) -> Callable[..., None]:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, tuple) or not all(type(item) is cls for item in value):
            raise FieldError(attribute.name, f"must be a tuple of {cls.__name__}")

    return check


def _finite(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FieldError(attribute.name, f"must be a finite number, got {value!r:.80}")
    if abs(value) > MAX_JSON_INT:  # seconds: no time needs more, and a double stays exact
        raise FieldError(attribute.name, f"must be at most 2**53-1 in size, got {value!r:.80}")


def _seconds(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FieldError(attribute.name, f"must be a finite number of seconds, got {value!r:.80}")
    if not 0 <= value <= MAX_JSON_INT:
        raise FieldError(attribute.name, f"must be in [0, 2**53-1] seconds, got {value!r:.80}")


def _one_of(*choices: str) -> Callable[..., None]:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value not in choices:
            raise FieldError(
                attribute.name, f"must be one of {', '.join(choices)}, got {value!r:.80}"
            )

    return check


def _request_id() -> Any:
    return attrs.field(validator=_text(MAX_REQUEST_ID_LENGTH))


def _reply_id() -> Any:
    return attrs.field(validator=_optional(_text(MAX_REQUEST_ID_LENGTH)))


def _run_id() -> Any:
    return attrs.field(validator=_count)


def _added(check: Callable[..., None]) -> Any:
    """An optional field added after the first release (see :data:`ADDED_OPTIONAL`)."""
    return attrs.field(default=None, validator=_optional(check), metadata={ADDED_OPTIONAL: True})


# --------------------------------------------------------------------------------------
# Client → server requests
# --------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Submit:
    """Run ``operation`` with ``arguments`` (design §6.1-§6.5). Answered by a receipt."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters; resending the same content is idempotent."""
    operation: str = attrs.field(validator=_text(MAX_OPERATION_LENGTH))
    """Operation name, 1..128 characters."""
    arguments: dict[str, Any] = attrs.field(factory=dict, validator=_json_object)
    """The operation's arguments, a JSON object (default ``{}``)."""


@attrs.frozen(kw_only=True)
class Cancel:
    """Cancel run ``run_id``, or detach one of its waiters (design §6.7, §6.14).

    Answered by a status reply with the true state. Every ``submit`` joined to a run is
    one of its waiters; the run is cancelled when its last waiter leaves. Without
    ``waiter``, a connection's cancel detaches the waiters it submitted itself, or every
    waiter if it submitted none of them.
    """

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    run_id: int = _run_id()
    """The run to cancel."""
    waiter: str | None = _added(_text(MAX_REQUEST_ID_LENGTH))
    """The ``request_id`` of the ``submit`` to detach (only that one), or ``None``."""


@attrs.frozen(kw_only=True)
class Status:
    """Ask for run ``run_id``'s state (design §6.5: needs no capacity)."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    run_id: int = _run_id()
    """The run to report."""
    waiter: str | None = _added(_text(MAX_REQUEST_ID_LENGTH))
    """The ``request_id`` of a ``submit`` joined to the run: the state as that request
    sees it (``cancelled`` once it was detached, design §6.14); ``None``: the run's."""


@attrs.frozen(kw_only=True)
class Snapshot:
    """Ask for every live run and the cursor it is consistent with (design §6.15).

    Answered by ``snapshot_reply``. A client that lost its place (``cursor_expired``,
    ``resync_required``, a close with a cursor it can no longer watch from) replaces its
    view of the runs with the reply's and subscribes with ``cursor`` = the reply's.
    """

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""


@attrs.frozen(kw_only=True)
class Watch:
    """Ask once for the events after ``cursor`` (design §6.8). Answered by ``events``."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    cursor: int = attrs.field(validator=_count)
    """The last ``seq`` the client has seen (0: from the start)."""


@attrs.frozen(kw_only=True)
class Subscribe:
    """Start pushes of every event after ``cursor`` (design §6.9).

    Answered by ``events`` (the backlog and the cursor), then one ``event`` per new
    event until ``unsubscribe`` or ``resync_required``.
    """

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    cursor: int | None = attrs.field(default=None, validator=_optional(_count))
    """The last ``seq`` the client has seen; ``None`` (default): only new events."""


@attrs.frozen(kw_only=True)
class Unsubscribe:
    """Stop the pushes started by ``subscribe``. Answered by ``ok``."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""


@attrs.frozen(kw_only=True)
class Ack:
    """The client has processed every pushed event up to ``seq`` (design §6.9)."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    seq: int = attrs.field(validator=_count)
    """The highest ``seq`` processed."""


@attrs.frozen(kw_only=True)
class BootReport:
    """Ask which runs survived the last restart (design §6.10)."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""


@attrs.frozen(kw_only=True)
class Resume:
    """Run an interrupted run again (design §6.10). Answered by a receipt."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    run_id: int = _run_id()
    """The interrupted run."""
    override: bool = attrs.field(default=False, validator=_flag)
    """Needed to resume a quarantined run (interrupted twice)."""


@attrs.frozen(kw_only=True)
class Discard:
    """Give up an interrupted run for good (design §6.10)."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    run_id: int = _run_id()
    """The interrupted run."""


@attrs.frozen(kw_only=True)
class Select:
    """Set the selected run of the preview server (design §4.2, §7.2)."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    run_id: int | None = attrs.field(validator=_optional(_count))
    """The selected run, or ``None`` to clear the selection. Required (may be null)."""


@attrs.frozen(kw_only=True)
class Visible:
    """Set the runs shown in the client's viewport (design §4.2, §7.2)."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    run_ids: tuple[int, ...] = attrs.field(validator=_counts(MAX_VISIBLE_RUNS))
    """The visible runs, in display order; at most 1024 (a JSON array)."""


@attrs.frozen(kw_only=True)
class ListRuns:
    """Ask for the preview server's run list (design §7.2). Answered by ``run_list``."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""


@attrs.frozen(kw_only=True)
class ListRunTimes:
    """Ask for every run's start and end time (design §7.2). Answered by ``run_times``."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""


@attrs.frozen(kw_only=True)
class RunDetails:
    """Ask for one run's details (design §7.2). Answered by ``run_details_reply``."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    run_id: int = _run_id()
    """The database's run id."""


#: The value scales a ``draw`` may ask for (design §5.2).
SCALES: Final = ("auto", "linear", "log", "symlog")
#: The setpoint-axis scales a ``draw`` may ask for.
XSCALES: Final = ("auto", "linear", "log")


@attrs.frozen(kw_only=True)
class Draw:
    """Ask for one picture of a run: a chosen slice and scales (design §5.2, §7.2).

    Answered by ``drawing``. The picture is drawn from the run's newest data.
    """

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    run_id: int = _run_id()
    """The database's run id."""
    kind: str = attrs.field(default="preview", validator=_one_of("thumbnail", "preview"))
    """``thumbnail`` or ``preview``."""
    slice: int | None = attrs.field(default=None, validator=_optional(_count))
    """For a run with more than two sweep dimensions, the 2-D slice (from 0); ``None``
    for the slice holding the newest point."""
    scale: str = attrs.field(default="auto", validator=_one_of(*SCALES))
    """The value axis (or colour scale): ``auto``, ``linear``, ``log`` or ``symlog``."""
    xscale: str = attrs.field(default="auto", validator=_one_of(*XSCALES))
    """The setpoint axes: ``auto``, ``linear`` or ``log``."""


# --------------------------------------------------------------------------------------
# Server → client messages
# --------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Receipt:
    """Answer to ``submit``/``resume``: admitted or refused, never a verdict (design §6.1).

    A refusal at capacity has ``admitted=False``, ``code="pool_full"``,
    ``retryable=True``, and the queue ``depth`` and ``bound`` (design §6.5).
    """

    request_id: str | None = _reply_id()
    """The request's id (``None`` only for in-process submits)."""
    admitted: bool = attrs.field(validator=_flag)
    """True if a run was created or joined."""
    run_id: int | None = attrs.field(validator=_optional(_count))
    """The run created or joined; ``None`` when refused."""
    snapshot_id: str | None = attrs.field(validator=_optional(_text()))
    """Opaque id of the snapshot of inputs the run is pinned to (design §6.10)."""
    revision: int = attrs.field(validator=_count)
    """The source revision the run is tied to (design §6.4)."""
    event_cursor: int = attrs.field(validator=_count)
    """Event-log head when the receipt was made: watch from here (design §6.8)."""
    coalesced: bool = attrs.field(default=False, validator=_flag)
    """True if the request joined an equal run in flight (design §6.4)."""
    code: str | None = attrs.field(default=None, validator=_optional(_code))
    """For a refusal: why, e.g. ``pool_full``."""
    retryable: bool | None = attrs.field(default=None, validator=_optional(_flag))
    """For a refusal: whether retrying later may succeed."""
    depth: int | None = attrs.field(default=None, validator=_optional(_count))
    """For ``pool_full``: runs queued or running."""
    bound: int | None = attrs.field(default=None, validator=_optional(_count))
    """For ``pool_full``: the admission bound (``max_inflight``)."""
    retry_after: float | None = _added(_seconds)
    """For a refusal: seconds to wait before retrying, at least (design §6.16)."""


@attrs.frozen(kw_only=True)
class Event:
    """One event of the event log (design §6.6, §6.8); pushed, or inside ``events``."""

    seq: int = attrs.field(validator=_count)
    """Global, strictly increasing sequence number."""
    kind: str = attrs.field(validator=_code)
    """e.g. ``job_queued``, ``job_started``, ``job_progress``, ``job_finished``,
    ``job_cancelled``, ``admission_paused``, ``admission_resumed``."""
    run_id: int | None = attrs.field(default=None, validator=_optional(_count))
    """The run it is about; ``None`` for log-wide events."""
    data: dict[str, Any] = attrs.field(factory=dict, validator=_json_object)
    """Kind-specific facts (progress fraction, verdict, reason...), a JSON object."""


@attrs.frozen(kw_only=True)
class Events:
    """Answer to ``watch``/``subscribe``: events after a cursor, and the new cursor."""

    request_id: str | None = _reply_id()
    """The request's id."""
    events: tuple[Event, ...] = attrs.field(validator=_items_of(Event))
    """The events, in ``seq`` order (nested events carry no ``type`` key)."""
    cursor: int = attrs.field(validator=_count)
    """The ``seq`` to watch from next."""


@attrs.frozen(kw_only=True)
class ErrorReply:
    """A request failed, or a message could not be read (design §2.4). Tag ``"error"``.

    The connection stays up. ``code`` is the error class's code (design §1.5), e.g.
    ``invalid_message``, ``unknown_type``, ``message_too_large``, ``request_conflict``,
    ``cursor_expired``.
    """

    request_id: str | None = _reply_id()
    """The failed request's id; ``None`` if the message could not be read."""
    code: str = attrs.field(validator=_code)
    """Stable snake_case code."""
    message: str = attrs.field(validator=_text(MAX_ERROR_MESSAGE_BYTES, min_length=0))
    """Human-readable text, at most 1 KiB."""
    retryable: bool = attrs.field(validator=_flag)
    """True if the same request may succeed later (category ``transient``)."""
    details: dict[str, Any] = attrs.field(factory=dict, validator=_json_object)
    """Structured facts, e.g. ``fields`` for ``invalid_message``; ``resync`` (always
    ``"snapshot"``) and ``floor`` or ``resume_from`` for ``cursor_expired`` (design
    §6.15); ``cause`` for ``ledger_unavailable``. A JSON object (default ``{}``)."""
    retry_after: float | None = _added(_seconds)
    """For a retryable refusal (``ledger_unavailable``, ``pool_full``): seconds to wait
    before retrying, at least (design §6.16); ``None`` when the error gives no hint."""

    @classmethod
    def from_error(cls, error: ActorError, *, request_id: str | None) -> ErrorReply:
        """Build the reply for ``error``: its code, bounded message, retryability, details.

        ``error.details`` must be JSON-compatible (as :class:`~protocol.errors.ActorError`
        requires). A retryable error's ``details["retry_after"]`` (seconds) is also
        :attr:`retry_after`, where every client looks for it (design §6.16).
        """
        message = bound_message(error.message)
        if len(message) > MAX_ERROR_MESSAGE_BYTES:  # pragma: no cover - bytes ≥ characters
            message = message[:MAX_ERROR_MESSAGE_BYTES]
        hint = error.details.get("retry_after")
        retry_after: float | None = None
        if (
            error.retryable
            and isinstance(hint, int | float)
            and not isinstance(hint, bool)
            and 0 <= hint <= MAX_JSON_INT  # NaN compares false
        ):
            retry_after = float(hint)
        return cls(
            request_id=request_id,
            code=error.code,
            message=message,
            retryable=error.retryable,
            details=dict(error.details),
            retry_after=retry_after,
        )


@attrs.frozen(kw_only=True)
class StatusReply:
    """A run's state: answer to ``status``, ``cancel`` and ``discard`` (design §6.6, §6.7)."""

    request_id: str | None = _reply_id()
    """The request's id."""
    run_id: int = _run_id()
    """The run."""
    state: str = attrs.field(validator=_code)
    """e.g. ``queued``, ``running``, ``finished``, ``cancelled``, ``interrupted``,
    ``quarantined``, ``discarded`` — the true state, never a fake ``cancelled``."""
    verdict: str | None = attrs.field(default=None, validator=_optional(_text()))
    """For a finished run: ``ok``, ``empty``, ``interrupted``, ``failed``..."""
    progress: float | None = attrs.field(default=None)
    """Last reported progress in ``[0, 1]``, if any."""
    detail: dict[str, Any] = attrs.field(factory=dict, validator=_json_object)
    """Other facts (operation, reason, interruptions...), a JSON object."""

    @progress.validator
    def _check_progress(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise FieldError(attribute.name, f"must be a number in [0, 1], got {value!r}")


@attrs.frozen(kw_only=True)
class SnapshotReply:
    """Answer to ``snapshot``: every live run and its cursor, taken atomically (design §6.15).

    No event falls between the runs' states and ``cursor``: subscribe with
    ``cursor`` to follow every change after them. A run the client knew that is not
    here was decided meanwhile; ``status`` says how.
    """

    request_id: str | None = _reply_id()
    """The request's id."""
    cursor: int = attrs.field(validator=_count)
    """The ``seq`` of the newest event the runs' states include: subscribe from it."""
    revision: int = attrs.field(validator=_count)
    """The source revision (design §6.4)."""
    runs: tuple[StatusReply, ...] = attrs.field(validator=_items_of(StatusReply))
    """Each live run (``queued``, ``running``, ``held``) as ``status`` answers it, by run
    id (nested replies carry no ``type`` key and ``request_id`` null)."""


@attrs.frozen(kw_only=True)
class BootReportReply:
    """Answer to ``boot_report`` (design §6.10): nothing runs by itself after a restart."""

    request_id: str | None = _reply_id()
    """The request's id."""
    survivors: tuple[int, ...] = attrs.field(validator=_counts(MAX_JSON_INT))
    """Admitted runs that had not finished."""
    interrupted: tuple[int, ...] = attrs.field(validator=_counts(MAX_JSON_INT))
    """Runs that were running when the process stopped."""
    quarantined: tuple[int, ...] = attrs.field(validator=_counts(MAX_JSON_INT))
    """Runs interrupted twice: resuming them needs ``override``."""


@attrs.frozen(kw_only=True)
class OkReply:
    """Plain acknowledgement (``unsubscribe``, ``ack``, ``select``, ``visible``). Tag ``"ok"``."""

    request_id: str | None = _reply_id()
    """The request's id."""


@attrs.frozen(kw_only=True)
class RunSummary:
    """One row of ``run_list``: a measurement run of the preview server (design §7.2)."""

    run_id: int = _run_id()
    """The database's run id."""
    name: str = attrs.field(validator=_text(min_length=0))
    """Measurement name."""
    experiment: str = attrs.field(validator=_text(min_length=0))
    """Experiment name."""
    sample: str | None = attrs.field(default=None, validator=_optional(_text(min_length=0)))
    """Sample name, if known."""
    guid: str | None = attrs.field(default=None, validator=_optional(_text()))
    """The run's GUID, if known."""
    shape: tuple[int, ...] = attrs.field(default=(), validator=_counts(8))
    """Declared data shape (one int per axis; ``()`` if unknown)."""
    completed: bool = attrs.field(validator=_flag)
    """False while the run is still being written (a progressive source, design §4.5)."""
    rows: int = attrs.field(validator=_count)
    """Number of result rows so far."""
    status: str | None = attrs.field(default=None, validator=_optional(_code))
    """What the newest read of the run found, so a late client needs no event replay:
    ``ok``, ``empty``, ``interrupted``, ``incomplete`` (not completed, and nothing was
    written for a while: the writer is gone), ``progressive`` (still being written,
    design §4.5) or ``unreadable`` (its metadata failed); ``None`` while unknown (not read
    yet at its newest revision). Added after the first release: optional."""
    job_run_id: int | None = attrs.field(default=None, validator=_optional(_count))
    """The event-log run reporting this run's work now, or the last one that did (its
    events carry it as ``run_id``; ask ``status``/``cancel`` with it); ``None`` before
    one was admitted. Optional, like ``status``."""


@attrs.frozen(kw_only=True)
class RunList:
    """The run list: answer to ``list_runs``, or pushed when it changes (design §7.2)."""

    request_id: str | None = _reply_id()
    """The request's id; ``None`` when pushed."""
    runs: tuple[RunSummary, ...] = attrs.field(validator=_items_of(RunSummary))
    """The runs, in database order."""


@attrs.frozen(kw_only=True)
class Payload:
    """A rendered image for a run, pushed by the preview server (design §5, §7.2)."""

    run_id: int = _run_id()
    """The run."""
    kind: str = attrs.field(validator=_code)
    """``thumbnail`` or ``preview``."""
    revision: int = attrs.field(validator=_count)
    """Source revision it was drawn from (design §4.8)."""
    mime: str = attrs.field(validator=_text(255))
    """Media type, e.g. ``image/png``."""
    data_b64: str = attrs.field(validator=_text(2**31, min_length=0))
    """The image bytes, standard base64."""
    width: int = attrs.field(validator=_count)
    """Image width, in pixels."""
    height: int = attrs.field(validator=_count)
    """Image height, in pixels."""


@attrs.frozen(kw_only=True)
class ResyncRequired:
    """The client fell behind its bounded queue; its backlog was dropped (design §6.9, §7.4).

    Sent ahead of anything still queued for the client, which is dropped. The example
    servers then close the connection (code 4000, with the same cursor in the reason).
    The client has every event up to ``cursor``: it watches or subscribes again from
    there while the log still holds it, else takes a ``snapshot`` (design §6.15).
    """

    head: int = attrs.field(validator=_count)
    """The event log's head ``seq`` when the backlog was dropped."""
    cursor: int | None = _added(_count)
    """The ``seq`` of the last event sent to the client: where to resume from (``None``
    from a server that does not say)."""


@attrs.frozen(kw_only=True)
class RunTime:
    """One row of ``run_times``: when a run started and ended (epoch seconds)."""

    run_id: int = _run_id()
    """The database's run id."""
    started: float | None = attrs.field(default=None, validator=_optional(_finite))
    """Start, seconds since the epoch (UTC); ``None`` if unknown."""
    ended: float | None = attrs.field(default=None, validator=_optional(_finite))
    """End, seconds since the epoch; ``None`` while the run is unfinished."""


@attrs.frozen(kw_only=True)
class RunTimes:
    """Answer to ``list_run_times`` (design §7.2)."""

    request_id: str | None = _reply_id()
    """The request's id."""
    runs: tuple[RunTime, ...] = attrs.field(validator=_items_of(RunTime))
    """Every known run, in database order."""


@attrs.frozen(kw_only=True)
class RunLink:
    """A parent or child of a run (QCoDeS's dataset links)."""

    guid: str = attrs.field(validator=_text())
    """The other run's GUID."""
    run_id: int | None = attrs.field(default=None, validator=_optional(_count))
    """Its run id, or ``None`` when it is not in this database."""
    name: str | None = attrs.field(default=None, validator=_optional(_text(min_length=0)))
    """Its name, if known."""
    edge_type: str = attrs.field(default="", validator=_text(min_length=0))
    """The kind of link QCoDeS recorded, e.g. ``calibration``."""
    description: str = attrs.field(default="", validator=_text(min_length=0))
    """Free text recorded with the link."""


@attrs.frozen(kw_only=True)
class RunDetailsReply:
    """Answer to ``run_details``: what a physicist looks for in a run (design §7.2)."""

    request_id: str | None = _reply_id()
    """The request's id."""
    run_id: int = _run_id()
    """The database's run id."""
    name: str = attrs.field(validator=_text(min_length=0))
    """Measurement name."""
    experiment: str = attrs.field(validator=_text(min_length=0))
    """Experiment name."""
    sample: str | None = attrs.field(default=None, validator=_optional(_text(min_length=0)))
    """Sample name, if known."""
    guid: str | None = attrs.field(default=None, validator=_optional(_text()))
    """The run's GUID."""
    status: str = attrs.field(validator=_code)
    """``ok``, ``empty``, ``interrupted`` or ``incomplete`` (as the reader found it)."""
    status_reason: str = attrs.field(default="", validator=_text(min_length=0))
    """Why the status, in words."""
    started: float | None = attrs.field(default=None, validator=_optional(_finite))
    """Start, seconds since the epoch (UTC)."""
    ended: float | None = attrs.field(default=None, validator=_optional(_finite))
    """End, seconds since the epoch; ``None`` while unfinished."""
    duration: float | None = attrs.field(default=None, validator=_optional(_finite))
    """``ended - started``, seconds; ``None`` while unfinished."""
    metadata: dict[str, Any] = attrs.field(factory=dict, validator=_json_object)
    """Run metadata: QCoDeS's extra ``runs`` columns (``add_metadata``), name → value."""
    parameters: tuple[dict[str, Any], ...] = attrs.field(default=())
    """Each registered parameter: ``name``, ``label``, ``unit``, ``paramtype``,
    ``depends_on``, ``inferred_from`` (JSON objects)."""
    snapshot: dict[str, Any] | None = attrs.field(default=None, validator=_optional(_json_object))
    """The instrument snapshot (a JSON object), pruned when large; ``None`` if none."""
    snapshot_bytes: int = attrs.field(default=0, validator=_count)
    """The snapshot's size as stored, in bytes."""
    snapshot_pruned: bool = attrs.field(default=False, validator=_flag)
    """True if parts of a large snapshot were left out."""
    parents: tuple[RunLink, ...] = attrs.field(default=(), validator=_items_of(RunLink))
    """Runs this one was derived from."""
    children: tuple[RunLink, ...] = attrs.field(default=(), validator=_items_of(RunLink))
    """Runs derived from this one."""
    exception: str | None = attrs.field(default=None, validator=_optional(_text(min_length=0)))
    """The traceback QCoDeS stored when the measurement raised, or ``None``."""

    @parameters.validator
    def _check_parameters(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, tuple) or not all(
            isinstance(item, dict) and all(isinstance(k, str) for k in item) for item in value
        ):
            raise FieldError(attribute.name, "must be a tuple of JSON objects")


@attrs.frozen(kw_only=True)
class Drawing:
    """Answer to ``draw``: the picture and the decisions behind it (design §5.2, §7.2)."""

    request_id: str | None = _reply_id()
    """The request's id."""
    run_id: int = _run_id()
    """The run."""
    kind: str = attrs.field(validator=_code)
    """``thumbnail`` or ``preview``."""
    slice: int | None = attrs.field(default=None, validator=_optional(_count))
    """The slice drawn (from 0), or ``None`` for a run with at most two dimensions."""
    slice_count: int = attrs.field(default=0, validator=_count)
    """How many slices the run has (0 for at most two dimensions)."""
    slice_label: str | None = attrs.field(default=None, validator=_optional(_text()))
    """The slice in words, e.g. ``magnet_field = 1 T · slice 6 of 6``."""
    mime: str = attrs.field(validator=_text(255))
    """Media type, e.g. ``image/png``."""
    data_b64: str = attrs.field(validator=_text(2**31, min_length=0))
    """The image bytes, standard base64."""
    width: int = attrs.field(validator=_count)
    """Image width, in pixels."""
    height: int = attrs.field(validator=_count)
    """Image height, in pixels."""
    report: dict[str, Any] = attrs.field(factory=dict, validator=_json_object)
    """The renderer's decisions: per panel each axis's scale, the reason, its range."""


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
    BootReport,
    Resume,
    Discard,
    Select,
    Visible,
    ListRuns,
    ListRunTimes,
    RunDetails,
    Draw,
    RunData,
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
    Payload,
    ResyncRequired,
    RunTimes,
    RunDetailsReply,
    Drawing,
    RunDataReply,
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
