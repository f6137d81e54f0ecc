"""Boot and decisions after a restart: held runs, resume, discard, drift (design §6.10).

:class:`DurabilityMixin` is only meant to be mixed into
:class:`actors._eventlog._eventlog.EventLog`; it is split out to keep modules small.

At boot, every run the ledger holds unfinished becomes **held**: nothing runs by itself.
A run that was *running* when the previous process stopped (crash, SIGKILL or close) has
its ``interruptions`` counted and a ``job_interrupted`` event; at ``quarantine_after``
(2) interruptions it is quarantined and ``resume`` needs ``override=True``. ``resume``
queues a held run again (its lifecycle restarts with ``job_queued``, ``data["resumed"]``);
``discard`` decides it cancelled (``job_cancelled``, ``data["reason"] == "discarded"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from ..errors import (
    AlreadyDecided,
    InvalidCommand,
    RunQuarantined,
    UnsupportedOperation,
)
from ._admission import _durable, _text
from ._runs import Run
from ._types import BootReport, Drift, RunStatus, canonical_json

if TYPE_CHECKING:
    from ._ledger import LedgerSnapshot, Ticket
    from ._types import EventLogConfig, OperationSpec

__all__ = ["DurabilityMixin"]


class DurabilityMixin:
    """Boot report, resume, discard and drift of the event log; mixed into ``EventLog``."""

    if TYPE_CHECKING:
        config: EventLogConfig
        _ops: dict[str, OperationSpec]
        _runs: dict[int, Run]
        _held_runs: dict[int, Run]
        _revision: int
        _head: int
        _next_run_no: int

        def _check_open(self) -> None: ...
        def _check_capacity(self) -> None: ...
        def _held(self) -> list[Run]: ...
        def _find(self, run_id: object) -> Run | None: ...
        def _stage(self, run: Run) -> Ticket | None: ...
        def _requeue(self, run: Run) -> Ticket | None: ...
        def _cancel_run(self, run: Run, actor: str, reason: str | None = None) -> Ticket | None: ...
        def _boot_requests(self, snapshot: LedgerSnapshot) -> None: ...
        def _emit(
            self, kind: str, run_id: int | None, data: dict[str, Any], text: str | None = None
        ) -> int: ...
        async def status(self, run_id: int) -> RunStatus: ...

    def _boot(self, snapshot: LedgerSnapshot) -> None:
        self._revision = snapshot.revision
        self._head = snapshot.head
        self._next_run_no = snapshot.next_run_no
        self._boot_requests(snapshot)
        threshold = self.config.quarantine_after
        for row in snapshot.open_runs:
            run = Run.from_row(row)
            was = run.state
            run.state = "held"
            self._runs[run.run_id] = self._held_runs[run.run_id] = run
            if was == "running":
                run.interruptions += 1
                self._emit(
                    "job_interrupted",
                    run.run_id,
                    {
                        "interruptions": run.interruptions,
                        "quarantined": run.interruptions >= threshold,
                    },
                )
            if was != "held":
                self._stage(run)

    def boot_report(self) -> BootReport:
        """List the runs found unfinished at boot and still undecided (design §6.10)."""
        held = [r.status(self.config.quarantine_after) for r in self._held()]
        return BootReport(
            survivors=tuple(held),
            interrupted=tuple(s for s in held if s.interruptions),
            quarantined=tuple(s for s in held if s.quarantined),
            head=self._head,
            revision=self._revision,
        )

    async def resume(self, run_id: int, *, override: bool = False) -> RunStatus:
        """Queue a held run again; it restarts its lifecycle with ``job_queued`` (§6.10).

        Raises:
            RunQuarantined: (``run_quarantined``) interrupted too often and no override.
            PoolFull: (``pool_full``) no capacity; retry later.
            AlreadyDecided: (``already_decided``) the run is finished or cancelled.
            InvalidCommand: (``invalid_command``) the run is queued or running.
            UnknownRun: (``unknown_run``) no such run.
            UnsupportedOperation: (``unsupported_operation``) its operation is unknown now.
        """
        self._check_open()
        run = await self._decidable(run_id)
        threshold = self.config.quarantine_after
        if run.interruptions >= threshold and not override:
            raise RunQuarantined(
                f"run {run_id} was interrupted {run.interruptions} times; resume it with"
                " override=True",
                interruptions=run.interruptions,
            )
        if run.operation not in self._ops:
            raise UnsupportedOperation(f"unknown operation {run.operation!r}")
        self._check_capacity()
        ticket = self._requeue(run)
        status = run.status(threshold)  # as decided; the drain may start it meanwhile
        await _durable(ticket)
        return status

    async def discard(self, run_id: int, *, actor: str = "local") -> RunStatus:
        """Decide a held run as cancelled by ``actor`` (``job_cancelled``) (design §6.10).

        Raises:
            AlreadyDecided: (``already_decided``) the run is finished or cancelled.
            InvalidCommand: (``invalid_command``) the run is queued or running.
            UnknownRun: (``unknown_run``) no such run.
        """
        self._check_open()
        _text("actor", actor)
        run = await self._decidable(run_id)
        ticket = self._cancel_run(run, actor, reason="discarded")
        await _durable(ticket)
        return run.status(self.config.quarantine_after)

    async def _decidable(self, run_id: int) -> Run:
        run = self._find(run_id)
        if run is None:
            status = await self.status(run_id)
            raise AlreadyDecided(f"run {run_id} is already {status.state}", state=status.state)
        if run.terminal:
            await trio.lowlevel.checkpoint()
            raise AlreadyDecided(f"run {run_id} is already {run.state}", state=run.state)
        if run.state != "held":
            raise InvalidCommand(f"run {run_id} is {run.state}, not held", fields=["run_id"])
        return run

    async def check_drift(self, run_id: int, current: Mapping[str, Any] | None = None) -> Drift:
        """Report which pinned ingredients of a run differ from ``current`` (design §6.10).

        Args:
            run_id: The run.
            current: Any of ``revision``, ``operation``, ``arguments``; default: the log's
                current revision only.

        Raises:
            UnknownRun: (``unknown_run``) no such run.
            InvalidCommand: (``invalid_command``) ``current`` has other keys, or values
                that are not JSON.
        """
        if current is not None and not isinstance(current, Mapping):
            raise InvalidCommand("current must be a mapping", fields=["current"])
        status = await self.status(run_id)
        current = {"revision": self._revision} if current is None else dict(current)
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
