"""The front door's built-in requests: the event log over websocket JSON (design §6, §7.1).

One async handler per request type, each ``handler(conn, request) -> reply``, answering
through the event-log actor's client (:class:`actors.EventLogClient`). The handlers of
the event log's own requests are not written here: each is made from its declaration in
:data:`actors.WIRE_FORMS` (its wire message, the request it becomes, the reply it
leaves as), and from the one answer function here per pair of answer and reply types:

===============  =============================================  ===========================
request          event-log request (filled by the server)       answer
===============  =============================================  ===========================
``submit``       ``Submit`` (``actor``: the connection)         ``receipt`` (§6.1-6.5)
``cancel``       ``Cancel`` (``actor``: the connection)         ``status_reply``, true state
``status``       ``Status``                                     ``status_reply``
``snapshot``     ``TakeSnapshot``                               ``snapshot_reply`` (§6.15)
``watch``        ``Watch`` (``limit``: ``watch_limit``)         ``events``
``boot_report``  ``GetBootReport``                              ``boot_report_reply``
``resume``       ``Resume``                                     ``receipt``
``discard``      ``Discard`` (``actor``: the connection)        ``status_reply``
===============  =============================================  ===========================

The connection's own requests are written here: ``subscribe`` (``watch`` page by page,
then ``subscribe`` to a port; answered ``events`` then ``event`` pushes), and
``unsubscribe`` and ``ack`` (the port; answered ``ok``). A request answered with a
``receipt`` admits work, so it is refused with ``server_shutting_down`` once the server
shuts down.

Failures are :class:`~actors.errors.ActorError` subclasses; the front door turns each
into an ``error`` answer with its ``code`` (e.g. ``unknown_run``, ``cursor_expired`` with
``details.resync == "snapshot"``, ``unsupported_operation``, ``request_conflict``,
``ledger_unavailable`` with ``retry_after``); each request raises what its
:class:`~actors.EventLog` method raises.

A connection's name (``ws-<id>@<peer>``) is the *actor* of its submits and cancels:
each ``submit`` is a waiter of its run (design §6.14), and a ``cancel`` detaches the
waiter its ``waiter`` names, else the waiters this connection submitted, else (a cancel
from a connection that submitted none of them) every waiter.

The request ids of ``submit`` are the event log's idempotency keys (design §6.3), shared
by every client: a client should use unique ids (a UUID, say); retrying with the same id
and content returns the stored receipt, also after a reconnect. A subscribed client may
see a run's first events before its receipt (they are pushed as they happen, while the
receipt waits until the request is durable).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from actors import (
    WIRE_FORMS,
    BootReport,
    EventLogSnapshot,
    Receipt,
    RequestSpec,
    RunStatus,
    WatchResult,
)
from actors.errors import ServerShuttingDown
from protocol import messages

Q = TypeVar("Q")
A = TypeVar("A")

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from .connection import Connection

    #: ``await handler(conn, request)`` returns the answer, or None for ``ok``.
    Handler = Callable[[Connection, Any], Awaitable[messages.Message | None]]
    Served = Callable[[Connection, Q], Awaitable[messages.Message | None]]
    #: ``await answer(conn, request_id, ask)``: asks (``await ask()``), returns the reply.
    Answer = Callable[[Connection, str, Callable[[], Awaitable[A]]], Awaitable[messages.Message]]

__all__ = ["BUILTIN_HANDLERS", "receipt_message", "status_message"]


def receipt_message(receipt: Receipt, request_id: str | None) -> messages.Receipt:
    """Return the client ``receipt`` of an event-log :class:`~actors.Receipt` (design §6.1).

    The event log's receipt is the wire's message; this gives it the client's
    ``request_id`` (the log's own is the same unless it made one up).
    """
    if receipt.request_id == request_id:
        return receipt
    return attrs.evolve(receipt, request_id=request_id)


def status_message(status: RunStatus, request_id: str | None) -> messages.StatusReply:
    """Return the client ``status_reply`` of a :class:`~actors.RunStatus` (design §6.7).

    ``state`` is the event log's (``queued``, ``running``, ``finished``, ``cancelled``,
    ``held``); ``detail`` carries ``operation``, ``arguments``, ``revision``,
    ``snapshot_id``, ``request_id``, ``result``, ``error``, ``cancelled_by``,
    ``interruptions``, ``quarantined`` and ``waiters`` (the requests waiting on the run,
    design §6.14). ``request_id`` None: a run nested in a ``snapshot_reply``.
    """
    detail: dict[str, Any] = {
        "operation": status.operation,
        "arguments": status.arguments,
        "revision": status.revision,
        "snapshot_id": status.snapshot_id,
        "request_id": status.request_id,
        "result": status.result,
        "error": status.error,
        "cancelled_by": status.cancelled_by,
        "interruptions": status.interruptions,
        "quarantined": status.quarantined,
        "waiters": status.waiters,
    }
    return messages.StatusReply(
        request_id=request_id,
        run_id=status.run_id,
        state=status.state,
        verdict=status.verdict,
        progress=status.progress,
        detail=detail,
    )


#: The front door's own handlers by request type; extensions add or replace entries.
#: Filled by :func:`_serves`, so each request's tag is its message class's (no copy).
_HANDLERS: dict[str, Handler] = {}
BUILTIN_HANDLERS: Mapping[str, Handler] = _HANDLERS
#: How an event-log answer becomes its wire reply, by (answer type, wire reply class).
_ANSWERS: dict[tuple[type, type], Answer[Any]] = {}


def _serves(request_type: type[Q]) -> Callable[[Served[Q]], Served[Q]]:
    """Register the decorated function as the built-in handler of ``request_type``."""

    def register(handler: Served[Q]) -> Served[Q]:
        tag = messages.TAGS[request_type]
        if tag in _HANDLERS:
            raise ValueError(f"{tag!r} has a built-in handler already")
        _HANDLERS[tag] = handler
        return handler

    return register


def _answers(answer: type[A], reply: type) -> Callable[[Answer[A]], Answer[A]]:
    """Register the decorated function as the way from an ``answer`` to a ``reply``."""

    def register(function: Answer[A]) -> Answer[A]:
        _ANSWERS[answer, reply] = function
        return function

    return register


def _check_admitting(conn: Connection) -> None:
    if not conn.front.admitting:
        raise ServerShuttingDown("the server is shutting down and admits no new work")


def _forwarding(spec: RequestSpec) -> Handler:
    """The handler of ``spec``'s wire message: the request it asks, the reply it answers.

    Raises (from the handler) what the request's :class:`~actors.EventLog` method
    raises, and ``ServerShuttingDown`` (``server_shutting_down``) for a request answered
    with a ``receipt`` (it admits work) once the server shuts down.
    """
    form = spec.wire
    assert form is not None
    answer = _ANSWERS[spec.answer, form.reply]
    admits = form.reply is messages.Receipt

    async def forward(conn: Connection, request: Any) -> messages.Message:
        if admits:
            _check_admitting(conn)
        front = conn.front
        arguments = spec.wire_arguments(request, caller=conn.name, page=front.config.watch_limit)
        method = getattr(front.eventlog, spec.method)  # the client's method of the request
        return await answer(conn, request.request_id, lambda: method(**arguments))

    forward.__name__ = forward.__qualname__ = spec.method
    forward.__doc__ = f"``{messages.TAGS[form.message]}`` → ``{messages.TAGS[form.reply]}``."
    forward.__request__ = spec  # type: ignore[attr-defined]
    return forward


@_answers(Receipt, messages.Receipt)
async def _receipt(
    conn: Connection, request_id: str, ask: Callable[[], Awaitable[Receipt]]
) -> messages.Message:
    # ``submit``: a refusal at capacity is a receipt (admission_full), not an error (§6.5).
    receipt = await ask()
    conn.front.saw(receipt.event_cursor)
    return receipt_message(receipt, request_id)


@_answers(RunStatus, messages.StatusReply)
async def _status_reply(
    conn: Connection, request_id: str, ask: Callable[[], Awaitable[RunStatus]]
) -> messages.Message:
    return status_message(await ask(), request_id)


@_answers(RunStatus, messages.Receipt)
async def _requeued(
    conn: Connection, request_id: str, ask: Callable[[], Awaitable[RunStatus]]
) -> messages.Message:
    # ``resume``: the receipt's ``event_cursor`` is at or before the run's new
    # ``job_queued`` event, so the head is read before asking (design §6.10).
    head = (await conn.front.eventlog.statistics()).head
    run = await ask()
    return messages.Receipt(
        request_id=request_id,
        admitted=True,
        run_id=run.run_id,
        snapshot_id=run.snapshot_id,
        revision=run.revision,
        event_cursor=head,
    )


@_answers(EventLogSnapshot, messages.SnapshotReply)
async def _snapshot_reply(
    conn: Connection, request_id: str, ask: Callable[[], Awaitable[EventLogSnapshot]]
) -> messages.Message:
    # Taken atomically by the event log: the way back for a client that lost its place
    # is to subscribe with the reply's ``cursor`` (design §6.15).
    taken = await ask()
    conn.front.saw(taken.cursor)
    return messages.SnapshotReply(
        request_id=request_id,
        cursor=taken.cursor,
        revision=taken.revision,
        runs=tuple(status_message(run, None) for run in taken.runs),
    )


@_answers(WatchResult, messages.Events)
async def _events(
    conn: Connection, request_id: str, ask: Callable[[], Awaitable[WatchResult]]
) -> messages.Message:
    # At most ``watch_limit`` events: page with the returned cursor until it stops moving.
    result = await ask()
    conn.front.saw(result.head)
    return messages.Events(
        request_id=request_id,
        events=result.events,  # the log's events are the wire's (one class)
        cursor=result.cursor,
    )


@_answers(BootReport, messages.BootReportReply)
async def _boot_report_reply(
    conn: Connection, request_id: str, ask: Callable[[], Awaitable[BootReport]]
) -> messages.Message:
    report = await ask()
    return messages.BootReportReply(
        request_id=request_id,
        survivors=tuple(r.run_id for r in report.survivors),
        interrupted=tuple(r.run_id for r in report.interrupted),
        quarantined=tuple(r.run_id for r in report.quarantined),
    )


@_serves(messages.Subscribe)
async def subscribe(conn: Connection, request: messages.Subscribe) -> messages.Message:
    """``subscribe`` → ``events`` (the backlog), then one ``event`` per new event (§6.9).

    With ``cursor``, the answer holds up to ``watch_limit`` events after it. If that
    page is full, the rest of the backlog is pushed page by page at the client's pace
    (each ``event`` waits for room in its send queue, at most ``push_timeout``
    seconds), and only once a page comes back short does the bounded live port open,
    after the last event pushed: every event once, in order, however far behind the
    client was (design §7.4, :mod:`examples.web.catchup`). A ``cursor_expired`` while
    paging drops the client with ``resync_required`` and close 4000 (its cursor is
    the last event it was sent; from there it takes a snapshot, design §6.15).
    Without ``cursor``, only new events are pushed. A second ``subscribe`` replaces
    the first (and stops its catch-up). Pushes stop at ``unsubscribe`` or
    ``resync_required``.

    Raises:
        CursorExpired: (``cursor_expired``) ``cursor`` is outside the log;
            ``details.resync`` is ``"snapshot"``: take a ``snapshot`` and subscribe
            from its cursor (design §6.15).
    """
    log, config = conn.front.eventlog, conn.front.config
    conn.unsubscribe()
    if request.cursor is None:
        backlog: tuple[messages.Event, ...] = ()
        cursor = (await log.statistics()).head
    else:
        result = await log.watch(request.cursor, limit=config.watch_limit)
        backlog = result.events
        cursor = result.cursor
    conn.front.saw(cursor)
    if len(backlog) == config.watch_limit:  # maybe more behind: page it, then go live
        conn.after_reply(lambda: conn.start_pump(cursor=cursor))
        return messages.Events(request_id=request.request_id, events=backlog, cursor=cursor)
    port = await log.subscribe(
        conn.port_name(), cursor=cursor, bound=config.subscriber_bound, local=False
    )
    conn.after_reply(lambda: conn.start_pump(port))
    return messages.Events(request_id=request.request_id, events=backlog, cursor=cursor)


@_serves(messages.Unsubscribe)
async def unsubscribe(conn: Connection, request: messages.Unsubscribe) -> None:
    """``unsubscribe`` → ``ok``; idempotent."""
    conn.unsubscribe()


@_serves(messages.Ack)
async def ack(conn: Connection, request: messages.Ack) -> None:
    """``ack`` → ``ok``: events up to ``seq`` are processed (design §6.9)."""
    conn.ack(request.seq)


# The event log's own requests: each handler is made from the request's one declaration.
for _wire, _spec in WIRE_FORMS.items():
    _serves(_wire)(_forwarding(_spec))
del _wire, _spec
