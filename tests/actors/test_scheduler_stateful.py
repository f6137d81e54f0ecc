"""A hypothesis state machine driving the scheduler core at random (design §4.6-§4.9).

Random interleavings of claims, completions (conclusive and progressive), failures of
every category, selections, source changes, appended runs, source switches and helper
restarts. Invariants: each (generation, run, kind, revision) is published at most once;
nothing stale is published; images publish only after their metadata at the same
revision; at most K claims are active; and at the end every pending item is claimed
and decided once failures stop (no starvation).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from scheduler_support import config

from actors import (
    Dropped,
    Failed,
    Invalidated,
    Parked,
    Progressive,
    Published,
    RunInfo,
)
from actors._scheduler._scheduler import Scheduler
from actors.errors import ErrorRecord, ScheduleRejected

WORKERS = 3
ERRORS = {
    "transient": ErrorRecord(category="transient", code="reply_timeout"),
    "permanent": ErrorRecord(category="permanent", code="render_failed"),
    "stale": ErrorRecord(category="stale", code="cancelled"),
    "not_ready": ErrorRecord(category="transient", code="source_not_ready"),
}


class SchedulerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.source_no = 0
        self.next_id = 1
        self.revision_no = 0
        self.listing: list[RunInfo] = []
        self.sched = Scheduler(self._new_runs(4), source="s0", config=config(workers=WORKERS))
        self.claims: dict[int, object] = {}
        self.stale: set[int] = set()
        self.published: set[tuple[int, int, str, str]] = set()

    def _new_runs(self, n: int) -> list[RunInfo]:
        made = []
        for _ in range(n):
            made.append(
                RunInfo(
                    run_id=self.next_id, guid=f"s{self.source_no}-{self.next_id}", revision="r0"
                )
            )
            self.next_id += 1
        self.listing.extend(made)
        return made

    def _latest(self, run_id: int) -> str:
        return self.sched.deferred_revision(run_id) or self.sched.revision(run_id)

    # --- checks of every event ----------------------------------------------------------

    def _check(self, claim, events) -> None:
        for event in events:
            if isinstance(event, Published):
                assert claim.claim_id not in self.stale, "a stale completion was published"
                assert event.generation == self.sched.generation == claim.generation
                assert (event.run_id, event.kind, event.revision) == (
                    claim.run_id,
                    claim.kind,
                    claim.revision,
                )
                key = (event.generation, event.run_id, event.kind, event.revision)
                assert key not in self.published, f"published twice: {key}"
                if event.kind != "metadata":
                    meta = (event.generation, event.run_id, "metadata", event.revision)
                    assert meta in self.published, "image published before its metadata"
                self.published.add(key)
            elif isinstance(event, Dropped):
                assert event.reason in ("stale", "generation", "incarnation")
            if claim.claim_id in self.stale:
                # Dropped, then perhaps a deferred source change taking effect.
                assert isinstance(event, Dropped | Invalidated)

    def _pick_claim(self, data):
        ids = sorted(self.claims)
        return self.claims.pop(ids[data.draw(st.integers(0, len(ids) - 1))])

    # --- rules --------------------------------------------------------------------------------

    @rule()
    def claim(self) -> None:
        claim = self.sched.claim(self.now)
        if claim is not None:
            assert claim.generation == self.sched.generation
            assert claim.claim_id not in self.claims
            self.claims[claim.claim_id] = claim

    @precondition(lambda self: self.claims)
    @rule(data=st.data(), progressive=st.booleans())
    def complete(self, data, progressive: bool) -> None:
        claim = self._pick_claim(data)
        result = Progressive("partial") if progressive else f"{claim.kind}@{claim.revision}"
        events = self.sched.complete(claim.claim_id, result, now=self.now)
        self._check(claim, events)
        if progressive and claim.kind == "metadata" and claim.claim_id not in self.stale:
            assert isinstance(events[0], Parked)

    @precondition(lambda self: self.claims)
    @rule(data=st.data(), category=st.sampled_from(sorted(ERRORS)))
    def fail(self, data, category: str) -> None:
        claim = self._pick_claim(data)
        events = self.sched.fail(claim.claim_id, ERRORS[category], now=self.now)
        self._check(claim, events)
        if category == "permanent" and claim.claim_id not in self.stale:
            assert isinstance(events[0], Failed)

    @rule(dt=st.sampled_from([0.001, 0.01, 0.03, 0.2, 1.5]))
    def advance(self, dt: float) -> None:
        self.now += dt

    @rule(data=st.data(), bad=st.booleans())
    def set_priority(self, data, bad: bool) -> None:
        ids = self.sched.run_ids()
        selected = data.draw(st.none() | st.sampled_from(ids))
        visible = data.draw(st.lists(st.sampled_from(ids), max_size=4))
        if bad:
            before = self.sched.statistics()
            try:
                self.sched.set_priority(selected, [*visible, -7])
            except ScheduleRejected:
                assert self.sched.statistics() == before
            else:
                raise AssertionError("an unknown run id was accepted")
        else:
            self.sched.set_priority(selected, visible)

    @rule(data=st.data(), named=st.booleans())
    def source_changed(self, data, named: bool) -> None:
        run_id = data.draw(st.sampled_from(self.sched.run_ids()))
        self.revision_no += 1
        self.sched.source_changed(run_id, f"r{self.revision_no}" if named else None)

    @rule(n=st.integers(1, 2))
    def append_runs(self, n: int) -> None:
        self._new_runs(n)
        known = set(self.sched.run_ids())
        current = [
            RunInfo(run_id=i.run_id, guid=i.guid, revision=self._latest(i.run_id))
            if i.run_id in known
            else i
            for i in self.listing
        ]
        self.sched.reconcile(current)

    @rule()
    def bad_reconcile(self) -> None:
        before = (self.sched.statistics(), self.sched.run_ids())
        try:
            self.sched.reconcile(self.listing[1:])
        except ValueError:
            assert (self.sched.statistics(), self.sched.run_ids()) == before
        else:
            raise AssertionError("a removed run was accepted")

    @rule(n=st.integers(1, 5))
    def switch_source(self, n: int) -> None:
        self.source_no += 1
        self.listing = []
        stale = self.sched.switch_source(f"s{self.source_no}", self._new_runs(n))
        assert set(stale) == set(self.claims)
        self.stale.update(stale)

    @rule()
    def helper_restarted(self) -> None:
        stale = self.sched.helper_restarted()
        assert set(stale) == {
            cid for cid, c in self.claims.items() if c.kind == "metadata" and cid not in self.stale
        }
        self.stale.update(stale)

    @rule()
    def format_changed(self) -> None:
        self.sched.format_changed()

    # --- invariants -------------------------------------------------------------------------------

    @invariant()
    def at_most_k_active(self) -> None:
        assert len(self.sched.active_claims()) == len(self.claims) <= WORKERS

    @invariant()
    def slot_counts_are_exact(self) -> None:
        counts = self.sched._t.counts
        assert sum(counts) == 3 * len(self.sched)
        assert min(counts) >= 0

    def teardown(self) -> None:
        # No starvation: with no more failures, every item is claimed and decided.
        sched = self.sched
        for claim in list(self.claims.values()):
            self._check(claim, sched.complete(claim.claim_id, "late", now=self.now))
        self.claims.clear()
        steps = 0
        while True:
            claim = sched.claim(self.now)
            if claim is None:
                wake = sched.next_wakeup()
                if wake is None:
                    break
                assert wake > self.now, "nothing claimable although a wake-up is due"
                self.now = wake
                continue
            steps += 1
            assert steps <= 12 * len(sched) + 50, "work starved"
            self._check(claim, sched.complete(claim.claim_id, "final", now=self.now))
        for run_id in sched.run_ids():
            for kind in ("metadata", "thumbnail", "preview"):
                assert sched.status(run_id, kind) in ("done", "failed"), (run_id, kind)
                if sched.status(run_id, kind) == "done":
                    key = (sched.generation, run_id, kind, sched.revision(run_id))
                    assert key in self.published


SchedulerMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_scheduler_state_machine = SchedulerMachine.TestCase
