"""The runs part of the event log: lifecycle, truthful cancel and the drain (design §6.6-6.7).

Lifecycle events of one run, in order (design §6.6)::

    job_queued  job_started  job_progress+  (job_finished | job_cancelled)

Progress reported while queued is buffered (the newest ``progress_buffer`` reports) and
flushed right after ``job_started``; a run started with none gets one synthetic
``job_progress`` of 0.0 (``data["synthetic"]`` is True), so every started run has at least
one. A queued run cancelled never starts: ``job_queued job_cancelled``. A held run
(found at boot) that is resumed begins again with ``job_queued`` (``data["resumed"]``).

The part also keeps the coalescing index (design §6.4): each non-mutating run queued or
running is findable by its :data:`~actors._eventlog._run.CoalesceKey` until it is decided.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import attrs
import trio

from protocol.errors import describe_exception

from ..errors import (
    ActorError,
    AlreadyDecided,
    ErrorRecord,
    InvalidCommand,
    LedgerUnavailable,
    UnknownRun,
)
from ._checks import check_fraction, check_text, is_run_id
from ._drain import Drain
from ._ledger import RowCheck
from ._run import Run
from ._types import canonical_json, encode_json, json_string

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ._journal import Journal
    from ._ledger import Ledger, Ticket
    from ._operations import Operations
    from ._operations import ProgressReporter as ProgressReporter  # re-exported for typing
    from ._operations import Runner as Runner  # re-exported for typing
    from ._run import CoalesceKey
    from ._types import EventLogConfig, RunStatus

__all__ = ["Runs"]

_NOTE_LIMIT = 256

_log = logging.getLogger("actors.eventlog")
#: When a run is decided (``finished_at``, design §6.18): a date for people and queries,
#: so the wall clock, not trio's.
_wall_clock = time.time


def _run_id(run: Run) -> int:
    return run.run_id


def _request_view(status: RunStatus, request_id: str, detached_by: str | None) -> RunStatus:
    """The status as the request ``request_id`` sees it: cancelled if it left the run."""
    if detached_by is None:
        return attrs.evolve(status, request_id=request_id)
    return attrs.evolve(
        status,
        request_id=request_id,
        state="cancelled",
        cancelled_by=detached_by,
        verdict=None,
        result=None,
        error=None,
    )


def _error_dict(error: ErrorRecord | Mapping[str, str]) -> dict[str, str]:
    if isinstance(error, ErrorRecord):
        return error.to_dict()
    try:
        return ErrorRecord(**error).to_dict()  # type: ignore[arg-type]  # validated by attrs
    except (TypeError, ValueError) as exc:
        raise InvalidCommand(f"error must be an error record: {exc}", fields=["error"]) from None


class Runs:
    """Every run the event log holds in memory, and their lifecycle (design §6.6).

    Memory holds every unfinished run and the last ``retain_runs`` decided ones; older
    ones are read back from the ledger by :meth:`status`.

    Args:
        config: The event log's settings.
        operations: Specs (coalescing) and built-in runners (the drain).
        journal: Where lifecycle events are emitted.
        ledger: Where run rows are staged, or None in memory.
        freed: Called with the new depth (runs queued or running) when a decided run
            frees capacity: the admission gate's ``freed``. A callback, not the gate,
            because admission imports the runs it decides into.
    """

    def __init__(
        self,
        config: EventLogConfig,
        *,
        operations: Operations,
        journal: Journal,
        ledger: Ledger | None,
        freed: Callable[[int], None],
    ) -> None:
        self._config = config
        self._operations = operations
        self._journal = journal
        self._ledger = ledger
        self._freed = freed
        self._runs: dict[int, Run] = {}
        self._held: dict[int, Run] = {}
        self._decided: deque[int] = deque()
        self._inflight: dict[CoalesceKey, int] = {}
        #: Runs waiting for an executor, and runs started and not decided.
        self.queued = 0
        self.running = 0
        self._next_run_no = 1
        # Progress held back while the ledger is backlogged (design §6.19): the newest
        # report of each run, and how many reports were folded away.
        self._folded: dict[int, tuple[float, str | None]] = {}
        self.progress_folded = 0
        self._drain = Drain(
            config, operations, begin=self._begin, finish=self.finish, progress=self.progress
        )

    @property
    def depth(self) -> int:
        """Queued plus running runs: what admission bounds (design §6.5)."""
        return self.queued + self.running

    def boot(self, next_run_no: int) -> None:
        """Number new runs from ``next_run_no`` on (run ids are never reused)."""
        self._next_run_no = next_run_no

    def hold(self, run: Run) -> None:
        """Keep a run found unfinished at boot, held until resumed or discarded (§6.10)."""
        run.state = "held"
        self._runs[run.run_id] = self._held[run.run_id] = run

    def held(self) -> list[Run]:
        """The held runs, oldest first."""
        return list(self._held.values())

    def live(self) -> list[Run]:
        """The runs queued, running or held, by run id."""
        return sorted((run for run in self._runs.values() if not run.terminal), key=_run_id)

    def decided(self, after: int) -> list[Run]:
        """The finished or cancelled runs memory holds with a run id above ``after``."""
        return sorted(
            (r for r in self._runs.values() if r.terminal and r.run_id > after), key=_run_id
        )

    def unfinished(self) -> list[int]:
        """The ids of the runs neither finished nor cancelled (held at the next boot)."""
        return [run_id for run_id, run in self._runs.items() if not run.terminal]

    def get(self, run_id: object) -> Run | None:
        """The run in memory, or None.

        Raises:
            InvalidCommand: (``invalid_command``) ``run_id`` is not an int.
        """
        if type(run_id) is not int:  # also refuses bool
            raise InvalidCommand(f"run_id must be an int, got {run_id!r}"[:200], fields=["run_id"])
        return self._runs.get(run_id)

    def joinable(self, key: CoalesceKey) -> Run | None:
        """The queued or running run an equal request joins, if any (design §6.4)."""
        run_id = self._inflight.get(key)
        return None if run_id is None else self._runs.get(run_id)

    def stage(self, run: Run) -> Ticket | None:
        """Stage the run's row; its ticket (None in memory)."""
        return None if self._ledger is None else self._ledger.stage_run(run.row())

    def _live(self, run_id: int) -> Run:
        run = self.get(run_id)
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

    async def status(self, run_id: int, request_id: str | None = None) -> RunStatus:
        """The state of a run, or of one request joined to it (design §6.5, §6.14).

        Raises:
            UnknownRun: (``unknown_run``) no such run (or, without a ledger, forgotten).
            InvalidCommand: (``invalid_command``) ``run_id`` is not an int, or
                ``request_id`` did not join that run.
            LedgerCorrupt: (``ledger_corrupt``) a ledger row read is damaged or missing.
            LedgerUnavailable: (``ledger_unavailable``) its row is not durable yet.
        """
        if request_id is not None:
            check_text("request_id", request_id)
        run = self.get(run_id)
        if run is not None:
            await trio.lowlevel.checkpoint()
            status = run.status(self._config.quarantine_after)
            return status if request_id is None else self._view(run, status, request_id)
        ledger = self._ledger
        if ledger is None or not is_run_id(run_id):
            await trio.lowlevel.checkpoint()
            raise UnknownRun(f"no run {run_id!r}", run_id=run_id)
        await ledger.settle_for_read()
        found = await ledger.fetch_run(run_id)
        if found is None:
            raise self._missing(ledger, run_id)
        fields, waiters = found
        status = Run(**fields).status(self._config.quarantine_after, waiters)
        if request_id is None:
            return status
        row = await ledger.fetch_request(request_id)
        if row is None or row[1].run_id != run_id:
            raise InvalidCommand(
                f"request {request_id!r} did not join run {run_id}", fields=["request_id"]
            )
        return _request_view(status, request_id, row[2])

    def _missing(self, ledger: Ledger, run_id: int) -> ActorError:
        if run_id >= self._next_run_no:
            return UnknownRun(f"no run {run_id!r}", run_id=run_id)
        # Run ids are never reused and their rows never deleted: this one must exist.
        unavailable = ledger.unavailable
        if unavailable is not None:
            return LedgerUnavailable(
                f"run {run_id} is not durable yet: {unavailable.message}", **unavailable.details
            )
        return RowCheck(ledger.path, "runs", "run_id", run_id).corrupt(
            None, "row missing (run ids below the next one all exist)"
        )

    @staticmethod
    def _view(run: Run, status: RunStatus, request_id: str) -> RunStatus:
        by = run.detached.get(request_id)
        if by is None and request_id not in run.waiters and request_id != run.request_id:
            raise InvalidCommand(
                f"request {request_id!r} did not join run {run.run_id}", fields=["request_id"]
            )
        return _request_view(status, request_id, by)

    # -- queueing ---------------------------------------------------------------------

    def new(
        self,
        operation: str,
        arguments: dict[str, Any],
        arguments_json: str,
        revision: int,
        snapshot_id: str,
        request_id: str,
        actor: str | None,
    ) -> tuple[Run, Ticket | None]:
        """Create a run and queue it (``job_queued``); the ticket of its row.

        ``request_id`` (submitted by ``actor``) is its first waiter (design §6.14).
        """
        run = Run(
            run_id=self._next_run_no,
            request_id=request_id,
            operation=operation,
            arguments=arguments,
            arguments_json=arguments_json,
            revision=revision,
            snapshot_id=snapshot_id,
        )
        run.waiters[request_id] = actor
        self._next_run_no += 1
        self._runs[run.run_id] = run
        return run, self._enqueue(run, resumed=False)

    @staticmethod
    def join(run: Run, request_id: str, actor: str | None) -> None:
        """An equal request joins ``run`` as one more waiter (design §6.4, §6.14)."""
        run.waiters[request_id] = actor

    def requeue(self, run: Run) -> Ticket | None:
        """Queue a held run again (``job_queued`` with ``resumed``, design §6.10)."""
        self._held.pop(run.run_id, None)
        return self._enqueue(run, resumed=True)

    def _enqueue(self, run: Run, *, resumed: bool) -> Ticket | None:
        run.state = "queued"
        run.buffered = deque(maxlen=self._config.progress_buffer)
        self.queued += 1
        key = (run.operation, run.arguments_json, run.revision)
        if key not in self._inflight and self._operations.coalescing(run.operation):
            self._inflight[key] = run.run_id
            run.key = key
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
        run.queued_seq = self._journal.emit("job_queued", run.run_id, data, text + "}")
        ticket = self.stage(run)
        self._drain.offer(run, self.queued)
        return ticket

    # -- the lifecycle API for an external executor (design §6.6) ----------------------

    def start(self, run_id: int, *, on_cancel: Callable[[], object] | None = None) -> RunStatus:
        """Mark a queued run started; see :meth:`EventLog.start`."""
        run = self._live(run_id)
        if run.state == "queued":
            self._begin(run)
        if on_cancel is not None:
            run.on_cancel = on_cancel
        return run.status(self._config.quarantine_after)

    def _begin(self, run: Run) -> Ticket | None:
        self.queued -= 1
        self.running += 1
        run.state = "running"
        journal = self._journal
        journal.emit("job_started", run.run_id, {})
        buffered, run.buffered = run.buffered or (), None
        for fraction, note in buffered:
            run.progress = fraction
            journal.emit_progress(run.run_id, fraction, note)
        if run.progress is None:
            run.progress = 0.0
            journal.emit_progress(run.run_id, 0.0, synthetic=True)
        return self.stage(run)

    def progress(self, run_id: int, fraction: float, note: str | None = None) -> None:
        """Report progress of a run; see :meth:`EventLog.progress`."""
        # The hot path of a busy log (one call per event): checks are cheap type tests.
        if type(fraction) is not float or not 0.0 <= fraction <= 1.0:
            fraction = check_fraction(fraction)
        if note is not None:
            note = str(note)[:_NOTE_LIMIT]
        run = self._runs.get(run_id) if type(run_id) is int else None
        if run is None or run.state != "running":
            run = self._live(run_id)  # raises unless queued or running
            if run.buffered is not None:
                run.buffered.append((fraction, note))
                return
        run.progress = fraction
        ledger = self._ledger
        if ledger is not None:
            if ledger.pending_rows > self._config.max_pending_rows:
                self._fold(run_id, fraction, note)
                return
            if self._folded:
                self._unfold(run_id)
        self._journal.emit_progress(run_id, fraction, note)

    def _fold(self, run_id: int, fraction: float, note: str | None) -> None:
        # The ledger is backlogged (design §6.19): keep only the newest report per run.
        folded = self._folded
        if not folded:
            _log.info(
                "progress coalesced: more than %d ledger rows are staged",
                self._config.max_pending_rows,
                extra={"max_pending_rows": self._config.max_pending_rows},
            )
        if run_id in folded:
            self.progress_folded += 1
        folded[run_id] = (fraction, note)

    def _unfold(self, reporting: int | None = None) -> None:
        # Below the bound again: each run's newest report becomes its event, except the
        # reporting run's, which a newer report replaces.
        folded, self._folded = self._folded, {}
        for run_id, (fraction, note) in folded.items():
            if run_id == reporting:
                self.progress_folded += 1
            else:
                self._journal.emit_progress(run_id, fraction, note)
        _log.info(
            "progress no longer coalesced: %d reports folded so far",
            self.progress_folded,
            extra={"progress_folded": self.progress_folded, "runs": len(folded)},
        )

    def finish(
        self, run_id: int, verdict: str, result: Any, error: ErrorRecord | Mapping[str, str] | None
    ) -> RunStatus:
        """Decide a run with ``verdict``; see :meth:`EventLog.finish`."""
        check_text("verdict", verdict, 64)
        result_json = None
        if result is not None:
            try:
                result_json = canonical_json(result)
                size = len(result_json.encode())  # UnicodeEncodeError is a ValueError
            except (TypeError, ValueError) as exc:
                raise InvalidCommand(
                    f"result must be JSON-compatible: {exc}"[:300], fields=["result"]
                ) from None
            if size > self._config.max_result_bytes:
                raise InvalidCommand(
                    f"result exceeds {self._config.max_result_bytes} bytes", fields=["result"]
                )
        error_dict = None if error is None else _error_dict(error)
        run = self._live(run_id)
        if run.state == "queued":
            self._begin(run)
        held = self._folded.pop(run_id, None) if self._folded else None
        if held is not None:  # its newest progress comes before its verdict
            self._journal.emit_progress(run_id, *held)
        self.running -= 1
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
        self._journal.emit("job_finished", run_id, data, text + "}")
        self._settle(run)
        return run.status(self._config.quarantine_after)

    async def cancel(self, run_id: int, actor: str, request_id: str | None = None) -> RunStatus:
        """Cancel a run, or detach waiters from it; see :meth:`EventLog.cancel` (§6.7, §6.14)."""
        check_text("actor", actor)
        if request_id is not None:
            check_text("request_id", request_id)
        run = self.get(run_id)
        if run is None or run.terminal:
            return await self.status(run_id, request_id)
        leaving = self._leaving(run, actor, request_id)
        if not leaving:  # that request had left already: its true state
            return await self.status(run_id, request_id)
        if len(leaving) < len(run.waiters):
            ticket = self._detach(run, leaving, actor)
        else:
            ticket = self.cancel_run(run, actor)
        status = run.status(self._config.quarantine_after)
        view = request_id if request_id is not None else leaving[0]
        if run.state != "cancelled" or request_id is not None:
            status = self._view(run, status, view)
        if ticket is None:
            await trio.lowlevel.checkpoint()
        else:
            await ticket.wait()
        return status

    @staticmethod
    def _leaving(run: Run, actor: str, request_id: str | None) -> list[str]:
        """The waiters a cancel by ``actor`` detaches: the request named, else the
        actor's own requests, else (a cancel from outside) every waiter."""
        if request_id is not None:
            if request_id in run.waiters:
                return [request_id]
            if request_id in run.detached:
                return []
            raise InvalidCommand(
                f"request {request_id!r} did not join run {run.run_id}", fields=["request_id"]
            )
        owned = [waiter for waiter, by in run.waiters.items() if by == actor]
        return owned or list(run.waiters) or [run.request_id]

    def _detach(self, run: Run, leaving: list[str], actor: str) -> Ticket | None:
        ticket = None
        for request_id in leaving:
            del run.waiters[request_id]
            run.detached[request_id] = actor
            if self._ledger is not None:
                ticket = self._ledger.stage_detach(request_id, actor)
            data = {"request_id": request_id, "by": actor, "waiters": len(run.waiters)}
            self._journal.emit("request_detached", run.run_id, data)
            _log.info(
                "request %s left run %d (by %s); %d request(s) still wait on it",
                request_id,
                run.run_id,
                actor,
                len(run.waiters),
                extra={"run_id": run.run_id, **data},
            )
        return ticket

    def cancel_run(self, run: Run, actor: str, reason: str | None = None) -> Ticket | None:
        """Decide a run that is not terminal cancelled by ``actor`` (``job_cancelled``)."""
        was = run.state
        if was == "queued":
            self.queued -= 1
        elif was == "running":
            self.running -= 1
        self._held.pop(run.run_id, None)
        if self._folded and self._folded.pop(run.run_id, None) is not None:
            self.progress_folded += 1
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
        self._journal.emit("job_cancelled", run.run_id, data)
        _log.info(
            "run %d cancelled by %s (was %s)",
            run.run_id,
            actor,
            was,
            extra={"run_id": run.run_id, **data},
        )
        return self._settle(run)

    def _settle(self, run: Run) -> Ticket | None:
        run.finished_at = _wall_clock()
        if run.key is not None and self._inflight.get(run.key) == run.run_id:
            del self._inflight[run.key]
        run.key = None
        ticket = self.stage(run)
        decided = self._decided
        decided.append(run.run_id)
        while len(decided) > self._config.retain_runs:
            self._runs.pop(decided.popleft(), None)
        self._freed(self.depth)
        return ticket

    # -- the built-in drain (design §6.6) ----------------------------------------------

    async def drain(self, nursery: trio.Nursery) -> None:
        """Run queued runs that have a built-in runner, ``max_concurrency`` at once, each
        under ``run_timeout`` (see :class:`~actors._eventlog._drain.Drain`); runs forever.
        """
        await self._drain.run(nursery)
