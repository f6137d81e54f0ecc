"""The scheduler core: a sans-io state machine over runs x declared kinds (design §4).

No trio, no I/O, no clock: every call that depends on time takes ``now`` (seconds on
the caller's clock, e.g. ``trio.current_time()``). :class:`~actors.SchedulerActor`
drives it; tests drive it directly. The parts it owns: :class:`~actors._scheduler.
_table.RunTable` (slots and outcomes, with the ready heaps of
:class:`~actors._scheduler._queue.ReadyQueues`) and :class:`~actors._scheduler._priority.
Priorities` (tiers).

Theory of operation, in short (each rule is explained in the design section cited):
claims come from one heap per (tier, kind), so a claim costs ``O(log n)`` and never
scans the table (§4.2, §4.3); a kind is claimable once every kind it needs is published
at the run's revision (§4.11); a failed attempt is retried or ended by its kind's
:class:`~actors.RetryPolicy`, and a timer heap gives the next wake-up (§4.12); a slot is
active from its claim until its outcome is reported after the execution ended, and a
run of a new generation waits for an older execution of its GUID (§4.13); aging and
progressive pages keep the last tier and sources still being written moving (§4.4,
§4.5); completions of another generation, incarnation or revision are dropped, never
published (§4.8, §4.9).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..errors import ActorError, ErrorRecord, ScheduleRejected, SourceNotReady
from ._events import Dropped, SchedulerStatistics
from ._priority import Priorities
from ._state import (
    BACKOFF,
    BLOCKED,
    DONE,
    FAILED,
    INTERRUPTED,
    PARKED,
    STATUS_NAMES,
    Claim,
    Progressive,
    RunInfo,
    SchedulerConfig,
    _Retry,
    _Run,
)
from ._table import RunTable

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ._events import SchedulerEvent

__all__ = ["Scheduler"]


class Scheduler:
    """Priority scheduler of the declared kinds of work over a run table (design §4).

    Args:
        runs: The source's runs, in table order.
        source: Identity of the source (e.g. the database path); copied into claims.
        config: Settings (kinds, tiers, K, pacing); defaults to ``SchedulerConfig()``.
        rng: Random source for retry jitter (design §4.12); a seeded one makes jittered
            delays reproducible. Default: a fresh ``random.Random()``.

    Raises:
        ScheduleRejected: (code ``schedule_rejected``, a ValueError) runs share an id/GUID,
            or ``source`` is not a str.
    """

    # Set by ``_install`` (at construction and on every source switch).
    _t: RunTable
    _priorities: Priorities

    def __init__(
        self,
        runs: Iterable[RunInfo] = (),
        *,
        source: str = "",
        config: SchedulerConfig | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._config = config if config is not None else SchedulerConfig()
        self._graph = self._config.graph
        self._rng = rng if rng is not None else random.Random()
        self._generation = 0
        self._incarnation = 0
        self._active: dict[int, tuple[Claim, _Run]] = {}
        self._older: Counter[str] = Counter()
        """GUID -> claims of older generations still executing (design §4.13)."""
        self._next_claim_id = 1
        self._claims = 0
        self._published = 0
        self._dropped = 0
        self._bumps = 0
        _check_source(source)
        self._install(source, RunTable.checked(runs))

    # --- queries -------------------------------------------------------------------------

    @property
    def config(self) -> SchedulerConfig:
        """The settings in use."""
        return self._config

    @property
    def kinds(self) -> tuple[str, ...]:
        """The declared kinds' names, in priority order (design §4.11)."""
        return self._graph.names

    @property
    def generation(self) -> int:
        """Source generation; bumped by :meth:`switch_source` (design §4.8)."""
        return self._generation

    @property
    def incarnation(self) -> int:
        """Helper incarnation; bumped by :meth:`helper_restarted` (design §4.8)."""
        return self._incarnation

    @property
    def source(self) -> str:
        """Identity of the current source."""
        return self._t.source

    def __len__(self) -> int:
        return len(self._t.runs)

    def run_ids(self) -> list[int]:
        """The run ids in table order."""
        return [run.run_id for run in self._t.runs]

    def status(self, run_id: int, kind: str) -> str:
        """The slot status: blocked, pending, active, backoff, parked, done, failed or
        interrupted (an attempt cut off by a shutdown, design §4.13).

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) unknown run id.
            ValueError: ``kind`` is not a declared kind.
        """
        run = self._t.lookup(run_id, "run_id")
        return STATUS_NAMES[run.slots[self._graph.lookup(kind, "kind")].status]

    def attempts(self, run_id: int, kind: str) -> int:
        """Attempts of the slot's current retry sequence (0 once it succeeded or ended).

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) unknown run id.
            ValueError: ``kind`` is not a declared kind.
        """
        run = self._t.lookup(run_id, "run_id")
        retry = run.slots[self._graph.lookup(kind, "kind")].retry
        return 0 if retry is None else retry.attempts

    def revision(self, run_id: int) -> str:
        """The run's current revision (the old one while an invalidation is deferred)."""
        return self._t.lookup(run_id, "run_id").revision

    def deferred_revision(self, run_id: int) -> str | None:
        """The revision waiting for the run's active claims to end, or None (§4.8)."""
        return self._t.lookup(run_id, "run_id").deferred

    def tier(self, run_id: int) -> str:
        """The run's applied tier (design §4.2)."""
        return self._config.tiers[self._t.lookup(run_id, "run_id").tier]

    def active_claims(self) -> list[Claim]:
        """Claims handed out and not yet reported, oldest first."""
        return [claim for claim, _run in self._active.values()]

    def next_wakeup(self) -> float | None:
        """When a claim may next become possible without any other input.

        Returns:
            The earliest backoff end or progressive pacing time, in seconds on the
            caller's clock, or None when only new input (a completion, a message) can
            make work claimable. The actor sleeps until then (design §4.6: no polling).
        """
        queues = self._t.q
        wake = queues.next_timer()
        if queues.progressive:
            paced = queues.last_page_at + self._config.page_interval
            wake = paced if wake is None else min(wake, paced)
        return wake

    def statistics(self) -> SchedulerStatistics:
        """A snapshot of counts (design §4); pending priority is not applied by this."""
        counts = self._t.counts
        return SchedulerStatistics(
            source=self._t.source,
            generation=self._generation,
            incarnation=self._incarnation,
            runs=len(self._t.runs),
            active=len(self._active),
            ready=self._t.q.ready_counts(),
            ready_by_kind=self._t.q.ready_by_kind(self._graph.names),
            blocked=counts[BLOCKED],
            backoff=counts[BACKOFF],
            parked=counts[PARKED],
            done=counts[DONE],
            failed=counts[FAILED],
            claims=self._claims,
            published=self._published,
            dropped=self._dropped,
            priority_pending=self._priorities.pending is not None,
            held=len(self._t.held),
            interrupted=counts[INTERRUPTED],
        )

    # --- inputs that change what is wanted ------------------------------------------------

    def set_priority(self, selected: int | None, visible: Iterable[int] = ()) -> None:
        """Choose the selected run (first tier) and the visible runs (second tier) (§4.2).

        Validated now, applied atomically at the next work boundary (the next
        :meth:`claim`); a later call before that replaces this one. Claims already
        handed out are not affected. With a single declared tier this changes nothing.

        Args:
            selected: The selected run's id, or None.
            visible: Ids of the runs in the viewport (duplicates are ignored).

        Raises:
            ScheduleRejected: (code ``schedule_rejected``, a ValueError) an id is not a
                run of the current source (bools are not ids), or ``visible`` is not an
                iterable of ids (a str is refused); nothing changed.
        """
        last = len(self._config.tiers) - 1
        chosen = () if selected is None else (selected,)
        self._priorities.validate(
            self._t, [(0, "selected", chosen), (min(1, last), "visible", visible)]
        )

    def set_tiers(self, placements: Mapping[str, Iterable[int]]) -> None:
        """Place runs in declared tiers (design §4.2); the rest go to the last tier.

        Validated now, applied atomically at the next work boundary, like
        :meth:`set_priority`. A run named in several tiers takes the best.

        Args:
            placements: Tier name -> run ids.

        Raises:
            ScheduleRejected: (code ``schedule_rejected``, a ValueError) an unknown tier
                or run id, or a value that is not an iterable of ids; nothing changed.
        """
        index = self._priorities.index
        if not hasattr(placements, "items"):
            raise ScheduleRejected(f"tiers must map tier names to run ids, got {placements!r:.80}")
        for name in placements:
            if name not in index:
                raise ScheduleRejected(f"{name!r:.80} is not a tier {list(self._config.tiers)}")
        self._priorities.validate(
            self._t, [(index[name], name, run_ids) for name, run_ids in placements.items()]
        )

    def source_changed(self, run_id: int, revision: str | None = None) -> list[SchedulerEvent]:
        """The run's source data changed (design §4.8).

        If a claim of the run is active, the change is deferred until the run's last
        active claim ends (its result for the old revision may still publish);
        otherwise every kind of the run is pending (or blocked) again at the new
        revision, and failures and retry state of the run are forgotten.

        Args:
            run_id: The run.
            revision: The new revision; None makes a fresh one (``"<old>~<n>"``).

        Returns:
            ``[Invalidated]`` if applied now, ``[]`` if deferred or unchanged.

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) unknown run id or an empty
                revision; nothing changed.
        """
        run = self._t.lookup(run_id, "run_id")
        if revision is None:
            self._bumps += 1
            base = (run.deferred or run.revision).split("~", 1)[0]
            revision = f"{base}~{self._bumps}"
        elif not isinstance(revision, str) or not revision:
            raise ScheduleRejected(f"revision must be a non-empty str, got {revision!r}")
        events: list[SchedulerEvent] = []
        if run.active:
            run.deferred = revision
        elif revision != run.revision:
            self._t.reset(run, revision, events)
        return events

    def reconcile(self, runs: Iterable[RunInfo]) -> list[SchedulerEvent]:
        """Bring the run table up to date with the source's list (design §4.8).

        The list must start with the known runs, in order, with the same ids and GUIDs;
        runs after them are appended (root kinds pending, last tier). A known run whose
        revision differs gets :meth:`source_changed`. Costs ``O(len(runs))``.

        Returns:
            The :class:`Invalidated` events of runs whose revision changed.

        Raises:
            ScheduleRejected: (code ``schedule_rejected``, a ValueError) a known run is
                missing, reordered or has another GUID, or a new id or GUID repeats
                one; nothing changed.
        """
        infos = list(runs)
        table = self._t.runs
        added = self._t.check_listing(infos)
        events: list[SchedulerEvent] = []
        for run, info in zip(table, infos, strict=False):
            if info.revision != (run.deferred or run.revision):
                events.extend(self.source_changed(run.run_id, info.revision))
        for info in added:
            self._append(info)
        return events

    def switch_source(self, source: str, runs: Iterable[RunInfo]) -> list[int]:
        """Replace the source and its run table: a new generation (design §4.8).

        Every completion of an older generation is stale. Priorities, retries,
        failures and progressive rounds start afresh. A new run whose GUID still has
        an execution of an older generation waits for it to end (design §4.13).

        Args:
            source: Identity of the new source.
            runs: Its runs, in table order.

        Returns:
            Ids of the active claims that became stale (the actor cancels them).

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) runs share an id or GUID, or
                ``source`` is not a str; nothing changed.
        """
        _check_source(source)
        infos = RunTable.checked(runs)
        stale = list(self._active)
        self._older = Counter(claim.guid for claim, _run in self._active.values())
        self._generation += 1
        self._install(source, infos)
        return stale

    def helper_restarted(self) -> list[int]:
        """The helper was restarted: results of the old incarnation are invalid (§4.8).

        Active claims of the kinds declared ``helper`` will be dropped when they
        report, and their work queued again (the attempt is not counted).

        Returns:
            Ids of the active claims that became stale (claimed under the incarnation
            that just ended).
        """
        old = self._incarnation
        self._incarnation += 1
        helper = {self._graph.names[k] for k in self._graph.helper}
        return [
            claim_id
            for claim_id, (claim, _run) in self._active.items()
            if claim.kind in helper
            and claim.generation == self._generation
            and claim.incarnation == old
        ]

    def format_changed(self, kinds: Iterable[str] | None = None) -> int:
        """The renderer version or options changed: retry permanent failures (design §4.6).

        Failed slots of ``kinds`` become pending again once every kind they need is
        published; the kinds that failed only because of them wait for them again.
        Published results stay published (design §4.9).

        Args:
            kinds: Kinds whose format changed; None for all.

        Returns:
            How many slots were reset.

        Raises:
            ValueError: a name is not a declared kind.
        """
        graph = self._graph
        names = graph.names if kinds is None else kinds
        wanted = {graph.lookup(kind, "kinds") for kind in names}
        return self._t.reset_failed(wanted)

    # --- work ------------------------------------------------------------------------------

    def claim(self, now: float) -> Claim | None:
        """Hand out the next attempt, if any may start now (design §4.2-§4.5, §4.12).

        This is the work boundary: a pending ``set_priority`` is applied first, and
        backoffs that ended by ``now`` are released.

        Args:
            now: Current time, seconds on the caller's clock.

        Returns:
            The claim, or None when ``config.workers`` claims are active or nothing is
            claimable. Its deadline is ``now`` plus the kind's per-attempt timeout, cut
            to the overall deadline (which may already have passed: the attempt then
            fails with ``deadline_exceeded`` without running).
        """
        self._priorities.apply(self._t)
        self._t.wake_timers(now)
        if len(self._active) >= self._config.workers:
            return None
        pick = self._priorities.pick(self._t, now, self._config)
        if pick is None:
            return None
        run, k, page = pick
        tier = run.tier
        slot = run.slots[k]
        self._t.move(slot, "claim")
        retry = slot.retry
        if retry is None:
            retry = slot.retry = _Retry(now)
        retry.attempts += 1
        policy = self._graph.policies[k]
        deadline = now + policy.attempt_seconds(self._config.job_deadline)
        overall = None
        if policy.overall_timeout is not None:
            overall = retry.first_at + policy.overall_timeout
            deadline = min(deadline, overall)
        run.active += 1
        first = run.started != run.revision
        run.started = run.revision
        claim_id = self._next_claim_id
        self._next_claim_id += 1
        self._claims += 1
        claim = Claim(
            claim_id=claim_id,
            run_id=run.run_id,
            guid=run.guid,
            kind=self._graph.names[k],
            revision=run.revision,
            source=self._t.source,
            generation=self._generation,
            incarnation=self._incarnation,
            attempt=retry.attempts,
            deadline=deadline,
            tier=self._config.tiers[tier],
            page=page,
            first=first,
            overall_deadline=overall,
        )
        self._active[claim_id] = (claim, run)
        return claim

    def complete(self, claim_id: int, result: Any, *, now: float) -> list[SchedulerEvent]:
        """Report that a claim's attempt produced ``result`` (design §4.5, §4.8, §4.9).

        Call it once the attempt's execution has ended (design §4.13).

        Args:
            claim_id: :attr:`Claim.claim_id`.
            result: The result; :class:`Progressive` from the progressive kind for a
                source still being written (parked, not published).
            now: Current time, seconds on the caller's clock.

        Returns:
            The events it causes, in order. First :class:`Published` (or
            :class:`Parked`, :class:`Dropped`, :class:`Retrying`, :class:`Failed`), then
            :class:`Settled` and :class:`Invalidated` as they apply.

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) the claim is not active.
        """
        claim, run = self._release(claim_id)
        events: list[SchedulerEvent] = []
        if self._fenced(claim, run, events):
            return events
        k = self._graph.index[claim.kind]
        if not isinstance(result, Progressive):
            self._t.succeed(run, k, claim, result, events)
            self._published += 1
        elif k == self._graph.progressive:
            self._t.park(run, claim, result.value, events)
        else:
            record = SourceNotReady(f"{claim.kind} source still being written").to_record()
            self._t.transient(run, k, claim, record, now, events)
        self._t.end_of_claim(run, events)
        return events

    def fail(
        self, claim_id: int, error: ActorError | ErrorRecord, *, now: float
    ) -> list[SchedulerEvent]:
        """Report that a claim's attempt failed, classified by category (design §4.12).

        ``transient``: retried after the kind's backoff, or ended by its policy.
        ``permanent``: failed until the source or format changes (every kind that
        needs it fails too). ``stale``: dropped silently; the attempt is given back and
        the work queued again after the policy's ``initial_interval``.
        ``source_not_ready`` on the progressive kind parks it (§4.5). Call it once the
        attempt's execution has ended (design §4.13).

        Args:
            claim_id: :attr:`Claim.claim_id`.
            error: The error, or its record.
            now: Current time, seconds on the caller's clock.

        Returns:
            The resulting events (see :meth:`complete`).

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) the claim is not active.
        """
        record = error.to_record() if isinstance(error, ActorError) else error
        claim, run = self._release(claim_id)
        events: list[SchedulerEvent] = []
        if self._fenced(claim, run, events):
            return events
        k = self._graph.index[claim.kind]
        if record.category == "stale":
            self._drop(claim, "stale", events)
            retry = run.slots[k].retry
            assert retry is not None  # set when the attempt was claimed
            retry.attempts -= 1
            self._t.schedule(run, k, now + self._graph.policies[k].initial_interval)
        elif record.code == SourceNotReady.code and k == self._graph.progressive:
            self._t.park(run, claim, None, events)
        elif record.category == "transient":
            self._t.transient(run, k, claim, record, now, events)
        else:
            self._t.fail_slot(run, k, claim, record, events)
        self._t.end_of_claim(run, events)
        return events

    def interrupt(self, claim_id: int, *, now: float) -> list[SchedulerEvent]:
        """Report that a claim's attempt was cut off by a shutdown (design §4.13).

        Call it for each attempt still running when the embedder stops for good (the
        actor does, once the attempt's execution has ended). The slot becomes
        ``interrupted``: not failed, not retried, still to do; a change of the run's
        source (:meth:`source_changed`) makes it pending again. A claim of an older
        generation is dropped instead (its work is no longer wanted).

        Args:
            claim_id: :attr:`Claim.claim_id`.
            now: Current time, seconds on the caller's clock.

        Returns:
            ``[Interrupted]`` (or ``[Dropped]``), then ``Invalidated`` if a deferred
            source change now applies.

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) the claim is not active.
        """
        claim, run = self._release(claim_id)
        events: list[SchedulerEvent] = []
        if claim.generation != self._generation:
            self._drop(claim, "generation", events)
            return events
        self._t.interrupt(run, self._graph.index[claim.kind], claim, now, events)
        self._t.end_of_claim(run, events)
        return events

    # --- internals: choosing ----------------------------------------------------------------

    def _install(self, source: str, infos: list[RunInfo]) -> None:
        self._t = RunTable(source, self._graph, len(self._config.tiers), self._rng)
        self._priorities = Priorities(self._config.tiers)
        for info in infos:
            self._append(info)

    def _append(self, info: RunInfo) -> None:
        run = self._t.append(info)
        older = self._older.get(info.guid)
        if older:  # its GUID still executes in an older generation (design §4.13)
            run.held = older
            self._t.held[info.guid] = run

    # --- internals: outcomes ---------------------------------------------------------------

    def _release(self, claim_id: int) -> tuple[Claim, _Run]:
        entry = self._active.pop(claim_id, None) if type(claim_id) is int else None  # not True
        if entry is None:
            raise ScheduleRejected(f"claim {claim_id!r} is not active", claim_id=claim_id)
        claim, run = entry
        run.active -= 1
        if claim.generation != self._generation:
            # An older generation's execution ended: a run holding for it may start.
            guid = claim.guid
            self._older[guid] -= 1
            if self._older[guid] <= 0:
                del self._older[guid]
            self._t.release_hold(guid)
        return entry

    def _drop(self, claim: Claim, reason: str, events: list[SchedulerEvent]) -> None:
        self._dropped += 1
        events.append(
            Dropped(
                run_id=claim.run_id,
                guid=claim.guid,
                kind=claim.kind,
                revision=claim.revision,
                reason=reason,
            )
        )

    def _fenced(self, claim: Claim, run: _Run, events: list[SchedulerEvent]) -> bool:
        # True when the completion is stale and has been dealt with (design §4.8).
        if claim.generation != self._generation:
            self._drop(claim, "generation", events)  # the run belongs to a past table
            return True
        k = self._graph.index[claim.kind]
        if k in self._graph.helper and claim.incarnation != self._incarnation:
            reason = "incarnation"
        elif claim.revision != run.revision or claim.guid != run.guid:
            reason = "revision"  # unreachable while deferral works; kept as a fence
        else:
            return False
        self._drop(claim, reason, events)
        self._t.requeue(run, k, page=claim.page)
        self._t.end_of_claim(run, events)
        return True


def _check_source(source: object) -> None:
    # The source is part of every cache key: a non-str one would fail there, later.
    if not isinstance(source, str):
        raise ScheduleRejected(f"source must be a str, got {type(source).__name__}")
