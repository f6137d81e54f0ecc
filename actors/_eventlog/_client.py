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

import inspect
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from .._core import validate_duration
from ._messages import (
    REQUESTS,
    ApplyEdit,
    Cancel,
    CheckDrift,
    Discard,
    EventLogRequest,
    Finish,
    GetBootReport,
    GetEventLogStatistics,
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
    from collections.abc import Awaitable, Callable, Coroutine, Mapping
    from typing import Concatenate

    from .._core import ActorRef
    from ._survivors import Decision, Recovered, Survivor

__all__ = ["EventLogClient"]

P = ParamSpec("P")
R = TypeVar("R")


def _asking(
    message: Callable[P, EventLogRequest[R]],
) -> Callable[Concatenate[EventLogClient, P], Coroutine[Any, Any, R]]:
    """The client method that asks ``message``: its parameters are the message's fields."""
    spec = REQUESTS[cast("type[EventLogRequest[Any]]", message)]

    async def ask(self: EventLogClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._ask(message(*args, **kwargs))

    fields = inspect.signature(spec.message)
    ask.__name__ = spec.method
    ask.__qualname__ = f"EventLogClient.{spec.method}"
    ask.__doc__ = (
        f"{inspect.getdoc(spec.message)}\n\nAsks ``{spec.message.__name__}``; see"
        f" :meth:`actors.EventLog.{spec.method}`."
    )
    ask.__signature__ = fields.replace(  # type: ignore[attr-defined]
        parameters=[
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY),
            *fields.parameters.values(),
        ],
        return_annotation=spec.reply,
    )
    ask.__annotations__ = {
        **{name: p.annotation for name, p in fields.parameters.items()},
        "return": spec.reply,
    }
    ask.__request__ = spec.message  # type: ignore[attr-defined]
    return ask


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

    Every method but :meth:`recover` is derived from one request's declaration (its
    message's fields are its parameters) and raises what the matching :class:`EventLog`
    method raises, plus ``AskTimeout`` (``ask_timeout``), ``ActorStopped``
    (``actor_stopped``) and, when too many requests wait at the log, ``MailboxFull``
    (``mailbox_full``, design §6.19).
    """

    def __init__(self, ref: ActorRef, *, timeout: float = 10.0) -> None:
        self.ref = ref
        self.timeout = validate_duration("timeout", timeout, allow_zero=False)

    async def _ask(self, message: EventLogRequest[R]) -> R:
        return cast("R", await self.ref.ask(message, timeout=self.timeout))

    submit = _asking(Submit)
    start = _asking(Start)
    progress = _asking(Progress)
    finish = _asking(Finish)
    cancel = _asking(Cancel)
    status = _asking(Status)
    watch = _asking(Watch)
    subscribe = _asking(Subscribe)
    snapshot = _asking(TakeSnapshot)
    set_port_enabled = _asking(SetPortEnabled)
    apply_edit = _asking(ApplyEdit)
    boot_report = _asking(GetBootReport)
    resume = _asking(Resume)
    discard = _asking(Discard)
    check_drift = _asking(CheckDrift)
    statistics = _asking(GetEventLogStatistics)
    record = _asking(Record)
    finished_runs = _asking(QueryFinished)

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
