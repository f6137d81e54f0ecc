"""Runs of the event log: lifecycle, truthful cancel, the drain and boot (SPEC §6.6-6.10).

Split out of :mod:`actors._eventlog` to keep modules small; :class:`RunLifecycleMixin`
is only meant to be mixed into :class:`actors._eventlog.EventLog`.

Lifecycle events of one run, in order (SPEC §6.6)::

    job_queued  job_started  job_progress+  (job_finished | job_cancelled)

Progress reported while queued is buffered (the newest ``progress_buffer`` reports) and
flushed right after ``job_started``; a run started with none gets one synthetic
``job_progress`` of 0.0 (``data["synthetic"]`` is True), so every started run has at least
one. A queued run cancelled never starts: ``job_queued job_cancelled``. A held run
(found at boot) that is resumed begins again with ``job_queued`` (``data["resumed"]``).
"""

from __future__ import annotations

import functools
import json
import math
from collections import deque
from typing import TYPE_CHECKING, Any

import trio

from protocol.errors import describe_exception

from ._eventlog_types import (
    TERMINAL_STATES,
    VERDICT_NOT_RUN,
    VERDICT_OK,
    RunStatus,
    canonical_json,
)
from .errors import ActorError, AlreadyDecided, ErrorRecord, InvalidCommand, UnknownRun

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from ._eventlog_types import Event, EventLogConfig, OperationSpec
    from ._ledger import Ledger, LedgerSnapshot, Ticket

    #: ``report_progress(fraction, note=None)``: sync; fraction in [0, 1].
    ProgressReporter = Callable[..., None]
    #: ``await runner(run_status, report_progress)`` returns a JSON-compatible result.
    Runner = Callable[[RunStatus, ProgressReporter], Awaitable[Any]]

__all__ = ["Run", "RunLifecycleMixin"]

_NOTE_LIMIT = 256


class Run:
    """One run's mutable state (private to the event log)."""

    __slots__ = (
        "arguments",
        "arguments_json",
        "buffered",
        "cancelled_by",
        "error",
        "interruptions",
        "key",
        "on_cancel",
        "operation",
        "progress",
        "queued_seq",
        "request_id",
        "result",
        "revision",
        "run_id",
        "scope",
        "snapshot_id",
        "state",
        "verdict",
    )

    def __init__(self, **fields: Any) -> None:
        self.state = "queued"
        self.verdict: str | None = None
        self.result: Any = None
        self.error: dict[str, str] | None = None
        self.cancelled_by: str | None = None
        self.progress: float | None = None
        self.interruptions = 0
        self.queued_seq = 0
        self.buffered: deque[tuple[float, str | None]] | None = None
        self.scope: trio.CancelScope | None = None
        self.on_cancel: Callable[[], object] | None = None
        self.key: tuple[str, str, int] | None = None
        for name, value in fields.items():
            setattr(self, name, value)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def status(self, quarantine_after: int) -> RunStatus:
        return RunStatus(
            run_id=self.run_id,
            state=self.state,
            operation=self.operation,
            arguments=self.arguments,
            revision=self.revision,
            snapshot_id=self.snapshot_id,
            request_id=self.request_id,
            verdict=self.verdict,
            result=self.result,
            error=self.error,
            cancelled_by=self.cancelled_by,
            progress=self.progress,
            interruptions=self.interruptions,
            quarantined=self.interruptions >= quarantine_after,
        )

    def row(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "request_id": self.request_id,
            "operation": self.operation,
            "arguments": self.arguments_json,
            "revision": self.revision,
            "snapshot_id": self.snapshot_id,
            "state": self.state,
            "verdict": self.verdict,
            "result": None if self.result is None else canonical_json(self.result),
            "error": None if self.error is None else canonical_json(self.error),
            "cancelled_by": self.cancelled_by,
            "progress": self.progress,
            "interruptions": self.interruptions,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Run:
        fields = dict(row)
        fields["arguments_json"] = fields["arguments"]
        fields["arguments"] = json.loads(fields["arguments"])
        for name in ("result", "error"):
            if fields[name] is not None:
                fields[name] = json.loads(fields[name])
        return cls(**fields)


def _check_fraction(fraction: object) -> float:
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, int | float)
        or not math.isfinite(fraction)
        or not 0.0 <= fraction <= 1.0
    ):
        raise InvalidCommand(
            f"fraction must be a number in [0, 1], got {fraction!r}", fields=["fraction"]
        )
    return float(fraction)


def _error_dict(error: ErrorRecord | Mapping[str, str]) -> dict[str, str]:
    if isinstance(error, ErrorRecord):
        return error.to_dict()
    try:
        return ErrorRecord(**error).to_dict()
    except (TypeError, ValueError) as exc:
        raise InvalidCommand(f"error must be an error record: {exc}", fields=["error"]) from None


class RunLifecycleMixin:
    """Lifecycle, cancel, drain and boot of runs; mixed into ``EventLog`` only."""

    if TYPE_CHECKING:
        config: EventLogConfig
        _ledger: Ledger | None
        _ops: dict[str, OperationSpec]
        _runners: dict[str, Runner]
        _inflight: dict[tuple[str, str, int], int]
        _revision: int
        _head: int
        _nursery: trio.Nursery

        def _emit(self, kind: str, run_id: int | None, data: dict[str, Any]) -> Event: ...
        def _coalesce_key(self, run: Run) -> tuple[str, str, int] | None: ...
        def _capacity_freed(self) -> None: ...
        def _boot_requests(self, snapshot: LedgerSnapshot) -> None: ...

    def _init_runs(self) -> None:
        self._runs: dict[int, Run] = {}
        self._held_runs: dict[int, Run] = {}
        self._decided: deque[int] = deque()
        self._queued = 0
        self._running = 0
        self._next_run_no = 1
        self._ready: deque[Run] = deque()
        self._ready_lot = trio.lowlevel.ParkingLot()

    def _held(self) -> list[Run]:
        return list(self._held_runs.values())

    def _stage(self, run: Run) -> Ticket | None:
        return None if self._ledger is None else self._ledger.stage_run(run.row())

    def _new_run(
        self,
        operation: str,
        arguments: dict[str, Any],
        arguments_json: str,
        revision: int,
        snapshot_id: str,
        request_id: str,
    ) -> Run:
        run = Run(
            run_id=self._next_run_no,
            request_id=request_id,
            operation=operation,
            arguments=arguments,
            arguments_json=arguments_json,
            revision=revision,
            snapshot_id=snapshot_id,
        )
        self._next_run_no += 1
        self._runs[run.run_id] = run
        self._enqueue(run, resumed=False)
        return run

    def _enqueue(self, run: Run, *, resumed: bool) -> Ticket | None:
        run.state = "queued"
        run.buffered = deque(maxlen=self.config.progress_buffer)
        self._queued += 1
        run.key = self._coalesce_key(run)
        data: dict[str, Any] = {
            "operation": run.operation,
            "arguments": run.arguments,
            "revision": run.revision,
            "snapshot_id": run.snapshot_id,
            "request_id": run.request_id,
        }
        if resumed:
            data["resumed"] = True
            data["interruptions"] = run.interruptions
        run.queued_seq = self._emit("job_queued", run.run_id, data).seq
        ticket = self._stage(run)
        if run.operation in self._runners:
            ready = self._ready
            if len(ready) > 2 * self._queued + 64:  # drop runs cancelled while queued
                self._ready = ready = deque(r for r in ready if r.state == "queued")
            ready.append(run)
            self._ready_lot.unpark()
        return ticket

    def _requeue(self, run: Run) -> Ticket | None:
        self._held_runs.pop(run.run_id, None)
        return self._enqueue(run, resumed=True)

    def _find(self, run_id: object) -> Run | None:
        if type(run_id) is not int:  # also refuses bool
            raise InvalidCommand(f"run_id must be an int, got {run_id!r}"[:200], fields=["run_id"])
        return self._runs.get(run_id)

    def _live(self, run_id: int) -> Run:
        run = self._find(run_id)
        if run is None:
            raise UnknownRun(f"no run {run_id!r} in memory", run_id=run_id)
        if run.terminal:
            raise AlreadyDecided(f"run {run_id} is already {run.state}", state=run.state)
        if run.state == "held":
            raise InvalidCommand(
                f"run {run_id} is held after a restart; resume or discard it",
                fields=["run_id"],
            )
        return run

    # -- the lifecycle API for an external executor (SPEC §6.6) ----------------------------

    def start(self, run_id: int, *, on_cancel: Callable[[], object] | None = None) -> RunStatus:
        """Mark a queued run started: ``job_started``, then its buffered progress (§6.6).

        Starting a running run again only records ``on_cancel`` (idempotent).

        Args:
            run_id: The run.
            on_cancel: Called (sync) if the run is cancelled while running, e.g. the
                executor's ``cancel_scope.cancel``; an exception from it is contained.

        Raises:
            AlreadyDecided: (``already_decided``) the run is finished or cancelled.
            UnknownRun: (``unknown_run``) no such run in memory.
            InvalidCommand: (``invalid_command``) the run is held after a restart.
        """
        run = self._live(run_id)
        if run.state == "queued":
            self._begin(run)
        if on_cancel is not None:
            run.on_cancel = on_cancel
        return run.status(self.config.quarantine_after)

    def _begin(self, run: Run) -> Ticket | None:
        self._queued -= 1
        self._running += 1
        run.state = "running"
        self._emit("job_started", run.run_id, {})
        buffered, run.buffered = run.buffered or (), None
        for fraction, note in buffered:
            self._emit_progress(run, fraction, note)
        if run.progress is None:
            self._emit_progress(run, 0.0, None, synthetic=True)
        return self._stage(run)

    def _emit_progress(
        self, run: Run, fraction: float, note: str | None, *, synthetic: bool = False
    ) -> None:
        run.progress = fraction
        data: dict[str, Any] = {"fraction": fraction}
        if note is not None:
            data["note"] = note
        if synthetic:
            data["synthetic"] = True
        self._emit("job_progress", run.run_id, data)

    def progress(self, run_id: int, fraction: float, note: str | None = None) -> None:
        """Report progress of a run; buffered while it is queued (SPEC §6.6).

        Args:
            run_id: The run.
            fraction: Done so far, in [0, 1].
            note: Optional text (cut to 256 chars).

        Raises:
            AlreadyDecided: (``already_decided``) the run is finished or cancelled.
            InvalidCommand: (``invalid_command``) bad fraction, or the run is held.
            UnknownRun: (``unknown_run``) no such run in memory.
        """
        if type(fraction) is not float or not 0.0 <= fraction <= 1.0:  # fast path
            fraction = _check_fraction(fraction)
        if note is not None:
            note = str(note)[:_NOTE_LIMIT]
        run = self._find(run_id)
        if run is None or run.state != "running":
            run = self._live(run_id)
        if run.buffered is not None:
            run.buffered.append((fraction, note))
        else:
            self._emit_progress(run, fraction, note)

    def finish(
        self,
        run_id: int,
        verdict: str,
        result: Any = None,
        *,
        error: ErrorRecord | Mapping[str, str] | None = None,
    ) -> RunStatus:
        """Decide a run with ``verdict`` (``job_finished``); a queued run is started first.

        Args:
            run_id: The run.
            verdict: e.g. ``ok``, ``empty``, ``interrupted``, ``failed``, ``NOT_RUN``.
            result: JSON-compatible, at most ``max_result_bytes`` bytes as JSON.
            error: A record ``{"category", "code", "message"}`` for a failed run.

        Raises:
            AlreadyDecided: (``already_decided``) the run is already finished or cancelled.
            InvalidCommand: (``invalid_command``) bad verdict, result or error; run held.
            UnknownRun: (``unknown_run``) no such run in memory.
        """
        if not isinstance(verdict, str) or not 1 <= len(verdict) <= 64:
            raise InvalidCommand("verdict must be a str of 1..64 chars", fields=["verdict"])
        if result is not None:
            try:
                size = len(canonical_json(result).encode())
            except (TypeError, ValueError) as exc:
                raise InvalidCommand(
                    f"result must be JSON-compatible: {exc}", fields=["result"]
                ) from None
            if size > self.config.max_result_bytes:
                raise InvalidCommand(
                    f"result exceeds {self.config.max_result_bytes} bytes", fields=["result"]
                )
        error_dict = None if error is None else _error_dict(error)
        run = self._live(run_id)
        if run.state == "queued":
            self.start(run_id)
        self._running -= 1
        run.state = "finished"
        run.verdict = verdict
        run.result = result
        run.error = error_dict
        run.scope = run.on_cancel = None
        data: dict[str, Any] = {"verdict": verdict}
        if result is not None:
            data["result"] = result
        if error_dict is not None:
            data["error"] = error_dict
        self._emit("job_finished", run_id, data)
        self._settle(run)
        return run.status(self.config.quarantine_after)

    async def cancel(self, run_id: int, actor: str = "local") -> RunStatus:
        """Cancel a run and return its true state; needs no capacity (SPEC §6.7).

        A queued run is cancelled at once; a running one is decided cancelled at once and
        its cancel scope (built-in runner) or ``on_cancel`` (external executor) is
        triggered; a finished or cancelled run is returned as it is, never faked.
        Returns once the decision is durable.

        Args:
            run_id: The run.
            actor: Who cancels (kept in ``cancelled_by`` and the event's ``by``).

        Raises:
            UnknownRun: (``unknown_run``) no such run.
            InvalidCommand: (``invalid_command``) bad actor name.
        """
        if not isinstance(actor, str) or not 1 <= len(actor) <= 128:
            raise InvalidCommand("actor must be a str of 1..128 chars", fields=["actor"])
        run = self._find(run_id)
        if run is None or run.terminal:
            return await self.status(run_id)  # type: ignore[attr-defined,no-any-return]
        ticket = self._cancel_run(run, actor)
        if ticket is None:
            await trio.lowlevel.checkpoint()
        else:
            await ticket.wait()
        return run.status(self.config.quarantine_after)

    def _cancel_run(self, run: Run, actor: str, reason: str | None = None) -> Ticket | None:
        was = run.state
        if was == "queued":
            self._queued -= 1
        elif was == "running":
            self._running -= 1
        self._held_runs.pop(run.run_id, None)
        run.state = "cancelled"
        run.cancelled_by = actor
        run.buffered = None
        data: dict[str, Any] = {"by": actor, "was": was}
        if reason is not None:
            data["reason"] = reason
        scope, on_cancel, run.scope, run.on_cancel = run.scope, run.on_cancel, None, None
        if scope is not None:
            scope.cancel()
        if on_cancel is not None:
            try:
                on_cancel()
            except Exception as exc:  # contained: the decision stands
                data["on_cancel_error"] = describe_exception(exc, 1000)
        self._emit("job_cancelled", run.run_id, data)
        return self._settle(run)

    def _settle(self, run: Run) -> Ticket | None:
        if run.key is not None and self._inflight.get(run.key) == run.run_id:
            del self._inflight[run.key]
        run.key = None
        ticket = self._stage(run)
        decided = self._decided
        decided.append(run.run_id)
        while len(decided) > self.config.retain_runs:
            self._runs.pop(decided.popleft(), None)
        self._capacity_freed()
        return ticket

    # -- the built-in drain (SPEC §6.6) ----------------------------------------------------

    async def _drain(self) -> None:
        slots = trio.Semaphore(self.config.max_concurrency)
        while True:
            await slots.acquire()
            try:
                run = await self._next_ready()
                ticket = self._begin(run)
            except BaseException:
                slots.release()
                raise
            self._nursery.start_soon(self._execute, run, ticket, slots)

    async def _next_ready(self) -> Run:
        while True:
            while self._ready:  # (the deque may be replaced when compacted)
                run = self._ready.popleft()
                if run.state == "queued" and run.operation in self._runners:
                    return run
            await self._ready_lot.park()

    async def _execute(self, run: Run, ticket: Ticket | None, slots: trio.Semaphore) -> None:
        try:
            if run.state != "running":
                return
            runner = self._runners[run.operation]
            with trio.CancelScope() as scope:
                run.scope = scope
                report = functools.partial(self.progress, run.run_id)
                if ticket is not None:
                    # "running" is durable before the runner starts, so a crash it causes
                    # is always counted as an interruption (quarantine at 2, SPEC §6.10).
                    await ticket.wait()
                try:
                    result = await runner(run.status(self.config.quarantine_after), report)
                except Exception as exc:
                    self._runner_failed(run, exc)
                else:
                    self._runner_returned(run, result)
        finally:
            run.scope = None
            slots.release()

    def _runner_returned(self, run: Run, result: Any) -> None:
        if run.state != "running":
            return
        try:
            self.finish(run.run_id, VERDICT_OK, result)
        except InvalidCommand as exc:
            self.finish(run.run_id, VERDICT_NOT_RUN, error=exc.to_record())

    def _runner_failed(self, run: Run, exc: Exception) -> None:
        if run.state != "running":
            return
        if isinstance(exc, ActorError):
            record = exc.to_record()
        else:
            record = ErrorRecord(
                category="permanent", code="runner_failed", message=describe_exception(exc)
            )
        self.finish(run.run_id, VERDICT_NOT_RUN, error=record)
