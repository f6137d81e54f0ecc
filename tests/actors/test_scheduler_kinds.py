"""Declared kinds and tiers (design §4.11, §4.2): the embedder's DAG drives the core.

No clock: ``now`` is passed in. A five-kind DAG with a kind that needs two others::

    read ──> summary ──> report <── thumb <── read
       └───> preview
"""

from __future__ import annotations

import pytest
from scheduler_support import PERMANENT, TRANSIENT, drain, runs

from actors import (
    Failed,
    Kind,
    Parked,
    Progressive,
    Published,
    RetryPolicy,
    SchedulerConfig,
    Settled,
)
from actors._scheduler._scheduler import Scheduler
from actors.errors import ScheduleRejected

DAG = (
    Kind(name="read", helper=True, progressive=True),
    Kind(name="summary", needs=("read",)),
    Kind(name="thumb", needs=("read",), cached=True),
    Kind(name="preview", needs=("read",), cached=True),
    Kind(name="report", needs=("summary", "thumb")),
)


def dag(n: int = 2, **fields) -> Scheduler:
    return Scheduler(runs(n), source="db", config=SchedulerConfig(kinds=DAG, **fields))


def statuses(s: Scheduler, run_id: int) -> dict[str, str]:
    return {kind: s.status(run_id, kind) for kind in s.kinds}


# --- the declaration is checked ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kinds", "message"),
    [
        ((), "1..32 kinds"),
        (tuple(Kind(name=f"k{i}") for i in range(33)), "1..32 kinds"),
        ((Kind(name="a"), Kind(name="a")), "'a' is declared twice"),
        ((Kind(name="a", needs=("b",)),), "'a' needs unknown kind 'b'"),
        ((Kind(name="a", needs=("a",)),), "'a' needs itself"),
        (
            (
                Kind(name="a", needs=("c",)),
                Kind(name="b", needs=("a",)),
                Kind(name="c", needs=("b",)),
            ),
            "form a cycle",
        ),
        ((Kind(name="a", progressive=True), Kind(name="b", progressive=True)), "at most one"),
        (("metadata",), "must hold Kind declarations"),
        ("metadata", "sequence of Kind"),
    ],
)
def test_a_bad_declaration_is_a_value_error_naming_the_field(kinds, message):
    with pytest.raises(ValueError, match="kinds") as info:
        SchedulerConfig(kinds=kinds)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 65}, "name"),
        ({"name": 3}, "name"),
        ({"name": "a\nb"}, "name"),
        ({"name": "a", "needs": "b"}, "needs"),
        ({"name": "a", "needs": ("b", "b")}, "needs"),
        ({"name": "a", "needs": (1,)}, "needs"),
        ({"name": "a", "retry": {"maximum_attempts": 1}}, "retry"),
        ({"name": "a", "helper": 1}, "helper"),
        ({"name": "a", "progressive": "yes"}, "progressive"),
        ({"name": "a", "cached": None}, "cached"),
    ],
)
def test_a_bad_kind_is_a_value_error_naming_the_field(fields, name):
    with pytest.raises(ValueError, match=name):
        Kind(**fields)


@pytest.mark.parametrize(
    "tiers",
    [(), ("a", "a"), ("",), tuple("abcdefghi"), "selected", (1, 2),
     ("now\nlater",), ("\x00",), ("x" * 65,)],  # names go into claims and log lines
)  # fmt: skip
def test_bad_tiers_are_a_value_error_naming_the_field(tiers):
    with pytest.raises(ValueError, match="tiers"):
        SchedulerConfig(tiers=tiers)


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: SchedulerConfig(kinds={Kind(name="a"), Kind(name="b")}), "kinds"),
        (lambda: SchedulerConfig(kinds=frozenset({Kind(name="a")})), "kinds"),
        (lambda: SchedulerConfig(tiers={"selected", "visible", "remaining"}), "tiers"),
        (lambda: SchedulerConfig(tiers={"now": 0, "later": 1}.keys()), "tiers"),
        (lambda: Kind(name="c", needs={"a", "b"}), "needs"),
    ],
)
def test_an_unordered_declaration_is_refused(build, name):
    # Declaration order is priority order (and a kind's first need gives its
    # observation): a set's order changes from one process to the next (str hashes are
    # randomised), so the same declaration would schedule differently on every start.
    with pytest.raises(ValueError, match=f"{name}.*order"):
        build()


def test_the_default_declaration_is_one_generic_kind():
    s = Scheduler(runs(2))
    assert s.kinds == ("work",)
    assert drain(s) == [(1, "work"), (2, "work")]


# --- the DAG -----------------------------------------------------------------------------------


def test_a_kind_starts_only_once_every_kind_it_needs_is_published():
    s = dag(1, workers=5)
    read = s.claim(0.0)
    assert (read.kind, s.claim(0.0)) == ("read", None)  # everything else needs it
    s.complete(read.claim_id, {"rows": 2}, now=0.0)
    summary, thumb, preview = (s.claim(0.0) for _ in range(3))
    assert [c.kind for c in (summary, thumb, preview)] == ["summary", "thumb", "preview"]
    assert s.claim(0.0) is None  # report needs summary and thumb
    s.complete(summary.claim_id, "sum", now=0.0)
    assert s.claim(0.0) is None
    assert s.status(1, "report") == "blocked"
    s.complete(thumb.claim_id, b"t", now=0.0)
    report = s.claim(0.0)
    assert report.kind == "report"
    s.complete(preview.claim_id, b"p", now=0.0)
    events = s.complete(report.claim_id, "done", now=0.0)
    assert isinstance(events[0], Published)
    assert events[-1] == Settled(
        run_id=1,
        guid="g1",
        revision="r1",
        published=("read", "summary", "thumb", "preview", "report"),
        failed=(),
    )


def test_order_is_tier_then_declared_kind_then_run_order():
    s = dag(3, aging_after=100)
    s.set_priority(3, [2])
    order = drain(s)
    assert order[:10] == [
        (3, "read"),
        (3, "summary"),
        (3, "thumb"),
        (3, "preview"),
        (3, "report"),
        (2, "read"),
        (2, "summary"),
        (2, "thumb"),
        (2, "preview"),
        (2, "report"),
    ]
    assert order[10:] == [(1, k) for k in ("read", "summary", "thumb", "preview", "report")]


def test_a_failure_fails_every_kind_downstream_with_its_cause():
    s = dag(1, workers=5)
    s.complete(s.claim(0.0).claim_id, "r", now=0.0)
    summary = s.claim(0.0)
    events = s.fail(summary.claim_id, PERMANENT, now=0.0)
    assert [(e.kind, e.reason, e.cause_kind) for e in events] == [
        ("summary", "permanent", None),
        ("report", "needs_failed", "summary"),
    ]
    assert statuses(s, 1) == {
        "read": "done",
        "summary": "failed",
        "thumb": "pending",
        "preview": "pending",
        "report": "failed",
    }
    drained = drain(s)
    assert drained == [(1, "thumb"), (1, "preview")]  # the rest of the run goes on


def test_a_root_failure_fails_the_whole_dag_transitively():
    s = dag(1)
    events = s.fail(s.claim(0.0).claim_id, PERMANENT, now=0.0)
    assert [(type(e), getattr(e, "kind", None)) for e in events] == [
        (Failed, "read"),
        (Failed, "summary"),
        (Failed, "thumb"),
        (Failed, "preview"),
        (Failed, "report"),
        (Settled, None),
    ]
    assert {e.cause_kind for e in events[1:5]} == {"read"}
    assert events[-1].failed == ("read", "summary", "thumb", "preview", "report")


def test_a_format_change_resets_a_failure_and_what_waited_for_it():
    s = dag(1, workers=5)
    s.complete(s.claim(0.0).claim_id, "r", now=0.0)
    summary, thumb = s.claim(0.0), s.claim(0.0)
    s.fail(summary.claim_id, PERMANENT, now=0.0)
    s.fail(thumb.claim_id, PERMANENT, now=0.0)  # report failed already (summary)
    assert s.format_changed(["summary"]) == 1  # report still needs a failed thumb
    assert (s.status(1, "summary"), s.status(1, "report")) == ("pending", "failed")
    assert s.format_changed(["thumb"]) == 2  # thumb, and now report waits again
    assert (s.status(1, "thumb"), s.status(1, "report")) == ("pending", "blocked")
    with pytest.raises(ValueError, match="not a declared kind"):
        s.format_changed(["nope"])


def test_the_progressive_kind_is_whichever_the_embedder_declared():
    s = dag(1)
    read = s.claim(0.0)
    (event,) = s.complete(read.claim_id, Progressive({"rows": 1}), now=0.0)
    assert event == Parked(run_id=1, guid="g1", revision="r1", result={"rows": 1}, kind="read")
    page = s.claim(0.010)
    assert (page.kind, page.page) == ("read", True)
    s.complete(page.claim_id, {"rows": 5}, now=0.010)
    summary = s.claim(0.010)
    (event,) = s.complete(summary.claim_id, Progressive(None), now=0.010)
    assert event.error.code == "source_not_ready"  # not the progressive kind: a retry


def test_helper_restarted_fences_only_the_kinds_declared_helper():
    s = dag(1, workers=5)
    s.complete(s.claim(0.0).claim_id, "r", now=0.0)
    summary = s.claim(0.0)
    assert s.helper_restarted() == []  # summary is not helper work
    assert isinstance(s.complete(summary.claim_id, "s", now=0.0)[0], Published)


# --- tiers -------------------------------------------------------------------------------------


def test_declared_tiers_order_the_work_and_the_last_one_is_the_default():
    config = SchedulerConfig(kinds=(Kind(name="job"),), tiers=("urgent", "soon", "later", "rest"))
    s = Scheduler(runs(6), config=config)
    s.set_tiers({"later": [2], "urgent": [5], "soon": [4, 5]})
    assert [run for run, _kind in drain(s)] == [5, 4, 2, 1, 3, 6]  # 5: best of two tiers
    assert s.tier(5) == "urgent"
    assert s.tier(1) == "rest"
    assert s.statistics().ready == (0, 0, 0, 0)


@pytest.mark.parametrize(
    "placements",
    [{"nope": [1]}, {"urgent": [99]}, {"urgent": "12"}, {"urgent": [True]}, [("urgent", [1])]],
)
def test_a_bad_placement_is_refused_and_changes_nothing(placements):
    config = SchedulerConfig(kinds=(Kind(name="job"),), tiers=("urgent", "rest"))
    s = Scheduler(runs(3), config=config)
    s.set_tiers({"urgent": [3]})
    with pytest.raises(ScheduleRejected):
        s.set_tiers(placements)
    assert [run for run, _kind in drain(s)] == [3, 1, 2]


def test_a_single_tier_keeps_run_order_and_still_checks_ids():
    s = Scheduler(runs(3), config=SchedulerConfig(tiers=("all",)))
    s.set_priority(3, [2])
    assert [run for run, _kind in drain(s)] == [1, 2, 3]
    with pytest.raises(ScheduleRejected, match="visible"):
        s.set_priority(None, [7])


def test_per_kind_attempt_timeouts_set_the_claims_deadlines():
    kinds = (
        Kind(name="fast", retry=RetryPolicy(attempt_timeout=0.5)),
        Kind(name="slow", needs=("fast",)),
    )
    s = Scheduler(runs(1), config=SchedulerConfig(kinds=kinds, job_deadline=30))
    fast = s.claim(10.0)
    assert fast.deadline == 10.5
    s.complete(fast.claim_id, "x", now=10.2)
    assert s.claim(11.0).deadline == 41.0


def test_retry_state_is_per_kind():
    kinds = (Kind(name="a"), Kind(name="b", retry=RetryPolicy(maximum_attempts=1)))
    s = Scheduler(runs(2), config=SchedulerConfig(kinds=kinds, workers=2))
    a1, a2 = s.claim(0.0), s.claim(0.0)
    (retry,) = s.fail(a1.claim_id, TRANSIENT, now=0.0)  # kind a: 10 attempts
    assert retry.attempt == 1
    s.complete(a2.claim_id, "a", now=0.0)
    b2 = s.claim(0.0)
    events = s.fail(b2.claim_id, TRANSIENT, now=0.0)  # kind b: no retry
    assert (events[0].kind, events[0].reason) == ("b", "attempts_exhausted")


def test_ready_slots_are_counted_per_tier_and_kind():
    config = SchedulerConfig(
        kinds=(Kind(name="scan"), Kind(name="plot")), tiers=("urgent", "soon", "rest")
    )
    s = Scheduler(runs(3), config=config)
    s.set_tiers({"urgent": [2]})
    s.claim(0.0)  # applies the tiers, then claims run 2's scan
    by_kind = s.statistics().ready_by_kind
    assert by_kind == {
        (0, "scan"): 0,
        (0, "plot"): 1,
        (1, "scan"): 0,
        (1, "plot"): 0,
        (2, "scan"): 2,
        (2, "plot"): 2,
    }
    assert s.statistics().ready == (1, 0, 4)
