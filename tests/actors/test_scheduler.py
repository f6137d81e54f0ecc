"""Tests of the sans-io scheduler core (design §4). No clock: ``now`` is passed in."""

from __future__ import annotations

import itertools

import pytest
from scheduler_support import PERMANENT, TRANSIENT, claim_kind, config, drain, make, runs

from actors import (
    Dropped,
    Failed,
    Interrupted,
    Invalidated,
    Parked,
    Progressive,
    Published,
    Retrying,
    SchedulerConfig,
    Settled,
)
from actors._scheduler._scheduler import Scheduler
from actors._scheduler._state import (
    ACTIVE,
    BLOCKED,
    SLOT_TRANSITIONS,
    _Slot,
    move,
)
from actors.errors import (
    DeadlineExceeded,
    InvalidTransition,
    JobCancelled,
    RenderFailed,
    ScheduleRejected,
    SourceNotReady,
)

# --- ordering (design §4.1-§4.3) ----------------------------------------------------------


def test_order_is_tier_then_kind_then_run_order():
    s = make(6, aging_after=100)
    s.set_priority(4, [2, 6])
    assert drain(s) == [
        (4, "metadata"),
        (4, "thumbnail"),
        (4, "preview"),
        (2, "metadata"),
        (6, "metadata"),
        (2, "thumbnail"),
        (6, "thumbnail"),
        (2, "preview"),
        (6, "preview"),
        (1, "metadata"),
        (3, "metadata"),
        (5, "metadata"),
        (1, "thumbnail"),
        (3, "thumbnail"),
        (5, "thumbnail"),
        (1, "preview"),
        (3, "preview"),
        (5, "preview"),
    ]


def test_metadata_must_be_conclusive_before_images():
    s = make(1, workers=3)
    meta = claim_kind(s, 1, "metadata")
    assert s.claim(0.0) is None  # thumbnail and preview are blocked, not claimable
    assert s.status(1, "thumbnail") == "blocked"
    s.complete(meta.claim_id, {"rows": 3}, now=0.0)
    thumb = claim_kind(s, 1, "thumbnail")
    prev = claim_kind(s, 1, "preview")  # K = 3: both images run at once
    assert thumb.revision == prev.revision == "r1"


def test_at_most_k_claims_are_active():
    s = make(5, workers=2)
    first, second = s.claim(0.0), s.claim(0.0)
    assert first is not None
    assert second is not None
    assert s.claim(0.0) is None
    assert s.statistics().active == 2
    s.complete(first.claim_id, "m", now=0.0)
    assert s.claim(0.0) is not None


def test_claim_carries_fencing_data_and_deadline():
    s = make(2, job_deadline=2.5)
    claim = s.claim(10.0)
    assert claim is not None
    assert (claim.source, claim.generation, claim.incarnation) == ("db", 0, 0)
    assert (claim.guid, claim.revision, claim.tier) == ("g1", "r1", "remaining")
    assert claim.deadline == 12.5
    assert claim.attempt == 1
    assert claim.first
    assert not claim.page


def test_set_priority_applies_at_next_work_boundary_and_rekeys_only_changes():
    s = make(4)
    s.set_priority(3, [1])
    assert s.tier(3) == "remaining"  # not yet applied
    assert s.statistics().priority_pending
    s.set_priority(2, [])  # replaces the first call before any boundary
    claim = s.claim(0.0)
    assert claim is not None
    assert claim.run_id == 2
    assert claim.tier == "selected"
    assert [s.tier(i) for i in (1, 2, 3, 4)] == ["remaining", "selected", "remaining", "remaining"]
    assert not s.statistics().priority_pending


@pytest.mark.parametrize(
    ("selected", "visible"),
    [(99, [1]), (1, [2, 99]), (True, []), ("1", []), (1, [None])],
)
def test_rejected_set_priority_changes_nothing(selected, visible):
    s = make(4, aging_after=100, workers=2)
    s.set_priority(3, [4])
    s.claim(0.0)  # applied: 3 selected, 4 visible
    before = (s.statistics(), [s.tier(i) for i in range(1, 5)])
    with pytest.raises(ValueError, match="not a run") as info:
        s.set_priority(selected, visible)
    assert isinstance(info.value, ScheduleRejected)
    assert info.value.code == "schedule_rejected"
    assert (s.statistics(), [s.tier(i) for i in range(1, 5)]) == before
    claim = s.claim(0.0)
    assert claim is not None
    assert claim.run_id == 4


# --- retries (design §4.6, §4.7) -------------------------------------------------------------


def test_exact_backoff_schedule_until_the_attempt_limit():
    s = make(1)  # the default policy: 25 ms doubling to 1 s, 10 attempts
    now = 0.0
    delays, attempts, claim_attempts = [], [], []
    for _ in range(9):
        claim = s.claim(now)
        assert claim is not None
        assert claim.kind == "metadata"
        claim_attempts.append(claim.attempt)
        (event,) = s.fail(claim.claim_id, TRANSIENT, now=now)
        assert isinstance(event, Retrying)
        assert event.error == TRANSIENT
        delays.append(round((event.not_before - now) * 1000, 9))
        attempts.append(event.attempt)
        # Not a moment early, and the wake-up time is exactly the end of the backoff.
        assert s.next_wakeup() == event.not_before
        assert s.claim(event.not_before - 1e-6) is None
        assert s.status(1, "metadata") == "backoff"
        now = event.not_before
    assert delays == [25, 50, 100, 200, 400, 800, 1000, 1000, 1000]
    assert attempts == claim_attempts == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    claim = s.claim(now)
    assert claim.attempt == 10
    events = s.fail(claim.claim_id, TRANSIENT, now=now)  # the tenth: no more retries
    assert [type(e) for e in events] == [Failed, Failed, Failed, Settled]
    assert (events[0].reason, events[0].attempts, events[0].error) == (
        "attempts_exhausted",
        10,
        TRANSIENT,
    )
    assert s.next_wakeup() is None


def test_backoff_delays_are_exact_floats():
    s = make(1)
    claim = s.claim(0.0)
    (event,) = s.fail(claim.claim_id, TRANSIENT, now=0.0)
    assert event.not_before == 0.025
    claim = s.claim(0.025)
    (event,) = s.fail(claim.claim_id, TRANSIENT, now=0.025)
    assert event.not_before == 0.025 + 0.05


def test_success_clears_the_retry_slot():
    s = make(1, workers=1)
    claim = s.claim(0.0)
    s.fail(claim.claim_id, TRANSIENT, now=0.0)
    claim = s.claim(0.025)
    s.complete(claim.claim_id, "m", now=0.025)
    thumb = s.claim(0.025)
    (event,) = s.fail(thumb.claim_id, TRANSIENT, now=1.0)
    assert event.attempt == 1
    assert event.not_before == 1.025


def test_other_work_goes_on_during_a_backoff():
    s = make(2)
    claim = claim_kind(s, 1, "metadata")
    s.fail(claim.claim_id, TRANSIENT, now=0.0)
    claim_kind(s, 2, "metadata", now=0.0)


def test_deadline_exceeded_is_transient():
    s = make(1)
    claim = s.claim(0.0)
    (event,) = s.fail(claim.claim_id, DeadlineExceeded("15 s passed"), now=claim.deadline)
    assert isinstance(event, Retrying)
    assert event.error.code == "deadline_exceeded"
    assert event.not_before == claim.deadline + 0.025


@pytest.mark.parametrize("bad", [0, -1, 300.5, float("nan"), float("inf"), True, "15"])
def test_job_deadline_is_validated(bad):
    with pytest.raises(ValueError, match="job_deadline"):
        SchedulerConfig(job_deadline=bad)


def test_config_validates_counts():
    assert SchedulerConfig(job_deadline=300).job_deadline == 300.0
    with pytest.raises(ValueError, match="workers"):
        SchedulerConfig(workers=0)
    with pytest.raises(ValueError, match="deadline_grace"):
        SchedulerConfig(deadline_grace=-0.1)


def test_permanent_failure_is_not_retried_until_source_changes():
    s = make(1)
    claim = s.claim(0.0)
    events = s.fail(claim.claim_id, PERMANENT, now=0.0)
    assert [type(e) for e in events] == [Failed, Failed, Failed, Settled]
    assert [(e.kind, e.cause_kind) for e in events[:3]] == [
        ("metadata", None),
        ("thumbnail", "metadata"),
        ("preview", "metadata"),
    ]
    assert events[3].failed == ("metadata", "thumbnail", "preview")
    assert s.claim(100.0) is None
    assert s.next_wakeup() is None
    assert s.format_changed(["thumbnail"]) == 0  # images wait for their metadata
    assert s.claim(100.0) is None
    (invalidated,) = s.source_changed(1, "r2")
    assert invalidated == Invalidated(run_id=1, guid="g1", old_revision="r1", revision="r2")
    again = s.claim(100.0)
    assert again is not None
    assert again.revision == "r2"
    assert again.attempt == 1


def test_permanent_failure_is_retried_when_the_format_changes():
    s = make(1)
    s.complete(s.claim(0.0).claim_id, "m", now=0.0)
    thumb = claim_kind(s, 1, "thumbnail")
    (failed,) = s.fail(thumb.claim_id, RenderFailed("bad options"), now=0.0)
    assert isinstance(failed, Failed)
    assert failed.error.code == "render_failed"
    prev = claim_kind(s, 1, "preview")
    s.complete(prev.claim_id, b"png", now=0.0)
    assert s.claim(0.0) is None
    assert s.format_changed(["preview"]) == 0  # the preview did not fail
    assert s.claim(0.0) is None
    assert s.format_changed(["thumbnail"]) == 1
    claim_kind(s, 1, "thumbnail")


def test_format_change_of_metadata_reblocks_dependent_failures():
    s = make(1)
    s.fail(s.claim(0.0).claim_id, PERMANENT, now=0.0)
    assert s.format_changed() == 3
    assert [s.status(1, k) for k in ("metadata", "thumbnail", "preview")] == [
        "pending",
        "blocked",
        "blocked",
    ]


def test_stale_failure_is_dropped_silently_and_work_comes_back():
    s = make(1)
    claim = s.claim(0.0)
    (event,) = s.fail(claim.claim_id, JobCancelled("cancelled"), now=0.0)
    assert isinstance(event, Dropped)
    assert event.reason == "stale"
    stats = s.statistics()
    assert (stats.published, stats.failed, stats.dropped) == (0, 0, 1)
    assert s.next_wakeup() == 0.025  # re-queued after the base delay, no attempt counted
    again = s.claim(0.025)
    assert again is not None
    assert again.attempt == 1


# --- anti-starvation (design §4.4) -------------------------------------------------------------


def test_aging_admits_remaining_metadata_after_8_foreground_claims():
    s = Scheduler(runs(20), config=config(workers=10))
    s.set_priority(None, list(range(1, 11)))  # 10 visible runs: 10 metadata claims
    order = [s.claim(0.0) for _ in range(10)]
    tiers = [c.tier for c in order]
    assert tiers[:8] == ["visible"] * 8
    assert (order[8].tier, order[8].kind, order[8].run_id) == ("remaining", "metadata", 11)
    assert tiers[9] == "visible"


def test_aging_waits_while_the_selected_runs_images_are_ready():
    s = Scheduler(runs(20), config=config(workers=20))
    s.set_priority(1, list(range(2, 12)))
    claims = [s.claim(0.0) for _ in range(8)]  # selected metadata + 7 visible metadata
    assert [c.tier for c in claims] == ["selected"] + ["visible"] * 7
    s.complete(claims[0].claim_id, "m", now=0.0)  # the selected run's images are ready
    nxt = s.claim(0.0)
    assert (nxt.run_id, nxt.kind) == (1, "thumbnail")
    nxt = s.claim(0.0)
    assert (nxt.run_id, nxt.kind) == (1, "preview")
    nxt = s.claim(0.0)  # now the remaining metadata item is admitted
    assert (nxt.tier, nxt.kind, nxt.run_id) == ("remaining", "metadata", 12)


def test_every_remaining_item_gets_claimed_under_constant_foreground_load():
    s = Scheduler(runs(30), config=config())
    remaining_claims = 0
    for step in range(200):
        # The viewport keeps moving: foreground work never runs out.
        s.set_priority(None, [1 + (step % 10), 11 + (step % 10)])
        claim = s.claim(float(step))
        if claim.tier == "remaining":
            remaining_claims += 1
        s.fail(claim.claim_id, JobCancelled("scrolled away"), now=float(step))
    assert remaining_claims >= 200 // 9


# --- progressive sources (design §4.5) --------------------------------------------------------


def park(s: Scheduler, run_id: int, now: float = 0.0) -> None:
    claim = claim_kind(s, run_id, "metadata", now)
    (event,) = s.complete(claim.claim_id, Progressive({"rows": 1}), now=now)
    assert event == Parked(run_id=run_id, guid=f"g{run_id}", revision="r1", result={"rows": 1})


def test_progressive_result_is_parked_not_published():
    s = make(1)
    park(s, 1)
    stats = s.statistics()
    assert (stats.published, stats.parked) == (0, 1)
    assert s.status(1, "thumbnail") == "blocked"
    page = s.claim(0.010)
    assert page is not None
    assert page.page
    assert page.kind == "metadata"
    events = s.complete(page.claim_id, {"rows": 9}, now=0.010)
    assert isinstance(events[0], Published)
    assert events[0].result == {"rows": 9}
    claim_kind(s, 1, "thumbnail", 0.010)


def test_source_not_ready_error_parks_metadata():
    s = make(1)
    claim = s.claim(0.0)
    (event,) = s.fail(claim.claim_id, SourceNotReady("still writing"), now=0.0)
    assert isinstance(event, Parked)
    assert event.result is None


def test_progressive_pages_are_paced_at_least_10_ms_apart():
    s = make(1)
    park(s, 1, now=0.0)  # the first read was not a page
    page = s.claim(0.0)
    assert page is not None
    assert page.page
    s.complete(page.claim_id, Progressive(None), now=0.002)
    assert s.claim(0.009) is None
    assert s.next_wakeup() == 0.010
    starts = [0.0]
    now = 0.010
    for _ in range(5):
        page = s.claim(now)
        assert page is not None
        assert page.page
        starts.append(now)
        s.complete(page.claim_id, Progressive(None), now=now)
        assert s.claim(now + 0.0099) is None
        now = s.next_wakeup()
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert all(gap >= 0.010 - 1e-12 for gap in gaps)


def test_a_due_page_waits_for_at_most_3_same_tier_claims():
    s = Scheduler(runs(40), config=config(workers=1, aging_after=100))
    s.set_priority(None, list(range(1, 41)))
    park(s, 1)  # run 1 is visible and progressive; runs 2..40 have visible work
    waited, worst, pages, last_page = 0, 0, 0, -1.0
    now = 0.0
    for _ in range(60):
        now += 0.001
        due = now >= last_page + 0.010
        claim = s.claim(now)
        assert claim.tier == "visible"
        if claim.page:
            assert due  # pacing: never earlier than 10 ms after the previous page
            pages, waited, last_page = pages + 1, 0, now
        elif due:
            waited += 1
            worst = max(worst, waited)
        s.complete(claim.claim_id, Progressive(None) if claim.page else "m", now=now)
    assert pages >= 5
    assert 0 < worst <= 3


def test_due_page_goes_after_exactly_3_ordinary_claims_of_its_tier():
    s = Scheduler(runs(12), config=config(workers=1, aging_after=100, page_interval=0))
    s.set_priority(None, list(range(1, 13)))
    park(s, 1)  # this ordinary claim counts as the first of three
    pattern = []
    for _ in range(12):
        claim = s.claim(0.0)
        pattern.append("P" if claim.page else "o")
        s.complete(claim.claim_id, Progressive(None) if claim.page else "m", now=0.0)
    assert "".join(pattern) == "ooPoooPoooPo"


def test_progressive_rounds_are_fair_and_selected_jumps_to_the_front():
    s = Scheduler(runs(4), config=config(workers=1, page_interval=0, page_after=100))
    for run_id in (1, 2, 3, 4):
        park(s, run_id)
    s.set_priority(None, [3])
    order = []
    for _ in range(4):
        page = s.claim(0.0)
        order.append(page.run_id)
        s.complete(page.claim_id, Progressive(None), now=0.0)
    assert order == [3, 1, 2, 4]  # a round: visible first, then remaining in run order
    page = s.claim(0.0)
    order = [page.run_id]
    s.complete(page.claim_id, Progressive(None), now=0.0)
    s.set_priority(4, [3])  # run 4 newly selected: jumps to the front of this round
    for _ in range(3):
        page = s.claim(0.0)
        order.append(page.run_id)
        s.complete(page.claim_id, Progressive(None), now=0.0)
    assert order == [3, 4, 1, 2]


# --- shutdown (design §4.13) ----------------------------------------------------------------


def test_an_interrupted_attempt_is_marked_and_not_a_verdict():
    s = make(1)
    meta = claim_kind(s, 1, "metadata")
    s.complete(meta.claim_id, {"m": 1}, now=0.0)
    thumb = claim_kind(s, 1, "thumbnail", now=1.0)
    s.source_changed(1, "r2")  # deferred behind the active claim
    events = s.interrupt(thumb.claim_id, now=2.5)
    assert events[0] == Interrupted(
        run_id=1, guid="g1", kind="thumbnail", revision="r1", attempt=1, at=2.5
    )
    # The deferred change applies once the cut-off claim is released: all to do again.
    assert [type(e) for e in events] == [Interrupted, Invalidated]
    assert s.status(1, "metadata") == "pending"
    assert s.statistics().interrupted == 0


def test_an_interrupted_slot_waits_and_never_settles_the_run():
    s = make(1)
    meta = claim_kind(s, 1, "metadata")
    events = s.interrupt(meta.claim_id, now=3.0)
    assert [type(e) for e in events] == [Interrupted]  # no Failed, no Settled
    assert s.status(1, "metadata") == "interrupted"
    stats = s.statistics()
    assert (stats.active, stats.interrupted, stats.failed) == (0, 1, 0)
    assert s.claim(4.0) is None  # not retried by itself: the embedder decides
    with pytest.raises(ScheduleRejected):
        s.interrupt(meta.claim_id, now=4.0)  # reported once
    assert (ACTIVE, "interrupt") in SLOT_TRANSITIONS


# --- structure -------------------------------------------------------------------------------


def test_slot_table_refuses_illegal_moves():
    slot = _Slot(BLOCKED)
    with pytest.raises(InvalidTransition, match="blocked cannot claim"):
        move(slot, "claim")
    assert slot.status == BLOCKED
    # An active slot is never reset: a source change waits for it (design §4.8).
    assert (ACTIVE, "reset") not in SLOT_TRANSITIONS


def test_heaps_stay_bounded_when_the_viewport_moves_a_lot():
    s = Scheduler(runs(3000), config=config())
    longest = 0
    for step in range(6000):
        s.set_priority(step % 3000 + 1, [(step * 7) % 3000 + 1, (step * 11) % 3000 + 1])
        claim = s.claim(float(step))  # applies it
        s.fail(claim.claim_id, JobCancelled("x"), now=float(step))  # back in 25 ms
        longest = max(longest, *(len(heap) for heap in s._t.q.heaps))
    assert longest <= 2 * 3000 + 1024
    queues = s._t.q
    assert sum(queues.queued) + s.statistics().backoff == 3000


def test_the_core_is_sans_io():
    """The core and everything it imports from the package never import trio."""
    import ast
    from pathlib import Path

    import actors

    root = Path(actors.__file__).parent / "_scheduler"
    seen: set[str] = set()
    pending = ["_scheduler"]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse((root / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert all(alias.name.split(".")[0] != "trio" for alias in node.names), name
            elif isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] != "trio", name
                if node.level == 1 and node.module:
                    pending.append(node.module)
    assert {"_scheduler", "_state", "_queue", "_table"} <= seen
