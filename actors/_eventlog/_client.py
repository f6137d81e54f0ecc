"""The event-log client: one async method per request of the event-log actor (design §6).

:class:`EventLogClient` wraps an :class:`~actors.ActorRef` of the
:class:`~actors.EventLogActor` with one async method per message, each an ``ask`` under
the client's timeout, and :meth:`EventLogClient.recover`, a loop of them (§6.17)::

    async with trio.open_nursery() as nursery:
        ref = await nursery.start(EventLogActor(config, operations=ops).run)
        log = EventLogClient(ref, timeout=5.0)
        receipt = await log.submit("index", {"path": "data/a.csv"}, request_id="r-1")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from .._core import validate_duration
from ._actor import (
    ApplyEdit,
    Cancel,
    CheckDrift,
    Discard,
    Finish,
    GetBootReport,
    GetStatistics,
    Progress,
    QueryFinished,
    Record,
    Resume,
    SetPortEnabled,
    Start,
    Status,
    Submit,
    Subscribe,
    TakeSnapshot,
    Watch,
)
from ._survivors import recover_survivors

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from typing import Unpack

    from .._core import ActorRef
    from ._finished import FinishedRunsPage
    from ._ports import Port, PortOptions, PortStatistics
    from ._statistics import EventLogStatistics
    from ._survivors import Decision, Recovered, Survivor
    from ._types import (
        BootReport,
        Drift,
        EventLogSnapshot,
        Receipt,
        RunStatus,
        WatchResult,
    )

__all__ = ["EventLogClient"]


class EventLogClient:
    """Async methods over an event-log :class:`~actors.ActorRef` (each one ``ask``).

    Every method is async, also where :class:`EventLog`'s twin is sync (it never
    waits there, but here it crosses the mailbox), and answers after the actor decided.

    After a restart, decide the runs the ledger held unfinished with one call,
    :meth:`recover` (design §6.17); list what finished, also before the restart, with
    :meth:`finished_runs` (design §6.18).

    Args:
        ref: The event-log actor's ref.
        timeout: Seconds (trio clock) each ask may take (design §1.6); an ask that takes
            longer raises :class:`~actors.errors.AskTimeout`.

    Every method raises what the matching :class:`EventLog` method raises, plus
    ``AskTimeout`` (``ask_timeout``) and ``ActorStopped`` (``actor_stopped``).
    """

    def __init__(self, ref: ActorRef, *, timeout: float = 10.0) -> None:
        self.ref = ref
        self.timeout = validate_duration("timeout", timeout, allow_zero=False)

    async def _ask(self, message: object) -> Any:
        return await self.ref.ask(message, timeout=self.timeout)

    async def submit(
        self,
        operation: str,
        arguments: Mapping[str, Any],
        request_id: str | None = None,
        *,
        actor: str | None = None,
    ) -> Receipt:
        """See :meth:`EventLog.submit` (design §6.1)."""
        message = Submit(
            operation=operation, arguments=arguments, request_id=request_id, actor=actor
        )
        return cast("Receipt", await self._ask(message))

    async def start(
        self, run_id: int, *, on_cancel: Callable[[], object] | None = None
    ) -> RunStatus:
        """See :meth:`EventLog.start` (design §6.6)."""
        return cast("RunStatus", await self._ask(Start(run_id=run_id, on_cancel=on_cancel)))

    async def progress(self, run_id: int, fraction: float, note: str | None = None) -> None:
        """See :meth:`EventLog.progress` (design §6.6)."""
        await self._ask(Progress(run_id=run_id, fraction=fraction, note=note))

    async def finish(
        self,
        run_id: int,
        verdict: str,
        result: Any = None,
        *,
        error: Mapping[str, str] | None = None,
    ) -> RunStatus:
        """See :meth:`EventLog.finish` (design §6.6)."""
        return cast(
            "RunStatus",
            await self._ask(Finish(run_id=run_id, verdict=verdict, result=result, error=error)),
        )

    async def cancel(
        self, run_id: int, actor: str = "local", *, request_id: str | None = None
    ) -> RunStatus:
        """See :meth:`EventLog.cancel` (design §6.7, §6.14)."""
        message = Cancel(run_id=run_id, actor=actor, request_id=request_id)
        return cast("RunStatus", await self._ask(message))

    async def status(self, run_id: int, *, request_id: str | None = None) -> RunStatus:
        """See :meth:`EventLog.status`."""
        return cast("RunStatus", await self._ask(Status(run_id=run_id, request_id=request_id)))

    async def watch(self, cursor: int, *, limit: int | None = None) -> WatchResult:
        """See :meth:`EventLog.watch` (design §6.8)."""
        return cast("WatchResult", await self._ask(Watch(cursor=cursor, limit=limit)))

    async def subscribe(self, name: str | None = None, **options: Unpack[PortOptions]) -> Port:
        """See :meth:`EventLog.subscribe` (design §6.9)."""
        return cast("Port", await self._ask(Subscribe(name=name, **options)))

    async def snapshot(self) -> EventLogSnapshot:
        """See :meth:`EventLog.snapshot` (design §6.15)."""
        return cast("EventLogSnapshot", await self._ask(TakeSnapshot()))

    async def set_port_enabled(self, name: str, enabled: bool, *, local: bool) -> PortStatistics:
        """See :meth:`EventLog.set_port_enabled` (design §6.9)."""
        return cast(
            "PortStatistics",
            await self._ask(SetPortEnabled(name=name, enabled=enabled, local=local)),
        )

    async def apply_edit(self) -> int:
        """See :meth:`EventLog.apply_edit` (design §6.4)."""
        return cast("int", await self._ask(ApplyEdit()))

    async def boot_report(self) -> BootReport:
        """See :meth:`EventLog.boot_report` (design §6.10)."""
        return cast("BootReport", await self._ask(GetBootReport()))

    async def resume(self, run_id: int, *, override: bool = False) -> RunStatus:
        """See :meth:`EventLog.resume` (design §6.10)."""
        return cast("RunStatus", await self._ask(Resume(run_id=run_id, override=override)))

    async def discard(self, run_id: int, *, actor: str = "local") -> RunStatus:
        """See :meth:`EventLog.discard` (design §6.10)."""
        return cast("RunStatus", await self._ask(Discard(run_id=run_id, actor=actor)))

    async def check_drift(self, run_id: int, current: Mapping[str, Any] | None = None) -> Drift:
        """See :meth:`EventLog.check_drift` (design §6.10)."""
        return cast("Drift", await self._ask(CheckDrift(run_id=run_id, current=current)))

    async def statistics(self) -> EventLogStatistics:
        """See :meth:`EventLog.statistics`."""
        return cast("EventLogStatistics", await self._ask(GetStatistics()))

    async def record(self, kind: str, data: Mapping[str, Any]) -> int:
        """See :meth:`EventLog.record` (design §6.8); returns the event's seq.

        Raises:
            InvalidCommand: (``invalid_command``) ``kind`` malformed or reserved, or
                ``data`` not JSON-compatible (``details["fields"]`` names them).
        """
        return cast("int", await self._ask(Record(kind=kind, data=data)))

    async def recover(
        self,
        decide: Callable[[Survivor], Awaitable[Decision]],
        *,
        current: Mapping[str, Any] | None = None,
        actor: str = "local",
    ) -> tuple[Recovered, ...]:
        """Decide every run held after a restart, and carry each decision out (§6.17).

        For each held run, oldest first, ``decide`` gets a :class:`~actors.Survivor`:
        its status (``interruptions``, ``quarantined``, operation, arguments) and its
        drift against ``current``. It returns ``"resume"``, ``"override"`` (resume even
        if quarantined), ``"discard"`` or ``"keep"`` (leave it held; a later call asks
        again). A decision the log refuses is reported in that run's
        :class:`~actors.Recovered` (``error``), and the next run is decided::

            async def decide(survivor: Survivor) -> Decision:
                if survivor.drift.drifted or survivor.status.quarantined:
                    return "discard"
                return "resume"

            for outcome in await client.recover(decide):
                print(outcome.run_id, outcome.decision, outcome.status.state, outcome.error)

        Args:
            decide: Called once per held run, in the caller's task.
            current: The ingredients to compare each run's with (``check_drift``);
                default: the log's current revision.
            actor: Who discards (kept as ``cancelled_by``).

        Returns:
            One :class:`~actors.Recovered` per held run, by run id.

        Raises:
            InvalidCommand: (``invalid_command``) ``decide`` is not an async function
                or returned something else (``details["fields"] == ["decide"]``), or a
                bad ``current`` or ``actor``.
            AskTimeout: (``ask_timeout``) one request took longer than the timeout.
            ActorStopped: (``actor_stopped``) the log stopped; runs not yet decided stay
                held (as they do when ``decide`` raises, which propagates).
            LedgerUnavailable, MailboxFull: (``ledger_unavailable``, ``mailbox_full``)
                reading a run's drift was not answered in time or was refused (§6.19);
                runs not yet decided stay held. A ``resume`` or ``discard`` refused so
                is reported in that run's ``error`` instead.
        """
        report = await self.boot_report()
        return await recover_survivors(
            report.survivors,
            decide,
            check_drift=self.check_drift,
            resume=lambda run_id, override: self.resume(run_id, override=override),
            discard=lambda run_id, by: self.discard(run_id, actor=by),
            current=current,
            actor=actor,
        )

    async def finished_runs(
        self,
        *,
        after: int = 0,
        limit: int | None = None,
        state: str | None = None,
        verdict: str | None = None,
        since: float | None = None,
    ) -> FinishedRunsPage:
        """One page of finished or cancelled runs and their results (design §6.18).

        Served from the ledger (so it lists runs decided before a restart and beyond
        ``retain_runs``), once what is staged has committed; without a ledger, from the
        decided runs memory still holds. Pages go by run id: pass the page's ``cursor``
        as ``after`` while ``more``::

            after = 0
            while True:
                page = await client.finished_runs(after=after, limit=100, state="finished")
                for run in page.runs:
                    print(run.run_id, run.operation, run.verdict, run.result)
                for damaged in page.damaged:  # a damaged row, named, never a crash
                    print(damaged.run_id, damaged.error.code)
                if not page.more:
                    break
                after = page.cursor

        Args:
            after: Run id after which to list (0: from the first run).
            limit: The most runs in the page, 1..``finished_runs_limit`` (default: that).
            state: ``finished`` or ``cancelled`` only; None for both.
            verdict: Only runs with this verdict (e.g. ``ok``).
            since: Only runs decided at or after this time, in seconds since the epoch
                (wall clock, like ``time.time()``; ``finished_at``).

        Raises:
            InvalidCommand: (``invalid_command``) a bad ``after``, ``limit``, ``state``,
                ``verdict`` or ``since`` (``details["fields"]`` names it).
            LedgerUnavailable: (``ledger_unavailable``) the ledger did not answer within
                ``ledger_read_timeout``, or the log within ``request_timeout`` seconds
                (design §6.19); ``details["retry_after"]`` says when to ask again.
            MailboxFull: (``mailbox_full``) too many requests wait at the log; retry.
            LedgerError: (``ledger_error``) SQLite failed.
            AskTimeout: (``ask_timeout``), ActorStopped: (``actor_stopped``).
        """
        message = QueryFinished(after=after, limit=limit, state=state, verdict=verdict, since=since)
        return cast("FinishedRunsPage", await self._ask(message))
