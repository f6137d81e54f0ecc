"""An actor's mailbox: a bounded trio memory channel with actor errors (design §1.1, §1.2).

The mailbox owns one send channel (shared by every :class:`~actors.ActorRef` to the
actor) and one receive channel (read only by the actor's loop). Closing the send side
wakes every waiting sender with :class:`~actors.errors.ActorStopped` while the loop drains
what is already queued, then sees ``EndOfChannel`` — trio's own close semantics, so no
extra bookkeeping can drift from them.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import attrs
import trio

from ..errors import ActorStopped, MailboxFull
from ._config import validate_count

__all__ = ["MAX_MAILBOX_CAPACITY", "Mailbox", "MailboxStatistics"]

#: Largest mailbox capacity accepted, in messages. Mailboxes are meant to be small;
#: this bound only stops a typo from allocating an effectively unbounded queue.
MAX_MAILBOX_CAPACITY = 1 << 16

T = TypeVar("T")


@attrs.frozen(kw_only=True)
class MailboxStatistics:
    """A snapshot of a mailbox, as returned by ``ActorRef.statistics()``."""

    capacity: int
    """Most messages the mailbox holds before ``send`` waits (``try_send`` raises)."""
    queued: int
    """Messages waiting to be handled (not counting one being handled now)."""
    senders_waiting: int
    """Tasks blocked in ``send`` because the mailbox is full (backpressure)."""
    receiver_waiting: bool
    """True when the actor is idle, waiting for a message."""
    closed: bool
    """True once the actor is stopping or stopped: sends raise ``ActorStopped``."""


class Mailbox(Generic[T]):
    """A bounded FIFO of items for one actor (design §1.1).

    Args:
        capacity: Buffer size in messages, ``0 <= capacity <= MAX_MAILBOX_CAPACITY``;
            0 makes every send a rendezvous with the actor.
        owner: The actor's name, used in error messages.

    Raises:
        ValueError: ``capacity`` is a bool, not an int, or out of range (names
            ``mailbox_capacity``).
    """

    __slots__ = ("_capacity", "_closed", "_owner", "_receive", "_send")

    def __init__(self, capacity: int, *, owner: str) -> None:
        self._capacity = validate_count(
            "mailbox_capacity", capacity, minimum=0, maximum=MAX_MAILBOX_CAPACITY
        )
        self._owner = owner
        self._send, self._receive = trio.open_memory_channel[T](self._capacity)
        self._closed = False

    @property
    def capacity(self) -> int:
        """The buffer size in messages."""
        return self._capacity

    @property
    def closed(self) -> bool:
        """True once :meth:`close` or :meth:`close_all` was called."""
        return self._closed

    @property
    def receive_channel(self) -> trio.MemoryReceiveChannel[T]:
        """The receiving end; only the actor's own loop reads it."""
        return self._receive

    def _stopped(self) -> ActorStopped:
        return ActorStopped(f"actor {self._owner!r} is stopped", actor=self._owner)

    async def send(self, item: T) -> None:
        """Put ``item`` in the mailbox, waiting for space (backpressure, design §1.2).

        Always a checkpoint. The wait runs under the caller's cancel scopes.

        Raises:
            ActorStopped: (code ``actor_stopped``) the mailbox is closed, or was closed
                while this call waited for space. Raised at once, without waiting.
        """
        if self._closed:
            await trio.lowlevel.checkpoint()
            raise self._stopped()
        try:
            await self._send.send(item)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise self._stopped() from None

    def offer(self, item: T) -> bool:
        """Put ``item`` in the mailbox if that can happen now; never waits, never raises.

        The hot path of ``ActorRef.ask``: no exception object when it works, and the
        caller falls back to :meth:`send` (which waits for space, or raises
        ``ActorStopped``) when it does not. Not a checkpoint.

        Returns:
            True if ``item`` was queued (or handed to the waiting actor); False if the
            mailbox is full or closed.
        """
        if self._closed:
            return False
        try:
            self._send.send_nowait(item)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        return True

    def try_send(self, item: T) -> None:
        """Put ``item`` in the mailbox if there is space; never waits (design §1.2).

        Raises:
            MailboxFull: (code ``mailbox_full``, transient) no space right now.
            ActorStopped: (code ``actor_stopped``) the mailbox is closed.
        """
        if self._closed:
            raise self._stopped()
        try:
            self._send.send_nowait(item)
        except trio.WouldBlock:
            raise MailboxFull(
                f"mailbox of actor {self._owner!r} is full ({self._capacity} messages)",
                actor=self._owner,
                capacity=self._capacity,
            ) from None
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise self._stopped() from None

    def close(self) -> None:
        """Refuse new items; queued ones stay for the actor to drain. Idempotent.

        Senders blocked in :meth:`send` are woken with ``ActorStopped``; once the queue
        is empty the actor's loop sees ``trio.EndOfChannel``.
        """
        if not self._closed:
            self._closed = True
            self._send.close()

    def close_all(self) -> list[T]:
        """Close both ends and return the items nobody will handle. Idempotent.

        Used when the actor's task ends, so the caller can answer every pending ask
        (an asker must never hang on a message that will not be handled).
        """
        self.close()
        leftovers: list[T] = []
        while True:
            try:
                leftovers.append(self._receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
        self._receive.close()
        return leftovers

    def statistics(self) -> MailboxStatistics:
        """Return a snapshot of the mailbox; never waits."""
        stats = self._send.statistics()
        return MailboxStatistics(
            capacity=self._capacity,
            queued=stats.current_buffer_used,
            senders_waiting=stats.tasks_waiting_send,
            receiver_waiting=stats.tasks_waiting_receive > 0,
            closed=self._closed,
        )

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Mailbox of {self._owner!r} capacity={self._capacity} {state}>"
