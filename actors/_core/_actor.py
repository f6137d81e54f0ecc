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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic

import trio

from protocol.errors import bound_message, describe_exception

from ..errors import ActorCrashed, ActorError, ActorStopped
from ._config import validate_duration
from ._groups import sole_exception
from ._lifecycle import ActorEvent, ActorState, new_actor_lifecycle
from ._mailbox import Mailbox
from ._ref import (
    _PENDING,
    ActorRef,
    MsgT,
    Reply,
    ReplyT,
    _ActorCell,
    _Letter,
    enter_owner,
    leave_owner,
)

if TYPE_CHECKING:
    from ._mailbox import MailboxStatistics

__all__ = ["Actor"]


def _only_cancelled(error: BaseException) -> bool:
    if isinstance(error, trio.Cancelled):
        return True
    if isinstance(error, BaseExceptionGroup):
        _, rest = error.split(trio.Cancelled)
        return rest is None
    return False


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
                    and not _only_cancelled(error)
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
