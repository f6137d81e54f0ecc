"""Handles to actors: :class:`ActorRef` for callers, :class:`Reply` for handlers (SPEC §1.2).

An :class:`ActorRef` is the only handle others hold on an actor. Each ``ask`` gets a
fresh id and a fresh one-slot reply channel; the asker closes its receive side when it
stops waiting (timeout or cancellation), so a late reply is dropped by the channel itself
and can never be delivered to a later ask ("ask fencing").
"""

from __future__ import annotations

import contextvars
import copy
import itertools
from typing import TYPE_CHECKING, Any, Final

import trio

from ._config import validate_duration
from ._lifecycle import ActorEvent, ActorState, StateMachine
from .errors import ActorError, ActorStopped, AskTimeout

if TYPE_CHECKING:
    from ._mailbox import Mailbox, MailboxStatistics

__all__ = ["ActorRef", "Reply"]

#: One answer on a reply channel: (ask id, ok, value or ActorError).
_Answer = tuple[int, bool, Any]
#: One mailbox item: (message, reply).
_Letter = tuple[Any, "Reply"]

_ask_ids = itertools.count(1)


def _detached(error: ActorError) -> ActorError:
    # SPEC §1.5: what crosses an actor boundary carries data, not the handler's
    # traceback or exception chain. A shallow copy keeps class, message and details.
    try:
        clone = copy.copy(error)
    except Exception:
        clone = error
    clone.__traceback__ = None
    clone.__cause__ = None
    clone.__context__ = None
    return clone


class Reply:
    """The way a handler answers one message (SPEC §1.2).

    ``Actor.handle`` receives one with every message. For a plain ``send`` it expects no
    answer: :meth:`send` and :meth:`fail` do nothing and :attr:`wanted` is False. For an
    ``ask``, the first answer wins and later ones are dropped; answering never blocks.
    A handler may hand its ``Reply`` to a task in ``Actor.nursery`` and answer later;
    if the actor stops first, the asker gets ``ActorStopped``.
    """

    __slots__ = ("_ask_id", "_channel", "_parked")

    def __init__(self, ask_id: int, channel: trio.MemorySendChannel[_Answer] | None) -> None:
        self._ask_id = ask_id
        self._channel = channel
        self._parked: set[Reply] | None = None

    @property
    def ask_id(self) -> int:
        """The per-ask fence id (0 for a plain send)."""
        return self._ask_id

    @property
    def wanted(self) -> bool:
        """True while an asker is still waiting for this answer.

        False for a plain send, once answered, and once the asker gave up (timeout or
        cancellation). A handler may skip expensive work when it is False.
        """
        channel = self._channel
        return channel is not None and channel.statistics().open_receive_channels > 0

    @property
    def answered(self) -> bool:
        """True once answered (always True for a plain send, which expects nothing)."""
        return self._channel is None

    def send(self, value: Any) -> None:
        """Answer the ask with ``value``; never blocks. Dropped if the asker left."""
        self._answer(True, value)

    def fail(self, error: ActorError) -> None:
        """Make the asker's ``ask()`` raise ``error``; never blocks.

        The asker gets a copy without the traceback or exception chain (SPEC §1.5).

        Raises:
            TypeError: ``error`` is not an :class:`~actors.errors.ActorError`.
        """
        if not isinstance(error, ActorError):
            raise TypeError(f"Reply.fail needs an ActorError, got {type(error).__name__}")
        if self._channel is not None:
            self._answer(False, _detached(error))

    def _answer(self, ok: bool, value: Any) -> None:
        channel = self._channel
        if channel is None:
            return
        self._channel = None
        if self._parked is not None:
            self._parked.discard(self)
            self._parked = None
        try:  # noqa: SIM105  (hot path: cheaper than contextlib.suppress)
            channel.send_nowait((self._ask_id, ok, value))
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock):
            pass  # the asker left: the late reply is dropped (SPEC §1.2)
        channel.close()

    def _park(self, parked: set[Reply]) -> None:
        # Remember an unanswered ask so the actor can fail it when it stops.
        self._parked = parked
        parked.add(self)

    def __repr__(self) -> str:
        if self._ask_id == 0:
            return "<Reply to a send>"
        return f"<Reply ask_id={self._ask_id} answered={self.answered}>"


#: The shared reply of every plain ``send``: expects nothing.
NO_REPLY: Final = Reply(0, None)


#: What the current task runs inside of: ``(owner, task)`` for each actor cell (or
#: supervisor) whose code, directly or through tasks it spawned, is running, with the
#: task that runs it (innermost last). Trio copies the context when a task is spawned,
#: so a task started by an actor's handler inherits the mark. ``stop()`` uses it:
#: waiting for your own stop would be a deadlock that only the grace deadline breaks.
_Owners = tuple[tuple[object, trio.lowlevel.Task], ...]
_enclosing: contextvars.ContextVar[_Owners] = contextvars.ContextVar(
    "trio_actors_enclosing", default=()
)


def enter_owner(owner: object) -> contextvars.Token[_Owners]:
    """Mark the current task (and tasks it spawns from now on) as running in ``owner``.

    Returns the token to pass to :func:`leave_owner` when ``owner`` stops running.
    """
    return _enclosing.set((*_enclosing.get(), (owner, trio.lowlevel.current_task())))


def leave_owner(token: contextvars.Token[_Owners]) -> None:
    """Undo the matching :func:`enter_owner` (in the same task)."""
    _enclosing.reset(token)


def inside(owner: object) -> bool:
    """Return True if the current task runs ``owner``'s code (see :func:`enter_owner`).

    Both must hold: the task carries the mark (it is, or was spawned by, the owner's
    code) and it runs under the owner's task (the owner waits for it). A task the
    owner's code spawned into some outer nursery is not inside: the owner can finish
    without it, so its ``stop()`` may wait.
    """
    for item, root in _enclosing.get():
        if item is owner:
            task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
            while task is not None:
                if task is root:
                    return True
                parent = task.parent_nursery
                task = None if parent is None else parent.parent_task
            return False
    return False


class _ActorCell:
    """The runtime state of one running actor, shared by the actor and its ref."""

    __slots__ = ("lifecycle", "mailbox", "name", "parked", "scope", "stopped")

    def __init__(
        self,
        name: str,
        mailbox: Mailbox[_Letter],
        lifecycle: StateMachine[ActorState, ActorEvent],
    ) -> None:
        self.name = name
        self.mailbox = mailbox
        self.lifecycle = lifecycle
        # Covers on_start, the loop and the actor's nursery; stop() sets its deadline.
        self.scope = trio.CancelScope()
        self.stopped = trio.Event()
        self.parked: set[Reply] = set()

    def request_stop(self, grace: float) -> None:
        """Close the mailbox and make sure the actor is cancelled ``grace`` s from now."""
        self.lifecycle.process_event(ActorEvent.STOP)
        self.mailbox.close()
        if not self.stopped.is_set():
            deadline = trio.current_time() + grace
            if deadline < self.scope.deadline:
                self.scope.deadline = deadline


class ActorRef:
    """The handle through which others talk to an actor (SPEC §1.2).

    Obtained from ``await nursery.start(actor.run)``. Cheap to share; every ref to one
    actor is the same object.
    """

    __slots__ = ("_cell",)

    def __init__(self, cell: _ActorCell) -> None:
        self._cell = cell

    @property
    def name(self) -> str:
        """The actor's name (its class name unless set)."""
        return self._cell.name

    @property
    def state(self) -> ActorState:
        """The actor's lifecycle state (SPEC §1.3)."""
        return self._cell.lifecycle.state

    async def send(self, message: Any) -> None:
        """Deliver ``message``, waiting for mailbox space (backpressure, SPEC §1.2).

        Always a checkpoint; the wait runs under the caller's cancel scopes.

        Raises:
            ActorStopped: (code ``actor_stopped``) the actor is stopping or stopped, or
                stopped while this call waited. Raised at once, never after a hang.
        """
        await self._cell.mailbox.send((message, NO_REPLY))

    def try_send(self, message: Any) -> None:
        """Deliver ``message`` if the mailbox has space; never waits (SPEC §1.2).

        Raises:
            MailboxFull: (code ``mailbox_full``, transient) the mailbox is at capacity.
            ActorStopped: (code ``actor_stopped``) the actor is stopping or stopped.
        """
        self._cell.mailbox.try_send((message, NO_REPLY))

    async def ask(self, message: Any, *, timeout: float) -> Any:  # noqa: ASYNC109
        """Send ``message`` and wait for the handler's answer (SPEC §1.2).

        The whole exchange (waiting for mailbox space, then for the answer) is bounded
        by ``timeout`` with a cancel scope. On timeout or cancellation the reply channel
        is closed, so a late answer is dropped and never reaches a later ask.
        Always a checkpoint.

        Args:
            message: Anything the actor's ``handle`` understands.
            timeout: Seconds on the trio clock, ``0 < timeout <= 300``.

        Returns:
            The value the handler passed to ``reply.send``.

        Raises:
            ValueError: ``timeout`` is invalid (SPEC §1.6; the message names
                ``timeout``).
            AskTimeout: (code ``ask_timeout``, transient) no answer within ``timeout``.
            ActorStopped: (code ``actor_stopped``) the actor is stopping or stopped, or
                stopped before answering.
            ActorCrashed: (code ``actor_crashed``) the handler crashed on this message.
            ActorError: whatever the handler passed to ``reply.fail`` (or raised), with
                its own code.
        """
        seconds = validate_duration("timeout", timeout, allow_zero=False)
        ask_id = next(_ask_ids)
        answer_send, answer_receive = trio.open_memory_channel[_Answer](1)
        reply = Reply(ask_id, answer_send)
        with answer_receive:  # closed on every exit: a late answer is dropped
            try:
                with trio.fail_after(seconds):
                    await self._cell.mailbox.send((message, reply))
                    got_id, ok, value = await answer_receive.receive()
            except trio.TooSlowError:
                raise AskTimeout(
                    f"actor {self.name!r} did not answer within {seconds:g} s",
                    actor=self.name,
                    timeout=seconds,
                ) from None
            except trio.EndOfChannel:  # pragma: no cover - every path answers first
                raise ActorStopped(f"actor {self.name!r} is stopped", actor=self.name) from None
        assert got_id == ask_id, "reply channels are per ask"
        if ok:
            return value
        raise value

    async def stop(self, grace: float = 1.0) -> None:
        """Stop the actor and wait until it has stopped (SPEC §1.3).

        Closes the mailbox at once (later sends raise ``ActorStopped``), lets the actor
        handle what is queued and finish its nursery's tasks for at most ``grace``
        seconds (trio clock), then cancels it; then waits for ``on_stop`` and returns.
        Idempotent: concurrent or repeated calls are fine (the earliest deadline wins).
        Always a checkpoint.

        Called from inside the actor itself (its handler, ``on_start`` or a task in its
        nursery), it requests the stop and returns after one checkpoint without waiting:
        the actor cannot finish while its own code waits for it to finish. With
        ``grace=0`` that checkpoint is already cancelled.

        Args:
            grace: Seconds, ``0 <= grace <= 300``; 0 cancels at once.

        Raises:
            ValueError: ``grace`` is invalid (SPEC §1.6; names ``grace``).
        """
        seconds = validate_duration("grace", grace)
        cell = self._cell
        cell.request_stop(seconds)
        if inside(cell) and not cell.stopped.is_set():
            await trio.lowlevel.checkpoint()
            return
        await cell.stopped.wait()

    def stop_nowait(self, grace: float = 1.0) -> None:
        """Request a stop like :meth:`stop`, without waiting for it (SPEC §1.3).

        The mailbox is closed at once; the actor drains for at most ``grace`` seconds,
        then is cancelled. Safe to call from the actor's own handler (``stop`` would
        wait for the handler itself).

        Raises:
            ValueError: ``grace`` is invalid (SPEC §1.6; names ``grace``).
        """
        self._cell.request_stop(validate_duration("grace", grace))

    async def wait_stopped(self) -> None:
        """Wait until the actor's task has finished (stopped or failed), without asking."""
        await self._cell.stopped.wait()

    def statistics(self) -> MailboxStatistics:
        """Return a snapshot of the actor's mailbox (STYLE 16); never waits."""
        return self._cell.mailbox.statistics()

    def __repr__(self) -> str:
        return f"<ActorRef {self.name!r} {self.state.value}>"
