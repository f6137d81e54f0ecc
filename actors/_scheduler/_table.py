"""The run table of the scheduler core and what outcomes do to its slots (design §4).

Pure: no trio, no I/O. :class:`RunTable` owns one source generation's runs, their
slots (moved only through :data:`actors._scheduler._state.SLOT_TRANSITIONS`), the ready
indexes (:class:`actors._scheduler._queue.ReadyQueues`) and the set of failed slots. The
policy (which claim goes next, fencing, priorities) is
:class:`actors._scheduler._scheduler.Scheduler`.

Each outcome method appends the events it causes to ``events``, in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ScheduleRejected
from ._queue import ReadyQueues
from ._state import (
    BLOCKED,
    DONE,
    FAILED,
    KINDS,
    METADATA,
    PENDING,
    STATUS_NAMES,
    Failed,
    Invalidated,
    Parked,
    Published,
    Retrying,
    RunInfo,
    Settled,
    _Run,
    _Slot,
    move,
)

if TYPE_CHECKING:
    from .._core._backoff import Backoff
    from ..errors import ErrorRecord
    from ._state import Claim, SchedulerEvent

__all__ = ["RunTable"]


class RunTable:
    """The runs of one source generation, in append-only order (design §4.1).

    Args:
        source: Identity of the source.
        backoff: Retry policy for transient failures (design §4.6).
    """

    __slots__ = ("backoff", "by_id", "counts", "failed", "q", "runs", "source")

    def __init__(self, source: str, backoff: Backoff) -> None:
        self.source = source
        self.backoff = backoff
        self.runs: list[_Run] = []
        self.by_id: dict[int, _Run] = {}
        self.q = ReadyQueues(self.runs)
        self.counts = [0] * len(STATUS_NAMES)
        """Slots per status (index: status)."""
        self.failed: set[tuple[int, int]] = set()
        """(order, kind) of failed slots, so a format change costs O(failures)."""

    @staticmethod
    def checked(runs: Any, *, existing: Any = (), guids: Any = ()) -> list[RunInfo]:
        """Return ``runs`` as a list after checking types, id and GUID uniqueness.

        A GUID identifies a run's results: payloads are cached and completions fenced
        by it (design §4.8, §4.10), so two runs sharing one would share cached images.

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

    def append(self, info: RunInfo) -> None:
        """Add a run at the end: metadata pending, remaining tier."""
        run = _Run(info.run_id, info.guid, info.revision, len(self.runs))
        self.runs.append(run)
        self.by_id[info.run_id] = run
        self.counts[PENDING] += 1
        self.counts[BLOCKED] += 2
        self.q.push(run, METADATA)

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
        """Put an active slot whose result was stale back where it came from."""
        if page:
            self.move(run.slots[k], "park")
            self.q.progressive[run.order] = None
        else:
            self.move(run.slots[k], "requeue")
            self.q.push(run, k)

    def reset_failed(self, wanted: set[int]) -> int:
        """Make failed slots of the kinds ``wanted`` pending again; return how many.

        A thumbnail or preview that failed only because its metadata did waits for
        the metadata (it goes back to blocked when the metadata is reset).
        """
        reset = 0
        for order, k in sorted(self.failed):
            run = self.runs[order]
            if k not in wanted or run.slots[k].status != FAILED:
                continue
            if k != METADATA and run.slots[METADATA].status != DONE:
                continue
            self.failed.discard((order, k))
            self.move(run.slots[k], "reset")
            self.q.push(run, k)
            reset += 1
            if k == METADATA:
                for dk in (1, 2):
                    if run.slots[dk].status == FAILED:
                        self.failed.discard((order, dk))
                        self.move(run.slots[dk], "reset_blocked")
                        reset += 1
        return reset

    def schedule(self, run: _Run, k: int, when: float) -> None:
        """Put the active slot ``k`` in backoff until ``when`` (seconds, caller's clock)."""
        slot = run.slots[k]
        self.move(slot, "retry")
        slot.not_before = when
        self.q.add_timer(run, k, when)

    def wake_timers(self, now: float) -> None:
        """Release the slots whose backoff ended by ``now``: pending, or parked (a page)."""
        for run, k in self.q.due_timers(now):
            if k == METADATA and run.progressive:
                self.move(run.slots[k], "wake_parked")
                self.q.progressive[run.order] = None
            else:
                self.move(run.slots[k], "wake")
                self.q.push(run, k)

    def succeed(
        self, run: _Run, k: int, claim: Claim, result: Any, events: list[SchedulerEvent]
    ) -> None:
        """A conclusive result: publish it; metadata unblocks the images (design §4.1)."""
        slot = run.slots[k]
        self.move(slot, "succeed")
        slot.attempt = 0
        slot.done_revision = claim.revision
        events.append(
            Published(
                run_id=run.run_id,
                guid=run.guid,
                kind=claim.kind,
                revision=claim.revision,
                result=result,
                generation=claim.generation,
            )
        )
        if k == METADATA:
            run.progressive = False
            for dk in (1, 2):
                if run.slots[dk].status == BLOCKED:
                    self.move(run.slots[dk], "unblock")
                    self.q.push(run, dk)
        self.settle(run, events)

    def park(self, run: _Run, claim: Claim, value: Any, events: list[SchedulerEvent]) -> None:
        """The metadata says "still being written": park it, page it later (design §4.5)."""
        slot = run.slots[METADATA]
        self.move(slot, "park")
        slot.attempt = 0
        run.progressive = True
        self.q.progressive[run.order] = None
        events.append(
            Parked(run_id=run.run_id, guid=run.guid, revision=claim.revision, result=value)
        )

    def retry(
        self,
        run: _Run,
        k: int,
        claim: Claim,
        record: ErrorRecord,
        now: float,
        events: list[SchedulerEvent],
    ) -> None:
        """A transient failure: back off ``min(cap, base * 2**(attempt-1))`` (design §4.6)."""
        slot = run.slots[k]
        backoff = self.backoff
        slot.attempt += 1
        if backoff.max_attempt is not None:
            slot.attempt = min(slot.attempt, backoff.max_attempt)
        when = now + backoff.delay(slot.attempt)
        self.schedule(run, k, when)
        events.append(
            Retrying(
                run_id=run.run_id,
                guid=run.guid,
                kind=claim.kind,
                revision=claim.revision,
                attempt=slot.attempt,
                not_before=when,
                error=record,
            )
        )

    def fail_slot(
        self, run: _Run, k: int, claim: Claim, record: ErrorRecord, events: list[SchedulerEvent]
    ) -> None:
        """A permanent failure; failed metadata fails the images too (design §4.6)."""
        self.move(run.slots[k], "fail")
        self.failed.add((run.order, k))
        events.append(
            Failed(
                run_id=run.run_id,
                guid=run.guid,
                kind=claim.kind,
                revision=claim.revision,
                error=record,
            )
        )
        if k == METADATA:
            run.progressive = False
            for dk in (1, 2):
                if run.slots[dk].status == BLOCKED:
                    self.move(run.slots[dk], "fail")
                    self.failed.add((run.order, dk))
                    events.append(
                        Failed(
                            run_id=run.run_id,
                            guid=run.guid,
                            kind=KINDS[dk],
                            revision=claim.revision,
                            error=record,
                            cause_kind="metadata",
                        )
                    )
        self.settle(run, events)

    def settle(self, run: _Run, events: list[SchedulerEvent]) -> None:
        """Report :class:`Settled` when every kind of the run is done or failed."""
        meta, thumb, prev = run.slots
        if meta.status < DONE or thumb.status < DONE or prev.status < DONE:
            return  # DONE and FAILED are the two highest statuses
        statuses = (meta.status, thumb.status, prev.status)
        events.append(
            Settled(
                run_id=run.run_id,
                guid=run.guid,
                revision=run.revision,
                published=tuple(KINDS[k] for k, s in enumerate(statuses) if s == DONE),
                failed=tuple(KINDS[k] for k, s in enumerate(statuses) if s == FAILED),
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
                for k, slot in enumerate(run.slots):  # re-queue what top() set aside
                    if slot.status == PENDING:
                        self.q.push(run, k)

    def reset(self, run: _Run, revision: str, events: list[SchedulerEvent]) -> None:
        """All kinds pending again at ``revision``; failures and backoffs forgotten."""
        old = run.revision
        run.revision = revision
        run.deferred = None
        run.progressive = False
        self.q.progressive.pop(run.order, None)
        for k, slot in enumerate(run.slots):
            self.failed.discard((run.order, k))
            slot.attempt = 0
            if k == METADATA:
                self.move(slot, "reset")
                self.q.push(run, k)
            else:
                self.move(slot, "reset_blocked")
                self.q.unqueue(slot, k)
        events.append(
            Invalidated(run_id=run.run_id, guid=run.guid, old_revision=old, revision=revision)
        )
