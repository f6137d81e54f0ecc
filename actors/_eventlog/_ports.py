"""Subscribers ("ports") of the event log: bounded push queues (design §6.9).

The :class:`PortHub` fans each published event out to every enabled port with a plain,
synchronous append: it never awaits, so the writer and the other subscribers are never
slowed by a slow one. Each port's queue is bounded; a port whose backlog would pass its
bound is marked *resync required*, its backlog is dropped, and its reader gets one
:class:`~protocol.messages.ResyncRequired` notice instead of a silent gap (the very
message the example servers send a client that fell behind). The reader then reloads what
it needs (e.g. with ``watch``) and calls :meth:`Port.resync` with the cursor it reached.

A port may instead carry a *listener*: a synchronous callback called with each event.
A listener that raises is contained: the port is disabled, the error kept as a record,
and publishing goes on.

A port that is closed *leaves* with a reason (``LEAVE_REASONS``): the hub counts it
and tells its owner, which records a ``subscriber_left`` event (design §6.9), so that
whoever follows the log sees subscribers go as well as runs.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any, TypedDict

import attrs
import trio

from protocol.errors import describe_exception
from protocol.messages import ResyncRequired as ResyncRequired

from ..errors import InvalidCommand, RemoteToggleDenied

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ._types import Event

__all__ = [
    "LEAVE_REASONS",
    "Port",
    "PortHub",
    "PortOptions",
    "PortStatistics",
    "ResyncRequired",
]

_log = logging.getLogger("actors.eventlog")

#: Why a subscriber left (:meth:`Port.close`): its owner closed it (the client went away
#: or unsubscribed), it was dropped for falling behind, or for breaking the protocol.
LEAVE_REASONS = frozenset({"closed", "slow", "protocol_error"})


class PortOptions(TypedDict, total=False):
    """The keywords of :meth:`PortHub.open_port` after ``name``, for those passing them on."""

    cursor: int | None
    bound: int | None
    local: bool
    listener: Callable[[Event], object] | None


@attrs.frozen(kw_only=True)
class PortStatistics:
    """Counters of one port, taken without waiting."""

    name: str
    """The port's name."""
    enabled: bool
    """False while disabled (it then receives nothing and must resync when re-enabled)."""
    local: bool
    """True for an in-process subscriber; remote ports cannot toggle ports."""
    queued: int
    """Events waiting to be received."""
    bound: int
    """The queue bound, in events."""
    peak: int
    """The most events ever queued at once (never above ``bound``)."""
    delivered: int
    """Events received by the reader (or given to the listener)."""
    dropped: int
    """Events dropped because of an overflow or while resync was required."""
    resync_required: bool
    """True from an overflow until :meth:`Port.resync`."""
    resyncs: int
    """How many times the port overflowed."""
    acked: int
    """The highest seq the reader acknowledged."""
    error: dict[str, str] | None
    """The record of the listener's failure, if it failed."""


class Port:
    """One subscriber's bounded queue of events (design §6.9); see :meth:`EventLog.subscribe`.

    Iterate it with ``async for item in port``: items are :class:`Event` or
    :class:`ResyncRequired`; iteration ends when the hub closes.
    """

    def __init__(
        self,
        hub: PortHub,
        name: str,
        *,
        bound: int,
        local: bool,
        listener: Callable[[Event], object] | None,
    ) -> None:
        self._hub = hub
        self.name = name
        self.bound = bound
        self.local = local
        self._listener = listener
        self._queue: deque[Event] = deque()
        self._lot = trio.lowlevel.ParkingLot()
        self._enabled = True
        self._closed = False
        self._resync = False
        self._notice: ResyncRequired | None = None
        self._peak = 0
        self._delivered = 0
        self._dropped = 0
        self._resyncs = 0
        self._acked = 0
        self._position = 0
        self._error: dict[str, str] | None = None

    # -- writer side (called by the hub) ------------------------------------------------

    def _offer(self, event: Event) -> None:
        if self._resync:
            self._dropped += 1
            return
        if self._listener is not None:
            try:
                self._listener(event)
            except Exception as exc:  # contained: a failing listener never stops the writer
                self._enabled = False
                self._error = {
                    "category": "permanent",
                    "code": "listener_failed",
                    "message": describe_exception(exc, 1000),
                }
                # Once: the port is disabled now, so its listener is not called again.
                _log.warning(
                    "the listener of port %r raised; the port is disabled",
                    self.name,
                    exc_info=exc,
                    extra={"port": self.name, "seq": event.seq, "code": "listener_failed"},
                )
                return
            self._delivered += 1
            self._position = event.seq
            return
        queue = self._queue
        if len(queue) >= self.bound:
            self._overflow(event.seq, len(queue) + 1)
            return
        queue.append(event)
        if len(queue) > self._peak:
            self._peak = len(queue)
        if self._lot:
            self._lot.unpark()

    def _overflow(self, head: int, lost: int) -> None:
        self._dropped += lost
        self._queue.clear()
        self._resync = True
        self._resyncs += 1
        self._notice = ResyncRequired(head=head, cursor=self._position)
        if self._lot:
            self._lot.unpark_all()

    # -- reader side ----------------------------------------------------------------------

    def receive_nowait(self) -> Event | ResyncRequired:
        """Return the next event or notice without waiting.

        Raises:
            trio.WouldBlock: nothing is waiting.
            trio.EndOfChannel: the hub closed and the queue is empty.
            trio.ClosedResourceError: this port was closed.
        """
        if self._closed:
            raise trio.ClosedResourceError("port is closed")
        if self._notice is not None:
            notice, self._notice = self._notice, None
            return notice
        if self._queue:
            self._delivered += 1
            event = self._queue.popleft()
            self._position = event.seq
            return event
        if self._hub._closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def receive(self) -> Event | ResyncRequired:
        """Wait for the next event, or a :class:`ResyncRequired` notice; a checkpoint.

        After a notice, nothing more arrives until :meth:`resync` is called.

        Raises:
            trio.EndOfChannel: the hub closed (the event log stopped) and the queue is empty.
            trio.ClosedResourceError: this port was closed.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            item = self.receive_nowait()
        except trio.WouldBlock:
            pass
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return item
        while True:
            await self._lot.park()
            try:
                return self.receive_nowait()
            except trio.WouldBlock:
                continue

    def __aiter__(self) -> Port:
        return self

    async def __anext__(self) -> Event | ResyncRequired:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    def ack(self, seq: int) -> None:
        """Acknowledge every event up to ``seq``; queued events at or below it are dropped.

        Raises:
            ValueError: ``seq`` is not a non-negative int.
        """
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise ValueError(f"seq must be a non-negative int, got {seq!r}")
        if seq > self._acked:
            self._acked = seq
        queue = self._queue
        while queue and queue[0].seq <= seq:
            queue.popleft()

    def resync(self, head: int) -> None:
        """Resume delivery after ``head``: the reader holds the state as of ``head``.

        Events after ``head`` still in the log's window are queued at once (more than the
        bound overflows again). Clears the resync-required mark.

        Raises:
            actors.errors.CursorExpired: (``cursor_expired``) ``head`` is below the window
                or beyond the newest seq (``details["resync"]``: take a snapshot and
                resync from its cursor, design §6.15). The port stays marked.
        """
        events = self._hub._replay(head)
        self._queue.clear()
        self._notice = None
        self._resync = False
        self._position = head
        for event in events:
            self._offer(event)

    def close(self, reason: str = "closed") -> None:
        """Detach the port from the hub; waiting readers get ``ClosedResourceError``.

        The first close counts as the subscriber leaving for ``reason`` (design §6.9):
        the hub counts it, logs it and tells its owner (the event log records a
        ``subscriber_left`` event); later closes do nothing.

        Args:
            reason: One of ``LEAVE_REASONS``: ``closed`` (its owner let go: the
                client left or unsubscribed), ``slow`` (dropped for falling behind) or
                ``protocol_error`` (dropped for breaking the protocol).

        Raises:
            InvalidCommand: (``invalid_command``) ``reason`` is not one of those.
        """
        if reason not in LEAVE_REASONS:
            raise InvalidCommand(
                f"reason must be one of {sorted(LEAVE_REASONS)}, got {reason!r}", fields=["reason"]
            )
        if not self._closed:
            self._closed = True
            self._queue.clear()
            self._hub._ports.pop(self.name, None)
            self._hub._refresh()
            self._lot.unpark_all()
            self._hub._left(self, reason)

    def __enter__(self) -> Port:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def statistics(self) -> PortStatistics:
        """Return the port's counters."""
        return PortStatistics(
            name=self.name,
            enabled=self._enabled,
            local=self.local,
            queued=len(self._queue),
            bound=self.bound,
            peak=self._peak,
            delivered=self._delivered,
            dropped=self._dropped,
            resync_required=self._resync,
            resyncs=self._resyncs,
            acked=self._acked,
            error=self._error,
        )


class PortHub:
    """Fan-out of published events to bounded ports (design §6.9).

    Args:
        replay: ``replay(cursor)`` returns the retained events after ``cursor`` or raises
            :class:`~actors.errors.CursorExpired`; used by :meth:`Port.resync` and by ``open_port``.
        default_bound: Queue bound of a port opened without one, in events.
        head: Returns the newest seq (the event log's head, which then need not publish
            while no port listens); default: the seq of the last published event.
        on_leave: Called with ``{"subscriber": name, "reason": reason, "delivered": n}``
            (``n`` events its reader received) when a port is closed while the hub is
            open (:meth:`Port.close`), to record a ``subscriber_left`` event.
    """

    def __init__(
        self,
        replay: Callable[[int], Iterable[Event]],
        *,
        default_bound: int,
        head: Callable[[], int] | None = None,
        on_leave: Callable[[dict[str, Any]], object] | None = None,
    ) -> None:
        self._replay = replay
        self._on_leave = on_leave
        self._leaves: dict[str, int] = {}
        self._default_bound = default_bound
        self._head_of = head
        self._published = 0
        self._ports: dict[str, Port] = {}
        self._active: list[Port] = []
        self._closed = False
        self._counter = 0
        # Events being fanned out; more than one only while a listener publishes.
        self._pending: deque[Event] = deque()

    @property
    def head(self) -> int:
        """The newest seq: the log's head, or the seq of the last published event."""
        return self._published if self._head_of is None else self._head_of()

    @property
    def listening(self) -> bool:
        """True while some port is enabled: :meth:`publish` has someone to offer to."""
        return bool(self._active)

    def open_port(
        self,
        name: str | None = None,
        *,
        cursor: int | None = None,
        bound: int | None = None,
        local: bool = True,
        listener: Callable[[Event], object] | None = None,
    ) -> Port:
        """Open a port; it receives every event published from now on.

        Args:
            name: Unique name (generated when None).
            cursor: If given, the retained events after it are queued first.
            bound: Queue bound in events (default: the hub's).
            local: False for a remote client (it may not toggle ports).
            listener: A sync callback instead of a queue; if it raises, it is contained.

        Raises:
            InvalidCommand: (``invalid_command``) ``name`` is taken or not a str, or
                ``bound`` < 1.
            actors.errors.CursorExpired: (``cursor_expired``) ``cursor`` is outside the window.
        """
        if self._closed:
            raise trio.ClosedResourceError("the event log is closed")
        if name is None:
            self._counter += 1
            name = f"port-{self._counter}"
        if not isinstance(name, str) or not 1 <= len(name) <= 128:
            raise InvalidCommand("port name must be a str of 1..128 chars", fields=["name"])
        if name in self._ports:
            raise InvalidCommand(f"a port named {name!r} is already open", fields=["name"])
        bound = self._default_bound if bound is None else bound
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise InvalidCommand(f"bound must be an int >= 1, got {bound!r}", fields=["bound"])
        backlog = list(self._replay(cursor)) if cursor is not None else []
        port = Port(self, name, bound=bound, local=local, listener=listener)
        port._position = self.head if cursor is None else cursor
        self._ports[name] = port
        self._refresh()
        for event in backlog:
            port._offer(event)
        return port

    def _refresh(self) -> None:
        # ``_active`` is also read by the event log (as ``listening``, inlined) to skip
        # the call to publish while no port listens: an O(1) test per event. (A listener
        # that closes every port and then emits loses nothing: nobody could receive it.)
        self._active = [p for p in self._ports.values() if p._enabled and not p._closed]

    def publish(self, event: Event) -> None:
        """Offer ``event`` to every enabled port; never waits, never raises for a port.

        Re-entrant: a listener that makes the log emit more events (e.g. it starts a
        run it sees queued) gets them queued behind the one being fanned out, so every
        port still receives every event in ``seq`` order.
        """
        self._published = event.seq
        pending = self._pending
        pending.append(event)
        if len(pending) > 1:
            return  # a listener published from inside the loop below: it goes next
        try:
            while pending:
                current = pending[0]
                failed = False
                for port in self._active:
                    port._offer(current)
                    failed = failed or not port._enabled
                if failed:
                    self._refresh()
                pending.popleft()
        finally:
            pending.clear()

    def set_enabled(self, name: str, enabled: bool, *, local: bool) -> PortStatistics:
        """Enable or disable a port; only local callers may (design §6.9).

        A port re-enabled after being disabled is marked resync-required, since it missed
        events: never a silent gap.

        Raises:
            RemoteToggleDenied: (``remote_toggle_denied``) ``local`` is False.
            InvalidCommand: (``invalid_command``) no port has that name.
        """
        if not local:
            raise RemoteToggleDenied(f"only local callers may toggle port {name!r}")
        port = self._ports.get(name) if isinstance(name, str) else None
        if port is None:
            raise InvalidCommand(f"no port named {name!r}", fields=["name"])
        if enabled and not port._enabled:
            port._enabled = True
            port._error = None
            port._overflow(self.head, 0)
        elif not enabled and port._enabled:
            port._enabled = False
        self._refresh()
        return port.statistics()

    def close(self) -> None:
        """Stop delivery: readers drain their queues, then get ``EndOfChannel``."""
        self._closed = True
        for port in list(self._ports.values()):
            port._lot.unpark_all()

    def _left(self, port: Port, reason: str) -> None:
        self._leaves[reason] = self._leaves.get(reason, 0) + 1
        data = {"subscriber": port.name, "reason": reason, "delivered": port._delivered}
        _log.info(
            "subscriber %s left (%s)", port.name, reason, extra={"event": "subscriber_left", **data}
        )
        if self._on_leave is not None and not self._closed:
            self._on_leave(data)

    def leaves(self) -> dict[str, int]:
        """Ports closed so far, by reason (``LEAVE_REASONS``)."""
        return dict(self._leaves)

    def ports(self) -> list[PortStatistics]:
        """Return the statistics of every open port."""
        return [p.statistics() for p in self._ports.values()]
