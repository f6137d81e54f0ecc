"""The run table of the scheduler core and what outcomes do to its slots (design §4).

Pure: no trio, no I/O. :class:`RunTable` owns one source generation's runs, their
slots (moved only through :data:`actors._scheduler._state.SLOT_TRANSITIONS`), the ready
indexes (:class:`actors._scheduler._queue.ReadyQueues`) and the set of failed slots. The
policy (which claim goes next, fencing, priorities) is
:class:`actors._scheduler._scheduler.Scheduler`; the retry decision is
:meth:`RunTable.transient`.

Each outcome method appends the events it causes to ``events``, in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import DeadlineExceeded, ScheduleRejected
from ._events import Failed, Interrupted, Invalidated, Parked, Published, Retrying, Settled
from ._queue import ReadyQueues
from ._state import (
    BLOCKED,
    DONE,
    FAILED,
    PENDING,
    STATUS_NAMES,
    RunInfo,
    _Run,
    _Slot,
    move,
)

if TYPE_CHECKING:
    import random

    from ..errors import ErrorRecord
    from ._events import SchedulerEvent
    from ._kinds import KindGraph
    from ._state import Claim

__all__ = ["RunTable"]


class RunTable:
    """The runs of one source generation, in append-only order (design §4.1).

    Args:
        source: Identity of the source.
        graph: The declared kinds (design §4.11).
        tiers: Number of priority tiers; new runs go to the last one.
        rng: Random source for retry jitter (design §4.12).
    """

    __slots__ = ("by_id", "counts", "failed", "graph", "held", "q", "rng", "runs", "source")

    def __init__(self, source: str, graph: KindGraph, tiers: int, rng: random.Random) -> None:
        self.source = source
        self.graph = graph
        self.rng = rng
        self.runs: list[_Run] = []
        self.by_id: dict[int, _Run] = {}
        self.q = ReadyQueues(self.runs, tiers, len(graph))
        self.counts = [0] * len(STATUS_NAMES)
        """Slots per status (index: status)."""
        self.failed: set[tuple[int, int]] = set()
        """(order, kind) of failed slots, so a format change costs O(failures)."""
        self.held: dict[str, _Run] = {}
        """Runs waiting for an older generation's execution of their GUID (§4.13)."""

    @staticmethod
    def checked(runs: Any, *, existing: Any = (), guids: Any = ()) -> list[RunInfo]:
        """Return ``runs`` as a list after checking types, id and GUID uniqueness.

        A GUID identifies a run's results: payloads are cached and completions fenced
        by it (design §4.8, §4.10), so two runs sharing one would share cached results.

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) not a RunInfo, or an id or a
                GUID repeats (within ``runs``, or with ``existing`` ids / ``guids``).
        """
        infos = list(runs)
        seen: set[int] = set()
        seen_guids: set[str] = set()
        for info in infos:
            if not isinstance(info, RunInfo):
                raise ScheduleRejected(f"expected RunInfo, got {info!r:.200}")
            if info.run_id in seen or info.run_id in existing:
                raise ScheduleRejected(f"run id {info.run_id} repeats", run_id=info.run_id)
            if info.guid in seen_guids or info.guid in guids:
                raise ScheduleRejected(
                    f"run {info.run_id}: guid {info.guid!r:.80} repeats", run_id=info.run_id
                )
            seen.add(info.run_id)
            seen_guids.add(info.guid)
        return infos

    def check_listing(self, infos: list[Any]) -> list[RunInfo]:
        """Check a full listing against the table; return the runs it appends (§4.8).

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) a known run is missing,
                reordered or has another GUID, or a new id or GUID repeats one.
        """
        table = self.runs
        if len(infos) < len(table):
            missing = table[len(infos)].run_id
            raise ScheduleRejected(
                f"reconcile: run {missing} was removed; the run table is append-only",
                run_id=missing,
            )
        for run, info in zip(table, infos, strict=False):
            if not isinstance(info, RunInfo):
                raise ScheduleRejected(f"reconcile: expected RunInfo, got {info!r:.200}")
            if info.run_id != run.run_id or info.guid != run.guid:
                raise ScheduleRejected(
                    f"reconcile: position {run.order} holds run {run.run_id} "
                    f"(guid {run.guid!r}), got run {info.run_id} (guid {info.guid!r}); "
                    "the run table is append-only",
                    run_id=run.run_id,
                )
        new = infos[len(table) :]  # known GUIDs: only a new run can repeat one
        return self.checked(new, existing=self.by_id, guids={r.guid for r in table})

    def append(self, info: RunInfo) -> _Run:
        """Add a run at the end: its root kinds pending, in the last tier."""
        graph = self.graph
        run = _Run(info.run_id, info.guid, info.revision, len(self.runs), graph, self.q.tiers - 1)
        self.runs.append(run)
        self.by_id[info.run_id] = run
        roots = len(graph.roots)
        self.counts[PENDING] += roots
        self.counts[BLOCKED] += len(graph) - roots
        for k in graph.roots:
            self.q.push(run, k)
        return run

    def lookup(self, run_id: object, name: str) -> _Run:
        """The run with id ``run_id``.

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) no such run; the message
                names the parameter ``name``.
        """
        run = None
        if isinstance(run_id, int) and not isinstance(run_id, bool):
            run = self.by_id.get(run_id)
        if run is None:
            raise ScheduleRejected(
                f"{name}: {run_id!r} is not a run of the current source", run_id=repr(run_id)
            )
        return run

    def move(self, slot: _Slot, event: str) -> None:
        """Move ``slot`` by one table row, keeping :attr:`counts` exact."""
        old = slot.status
        move(slot, event)
        self.counts[old] -= 1
        self.counts[slot.status] += 1

    def requeue(self, run: _Run, k: int, *, page: bool) -> None:
        """Put an active slot whose result was stale back where it came from.

        The attempt is given back: it does not count toward the retry limits.
        """
        slot = run.slots[k]
        if slot.retry is not None:
            slot.retry.attempts -= 1
        if page:
            self.move(slot, "park")
            self.q.progressive[run.order] = None
        else:
            self.move(slot, "requeue")
            self.q.push(run, k)

    def release_hold(self, guid: str) -> None:
        """An older generation's execution of ``guid`` ended (design §4.13)."""
        run = self.held.get(guid)
        if run is None:
            return
        run.held -= 1
        if run.held == 0:
            del self.held[guid]
            self.requeue_waiting(run)

    def requeue_waiting(self, run: _Run) -> None:
        """Re-queue the pending slots that :meth:`ReadyQueues.top` set aside."""
        if run.waiting:
            return
        for k, slot in enumerate(run.slots):
            if slot.status == PENDING:
                self.q.push(run, k)

    def reset_failed(self, wanted: set[int]) -> int:
        """Make failed slots of the kinds ``wanted`` pending again; return how many.

        A kind is reset only when every kind it needs is published; the kinds that
        failed only because it did wait for it again (blocked), unless another kind
        they need is still failed.
        """
        graph = self.graph
        reset = 0
        for order, k in sorted(self.failed):
            run = self.runs[order]
            slots = run.slots
            if k not in wanted or slots[k].status != FAILED:
                continue
            if any(slots[n].status != DONE for n in graph.needs[k]):
                continue
            self.failed.discard((order, k))
            self.move(slots[k], "reset")
            slots[k].retry = None
            self.q.push(run, k)
            reset += 1
            for d in graph.downstream[k]:
                if slots[d].status == FAILED and not any(
                    slots[n].status == FAILED for n in graph.needs[d]
                ):
                    self.failed.discard((order, d))
                    self.move(slots[d], "reset_blocked")
                    slots[d].retry = None
                    reset += 1
        return reset

    def schedule(self, run: _Run, k: int, when: float) -> None:
        """Put the active slot ``k`` in backoff until ``when`` (seconds, caller's clock)."""
        slot = run.slots[k]
        self.move(slot, "retry")
        assert slot.retry is not None  # set when the attempt was claimed
        slot.retry.not_before = when
        self.q.add_timer(run, k, when)

    def wake_timers(self, now: float) -> None:
        """Release the slots whose backoff ended by ``now``: pending, or parked (a page)."""
        progressive = self.graph.progressive
        for run, k in self.q.due_timers(now):
            if k == progressive and run.progressive:
                self.move(run.slots[k], "wake_parked")
                self.q.progressive[run.order] = None
            else:
                self.move(run.slots[k], "wake")
                self.q.push(run, k)

    # --- outcomes -----------------------------------------------------------------------------

    def succeed(
        self, run: _Run, k: int, claim: Claim, result: Any, events: list[SchedulerEvent]
    ) -> None:
        """A conclusive result: publish it; unblock the kinds that needed only it (§4.11)."""
        slot = run.slots[k]
        self.move(slot, "succeed")
        slot.retry = None
        slot.done_revision = claim.revision
        events.append(
            Published(
                run_id=run.run_id,
                guid=run.guid,
                kind=claim.kind,
                revision=claim.revision,
                result=result,
                generation=claim.generation,
                attempt=claim.attempt,
            )
        )
        graph = self.graph
        if k == graph.progressive:
            run.progressive = False
        slots = run.slots
        for d in graph.dependents[k]:
            if slots[d].status == BLOCKED and all(slots[n].status == DONE for n in graph.needs[d]):
                self.move(slots[d], "unblock")
                self.q.push(run, d)
        self.settle(run, events)

    def park(self, run: _Run, claim: Claim, value: Any, events: list[SchedulerEvent]) -> None:
        """The source says "still being written": park it, page it later (design §4.5)."""
        k = self.graph.progressive
        slot = run.slots[k]
        self.move(slot, "park")
        slot.retry = None
        run.progressive = True
        self.q.progressive[run.order] = None
        events.append(
            Parked(
                run_id=run.run_id,
                guid=run.guid,
                revision=claim.revision,
                result=value,
                kind=claim.kind,
            )
        )

    def transient(
        self,
        run: _Run,
        k: int,
        claim: Claim,
        record: ErrorRecord,
        now: float,
        events: list[SchedulerEvent],
    ) -> None:
        """A transient failure: retry after the policy's backoff, or end (design §4.12).

        Ends ``failed`` for a non-retryable code, past ``maximum_crashes`` crashes or
        ``maximum_attempts`` attempts (with this, the last error), and as
        ``deadline_exceeded`` when the backoff would end at or after the overall deadline.
        """
        slot = run.slots[k]
        retry = slot.retry
        assert retry is not None  # set when the attempt was claimed
        policy = self.graph.policies[k]
        attempts = retry.attempts
        if record.code in policy.crash_codes:
            retry.crashes += 1
        reason = policy.gives_up(record.code, attempts=attempts, crashes=retry.crashes)
        if reason is not None:
            self.fail_slot(run, k, claim, record, events, reason=reason)
            return
        when = now + policy.delay(attempts, self.rng)
        if policy.overall_timeout is not None:
            overall = retry.first_at + policy.overall_timeout
            if when >= overall:
                error = DeadlineExceeded(
                    f"{claim.kind} of run {run.run_id}: attempt {attempts + 1} could not start "
                    f"within the overall deadline ({policy.overall_timeout:g} s after the "
                    f"first attempt); last error {record.code}: {record.message}"
                ).to_record()
                self.fail_slot(run, k, claim, error, events, reason="overall_deadline")
                return
        self.schedule(run, k, when)
        events.append(
            Retrying(
                run_id=run.run_id,
                guid=run.guid,
                kind=claim.kind,
                revision=claim.revision,
                attempt=attempts,
                not_before=when,
                error=record,
            )
        )

    def fail_slot(
        self,
        run: _Run,
        k: int,
        claim: Claim,
        record: ErrorRecord,
        events: list[SchedulerEvent],
        *,
        reason: str = "permanent",
    ) -> None:
        """End the active slot ``k`` failed; every kind that needs it fails too (§4.11)."""
        slot = run.slots[k]
        attempts = 0 if slot.retry is None else slot.retry.attempts
        self.move(slot, "fail")
        slot.retry = None
        self.failed.add((run.order, k))
        events.append(
            Failed(
                run_id=run.run_id,
                guid=run.guid,
                kind=claim.kind,
                revision=claim.revision,
                error=record,
                reason=reason,
                attempts=attempts,
            )
        )
        graph = self.graph
        if k == graph.progressive:
            run.progressive = False
        for d in graph.downstream[k]:
            if run.slots[d].status == BLOCKED:
                self.move(run.slots[d], "fail")
                self.failed.add((run.order, d))
                events.append(
                    Failed(
                        run_id=run.run_id,
                        guid=run.guid,
                        kind=graph.names[d],
                        revision=claim.revision,
                        error=record,
                        cause_kind=claim.kind,
                        reason="needs_failed",
                    )
                )
        self.settle(run, events)

    def interrupt(
        self, run: _Run, k: int, claim: Claim, now: float, events: list[SchedulerEvent]
    ) -> None:
        """The active slot ``k``'s attempt was cut off by a shutdown (design §4.13).

        Not a verdict: the attempt is given back and the slot waits ``interrupted``
        until a reset makes it pending again.
        """
        slot = run.slots[k]
        self.move(slot, "interrupt")
        slot.retry = None
        if k == self.graph.progressive:
            self.q.progressive.pop(run.order, None)
        events.append(
            Interrupted(
                run_id=run.run_id,
                guid=run.guid,
                kind=claim.kind,
                revision=claim.revision,
                attempt=claim.attempt,
                at=now,
            )
        )

    def settle(self, run: _Run, events: list[SchedulerEvent]) -> None:
        """Report :class:`Settled` when every kind of the run is done or failed."""
        for slot in run.slots:
            if slot.status != DONE and slot.status != FAILED:
                return
        names = self.graph.names
        events.append(
            Settled(
                run_id=run.run_id,
                guid=run.guid,
                revision=run.revision,
                published=tuple(names[k] for k, s in enumerate(run.slots) if s.status == DONE),
                failed=tuple(names[k] for k, s in enumerate(run.slots) if s.status == FAILED),
            )
        )

    def end_of_claim(self, run: _Run, events: list[SchedulerEvent]) -> None:
        """Apply a deferred source change once the run's last active claim ended (§4.8)."""
        if run.active == 0 and run.deferred is not None:
            revision = run.deferred
            run.deferred = None
            if revision != run.revision:
                self.reset(run, revision, events)
            else:
                self.requeue_waiting(run)

    def reset(self, run: _Run, revision: str, events: list[SchedulerEvent]) -> None:
        """All kinds pending (or blocked) again at ``revision``; failures forgotten."""
        old = run.revision
        run.revision = revision
        run.deferred = None
        run.progressive = False
        self.q.progressive.pop(run.order, None)
        needs = self.graph.needs
        for k, slot in enumerate(run.slots):
            self.failed.discard((run.order, k))
            slot.retry = None
            if not needs[k]:
                self.move(slot, "reset")
                self.q.push(run, k)
            else:
                self.move(slot, "reset_blocked")
                self.q.unqueue(slot, k)
        events.append(
            Invalidated(run_id=run.run_id, guid=run.guid, old_revision=old, revision=revision)
        )
