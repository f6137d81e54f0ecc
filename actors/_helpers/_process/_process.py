"""One helper process incarnation, seen from the parent (design §3.2-3.8).

A :class:`HelperProcess` spawns one child in its own session inside a process-tree
containment (:mod:`~actors._helpers._process._containment`), performs the startup handshake, runs
jobs one at a time, and is stopped by its :class:`~actors._helpers._process._ladder.Ladder`
(design §3.5); its :class:`~actors._helpers._process._reaper.Reaper` reaps it and sweeps its
tree, its :class:`~actors._helpers._process._stderr.StderrTail` forwards its stderr to logging.
Every step is a :class:`~actors.PoolEvent` (design §3.10). A job's
``progress`` frames are fenced like its reply (design §2.3), handed to its
``on_progress`` in the job's task, and reset its optional ``stall`` timeout (§3.12).
How the child starts without trio, attrs or cattrs: see ``_spec.BOOTSTRAP``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
from typing import TYPE_CHECKING, Any, Final, NoReturn

import trio
from trio.lowlevel import enable_ki_protection

from protocol import Blob
from protocol.envelope import MAX_GENERATION, decode_positional, encode_positional, new_session

from ..._core import HelperEvent, HelperState, new_helper_lifecycle
from ...errors import (
    ActorError,
    ProtocolError,
    ProtocolViolation,
)
from .._events import LOGGER, PoolEvents
from .._interrupt import second_interrupt
from ._containment import ProcessTree, available_mode
from ._ladder import Ladder
from ._outcomes import answer_error, stopped_error
from ._pipe import HelperPipe, PipeGone, ReceiveStopped
from ._reaper import Reaper
from ._remote import RemoteLink
from ._spec import HelperSnapshot
from ._startup import Startup

if TYPE_CHECKING:
    from collections.abc import Callable

    from protocol.envelope import Envelope

    from ._spec import HelperSpec, HelperTimeouts
    from ._stderr import StderrTail
    from ._zygote import ChildProcess, Zygote

    #: ``on_progress(fraction, note)``, or ``on_progress(fraction, note, data)`` for a
    #: report with bytes (design §2.3): a sync callable run on the event loop.
    ProgressCallback = Callable[..., object]

__all__ = ["HelperProcess"]

_JOB_KINDS: Final = ("reply", "progress")
_IDLE: Final = HelperState.IDLE
_JOB_SENT: Final = HelperEvent.JOB_SENT
_REPLIED: Final = HelperEvent.REPLIED
_DEBUG: Final = logging.DEBUG
_INF: Final = math.inf
_ON_REQUEST: Final = frozenset({"caller_cancelled", "cancelled", "deadline"})
_checkpoint_if_cancelled: Final = trio.lowlevel.checkpoint_if_cancelled


class HelperProcess:
    """One helper incarnation: a child process in its own session (design §3.3-3.8).

    Create it, then ``await start(nursery)``; run jobs with :meth:`run_job` (one at a
    time); end it with :meth:`shutdown`; call :meth:`discard` to release its pipes once
    it is of no further use. The pool (:mod:`actors._helpers._pool._pool`) does all of this.

    Args:
        spec: What to run.
        timeouts: Deadlines, seconds on trio's clock.
        incarnation: This process's number within its pool slot (1, 2, ...).
        label: Name used in errors, snapshots, events and log records.
        slot: The pool slot it serves (for events), or None.
        events: Where its events go (default: a hub of its own, so only logging).
        containment: ``cgroup``, ``tree`` or ``group`` (design §3.11); by default what
            the spec's ``containment`` resolves to here.
        replaces: True if it replaces an earlier incarnation of its slot (a restart).
        on_exit: Called (synchronously, from the reaper task) once it has exited.
        on_hurry: What a second Ctrl-C during this helper's own ladder (a job whose
            caller got the first ``KeyboardInterrupt``) calls to skip every grace
            (design §3.13): the pool's ``hurry``; by default this helper's :meth:`hurry`.
        zygote: The pool's fork server: the helper is forked from it while it is
            available (design §3.17); None (the default): spawned.
    """

    def __init__(
        self,
        spec: HelperSpec,
        timeouts: HelperTimeouts,
        *,
        incarnation: int = 1,
        label: str | None = None,
        slot: int | None = None,
        events: PoolEvents | None = None,
        containment: str | None = None,
        replaces: bool = False,
        on_exit: Callable[[HelperProcess], None] | None = None,
        on_hurry: Callable[[], None] | None = None,
        zygote: Zygote | None = None,
    ) -> None:
        self.spec = spec
        self.timeouts = timeouts
        self.incarnation = incarnation
        self.label = label or f"{spec.name}.{incarnation}"
        self.slot = slot
        self.session = new_session()
        self._max_request = spec.max_request
        #: The *ready* frame's payload (pid, handlers, heavy_modules, info), once ready.
        self.ready: Any = None
        self.jobs_run = 0
        #: The last ladder step a stopped job needed: ``cooperative``, ``exited``,
        #: ``sigterm``, ``sigkill``, ``quarantined`` or ``signal_failed`` (None if no
        #: job was stopped).
        self.last_escalation: str | None = None
        #: The pool's own ladder ended this incarnation for a caller's cancel or
        #: deadline: its replacement is not counted as a restart (design §3.7).
        self.stopped_on_request = False
        self._events = events if events is not None else PoolEvents(spec.name)
        self._machine = new_helper_lifecycle(self.label)
        self.idle = False
        """True exactly while the state is ``IDLE`` (read on the job path, where a
        property costs too much); kept by :meth:`_advance`."""
        self._process: ChildProcess | None = None
        self._pipe: HelperPipe | None = None
        self._stderr: StderrTail | None = None
        self._tree: ProcessTree
        if spec.host is None:
            mode = containment or available_mode(spec.containment)
            self._tree = ProcessTree(mode, self.session)
        else:  # on another host, through ssh and a warden (design §3.16)
            self._tree = RemoteLink(spec, timeouts, self.session, self._emit)
        self._reaper = Reaper(
            self,
            tree=self._tree,
            advance=self._advance,
            emit=self._emit,
            on_exit=None if on_exit is None else lambda: on_exit(self),
        )
        self._ladder = Ladder(
            self,
            tree=self._tree,
            reaper=self._reaper,
            pipe=lambda: self._pipe,
            receive_reply=self._receive_reply,
            advance=self._advance,
            emit=self._emit,
        )
        self._startup = Startup(
            self,
            pool=self._events.name,
            replaces=replaces,
            tree=self._tree,
            reaper=self._reaper,
            ladder=self._ladder,
            on_spawn=self._spawned,
            advance=self._advance,
            emit=self._emit,
            zygote=zygote,
        )
        self._generation = 0
        self._active: tuple[int, str] | None = None
        # The active job's wait ends at the earliest of the reply timeout, the caller's
        # deadline and the stall timeout: the pipe's reader is its timer (no cancel
        # scope per job). ``_waiting``: the job is parked in the pipe's receive;
        # ``_stopping``: its deadline fired; ``_cancel_requested``: cancel() was called.
        # A scope exists only while the rest of a job frame too big for the pipe is
        # written (``_job_scope``).
        self._job_scope: trio.CancelScope | None = None
        self._cancel_requested = self._waiting = self._stopping = False
        self._nursery: trio.Nursery | None = None
        self._reply_at = self._deadline_at = self._stall_at = _INF
        self._stall: float | None = None
        self._job_done: trio.Event | None = None
        self._on_hurry = self.hurry if on_hurry is None else on_hurry

    # --- properties -----------------------------------------------------------------

    @property
    def state(self) -> HelperState:
        """Where this incarnation is (design §3)."""
        return self._machine.state

    @property
    def pid(self) -> int | None:
        """The child's pid (also its process group and session id), or None before the
        spawn."""
        return None if self._process is None else self._process.pid

    @property
    def containment(self) -> str:
        """How its process tree is held: ``cgroup``, ``tree`` or ``group`` (§3.11)."""
        return self._tree.mode

    @property
    def exited(self) -> bool:
        """True once the process is reaped and nothing of its tree is left (§3.11)."""
        return self._reaper.exited.is_set()

    @property
    def escaped(self) -> list[int]:
        """Pids of its tree that outlived the sweep after its exit (design §3.11)."""
        return self._reaper.escaped

    @property
    def quarantined(self) -> bool:
        """True while it cannot be replaced: not reaped within the kill timeout, a
        signal could not be delivered, or part of its tree outlived the sweep."""
        return self._machine.state is HelperState.QUARANTINED

    @property
    def busy(self) -> bool:
        """True while a job is in progress (including its escalation ladder)."""
        return self._active is not None

    @property
    def usable(self) -> bool:
        """True if the helper is ready for a job."""
        return self.idle and not (self._pipe is not None and self._pipe.send_broken)

    def _advance(self, event: HelperEvent) -> HelperState:
        """Apply ``event`` to the lifecycle (design §3) and keep :attr:`idle` true to it."""
        state = self._machine.process_event(event)
        self.idle = state is _IDLE
        return state

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
            exit_code=self._reaper.returncode,
            jobs_run=self.jobs_run,
            ready=self.ready,
        )

    def _emit(self, kind: str, text: str, *, level: int | None = None, **details: Any) -> None:
        pid = self.pid
        self._events.emit(
            kind,
            f"{self.label} (pid {pid}): {text}",
            level=level,
            slot=self.slot,
            helper=self.label,
            incarnation=self.incarnation,
            pid=pid,
            **details,
        )

    # --- start ----------------------------------------------------------------------

    @enable_ki_protection
    async def start(self, nursery: trio.Nursery) -> None:
        """Spawn the child and wait for *ready* (design §3.3).

        The child starts in a new session, inside its containment; a reaper task and a
        stderr reader are started in ``nursery``. Cancellation kills the child
        (shielded, bounded by ``kill``).

        Args:
            nursery: Where the reaper and the stderr reader run; it must outlive this
                helper.

        Raises:
            HelperStartupFailed: (code ``helper_startup_failed``) the program could not
                be executed, no *ready* came within ``timeouts.startup`` seconds, the
                first frame was not a good *ready*, or the entry's ``on_startup``
                failed (then ``details["record"]`` has its error record). The child
                was killed. ``details["reason"]`` says which.
            HelperExited: (code ``helper_exited``) the child exited during
                startup; ``details`` has ``exit_code``, ``signal`` and ``stderr`` (the
                last 4 KiB it wrote).
        """
        self._nursery = nursery
        await self._startup.run(nursery)

    def _spawned(self, process: ChildProcess, pipe: HelperPipe, stderr: StderrTail) -> None:
        self._process, self._pipe, self._stderr = process, pipe, stderr
        if not isinstance(self._tree, RemoteLink):  # a remote link runs its own reader
            assert self._nursery is not None
            pipe.start_reader(self._nursery)
        if self.spec.stderr_is_activity:
            stderr.on_activity = self._push_stall  # design §3.12: stderr counts as alive

    # --- jobs -----------------------------------------------------------------------

    @enable_ki_protection
    async def run_job(
        self,
        operation: str,
        payload: Any = None,
        on_progress: ProgressCallback | None = None,
        deadline: float = _INF,
        stall: float | None = None,
    ) -> Any:
        """Run one job on this helper and return its result (design §3.4-3.6, §3.12).

        Args:
            operation: The handler's name, 1..128 characters.
            payload: JSON-compatible arguments.
            on_progress: Called as ``on_progress(fraction, note)`` for each progress
                frame of this job (``fraction`` in ``[0, 1]``, ``note`` a str or None),
                synchronously on the event loop while the job runs; it must not block.
                An exception from it is logged and ignored (the job goes on).
            deadline: The caller's absolute deadline, seconds on trio's clock (none by
                default): past it the job is stopped like a cancelled one.
            stall: Seconds the job may go without a progress report (none by default);
                past it the job is stopped (design §3.12). Stderr output counts too
                when ``spec.stderr_is_activity`` is set.

        Returns:
            The handler's JSON result.

        Cancellation:
            If the caller is cancelled while the job runs, the escalation ladder of
            design §3.5 runs shielded (at most ``cancel_grace + terminate + kill``
            seconds) before ``trio.Cancelled`` propagates; :attr:`last_escalation` says
            which step ended it. After a cooperative end the helper is usable again.
            :meth:`cancel` runs the same ladder but ends the job with ``JobCancelled``.

        Raises:
            JobFailed: (the remote record's code) the handler failed; the helper
                is still usable.
            JobCancelled: (code ``job_cancelled``) :meth:`cancel` cancelled the job and the
                helper stopped without SIGKILL (``details["escalation"]``), or the
                helper answered ``cancelled`` without being asked.
            ReplyTimeout: (code ``reply_timeout``) no reply within ``timeouts.reply``
                seconds; the helper was stopped (cooperatively or by SIGTERM) and
                retired. A later reply is never accepted.
            JobStalled: (code ``job_stalled``) no progress report within ``stall`` seconds;
                the helper was stopped through the ladder.
            DeadlineExceeded: (code ``deadline_exceeded``) ``deadline`` passed; the
                helper was stopped through the ladder.
            ForcedTermination: (code ``forced_termination``) as ``ReplyTimeout`` or
                ``JobCancelled``, but SIGKILL was needed (``details["escalation"]`` is
                ``sigkill`` or ``quarantined``).
            SignalFailed: (code ``signal_failed``) a signal of the ladder could not be
                delivered; ``details`` has ``pid``, ``signal``, ``errno``; the helper is
                quarantined until it is gone.
            ProtocolViolation: (code ``protocol_violation``) the reply or a progress
                frame was malformed or failed the envelope checks (design §2.3); the
                helper was killed.
            FrameTooLarge: (code ``frame_too_large``) the reply declared more than
                ``spec.max_reply`` bytes, or the job frame is over ``spec.max_request``
                bytes (then nothing was sent and the helper is still usable).
            ProtocolError: (code ``protocol_error``) ``payload`` is not
                JSON-compatible; nothing was sent.
            HelperExited: (code ``helper_exited``) the helper exited or closed its
                pipe; ``details`` has ``exit_code``, ``signal`` and ``escaped``.
            ValueError: ``operation`` is not a str of 1..128 characters; nothing was sent.
        """
        pipe = self._pipe
        # Idle implies a pipe that carries whole frames: a job whose frame a cancel
        # cut in two ended by force (design §3.5), never back in IDLE.
        if not self.idle:
            raise RuntimeError(f"{self.label} is {self.state.value}, not ready for a job")
        assert pipe is not None  # idle: started
        # A cancel point (cancelled here: the job was never sent). The schedule point
        # comes with the reply: the wait for it, or a shielded checkpoint when it is
        # already there. No extra pass of the run loop per job.
        await _checkpoint_if_cancelled()
        generation = self._generation + 1
        if generation > MAX_GENERATION:  # pragma: no cover (2**53 jobs)
            raise RuntimeError(f"{self.label}: generations exhausted")
        session = self.session
        frame = encode_positional(
            "job", session, generation, operation, None, payload, None, self._max_request
        )
        self._generation = generation
        self._active = (generation, operation)
        machine = self._machine
        machine.process_event(_JOB_SENT)  # BUSY (what _advance does, inlined)
        self.idle = False
        self.jobs_run += 1
        self.last_escalation = None
        self._cancel_requested = self._stopping = False
        self._stall = stall
        if self._events.jobs_watched or LOGGER.isEnabledFor(_DEBUG):
            self._emit("job_started", f"job {generation} ({operation})", generation=generation)
        try:
            # No checkpoint before the write: once JOB_SENT, the frame is out. A helper
            # on this CPU may have answered already: then nothing waits, so no deadline
            # applies.
            written = pipe.write_nowait(frame)
            sent = written == len(frame)  # and then, if no reply, the pipe is known empty
            reply = self._reply_nowait(generation, operation, on_progress) if sent else None
            if reply is None:
                # design §3.6: every wait for the reply is bounded, by the earliest of
                # the three deadlines; the pipe's reader is the timer that ends it.
                now = trio.current_time()
                self._reply_at = now + self.timeouts.reply
                self._deadline_at = deadline
                self._stall_at = _INF if stall is None else now + stall
                try:
                    if not sent:
                        await self._send_rest(pipe, frame, written)
                    known_empty = sent
                    while reply is None:  # _receive_reply, inlined: one coroutine less
                        if self._cancel_requested:  # from a progress report
                            raise ReceiveStopped(expired=False)
                        self._waiting = True
                        try:
                            body = await pipe.receive(
                                known_empty=known_empty,
                                until=min(self._reply_at, self._deadline_at, self._stall_at),
                            )
                        finally:
                            self._waiting = known_empty = False
                        env = decode_positional(body, session, _JOB_KINDS, generation, operation)
                        if env.kind == "reply":
                            reply = env
                        else:
                            self._progress(env, on_progress)
                except ReceiveStopped:
                    self._stopping = True
                    await self._job_stopped(generation, operation)
            else:
                # The schedule point; not a cancel point: the reply is in.
                await trio.lowlevel.cancel_shielded_checkpoint()
            if self._cancel_requested:
                # cancel() said True (from a progress report, or another task while the
                # reply was on its way): keep its word.
                self._advance(HelperEvent.REPLIED)
                self.last_escalation = "cooperative"
                raise self._stopped_error(generation, operation, "cooperative", "cancelled")
        except (trio.Cancelled, KeyboardInterrupt) as exc:  # Ctrl-C in the task that waits
            with trio.CancelScope(shield=True):
                escalation = await self._stop_for_caller(
                    generation, operation, interrupted=isinstance(exc, KeyboardInterrupt)
                )
            self._note_stop("caller_cancelled", escalation)
            raise
        except PipeGone:
            with trio.CancelScope(shield=True):
                await self._ladder.wait_exit_after_eof()
            what = f"exited during job {generation} ({operation})"
            raise self._reaper.exited_error(what) from None
        except ProtocolError as exc:
            with trio.CancelScope(shield=True):
                await self._ladder.escalate(sigterm_first=False)
            if isinstance(exc, ProtocolViolation) or exc.code == "frame_too_large":
                raise
            raise ProtocolViolation(
                f"{self.label}: malformed frame for job {generation}: {exc.message}",
                **exc.details,
            ) from None
        finally:
            self._active = self._job_scope = None
            if self._job_done is not None:
                self._job_done.set()
                self._job_done = None
        # (reply is set: else the wait was stopped and _job_stopped raised)
        self.idle = machine.process_event(_REPLIED) is _IDLE
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
        if self._active is None or self._cancel_requested or self._stopping:
            return False
        scope = self._job_scope
        if scope is not None:  # writing the rest of its frame
            if scope.cancel_called:  # a deadline already fired
                return False
            scope.cancel()
        elif (
            self._waiting
            and self._pipe is not None
            and not self._pipe.interrupt()
            # Woken but not yet run: by its deadline (that ends it) or by a frame.
            and trio.current_time() >= self._pipe.until
        ):
            return False
        # Else the job is between its write and its wait, running a progress report, or
        # has its reply in hand: run_job sees the flag there.
        self._cancel_requested = True
        return True

    @enable_ki_protection
    async def _stop_for_caller(self, generation: int, operation: str, *, interrupted: bool) -> str:
        """The ladder for a caller that gave up; return its last step (shield it).

        After a Ctrl-C (``interrupted``) the ladder is the graceful stop it began, run
        before any pool close could listen for a second one: so it listens itself, and a
        second Ctrl-C skips every grace of every helper (design §3.13).
        """
        if not interrupted:
            return await self._ladder.stop_job(generation, operation, reason="caller_cancelled")
        # The KeyboardInterrupt being handled is re-raised: a second one adds nothing.
        with contextlib.suppress(KeyboardInterrupt):
            async with second_interrupt(self._on_hurry):
                return await self._ladder.stop_job(generation, operation, reason="caller_cancelled")
        return self.last_escalation or "exited"

    @enable_ki_protection
    async def wait_job_done(self) -> None:
        """Wait until no job runs on this helper (its ladder included)."""
        while self._active is not None:
            if self._job_done is None:  # one event for every waiter
                self._job_done = trio.Event()
            await self._job_done.wait()
        await trio.lowlevel.checkpoint()

    @enable_ki_protection
    async def _job_stopped(self, generation: int, operation: str) -> NoReturn:
        """The job's scope was cancelled: run the ladder, raise what ended the job."""
        if self._cancel_requested:
            cause = "cancelled"
        else:
            # The scope's deadline was the earliest of the three: which one was it?
            fired = min(self._reply_at, self._deadline_at, self._stall_at)
            if fired == self._stall_at and self._stall is not None:
                cause = "stalled"
            elif fired == self._deadline_at and self._deadline_at < self._reply_at:
                cause = "deadline"
            else:
                cause = "reply_timeout"
        with trio.CancelScope(shield=True):
            escalation = await self._ladder.stop_job(
                generation, operation, parent_timeout=cause == "reply_timeout", reason=cause
            )
        self._note_stop(cause, escalation)
        raise self._stopped_error(generation, operation, escalation, cause)

    def _note_stop(self, cause: str, escalation: str) -> None:
        # design §3.7: a helper the ladder signalled because a caller gave up (its
        # cancel or deadline) did not crash; one that missed its reply or stall
        # deadline did hang, and its replacement counts as a restart.
        if cause in _ON_REQUEST and escalation in ("sigterm", "sigkill"):
            self.stopped_on_request = True

    def _stopped_error(
        self, generation: int, operation: str, escalation: str, cause: str
    ) -> ActorError:
        failure = self._ladder.signal_failure if escalation == "signal_failed" else None
        return stopped_error(
            self.label,
            generation,
            operation,
            escalation=escalation,
            cause=cause,
            reply_timeout=self.timeouts.reply,
            stall=self._stall,
            signal_failure=failure,
        )

    @enable_ki_protection
    async def _receive_reply(
        self, generation: int, operation: str, on_progress: ProgressCallback | None = None
    ) -> Envelope:
        """Return the job's reply; hand its progress frames to ``on_progress`` meanwhile.

        Every frame is fenced (design §2.3): a reply or progress frame of another
        session, generation or operation raises ``ProtocolViolation``. (The job's own
        wait in :meth:`run_job` is this loop inlined.)
        """
        assert self._pipe is not None
        while True:
            body = await self._pipe.receive()
            env = decode_positional(body, self.session, _JOB_KINDS, generation, operation)
            if env.kind == "reply":
                return env
            self._progress(env, on_progress)

    def _reply_nowait(
        self, generation: int, operation: str, on_progress: ProgressCallback | None
    ) -> Envelope | None:
        """The job's reply if it is already here (fenced; progress handed on), else None."""
        receive = self._pipe.receive_nowait  # type: ignore[union-attr]  # a job runs: set
        session = self.session
        while (body := receive()) is not None:
            env = decode_positional(body, session, _JOB_KINDS, generation, operation)
            if env.kind == "reply":
                return env
            self._progress(env, on_progress)
        return None

    def _progress(self, env: Envelope, on_progress: ProgressCallback | None) -> None:
        """A progress frame: push the stall deadline back (design §3.12), then hand it
        to ``on_progress`` (an exception from which is logged and ignored)."""
        if self._stall is not None:
            self._push_stall()
        if on_progress is not None:
            report = env.payload
            try:
                if report.__class__ is Blob:  # with bytes: on_progress gets them too
                    head = report.head
                    on_progress(head["fraction"], head.get("note"), report.data)
                else:
                    on_progress(report["fraction"], report.get("note"))
            except Exception:
                LOGGER.exception("%s: on_progress raised; ignored", self.label)

    def _push_stall(self) -> None:
        """The job showed activity: push its stall deadline back (design §3.12).

        Later only, so the reader's timer needs no change: it finds the new time when
        it wakes at the old one."""
        if self._stall is None or self._active is None:
            return
        self._stall_at = trio.current_time() + self._stall
        until = min(self._reply_at, self._deadline_at, self._stall_at)
        scope = self._job_scope
        if scope is not None and not scope.cancel_called:
            scope.deadline = until
        elif self._waiting:
            self._pipe.extend(until)  # type: ignore[union-attr]  # a job waits: set

    async def _send_rest(self, pipe: HelperPipe, frame: bytes, written: int) -> None:
        """Write the rest of a job frame the pipe did not take at once, within the
        job's deadlines (a cancel scope: this is not the common path).

        Raises:
            ReceiveStopped: a deadline passed, or :meth:`cancel` was called.
        """
        limit = min(self._reply_at, self._deadline_at, self._stall_at)
        with trio.CancelScope(deadline=limit) as scope:
            self._job_scope = scope
            await pipe.send_rest(frame, written)
        self._job_scope = None
        if scope.cancelled_caught:
            raise ReceiveStopped(expired=not self._cancel_requested)

    # --- stopping -------------------------------------------------------------------

    @enable_ki_protection
    async def shutdown(self) -> str:
        """Stop the helper politely, escalating if needed (design §3.8); never raises.

        See :meth:`actors._helpers._process._ladder.Ladder.shutdown`: bounded by ``shutdown +
        terminate + kill`` seconds; shield it if it runs during cancellation.

        Returns:
            ``"exited"``, ``"shutdown"``, ``"sigterm"``, ``"sigkill"``,
            ``"quarantined"`` or ``"signal_failed"``.
        """
        self._reaper.stopping = True
        return await self._ladder.shutdown(self._generation)

    def hurry(self) -> None:
        """Skip every grace left: SIGKILL the whole tree now (design §3.13)."""
        self._reaper.stopping = True
        self._ladder.hurry()

    def abandon(self) -> dict[str, Any]:
        """Stop waiting to reap a process the pool's close could not stop (design §3.8).

        Reports it by name: an ``abandoned`` event and an ERROR record.

        Returns:
            What was left, for the close's ``HelperAbandoned``: ``helper``, ``pid``,
            ``escaped`` and, if a signal was refused, ``signal``, ``errno``, ``error``.
        """
        left: dict[str, Any] = {"helper": self.label, "pid": self.pid}
        details: dict[str, Any] = {"escaped": list(self._reaper.escaped)}
        failure = self._ladder.signal_failure
        why = "it outlived SIGKILL"
        if failure is not None:
            _, code, sig = failure
            name = errno.errorcode.get(code, str(code))
            details.update(signal=sig, errno=code, error=name)
            why = f"its {sig} was refused ({name})"
        self._emit(
            "abandoned",
            f"left alive by the pool's close: {why}; nothing watches it any more",
            **details,
        )
        self._reaper.abandon()
        return {**left, **details}

    def discard(self) -> None:
        """Close the parent's ends of the pipes; call once the helper is of no use."""
        if self._process is not None:
            for stream in (self._process.stdin, self._process.stdout):
                if stream is not None:
                    # On POSIX these are trio FdStreams, whose close() is sync.
                    stream.close()  # type: ignore[union-attr]
        if self._stderr is not None:
            self._stderr.close()

    def __repr__(self) -> str:
        return f"<HelperProcess {self.label} pid={self.pid} {self.state.value}>"
