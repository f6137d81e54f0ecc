"""What the helper pool does, as typed records on bounded streams and as log records.

Every step the pool takes with a helper (design §3.10) is one :class:`PoolEvent`:
spawned, ready, startup failed, job started, cancel sent, grace expired, SIGTERM sent,
SIGKILL sent, reaped, quarantined, released, late reply dropped, escaped, signal failed,
restart intensity exceeded, pool restarted, pool restart scheduled, pool restart failed
(design §3.15) and call retried (design §3.14). :class:`PoolEvents` hands each to

* every subscriber (:meth:`PoolEvents.subscribe`): a bounded buffer per subscriber; one
  that falls behind loses its oldest events, counted in :attr:`PoolEventStream.dropped`
  and visible as a gap in ``seq``, and never slows the pool;
* the ``actors.helpers`` logger, at the level of ``LEVELS`` (a restart or a SIGKILL
  is a WARNING, a quarantine an ERROR), with the record's fields as ``extra``.

Nothing is built when nobody listens: :meth:`PoolEvents.emit` builds a record only for
a subscriber that wants its kind or a logger enabled for its level, and the job path
tests :attr:`PoolEvents.jobs_watched` and ``Logger.isEnabledFor`` before it gathers the
fields of a ``job_started``, so a job costs nothing more when no subscriber wants that
kind and no DEBUG handler exists.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from .._core import validate_count

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping
    from types import TracebackType

__all__ = [
    "LEVELS",
    "POOL_EVENT_KINDS",
    "HeldEvent",
    "PoolEvent",
    "PoolEventStream",
    "PoolEvents",
    "holding",
    "release",
]

#: The logger of the helper pool (one per subsystem; helper stderr has its own child).
LOGGER: Final = logging.getLogger("actors.helpers")

#: Log level of each event kind (design §3.10).
LEVELS: Final[Mapping[str, int]] = {
    "spawned": logging.DEBUG,  # WARNING when it replaces an earlier incarnation
    "ready": logging.DEBUG,
    "startup_failed": logging.ERROR,
    "job_started": logging.DEBUG,
    "cancel_sent": logging.INFO,
    "grace_expired": logging.INFO,
    "sigterm_sent": logging.INFO,
    "sigkill_sent": logging.WARNING,
    "reaped": logging.DEBUG,  # WARNING when the helper was not asked to exit
    "quarantined": logging.ERROR,
    "released": logging.WARNING,
    "late_reply_dropped": logging.INFO,
    "escaped": logging.ERROR,
    "signal_failed": logging.ERROR,
    "signal_retried": logging.WARNING,
    "abandoned": logging.ERROR,
    "intensity_exceeded": logging.ERROR,
    "pool_restarted": logging.WARNING,
    "restart_scheduled": logging.WARNING,
    "restart_failed": logging.WARNING,
    "call_retried": logging.INFO,
    "warden_started": logging.DEBUG,
    "warden_signalled": logging.INFO,  # WARNING when a process could not be signalled
    "link_lost": logging.WARNING,
    "control_channel_refused": logging.WARNING,
    "zygote_started": logging.DEBUG,  # WARNING when it replaces one that exited
    "zygote_exited": logging.WARNING,
    "zygote_unavailable": logging.WARNING,
}
#: Every kind of :class:`PoolEvent`.
POOL_EVENT_KINDS: Final = frozenset(LEVELS)

# LogRecord attributes an ``extra`` key must not overwrite (logging raises KeyError).
_RESERVED: Final = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
}


def _check_kind(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if value not in POOL_EVENT_KINDS:
        raise ValueError(f"kind must be one of {sorted(POOL_EVENT_KINDS)}, got {value!r}")


@attrs.frozen(kw_only=True)
class PoolEvent:
    """One step of the helper pool (design §3.10); ``details`` is JSON-compatible."""

    seq: int
    """Position in its :class:`PoolEvents` (from 1, +1 per event): a gap means dropped."""
    kind: str = attrs.field(validator=_check_kind)
    """One of :data:`POOL_EVENT_KINDS`."""
    time: float
    """When, in seconds on trio's clock (monotonic)."""
    pool: str
    """The helper spec's name."""
    slot: int | None = None
    """The pool slot (0-based), or None for pool-wide events."""
    helper: str | None = None
    """The incarnation's label, e.g. ``"helper#0.3"`` (slot 0, incarnation 3)."""
    incarnation: int | None = None
    """1 for a slot's first process, +1 per replacement (design §3.7)."""
    pid: int | None = None
    """The helper's process id, once spawned."""
    generation: int | None = None
    """The job's generation, for job steps (design §2.3)."""
    details: Mapping[str, Any] = attrs.field(factory=dict)
    """What else is known: ``exit_code``, ``signal``, ``reason``, ``stderr``,
    ``errno``, ``pids``, ``operation``, ..."""

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-compatible data (for the event log, design §6.8)."""
        return {
            "seq": self.seq,
            "kind": self.kind,
            "time": self.time,
            "pool": self.pool,
            "slot": self.slot,
            "helper": self.helper,
            "incarnation": self.incarnation,
            "pid": self.pid,
            "generation": self.generation,
            **self.details,
        }


@attrs.frozen(kw_only=True)
class HeldEvent:
    """An event :func:`holding` kept back: published later, or never."""

    kind: str
    """One of :data:`POOL_EVENT_KINDS`."""
    text: str
    """The log message it was emitted with."""
    fields: Mapping[str, Any]
    """The other arguments of :meth:`PoolEvents.emit` (``level``, ``slot``, details)."""


class PoolEventStream:
    """A subscriber's bounded buffer of :class:`PoolEvent` (design §3.10).

    Made by :meth:`PoolEvents.subscribe`; use it as a context manager (leaving it
    unsubscribes) and iterate it, or call :meth:`receive`. Iteration ends once the
    hub is closed and the buffer is empty.
    """

    def __init__(self, hub: PoolEvents, bound: int, kinds: frozenset[str]) -> None:
        self._hub = hub
        self._buffer: deque[PoolEvent] = deque()
        self._bound = bound
        self.kinds = kinds
        """The kinds this subscriber receives."""
        self._wake = trio.Event()
        self.dropped = 0
        """Events lost because this subscriber fell ``bound`` events behind."""

    def _put(self, event: PoolEvent) -> None:
        if len(self._buffer) >= self._bound:
            self._buffer.popleft()  # the oldest goes: the newest state matters most
            self.dropped += 1
        self._buffer.append(event)
        self._wake.set()

    def _end(self) -> None:
        self._wake.set()

    def receive_nowait(self) -> PoolEvent | None:
        """The next buffered event, or None if none is buffered; never waits."""
        return self._buffer.popleft() if self._buffer else None

    async def receive(self) -> PoolEvent:
        """Wait for the next event; always a checkpoint.

        Raises:
            trio.EndOfChannel: the hub was closed and every event was received.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        while not self._buffer:
            if self._hub.closed:
                raise trio.EndOfChannel
            self._wake = trio.Event()
            await self._wake.wait()
        event = self._buffer.popleft()
        await trio.lowlevel.cancel_shielded_checkpoint()
        return event

    def close(self) -> None:
        """Unsubscribe (idempotent); buffered events stay readable."""
        self._hub._unsubscribe(self)

    def __enter__(self) -> PoolEventStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __aiter__(self) -> PoolEventStream:
        return self

    async def __anext__(self) -> PoolEvent:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class PoolEvents:
    """The event hub of a helper pool: subscribers plus log records (design §3.10).

    One hub may serve several pools one after the other (the runtime keeps one across
    restarts of its pool, so a subscription survives them). Every pool opened on a hub
    after the first reports itself as ``pool_restarted``.

    Args:
        name: The pool's name in log records (the helper spec's name by default).
    """

    def __init__(self, name: str = "helper") -> None:
        self.name = name
        self._streams: list[PoolEventStream] = []
        self._seq = 0
        self.active = False
        """True while at least one subscriber exists."""
        self.jobs_watched = False
        """True while a subscriber wants ``job_started`` (read on the job path)."""
        self.closed = False
        self.pools_opened = 0
        """Pools opened on this hub so far."""
        self._holds: dict[str, list[HeldEvent]] = {}

    def subscribe(
        self, *, bound: int = 256, kinds: Iterable[str] = POOL_EVENT_KINDS
    ) -> PoolEventStream:
        """Start a subscription; use the result as a context manager.

        Args:
            bound: Events buffered for this subscriber (``1..65536``); past it the
                oldest are dropped (counted, and visible as a gap in ``seq``).
            kinds: The kinds wanted (all by default). Leaving out ``job_started``
                keeps the job path free of events.

        Raises:
            ValueError: ``bound`` is out of range, or ``kinds`` has an unknown kind.
        """
        wanted = frozenset(kinds)
        if not wanted <= POOL_EVENT_KINDS:
            raise ValueError(f"unknown event kinds {sorted(wanted - POOL_EVENT_KINDS)}")
        bound = validate_count("bound", bound, minimum=1, maximum=65536)
        stream = PoolEventStream(self, bound, wanted)
        self._streams.append(stream)
        self._update()
        return stream

    def _unsubscribe(self, stream: PoolEventStream) -> None:
        if stream in self._streams:
            self._streams.remove(stream)
        self._update()

    def _update(self) -> None:
        self.active = bool(self._streams)
        self.jobs_watched = any("job_started" in stream.kinds for stream in self._streams)

    def close(self) -> None:
        """End every subscription once its buffer is read (idempotent)."""
        self.closed = True
        for stream in self._streams:
            stream._end()

    def wanted(self, level: int = logging.DEBUG) -> bool:
        """True if an event logged at ``level`` would reach anyone (never waits)."""
        return self.active or LOGGER.isEnabledFor(level)

    def emit(
        self,
        kind: str,
        text: str,
        *,
        level: int | None = None,
        slot: int | None = None,
        helper: str | None = None,
        incarnation: int | None = None,
        pid: int | None = None,
        generation: int | None = None,
        **details: Any,
    ) -> None:
        """Publish one event and log it (design §3.10); never waits, never raises.

        Args:
            kind: One of :data:`POOL_EVENT_KINDS`.
            text: The log message (a sentence about this helper).
            level: The log level, if not the kind's own (design §3.10).
            slot, helper, incarnation, pid, generation: Who it concerns.
            **details: More JSON-compatible facts (``exit_code``, ``reason``, ...).
        """
        held = self._holds.get(kind)
        if held is not None:
            fields = {"level": level, "slot": slot, "helper": helper,
                      "incarnation": incarnation, "pid": pid, "generation": generation}  # fmt: skip
            held.append(HeldEvent(kind=kind, text=text, fields={**fields, **details}))
            return
        if level is None:
            level = LEVELS[kind]
        if not (self.active or LOGGER.isEnabledFor(level)):
            return
        self._seq += 1
        if self._streams:
            event = PoolEvent(
                seq=self._seq,
                kind=kind,
                time=trio.current_time(),
                pool=self.name,
                slot=slot,
                helper=helper,
                incarnation=incarnation,
                pid=pid,
                generation=generation,
                details=details,
            )
            for stream in self._streams:
                if kind in stream.kinds:
                    stream._put(event)
        if LOGGER.isEnabledFor(level):
            extra = {
                "event": kind,
                "pool": self.name,
                "slot": slot,
                "helper": helper,
                "incarnation": incarnation,
                "pid": pid,
                "generation": generation,
            }
            for key, value in details.items():
                extra[key if key not in _RESERVED else f"{kind}_{key}"] = value
            LOGGER.log(level, "%s", text, extra=extra)


# The restarter's hold on a hub: functions beside the class, not its public methods
# (embedders never hold events), so the pool room reaches no private member of it.
@contextlib.contextmanager
def holding(events: PoolEvents, *kinds: str) -> Iterator[list[HeldEvent]]:
    """Keep the events of ``kinds`` that ``events`` emits back while the block runs
    (design §3.15).

    The pool's restarter holds ``pool_restarted`` until the restart has succeeded,
    so that nobody counts a recovery that did not happen. Yields the list the held
    events are added to; pass one to :func:`release` to publish it after all.

    Raises:
        ValueError: an unknown kind.
    """
    unknown = set(kinds) - POOL_EVENT_KINDS
    if unknown:
        raise ValueError(f"unknown event kinds {sorted(unknown)}")
    held: list[HeldEvent] = []
    previous = events._holds
    events._holds = {**previous, **dict.fromkeys(kinds, held)}
    try:
        yield held
    finally:
        events._holds = previous


def release(events: PoolEvents, event: HeldEvent, text: str | None = None) -> None:
    """Publish a held event on ``events`` now, with another log message if ``text`` is
    given."""
    events.emit(event.kind, event.text if text is None else text, **event.fields)
