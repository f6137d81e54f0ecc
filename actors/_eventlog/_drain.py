"""The built-in drain: queued runs with a registered runner, a few at once (design §6.6).

Each run executes in a task of the log's nursery under its own cancel scope, which
``cancel`` cancels (§6.7) and whose deadline is ``run_timeout`` seconds after the runner
starts (design §6.19): a runner that hangs never holds a ``max_concurrency`` slot for
good. A run whose runner runs out of time, or raises, finishes ``NOT_RUN`` with an error
record saying why (``deadline_exceeded``, ``runner_failed`` or the ``ActorError``'s code).
"""

from __future__ import annotations

import functools
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

import trio

from protocol.errors import describe_exception

from ..errors import ActorError, DeadlineExceeded, ErrorRecord, InvalidCommand, LedgerError
from ._types import VERDICT_NOT_RUN, VERDICT_OK

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._ledger import Ticket
    from ._operations import Operations, ProgressReporter
    from ._run import Run
    from ._types import EventLogConfig, RunStatus

    #: ``finish(run_id, verdict, result, error)``: decide a run (``Runs.finish``).
    Finisher = Callable[[int, str, Any, ErrorRecord | None], RunStatus]

__all__ = ["Drain", "runner_failure"]

_log = logging.getLogger("actors.eventlog")


class Drain:
    """Executes the queued runs that have a built-in runner (design §6.6, §6.19).

    Args:
        config: ``max_concurrency``, ``run_timeout`` and ``quarantine_after``.
        operations: The runners by operation.
        begin: Marks a queued run started; returns the ticket of its row.
        finish: Decides a run.
        progress: Reports progress of a run: ``progress(run_id, fraction, note=None)``.
    """

    def __init__(
        self,
        config: EventLogConfig,
        operations: Operations,
        *,
        begin: Callable[[Run], Ticket | None],
        finish: Finisher,
        progress: Callable[..., None],
    ) -> None:
        self._config = config
        self._operations = operations
        self._begin = begin
        self._finish = finish
        self._progress = progress
        self._ready: deque[Run] = deque()
        self._ready_lot = trio.lowlevel.ParkingLot()

    def offer(self, run: Run, queued: int) -> None:
        """A run was queued (``queued`` runs are now): run it if it has a runner."""
        if run.operation not in self._operations.runners:
            return
        ready = self._ready
        if len(ready) > 2 * queued + 64:  # drop runs cancelled while queued
            self._ready = ready = deque(r for r in ready if r.state == "queued")
        ready.append(run)
        self._ready_lot.unpark()

    async def run(self, nursery: trio.Nursery) -> None:
        """Run queued runs that have a built-in runner, ``max_concurrency`` at once.

        Each run executes in a task of ``nursery``, under its own cancel scope; runs
        forever (cancel the nursery to stop).
        """
        slots = trio.Semaphore(self._config.max_concurrency)
        while True:
            await slots.acquire()
            try:
                run = await self._next_ready()
                ticket = self._begin(run)
            except BaseException:
                slots.release()
                raise
            nursery.start_soon(self._execute, run, ticket, slots)

    async def _next_ready(self) -> Run:
        runners = self._operations.runners
        while True:
            while self._ready:  # (the deque may be replaced when compacted)
                run = self._ready.popleft()
                if run.state == "queued" and run.operation in runners:
                    return run
            await self._ready_lot.park()

    async def _execute(self, run: Run, ticket: Ticket | None, slots: trio.Semaphore) -> None:
        try:
            if run.state != "running":
                return
            runner = self._operations.runners[run.operation]
            with trio.CancelScope() as scope:
                run.scope = scope
                report: ProgressReporter = functools.partial(self._progress, run.run_id)
                if ticket is not None:
                    # "running" is durable before the runner starts, so a crash it causes
                    # is always counted as an interruption (quarantine at 2, design §6.10);
                    # while the ledger cannot commit, the runner waits (design §6.13).
                    try:
                        await ticket.wait_committed()
                    except LedgerError:  # the log closed first: the run is held at boot
                        return
                scope.deadline = trio.current_time() + self._config.run_timeout
                try:
                    result = await runner(run.status(self._config.quarantine_after), report)
                except Exception as exc:
                    self._runner_failed(run, exc)
                else:
                    self._runner_returned(run, result)
            if scope.cancelled_caught and run.state == "running":  # not a cancel: time
                self._runner_timed_out(run)
        finally:
            run.scope = None
            slots.release()

    def _runner_returned(self, run: Run, result: Any) -> None:
        if run.state != "running":
            return
        try:
            self._finish(run.run_id, VERDICT_OK, result, None)
        except InvalidCommand as exc:
            self._finish(run.run_id, VERDICT_NOT_RUN, None, exc.to_record())

    def _runner_failed(self, run: Run, exc: Exception) -> None:
        if run.state != "running":
            return
        self._finish(
            run.run_id, VERDICT_NOT_RUN, None, runner_failure(run.run_id, run.operation, exc)
        )

    def _runner_timed_out(self, run: Run) -> None:
        timeout = self._config.run_timeout
        _log.warning(
            "the runner of run %d (%s) ran longer than %g s: cancelled, finished NOT_RUN",
            run.run_id,
            run.operation,
            timeout,
            extra={"run_id": run.run_id, "operation": run.operation, "run_timeout": timeout},
        )
        error = DeadlineExceeded(
            f"the runner of run {run.run_id} ran longer than {timeout:g} s",
            run_timeout=timeout,
        )
        self._finish(run.run_id, VERDICT_NOT_RUN, None, error.to_record())


def runner_failure(run_id: int, operation: str, exc: Exception) -> ErrorRecord:
    """The error record of a run whose runner raised ``exc`` (design §6.6): an
    :class:`ActorError`'s own record, else ``runner_failed`` (and a log record)."""
    if isinstance(exc, ActorError):
        return exc.to_record()
    _log.warning(
        "the runner of run %d (%s) raised %s",
        run_id,
        operation,
        type(exc).__name__,
        exc_info=exc,
        extra={"run_id": run_id, "operation": operation},
    )
    return ErrorRecord(category="permanent", code="runner_failed", message=describe_exception(exc))
