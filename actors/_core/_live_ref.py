"""A reference to a supervised child that survives its restarts (design §1.9).

Akka's refs and OTP's registered names are the models: ``SupervisorRef.child("cache")``
returns one :class:`LiveRef` per child, which always talks to the child's running
incarnation. While the supervisor restarts the child, a message waits for the new
incarnation — bounded by the ask's timeout, or for a send by the supervisor's
``restart_wait`` (and the caller's own cancel scopes) — and then fails with the retryable
:class:`~actors.errors.ActorRestarting`; never with ``ActorStopped`` while the supervisor
still means to restart the child. ``ActorStopped`` comes once the child is gone for good:
a temporary child that ended, a transient child's normal exit, ``terminate_child``,
``delete_child``, or its supervisor stopped.

Delivery stays at most once: a send the old incarnation refused (its mailbox had closed)
is delivered to the new one, but an ask the old incarnation took and did not answer
fails with ``ActorRestarting`` instead of being sent again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic

import trio

from ..errors import ActorStopped
from ._actor import ActorRef, MsgT, ReplyT
from ._child import GONE, STOPPED, Child
from ._config import MAX_DURATION, validate_duration
from ._lifecycle import ActorState

if TYPE_CHECKING:
    from ._mailbox import MailboxStatistics
    from ._supervisor_spec import ChildRef

__all__ = ["LiveRef"]


class LiveRef(Generic[MsgT, ReplyT]):
    """A ref to a supervised child's running incarnation, whatever it is (design §1.9).

    Obtained from :meth:`SupervisorRef.child`; the same object for the child's whole
    life in its supervisor. Typed like :class:`ActorRef`: ``LiveRef[Msg, Reply]``.
    """

    __slots__ = ("_child",)

    def __init__(self, child: Child) -> None:
        self._child = child

    @property
    def name(self) -> str:
        """The child's id in its supervisor."""
        return self._child.id

    @property
    def incarnation(self) -> int:
        """The current (or last) incarnation's number: 1 for the first start."""
        inc = self._child.current
        return 0 if inc is None else inc.number

    @property
    def state(self) -> ActorState:
        """The running incarnation's state; ``starting`` while it (re)starts, else ``stopped``."""
        ref = self._child.current.ref if self._child.current is not None else None
        if self._child.running and ref is not None:
            return ref.state
        if self._child.status in (STOPPED, GONE):
            return ActorState.STOPPED
        return ActorState.STARTING

    def current(self) -> ActorRef[MsgT, ReplyT] | None:
        """The running incarnation's :class:`ActorRef`, or None while there is none.

        Raises:
            TypeError: the child is a supervisor (use ``SupervisorRef.child_supervisor``).
        """
        return self._actor_ref(self._child.running_ref())

    async def send(self, message: MsgT) -> None:
        """Deliver ``message`` to the running incarnation (design §1.2, §1.9).

        While the child restarts, waits for the new incarnation for at most the
        supervisor's ``restart_wait`` seconds (trio clock), under the caller's cancel
        scopes. Always a checkpoint.

        Raises:
            ActorRestarting: (code ``actor_restarting``, transient) no incarnation took
                the message within ``restart_wait``.
            ActorStopped: (code ``actor_stopped``) the child is gone for good.
            TypeError: the child is a supervisor.
        """
        child = self._child
        deadline = trio.current_time() + child.restart_wait
        while True:
            ref = await self._resolve(deadline)
            try:
                await ref.send(message)
            except ActorStopped:
                # Refused at the door: the message was not taken, so the next
                # incarnation may have it, if there is to be one.
                await self._wait_replaced(ref, deadline)
                continue
            return

    def try_send(self, message: MsgT) -> None:
        """Deliver ``message`` if an incarnation runs and has space; never waits (§1.9).

        Raises:
            MailboxFull: (code ``mailbox_full``, transient) the mailbox is at capacity.
            ActorRestarting: (code ``actor_restarting``, transient) the child restarts.
            ActorStopped: (code ``actor_stopped``) the child is gone for good.
            TypeError: the child is a supervisor.
        """
        child = self._child
        ref = self._actor_ref(child.running_ref())
        if ref is None:
            raise self._child.absent_error()
        try:
            ref.try_send(message)
        except ActorStopped:
            if child.status in (STOPPED, GONE):
                raise
            raise self._child.restarting_error() from None

    async def ask(self, message: MsgT, *, timeout: float) -> ReplyT:  # noqa: ASYNC109
        """Ask the running incarnation (design §1.2, §1.9); waits out a restart.

        The whole exchange, including the wait for a new incarnation, is bounded by
        ``timeout``. Always a checkpoint.

        Args:
            message: Anything the child's ``handle`` understands.
            timeout: Seconds on the trio clock, ``0 < timeout <= 300``.

        Raises:
            ValueError: ``timeout`` is invalid (design §1.6; names ``timeout``).
            ActorRestarting: (code ``actor_restarting``, transient) no incarnation was
                running before the deadline, or the one that took the message ended
                before answering and the child is being restarted, or was still ending
                at the deadline (its supervisor had not decided yet).
            AskTimeout: (code ``ask_timeout``, transient) the incarnation did not answer
                in time.
            ActorStopped: (code ``actor_stopped``) the child is gone for good.
            ActorCrashed: (code ``actor_crashed``) the handler crashed on this message.
            TypeError: the child is a supervisor.
        """
        seconds = validate_duration("timeout", timeout, allow_zero=False)
        deadline = trio.current_time() + seconds
        ref = await self._resolve(deadline)
        remaining = deadline - trio.current_time()
        if remaining <= 0:
            raise self._child.restarting_error()
        try:
            return await ref.ask(message, timeout=min(remaining, MAX_DURATION))
        except ActorStopped:
            with trio.move_on_at(deadline) as timer:
                await ref.wait_stopped()  # the supervisor decides at once
            if self._child.replaced(ref):
                raise self._child.restarting_error() from None
            if timer.cancelled_caught and self._child.status not in (STOPPED, GONE):
                # Still ending (a long on_stop) when time ran out: its supervisor has
                # not decided yet, so it is not gone for good (as ``send``).
                raise self._child.restarting_error() from None
            raise

    async def stop(self, grace: float = 1.0) -> None:
        """Stop the running incarnation like ``ActorRef.stop`` (design §1.3).

        Its supervisor sees a normal exit: a permanent child is started again (use
        ``SupervisorRef.terminate_child`` to stop it for good). Always a checkpoint.

        Raises:
            ValueError: ``grace`` is invalid (design §1.6; names ``grace``).
        """
        seconds = validate_duration("grace", grace)
        inc = self._child.current
        if inc is None or inc.ref is None or inc.done.is_set():
            await trio.lowlevel.checkpoint()
            return
        await inc.ref.stop(seconds)

    async def wait_stopped(self) -> None:
        """Wait until the current incarnation has ended (a checkpoint if none runs)."""
        inc = self._child.current
        if inc is None:
            await trio.lowlevel.checkpoint()
            return
        await inc.done.wait()

    def statistics(self) -> MailboxStatistics:
        """The running incarnation's mailbox statistics; never waits.

        Raises:
            ActorRestarting: (code ``actor_restarting``) no incarnation runs now.
            ActorStopped: (code ``actor_stopped``) the child is gone for good.
        """
        ref = self._actor_ref(self._child.running_ref())
        if ref is None:
            raise self._child.absent_error()
        return ref.statistics()

    # --- internals ---------------------------------------------------------------------

    def _actor_ref(self, ref: ChildRef | None) -> ActorRef[MsgT, ReplyT] | None:
        if ref is not None and not isinstance(ref, ActorRef):
            raise TypeError(
                f"child {self.name!r} is a supervisor; use SupervisorRef.child_supervisor"
            )
        return ref

    async def _resolve(self, deadline: float) -> ActorRef[MsgT, ReplyT]:
        # Wait (until ``deadline``) for a running incarnation that takes messages.
        child = self._child
        waited = False
        with trio.move_on_at(deadline):
            while True:
                ref = self._actor_ref(child.running_ref())
                if ref is not None:
                    return ref
                if child.status in (STOPPED, GONE):
                    if not waited:
                        await trio.lowlevel.checkpoint()
                    raise self._child.absent_error()
                await child.changed.wait()
                waited = True
        raise self._child.restarting_error()

    async def _wait_replaced(self, ref: ActorRef[Any, Any], deadline: float) -> None:
        # ``ref`` refused a message: wait for its end (the supervisor's decision follows
        # at once), then go on only if another incarnation is to come.
        with trio.move_on_at(deadline):
            await ref.wait_stopped()
        if not self._child.replaced(ref):
            raise self._child.absent_error()

    def __repr__(self) -> str:
        return f"<LiveRef {self.name!r} {self._child.status}>"
