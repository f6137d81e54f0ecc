"""The scheduler core: a sans-io state machine over runs x kinds (design §4).

No trio, no I/O, no clock: every call that depends on time takes ``now`` (seconds on
the caller's clock, e.g. ``trio.current_time()``). :class:`~actors.SchedulerActor`
drives it; tests drive it directly.

Theory of operation
===================

*Ordering (§4.2, §4.3).* Claimable slots live in nine binary heaps, one per
(tier, kind), holding the run's position in the append-only table. The best claim is
the top of the first non-empty heap in (tier, kind) order, so a claim costs
``O(log n)`` and never scans the table. Entries are invalidated lazily: a slot records
the tier of its one live entry (``queued``); an entry whose slot is no longer pending
there is discarded when it reaches the top. ``set_priority`` re-keys only the runs whose
tier changed (the old and new selected/visible runs). Heaps are compacted when stale
entries outnumber live ones.

*Retries (§4.6).* A transient failure puts the slot in a timer heap keyed by the end
of its backoff; :meth:`Scheduler.next_wakeup` gives the earliest such time (or the next
progressive page's pacing time) so the actor can sleep until exactly then.

*Anti-starvation (§4.4).* After ``aging_after`` (8) consecutive claims of selected or
visible work, the best remaining-tier metadata item goes next, unless the selected run's
thumbnail or preview is ready to go. A due progressive page goes first in its tier
after ``page_after`` (3) ordinary claims of that tier.

*Progressive sources (§4.5).* A metadata result wrapped in
:class:`~actors.Progressive` (or a ``source_not_ready`` failure) parks the slot: a
:class:`~actors.Parked` notice, nothing published. Parked runs are re-polled in rounds
ordered (tier, run order); pages are at least ``page_interval`` (10 ms) apart; a run that
becomes selected or visible jumps to the front of the current round.

*Fencing (§4.8, §4.9).* Each claim records generation, helper incarnation, GUID and
revision. A completion that does not match the current ones is dropped (a
:class:`~actors.Dropped` event, never published); work still wanted is queued again.
``source_changed`` on a run with an active claim is deferred until its last claim ends.
A slot is published once per revision: it is claimable only while not done at the
run's current revision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ActorError, ErrorRecord, ScheduleRejected, SourceNotReady
from ._state import (
    BACKOFF,
    BLOCKED,
    DONE,
    FAILED,
    KINDS,
    METADATA,
    PARKED,
    PENDING,
    REMAINING,
    SELECTED,
    STATUS_NAMES,
    TIERS,
    VISIBLE,
    Claim,
    Dropped,
    Progressive,
    RunInfo,
    SchedulerConfig,
    SchedulerEvent,
    SchedulerStatistics,
    _Run,
)
from ._table import RunTable

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["Scheduler"]

_KIND_INDEX = {kind: index for index, kind in enumerate(KINDS)}


class Scheduler:
    """Priority scheduler of metadata/thumbnail/preview work over a run table (design §4).

    Args:
        runs: The source's runs, in table order.
        source: Identity of the source (e.g. the database path); copied into claims.
        config: Settings; defaults to :class:`SchedulerConfig()`.

    Raises:
        ScheduleRejected: (code ``schedule_rejected``, a ValueError) runs share an id/GUID.
    """

    # Set by ``_install`` (at construction and on every source switch).
    _t: RunTable
    _selected: int | None
    _visible: frozenset[int]
    _pending_priority: tuple[int | None, frozenset[int]] | None
    _fg_streak: int
    _since_page: list[int]

    def __init__(
        self,
        runs: Iterable[RunInfo] = (),
        *,
        source: str = "",
        config: SchedulerConfig | None = None,
    ) -> None:
        self._config = config if config is not None else SchedulerConfig()
        self._generation = 0
        self._incarnation = 0
        self._active: dict[int, tuple[Claim, _Run]] = {}
        self._next_claim_id = 1
        self._claims = 0
        self._published = 0
        self._dropped = 0
        self._bumps = 0
        self._install(source, RunTable.checked(runs))

    # --- queries -------------------------------------------------------------------------

    @property
    def config(self) -> SchedulerConfig:
        """The settings in use."""
        return self._config

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
        """The slot status: blocked, pending, active, backoff, parked, done or failed.

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) unknown run id.
            KeyError: unknown kind.
        """
        return STATUS_NAMES[self._t.lookup(run_id, "run_id").slots[_KIND_INDEX[kind]].status]

    def revision(self, run_id: int) -> str:
        """The run's current revision (the old one while an invalidation is deferred)."""
        return self._t.lookup(run_id, "run_id").revision

    def deferred_revision(self, run_id: int) -> str | None:
        """The revision waiting for the run's active claims to end, or None (§4.8)."""
        return self._t.lookup(run_id, "run_id").deferred

    def tier(self, run_id: int) -> str:
        """The run's applied tier: selected, visible or remaining (design §4.2)."""
        return TIERS[self._t.lookup(run_id, "run_id").tier]

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
            blocked=counts[BLOCKED],
            backoff=counts[BACKOFF],
            parked=counts[PARKED],
            done=counts[DONE],
            failed=counts[FAILED],
            claims=self._claims,
            published=self._published,
            dropped=self._dropped,
            priority_pending=self._pending_priority is not None,
        )

    # --- inputs that change what is wanted ------------------------------------------------

    def set_priority(self, selected: int | None, visible: Iterable[int] = ()) -> None:
        """Choose the selected run and the visible runs (design §4.2).

        Validated now, applied atomically at the next work boundary (the next
        :meth:`claim`); a later call before that replaces this one. Claims already
        handed out are not affected.

        Args:
            selected: The selected run's id, or None.
            visible: Ids of the runs in the viewport (duplicates are ignored).

        Raises:
            ScheduleRejected: (code ``schedule_rejected``, a ValueError) an id is not a
                run of the current source (bools are not ids), or ``visible`` is not an
                iterable of ids (a str is refused); nothing changed.
        """
        sel = None if selected is None else self._t.lookup(selected, "selected").order
        if isinstance(visible, str | bytes) or not hasattr(visible, "__iter__"):
            raise ScheduleRejected(f"visible must be an iterable of run ids, got {visible!r:.80}")
        vis = frozenset(self._t.lookup(run_id, "visible").order for run_id in visible)
        self._pending_priority = (sel, vis)

    def source_changed(self, run_id: int, revision: str | None = None) -> list[SchedulerEvent]:
        """The run's source data changed (design §4.8).

        If a claim of the run is active, the change is deferred until the run's last
        active claim ends (its result for the old revision may still publish);
        otherwise every kind of the run is pending again at the new revision, and
        failures and backoffs of the run are forgotten.

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
        runs after them are appended (pending metadata, remaining tier). A known run
        whose revision differs gets :meth:`source_changed`. Costs ``O(len(runs))``.

        Returns:
            The :class:`Invalidated` events of runs whose revision changed.

        Raises:
            ScheduleRejected: (code ``schedule_rejected``, a ValueError) a known run is
                missing, reordered or has another GUID, or a new id or GUID repeats
                one; nothing changed.
        """
        infos = list(runs)
        table = self._t.runs
        if len(infos) < len(table):
            missing = table[len(infos)].run_id
            raise ScheduleRejected(
                f"reconcile: run {missing} was removed; the run table is append-only",
                run_id=missing,
            )
        for run, info in zip(table, infos, strict=False):
            if not isinstance(info, RunInfo):
                raise ScheduleRejected(f"reconcile: expected RunInfo, got {info!r}")
            if info.run_id != run.run_id or info.guid != run.guid:
                raise ScheduleRejected(
                    f"reconcile: position {run.order} holds run {run.run_id} "
                    f"(guid {run.guid!r}), got run {info.run_id} (guid {info.guid!r}); "
                    "the run table is append-only",
                    run_id=run.run_id,
                )
        new = infos[len(table) :]  # known GUIDs: only a new run can repeat one
        added = RunTable.checked(new, existing=self._t.by_id, guids={r.guid for r in table})
        events: list[SchedulerEvent] = []
        for run, info in zip(table, infos, strict=False):
            if info.revision != (run.deferred or run.revision):
                events.extend(self.source_changed(run.run_id, info.revision))
        for info in added:
            self._t.append(info)
        return events

    def switch_source(self, source: str, runs: Iterable[RunInfo]) -> list[int]:
        """Replace the source and its run table: a new generation (design §4.8).

        Every completion of an older generation is stale. Priorities, retries,
        failures and progressive rounds start afresh.

        Args:
            source: Identity of the new source.
            runs: Its runs, in table order.

        Returns:
            Ids of the active claims that became stale (the actor cancels them).

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) runs share an id or GUID.
        """
        infos = RunTable.checked(runs)
        stale = list(self._active)
        self._generation += 1
        self._install(source, infos)
        return stale

    def helper_restarted(self) -> list[int]:
        """The helper was restarted: results of the old incarnation are invalid (§4.8).

        Active claims of ``config.helper_kinds`` (metadata by default) will be dropped
        when they report, and their work queued again.

        Returns:
            Ids of the active claims that became stale (claimed under the incarnation
            that just ended).
        """
        old = self._incarnation
        self._incarnation += 1
        helper_kinds = self._config.helper_kinds
        return [
            claim_id
            for claim_id, (claim, _run) in self._active.items()
            if claim.kind in helper_kinds
            and claim.generation == self._generation
            and claim.incarnation == old
        ]

    def format_changed(self, kinds: Iterable[str] | None = None) -> int:
        """The renderer version or options changed: retry permanent failures (design §4.6).

        Failed slots of ``kinds`` become pending again (a thumbnail or preview that
        failed only because its metadata failed waits for the metadata). Published
        results stay published (design §4.9).

        Args:
            kinds: Kinds whose format changed; None for all.

        Returns:
            How many slots were reset.

        Raises:
            KeyError: an unknown kind.
        """
        wanted = {_KIND_INDEX[kind] for kind in (KINDS if kinds is None else kinds)}
        return self._t.reset_failed(wanted)

    # --- work ------------------------------------------------------------------------------

    def claim(self, now: float) -> Claim | None:
        """Hand out the next unit of work, if any may start now (design §4.2-§4.5).

        This is the work boundary: a pending ``set_priority`` is applied first, and
        backoffs that ended by ``now`` are released.

        Args:
            now: Current time, seconds on the caller's clock.

        Returns:
            The claim (its deadline is ``now + config.job_deadline``), or None when
            ``config.workers`` claims are active or nothing is claimable.
        """
        self._apply_priority()
        self._t.wake_timers(now)
        if len(self._active) >= self._config.workers:
            return None
        pick = self._pick(now)
        if pick is None:
            return None
        run, k, page = pick
        tier = run.tier
        if page:
            self._t.q.take_page(run, now)
            self._since_page[tier] = 0
        else:
            self._t.q.pop(run, k)
            self._since_page[tier] += 1
        self._fg_streak = 0 if tier == REMAINING else self._fg_streak + 1
        slot = run.slots[k]
        self._t.move(slot, "claim")
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
            kind=KINDS[k],
            revision=run.revision,
            source=self._t.source,
            generation=self._generation,
            incarnation=self._incarnation,
            attempt=slot.attempt + 1,
            deadline=now + self._config.job_deadline,
            tier=TIERS[tier],
            page=page,
            first=first,
        )
        self._active[claim_id] = (claim, run)
        return claim

    def complete(self, claim_id: int, result: Any, *, now: float) -> list[SchedulerEvent]:
        """Report that a claim's job returned ``result`` (design §4.5, §4.8, §4.9).

        Args:
            claim_id: :attr:`Claim.claim_id`.
            result: The payload or metadata; :class:`Progressive` for a metadata read of
                a run still being written (parked, not published).
            now: Current time, seconds on the caller's clock.

        Returns:
            Events in order: :class:`Published` (or :class:`Parked`, :class:`Dropped`,
            :class:`Retrying`), then :class:`Settled` and :class:`Invalidated` as they
            apply.

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) the claim is not active.
        """
        claim, run = self._release(claim_id)
        events: list[SchedulerEvent] = []
        if self._fenced(claim, run, events):
            return events
        k = _KIND_INDEX[claim.kind]
        if not isinstance(result, Progressive):
            self._t.succeed(run, k, claim, result, events)
            self._published += 1
        elif k == METADATA:
            self._t.park(run, claim, result.value, events)
        else:
            record = SourceNotReady(f"{claim.kind} source still being written").to_record()
            self._t.retry(run, k, claim, record, now, events)
        self._t.end_of_claim(run, events)
        return events

    def fail(
        self, claim_id: int, error: ActorError | ErrorRecord, *, now: float
    ) -> list[SchedulerEvent]:
        """Report that a claim's job failed, classified by category (design §4.6).

        ``transient``: retried after the backoff. ``permanent``: failed until the
        source or format changes (a metadata failure fails its thumbnail and preview
        too). ``stale``: dropped silently; work still wanted is queued again after
        ``backoff.base`` seconds. ``source_not_ready`` on metadata parks it (§4.5).

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
        k = _KIND_INDEX[claim.kind]
        if record.category == "stale":
            self._drop(claim, "stale", events)
            self._t.schedule(run, k, now + self._config.backoff.base)
        elif record.code == SourceNotReady.code and k == METADATA:
            self._t.park(run, claim, None, events)
        elif record.category == "transient":
            self._t.retry(run, k, claim, record, now, events)
        else:
            self._t.fail_slot(run, k, claim, record, events)
        self._t.end_of_claim(run, events)
        return events

    # --- internals: choosing ----------------------------------------------------------------

    def _install(self, source: str, infos: list[RunInfo]) -> None:
        self._t = RunTable(source, self._config.backoff)
        self._selected = None
        self._visible = frozenset()
        self._pending_priority = None
        self._fg_streak = 0
        """Consecutive claims of selected or visible work (design §4.4)."""
        self._since_page = [0, 0, 0]
        """Ordinary claims per tier since that tier's last progressive page (§4.4)."""
        for info in infos:
            self._t.append(info)

    def _pick(self, now: float) -> tuple[_Run, int, bool] | None:
        queues = self._t.q
        best = queues.best()
        config = self._config
        page = queues.peek_page(now, config.page_interval)
        if best is None and page is None:
            return None
        ordinary_tier = best[0].tier if best is not None else 3
        page_tier = page.tier if page is not None else 3
        if (
            self._fg_streak >= config.aging_after
            and min(ordinary_tier, page_tier) < REMAINING
            and not self._selected_images_ready()
        ):
            aged = queues.top(REMAINING * 3 + METADATA)
            if aged is not None:
                return aged, METADATA, False
            if page is not None and page_tier == REMAINING:
                return page, METADATA, True
        if page is not None and (
            page_tier < ordinary_tier
            or (page_tier == ordinary_tier and self._since_page[page_tier] >= config.page_after)
        ):
            return page, METADATA, True
        assert best is not None
        return best[0], best[1], False

    def _selected_images_ready(self) -> bool:
        if self._selected is None:
            return False
        run = self._t.runs[self._selected]
        if run.deferred is not None:
            return False
        return any(slot.status == PENDING and slot.queued >= 0 for slot in run.slots[1:])

    def _apply_priority(self) -> None:
        pending = self._pending_priority
        if pending is None:
            return
        self._pending_priority = None
        sel, vis = pending
        old_sel, old_vis = self._selected, self._visible
        self._selected, self._visible = sel, vis
        affected = set(old_vis) | vis
        affected.update(order for order in (old_sel, sel) if order is not None)
        for order in affected:
            run = self._t.runs[order]
            tier = SELECTED if order == sel else VISIBLE if order in vis else REMAINING
            if tier != run.tier:
                run.tier = tier
                for k, slot in enumerate(run.slots):
                    if slot.status == PENDING and slot.queued >= 0:
                        self._t.q.push(run, k)
        # Newly selected or visible progressive runs jump to the front of the round
        # (selected first, then visible in run order).
        jumpers = sorted((vis - old_vis) - {sel}, reverse=True)
        if sel is not None and sel != old_sel:
            jumpers.append(sel)
        self._t.q.jump(jumpers)

    # --- internals: outcomes ---------------------------------------------------------------

    def _release(self, claim_id: int) -> tuple[Claim, _Run]:
        entry = self._active.pop(claim_id, None) if type(claim_id) is int else None  # not True
        if entry is None:
            raise ScheduleRejected(f"claim {claim_id!r} is not active", claim_id=claim_id)
        entry[1].active -= 1
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
        if claim.kind in self._config.helper_kinds and claim.incarnation != self._incarnation:
            reason = "incarnation"
        elif claim.revision != run.revision or claim.guid != run.guid:
            reason = "revision"  # unreachable while deferral works; kept as a fence
        else:
            return False
        self._drop(claim, reason, events)
        k = _KIND_INDEX[claim.kind]
        self._t.requeue(run, k, page=claim.page)
        self._t.end_of_claim(run, events)
        return True
