"""A hypothesis state machine driving the scheduler core at random (design §4.6-§4.13).

The executor is modelled as a set of *executions*, one per claim. Cancelling one (its
deadline passed, or a source switch or helper restart made it stale) only asks it to
stop: it **keeps running** until a later ``finish`` rule reports its outcome, as a
helper job does while its cancel ladder runs. Random interleavings of claims,
completions (conclusive and progressive), failures of every category, cancellations,
selections, source changes, appended runs, source switches (some reusing the GUIDs still
executing) and helper restarts, over a five-kind DAG with retry limits.

Invariants: at most one execution per (run GUID, kind) at any time (design §4.13); at
most K executions; each (generation, run, kind, revision) is published at most once and
never from a stale execution; a kind publishes only after every kind it needs published
at the same revision; no attempt number exceeds its kind's limit; every claim's deadline
lies within its overall deadline. At the end, with no more failures, every item is
claimed and decided (no starvation).
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from actors import (
    Dropped,
    Failed,
    Invalidated,
    Kind,
    Parked,
    Progressive,
    Published,
    RetryPolicy,
    RunInfo,
    SchedulerConfig,
)
from actors._scheduler._scheduler import Scheduler
from actors.errors import ErrorRecord, ScheduleRejected

WORKERS = 3
KINDS = (
    Kind(name="read", helper=True, progressive=True, retry=RetryPolicy(maximum_attempts=4)),
    Kind(name="summary", needs=("read",), retry=RetryPolicy(overall_timeout=1.0)),
    Kind(name="thumb", needs=("read",), helper=True, retry=RetryPolicy(maximum_attempts=2)),
    Kind(name="preview", needs=("read",), retry=RetryPolicy(initial_interval=0)),
    Kind(name="report", needs=("summary", "thumb"), retry=RetryPolicy(maximum_attempts=None)),
)
NEEDS = {kind.name: kind.needs for kind in KINDS}
LIMITS = {kind.name: kind.retry.maximum_attempts for kind in KINDS}
ERRORS = {
    "transient": ErrorRecord(category="transient", code="source_busy"),
    "crash": ErrorRecord(category="transient", code="helper_exited"),
    "deadline": ErrorRecord(category="transient", code="deadline_exceeded"),
    "permanent": ErrorRecord(category="permanent", code="render_failed"),
    "stale": ErrorRecord(category="stale", code="cancelled"),
    "not_ready": ErrorRecord(category="transient", code="source_not_ready"),
}


class Execution:
    """One claim's execution: it runs until ``finish`` reports it, cancelled or not."""

    def __init__(self, claim) -> None:
        self.claim = claim
        self.cancelled = False


class SchedulerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.source_no = 0
        self.next_id = 1
        self.revision_no = 0
        self.listing: list[RunInfo] = []
        self.sched = Scheduler(
            self._new_runs(3),
            source="s0",
            config=SchedulerConfig(kinds=KINDS, workers=WORKERS),
        )
        self.running: dict[int, Execution] = {}
        self.stale: set[int] = set()
        self.published: set[tuple[int, int, str, str]] = set()

    def _new_runs(self, n: int, guids: list[str] | None = None) -> list[RunInfo]:
        made = []
        for i in range(n):
            guid = guids[i] if guids else f"s{self.source_no}-{self.next_id}"
            made.append(RunInfo(run_id=self.next_id, guid=guid, revision="r0"))
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
                for need in NEEDS[event.kind]:
                    needed = (event.generation, event.run_id, need, event.revision)
                    assert needed in self.published, f"{event.kind} published before {need}"
                self.published.add(key)
            elif isinstance(event, Dropped):
                assert event.reason in ("stale", "generation", "incarnation")
            elif isinstance(event, Failed) and event.reason == "attempts_exhausted":
                assert event.attempts == LIMITS[event.kind]
            if claim.claim_id in self.stale:
                # Dropped, then perhaps a deferred source change taking effect.
                assert isinstance(event, Dropped | Invalidated)

    def _finish(self, data):
        ids = sorted(self.running)
        return self.running.pop(ids[data.draw(st.integers(0, len(ids) - 1))])

    # --- rules --------------------------------------------------------------------------------

    @rule()
    def claim(self) -> None:
        claim = self.sched.claim(self.now)
        if claim is not None:
            assert claim.generation == self.sched.generation
            assert claim.claim_id not in self.running
            limit = LIMITS[claim.kind]
            assert limit is None or claim.attempt <= limit
            if claim.overall_deadline is not None:
                assert claim.deadline <= claim.overall_deadline
            self.running[claim.claim_id] = Execution(claim)

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def cancel(self, data) -> None:
        # Its deadline passed: the stop is asked for, and the execution keeps running.
        ids = sorted(self.running)
        self.running[ids[data.draw(st.integers(0, len(ids) - 1))]].cancelled = True

    @precondition(lambda self: self.running)
    @rule(data=st.data(), progressive=st.booleans())
    def complete(self, data, progressive: bool) -> None:
        claim = self._finish(data).claim
        result = Progressive("partial") if progressive else f"{claim.kind}@{claim.revision}"
        events = self.sched.complete(claim.claim_id, result, now=self.now)
        self._check(claim, events)
        if progressive and claim.kind == "read" and claim.claim_id not in self.stale:
            assert isinstance(events[0], Parked)

    @precondition(lambda self: self.running)
    @rule(data=st.data(), category=st.sampled_from(sorted(ERRORS)))
    def fail(self, data, category: str) -> None:
        execution = self._finish(data)
        claim = execution.claim
        if execution.cancelled and category != "stale":
            category = "deadline"  # a stopped execution ends deadline_exceeded
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

    @rule(n=st.integers(1, 4), reuse=st.booleans())
    def switch_source(self, n: int, reuse: bool) -> None:
        # ``reuse``: the new source holds the runs still executing (e.g. the same file
        # opened again): their GUIDs must wait for the old executions (design §4.13).
        guids = sorted({e.claim.guid for e in self.running.values()})[:n] if reuse else []
        self.source_no += 1
        self.listing = []
        made = self._new_runs(len(guids), guids) if guids else []
        made += self._new_runs(n - len(made))
        stale = self.sched.switch_source(f"s{self.source_no}", made)
        assert set(stale) == set(self.running)
        self.stale.update(stale)
        for claim_id in stale:
            self.running[claim_id].cancelled = True  # keeps running until it reports

    @rule()
    def helper_restarted(self) -> None:
        stale = self.sched.helper_restarted()
        helper = {kind.name for kind in KINDS if kind.helper}
        assert set(stale) == {
            cid
            for cid, e in self.running.items()
            if e.claim.kind in helper and cid not in self.stale
        }
        self.stale.update(stale)
        for claim_id in stale:
            self.running[claim_id].cancelled = True

    @rule()
    def format_changed(self) -> None:
        self.sched.format_changed()

    # --- invariants -------------------------------------------------------------------------------

    @invariant()
    def at_most_one_execution_per_run_and_kind(self) -> None:
        slots = Counter((e.claim.guid, e.claim.kind) for e in self.running.values())
        assert not slots or max(slots.values()) == 1, f"two executions at once: {slots}"

    @invariant()
    def at_most_k_executions(self) -> None:
        assert len(self.sched.active_claims()) == len(self.running) <= WORKERS

    @invariant()
    def slot_counts_are_exact(self) -> None:
        counts = self.sched._t.counts
        assert sum(counts) == len(KINDS) * len(self.sched)
        assert min(counts) >= 0

    def teardown(self) -> None:
        # No starvation: with no more failures, every item is claimed and decided.
        sched = self.sched
        for execution in list(self.running.values()):
            claim = execution.claim
            self._check(claim, sched.complete(claim.claim_id, "late", now=self.now))
        self.running.clear()
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
            assert steps <= 20 * len(sched) + 50, "work starved"
            self._check(claim, sched.complete(claim.claim_id, "final", now=self.now))
        assert sched.statistics().held == 0
        for run_id in sched.run_ids():
            for kind in sched.kinds:
                assert sched.status(run_id, kind) in ("done", "failed"), (run_id, kind)
                if sched.status(run_id, kind) == "done":
                    key = (sched.generation, run_id, kind, sched.revision(run_id))
                    assert key in self.published


SchedulerMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_scheduler_state_machine = SchedulerMachine.TestCase
