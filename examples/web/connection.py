"""One websocket client of the front door: its bounded send queue and its pushes (design §7.1).

A :class:`Connection` is made by :class:`examples.web.frontdoor.FrontDoor` for each accepted
websocket and lives until either side closes it. It knows the front door only through
:class:`Server`, the few things a connection and its request handlers need of it, so
this module imports neither the front door nor the handlers. It runs two tasks:

* the **reader** takes one client message at a time, has the front door answer it, and
  queues the answer (so answers leave in request order);
* the **writer** sends what is queued: every message ready at once (at most
  :data:`BATCH_MESSAGES` messages, :data:`BATCH_BYTES` characters) in one write to the
  socket (:mod:`examples.web.corking`), in queue order, each its own websocket message.

Everything the server sends goes through one bounded queue of ``send_queue`` encoded
messages. Answers wait for room: a client that does not read stops *its own* requests.
Pushed events come from a bounded event-log port (design §6.9) through a pump task that
also waits for room, so a slow client's backlog piles up in its port, never in the event
log; a client subscribing from far behind is first paged up to the head
(:mod:`examples.web.catchup`). Once the port passes its bound, or an answer, an event or
an extension push finds the queue full for ``push_timeout`` seconds, the client is
dropped for falling behind (and its further requests are not served): the writer sends
``resync_required`` next, ahead of everything still queued (which is dropped), with
``cursor`` = the newest event it was sent, then closes the connection with code 4000
and the same cursor in the reason (design §7.4, :mod:`examples.web.closing`). The client
resumes after that cursor (or takes a snapshot, design §6.15). The event log and every
other client go on at full speed.

A client that takes one write (one message, or one batch of them) for longer than
``send_timeout`` seconds is dropped the same way: that write is not cut off (a close
frame could not follow half of it); the client has ``drop_timeout`` more seconds to
take it and the ``resync_required`` notice, then the close frame gets
``close_timeout``. Only a client that cannot take even that is cut off: its TCP
connection is closed without a close frame (it sees 1006).

When its subscription ends, its event-log port is closed with why it left (design
§6.9): ``closed`` (it unsubscribed or went away), ``slow`` (dropped for falling behind)
or ``protocol_error`` (trio-websocket closed it for breaking the websocket protocol,
codes 1002, 1007, 1009); the event log records that as a ``subscriber_left`` event.

A close frame from the client is honoured within ``close_timeout`` seconds even while a
message to it is stuck: trio-websocket notes the close at once but cannot answer it
while our send holds the stream, so a watcher bounds that send (design §7.4).

Extension handlers (the preview server's ``select``/``visible``/``list_runs``) get the
connection and may keep state in :attr:`Connection.data`, push their own messages with
:meth:`Connection.push` / :meth:`Connection.push_nowait`, and run something right after
their answer is queued with :meth:`Connection.after_reply`.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs
import trio
from trio_websocket import ConnectionClosed

from actors import ResyncRequired as PortResync
from protocol import messages
from protocol.codec import encode_message

from .catchup import catch_up
from .closing import KEEPALIVE_TIMEOUT, PROTOCOL_ERRORS, RESYNC_REQUIRED, with_cursor

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from trio_websocket import WebSocketConnection

    from actors import Event, EventLogClient, Port

    from .config import FrontDoorConfig
    from .corking import CorkableStream

__all__ = [
    "BATCH_BYTES",
    "BATCH_MESSAGES",
    "Connection",
    "ConnectionStatistics",
    "Server",
    "peek_request_id",
    "wire_json",
    "wire_text",
]

LOGGER = logging.getLogger("examples.frontdoor")
#: Seconds (trio clock) between looks at a stuck send for a close frame from the client.
PEER_CLOSE_POLL = 0.05
#: Most messages, and characters of them, the writer sends in one write: a batch stays
#: small beside ``send_timeout``, and the socket's buffer takes it at once.
BATCH_MESSAGES = 64
BATCH_BYTES = 256 * 1024


def wire_text(message: messages.Message) -> str:
    """Return ``message`` as JSON text that a websocket text frame can carry.

    JSON lets a client write a lone surrogate (``"\\ud800"``); Python decodes it to a
    str that UTF-8 cannot encode, and a request id, argument or helper result holding one
    would make ``send_message`` raise and drop the connection (or, for a pushed event,
    every subscriber's). Such characters are written back as their ``\\uXXXX`` escapes,
    which mean the same JSON string (a surrogate only occurs inside a JSON string, where
    the encoder already escaped every literal backslash).
    """
    return _sendable(encode_message(message))


#: The JSON encoder of :func:`protocol.codec.encode_message`: compact, UTF-8, no NaN.
_JSON: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def wire_json(fields: Mapping[str, Any]) -> str:
    """Return a message already unstructured (:func:`protocol.codec.unstructure_message`'s
    JSON object, possibly assembled from parts kept from earlier messages) as the text
    :func:`wire_text` gives for the message itself.

    Raises:
        TypeError: a field holds a value JSON cannot represent.
        ValueError: a field holds NaN or an infinity.
    """
    return _sendable(_JSON.encode(fields))


def _sendable(text: str) -> str:
    # Lone surrogates written back as their escapes (see wire_text).
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


class Server(Protocol):
    """What a connection and the request handlers need of the front door that owns it.

    :class:`examples.web.frontdoor.FrontDoor` is the one implementation (design §7.1).
    """

    @property
    def eventlog(self) -> EventLogClient:
        """The event-log client every built-in request goes through."""
        ...

    @property
    def config(self) -> FrontDoorConfig:
        """The front door's settings (queue bounds, timeouts in seconds)."""
        ...

    @property
    def admitting(self) -> bool:
        """False once shutdown started: new work is refused."""
        ...

    @property
    def head_hint(self) -> int:
        """The newest event seq seen so far (the ``head`` of a ``resync_required``)."""
        ...

    def saw(self, seq: int) -> None:
        """Note that event ``seq`` exists (raises :attr:`head_hint` if newer)."""
        ...

    async def dispatch(self, conn: Connection, text: str | bytes) -> messages.Message:
        """Answer one client message of ``conn``; every failure becomes an ``error``."""
        ...


@attrs.frozen(kw_only=True)
class ConnectionStatistics:
    """Counters of one client connection (contributing §D.7)."""

    id: int
    """The connection's number (1, 2, ... per front door)."""
    name: str
    """``ws-<id>@<peer>``; also the actor name of its cancels (design §6.7)."""
    queued: int
    """Encoded messages waiting to be sent."""
    bound: int
    """The send queue's bound, in messages."""
    received: int
    """Client messages read."""
    sent: int
    """Messages sent to the client."""
    writes: int
    """Writes to the socket that sent them (fewer than ``sent`` when ready messages went
    out together, :mod:`examples.web.corking`)."""
    errors: int
    """``error`` answers sent."""
    pushed: int
    """Events and extension messages queued as pushes."""
    resyncs: int
    """Times the client was told ``resync_required`` (then dropped, design §7.4)."""
    dropped: int
    """Messages (pushes, events, answers) dropped because the queue stayed full."""
    subscribed: bool
    """True while events are pushed to this client."""
    pongs: int = 0
    """Keepalive pings the client answered (``ping_interval``, ``ping_timeout``)."""
    cursor: int | None = None
    """The newest event seq sent to the client, or None if none was (design §7.4)."""


class Connection:
    """One accepted websocket client; made and run by the front door only.

    Args:
        front: The front door that accepted it.
        ws: Its websocket.
        conn_id: Its number.
        peer: ``host:port`` of the client.
        stream: The stream under ``ws`` when it is a :class:`~examples.web.corking.
            CorkableStream`: ready messages then leave in one write; None: one write
            per message.

    Attributes:
        front: The front door that accepted it (:class:`Server`).
        id: Its number (1, 2, ... per front door).
        name: ``ws-<id>@<host>:<port>``: who cancels a run from here (design §6.7).
        data: Free per-connection state for extension handlers (e.g. the selection).
    """

    def __init__(
        self, front: Server, ws: WebSocketConnection, conn_id: int, *, peer: str,
        stream: CorkableStream | None = None,
    ) -> None:  # fmt: skip
        self.front = front
        self.ws = ws
        self._stream = stream
        self._writes = 0
        self.id = conn_id
        self.name = f"ws-{conn_id}@{peer}"[:128]
        self.data: dict[str, Any] = {}
        bound = front.config.send_queue
        # Each queued message with the event seq it brings the client to, if any.
        self._send, self._receive = trio.open_memory_channel[tuple[str, int | None]](bound)
        self._bound = bound
        self._scope = trio.CancelScope()
        self._nursery: trio.Nursery | None = None
        self._close_code = 1000
        self._close_reason: str | None = None
        self._close_cursor = False  # end the close reason with "; cursor=N"
        self._port: Port | None = None
        self._pump_scope: trio.CancelScope | None = None
        self._ports_opened = 0
        self._resync_head: int | None = None  # dropped for falling behind: notify, close
        self._drop_deadline = float("inf")  # once dropped: the notice is out by then
        self._leave_reason = "closed"  # why its port closes (design §6.9)
        self._idle: trio.CancelScope | None = None  # the writer waiting for a message
        self._last_seq = 0
        self._cursor: int | None = None  # the newest event seq sent
        self._after: list[Callable[[], object]] = []
        self._received = self._sent = self._errors = 0
        self._pushed = self._resyncs = self._dropped = 0
        self._pongs = 0
        #: The scope of the message being sent, while one is.
        self._sending: trio.CancelScope | None = None
        #: When the message being sent passes send_timeout: the client is dropped.
        self._overdue_at = float("inf")
        #: True once a message was cut off mid-send: no close frame may follow.
        self._cut = False
        self._send_started = trio.lowlevel.ParkingLot()

    # -- life ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the client until it leaves or :meth:`close` is called; then close.

        The closing handshake (``close_code``, e.g. 1001 at shutdown) is shielded and
        bounded by the front door's ``close_timeout`` seconds.
        """
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._writer)
                    nursery.start_soon(self._keepalive)
                    nursery.start_soon(self._watch_peer_close)
                    await self._reader()
                    self._finish_sending()
                    nursery.cancel_scope.cancel()
        finally:
            self.unsubscribe()
            self._send.close()
            if self._cut:
                # Part of a message is on the wire: a close frame after it would reach
                # the client as garbage inside that message. The front door drops the
                # TCP connection instead (the client sees an abnormal closure, 1006).
                LOGGER.info("%s: a message was cut off; dropped without a close", self.name)
            else:
                reason = self._close_reason
                if self._close_cursor:  # known only now: after the last message sent
                    reason = with_cursor(reason or "", self.cursor)
                with trio.move_on_after(self.front.config.close_timeout, shield=True):
                    await self.ws.aclose(self._close_code, reason)

    def close(self, code: int = 1000, reason: str | None = None, *, cursor: bool = False) -> None:
        """Stop serving this client and close its websocket with ``code`` and ``reason``.

        Never waits; :meth:`run` performs the closing handshake. A message being sent
        is finished first, for at most ``close_timeout`` seconds; nothing queued after
        it is sent. With ``cursor``, the reason ends in ``; cursor=N`` (:attr:`cursor`
        once that message is out, design §7.4). The first close decides the code.
        """
        if not self._scope.cancel_called:
            self._close_code, self._close_reason = code, reason
            self._close_cursor = cursor
        self._finish_sending()
        self._scope.cancel()

    @property
    def cursor(self) -> int:
        """Where this client resumes from (design §7.4).

        The newest event seq it was sent (in an ``event``, an ``events`` answer or a
        ``snapshot_reply``), or the newest seq the front door has seen if it was sent
        none.
        """
        return self.front.head_hint if self._cursor is None else self._cursor

    def _finish_sending(self) -> None:
        # The message being sent may take close_timeout more seconds, no longer.
        sending = self._sending
        if sending is not None:
            limit = trio.current_time() + self.front.config.close_timeout
            sending.deadline = min(sending.deadline, limit)

    @property
    def closed(self) -> bool:
        """True once the connection is closing or closed."""
        return self._scope.cancel_called or self.ws.closed is not None

    async def _reader(self) -> None:
        while True:
            try:
                text = await self.ws.get_message()
            except ConnectionClosed as exc:
                if exc.reason is not None and exc.reason.code in PROTOCOL_ERRORS:
                    self._leave_reason = "protocol_error"
                return
            self._received += 1
            if self._resync_head is not None:
                # Dropped for falling behind: its answer would never be sent, so the
                # request is not served (no run is submitted the client never hears of).
                continue
            reply = await self.front.dispatch(self, text)
            after, self._after = self._after, []
            if isinstance(reply, messages.ErrorReply):
                self._errors += 1
                after = []  # the request failed: nothing follows its answer
            if not await self._queue(reply):
                continue  # dropped: nothing follows an answer that was not queued
            for fn in after:
                self._call_after_reply(fn)

    def _call_after_reply(self, fn: Callable[[], object]) -> None:
        # Extension code: its failure is logged, and this client and its answers go on.
        try:
            fn()
        except Exception as exc:
            callback = getattr(fn, "__qualname__", repr(fn))[:200]
            LOGGER.warning(
                "%s: an after_reply callback failed", self.name, exc_info=True,
                extra={"event": "after_reply_failed", "connection": self.name,
                       "callback": callback, "error": type(exc).__name__},
            )  # fmt: skip

    async def _writer(self) -> None:
        try:
            while True:
                if self._resync_head is not None:
                    await self._send_resync(self._resync_head)
                    return
                with trio.CancelScope() as idle:
                    self._idle = idle  # cancelled by _drop_behind: the notice goes first
                    first = await self._receive.receive()
                self._idle = None
                if idle.cancelled_caught:
                    continue
                batch = self._ready(first)
                if self._scope.cancel_called or not await self._write(*(text for text, _ in batch)):
                    return  # closing: start no new message; or cut off
                for _, seq in batch:
                    if seq is not None and (self._cursor is None or seq > self._cursor):
                        self._cursor = seq
        except (ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError):
            self._scope.cancel()  # the last two: a corked write found the socket gone

    def _ready(self, first: tuple[str, int | None]) -> list[tuple[str, int | None]]:
        # ``first`` and whatever else is queued now, within the batch bounds; nothing
        # once the client is to be dropped (the notice goes next, design §7.4).
        batch, size = [first], len(first[0])
        if self._stream is None:
            return batch
        while len(batch) < BATCH_MESSAGES and size < BATCH_BYTES and self._resync_head is None:
            try:
                item = self._receive.receive_nowait()
            except trio.WouldBlock:
                break
            batch.append(item)
            size += len(item[0])
        return batch

    async def _write(self, *texts: str) -> bool:
        # One write of ``texts``, one websocket message each (corked when several:
        # _ready batches only over a CorkableStream).
        # Shielded, so that a close never cuts a message in half (the close frame would
        # land inside it). Past send_timeout the client is dropped (_watch_peer_close)
        # and the write gets drop_timeout more; once closing, close_timeout
        # (_finish_sending). Cut anyway: False, and no close frame follows.
        config = self.front.config
        self._overdue_at = trio.current_time() + config.send_timeout
        deadline = min(self._overdue_at + config.drop_timeout, self._drop_deadline)
        sending = self._sending = trio.CancelScope(shield=True, deadline=deadline)
        self._send_started.unpark_all()
        try:
            with sending:
                if len(texts) == 1:
                    await self.ws.send_message(texts[0])
                else:
                    assert self._stream is not None
                    async with self._stream.corked():
                        for text in texts:
                            await self.ws.send_message(text)
        finally:
            self._sending = None
            self._overdue_at = float("inf")
        if sending.cancelled_caught:
            self._cut = True
            self._scope.cancel()
            return False
        self._sent += len(texts)
        self._writes += 1
        return True

    async def _send_resync(self, head: int) -> None:
        # Ahead of whatever is still queued, which the client will never get: it resumes
        # from the cursor instead (design §6.9, §7.4).
        cursor = self.cursor
        notice = messages.ResyncRequired(head=max(head, cursor), cursor=cursor)
        LOGGER.info(
            "%s fell behind: resync_required, closing (%d)", self.name, RESYNC_REQUIRED,
            extra={"event": "client_dropped", "connection": self.name, "head": notice.head,
                   "cursor": cursor},
        )  # fmt: skip
        if await self._write(wire_text(notice)):
            self.close(RESYNC_REQUIRED, "resync required", cursor=True)

    async def _watch_peer_close(self) -> None:
        # A close frame from the client makes trio-websocket mark the connection closed
        # at once, but its answer waits for the stream our stuck send holds, and nobody
        # is woken: look while a send is in flight, and bound that send (design §7.4).
        # The same look drops a client that takes a message past send_timeout.
        while True:
            if self._sending is None:
                await self._send_started.park()
                continue
            await trio.sleep(PEER_CLOSE_POLL)
            if self._sending is not None and self.ws.closed is not None:
                LOGGER.info("%s closed by the client during a send", self.name)
                self._finish_sending()
                self._scope.cancel()
                return
            if self._sending is not None and trio.current_time() >= self._overdue_at:
                self._overdue_at = float("inf")
                self._send_overdue()

    def _send_overdue(self) -> None:
        # Not cut off: the client may still take it, then the notice (design §7.4).
        timeout = self.front.config.send_timeout
        LOGGER.info(
            "%s: a message took over %g s to send", self.name, timeout,
            extra={"event": "send_timeout", "connection": self.name, "timeout": timeout},
        )  # fmt: skip
        self.mark_resync()

    async def _keepalive(self) -> None:
        # A client that vanished without closing (a dead peer, a suspended laptop) or
        # that stopped reading altogether would hold its slot of max_connections until
        # TCP gave up, hours later: a ping it must answer within the timeout bounds that.
        config = self.front.config
        while True:
            await trio.sleep(config.ping_interval)
            with trio.move_on_after(config.ping_timeout) as waited:
                try:
                    await self.ws.ping()
                except ConnectionClosed:
                    return
                self._pongs += 1
            if waited.cancelled_caught:
                self.close(KEEPALIVE_TIMEOUT, "keepalive ping timeout")
                return

    async def _queue(self, message: messages.Message) -> bool:
        # An answer or a pushed event waits for room as push() does: at most
        # push_timeout seconds, then the client is dropped for falling behind.
        if self._resync_head is not None:
            await trio.lowlevel.checkpoint()
            return False
        return await self._put(message, self.front.config.push_timeout)

    # -- replies and pushes (extension API) ----------------------------------------------

    def after_reply(self, fn: Callable[[], object]) -> None:
        """Call ``fn()`` (sync) right after the answer to the current request is queued.

        For a handler that must push something strictly *after* its answer, e.g. start
        a pusher task: ``conn.after_reply(lambda: nursery.start_soon(...))``. Dropped if
        the request is answered with an ``error`` (the handler raised) or the answer
        could not be queued. An exception ``fn`` raises is logged (a warning with its
        traceback, ``event=after_reply_failed``); the connection goes on.
        """
        self._after.append(fn)

    async def push(self, message: messages.Message, *, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Queue a server message for this client, waiting for room in its bounded queue.

        Args:
            message: Any server message (e.g. :class:`protocol.messages.Payload`).
            timeout: Seconds (trio clock) to wait for room; default the front door's
                ``push_timeout``.

        Returns:
            True if queued. False if the connection is closed, or the queue stayed full:
            then the message is dropped and the client is dropped for falling behind
            (:meth:`mark_resync`).

        Raises:
            TypeError: ``message`` is not a protocol message.
        """
        wait = self.front.config.push_timeout if timeout is None else timeout
        if not await self._put(message, wait):
            return False
        self._pushed += 1
        return True

    async def push_all(
        self,
        batch: Sequence[messages.Message],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - per message, as push()
    ) -> bool:
        """Queue the messages of ``batch`` in order, as one burst (a checkpoint).

        Those that fit go into the queue at once, with no checkpoint between them, so the
        writer finds them ready together and sends them in one write; each of the rest
        waits for room as :meth:`push` does.

        Args:
            batch: Server messages, in the order the client gets them.
            timeout: Seconds (trio clock) each message may wait for room; default the
                front door's ``push_timeout``.

        Returns:
            True if every message was queued. False if the connection is closed, or the
            queue stayed full: the messages from there on are dropped and the client is
            dropped for falling behind (:meth:`mark_resync`).

        Raises:
            TypeError: a message is not a protocol message.
        """
        wait = self.front.config.push_timeout if timeout is None else timeout
        await trio.lowlevel.checkpoint_if_cancelled()
        for message in batch:
            try:
                self._send.send_nowait((wire_text(message), _position(message)))
            except trio.WouldBlock:
                if not await self._put(message, wait):
                    return False
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                await trio.lowlevel.cancel_shielded_checkpoint()
                return False
            self._pushed += 1
        await trio.lowlevel.cancel_shielded_checkpoint()
        return True

    async def _put(self, message: messages.Message, wait: float) -> bool:
        # Every message for the client waits for room this way: answers and pushed
        # events too, so no wait on the queue is longer than wait seconds.
        item = (wire_text(message), _position(message))
        with trio.move_on_after(wait):
            try:
                await self._send.send(item)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return False
            return True
        self._dropped += 1
        LOGGER.info(
            "%s: its send queue stayed full for %g s", self.name, wait,
            extra={"event": "send_queue_full", "connection": self.name, "timeout": wait},
        )  # fmt: skip
        self.mark_resync()
        return False

    def push_nowait(self, message: messages.Message) -> bool:
        """Like :meth:`push` without waiting: False if full (and the client is dropped,
        :meth:`mark_resync`).

        Raises:
            TypeError: ``message`` is not a protocol message.
        """
        return self._queue_nowait(wire_text(message), _position(message))

    def push_text_nowait(self, text: str) -> bool:
        """Like :meth:`push_nowait` for a message already encoded (:func:`wire_json`)
        that carries no event seq (e.g. a pushed ``run_list``): one text for every
        connection it goes to, encoded once.
        """
        return self._queue_nowait(text, None)

    def _queue_nowait(self, text: str, position: int | None) -> bool:
        try:
            self._send.send_nowait((text, position))
        except trio.WouldBlock:
            self._dropped += 1
            self.mark_resync()
            return False
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        self._pushed += 1
        return True

    def mark_resync(self, head: int | None = None) -> None:
        """Drop the client for falling behind: it missed messages (design §6.9, §7.4).

        Ends its subscription; the writer then sends ``resync_required`` (``head``,
        default the newest event seq this front door has seen, and ``cursor``, the
        newest it sent this client) ahead of everything still queued, which is dropped,
        and closes the connection with code 4000 and ``; cursor=N`` in the reason.
        The message being sent and the notice get ``drop_timeout`` seconds (the close
        frame ``close_timeout`` more); a client that cannot take them is cut off (its
        TCP connection closed without a close frame).
        Never waits; idempotent.
        """
        if self._resync_head is not None or self._scope.cancel_called:
            self.unsubscribe()
            return
        self._leave_reason = "slow"
        self.unsubscribe()
        self._resyncs += 1
        self._resync_head = max(self._last_seq, self.front.head_hint) if head is None else head
        self._drop_deadline = trio.current_time() + self.front.config.drop_timeout
        if self._sending is not None:
            self._sending.deadline = min(self._sending.deadline, self._drop_deadline)
        if self._idle is not None:
            self._idle.cancel()  # the writer was waiting for a message: the notice now

    # -- event subscription (design §6.9) ---------------------------------------------------

    @property
    def subscribed(self) -> bool:
        """True while events are pushed to this client."""
        return self._pump_scope is not None

    def port_name(self) -> str:
        """A fresh, unique name for this connection's next event-log port."""
        self._ports_opened += 1
        return f"{self.name}#{self._ports_opened}"[:128]

    def start_pump(self, port: Port | None = None, *, cursor: int = 0) -> None:
        """Push ``port``'s events to this client (after the current answer is queued).

        Without ``port``: first catch up from ``cursor`` (:mod:`examples.web.catchup`).
        """
        self.unsubscribe()
        self._port = port
        scope = self._pump_scope = trio.CancelScope()
        if self._nursery is None:  # pragma: no cover - handlers run inside run()
            self.unsubscribe()
        else:
            self._nursery.start_soon(self._pump, port, scope, cursor)

    def unsubscribe(self) -> None:
        """Stop pushing events; idempotent.

        The port closes with why this client leaves (``closed``, or ``slow`` once it
        was dropped for falling behind; design §6.9).
        """
        port, self._port = self._port, None
        scope, self._pump_scope = self._pump_scope, None
        if scope is not None:
            scope.cancel()
        if port is not None:
            port.close(self._leave_reason)

    def ack(self, seq: int) -> None:
        """The client processed every event up to ``seq`` (design §6.9)."""
        if self._port is not None:
            self._port.ack(seq)

    async def push_event(self, event: Event) -> bool:
        """Queue ``event`` as an ``event`` push; False if the client is (now) dropped."""
        self._last_seq = event.seq
        self.front.saw(event.seq)
        if not await self._queue(event):  # the log's events are the wire's class
            return False
        self._pushed += 1
        return True

    async def _pump(self, port: Port | None, scope: trio.CancelScope, cursor: int) -> None:
        try:
            with scope:
                if port is None:
                    port = await catch_up(self, cursor)
                    if port is None or self._pump_scope is not scope:
                        return  # dropped, or replaced as it ended (its port closes below)
                    self._port = port
                async for item in port:
                    if isinstance(item, PortResync):
                        self.mark_resync(item.head)
                        break
                    if not await self.push_event(item):
                        break  # the client is dropped for falling behind
        except trio.ClosedResourceError:
            pass  # the port was closed by unsubscribe
        finally:
            if port is not None:
                port.close(self._leave_reason)
            if self._pump_scope is scope:
                self._port = self._pump_scope = None

    def statistics(self) -> ConnectionStatistics:
        """Return this connection's counters."""
        return ConnectionStatistics(
            id=self.id,
            name=self.name,
            queued=self._send.statistics().current_buffer_used,
            bound=self._bound,
            received=self._received,
            sent=self._sent,
            writes=self._writes,
            errors=self._errors,
            pushed=self._pushed,
            resyncs=self._resyncs,
            dropped=self._dropped,
            subscribed=self.subscribed,
            pongs=self._pongs,
            cursor=self._cursor,
        )


def _position(message: messages.Message) -> int | None:
    """The event seq a message brings its client to (design §7.4), if it carries one."""
    if isinstance(message, messages.Event):
        return message.seq
    if isinstance(message, messages.Events | messages.SnapshotReply):
        return message.cursor
    return None


def peek_request_id(text: str | bytes, limit: int) -> str | None:
    """The ``request_id`` of an unreadable message, if it has a valid one (for errors).

    A message over ``limit`` (bytes or characters) is not parsed at all.
    """
    if len(text) > limit:
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    request_id = obj.get("request_id") if isinstance(obj, dict) else None
    if isinstance(request_id, str) and 1 <= len(request_id) <= messages.MAX_REQUEST_ID_LENGTH:
        return request_id
    return None
