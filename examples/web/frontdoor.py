"""The websocket front door of the example servers (design §7.1, §7.3, §6).

:class:`FrontDoor` serves the event log's front door (submit, cancel, status,
watch/subscribe, ack, boot report, resume, discard) as JSON text messages over
trio-websocket, with the project's strict codec (:mod:`protocol.codec`):

* **Binding**: 127.0.0.1 by default; ``port=0`` picks a free port (``serve`` reports it
  through ``task_status.started(port)``). A non-loopback ``host`` needs a ``token``.
* **Who may connect** (design §7.3, :mod:`examples.web.guard`): on a loopback bind a
  request whose ``Host`` is not a loopback name with the server's port is refused (HTTP
  403, the DNS-rebinding defence); a handshake whose ``Origin`` is not the server's own
  or in ``allowed_origins`` is refused (403); with a ``token``, a handshake without it
  (``?token=...`` or ``Authorization: Bearer ...``) is refused (403); one address may
  hold ``max_per_address`` connections (then 429), all of them ``max_connections``
  (then 503). Each refusal is one plain-text line to the client and one log record
  naming the reason; no websocket is opened. The whole handshake has
  ``handshake_timeout`` seconds, so a client that stalls in it frees its slot. At most
  ``max_pending`` connections wait for their first request head at once: one more
  closes the one that waited longest (:mod:`examples.web.pending`).
  ``accept()`` lacking file descriptors is logged once per episode and retried with a
  backoff (:mod:`examples.web.accept`).
* **Bounded input**: a websocket message above ``max_frame`` bytes (1 MiB) makes
  trio-websocket close the connection (code 1009); above ``max_message`` bytes (64 KiB,
  the protocol limit of design §2.4) it is answered by an ``error`` with code
  ``message_too_large`` and the connection stays up. Malformed JSON, an unknown type,
  a missing, extra or mistyped field: an ``error`` naming the problem (``code``,
  ``message``, ``retryable``, ``details.fields``), and the connection stays up.
* **Bounded output**: each client has a send queue of ``send_queue`` messages and its
  event pushes come from an event-log port of ``subscriber_bound`` events; a client that
  does not keep up is sent ``resync_required`` ahead of its backlog and closed with code
  4000 and its resume cursor, and never slows the event log or other clients (see
  :mod:`examples.web.connection`, :mod:`examples.web.closing`).
* **Plain HTTP** on the same port (:mod:`examples.web.http`): ``pages`` maps paths
  (``/``) to pages served to a browser's ``GET``; ``routes`` answer the paths under
  their prefixes (:mod:`examples.web.routes`, the token checked first); other paths get
  404. The connection is kept alive for the client's next request, each checked on its
  own, within ``keepalive_timeout`` and ``keepalive_requests``
  (:mod:`examples.web.plainhttp`). The websocket upgrade of any path, as a connection's
  first request, works as before.
* **Extensions**: ``handlers`` maps more request types (the preview server's
  ``select``, ``visible``, ``list_runs``) to ``async fn(conn, request) -> reply | None``
  (None answers ``ok``); a handler may push with ``conn.push(message)``. Each call has
  ``request_timeout`` seconds (:mod:`examples.web.dispatch`).
* **Graceful shutdown** (:meth:`FrontDoor.shutdown`;
  :func:`~examples.web.signals.shutdown_on_signal` on a signal): stop
  accepting, refuse new work (``server_shutting_down``), wait up to ``grace`` seconds for
  the event log's queued and running runs, then close every websocket with code 1001
  (going away) and ``; cursor=N`` in the reason: where that client resumes after the
  restart (design §7.4). The caller then leaves its runtime, which stops the actors and
  reaps the helper processes.

Running one inside a nursery::

    front = FrontDoor(runtime.eventlog, FrontDoorConfig(port=0), handlers={"select": on_select})
    async with trio.open_nursery() as nursery:
        port = await nursery.start(front.serve)
        ...
        await front.shutdown(grace=5.0)   # serve() returns once every client is closed

or, with the signal handling of the example servers::

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_runtime(config) as runtime:
            async with open_front_door(runtime.eventlog, FrontDoorConfig()) as front:
                print(f"listening on {front.url}", flush=True)
                await shutdown_on_signal(front, signals, grace=5.0)
"""

from __future__ import annotations

import itertools
import logging
import socket
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING

import trio
from trio_websocket import ConnectionClosed, HandshakeError, wrap_server_stream

from actors import validate_duration
from actors.errors import ActorStopped, AskTimeout

from .accept import Acceptor
from .admission import Admission
from .closing import GOING_AWAY
from .config import FrontDoorConfig, FrontDoorStatistics
from .connection import Connection
from .corking import CorkableStream
from .dispatch import Dispatcher
from .guard import Guard
from .http import Page, ReplayStream, peer_address, peer_name, plain_answer
from .httpconn import HttpConnection
from .pending import PendingConnections
from .plainhttp import PlainHttp
from .routes import Route, Router

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence

    from trio_websocket import WebSocketConnection

    from actors import EventLogClient
    from protocol import messages

    from .api import Handler
    from .httpconn import Head

__all__ = [
    "FrontDoor",
    "FrontDoorConfig",
    "FrontDoorStatistics",
    "Page",
    "Route",
    "open_front_door",
]

LOGGER = logging.getLogger("examples.frontdoor")
#: What ends a client stream in the normal course of the network: logged without a
#: traceback. Anything else is a bug in the front door and is logged with one.
_NETWORK_ERRORS = (
    ConnectionClosed,
    HandshakeError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    OSError,
)


class FrontDoor:
    """The websocket front door over an event-log client (design §7.1); see the module doc.

    Args:
        eventlog: The event-log actor's client; its ``timeout`` bounds every request.
        config: Where and how to listen (default :class:`FrontDoorConfig`).
        handlers: Extra or replacing request handlers by type tag (e.g. ``"select"``):
            ``await handler(conn, request)`` returns a server message to answer with, or
            None to answer ``ok``; an :class:`~actors.errors.ActorError` it raises becomes
            an ``error`` answer with its code.
        pages: Pages served over plain HTTP by path, e.g. ``{"/": Page(body=html)}``
            (:mod:`examples.web.http`).
        routes: Dynamic ``GET``/``HEAD`` routes by path prefix
            (:mod:`examples.web.routes`).
        sockets: Listening sockets bound beforehand (:func:`examples.web.cli.bind_sockets`),
            served instead of binding ``config.host``/``config.port`` in :meth:`serve`;
            the front door closes them when it stops.

    Attributes:
        eventlog: The event-log client every built-in request goes through.
        config: The front door's settings.
        port: The bound TCP port once :meth:`serve` started (the first listener's, if
            ``host`` resolves to several addresses), else None.
        head_hint: The newest event seq this front door has seen (in receipts, answers
            and pushes); the ``head`` of a ``resync_required`` sent for a dropped push.

    Raises:
        ValueError: a handler's tag is not a client request type of
            :mod:`protocol.messages`.
    """

    def __init__(
        self,
        eventlog: EventLogClient,
        config: FrontDoorConfig | None = None,
        *,
        handlers: Mapping[str, Handler] | None = None,
        pages: Mapping[str, Page] | None = None,
        routes: Sequence[Route] = (),
        sockets: Sequence[socket.socket] | None = None,
    ) -> None:
        self.eventlog = eventlog
        self._sockets = list(sockets or ())
        self.pages: dict[str, Page] = dict(pages or {})
        self.config = config or FrontDoorConfig()
        self.router = Router(routes, max_body=self.config.max_route_body)
        self._dispatcher = Dispatcher(self.config, handlers)
        self._connections: dict[int, Connection] = {}
        self._ids = itertools.count(1)
        self._disconnect_hooks: dict[int, Callable[[Connection], object]] = {}
        self._hook_ids = itertools.count()
        self._admitting = True
        self._listen_scope = trio.CancelScope()
        self._steps: set[trio.CancelScope] = set()  # the waits close() cuts short
        self._pending = PendingConnections(self.config.max_pending)
        self._serving = False
        self._done = trio.Event()
        self.port: int | None = None
        self.head_hint = 0
        self._accepted = self._rejected = 0
        # The guard is replaced once the ports are bound.
        self._admission = Admission(self.config, Guard(self.config, ()))
        self._plain = PlainHttp(
            self.config, self._admission, self.router, self.pages,
            bounded=self._bounded, admitting=lambda: self._admitting,
        )  # fmt: skip
        self._acceptor = Acceptor(self._serve_stream, backoff=self.config.accept_backoff)

    # -- extension API ------------------------------------------------------------------

    def register(self, tag: str, handler: Handler) -> None:
        """Serve request type ``tag`` with ``handler`` (replacing a built-in one).

        Raises:
            ValueError: ``tag`` is not a client request type (see
                :data:`protocol.messages.ClientRequest`).
        """
        self._dispatcher.register(tag, handler)

    def on_disconnect(self, fn: Callable[[Connection], object]) -> Callable[[], None]:
        """Call ``fn(conn)`` (sync) whenever a client connection ends; errors are logged.

        Returns:
            A function that unregisters ``fn`` (idempotent): whoever registers for one
            connection or subscription calls it when done, so hooks do not pile up.
        """
        key = next(self._hook_ids)
        self._disconnect_hooks[key] = fn

        def unregister() -> None:
            self._disconnect_hooks.pop(key, None)

        return unregister

    @property
    def connections(self) -> tuple[Connection, ...]:
        """The clients connected now."""
        return tuple(self._connections.values())

    def broadcast_nowait(self, message: messages.Message) -> int:
        """Push ``message`` to every client without waiting; return how many took it.

        A client whose queue is full is dropped for falling behind instead
        (:meth:`Connection.mark_resync`: ``resync_required``, then close 4000).
        """
        return sum(conn.push_nowait(message) for conn in self.connections)

    @property
    def admitting(self) -> bool:
        """False once shutdown started: ``submit``/``resume`` answer ``server_shutting_down``."""
        return self._admitting

    @property
    def url(self) -> str:
        """``ws://host:port`` of the running server (the token is not included).

        Raises:
            RuntimeError: :meth:`serve` has not bound its port yet.
        """
        if self.port is None:
            raise RuntimeError("the front door is not serving yet")
        host = self.config.host
        return f"ws://[{host}]:{self.port}" if ":" in host else f"ws://{host}:{self.port}"

    def saw(self, seq: int) -> None:
        """Note that event ``seq`` exists: :attr:`head_hint` follows the newest seen."""
        if seq > self.head_hint:
            self.head_hint = seq

    # -- serving ------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve clients until :meth:`shutdown`/:meth:`close` (design §7.1).

        ``task_status.started(port)`` once the listener is bound. Returns once the
        listener is closed and every client connection has ended (each closing
        handshake is bounded by ``close_timeout`` seconds).

        Raises:
            OSError: the address cannot be bound (e.g. the port is in use).
            RuntimeError: this front door already served.
        """
        if self._serving:
            raise RuntimeError("FrontDoor.serve() may be called once")
        self._serving = True
        try:
            if self._sockets:
                listeners = [
                    trio.SocketListener(trio.socket.from_stdlib_socket(sock))
                    for sock in self._sockets
                ]
            else:
                listeners = await trio.open_tcp_listeners(self.config.port, host=self.config.host)
            for listener in listeners:
                if self.config.socket_send_buffer is not None:
                    # Accepted sockets inherit the listener's buffer sizes.
                    listener.socket.setsockopt(
                        socket.SOL_SOCKET, socket.SO_SNDBUF, self.config.socket_send_buffer
                    )
            ports = [listener.socket.getsockname()[1] for listener in listeners]
            self.port = ports[0]
            self._admission.guard = Guard(self.config, ports)
            async with trio.open_nursery() as nursery:
                await nursery.start(self._listen, listeners, nursery)
                task_status.started(self.port)
        finally:
            self._admitting = False
            self._done.set()

    async def _listen(
        self,
        listeners: list[trio.SocketListener],
        handler_nursery: trio.Nursery,
        *,
        task_status: trio.TaskStatus[None],
    ) -> None:
        # Client tasks run in serve()'s nursery, so closing the listener spares them.
        with self._listen_scope:
            await self._acceptor.serve(listeners, handler_nursery, task_status=task_status)

    async def _serve_stream(self, stream: trio.SocketStream) -> None:
        # trio-websocket's own server would wait forever for a rejected client that keeps
        # its TCP connection open; here the stream is ours to close.
        peer = peer_name(stream)
        # One deadline for the whole opening handshake (or the first plain HTTP request
        # and its answer), however many steps it takes: a client that stops reading or
        # writing frees its task, its descriptor and its slot in handshake_timeout
        # seconds at most.
        deadline = trio.current_time() + self.config.handshake_timeout
        try:
            async with trio.open_nursery() as nursery:
                conn = HttpConnection(stream, max_head=self.config.max_request_head)
                head: Head | None = None
                # Pending from the accept (no checkpoint since) until the head is in; a
                # newer connection may close this one if max_pending are pending.
                with self._bounded(deadline) as scope, self._pending.waiting(scope, peer):
                    head = await conn.receive_head()
                if head is None:
                    pass  # no complete head in time, or closing
                elif not head.websocket:  # plain HTTP (a page, an image, 404, ...), or gone
                    await self._plain.serve(conn, head, peer, deadline)
                else:
                    await self._open_websocket(nursery, stream, head, peer, deadline)
                nursery.cancel_scope.cancel()
        except* _NETWORK_ERRORS as group:  # e.g. the client vanished mid-handshake
            exc = _first(group)
            LOGGER.info(
                "client stream from %s ended: %r", peer, exc,
                extra={"event": "client_stream_ended", "peer": peer,
                       "error": type(exc).__name__},
            )  # fmt: skip
        except* Exception as group:  # a bug of ours: contained, but never silent
            LOGGER.error(
                "serving the client stream from %s failed", peer, exc_info=group,
                extra={"event": "client_stream_failed", "peer": peer,
                       "error": type(_first(group)).__name__},
            )  # fmt: skip
        finally:
            await trio.aclose_forcefully(stream)

    @contextmanager
    def _bounded(self, deadline: float) -> Iterator[trio.CancelScope]:
        # A step of a handshake or of a plain HTTP connection: bounded by its deadline,
        # cut short by close().
        with trio.move_on_at(deadline) as scope:
            self._steps.add(scope)
            try:
                yield scope
            finally:
                self._steps.discard(scope)

    def close(self) -> None:
        """Stop at once: close the listener and every client; never waits.

        Each client gets code 1001 with ``; cursor=N`` in the reason: the newest event
        it was sent, or :attr:`head_hint` (design §7.4).
        """
        self._admitting = False
        self._listen_scope.cancel()
        for step in self._steps:
            step.cancel()
        for conn in self.connections:
            conn.close(GOING_AWAY, "server shutting down", cursor=True)

    async def shutdown(self, *, grace: float) -> None:
        """Shut down gracefully within about ``grace`` seconds (design §7.1); a checkpoint.

        Stops accepting clients and admitting work at once; waits until the event log
        has no queued or running run and every subscribed client was sent the events up
        to its head then (the last runs' ``job_finished`` included), at most ``grace``
        seconds (trio clock), while connected clients can still watch their runs; then
        closes every client with code 1001 and its resume cursor (design §7.4) and waits
        (bounded by ``close_timeout``) until :meth:`serve` returned. Runs still running afterwards
        are the caller's to stop: leaving the runtime cancels them, and with a ledger
        they are survivors at the next boot (design §6.10).

        Raises:
            ValueError: ``grace`` is not a valid duration (design §1.6).
        """
        grace = validate_duration("grace", grace)
        self._admitting = False
        self._listen_scope.cancel()
        with trio.move_on_after(grace):
            head = await self._wait_idle()
            if head is not None:
                await self._wait_sent(head)
        self.close()
        if self._serving:
            with trio.move_on_after(self.config.close_timeout + 1.0):
                await self._done.wait()
        else:
            await trio.lowlevel.checkpoint()

    async def _wait_idle(self) -> int | None:
        """Wait until the event log has no queued or running run; return its head then
        (None if the event log is gone or stuck)."""
        while True:
            try:
                stats = await self.eventlog.statistics()
            except (AskTimeout, ActorStopped):
                return None  # nothing left to wait for
            self.saw(stats.head)  # the cursor of the clients that were sent no event
            if stats.queued + stats.running == 0:
                return stats.head
            await trio.sleep(self.config.idle_poll)

    async def _wait_sent(self, head: int) -> None:
        """Wait until every subscribed client was sent the events up to ``head``.

        The last runs' events may still wait in a client's port or send queue when the
        event log is idle; closed then, the client would miss them (design §7.1). A
        client dropped for falling behind is no longer subscribed, so it is not waited
        for; a slow one is, within the caller's grace.
        """
        # Polled at idle_poll like _wait_idle: each connection's writer moves its cursor.
        while any(_behind(conn, head) for conn in self.connections):  # noqa: ASYNC110
            await trio.sleep(self.config.idle_poll)

    # -- one client ---------------------------------------------------------------------

    async def _open_websocket(
        self, nursery: trio.Nursery, stream: trio.SocketStream, head: Head, peer: str,
        deadline: float,
    ) -> None:  # fmt: skip
        # The checks read h11's head: trio-websocket's request lacks the Host header.
        request = head.request
        assert request is not None  # a websocket head is a request
        address = peer_address(peer)
        headers = request.headers
        admission = self._admission
        target = request.target
        refusal = admission.refusal(target, headers, address, admitting=self._admitting)
        if refusal is not None:
            self._rejected += 1
            admission.refused(refusal, peer, "websocket", headers)
            # Written here, not by trio-websocket's reject(): wsproto sends an empty
            # reason phrase ("HTTP/1.1 403 "), this says "403 Forbidden". No linger: a
            # websocket client sends nothing more before its answer, and the attack
            # path stays cheap.
            with self._bounded(deadline):
                await stream.send_all(plain_answer(refusal.status, refusal.text).encode())
            return
        # The slot is taken before anything waits: concurrent handshakes each see the
        # ones ahead of them, so at most max_connections are ever accepted.
        with admission.slot(address):
            ws: WebSocketConnection | None = None
            corkable = CorkableStream(ReplayStream(stream, head.raw))
            with self._bounded(deadline):
                ws_request = await wrap_server_stream(
                    nursery,
                    corkable,
                    message_queue_size=self.config.receive_queue,
                    max_message_size=self.config.max_frame,
                )
                ws = await ws_request.accept()
            if ws is None:
                LOGGER.info(
                    "handshake from %s not completed in time", peer,
                    extra={"event": "handshake_timeout", "peer": peer},
                )  # fmt: skip
                return
            self._accepted += 1
            await self._serve_connection(
                Connection(self, ws, next(self._ids), peer=peer, stream=corkable)
            )

    async def _serve_connection(self, conn: Connection) -> None:
        self._connections[conn.id] = conn
        try:
            await conn.run()
        except Exception:  # contained: one client's failure never stops the server
            LOGGER.exception("connection %s failed", conn.name)
        finally:
            del self._connections[conn.id]
            for hook in list(self._disconnect_hooks.values()):
                try:
                    hook(conn)
                except Exception:  # contained like a failing event-log listener
                    LOGGER.exception("on_disconnect hook failed for %s", conn.name)

    async def dispatch(self, conn: Connection, text: str | bytes) -> messages.Message:
        """Answer one client message; every failure becomes an ``error`` answer.

        A handler gets ``request_timeout`` seconds (trio clock): past them it is
        cancelled and the client is answered ``request_timeout`` (retryable).
        """
        return await self._dispatcher.dispatch(conn, text)

    def statistics(self) -> FrontDoorStatistics:
        """Return the front door's counters."""
        return FrontDoorStatistics(
            port=self.port,
            admitting=self._admitting,
            connections=len(self._connections),
            accepted=self._accepted,
            rejected=self._rejected,
            http_requests=self._plain.answered,
            http_connections=self._plain.open,
            http_reused=self._plain.reused,
            http_reclaimed=self._admission.reclaimed,
            refusals=dict(self._admission.refusals),
            pending=len(self._pending),
            pending_evicted=self._pending.evicted,
            accept_failures=self._acceptor.failures,
            route_answers=self.router.statistics(),
        )


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception a (nested) exception group holds."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


@asynccontextmanager
async def open_front_door(
    eventlog: EventLogClient,
    config: FrontDoorConfig | None = None,
    *,
    handlers: Mapping[str, Handler] | None = None,
    pages: Mapping[str, Page] | None = None,
    routes: Sequence[Route] = (),
    sockets: Sequence[socket.socket] | None = None,
) -> AsyncIterator[FrontDoor]:
    """Serve a :class:`FrontDoor` for the duration of the block (design §7.1).

    Entering is a checkpoint and returns once the port is bound (or ``sockets``, bound
    beforehand, are served; see :class:`FrontDoor`) (``front.port``,
    ``front.url``). Leaving closes the listener and every client (code 1001) at once,
    unless :meth:`FrontDoor.shutdown` already did so gracefully; the exit waits for the
    closing handshakes (each bounded by ``close_timeout`` seconds).

    Raises:
        OSError: the address cannot be bound.
    """
    front = FrontDoor(
        eventlog, config, handlers=handlers, pages=pages, routes=routes, sockets=sockets
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(front.serve)
        try:
            yield front
        finally:
            front.close()


def _behind(conn: Connection, head: int) -> bool:
    """True if ``conn`` is subscribed and was not sent every event up to ``head`` yet
    (its ``events`` answer brings it to where its subscription began)."""
    if conn.closed:
        return False
    stats = conn.statistics()
    return stats.subscribed and (stats.cursor is None or stats.cursor < head)
