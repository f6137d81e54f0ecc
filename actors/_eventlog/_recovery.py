"""The recovery part of the event log: boot, held runs, resume, discard, drift (§6.10).

``recover`` decides every held run in one call (design §6.17, :mod:`actors._eventlog._survivors`).

At boot, every run the ledger holds unfinished becomes **held**: nothing runs by itself.
A run that was *running* when the previous process stopped (crash, SIGKILL or close) has
its ``interruptions`` counted and a ``job_interrupted`` event; at ``quarantine_after``
(2) interruptions it is quarantined and ``resume`` needs ``override=True``. ``resume``
queues a held run again (its lifecycle restarts with ``job_queued``, ``data["resumed"]``);
``discard`` decides it cancelled (``job_cancelled``, ``data["reason"] == "discarded"``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from ..errors import AlreadyDecided, InvalidCommand, RunQuarantined, UnsupportedOperation
from ._checks import check_text
from ._ledger import wait_durable
from ._run import Run
from ._survivors import recover_survivors
from ._types import BootReport, Drift, RunStatus, canonical_json

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ._admission import AdmissionGate, Intake
    from ._journal import Journal
    from ._ledger import LedgerSnapshot, WalReport
    from ._operations import Operations
    from ._runs import Runs
    from ._survivors import Decision, Recovered, Survivor
    from ._types import EventLogConfig

__all__ = ["Recovery"]

_log = logging.getLogger("actors.eventlog")


class Recovery:
    """Decisions about the runs a previous process left unfinished (design §6.10).

    Args:
        config: ``quarantine_after`` is read here.
        operations: A held run resumes only if its operation is still known.
        runs: Holds the held runs.
        intake: The current revision.
        gate: A resume needs capacity like a submit.
        journal: Where ``job_interrupted`` is emitted.
        check_open: Raises ``ActorStopped`` unless the log is running.
    """

    def __init__(
        self,
        config: EventLogConfig,
        *,
        operations: Operations,
        runs: Runs,
        intake: Intake,
        gate: AdmissionGate,
        journal: Journal,
        check_open: Callable[[], None],
    ) -> None:
        self._config = config
        self._operations = operations
        self._runs = runs
        self._intake = intake
        self._gate = gate
        self._journal = journal
        self._check_open = check_open

    def boot(self, snapshot: LedgerSnapshot) -> None:
        """Hold every unfinished run of the ledger; count interruptions."""
        threshold = self._config.quarantine_after
        for fields in snapshot.open_runs:
            run = Run(**fields)
            was = run.state
            self._runs.hold(run)
            if was == "running":
                run.interruptions += 1
                self._journal.emit(
                    "job_interrupted",
                    run.run_id,
                    {
                        "interruptions": run.interruptions,
                        "quarantined": run.interruptions >= threshold,
                    },
                )
            if was != "held":
                self._runs.stage(run)
        for request_id, run_id, actor, detached_by in snapshot.waiters:
            held = self._runs.get(run_id)
            if held is None:
                continue
            if detached_by is None:
                held.waiters[request_id] = actor
            else:
                held.detached[request_id] = detached_by

    def log_boot(self, ledger_path: str, wal: WalReport | None) -> None:
        """Say what boot found: a torn log tail discarded, runs held from before."""
        if wal is not None and wal.torn_frames:
            _log.warning(
                "ledger %s: %d frame(s) of an unacknowledged commit torn by the last stop"
                " were discarded",
                ledger_path,
                wal.torn_frames,
                extra={"ledger": ledger_path, "torn_frames": wal.torn_frames},
            )
        held = [run.run_id for run in self._runs.held()]
        if held:
            _log.info(
                "%d run(s) held from before the restart; resume or discard each",
                len(held),
                extra={"ledger": ledger_path, "held": held},
            )

    def log_left(self, ledger_path: str) -> None:
        """Say which runs a closing log leaves unfinished (held at the next boot)."""
        left = self._runs.unfinished()
        if left:
            _log.info(
                "%d run(s) left unfinished; they are held at the next start",
                len(left),
                extra={"ledger": ledger_path, "held": left},
            )

    def boot_report(self) -> BootReport:
        """The held runs; see :meth:`EventLog.boot_report`."""
        held = [r.status(self._config.quarantine_after) for r in self._runs.held()]
        return BootReport(
            survivors=tuple(held),
            interrupted=tuple(s for s in held if s.interruptions),
            quarantined=tuple(s for s in held if s.quarantined),
            head=self._journal.head,
            revision=self._intake.revision,
        )

    async def resume(self, run_id: int, *, override: bool = False) -> RunStatus:
        """Queue a held run again; see :meth:`EventLog.resume`."""
        self._check_open()
        run = await self._decidable(run_id)
        threshold = self._config.quarantine_after
        if run.interruptions >= threshold and not override:
            raise RunQuarantined(
                f"run {run_id} was interrupted {run.interruptions} times; resume it with"
                " override=True",
                interruptions=run.interruptions,
            )
        if run.operation not in self._operations.specs:
            raise UnsupportedOperation(f"unknown operation {run.operation!r}")
        self._gate.check(self._runs.depth)
        ticket = self._runs.requeue(run)
        status = run.status(threshold)  # as decided; the drain may start it meanwhile
        await wait_durable(ticket)
        return status

    async def discard(self, run_id: int, *, actor: str = "local") -> RunStatus:
        """Decide a held run cancelled; see :meth:`EventLog.discard`."""
        self._check_open()
        check_text("actor", actor)
        run = await self._decidable(run_id)
        ticket = self._runs.cancel_run(run, actor, reason="discarded")
        await wait_durable(ticket)
        return run.status(self._config.quarantine_after)

    async def recover(
        self,
        decide: Callable[[Survivor], Awaitable[Decision]],
        *,
        current: Mapping[str, Any] | None = None,
        actor: str = "local",
    ) -> tuple[Recovered, ...]:
        """Decide every held run with ``decide``; see :meth:`EventLog.recover` (§6.17)."""
        return await recover_survivors(
            self.boot_report().survivors,
            decide,
            check_drift=self.check_drift,
            resume=lambda run_id, override: self.resume(run_id, override=override),
            discard=lambda run_id, by: self.discard(run_id, actor=by),
            current=current,
            actor=actor,
        )

    async def _decidable(self, run_id: int) -> Run:
        run = self._runs.get(run_id)
        if run is None:
            status = await self._runs.status(run_id)
            raise AlreadyDecided(f"run {run_id} is already {status.state}", state=status.state)
        if run.terminal:
            await trio.lowlevel.checkpoint()
            raise AlreadyDecided(f"run {run_id} is already {run.state}", state=run.state)
        if run.state != "held":
            raise InvalidCommand(f"run {run_id} is {run.state}, not held", fields=["run_id"])
        return run

    async def check_drift(self, run_id: int, current: Mapping[str, Any] | None = None) -> Drift:
        """Compare a run's pinned ingredients; see :meth:`EventLog.check_drift`."""
        if current is not None and not isinstance(current, Mapping):
            raise InvalidCommand("current must be a mapping", fields=["current"])
        status = await self._runs.status(run_id)
        current = {"revision": self._intake.revision} if current is None else dict(current)
        pinned = {
            "revision": status.revision,
            "operation": status.operation,
            "arguments": status.arguments,
        }
        other = sorted(set(current) - set(pinned))
        if other:
            raise InvalidCommand(f"unknown ingredients: {', '.join(other)}", fields=other)
        try:
            changed = tuple(
                name
                for name in sorted(current)
                if canonical_json(current[name]) != canonical_json(pinned[name])
            )
        except (TypeError, ValueError) as exc:
            raise InvalidCommand(
                f"current must hold JSON values: {exc}"[:300], fields=["current"]
            ) from None
        return Drift(run_id=run_id, changed=changed, pinned=pinned, current=current)
