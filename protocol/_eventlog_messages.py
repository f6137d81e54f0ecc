"""The event log's messages: runs, their events and their states (design §2.4, §6).

Defined here and re-exported by :mod:`protocol.messages`, which adds them to its unions
and its table of requests and replies. ``error`` and ``ok`` answer any request, also
those of the other message modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ._field_error import FieldError
from ._fields import (
    MAX_JSON_INT,
    MAX_OPERATION_LENGTH,
    MAX_REQUEST_ID_LENGTH,
    _added,
    _code,
    _count,
    _counts,
    _flag,
    _items_of,
    _json_object,
    _optional,
    _reply_id,
    _request_id,
    _run_id,
    _seconds,
    _text,
)
from .errors import MAX_ERROR_MESSAGE_BYTES, bound_message

if TYPE_CHECKING:
    from .errors import ActorError

__all__ = [
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
    "Discard",
    "Receipt",
    "Event",
    "Events",
    "ErrorReply",
    "StatusReply",
    "SnapshotReply",
    "BootReportReply",
    "OkReply",
    "ResyncRequired",
]


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
class GetBootReport:
    """Ask which runs survived the last restart (design §6.10). Tag ``"boot_report"``."""

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


# --------------------------------------------------------------------------------------
# Server → client messages
# --------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Receipt:
    """Answer to ``submit``/``resume``: admitted or refused, never a verdict (design §6.1).

    Also what the event log's ``submit`` returns in process (``actors.Receipt`` is this
    class): admission facts, never a verdict (design §6.5). A refusal at capacity has
    ``admitted=False``, ``run_id=None``, ``code="admission_full"``, ``retryable=True``,
    the queue ``depth`` and ``bound``, and ``retry_after``.
    """

    request_id: str | None = _reply_id()
    """The request's id: the caller's, or one the event log made up when the caller gave
    none (``None`` only in a message no request asked for)."""
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
    """For a refusal: why, e.g. ``admission_full``."""
    retryable: bool | None = attrs.field(default=None, validator=_optional(_flag))
    """For a refusal: whether retrying later may succeed."""
    depth: int | None = attrs.field(default=None, validator=_optional(_count))
    """For ``admission_full``: runs queued or running."""
    bound: int | None = attrs.field(default=None, validator=_optional(_count))
    """For ``admission_full``: the admission bound (``max_inflight``)."""
    retry_after: float | None = _added(_seconds)
    """For a refusal: seconds to wait before retrying, at least, an estimate from how
    often runs have left the pool lately (design §6.16)."""

    @classmethod
    def _make(
        cls,
        request_id: str,
        run_id: int,
        snapshot_id: str,
        revision: int,
        event_cursor: int,
        coalesced: bool,
    ) -> Receipt:
        # An admitted receipt, for the event log, which checked every field when it
        # admitted the request: it makes one per submit, and attrs' validating __init__
        # costs a few us more than filling the slots directly, which is the same thing.
        receipt = _new(cls)
        _set_receipt_request_id(receipt, request_id)
        _set_admitted(receipt, True)
        _set_receipt_run_id(receipt, run_id)
        _set_snapshot_id(receipt, snapshot_id)
        _set_revision(receipt, revision)
        _set_event_cursor(receipt, event_cursor)
        _set_coalesced(receipt, coalesced)
        _set_code(receipt, None)
        _set_retryable(receipt, None)
        _set_depth(receipt, None)
        _set_bound(receipt, None)
        _set_retry_after(receipt, None)
        return receipt


_new = object.__new__
# Each field's slot setter, in the order of the fields.
(
    _set_receipt_request_id,
    _set_admitted,
    _set_receipt_run_id,
    _set_snapshot_id,
    _set_revision,
    _set_event_cursor,
    _set_coalesced,
    _set_code,
    _set_retryable,
    _set_depth,
    _set_bound,
    _set_retry_after,
) = (Receipt.__dict__[field.name].__set__ for field in attrs.fields(Receipt))


@attrs.frozen(kw_only=True)
class Event:
    """One event of the event log (design §6.6, §6.8); pushed, or inside ``events``.

    Also the event log's own record of it, in process (``actors.Event`` is this class).
    Event kinds and their ``data``:

    =====================  ================================================================
    ``job_queued``         operation, arguments, revision, snapshot_id, request_id
                           (+ ``resumed``, ``interruptions`` after ``resume``)
    ``job_started``        {}
    ``job_progress``       fraction (0..1), note? (+ ``synthetic: true`` for the 0.0 one)
    ``job_finished``       verdict, result?, error? ({category, code, message})
    ``job_cancelled``      by (the actor), was (queued/running/held), reason?
    ``job_interrupted``    interruptions, quarantined (emitted at boot)
    ``request_detached``   request_id, by, waiters (a request left its run, §6.14)
    ``admission_paused``   depth, bound; or reason ``ledger_unavailable``, cause (§6.13)
    ``admission_resumed``  depth, bound; or reason ``ledger_available``
    ``revision_bumped``    revision
    =====================  ================================================================

    In cluster mode (docs/cluster.rst) ``job_started`` has the ``owner`` node, and a
    cancel of a running run is first ``job_cancel_requested`` (by, owner): its owner
    stops the work, then records ``job_cancelled``. ``data`` must not be mutated.
    """

    seq: int = attrs.field(validator=_count)
    """Global, strictly increasing sequence number (the first event has seq 1)."""
    kind: str = attrs.field(validator=_code)
    """What happened: one of the kinds above, or a log-wide kind the runtime records."""
    run_id: int | None = attrs.field(default=None, validator=_optional(_count))
    """The run it is about; ``None`` for log-wide events (admission, revision)."""
    data: dict[str, Any] = attrs.field(factory=dict, validator=_json_object)
    """Kind-specific facts (progress fraction, verdict, reason...), a JSON object."""

    @classmethod
    def _make(cls, seq: int, kind: str, run_id: int | None, data: dict[str, Any]) -> Event:
        # For the event log, which checked every field when it made the event: it builds
        # one per call, and attrs' validating __init__ costs about 1 us more than filling
        # the four slots directly, which is the same thing.
        event = _new(cls)
        _set_seq(event, seq)
        _set_kind(event, kind)
        _set_run_id(event, run_id)
        _set_data(event, data)
        return event


_set_seq = Event.__dict__["seq"].__set__
_set_kind = Event.__dict__["kind"].__set__
_set_run_id = Event.__dict__["run_id"].__set__
_set_data = Event.__dict__["data"].__set__


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
    """For a retryable refusal (``ledger_unavailable``, ``admission_full``): seconds to wait
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
class ResyncRequired:
    """The reader fell behind its bounded queue; its backlog was dropped (design §6.9, §7.4).

    Also what an event-log port's reader receives in-process (``actors.ResyncRequired``
    is this class): it comes ahead of anything else, the queued backlog is gone. The
    reader has every event up to ``cursor`` and may have lost those after it up to
    ``head``; it reloads what it needs (``watch`` from ``cursor`` while the log still
    holds it, else a ``snapshot``, design §6.15), then resyncs its port.

    On the websocket it is sent ahead of anything still queued for the client, which is
    dropped; the example servers then close the connection (code 4000, with the same
    cursor in the reason).
    """

    head: int = attrs.field(validator=_count)
    """The event log's head ``seq`` when the backlog was dropped."""
    cursor: int | None = _added(_count)
    """The ``seq`` of the last event sent to the client: where to resume from (``None``
    from a server that does not say)."""
