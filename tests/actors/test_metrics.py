"""The runtime's Prometheus metrics (design §1.7): counted from events, read at scrape.

Real helper processes, so the real clock with short timeouts; every test checks that no
child process is left.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel
from helper_support import FAST, assert_no_children
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from test_runtime import config

from actors import Backoff, HelperExited, PoolConfig, PoolRestarting, open_runtime
from actors.metrics import METRICS, RuntimeMetrics


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
