"""How a helper is stopped: the escalation ladder of design §3.5, and shutdown (§3.8).

:class:`Ladder` is the part of a :class:`~actors._helpers._process._process.HelperProcess` that
stops it:

1. a cancel frame for the job's exact generation; a terminal reply within
   ``cancel_grace`` ends the job cooperatively and the helper stays usable;
2. otherwise SIGTERM to the helper's whole tree, and up to ``terminate`` seconds to be
   reaped;
3. otherwise SIGKILL to the tree, and up to ``kill`` seconds to be reaped;
4. otherwise the incarnation is *quarantined*: no replacement may be spawned until the
   reaper task finally reaps it.

Every step is a deadline from the configuration, and it runs shielded (the caller may be
cancelled meanwhile), so a job's ladder is bounded by ``cancel_grace + terminate +
kill`` seconds and a shutdown by ``shutdown + terminate + kill``. A signal that cannot
be delivered to the helper (e.g. EPERM) ends the ladder at once as ``signal_failed``
and quarantines the helper until it is gone; in ``cgroup`` containment a refused SIGTERM
still goes on to SIGKILL, which ``cgroup.kill`` delivers without a signal permission.
The shutdown of such a helper (the pool's close) retries the rungs, SIGTERM then
SIGKILL, until the helper is gone or its bound runs out. :meth:`Ladder.hurry` (a second Ctrl-C,
design §3.13) skips what is left of every grace: SIGKILL now, then the kill timeout.
Each step is an event and a log record (design §3.10).
"""

from __future__ import annotations

import contextlib
import errno as errno_module
import signal
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final, Protocol

import trio
from trio.lowlevel import enable_ki_protection

from protocol.envelope import encode_fields

from ..._core import HelperEvent, HelperState
from ...errors import ProtocolError
from ._pipe import PipeGone
from ._spec import MIN_FRAME_LIMIT

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from protocol.envelope import Envelope

    from ._containment import ProcessTree
    from ._pipe import HelperPipe
    from ._reaper import Reaper
    from ._spec import HelperTimeouts

__all__ = ["Ladder", "StoppedHelper"]

#: First and longest pause between two tries of a refused SIGKILL, in seconds.
_RETRY_PAUSE: Final = 0.005
_RETRY_PAUSE_MAX: Final = 0.1


class StoppedHelper(Protocol):
    """What the ladder reads of the helper it stops (its public face)."""

    last_escalation: str | None

    @property
    def timeouts(self) -> HelperTimeouts: ...

    @property
    def session(self) -> str: ...

    @property
    def pid(self) -> int | None: ...

    @property
    def state(self) -> HelperState: ...

    @property
    def exited(self) -> bool: ...

    @property
    def usable(self) -> bool: ...

    def cancel(self) -> bool: ...


class Ladder:
    """The stopping part of one helper incarnation (see the module docstring).

    Args:
        helper: The incarnation it stops (its ``timeouts``: seconds on trio's clock).
        tree: Its process tree, which the signals go to.
        reaper: Its reaper: whether the leader is reaped yet, and the event of its exit.
        pipe: Its frame pipe now (None before the spawn).
        receive_reply: ``receive_reply(generation, operation)``: the job's fenced
            reply (its progress frames handled as the job's).
        advance: Applies an event to its lifecycle (design §3).
        emit: Reports a step: ``emit(kind, text, *, level=None, **details)``, an event
            and a log record (design §3.10).
    """

    def __init__(
        self,
        helper: StoppedHelper,
        *,
        tree: ProcessTree,
        reaper: Reaper,
        pipe: Callable[[], HelperPipe | None],
        receive_reply: Callable[[int, str], Awaitable[Envelope]],
        advance: Callable[[HelperEvent], HelperState],
        emit: Callable[..., None],
    ) -> None:
        self._helper = helper
        self._timeouts = helper.timeouts
        self._tree = tree
        self._reaper = reaper
        self._exited = reaper.exited
        self._pipe = pipe
        self._receive_reply = receive_reply
        self._advance = advance
        self._emit = emit
        self.hurried = False
        """Every grace is skipped from now on (a second Ctrl-C)."""
        self._kill_reported = False  # hurry() sent and reported the SIGKILL
        self.signal_failure: tuple[int, int, str] | None = None
        """``(pid, errno, signal name)`` of the signal that could not be delivered."""
        self._step: trio.CancelScope | None = None
        # The task stopping the helper now; another one waits for it (a close meeting
        # a retirement or a failed start), then finds the helper gone.
        self._owner: trio.lowlevel.Task | None = None
        self._released: trio.Event | None = None

    @asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[None]:
        task = trio.lowlevel.current_task()
        if self._owner is task:  # nested: a step of the same stop
            yield
            return
        while self._owner is not None:  # bounded: the other stop is a bounded ladder
            if self._released is None:
                self._released = trio.Event()
            await self._released.wait()
        self._owner = task
        try:
            yield
        finally:
            self._owner = None
            if self._released is not None:
                self._released.set()
                self._released = None

    def _wait(self, seconds: float) -> trio.CancelScope:
        """A step's deadline: ``seconds`` from now, or at once when hurried."""
        scope = trio.move_on_after(0 if self.hurried else seconds)
        self._step = scope
        return scope

    def hurry(self) -> None:
        """Skip every grace left (design §3.13): SIGKILL the tree now; never waits."""
        helper = self._helper
        if self.hurried or helper.exited:
            return
        self.hurried = True
        if helper.pid is not None:
            self._tree.signal(signal.SIGKILL)
            # Reported here: the reaper may find it gone before the ladder's own
            # SIGKILL rung, which then has nothing left to send.
            self._emit("sigkill_sent", "SIGKILL sent to its process tree (hurried)")
            self._kill_reported = True
        if self._step is not None:
            self._step.cancel()
        helper.cancel()

    @enable_ki_protection
    async def stop_job(
        self, generation: int, operation: str, *, parent_timeout: bool = False, reason: str
    ) -> str:
        async with self._exclusive():
            return await self._stop_job(
                generation, operation, parent_timeout=parent_timeout, reason=reason
            )

    @enable_ki_protection
    async def _stop_job(
        self, generation: int, operation: str, *, parent_timeout: bool, reason: str
    ) -> str:
        """Run the ladder for the active job; return the last step used.

        Never raises (but ``InvalidTransition`` on a bug); must run shielded.

        Args:
            generation: The active job's generation.
            operation: The active job's operation.
            parent_timeout: The reply deadline started it: a helper that answers the
                cancel is retired all the same (design §3.6).
            reason: Why, for the events: ``cancelled``, ``reply_timeout``, ``stalled``,
                ``deadline`` or ``caller_cancelled``.
        """
        helper = self._helper
        timeouts = self._timeouts
        pipe = self._pipe()
        escalation = "cooperative"
        if helper.state is HelperState.EXITED:
            # It died and was reaped before the caller's cancel came: there is nothing
            # to cancel, only its tree's sweep to wait for.
            await self._wait_exit_after_eof()
            escalation = "exited"
        elif self.hurried or (pipe is not None and pipe.send_broken):
            escalation = await self.escalate(sigterm_first=not self.hurried)
        else:
            self._advance(HelperEvent.CANCEL_SENT)
            self._emit(
                "cancel_sent",
                f"cancel sent for job {generation} ({operation}): {reason}",
                generation=generation,
                operation=operation,
                reason=reason,
            )
            cancel = self._encode("cancel", generation, operation)
            try:
                with self._wait(timeouts.cancel_grace) as grace:
                    await self._send(cancel)
                    reply = await self._receive_reply(generation, operation)
                    self._advance(HelperEvent.REPLIED)
                if grace.cancelled_caught:
                    self._emit(
                        "grace_expired",
                        f"no answer to the cancel of job {generation} within "
                        f"{timeouts.cancel_grace:g} s",
                        generation=generation,
                        grace=timeouts.cancel_grace,
                    )
                    escalation = await self.escalate(sigterm_first=not self.hurried)
                elif reply.status != "cancelled":
                    # The job's own answer came after the cancel: its result is not
                    # taken (the caller was told it was stopped).
                    self._emit(
                        "late_reply_dropped",
                        f"the reply of job {generation} came after its {reason}; dropped",
                        generation=generation,
                        status=reply.status,
                        reason=reason,
                    )
            except PipeGone:
                await self.wait_exit_after_eof()
                escalation = "exited"
            except ProtocolError:
                escalation = await self.escalate(sigterm_first=False)
        if escalation == "cooperative" and parent_timeout:
            # design §3.6: a helper that missed the reply deadline is retired.
            await self.shutdown(generation)
        helper.last_escalation = escalation
        return escalation

    @enable_ki_protection
    async def shutdown(self, generation: int) -> str:
        async with self._exclusive():
            return await self._shutdown(generation)

    @enable_ki_protection
    async def _shutdown(self, generation: int) -> str:
        """Stop the helper politely, escalating if needed (design §3.8); never raises.

        Sends a shutdown frame and waits up to ``timeouts.shutdown`` seconds for the
        exit, then SIGTERM / SIGKILL as in design §3.5. Bounded by
        ``shutdown + terminate + kill`` seconds; shield it if it runs during
        cancellation.

        Args:
            generation: The helper's latest job generation (the shutdown frame's).

        Returns:
            ``"exited"`` (already gone), ``"shutdown"``, ``"sigterm"``, ``"sigkill"``,
            ``"quarantined"`` or ``"signal_failed"``.
        """
        helper = self._helper
        if helper.pid is None or helper.exited:
            return "exited"
        self._tree.remember()  # orphans of its tree are findable only while it lives
        if self.signal_failure is not None and helper.state is HelperState.QUARANTINED:
            return await self._retry_refused(self._timeouts.shutdown_bound)
        if helper.usable and not self.hurried:
            self._advance(HelperEvent.SHUTDOWN_SENT)
            with self._wait(self._timeouts.shutdown):
                with contextlib.suppress(PipeGone):
                    await self._send(self._encode("shutdown", generation, "shutdown"))
                await self._exited.wait()
            if helper.exited:
                return "shutdown"
        return await self.escalate(
            sigterm_first=helper.state is not HelperState.QUARANTINED and not self.hurried
        )

    @enable_ki_protection
    async def wait_exit_after_eof(self) -> None:
        async with self._exclusive():
            await self._wait_exit_after_eof()

    @enable_ki_protection
    async def _wait_exit_after_eof(self) -> None:
        """The pipe ended: give the process ``terminate`` seconds to exit, then escalate."""
        with self._wait(self._timeouts.terminate):
            await self._exited.wait()
        if not self._helper.exited:
            await self.escalate(sigterm_first=not self.hurried)

    @enable_ki_protection
    async def escalate(self, *, sigterm_first: bool) -> str:
        async with self._exclusive():
            return await self._escalate(sigterm_first=sigterm_first)

    @enable_ki_protection
    async def _escalate(self, *, sigterm_first: bool) -> str:
        """SIGTERM → terminate timeout → SIGKILL → kill timeout → quarantine (§3.5).

        Returns:
            ``"exited"``, ``"sigterm"``, ``"sigkill"``, ``"quarantined"`` or
            ``"signal_failed"`` (the helper itself could not be signalled).
        """
        helper, timeouts, exited = self._helper, self._timeouts, self._exited
        if helper.exited:
            return "exited"
        if helper.state is HelperState.QUARANTINED and self.signal_failure is not None:
            return "signal_failed"
        if self._reaper.reaped:
            # The leader is gone; the reaper is sweeping its tree (design §3.11).
            with trio.move_on_after(timeouts.kill):
                await exited.wait()
            return "exited" if helper.exited else "quarantined"
        if helper.state is HelperState.QUARANTINED:
            sigterm_first = False  # it was SIGKILLed already
        if sigterm_first and not self.hurried:
            if self._signal(signal.SIGTERM):
                self._advance(HelperEvent.SIGTERM_SENT)
                self._emit("sigterm_sent", "SIGTERM sent to its process tree")
                with self._wait(timeouts.terminate):
                    await exited.wait()
                if helper.exited:
                    return "sigterm"
            elif not self._tree.kills_by_cgroup:
                return "signal_failed"
            # else: cgroup.kill needs no permission to signal: the SIGKILL rung still works.
        if not self._signal(signal.SIGKILL):
            return "signal_failed"
        self._advance(HelperEvent.SIGKILL_SENT)
        if not self._kill_reported:
            self._emit("sigkill_sent", "SIGKILL sent to its process tree")
        # Not hurried: the kill timeout is what a second Ctrl-C still waits for.
        with trio.move_on_after(timeouts.kill):
            await exited.wait()
        if helper.exited:
            return "sigkill"
        if helper.state is not HelperState.QUARANTINED:
            self._advance(HelperEvent.KILL_TIMED_OUT)
            self._emit(
                "quarantined",
                f"not reaped within {timeouts.kill:g} s of SIGKILL; quarantined",
                kill=timeouts.kill,
            )
        return "quarantined"

    @enable_ki_protection
    async def _retry_refused(self, bound: float) -> str:
        """The helper's signal was refused: retry SIGTERM, then SIGKILL until it is
        delivered, for up to ``bound`` seconds (the shutdown's), reaping it if it dies.

        Permission can come back (the process changed its credentials back, a security
        module relented) without any event to wait on, so a refused SIGKILL is retried
        after a pause that backs off from 5 ms to 100 ms. A helper still alive at the
        end stays quarantined (the pool's close then reports it, design §3.8).

        Returns:
            ``"exited"``, ``"sigterm"``, ``"sigkill"``, ``"quarantined"`` (SIGKILL went
            out but it was not reaped) or ``"signal_failed"`` (refused to the end).
        """
        helper, timeouts, exited = self._helper, self._timeouts, self._exited
        assert self.signal_failure is not None
        _, code, refused = self.signal_failure
        self._emit(
            "signal_retried",
            f"its {refused} was refused ({errno_module.errorcode.get(code, str(code))}); "
            f"retrying SIGTERM and SIGKILL for up to {bound:g} s",
            signal=refused,
            errno=code,
            bound=bound,
        )
        killed = False
        with trio.move_on_after(bound):
            if not self.hurried and self._signal(signal.SIGTERM, report=False):
                self._emit("sigterm_sent", "SIGTERM sent to its process tree (retried)")
                with self._wait(timeouts.terminate):
                    await exited.wait()
                if helper.exited:
                    return "sigterm"
            pause = _RETRY_PAUSE
            while not helper.exited:
                if self._signal(signal.SIGKILL, report=False):
                    killed = True
                    self._advance(HelperEvent.SIGKILL_SENT)
                    self._emit("sigkill_sent", "SIGKILL sent to its process tree (retried)")
                    await exited.wait()
                    return "sigkill"
                # No event says the permission came back: look again after a pause.
                with trio.move_on_after(pause):
                    await exited.wait()
                pause = min(pause * 2, _RETRY_PAUSE_MAX)
            return "exited"
        if helper.exited:
            return "sigkill" if killed else "exited"
        if killed:
            self._advance(HelperEvent.KILL_TIMED_OUT)
            return "quarantined"
        return "signal_failed"

    def _signal(self, sig: signal.Signals, *, report: bool = True) -> bool:
        """Signal the helper's tree; False (and quarantined) if the helper itself
        could not be reached. A descendant that cannot be reached is reported when the
        tree is swept (design §3.11). ``report``: a first failure is an event and a
        log record; a retry's (:meth:`_retry_refused`) is not, the retry says so once."""
        helper = self._helper
        pid = helper.pid
        if pid is None or helper.exited:
            return True
        failures = self._tree.signal(sig)
        for failed_pid, code in failures:
            if failed_pid == pid and not self._reaper.reaped:
                if not report:
                    return False
                name = errno_module.errorcode.get(code, str(code))
                self.signal_failure = (pid, code, sig.name)
                if helper.state is not HelperState.QUARANTINED:
                    self._advance(HelperEvent.SIGNAL_FAILED)
                self._emit(
                    "signal_failed",
                    f"{sig.name} could not be delivered ({name}); quarantined until it is gone",
                    signal=sig.name,
                    errno=code,
                    error=name,
                )
                return False
        return True

    def _encode(self, kind: str, generation: int, operation: str) -> bytes:
        return encode_fields(
            kind=kind,
            session=self._helper.session,
            generation=generation,
            operation=operation,
            max_size=MIN_FRAME_LIMIT,
        )

    async def _send(self, frame: bytes) -> None:
        pipe = self._pipe()
        assert pipe is not None  # a helper with a job or a pid has its pipe
        await pipe.send(frame)
