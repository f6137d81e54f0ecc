"""Scheduler core: invalidation, fencing, exactly-once publication (design §4.8, §4.9).

No clock: ``now`` is passed in.
"""

from __future__ import annotations

import pytest
from scheduler_support import PERMANENT, claim_kind, drain, make, runs

from actors import (
    Dropped,
    Invalidated,
    Published,
    RunInfo,
    Settled,
)
from actors._scheduler._scheduler import Scheduler
from actors.errors import (
    JobCancelled,
    ScheduleRejected,
)

# --- invalidation and fencing (design §4.8, §4.9) ------------------------------------------------


def test_source_changed_is_deferred_while_the_job_is_active():
    s = make(2, workers=2)
    claim = claim_kind(s, 1, "metadata")
    assert s.source_changed(1, "r2") == []
    assert (s.revision(1), s.deferred_revision(1)) == ("r1", "r2")
    events = s.complete(claim.claim_id, "old", now=0.0)
    assert [type(e) for e in events] == [Published, Invalidated]
    assert events[0].revision == "r1"  # the old-revision result still publishes
    assert events[1].revision == "r2"
    assert s.status(1, "metadata") == "pending"
    assert s.status(1, "thumbnail") == "blocked"
    again = claim_kind(s, 1, "metadata")
    assert again.revision == "r2"
    assert again.first


def test_deferred_run_gets_no_new_claims_until_its_change_applies():
    s = make(1, workers=2)
    s.complete(s.claim(0.0).claim_id, "m", now=0.0)
    thumb = claim_kind(s, 1, "thumbnail")
    s.source_changed(1, "r2")
    assert s.claim(0.0) is None  # the r1 preview is not started any more
    events = s.complete(thumb.claim_id, b"t", now=0.0)
    assert [type(e) for e in events] == [Published, Invalidated]
    claim = claim_kind(s, 1, "metadata")
    assert claim.revision == "r2"


def test_source_changed_without_active_job_applies_at_once():
    s = make(1)
    drain(s)
    (event,) = s.source_changed(1)
    assert event.old_revision == "r1"
    assert event.revision.startswith("r1~")
    assert s.source_changed(1, event.revision) == []  # unchanged: nothing to do
    assert [k for _r, k in drain(s)] == ["metadata", "thumbnail", "preview"]
    with pytest.raises(ScheduleRejected):
        s.source_changed(42, "x")
    with pytest.raises(ScheduleRejected):
        s.source_changed(1, "")


def test_each_run_kind_revision_is_published_exactly_once():
    s = make(3, workers=3)
    published = [
        (e.run_id, e.kind, e.revision)
        for _ in range(20)
        if (c := s.claim(0.0)) is not None
        for e in s.complete(c.claim_id, "x", now=0.0)
        if isinstance(e, Published)
    ]
    assert len(published) == len(set(published)) == 9
    assert s.claim(0.0) is None


def test_settled_reports_every_kind_decided():
    s = make(1)
    events = [e for c in iter(lambda: s.claim(0.0), None) for e in s.complete(c.claim_id, 1, now=0)]
    assert events[-1] == Settled(
        run_id=1,
        guid="g1",
        revision="r1",
        published=("metadata", "thumbnail", "preview"),
        failed=(),
    )


def test_reconcile_appends_new_runs():
    s = make(2)
    assert s.reconcile(runs(4)) == []
    assert s.run_ids() == [1, 2, 3, 4]
    assert [r for r, k in drain(s) if k == "metadata"] == [1, 2, 3, 4]


def test_reconcile_changed_revision_invalidates():
    s = make(2)
    drain(s)
    updated = [*runs(1), RunInfo(run_id=2, guid="g2", revision="r9")]
    (event,) = s.reconcile(updated)
    assert (event.run_id, event.revision) == (2, "r9")


@pytest.mark.parametrize(
    "listing",
    [
        pytest.param(runs(2), id="removed"),
        pytest.param([*runs(1), *runs(1, start=3), *runs(1, start=2)], id="reordered"),
        pytest.param([*runs(2), RunInfo(run_id=3, guid="other", revision="r1")], id="guid-changed"),
        pytest.param([*runs(3), *runs(1, start=2)], id="duplicate-id"),
        pytest.param([*runs(3), "junk"], id="not-a-runinfo"),
    ],
)
def test_reconcile_rejects_non_append_only_changes(listing):
    s = make(3)
    s.claim(0.0)
    before = (s.statistics(), s.run_ids())
    with pytest.raises(ValueError, match=r"append-only|repeats|RunInfo") as info:
        s.reconcile(listing)
    assert isinstance(info.value, ScheduleRejected)
    assert (s.statistics(), s.run_ids()) == before


def test_switch_source_fences_older_completions():
    s = make(2, workers=2)
    old = s.claim(0.0)
    stale = s.switch_source("other.db", runs(2, start=10))
    assert stale == [old.claim_id]
    assert s.generation == 1
    (event,) = s.complete(old.claim_id, "from the old source", now=0.0)
    assert isinstance(event, Dropped)
    assert event.reason == "generation"
    assert s.statistics().published == 0
    new = s.claim(0.0)
    assert (new.run_id, new.generation, new.source) == (10, 1, "other.db")


def test_switch_source_old_claims_still_count_towards_k():
    s = make(2, workers=1)
    old = s.claim(0.0)
    s.switch_source("other.db", runs(2, start=10))
    assert s.claim(0.0) is None  # the old job still occupies the one worker
    s.fail(old.claim_id, JobCancelled("cancelled"), now=0.0)
    assert s.claim(0.0).run_id == 10


def test_helper_restarted_fences_old_incarnation_results():
    s = make(2, workers=3)
    s.complete(s.claim(0.0).claim_id, "m1", now=0.0)
    meta = claim_kind(s, 2, "metadata")  # the images of run 1 are remaining tier too
    thumb = claim_kind(s, 1, "thumbnail")
    assert s.helper_restarted() == [meta.claim_id]
    (event,) = s.complete(meta.claim_id, "m2 from the old helper", now=0.0)
    assert isinstance(event, Dropped)
    assert event.reason == "incarnation"
    assert s.status(2, "metadata") == "pending"
    events = s.complete(thumb.claim_id, b"t", now=0.0)  # not helper work: publishes
    assert isinstance(events[0], Published)
    again = claim_kind(s, 2, "metadata")
    assert again.incarnation == 1
    assert isinstance(s.complete(again.claim_id, "m2", now=0.0)[0], Published)


def test_unknown_or_repeated_completion_is_rejected():
    s = make(1)
    claim = s.claim(0.0)
    s.complete(claim.claim_id, "m", now=0.0)
    with pytest.raises(ScheduleRejected, match="not active"):
        s.complete(claim.claim_id, "m", now=0.0)
    with pytest.raises(ScheduleRejected, match="not active"):
        s.fail(12345, PERMANENT, now=0.0)


def test_duplicate_run_ids_are_rejected():
    with pytest.raises(ScheduleRejected, match="repeats"):
        Scheduler([*runs(2), *runs(1)])


# --- one execution per run and kind across generations (design §4.13) -------------------------


def test_a_new_generation_waits_for_an_older_execution_of_the_same_guid():
    s = make(2, workers=3)
    old = claim_kind(s, 1, "metadata")  # still executing (being stopped)
    s.switch_source("db-again", runs(2))  # the same runs: the same GUIDs
    assert s.statistics().held == 1
    second = s.claim(0.0)
    assert (second.run_id, second.kind) == (2, "metadata")  # run 1 is held
    assert s.claim(0.0) is None
    (dropped,) = s.fail(old.claim_id, JobCancelled("stopped"), now=0.0)
    assert dropped.reason == "generation"
    assert s.statistics().held == 0
    again = claim_kind(s, 1, "metadata")
    assert again.generation == 1


def test_a_run_appended_later_also_waits_for_its_guids_older_execution():
    s = make(1, workers=4)
    old = claim_kind(s, 1, "metadata")
    s.switch_source("other", runs(1, start=5))  # run 1 is not in the new source...
    s.complete(s.claim(0.0).claim_id, "m5", now=0.0)
    s.reconcile([*runs(1, start=5), *runs(1)])  # ...until it comes back
    assert s.statistics().held == 1
    images = [s.claim(0.0), s.claim(0.0)]
    assert [(c.run_id, c.kind) for c in images] == [(5, "thumbnail"), (5, "preview")]
    assert s.claim(0.0) is None  # a worker is free, but run 1 waits
    s.complete(old.claim_id, "old", now=0.0)
    assert claim_kind(s, 1, "metadata").generation == 1
