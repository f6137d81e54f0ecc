"""One helper process incarnation, seen from the parent (design §3.2-3.8).

A :class:`HelperProcess` spawns one child in its own session (so its process group can
be signalled as a whole), performs the startup handshake, runs jobs one at a time, and
stops the child through the escalation ladder of design §3.5:

1. a cancel frame for the job's exact generation; a terminal reply within
   ``cancel_grace`` ends the job cooperatively and the helper stays usable;
2. otherwise SIGTERM to the process group, and up to ``terminate`` seconds to be reaped;
3. otherwise SIGKILL to the process group, and up to ``kill`` seconds to be reaped;
4. otherwise the incarnation is *quarantined*: no replacement may be spawned until a
   watcher task finally reaps it.

Every step is a ``move_on_after`` deadline; the steps that run while the caller is being
cancelled are shielded, so the ladder always completes, and it is bounded by
``cancel_grace + terminate + kill`` seconds. A watcher task (in the pool's nursery) waits
for the process to exit, reaps it, and sweeps its process group with SIGKILL so no
grandchild survives the helper.

While a job runs the helper may send ``progress`` frames before its reply; each is
fenced like the reply (design §2.3: a progress frame of another session, generation or
operation is a protocol violation and retires the helper by force) and handed to the
job's ``on_progress`` callback, on the event loop, in the job's task.

How the child starts without trio, attrs or cattrs: see ``actors._helpers._spec.BOOTSTRAP``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from typing import TYPE_CHECKING, Any, Final, NoReturn

import trio

from protocol.envelope import (
    MAX_GENERATION,
    decode_fenced,
    decode_positional,
    encode_fields,
    encode_positional,
    new_session,
)
from protocol.framing import DEFAULT_MAX_REQUEST

from .._core._lifecycle import HelperEvent, HelperState, new_helper_lifecycle
from ..errors import (
    HelperExitedError,
    HelperStartupError,
    ProtocolError,
    ProtocolViolation,
)
from ._outcomes import answer_error, exited_error, stopped_error
from ._pipe import HelperPipe, PipeGone
from ._spec import MIN_FRAME_LIMIT, HelperSnapshot

if TYPE_CHECKING:
    from collections.abc import Callable

    from protocol.envelope import Envelope

    from ._spec import HelperSpec, HelperTimeouts

    #: ``on_progress(fraction, note)``: a sync callable run on the event loop.
    ProgressCallback = Callable[[float, str | None], object]

__all__ = ["HelperProcess"]

_JOB_KINDS: Final = ("reply", "progress")
_log = logging.getLogger(__name__)


class HelperProcess:
    """One helper incarnation: a child process in its own session (design §3.3-3.8).

    Create it, then ``await start(nursery)``; run jobs with :meth:`run_job` (one at a
    time); end it with :meth:`shutdown`; call :meth:`discard` to release its pipes once
    it is of no further use. The pool (:mod:`actors._helpers._pool`) does all of this.

    Args:
        spec: What to run.
        timeouts: Deadlines, seconds on trio's clock.
        incarnation: This process's number within its pool slot (1, 2, ...).
        label: Name used in errors and snapshots.
        on_exit: Called (synchronously, from the watcher task) once the process is reaped.
    """

    def __init__(
        self,
        spec: HelperSpec,
        timeouts: HelperTimeouts,
        *,
        incarnation: int = 1,
        label: str | None = None,
        on_exit: Callable[[HelperProcess], None] | None = None,
    ) -> None:
        self.spec = spec
        self.timeouts = timeouts
        self.incarnation = incarnation
        self.label = label or f"{spec.name}.{incarnation}"
        self.session = new_session()
        #: The *ready* frame's payload (pid, handlers, heavy_modules, info), once ready.
        self.ready: Any = None
        self.jobs_run = 0
        #: The last ladder step a stopped job needed: ``cooperative``, ``exited``,
        #: ``sigterm``, ``sigkill`` or ``quarantined`` (None if no job was stopped).
        self.last_escalation: str | None = None
        self._on_exit = on_exit
        self._machine = new_helper_lifecycle(self.label)
        self._process: trio.Process | None = None
        self._pipe: HelperPipe | None = None
        self._generation = 0
        self._active: tuple[int, str] | None = None
        # The active job's scope (its deadline is the reply timeout) and whether
        # :meth:`cancel` (rather than the deadline) cancelled it.
        self._job_scope: trio.CancelScope | None = None
        self._cancel_requested = False
        self._exited = trio.Event()
        self._returncode: int | None = None
        # Shielded so that outside cancellation cannot stop the reaping; only
        # :meth:`abandon` cancels it (a quarantined process we finally give up on).
        self._watch_scope = trio.CancelScope(shield=True)

    # --- properties -----------------------------------------------------------------

    @property
    def state(self) -> HelperState:
        """Where this incarnation is (design §3)."""
        return self._machine.state

    @property
    def pid(self) -> int | None:
        """The child's pid (also its process group id), or None before the spawn."""
        return None if self._process is None else self._process.pid

    @property
    def exited(self) -> bool:
        """True once the process is reaped."""
        return self._exited.is_set()

    @property
    def quarantined(self) -> bool:
        """True if the kill timeout passed and the process is still not reaped."""
        return self._machine.state is HelperState.QUARANTINED

    @property
    def busy(self) -> bool:
        """True while a job is in progress (including its escalation ladder)."""
        return self._active is not None

    @property
    def usable(self) -> bool:
        """True if the helper is ready for a job."""
        return self._machine.state is HelperState.IDLE and not (
            self._pipe is not None and self._pipe.send_broken
        )

    def snapshot(self) -> HelperSnapshot:
        """Return this incarnation's liveness without waiting (design §3.8)."""
        state = self._machine.state
        return HelperSnapshot(
            name=self.label,
            incarnation=self.incarnation,
            pid=self.pid,
            state=state.value,
            alive=self._process is not None and not self.exited,
            active_generation=None if self._active is None else self._active[0],
            active_operation=None if self._active is None else self._active[1],
            unreaped=state
            in (HelperState.TERMINATING, HelperState.KILLING, HelperState.QUARANTINED),
            quarantined=state is HelperState.QUARANTINED,
            exit_code=self._returncode,
            jobs_run=self.jobs_run,
            ready=self.ready,
        )

    # --- start ----------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        """Spawn the child and wait for *ready* (design §3.3).

        The child starts in a new session; a watcher task that reaps it is started in
        ``nursery``. Cancellation kills the child (shielded, bounded by ``kill``).

        Args:
            nursery: Where the watcher task runs; it must outlive this helper.

        Raises:
            HelperStartupError: (code ``helper_startup_failed``) the program could not
                be executed, no *ready* came within ``timeouts.startup`` seconds, the
                *ready* frame was wrong, or the entry's ``on_startup`` failed (then
                ``details["record"]`` has its error record). The child was killed.
            HelperExitedError: (code ``helper_exited``) the child exited during
                startup; ``details`` has ``exit_code`` and ``signal``.
        """
        try:
            # The child reads its startup frame under the default request limit.
            frame = self._encode(
                "startup",
                0,
                "startup",
                DEFAULT_MAX_REQUEST,
                payload={
                    "options": self.spec.options,
                    "fault": self.spec.fault,
                    "max_request": self.spec.max_request,
                    "max_reply": self.spec.max_reply,
                },
            )
        except ProtocolError as exc:
            self._machine.process_event(HelperEvent.REAPED)
            self._exited.set()
            raise HelperStartupError(
                f"{self.label}: startup options do not fit a frame: {exc.message}",
                reason=exc.code,
            ) from None
        env = None if self.spec.env is None else {**os.environ, **self.spec.env}
        try:
            self._process = await trio.lowlevel.open_process(
                self.spec.command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                cwd=self.spec.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            self._machine.process_event(HelperEvent.REAPED)
            self._exited.set()
            raise HelperStartupError(f"{self.label}: could not start: {exc}") from None
        stdin, stdout = self._process.stdin, self._process.stdout
        assert isinstance(stdin, trio.lowlevel.FdStream)
        assert isinstance(stdout, trio.lowlevel.FdStream)
        self._pipe = HelperPipe(stdin, stdout, max_reply=self.spec.max_reply)
        nursery.start_soon(self._watch)
        done = False
        try:
            await self._handshake(frame)
            done = True
        finally:
            if not done and not self.exited:
                with trio.CancelScope(shield=True):
                    await self._escalate(sigterm_first=False)

    async def _handshake(self, frame: bytes) -> None:
        try:
            with trio.move_on_after(self.timeouts.startup) as deadline:
                await self._send(frame)
                ready = decode_fenced(
                    await self._receive(),
                    session=self.session,
                    kinds=("ready",),
                    generation=0,
                    operation="startup",
                )
        except PipeGone:
            await self._wait_exit_after_eof()
            raise self._exited_error("exited during startup") from None
        except ProtocolError as exc:  # malformed, or a ProtocolViolation of the fence
            raise HelperStartupError(
                f"{self.label}: bad ready frame: {exc.message}", reason=exc.code
            ) from None
        if deadline.cancelled_caught:
            raise HelperStartupError(
                f"{self.label}: no ready frame within {self.timeouts.startup:g} s",
                reason="startup_timeout",
            )
        payload = ready.payload if isinstance(ready.payload, dict) else {}
        if ready.status != "ok":
            assert ready.error is not None
            raise HelperStartupError(
                f"{self.label}: on_startup failed: {ready.error['message']}",
                reason="on_startup_failed",
                record=ready.error,
            )
        self.ready = payload
        self._machine.process_event(HelperEvent.READY)

    # --- jobs -----------------------------------------------------------------------

    async def run_job(
        self, operation: str, payload: Any = None, *, on_progress: ProgressCallback | None = None
    ) -> Any:
        """Run one job on this helper and return its result (design §3.4-3.6).

        Args:
            operation: The handler's name, 1..128 characters.
            payload: JSON-compatible arguments.
            on_progress: Called as ``on_progress(fraction, note)`` for each progress
                frame of this job (``fraction`` in ``[0, 1]``, ``note`` a str or None),
                synchronously on the event loop while the job runs; it must not block.
                An exception from it is logged and ignored (the job goes on).

        Returns:
            The handler's JSON result.

        Cancellation:
            If the caller is cancelled while the job runs, the escalation ladder of
            design §3.5 runs shielded (at most ``cancel_grace + terminate + kill``
            seconds) before ``trio.Cancelled`` propagates; :attr:`last_escalation` says
            which step ended it. After a cooperative end the helper is usable again.
            :meth:`cancel` runs the same ladder but ends the job with ``JobCancelled``.

        Raises:
            HelperJobFailed: (the remote record's code) the handler failed; the helper
                is still usable.
            JobCancelled: (code ``cancelled``) :meth:`cancel` cancelled the job and the
                helper stopped without SIGKILL (``details["escalation"]``), or the
                helper answered ``cancelled`` without being asked.
            ReplyTimeout: (code ``reply_timeout``) no reply within ``timeouts.reply``
                seconds; the helper was stopped (cooperatively or by SIGTERM) and
                retired. A later reply is never accepted.
            ForcedTermination: (code ``forced_termination``) as ``ReplyTimeout`` or
                ``JobCancelled``, but SIGKILL was needed (``details["escalation"]`` is
                ``sigkill`` or ``quarantined``).
            ProtocolViolation: (code ``protocol_violation``) the reply or a progress
                frame was malformed or failed the envelope checks (design §2.3); the
                helper was killed.
            FrameTooLarge: (code ``frame_too_large``) the reply declared more than
                ``spec.max_reply`` bytes, or the job frame is over ``spec.max_request``
                bytes (then nothing was sent and the helper is still usable).
            ProtocolError: (code ``protocol_error``) ``payload`` is not
                JSON-compatible; nothing was sent.
            HelperExitedError: (code ``helper_exited``) the helper exited or closed its
                pipe; ``details`` has ``exit_code`` and ``signal``.
            ValueError: ``operation`` is not a str of 1..128 characters; nothing was sent.
        """
        if not self.usable:
            raise RuntimeError(f"{self.label} is {self.state.value}, not ready for a job")
        # A cancel point (cancelled here: the job was never sent). The schedule point
        # comes with the reply: the wait for it, or a shielded checkpoint when it is
        # already there. No extra pass of the run loop per job.
        await trio.lowlevel.checkpoint_if_cancelled()
        generation = self._generation + 1
        if generation > MAX_GENERATION:  # pragma: no cover (2**53 jobs)
            raise RuntimeError(f"{self.label}: generations exhausted")
        frame = encode_positional(
            "job", self.session, generation, operation, None, payload, None, self.spec.max_request
        )
        deadline = trio.current_time() + self.timeouts.reply
        self._generation = generation
        self._active = (generation, operation)
        self._machine.process_event(HelperEvent.JOB_SENT)
        self.jobs_run += 1
        self.last_escalation = None
        self._cancel_requested = False
        pipe = self._pipe
        assert pipe is not None
        try:
            # No checkpoint before the write: once JOB_SENT, the frame is out.
            written = pipe.write_nowait(frame)
            reply = None
            if written == len(frame):
                # A helper on this CPU may have answered already: then nothing waits,
                # so no deadline applies (and no cancel scope is needed).
                reply = self._reply_nowait(generation, operation, on_progress)
            if reply is None:
                # design §3.6: every wait for the reply is inside the deadline's scope.
                scope = self._job_scope = trio.CancelScope(deadline=deadline)
                if self._cancel_requested:  # cancel() came from an early progress report
                    scope.cancel()
                with scope:
                    if written < len(frame):
                        await pipe.send_rest(frame, written)
                    reply = await self._receive_reply(
                        generation, operation, on_progress, known_empty=written == len(frame)
                    )
                if scope.cancelled_caught:
                    await self._job_stopped(generation, operation)
            else:
                # The schedule point; not a cancel point: the reply is in.
                await trio.lowlevel.cancel_shielded_checkpoint()
                if self._cancel_requested:
                    # cancel() said True (from a progress report, or another task at
                    # the schedule point): keep its word, as the waiting path does.
                    self._machine.process_event(HelperEvent.REPLIED)
                    self.last_escalation = "cooperative"
                    raise stopped_error(
                        self.label,
                        generation,
                        operation,
                        escalation="cooperative",
                        cancelled=True,
                        reply_timeout=self.timeouts.reply,
                    )
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await self._stop_job(parent_timeout=False)
            raise
        except PipeGone:
            with trio.CancelScope(shield=True):
                await self._wait_exit_after_eof()
            raise self._exited_error(f"exited during job {generation} ({operation})") from None
        except ProtocolError as exc:
            with trio.CancelScope(shield=True):
                await self._escalate(sigterm_first=False)
            if isinstance(exc, ProtocolViolation) or exc.code == "frame_too_large":
                raise
            raise ProtocolViolation(
                f"{self.label}: malformed frame for job {generation}: {exc.message}",
                **exc.details,
            ) from None
        finally:
            self._active = None
            self._job_scope = None
        assert reply is not None  # else the scope caught a cancel and _job_stopped raised
        self._machine.process_event(HelperEvent.REPLIED)
        if reply.status == "ok":
            return reply.payload
        raise answer_error(self.label, reply)

    def cancel(self) -> bool:
        """Cancel the running job; never waits (design §3.5).

        The job's own task runs the escalation ladder, then :meth:`run_job` raises
        :class:`~actors.errors.JobCancelled` (or ``ForcedTermination``).

        Returns:
            True if a job was running (and not already being stopped).
        """
        scope = self._job_scope
        if self._active is None or self._cancel_requested:
            return False
        if scope is not None and scope.cancel_called:  # the reply deadline already fired
            return False
        self._cancel_requested = True
        if scope is not None:
            scope.cancel()
        # Else the job is between its write and its wait (or at the schedule point
        # after a reply already there): run_job sees the flag there.
        return True

    async def _job_stopped(self, generation: int, operation: str) -> NoReturn:
        """The job's scope was cancelled: run the ladder, raise what ended the job."""
        cancelled = self._cancel_requested
        with trio.CancelScope(shield=True):
            escalation = await self._stop_job(parent_timeout=not cancelled)
        raise stopped_error(
            self.label,
            generation,
            operation,
            escalation=escalation,
            cancelled=cancelled,
            reply_timeout=self.timeouts.reply,
        )

    async def _receive_reply(
        self,
        generation: int,
        operation: str,
        on_progress: ProgressCallback | None,
        *,
        known_empty: bool = False,
    ) -> Envelope:
        """Return the job's reply; hand its progress frames to ``on_progress`` meanwhile.

        Every frame is fenced (design §2.3): a reply or progress frame of another
        session, generation or operation raises ``ProtocolViolation``.
        ``known_empty``: the pipe was just found empty (wait without reading first).
        """
        assert self._pipe is not None
        while True:
            body = await self._pipe.receive(known_empty=known_empty)
            known_empty = False
            reply = self._take(body, generation, operation, on_progress)
            if reply is not None:
                return reply

    def _reply_nowait(
        self, generation: int, operation: str, on_progress: ProgressCallback | None
    ) -> Envelope | None:
        """The job's reply if it is already here (fenced; progress handed on), else None."""
        assert self._pipe is not None
        while (body := self._pipe.receive_nowait()) is not None:
            reply = self._take(body, generation, operation, on_progress)
            if reply is not None:
                return reply
        return None

    def _take(
        self, body: bytes, generation: int, operation: str, on_progress: ProgressCallback | None
    ) -> Envelope | None:
        """Fence one frame of the job; return it if it is the reply, else hand its
        progress to ``on_progress`` (an exception from which is logged and ignored)."""
        env = decode_positional(body, self.session, _JOB_KINDS, generation, operation)
        if env.kind == "reply":
            return env
        if on_progress is not None:
            try:
                on_progress(env.payload["fraction"], env.payload.get("note"))
            except Exception:
                _log.exception("%s: on_progress raised; ignored", self.label)
        return None

    async def _stop_job(self, *, parent_timeout: bool) -> str:
        """Run the ladder of design §3.5 for the active job; return the last step used.

        Never raises (but ``InvalidTransition`` on a bug); must run shielded.
        """
        assert self._active is not None
        generation, operation = self._active
        escalation = "cooperative"
        if self._pipe is not None and self._pipe.send_broken:
            escalation = await self._escalate(sigterm_first=True)
        else:
            self._machine.process_event(HelperEvent.CANCEL_SENT)
            cancel = self._encode("cancel", generation, operation, MIN_FRAME_LIMIT)
            try:
                with trio.move_on_after(self.timeouts.cancel_grace) as grace:
                    await self._send(cancel)
                    await self._receive_reply(generation, operation, None)
                    self._machine.process_event(HelperEvent.REPLIED)
                if grace.cancelled_caught:
                    escalation = await self._escalate(sigterm_first=True)
            except PipeGone:
                await self._wait_exit_after_eof()
                escalation = "exited"
            except ProtocolError:
                escalation = await self._escalate(sigterm_first=False)
        if escalation == "cooperative" and parent_timeout:
            # design §3.6: a helper that missed the reply deadline is retired.
            await self.shutdown()
        self.last_escalation = escalation
        return escalation

    # --- stopping -------------------------------------------------------------------

    async def shutdown(self) -> str:
        """Stop the helper politely, escalating if needed (design §3.8); never raises.

        Sends a shutdown frame and waits up to ``timeouts.shutdown`` seconds for the
        exit, then SIGTERM / SIGKILL as in design §3.5. Bounded by
        ``shutdown + terminate + kill`` seconds; shield it if it runs during
        cancellation.

        Returns:
            ``"exited"`` (already gone), ``"shutdown"``, ``"sigterm"``, ``"sigkill"`` or
            ``"quarantined"``.
        """
        if self._process is None or self.exited:
            return "exited"
        if self.usable:
            self._machine.process_event(HelperEvent.SHUTDOWN_SENT)
            with trio.move_on_after(self.timeouts.shutdown):
                with contextlib.suppress(PipeGone):
                    await self._send(
                        self._encode("shutdown", self._generation, "shutdown", MIN_FRAME_LIMIT)
                    )
                await self._exited.wait()
            if self.exited:
                return "shutdown"
        return await self._escalate(sigterm_first=self.state is not HelperState.QUARANTINED)

    async def _wait_exit_after_eof(self) -> None:
        """The pipe ended: give the process ``terminate`` seconds to exit, then escalate."""
        with trio.move_on_after(self.timeouts.terminate):
            await self._exited.wait()
        if not self.exited:
            await self._escalate(sigterm_first=True)

    async def _escalate(self, *, sigterm_first: bool) -> str:
        """SIGTERM → terminate timeout → SIGKILL → kill timeout → quarantine (§3.5)."""
        if self.exited:
            return "exited"
        if sigterm_first:
            self._signal_group(signal.SIGTERM)
            self._machine.process_event(HelperEvent.SIGTERM_SENT)
            with trio.move_on_after(self.timeouts.terminate):
                await self._exited.wait()
            if self.exited:
                return "sigterm"
        self._signal_group(signal.SIGKILL)
        self._machine.process_event(HelperEvent.SIGKILL_SENT)
        with trio.move_on_after(self.timeouts.kill):
            await self._exited.wait()
        if self.exited:
            return "sigkill"
        self._machine.process_event(HelperEvent.KILL_TIMED_OUT)
        return "quarantined"

    def abandon(self) -> None:
        """Stop waiting to reap a quarantined process (the pool's close gives up)."""
        self._watch_scope.cancel()

    def discard(self) -> None:
        """Close the parent's ends of the pipes; call once the helper is of no use."""
        if self._process is not None:
            for stream in (self._process.stdin, self._process.stdout):
                if stream is not None:
                    # On POSIX these are trio FdStreams, whose close() is sync.
                    stream.close()  # type: ignore[union-attr]

    def _signal_group(self, sig: signal.Signals) -> None:
        if self._process is None or self.exited:
            return
        _killpg(self._process.pid, sig)

    async def _watch(self) -> None:
        """Wait for the process to exit, reap it, sweep its group (runs in the nursery)."""
        assert self._process is not None
        with self._watch_scope:
            await self._process.wait()
        if self._watch_scope.cancelled_caught:
            return
        self._returncode = self._process.returncode
        # The leader is reaped; anything left in its group (a grandchild that ignored
        # SIGTERM, or that the helper never stopped) goes now. The group id cannot have
        # been reused while members remain.
        _killpg(self._process.pid, signal.SIGKILL)
        self._machine.process_event(HelperEvent.REAPED)
        self._exited.set()
        if self._on_exit is not None:
            self._on_exit(self)

    # --- I/O ------------------------------------------------------------------------

    def _encode(
        self, kind: str, generation: int, operation: str, max_size: int, **fields: Any
    ) -> bytes:
        return encode_fields(
            kind=kind,
            session=self.session,
            generation=generation,
            operation=operation,
            max_size=max_size,
            **fields,
        )

    async def _send(self, frame: bytes, *, checkpoint: bool = True) -> None:
        assert self._pipe is not None
        await self._pipe.send(frame, checkpoint=checkpoint)

    async def _receive(self) -> bytes:
        assert self._pipe is not None
        return await self._pipe.receive()

    def _exited_error(self, what: str) -> HelperExitedError:
        return exited_error(f"{self.label}: {what}", self._returncode, self.state.value)

    def __repr__(self) -> str:
        return f"<HelperProcess {self.label} pid={self.pid} {self.state.value}>"


def _killpg(pgid: int, sig: signal.Signals) -> None:
    """Signal a process group; a group that no longer exists is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
