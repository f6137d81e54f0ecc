"""Adversarial tests of the sans-io scheduler core (design §4.1-§4.9). No clock.

Bad ids, bools and duplicates in ``set_priority``; ``reconcile`` with reordered, removed
and duplicated runs; completions for unknown, repeated or stale claims; invalidation
while active; and 100 000 runs.
"""

from __future__ import annotations

from typing import Any

import pytest
from scheduler_support import config, make, runs

from actors import (
    Dropped,
    Invalidated,
    Published,
    RunInfo,
)
from actors._scheduler._scheduler import Scheduler
from actors.errors import ErrorRecord, ScheduleRejected


def published(events: list[Any]) -> list[tuple[int, str, str]]:
    return [(e.run_id, e.kind, e.revision) for e in events if isinstance(e, Published)]


def claim_order(s: Scheduler, count: int) -> list[tuple[int, str]]:
    order = []
    for _ in range(count):
        claim = s.claim(0.0)
        assert claim is not None
        order.append((claim.run_id, claim.kind))
        s.complete(claim.claim_id, "x", now=0.0)
    return order


# -- set_priority (design §4.2) --------------------------------------------------------------


@pytest.mark.parametrize(
    ("selected", "visible"),
    [
        (True, ()),  # a bool is not a run id (True == 1)
        (False, ()),
        (1.0, ()),
        ("1", ()),
        (99, ()),
        (-1, ()),
        (2**64, ()),
        (None, [1, True]),
        (None, [1, 99]),
        (None, ["1"]),
        (None, "12"),  # a string iterates as characters
        (None, [None]),
        (None, None),
        (None, 5),
    ],
)
def test_rejected_set_priority_changes_nothing(selected: Any, visible: Any) -> None:
    s = make(5)
    s.set_priority(3, [4])  # pending, not yet applied
    with pytest.raises(ScheduleRejected) as info:
        s.set_priority(selected, visible)
    assert info.value.code == "schedule_rejected"
    assert isinstance(info.value, ValueError)
    assert s.claim(0.0).run_id == 3  # the earlier, valid priority still applies
    assert (s.tier(3), s.tier(4), s.tier(1)) == ("selected", "visible", "remaining")


def test_duplicates_in_visible_are_ignored_and_selected_may_be_visible_too() -> None:
    s = make(5)
    s.set_priority(2, [4, 4, 2, 4])
    assert claim_order(s, 3) == [(2, "metadata"), (2, "thumbnail"), (2, "preview")]
    assert s.claim(0.0).run_id == 4
    assert (s.tier(2), s.tier(4)) == ("selected", "visible")


# -- reconcile (design §4.8: append-only) ----------------------------------------------------


@pytest.mark.parametrize(
    "change",
    ["reorder", "remove_last", "remove_middle", "other_guid", "dup_new_id", "dup_new_guid"],
)
def test_reconcile_that_is_not_append_only_is_refused_and_changes_nothing(change: str) -> None:
    s = make(4)
    claim = s.claim(0.0)
    before = (s.run_ids(), s.statistics(), [s.status(r, "metadata") for r in s.run_ids()])
    infos = runs(4)
    if change == "reorder":
        infos[1], infos[2] = infos[2], infos[1]
    elif change == "remove_last":
        infos.pop()
    elif change == "remove_middle":
        infos.pop(1)
        infos.append(RunInfo(run_id=9, guid="g9", revision="r1"))
    elif change == "other_guid":
        infos[0] = RunInfo(run_id=1, guid="other", revision="r1")
    elif change == "dup_new_id":
        infos += [RunInfo(run_id=5, guid="g5", revision="r1")] * 2
    else:
        # a new run reusing a known run's GUID: results are cached and fenced by GUID
        infos.append(RunInfo(run_id=5, guid="g2", revision="r1"))
    with pytest.raises(ScheduleRejected):
        s.reconcile(infos)
    after = (s.run_ids(), s.statistics(), [s.status(r, "metadata") for r in s.run_ids()])
    assert after == before
    assert [c.claim_id for c in s.active_claims()] == [claim.claim_id]


def test_duplicate_guids_are_refused_at_construction_and_switch() -> None:
    twins = [
        RunInfo(run_id=1, guid="same", revision="a"),
        RunInfo(run_id=2, guid="same", revision="b"),
    ]
    with pytest.raises(ScheduleRejected, match="guid"):
        Scheduler(twins, source="db")
    s = make(2)
    with pytest.raises(ScheduleRejected, match="guid"):
        s.switch_source("other", twins)
    assert (s.source, s.generation) == ("db", 0)


def test_reconcile_changed_revision_while_active_is_deferred() -> None:
    s = make(2)
    claim = s.claim(0.0)
    assert claim.run_id == 1
    events = s.reconcile(
        [RunInfo(run_id=1, guid="g1", revision="r2"), *runs(1, start=2), *runs(1, start=3)]
    )
    assert events == []
    assert (s.revision(1), s.deferred_revision(1)) == ("r1", "r2")
    out = s.complete(claim.claim_id, "meta@r1", now=0.0)
    # the old revision's result still publishes, then the run is invalidated
    assert published(out) == [(1, "metadata", "r1")]
    assert any(isinstance(e, Invalidated) for e in out)
    assert (s.revision(1), s.deferred_revision(1)) == ("r2", None)
    assert s.status(1, "metadata") == "pending"
    assert s.run_ids() == [1, 2, 3]


# -- completions (design §4.8, §4.9) --------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, 2, 10**30, True, None, "1", 1.0])
def test_completion_for_an_unknown_claim_is_refused(bad: Any) -> None:
    s = make(2)
    claim = s.claim(0.0)
    assert claim.claim_id == 1
    with pytest.raises(ScheduleRejected):
        s.complete(bad, "x", now=0.0)
    with pytest.raises(ScheduleRejected):
        s.fail(bad, ErrorRecord(category="transient", code="x", message=""), now=0.0)
    assert [c.claim_id for c in s.active_claims()] == [1]  # nothing was released
    assert published(s.complete(1, "x", now=0.0)) == [(1, "metadata", "r1")]
    with pytest.raises(ScheduleRejected):
        s.complete(1, "again", now=0.0)  # exactly once


def test_completions_after_switch_source_are_dropped_and_never_published() -> None:
    s = make(3, workers=3)
    claims = [s.claim(0.0) for _ in range(3)]
    stale = s.switch_source("db2", runs(3))  # same ids and GUIDs, new generation
    assert sorted(stale) == [c.claim_id for c in claims]
    first = s.complete(claims[0].claim_id, "old", now=0.0)
    assert published(first) == []
    assert [e.reason for e in first if isinstance(e, Dropped)] == ["generation"]
    second = s.fail(
        claims[1].claim_id, ErrorRecord(category="permanent", code="x", message=""), now=0.0
    )
    assert [e.reason for e in second if isinstance(e, Dropped)] == ["generation"]
    assert s.status(claims[1].run_id, "metadata") == "pending"  # not failed by the stale one
    s.complete(claims[2].claim_id, "old", now=0.0)
    # the new generation's work is untouched: three pending metadata slots, fresh claims
    fresh = s.claim(0.0)
    assert (fresh.generation, fresh.source, fresh.run_id) == (1, "db2", 1)
    assert published(s.complete(fresh.claim_id, "new", now=0.0)) == [(1, "metadata", "r1")]


def test_switch_back_and_forth_never_publishes_an_older_generation() -> None:
    s = make(1)
    old = s.claim(0.0)
    s.switch_source("b", runs(1))
    s.switch_source("db", runs(1))  # the same source again: still a newer generation
    assert published(s.complete(old.claim_id, "x", now=0.0)) == []
    assert s.claim(0.0).generation == 2


def test_source_changed_during_active_job_then_completion_publishes_each_revision_once() -> None:
    s = make(1, workers=2)
    meta = s.claim(0.0)
    s.complete(meta.claim_id, "m1", now=0.0)
    thumb = s.claim(0.0)
    preview = s.claim(0.0)
    assert (thumb.kind, preview.kind) == ("thumbnail", "preview")
    s.source_changed(1, "r2")
    s.source_changed(1, "r3")  # the newest deferred revision wins
    assert s.deferred_revision(1) == "r3"
    out = s.complete(thumb.claim_id, "t1", now=0.0)
    assert published(out) == [(1, "thumbnail", "r1")]
    assert not any(isinstance(e, Invalidated) for e in out)  # preview still active
    out = s.fail(preview.claim_id, ErrorRecord(category="transient", code="x", message=""), now=0.0)
    assert any(isinstance(e, Invalidated) for e in out)
    assert s.revision(1) == "r3"
    everything = []
    for _ in range(3):
        claim = s.claim(0.0)
        assert claim.revision == "r3"
        everything += published(s.complete(claim.claim_id, "v3", now=0.0))
    assert everything == [(1, "metadata", "r3"), (1, "thumbnail", "r3"), (1, "preview", "r3")]
    assert s.claim(0.0) is None


# -- scale (design §4.3) ----------------------------------------------------------------------


def test_one_hundred_thousand_runs_schedule_in_order() -> None:
    # Speed is the benchmark's to measure (benchmarks/scheduler.py); a claim that scanned
    # every run would make this test minutes long and trip the suite's hang timeout.
    s = Scheduler(runs(100_000), source="db", config=config(workers=4))
    s.set_priority(99_999, range(50_000, 50_100))
    order = []
    for _ in range(3000):
        claim = s.claim(0.0)
        assert claim is not None
        order.append((claim.run_id, claim.kind))
        s.complete(claim.claim_id, "x", now=0.0)
    s.set_priority(1, range(99_900, 100_000))
    s.source_changed(50_050, "r2")
    s.reconcile([*runs(100_000), *runs(10, start=100_001)])
    for _ in range(3000):
        claim = s.claim(0.0)
        assert claim is not None
        s.complete(claim.claim_id, "x", now=0.0)
    assert order[:3] == [(99_999, "metadata"), (99_999, "thumbnail"), (99_999, "preview")]
    assert len(s) == 100_010
