"""The :class:`Actor` base class: one task, one mailbox, one message at a time (design §1).

Subclass it, override :meth:`Actor.handle` (and optionally :meth:`Actor.on_start` and
:meth:`Actor.on_stop`), and start it in a nursery you own::

    async with trio.open_nursery() as nursery:
        ref = await nursery.start(Counter().run)
        await ref.send("increment")
        total = await ref.ask("total", timeout=1.0)
        await ref.stop(grace=1.0)

Failure semantics (design §1.2, §1.5):

* ``handle`` raising an :class:`~actors.errors.ActorError` answers the ask with that
  error (``reply.fail``); for a plain send it is dropped. The actor keeps running.
* ``handle`` raising anything else crashes the actor: the asker of that message gets
  :class:`~actors.errors.ActorCrashed`, the mailbox closes, and the exception propagates
  out of :meth:`Actor.run` to the parent nursery (or supervisor, design §1.4).
* When the actor's task ends for any reason, every ask still queued or unanswered gets
  :class:`~actors.errors.ActorStopped`: no asker ever hangs on a dead actor.

Typing (design §1.8): ``class Cache(Actor[Get | Put, bytes | None])`` declares what the
actor accepts and answers; its ``ref`` is then an ``ActorRef[Get | Put, bytes | None]``
and ``handle`` gets a ``Reply[bytes | None]``. A bare ``Actor`` means ``Actor[Any, Any]``.

Handles (design §1.2): an :class:`ActorRef` is the only handle others hold on an actor,
and a :class:`Reply` is how a handler answers one message. The actor and its refs share
one private cell (mailbox, lifecycle, cancel scope), so they live in this one module.

Each ``ask`` gets a
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
import math
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

from protocol.errors import bound_message, describe_exception

from ..errors import ActorCrashed, ActorError, ActorStopped, AskTimeout
from ._config import MAX_DURATION, validate_duration
from ._groups import only_cancelled, sole_exception
from ._lifecycle import ActorEvent, ActorState, StateMachine, new_actor_lifecycle
from ._mailbox import Mailbox

if TYPE_CHECKING:
    # PEP 696 defaults: a bare ``ActorRef`` means ``ActorRef[Any, Any]`` to checkers. At
    # run time (Python 3.11's TypeVar has no ``default``) plain TypeVars do the same.
    from typing_extensions import TypeVar

    from ._mailbox import MailboxStatistics

    MsgT = TypeVar("MsgT", default=Any, contravariant=True)
    ReplyT = TypeVar("ReplyT", default=Any, covariant=True)
    AnswerT = TypeVar("AnswerT", default=Any, contravariant=True)
else:
    from typing import TypeVar

    MsgT = TypeVar("MsgT", contravariant=True)
    ReplyT = TypeVar("ReplyT", covariant=True)
    AnswerT = TypeVar("AnswerT", contravariant=True)

__all__ = ["Actor", "ActorRef", "AnswerT", "MsgT", "Reply", "ReplyT"]

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


def request_unbounded_stop(ref: ActorRef[Any, Any]) -> None:
    """Request ``ref``'s stop with no grace of its own (a child with ``shutdown="infinity"``).

    Only the stopping supervisor's own deadline then bounds the actor's shutdown.
    """
    ref._cell.request_stop(math.inf)


def _single_exception(error: BaseException) -> BaseException | None:
    # The group's sole exception if it is an Exception or a Ctrl-C (a lone Cancelled
    # stays in its group, for the cancel scope that owns it).
    if not isinstance(error, BaseExceptionGroup):
        return None
    leaf = sole_exception(error)
    return leaf if isinstance(leaf, Exception | KeyboardInterrupt) else None


class Actor(Generic[MsgT, ReplyT]):
    """Base class of every in-process actor (design §1.1-§1.3, §1.8).

    The actor handles one message at a time, in mailbox order, in its own task. An
    instance runs once. Per-message concurrency is opt-in: start tasks in
    :attr:`nursery` (e.g. one per job) and hand them the message's :class:`Reply`.

    Class attributes (may be overridden per subclass or per instance before ``run``):

    Attributes:
        mailbox_capacity: Mailbox size in messages (``0..65536``, default 16).
        name: Name used in refs and errors; defaults to the class name.
        on_stop_timeout: Seconds (trio clock) that :meth:`on_stop` may take before it
            is cancelled (default 5; validated, design §1.6).
    """

    mailbox_capacity: int = 16
    name: str = "Actor"
    on_stop_timeout: float = 5.0

    _cell: _ActorCell | None = None
    _ref: ActorRef[MsgT, ReplyT] | None = None
    _nursery: trio.Nursery | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__

    # --- hooks to override -------------------------------------------------------------

    async def on_start(self) -> None:
        """Prepare the actor; runs before the state becomes ``running``.

        The mailbox is already live (:attr:`ref` works, messages queue up) and
        :attr:`nursery` is open. An exception here fails ``nursery.start(actor.run)``.
        """

    async def handle(self, message: MsgT, reply: Reply[ReplyT]) -> None:
        """Handle one message; override this (design §1.2).

        Args:
            message: What the sender passed to ``send``/``try_send``/``ask``.
            reply: Answer an ask with ``reply.send(value)`` or ``reply.fail(error)``;
                for a plain send both do nothing.

        Raises:
            ActorError: answered to the asker (``reply.fail``); the actor keeps going.
            Exception: anything else crashes the actor (see the module docstring).
        """
        raise NotImplementedError(f"{type(self).__name__}.handle is not implemented")

    async def on_drained(self) -> None:
        """Tell background tasks to finish: the mailbox is closed and fully handled.

        Called once the message loop ended normally (after ``stop()``), inside the
        actor's nursery and under the ``stop()`` grace deadline, before the nursery is
        joined. Override it when :meth:`on_start` started long-running tasks in
        :attr:`nursery` (e.g. a publisher loop): without it they run until the grace
        period ends and are cancelled. Not called after a crash or an outside
        cancellation (the nursery is cancelled then anyway).
        """

    async def on_stop(self) -> None:
        """Clean up after the message loop ended (drained, cancelled or crashed).

        Runs after pending asks were answered with ``ActorStopped``, outside the
        ``stop()`` grace deadline but under :attr:`on_stop_timeout`, and still subject
        to cancellation from outside (a parent nursery or a ``brutal_kill``). Not run
        if :meth:`on_start` did not finish.
        """

    # --- public surface ------------------------------------------------------------------

    @property
    def nursery(self) -> trio.Nursery:
        """The actor's own nursery, for per-message tasks; open while the actor runs.

        Its tasks are waited for when the actor stops, and cancelled with the actor
        when the ``stop()`` grace period ends.

        Raises:
            RuntimeError: the actor is not running.
        """
        if self._nursery is None:
            raise RuntimeError(f"actor {self.name!r} is not running")
        return self._nursery

    @property
    def ref(self) -> ActorRef[MsgT, ReplyT]:
        """This actor's :class:`ActorRef` (the one ``run`` hands to ``task_status``).

        Raises:
            RuntimeError: ``run`` has not been entered yet.
        """
        if self._ref is None:
            raise RuntimeError(f"actor {self.name!r} has not been started")
        return self._ref

    @property
    def state(self) -> ActorState:
        """The lifecycle state; ``STARTING`` before ``run`` is entered."""
        return ActorState.STARTING if self._cell is None else self._cell.lifecycle.state

    def statistics(self) -> MailboxStatistics:
        """Shortcut for ``self.ref.statistics()``."""
        return self.ref.statistics()

    async def run(
        self, *, task_status: trio.TaskStatus[ActorRef[MsgT, ReplyT]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the actor until it is stopped; use with ``await nursery.start(actor.run)``.

        ``task_status.started(ref)`` is called once ``on_start`` returned and the state
        is ``running`` (design §1.1, §1.3). Returns after ``stop()`` (drained, or
        cancelled after its grace period) or when cancelled from outside.

        Raises:
            RuntimeError: this instance already ran.
            ValueError: ``mailbox_capacity`` or ``on_stop_timeout`` is invalid (§1.6).
            ActorStopped: (code ``actor_stopped``) ``stop()`` was called (through
                :attr:`ref`) while ``on_start`` still ran, so ``nursery.start`` fails
                with it; the state ends ``stopped``, not ``failed``.
            Exception: whatever crashed the actor (from ``handle``, ``on_start``,
                ``on_stop`` or a nursery task). A single error is raised bare; several
                at once (e.g. two nursery tasks) come as an ``ExceptionGroup``.
        """
        if self._cell is not None:
            raise RuntimeError(f"actor {self.name!r} already ran; make a new instance")
        name = self.name
        on_stop_timeout = validate_duration("on_stop_timeout", self.on_stop_timeout)
        mailbox: Mailbox[_Letter] = Mailbox(self.mailbox_capacity, owner=name)
        cell = _ActorCell(name, mailbox, new_actor_lifecycle(name))
        self._cell = cell
        ref: ActorRef[MsgT, ReplyT] = ActorRef(cell)
        self._ref = ref
        started = False
        error: BaseException | None = None
        # Code running in this actor (and tasks it spawns) is marked, so that its own
        # ``stop()`` does not wait for itself.
        owner_token = enter_owner(cell)
        try:
            with cell.scope:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    await self.on_start()
                    started = True
                    if cell.lifecycle.state is ActorState.STARTING:
                        cell.lifecycle.process_event(ActorEvent.STARTED)
                    task_status.started(self._ref)
                    await self._serve(cell)
                    await self.on_drained()
            if not started:
                # stop() cut on_start short. Say so to ``nursery.start`` instead of
                # trio's "child exited without calling task_status.started()".
                raise ActorStopped(f"actor {name!r} was stopped while starting", actor=name)
        except BaseException as exc:
            error = exc
            leaf = _single_exception(exc)
            if leaf is not None:
                # One crash inside the actor's own nursery: re-raise it bare, so the
                # parent (or ``nursery.start``) sees ValueError, not a 1-item group.
                error = leaf
                raise leaf from None
            raise
        finally:
            cell.lifecycle.process_event(ActorEvent.STOP)
            self._fail_pending(cell)
            try:
                if started:
                    with trio.move_on_after(on_stop_timeout):
                        await self.on_stop()
            except BaseException as exc:
                error = exc
                raise
            finally:
                crashed = (
                    error is not None
                    and not only_cancelled(error)
                    and not (not started and isinstance(error, ActorStopped))
                )
                cell.lifecycle.process_event(ActorEvent.CRASHED if crashed else ActorEvent.FINISHED)
                self._nursery = None
                cell.stopped.set()
                leave_owner(owner_token)

    # --- internals -----------------------------------------------------------------------

    async def _serve(self, cell: _ActorCell) -> None:
        # The message loop. After one blocking receive it drains whatever is already
        # queued with receive_nowait (bounded by capacity plus blocked senders), which
        # keeps the per-message cost to one handler call.
        receive = cell.mailbox.receive_channel
        handle = self.handle
        parked = cell.parked
        while True:
            try:
                message, reply = await receive.receive()
            except trio.EndOfChannel:
                return
            while True:
                try:
                    await handle(message, reply)
                except ActorError as exc:
                    reply.fail(exc)
                except Exception as exc:
                    reply.fail(self._crashed(exc))
                    cell.lifecycle.process_event(ActorEvent.STOP)
                    cell.mailbox.close()
                    raise
                finally:
                    if reply._state == _PENDING:
                        # Handed to a task, or cancelled mid-handle: fail it on stop.
                        # It leaves the set when answered or when its asker gives up.
                        reply._park(parked)
                try:
                    message, reply = receive.receive_nowait()
                except trio.WouldBlock:
                    break
                except trio.EndOfChannel:
                    return

    def _crashed(self, exc: BaseException) -> ActorCrashed:
        text = bound_message(f"actor {self.name!r} crashed: {describe_exception(exc)}")
        return ActorCrashed(text, actor=self.name, error_type=type(exc).__name__)

    def _fail_pending(self, cell: _ActorCell) -> None:
        # Every ask still queued or unanswered gets ActorStopped: nobody hangs.
        for _message, reply in cell.mailbox.close_all():
            if reply._state == _PENDING:
                reply.fail(ActorStopped(f"actor {self.name!r} stopped", actor=self.name))
        for reply in list(cell.parked):
            reply.fail(ActorStopped(f"actor {self.name!r} stopped", actor=self.name))
        cell.parked.clear()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.state.value}>"
