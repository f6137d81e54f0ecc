"""Handles to actors: :class:`ActorRef` for callers, :class:`Reply` for handlers (design §1.2).

An :class:`ActorRef` is the only handle others hold on an actor. Each ``ask`` gets a
fresh id and a fresh one-shot reply cell (its :class:`Reply`): a value slot plus the
parked asker task. When the asker stops waiting (timeout or cancellation) it marks its
cell *abandoned*, so a late answer is dropped by the cell itself and can never be
delivered to a later ask, which has a cell of its own ("ask fencing").

The cell replaces a one-slot memory channel per ask: same semantics, a fraction of the
cost (no channel pair, no receive-side bookkeeping; the asker parks with
``trio.lowlevel.wait_task_rescheduled`` and the answer reschedules it).

Both are generic (design §1.8): ``ActorRef[Msg, Reply]`` takes ``Msg`` and its ``ask``
returns ``Reply``; ``Reply[R]`` is answered with an ``R``. Both parameters default to
``Any``, so an unparameterized ``ActorRef`` stays what it always was.
"""

from __future__ import annotations

import contextvars
import copy
import itertools
from typing import TYPE_CHECKING, Any, Final, Generic

import trio
from trio.lowlevel import (
    Abort,
    cancel_shielded_checkpoint,
    checkpoint_if_cancelled,
    current_task,
    reschedule,
    wait_task_rescheduled,
)

from ..errors import ActorError, AskTimeout
from ._config import MAX_DURATION, validate_duration
from ._lifecycle import ActorEvent, ActorState, StateMachine

if TYPE_CHECKING:
    # PEP 696 defaults: a bare ``ActorRef`` means ``ActorRef[Any, Any]`` to checkers. At
    # run time (Python 3.11's TypeVar has no ``default``) plain TypeVars do the same.
    from typing_extensions import TypeVar

    from ._mailbox import Mailbox, MailboxStatistics

    MsgT = TypeVar("MsgT", default=Any, contravariant=True)
    ReplyT = TypeVar("ReplyT", default=Any, covariant=True)
    AnswerT = TypeVar("AnswerT", default=Any, contravariant=True)
else:
    from typing import TypeVar

    MsgT = TypeVar("MsgT", contravariant=True)
    ReplyT = TypeVar("ReplyT", covariant=True)
    AnswerT = TypeVar("AnswerT", contravariant=True)

__all__ = ["ActorRef", "AnswerT", "MsgT", "Reply", "ReplyT"]

#: One mailbox item: (message, reply).
_Letter = tuple[Any, "Reply[Any]"]

_ask_ids = itertools.count(1)

# States of a reply cell. Plain ints: the actor loop reads them once per message.
#: An ask whose asker still waits (parked, or about to park) for the answer.
_PENDING: Final = 0
#: Answered (the value waits in the cell until the asker collects it), or a plain send.
_ANSWERED: Final = 1
#: The asker left (timeout, cancellation, ActorStopped) before any answer: answers
#: are dropped. Answering it anyway moves it to ``_ANSWERED`` (with nothing stored).
_ABANDONED: Final = 2


def _detached(error: ActorError) -> ActorError:
    # design §1.5: what crosses an actor boundary carries data, not the handler's
    # traceback or exception chain. A shallow copy keeps class, message and details.
    try:
        clone = copy.copy(error)
    except Exception:
        clone = error
    clone.__traceback__ = None
    clone.__cause__ = None
    clone.__context__ = None
    return clone


class Reply(Generic[AnswerT]):
    """The way a handler answers one message (design §1.2); ``Reply[R]`` takes an ``R``.

    ``Actor.handle`` receives one with every message. For a plain ``send`` it expects no
    answer: :meth:`send` and :meth:`fail` do nothing and :attr:`wanted` is False. For an
    ``ask``, the first answer wins and later ones are dropped; answering never blocks.
    A handler may hand its ``Reply`` to a task in ``Actor.nursery`` and answer later;
    if the actor stops first, the asker gets ``ActorStopped``.

    Internally it is the ask's one-shot reply cell: the answer is stored in it and the
    parked asker is rescheduled; once the asker has left, the cell is abandoned and
    drops whatever arrives (per-ask fencing).
    """

    __slots__ = ("_ask_id", "_ok", "_parked", "_state", "_task", "_value")

    def __init__(self, ask_id: int, *, state: int = _PENDING) -> None:
        self._ask_id = ask_id
        self._state = state
        # The asker's task while it is parked waiting for the answer, else None.
        self._task: trio.lowlevel.Task | None = None
        self._parked: set[Reply[Any]] | None = None
        self._ok = False
        self._value: Any = None

    @property
    def ask_id(self) -> int:
        """The per-ask id (0 for a plain send); for diagnostics, the cell is the fence."""
        return self._ask_id

    @property
    def wanted(self) -> bool:
        """True while an asker is still waiting for this answer.

        False for a plain send, once answered, and once the asker gave up (timeout or
        cancellation). A handler may skip expensive work when it is False.
        """
        return self._state == _PENDING

    @property
    def answered(self) -> bool:
        """True once answered (always True for a plain send, which expects nothing)."""
        return self._state == _ANSWERED

    def send(self, value: AnswerT) -> None:
        """Answer the ask with ``value``; never blocks. Dropped if the asker left."""
        self._answer(True, value)

    def fail(self, error: ActorError) -> None:
        """Make the asker's ``ask()`` raise ``error``; never blocks.

        The asker gets a copy without the traceback or exception chain (design §1.5).

        Raises:
            TypeError: ``error`` is not an :class:`~actors.errors.ActorError`.
        """
        if not isinstance(error, ActorError):
            raise TypeError(f"Reply.fail needs an ActorError, got {type(error).__name__}")
        if self._state == _PENDING:
            self._answer(False, _detached(error))
        else:
            self._answer(False, None)  # dropped; only marks it answered

    @trio.lowlevel.enable_ki_protection
    def _answer(self, ok: bool, value: Any) -> None:
        state = self._state
        if state == _ANSWERED:
            return  # a plain send, or answered before: the first answer won
        self._state = _ANSWERED
        if self._parked is not None:
            self._parked.discard(self)
            self._parked = None
        if state == _ABANDONED:
            return  # the asker left: the late reply is dropped (design §1.2)
        self._ok = ok
        self._value = value
        task = self._task
        if task is not None:
            self._task = None
            reschedule(task)  # the asker collects the value from the cell

    def _abandon(self) -> None:
        # The asker left before any answer: from now on the cell drops answers, so
        # none can reach anyone else, and the actor need not fail it when it stops.
        self._task = None
        self._state = _ABANDONED
        if self._parked is not None:
            self._parked.discard(self)
            self._parked = None

    def _abort(self, _raise_cancel: object) -> Abort:
        # trio calls this when the parked asker is cancelled (deadline or outer scope).
        self._abandon()
        return Abort.SUCCEEDED

    def _park(self, parked: set[Reply[Any]]) -> None:
        # Remember an unanswered ask so the actor can fail it when it stops.
        self._parked = parked
        parked.add(self)

    def __repr__(self) -> str:
        if self._ask_id == 0:
            return "<Reply to a send>"
        return f"<Reply ask_id={self._ask_id} answered={self.answered}>"


#: The shared reply of every plain ``send``: expects nothing.
NO_REPLY: Final[Reply[Any]] = Reply(0, state=_ANSWERED)


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
        self.parked: set[Reply[Any]] = set()

    def request_stop(self, grace: float) -> None:
        """Close the mailbox and make sure the actor is cancelled ``grace`` s from now."""
        self.lifecycle.process_event(ActorEvent.STOP)
        self.mailbox.close()
        if not self.stopped.is_set():
            deadline = trio.current_time() + grace
            if deadline < self.scope.deadline:
                self.scope.deadline = deadline


class ActorRef(Generic[MsgT, ReplyT]):
    """The handle through which others talk to an actor (design §1.2, §1.8).

    Obtained from ``await nursery.start(actor.run)``. Cheap to share; every ref to one
    actor is the same object. ``ActorRef[Msg, Reply]``: ``send``, ``try_send`` and
    ``ask`` take a ``Msg``, and ``ask`` returns a ``Reply`` (both ``Any`` when not
    given), so a type checker sees what an actor accepts and answers.
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
        """The actor's lifecycle state (design §1.3)."""
        return self._cell.lifecycle.state

    async def send(self, message: MsgT) -> None:
        """Deliver ``message``, waiting for mailbox space (backpressure, design §1.2).

        Always a checkpoint; the wait runs under the caller's cancel scopes.

        Raises:
            ActorStopped: (code ``actor_stopped``) the actor is stopping or stopped, or
                stopped while this call waited. Raised at once, never after a hang.
        """
        # Fast path: what ``MemorySendChannel.send`` does, minus two coroutine layers.
        mailbox = self._cell.mailbox
        letter = (message, NO_REPLY)
        await checkpoint_if_cancelled()
        if mailbox.offer(letter):
            await cancel_shielded_checkpoint()
        else:
            await mailbox.send(letter)  # full (backpressure) or closed (ActorStopped)

    def try_send(self, message: MsgT) -> None:
        """Deliver ``message`` if the mailbox has space; never waits (design §1.2).

        Raises:
            MailboxFull: (code ``mailbox_full``, transient) the mailbox is at capacity.
            ActorStopped: (code ``actor_stopped``) the actor is stopping or stopped.
        """
        self._cell.mailbox.try_send((message, NO_REPLY))

    async def ask(self, message: MsgT, *, timeout: float) -> ReplyT:  # noqa: ASYNC109
        """Send ``message`` and wait for the handler's answer (design §1.2).

        The whole exchange (waiting for mailbox space, then for the answer) is bounded
        by ``timeout`` with a cancel scope. On timeout or cancellation the ask's reply
        cell is abandoned, so a late answer is dropped and never reaches a later ask.
        Always a checkpoint.

        Args:
            message: Anything the actor's ``handle`` understands.
            timeout: Seconds on the trio clock, ``0 < timeout <= 300``.

        Returns:
            The value the handler passed to ``reply.send``.

        Raises:
            ValueError: ``timeout`` is invalid (design §1.6; the message names
                ``timeout``).
            AskTimeout: (code ``ask_timeout``, transient) no answer within ``timeout``.
            ActorStopped: (code ``actor_stopped``) the actor is stopping or stopped, or
                stopped before answering.
            ActorCrashed: (code ``actor_crashed``) the handler crashed on this message.
            ActorError: whatever the handler passed to ``reply.fail`` (or raised), with
                its own code.
        """
        # Fast path for the usual in-range number; anything else gets the full check.
        kind = type(timeout)
        if (kind is float or kind is int) and 0 < timeout <= MAX_DURATION:
            seconds = float(timeout)
        else:
            seconds = validate_duration("timeout", timeout, allow_zero=False)
        reply = Reply(next(_ask_ids))
        letter = (message, reply)
        mailbox = self._cell.mailbox
        try:
            with trio.CancelScope(deadline=trio.current_time() + seconds) as scope:
                # Checkpoint, fast path: a cancel point here (nothing is queued if we
                # are already cancelled), the schedule point when we park below.
                await checkpoint_if_cancelled()
                if not mailbox.offer(letter):
                    # Full (backpressure) or closed (ActorStopped): a full checkpoint.
                    await mailbox.send(letter)
                if reply._state == _PENDING:
                    reply._task = current_task()
                    await wait_task_rescheduled(reply._abort)
        finally:
            if reply._state == _PENDING:  # left before any answer: drop late ones
                reply._abandon()
        if scope.cancelled_caught:
            raise AskTimeout(
                f"actor {self.name!r} did not answer within {seconds:g} s",
                actor=self.name,
                timeout=seconds,
            )
        value = reply._value
        reply._value = None
        if reply._ok:
            return value  # type: ignore[no-any-return]  # the handler's answer, a ReplyT
        raise value

    async def stop(self, grace: float = 1.0) -> None:
        """Stop the actor and wait until it has stopped (design §1.3).

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
            ValueError: ``grace`` is invalid (design §1.6; names ``grace``).
        """
        seconds = validate_duration("grace", grace)
        cell = self._cell
        cell.request_stop(seconds)
        if inside(cell) and not cell.stopped.is_set():
            await trio.lowlevel.checkpoint()
            return
        await cell.stopped.wait()

    def stop_nowait(self, grace: float = 1.0) -> None:
        """Request a stop like :meth:`stop`, without waiting for it (design §1.3).

        The mailbox is closed at once; the actor drains for at most ``grace`` seconds,
        then is cancelled. Safe to call from the actor's own handler (``stop`` would
        wait for the handler itself).

        Raises:
            ValueError: ``grace`` is invalid (design §1.6; names ``grace``).
        """
        self._cell.request_stop(validate_duration("grace", grace))

    async def wait_stopped(self) -> None:
        """Wait until the actor's task has finished (stopped or failed), without asking."""
        await self._cell.stopped.wait()

    def statistics(self) -> MailboxStatistics:
        """Return a snapshot of the actor's mailbox; never waits."""
        return self._cell.mailbox.statistics()

    def __repr__(self) -> str:
        return f"<ActorRef {self.name!r} {self.state.value}>"
