"""The front door's built-in requests: the event log over websocket JSON (design §6, §7.1).

One async handler per request type, each ``handler(conn, request) -> reply``, answering
through the event-log actor's client (:class:`actors.EventLogClient`):

===============  =============================================  ===========================
request          event-log call                                 answer
===============  =============================================  ===========================
``submit``       ``submit(..., request_id, actor=conn.name)``   ``receipt`` (§6.1-6.5)
``cancel``       ``cancel(run_id, conn.name, request_id=...)``  ``status_reply``, true state
``status``       ``status(run_id, request_id=...)``             ``status_reply``
``snapshot``     ``snapshot()``                                 ``snapshot_reply`` (§6.15)
``watch``        ``watch(cursor, limit=watch_limit)``           ``events``
``subscribe``    ``watch`` (page by page), then ``subscribe``   ``events`` + ``event`` pushes
``unsubscribe``  closes the port                                ``ok``
``ack``          ``port.ack(seq)``                              ``ok``
``boot_report``  ``boot_report()``                              ``boot_report_reply``
``resume``       ``resume(run_id, override=...)``               ``receipt``
``discard``      ``discard(run_id, actor=conn.name)``           ``status_reply``
===============  =============================================  ===========================

Failures are :class:`~actors.errors.ActorError` subclasses; the front door turns each
into an ``error`` answer with its ``code`` (e.g. ``unknown_run``, ``cursor_expired`` with
``details.resync == "snapshot"``, ``unsupported_operation``, ``request_conflict``,
``ledger_unavailable`` with ``retry_after``).

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

from actors.errors import ServerShuttingDown
from protocol import messages

from .connection import event_message

Q = TypeVar("Q")

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from actors import Receipt, RunStatus

    from .connection import Connection

    #: ``await handler(conn, request)`` returns the answer, or None for ``ok``.
    Handler = Callable[[Connection, Any], Awaitable[messages.Message | None]]
    Served = Callable[[Connection, Q], Awaitable[messages.Message | None]]

__all__ = ["BUILTIN_HANDLERS", "receipt_message", "status_message"]


def receipt_message(receipt: Receipt, request_id: str | None) -> messages.Receipt:
    """Return the client ``receipt`` of an event-log :class:`~actors.Receipt` (design §6.1).

    ``request_id`` is the client's (the log's own is the same unless it made one up).
    """
    return messages.Receipt(
        request_id=request_id,
        admitted=receipt.admitted,
        run_id=receipt.run_id,
        snapshot_id=receipt.snapshot_id,
        revision=receipt.revision,
        event_cursor=receipt.event_cursor,
        coalesced=receipt.coalesced,
        code=receipt.code,
        retryable=receipt.retryable,
        depth=receipt.depth,
        bound=receipt.bound,
        retry_after=receipt.retry_after,
    )


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


def _serves(request_type: type[Q]) -> Callable[[Served[Q]], Served[Q]]:
    """Register the decorated function as the built-in handler of ``request_type``."""

    def register(handler: Served[Q]) -> Served[Q]:
        tag = messages.TAGS[request_type]
        if tag in _HANDLERS:
            raise ValueError(f"{tag!r} has a built-in handler already")
        _HANDLERS[tag] = handler
        return handler

    return register


def _check_admitting(conn: Connection) -> None:
    if not conn.front.admitting:
        raise ServerShuttingDown("the server is shutting down and admits no new work")


@_serves(messages.Submit)
async def submit(conn: Connection, request: messages.Submit) -> messages.Message:
    """``submit`` → ``receipt`` (design §6.1); refused with an error while shutting down.

    Raises:
        ServerShuttingDown: (``server_shutting_down``) SIGINT/SIGTERM started the shutdown.
        UnsupportedOperation: (``unsupported_operation``) unknown operation (§6.2).
        InvalidCommand: (``invalid_command``) fields outside the operation's schema.
        RequestConflict: (``request_conflict``) the request id was used for other content.
        LedgerUnavailable: (``ledger_unavailable``) the ledger cannot commit now; the
            answer's ``retry_after`` says when to retry (design §6.13, §6.16).

    A refusal at capacity is a ``receipt`` (``admission_full``, with ``retry_after``), not an
    error (design §6.5).
    """
    _check_admitting(conn)
    receipt = await conn.front.eventlog.submit(
        request.operation, request.arguments, request_id=request.request_id, actor=conn.name
    )
    conn.front.saw(receipt.event_cursor)
    return receipt_message(receipt, request.request_id)


@_serves(messages.Cancel)
async def cancel(conn: Connection, request: messages.Cancel) -> messages.Message:
    """``cancel`` → ``status_reply`` with the true state (design §6.7, §6.14).

    Detaches ``request.waiter`` if given, else the waiters ``conn`` submitted, else
    every waiter; the answer is the run as the (first) detached request sees it.

    Raises:
        UnknownRun: (``unknown_run``) no such run.
        InvalidCommand: (``invalid_command``) ``waiter`` did not join that run.
    """
    status = await conn.front.eventlog.cancel(request.run_id, conn.name, request_id=request.waiter)
    return status_message(status, request.request_id)


@_serves(messages.Status)
async def status(conn: Connection, request: messages.Status) -> messages.Message:
    """``status`` → ``status_reply``; needs no capacity (design §6.5, §6.14).

    With ``waiter``: the run as that request sees it (``cancelled`` once detached).

    Raises:
        UnknownRun: (``unknown_run``) no such run.
        InvalidCommand: (``invalid_command``) ``waiter`` did not join that run.
        LedgerCorrupt: (``ledger_corrupt``) the run's ledger row is damaged (§6.11).
    """
    run = await conn.front.eventlog.status(request.run_id, request_id=request.waiter)
    return status_message(run, request.request_id)


@_serves(messages.Snapshot)
async def snapshot(conn: Connection, request: messages.Snapshot) -> messages.Message:
    """``snapshot`` → ``snapshot_reply``: every live run and its cursor (design §6.15).

    Taken atomically by the event log; never waits for capacity. The documented way
    back for a client that lost its place: subscribe with the reply's ``cursor``.
    """
    taken = await conn.front.eventlog.snapshot()
    conn.front.saw(taken.cursor)
    return messages.SnapshotReply(
        request_id=request.request_id,
        cursor=taken.cursor,
        revision=taken.revision,
        runs=tuple(status_message(run, None) for run in taken.runs),
    )


@_serves(messages.Watch)
async def watch(conn: Connection, request: messages.Watch) -> messages.Message:
    """``watch`` → ``events`` after ``cursor``, at most ``watch_limit`` (design §6.8).

    Page with the returned ``cursor`` until it stops moving.

    Raises:
        CursorExpired: (``cursor_expired``) outside the log; ``details.resync`` is
            ``"snapshot"``: take a ``snapshot`` and subscribe from its cursor (§6.15).
    """
    result = await conn.front.eventlog.watch(request.cursor, limit=conn.front.config.watch_limit)
    conn.front.saw(result.head)
    return messages.Events(
        request_id=request.request_id,
        events=tuple(event_message(e) for e in result.events),
        cursor=result.cursor,
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
        backlog = tuple(event_message(e) for e in result.events)
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


@_serves(messages.BootReport)
async def boot_report(conn: Connection, request: messages.BootReport) -> messages.Message:
    """``boot_report`` → ``boot_report_reply``: held runs by id (design §6.10)."""
    report = await conn.front.eventlog.boot_report()
    return messages.BootReportReply(
        request_id=request.request_id,
        survivors=tuple(r.run_id for r in report.survivors),
        interrupted=tuple(r.run_id for r in report.interrupted),
        quarantined=tuple(r.run_id for r in report.quarantined),
    )


@_serves(messages.Resume)
async def resume(conn: Connection, request: messages.Resume) -> messages.Message:
    """``resume`` → ``receipt`` of the requeued run (design §6.10).

    Its ``event_cursor`` is at or before the run's new ``job_queued`` event.

    Raises:
        ServerShuttingDown: (``server_shutting_down``) the server is shutting down.
        RunQuarantined: (``run_quarantined``) interrupted twice and no ``override``.
        InvalidCommand: (``invalid_command``) the run is not held.
        AlreadyDecided: (``already_decided``) the run is finished or cancelled.
        UnknownRun: (``unknown_run``) no such run.
        AdmissionFull: (``admission_full``) no capacity now; ``retry_after`` says when to retry.
        LedgerUnavailable: (``ledger_unavailable``) the ledger cannot commit now;
            ``retry_after`` too (design §6.13).
    """
    _check_admitting(conn)
    log = conn.front.eventlog
    head = (await log.statistics()).head
    run = await log.resume(request.run_id, override=request.override)
    return messages.Receipt(
        request_id=request.request_id,
        admitted=True,
        run_id=run.run_id,
        snapshot_id=run.snapshot_id,
        revision=run.revision,
        event_cursor=head,
    )


@_serves(messages.Discard)
async def discard(conn: Connection, request: messages.Discard) -> messages.Message:
    """``discard`` → ``status_reply`` (``cancelled`` by ``conn.name``) (design §6.10).

    Raises:
        InvalidCommand: (``invalid_command``) the run is not held.
        AlreadyDecided: (``already_decided``) the run is finished or cancelled.
        UnknownRun: (``unknown_run``) no such run.
    """
    run = await conn.front.eventlog.discard(request.run_id, actor=conn.name)
    return status_message(run, request.request_id)
