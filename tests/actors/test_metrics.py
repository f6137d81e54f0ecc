"""The runtime's Prometheus metrics (design §1.7): counted from events, read at scrape.

Real helper processes, so the real clock with short timeouts; every test checks that no
child process is left.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
import run_sync_functions as fns
import trio
import trio.lowlevel
import trio.testing
from helper_support import FAST, assert_no_children, spec
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from scheduler_support import runs
from test_run_sync_retry import CALLS, QUICK
from test_runtime import config

from actors import (
    POOL_EVENT_KINDS,
    Backoff,
    DeadlineExceeded,
    EventLogStatistics,
    HelperExited,
    HelperTimeouts,
    JobStalled,
    Kind,
    PoolConfig,
    PoolEvent,
    PoolRestarting,
    PortStatistics,
    Retrying,
    SchedulerConfig,
    Supervisor,
    SupervisorEvent,
    open_helper_pool,
    open_runtime,
)
from actors._eventlog._eventlog import open_event_log
from actors._eventlog._ledger import SQLiteLedger
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors._scheduler._scheduler import Scheduler
from actors.metrics import METRICS, Lifecycle, RuntimeMetrics
from protocol import ErrorRecord

if TYPE_CHECKING:
    from pathlib import Path


def scrape(registry: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, parsed by prometheus_client's own parser."""
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_without_metrics_the_runtime_has_no_registry() -> None:
    with trio.fail_after(30):
        async with open_runtime(config(runs=[])) as runtime:
            assert runtime.metrics_registry is None
    assert_no_children()


async def test_runs_helpers_and_the_tree_move_the_counters_by_exactly_what_happened() -> None:
    cfg = config(
        runs=[],
        metrics=True,
        pool=PoolConfig(size=1, timeouts=FAST, max_restarts=1),
        restart=Backoff(base=0.05, cap=0.1, reset_after=60.0),
    )
    with trio.fail_after(30):
        async with open_runtime(cfg) as runtime:
            registry = runtime.metrics_registry
            assert registry is not None
            before = scrape(registry)
            assert value(before, "trio_actors_helper_slots", state="idle") == 1
            assert value(before, "trio_actors_mailbox_capacity", actor="pool") > 0
            receipt = await runtime.eventlog.submit("preview", {"run_id": 1})
            assert receipt.admitted
            for _ in range(2):  # the first is replaced, the second one too many
                with pytest.raises(HelperExited):
                    await runtime.pool.run_job("crash", 3, timeout=10)
            with pytest.raises(PoolRestarting):  # the replacement is one too many
                await runtime.pool.run_job("echo", 1, timeout=10)
            assert await runtime.pool.run_job("echo", 2, timeout=10) == 2  # restarted
            await trio.lowlevel.checkpoint()
            after = scrape(registry)
    assert value(after, "trio_actors_runs_submitted_total", operation="preview") == 1
    assert value(after, "trio_actors_supervisor_restarts_total", supervisor="services") == 1
    assert value(after, "trio_actors_supervisor_escalations_total", supervisor="services") == 0
    assert value(after, "trio_actors_helper_events_total", kind="intensity_exceeded") == 1
    assert value(after, "trio_actors_helper_restarts_total", reason="crash") == 1
    assert value(after, "trio_actors_eventlog_events_total", kind="job_queued") == 1
    assert_no_children()


async def test_each_ledger_commit_is_observed_with_its_rows_and_duration(tmp_path: Path) -> None:
    metrics = RuntimeMetrics()
    ledger = SQLiteLedger(str(tmp_path / "l.db"), synchronous="NORMAL")
    await ledger.open(keep_requests=0)
    ledger.on_commit = metrics.on_commit
    seq = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(ledger.run_writer)
        for size in (1, 3, 2, 7):  # one commit each
            for _ in range(size):
                seq += 1
                ledger.stage_event(seq, "job_queued", seq, "{}")
            await ledger.flush()
        nursery.cancel_scope.cancel()
    await ledger.close()
    samples = scrape(metrics.registry)
    rows = "trio_actors_ledger_commit_rows"
    assert value(samples, rows + "_count") == 4
    assert value(samples, rows + "_sum") == 13
    assert [value(samples, rows + "_bucket", le=le) for le in ("1.0", "2.0", "5.0", "10.0")] == [
        1,
        2,
        3,
        4,
    ]
    seconds = "trio_actors_eventlog_append_seconds"
    assert value(samples, seconds + "_count") == 4
    assert value(samples, seconds + "_sum") > 0
    assert ledger.statistics().commits == 4


async def test_the_event_log_hands_its_ledger_commits_to_the_metrics(tmp_path: Path) -> None:
    metrics = RuntimeMetrics()
    spec = OperationSpec(name="preview", fields={"run_id"})
    config = EventLogConfig(ledger_path=str(tmp_path / "l.db"), synchronous="NORMAL")
    async with open_event_log(config, operations=[spec]) as log:
        metrics.attach_event_log(log)
        before = log.statistics().ledger
        for run in range(3):
            assert (await log.submit("preview", {"run_id": run})).admitted
        after = log.statistics().ledger
        samples = scrape(metrics.registry)
    assert before is not None
    assert after is not None
    assert after.commits > before.commits
    rows = "trio_actors_ledger_commit_rows"
    assert value(samples, rows + "_count") == after.commits - before.commits
    assert value(samples, rows + "_sum") == after.rows - before.rows
    assert value(samples, "trio_actors_eventlog_append_seconds_count") == (
        after.commits - before.commits
    )


async def test_retries_are_counted_by_kind_and_the_code_that_caused_them(tmp_path: Path) -> None:
    metrics = RuntimeMetrics()
    marker = str(tmp_path / "crashed")
    with trio.fail_after(30):
        async with open_helper_pool(CALLS, timeouts=FAST) as pool, trio.open_nursery() as nursery:
            kinds = POOL_EVENT_KINDS - {"job_started"}  # as open_runtime subscribes
            nursery.start_soon(metrics.follow_pool, pool.events.subscribe(bound=64, kinds=kinds))
            assert await pool.run_sync(fns.crash_once, marker, retry=QUICK) == "second time lucky"
            await trio.testing.wait_all_tasks_blocked()  # the events are counted
            nursery.cancel_scope.cancel()
    error = ErrorRecord(category="transient", code="reply_timeout", message="no reply")
    for attempt in (1, 2):
        notice = Retrying(run_id=1, guid="g", kind="scan", revision="1", attempt=attempt,
                          not_before=0.0, error=error)  # fmt: skip
        metrics.on_scheduler_event(notice)
    samples = scrape(metrics.registry)
    retries = "trio_actors_retries_total"
    assert value(samples, retries, kind="helper_call", reason="helper_exited") == 1
    assert value(samples, retries, kind="scan", reason="reply_timeout") == 2
    assert sum(v for (name, _), v in samples.items() if name == retries) == 3
    assert value(samples, "trio_actors_helper_restarts_total", reason="crash") == 1
    assert_no_children()


async def test_helper_restarts_are_counted_by_what_ended_the_helper_before() -> None:
    metrics = RuntimeMetrics()
    timeouts = HelperTimeouts(reply=10.0, cancel_grace=0.1, terminate=0.5, kill=0.5)
    with trio.fail_after(30):
        async with (
            open_helper_pool(spec(), timeouts=timeouts) as pool,
            trio.open_nursery() as nursery,
        ):
            kinds = POOL_EVENT_KINDS - {"job_started"}  # as open_runtime subscribes
            nursery.start_soon(metrics.follow_pool, pool.events.subscribe(bound=64, kinds=kinds))
            with pytest.raises(JobStalled):  # silent: stopped by the ladder, then replaced
                await pool.run_job("sleep", 30, stall=0.2)
            assert await pool.run_job("echo", 1) == 1
            with pytest.raises(DeadlineExceeded):  # past its deadline, deaf to the cancel
                await pool.run_job("sleep", 30, deadline=trio.current_time() + 0.2)
            assert await pool.run_job("echo", 2) == 2
            with pytest.raises(HelperExited):  # a crash of its own
                await pool.run_job("crash", 3)
            assert await pool.run_job("echo", 3) == 3
            with trio.move_on_after(0.2):  # the caller's cancel, the helper deaf to it
                await pool.run_job("sleep", 30)
            assert await pool.run_job("echo", 4) == 4
            with trio.move_on_after(0.2):  # answered: the helper stays...
                await pool.run_job("cooperative", 30)
            with pytest.raises(HelperExited):  # ...and its crash later is a crash
                await pool.run_job("crash", 3)
            assert await pool.run_job("echo", 5) == 5
            await trio.testing.wait_all_tasks_blocked()  # the events are counted
            nursery.cancel_scope.cancel()
    samples = scrape(metrics.registry)
    restarts = {
        reason: value(samples, "trio_actors_helper_restarts_total", reason=reason)
        for reason in ("stall", "deadline", "crash", "cancel", "startup_failure")
    }
    assert restarts == {"stall": 1, "deadline": 1, "crash": 2, "cancel": 1, "startup_failure": 0}
    assert_no_children()


class _LogStatistics:
    """An event log as the scrape sees it: only its statistics (a fake)."""

    def __init__(self, statistics: EventLogStatistics) -> None:
        self._statistics = statistics

    def statistics(self) -> EventLogStatistics:
        return self._statistics


def test_subscribers_and_refusals_are_read_by_reason_and_code_at_scrape_time() -> None:
    def port(name: str, dropped: int) -> PortStatistics:
        return PortStatistics(name=name, enabled=True, local=False, queued=0, bound=8, peak=8,
                              delivered=5, dropped=dropped, resync_required=False, resyncs=0,
                              acked=5, error=None)  # fmt: skip

    statistics = EventLogStatistics(
        head=40, floor=1, queued=2, running=1, held=0, bound=256, paused=False, revision=1,
        ports=(port("ws-1", 3), port("ws-2", 0), port("trio_actors_metrics", 9)), ledger=None,
        subscribers_left={"closed": 4, "slow": 2, "protocol_error": 1},
        refusals={"admission_full": 5, "ledger_unavailable": 2},
    )  # fmt: skip
    metrics = RuntimeMetrics()
    log: Any = _LogStatistics(statistics)
    metrics.watch(event_log=lambda: log)
    samples = scrape(metrics.registry)
    assert value(samples, "trio_actors_subscribers") == 2  # the metrics' own port left out
    assert value(samples, "trio_actors_subscriber_events_dropped") == 3
    left = "trio_actors_subscribers_left_total"
    assert {r: value(samples, left, reason=r) for r in ("closed", "slow", "protocol_error")} == {
        "closed": 4, "slow": 2, "protocol_error": 1
    }  # fmt: skip
    refusals = "trio_actors_refusals_total"
    assert value(samples, refusals, code="admission_full") == 5
    assert value(samples, refusals, code="ledger_unavailable") == 2
    assert value(samples, "trio_actors_runs_queued") == 2
    assert value(samples, "trio_actors_runs_running") == 1


def test_queue_depth_is_read_per_kind_and_tier_at_scrape_time() -> None:
    config = SchedulerConfig(kinds=(Kind(name="scan"), Kind(name="plot")), tiers=("now", "rest"))
    scheduler = Scheduler(runs(2), config=config)
    metrics = RuntimeMetrics()
    metrics.watch(scheduler=scheduler.statistics)
    scheduler.set_tiers({"now": [1]})
    scheduler.claim(0.0)  # run 1's scan
    samples = scrape(metrics.registry)
    depth = {
        (kind, tier): value(samples, "trio_actors_queue_depth", kind=kind, tier=tier)
        for kind in ("scan", "plot")
        for tier in ("0", "1")
    }
    assert depth == {("scan", "0"): 0, ("plot", "0"): 1, ("scan", "1"): 1, ("plot", "1"): 1}
    assert value(samples, "trio_actors_scheduler_active") == 1


def test_every_metric_is_registered_under_its_catalogue_name() -> None:
    metrics = RuntimeMetrics()
    names = {family.name for family in metrics.registry.collect()}
    sources = ("event", "scheduler", "supervisor", "pool", "every")
    counted = {spec.name for spec in METRICS if spec.source.startswith(sources)}
    assert counted <= names
    assert all(spec.name.startswith("trio_actors_") for spec in METRICS)
    assert len({spec.name for spec in METRICS}) == len(METRICS)


def test_the_metric_table_is_generated_from_the_catalogue() -> None:
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "metrics.rst").read_text(encoding="utf-8")
    assert ".. metric-table::" in page


def _started(supervisor: str, child: str, ref: Any = None) -> SupervisorEvent:
    return SupervisorEvent(
        kind="child_started", supervisor=supervisor, child=child, incarnation=1, time=0.0, ref=ref
    )


async def test_the_observer_nests_each_supervisor_under_the_child_that_runs_it() -> None:
    lifecycle = Lifecycle(strategies={"top": "one_for_one"})
    # As a tree starts: the inner supervisor's children before the top's, and a child id
    # ("svc") that is not the name of the supervisor it runs ("inner").
    lifecycle.on_supervisor_event(_started("inner", "pool"))
    lifecycle.on_supervisor_event(_started("top", "svc", Supervisor([], name="inner").ref))
    lifecycle.on_supervisor_event(_started("top", "log"))
    tree = lifecycle.view(pool=None, mailboxes={})["tree"]
    assert [(sup["name"], sup["parent"]) for sup in tree] == [
        ("top", None),
        ("inner", {"supervisor": "top", "child": "svc"}),
    ]
    assert [child.get("supervises") for child in tree[0]["children"]] == ["inner", None]
    # Names that loop (a supervisor shown under its own child) still list each once.
    lifecycle.on_supervisor_event(_started("inner", "back", Supervisor([], name="top").ref))
    tree = lifecycle.view(pool=None, mailboxes={})["tree"]
    assert sorted(sup["name"] for sup in tree) == ["inner", "top"]
    assert tree[0]["parent"] is None


class _Pool:
    """A helper pool as the Observer's view reads it: one idle helper (a fake)."""

    def snapshot(self) -> Any:
        helper = SimpleNamespace(pid=7, incarnation=1, quarantined=False, state="idle",
                                 active_generation=None, active_operation=None)  # fmt: skip
        return SimpleNamespace(helpers=[helper])


async def test_a_pool_opened_again_forgets_the_old_slots_exits() -> None:
    lifecycle = Lifecycle()

    def pool_event(seq: int, kind: str, **fields: Any) -> None:
        lifecycle.on_pool_event(PoolEvent(seq=seq, kind=kind, time=0.0, pool="helper", **fields))

    def last_exit() -> Any:
        return lifecycle.view(pool=_Pool(), mailboxes={})["helpers"][0]["last_exit"]

    pool_event(1, "reaped", slot=0, incarnation=4, details={"exit_code": None, "signal": "SIGKILL"})
    # Restarted in place (design §3.7): the same slots, their incarnations go on.
    pool_event(2, "pool_restarted", details={"epoch": 1})
    assert last_exit()["incarnation"] == 4
    # Opened again (its actor restarted): fresh slots from incarnation 1.
    pool_event(3, "pool_restarted", details={"opened": 2})
    assert last_exit() is None
