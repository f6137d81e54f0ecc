"""Runs of the event log: lifecycle, truthful cancel, the drain and boot (design §6.6-6.10).

Split out of :mod:`actors._eventlog._eventlog` to keep modules small; :class:`RunLifecycleMixin`
is only meant to be mixed into :class:`actors._eventlog._eventlog.EventLog`.

Lifecycle events of one run, in order (design §6.6)::

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

from ..errors import ActorError, AlreadyDecided, ErrorRecord, InvalidCommand, UnknownRun
from ._admission import _text
from ._types import (
    TERMINAL_STATES,
    VERDICT_NOT_RUN,
    VERDICT_OK,
    Event,
    RunStatus,
    canonical_json,
    encode_json,
    json_string,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from ._ledger import Ledger, LedgerSnapshot, Ticket
    from ._ports import PortHub
    from ._types import EventLogConfig, OperationSpec, RunState

    #: ``report_progress(fraction, note=None)``: sync; fraction in [0, 1].
    ProgressReporter = Callable[..., None]
    #: ``await runner(run_status, report_progress)`` returns a JSON-compatible result.
    Runner = Callable[[RunStatus, ProgressReporter], Awaitable[Any]]

__all__ = ["Run", "RunLifecycleMixin"]

_NOTE_LIMIT = 256
_make_event = Event._make


def _progress_event(
    fraction: float, note: str | None, synthetic: bool = False
) -> tuple[dict[str, Any], str]:
    """Return the ``job_progress`` data and its JSON text, built together once.

    The JSON of a finite float is its ``repr`` (what ``json.dumps`` writes).
    """
    data: dict[str, Any] = {"fraction": fraction}
    text = f'{{"fraction":{fraction!r}'
    if note is not None:
        data["note"] = note
        text += ',"note":' + json_string(note)
    if synthetic:
        data["synthetic"] = True
        text += ',"synthetic":true'
    return data, text + "}"


class Run:
    """One run's mutable state (private to the event log)."""

    __slots__ = (
        "arguments",
        "arguments_json",
        "buffered",
        "cancelled_by",
        "error",
        "error_json",
        "interruptions",
        "key",
        "on_cancel",
        "operation",
        "progress",
        "queued_seq",
        "request_id",
        "result",
        "result_json",
        "revision",
        "run_id",
        "scope",
        "snapshot_id",
        "state",
        "verdict",
    )

    # Set from ``**fields`` in ``__init__`` (a fresh run or a ``runs`` row).
    run_id: int
    request_id: str
    operation: str
    arguments: dict[str, Any]
    arguments_json: str
    revision: int
    snapshot_id: str

    def __init__(self, **fields: Any) -> None:
        self.state: RunState = "queued"
        self.verdict: str | None = None
        self.result: Any = None
        self.result_json: str | None = None
        self.error: dict[str, str] | None = None
        self.error_json: str | None = None
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

    def row(self) -> tuple[Any, ...]:
        """The ``runs`` row, in ``RUN_COLUMNS`` order; JSON columns use the cached text."""
        return (
            self.run_id,
            self.request_id,
            self.operation,
            self.arguments_json,
            self.revision,
            self.snapshot_id,
            self.state,
            self.verdict,
            self.result_json,
            self.error_json,
            self.cancelled_by,
            self.progress,
            self.interruptions,
        )

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Run:
        fields = dict(row)
        fields["arguments_json"] = fields["arguments"]
        fields["arguments"] = json.loads(fields["arguments"])
        for name in ("result", "error"):
            fields[f"{name}_json"] = text = fields[name]
            if text is not None:
                fields[name] = json.loads(text)
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
        return ErrorRecord(**error).to_dict()  # type: ignore[arg-type]  # validated by attrs
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
        _window: deque[tuple[int, str, int | None, dict[str, Any]]]
        _hub: PortHub

        def _emit(
            self, kind: str, run_id: int | None, data: dict[str, Any], text: str | None = None
        ) -> int: ...
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
        # The text reuses the arguments' JSON made at submit: each encoded once.
        text = (
            f'{{"operation":{json_string(run.operation)},"arguments":{run.arguments_json},'
            f'"revision":{run.revision},"snapshot_id":{json_string(run.snapshot_id)},'
            f'"request_id":{json_string(run.request_id)}'
        )
        if resumed:
            data["resumed"] = True
            data["interruptions"] = run.interruptions
            text += f',"resumed":true,"interruptions":{run.interruptions}'
        run.queued_seq = self._emit("job_queued", run.run_id, data, text + "}")
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

    # -- the lifecycle API for an external executor (design §6.6) ----------------------------

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
        self._emit("job_progress", run.run_id, *_progress_event(fraction, note, synthetic))

    def progress(self, run_id: int, fraction: float, note: str | None = None) -> None:
        """Report progress of a run; buffered while it is queued (design §6.6).

        Args:
            run_id: The run.
            fraction: Done so far, in [0, 1].
            note: Optional text (cut to 256 chars).

        Raises:
            AlreadyDecided: (``already_decided``) the run is finished or cancelled.
            InvalidCommand: (``invalid_command``) bad fraction, or the run is held.
            UnknownRun: (``unknown_run``) no such run in memory.
        """
        # The hot path of a busy log (one call per event): checks are cheap type tests.
        if type(fraction) is not float or not 0.0 <= fraction <= 1.0:
            fraction = _check_fraction(fraction)
        if note is not None:
            note = str(note)[:_NOTE_LIMIT]
        run = self._runs.get(run_id) if type(run_id) is int else None
        if run is None or run.state != "running":
            run = self._live(run_id)  # raises unless queued or running
            if run.buffered is not None:
                run.buffered.append((fraction, note))
                return
        run.progress = fraction
        if note is not None:
            self._emit("job_progress", run_id, *_progress_event(fraction, note))
            return
        # EventLog._emit's body, inlined for the commonest event (keep the two in step),
        # and so is Ledger.stage_progress's hot path (one owner for the pair): a float
        # appended to the batch; the writer thread makes the row's JSON text, once.
        data = {"fraction": fraction}
        self._head = seq = self._head + 1
        self._window.append((seq, "job_progress", run_id, data))
        ledger = self._ledger
        if ledger is not None:
            batch = ledger._batch
            if run_id == batch.progress_run and seq == batch.last_seq + 1:
                batch.last_seq = seq
                batch.progress_values.append(fraction)
            else:
                ledger.stage_progress(seq, run_id, fraction)
        if self._hub._active:  # hub.listening, inlined
            self._hub.publish(_make_event(seq, "job_progress", run_id, data))

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
        _text("verdict", verdict, 64)
        result_json = None
        if result is not None:
            try:
                result_json = canonical_json(result)
                size = len(result_json.encode())  # UnicodeEncodeError is a ValueError
            except (TypeError, ValueError) as exc:
                raise InvalidCommand(
                    f"result must be JSON-compatible: {exc}"[:300], fields=["result"]
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
        run.result_json = result_json
        run.error = error_dict
        run.scope = run.on_cancel = None
        # Each JSON text is encoded once: for the run row and inside the event's text.
        data: dict[str, Any] = {"verdict": verdict}
        text = '{"verdict":' + json_string(verdict)
        if result_json is not None:
            data["result"] = result
            text += ',"result":' + result_json
        if error_dict is not None:
            run.error_json = encode_json(error_dict)  # a checked record: not canonical
            data["error"] = error_dict
            text += ',"error":' + run.error_json
        self._emit("job_finished", run_id, data, text + "}")
        self._settle(run)
        return run.status(self.config.quarantine_after)

    async def cancel(self, run_id: int, actor: str = "local") -> RunStatus:
        """Cancel a run and return its true state; needs no capacity (design §6.7).

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
        _text("actor", actor)
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

    # -- the built-in drain (design §6.6) ----------------------------------------------------

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
                    # is always counted as an interruption (quarantine at 2, design §6.10).
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
