"""``/metrics`` on the job server's port, scraped with a real HTTP client (design §7.8).

Real helper processes on the real clock with short timeouts; the counters must move by
exactly what the test did: runs submitted and finished, a helper killed and replaced, a
submission refused for lack of capacity. The text is parsed by prometheus_client's own
parser.
"""

from __future__ import annotations

import os
import signal
import urllib.error
import urllib.request
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio
from frontdoor_support import TIMEOUT, assert_no_children, open_client
from jobs_support import escalate_pool, running, wait_tree
from prometheus_client.parser import text_string_to_metric_families

from actors import Backoff
from examples.jobs.server import JobServerConfig, open_job_server
from examples.web.frontdoor import FrontDoorConfig

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from examples.jobs.server import JobServer

TOKEN = "server-token-1"
SCRAPER = "scraper-token-1"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


def _get(port: int, token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            assert answer.headers["Content-Type"].startswith("text/plain; version=")
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read().decode()


async def get(port: int, token: str | None) -> tuple[int, str]:
    """GET /metrics with urllib (a real HTTP client) in a worker thread."""
    return await trio.to_thread.run_sync(_get, port, token)


async def scrape(port: int, token: str | None = TOKEN) -> Samples:
    status, text = await get(port, token)
    assert status == 200, text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@asynccontextmanager
async def job_server(
    fields: dict[str, Any] | None = None, **front: Any
) -> AsyncIterator[JobServer]:
    front_door = FrontDoorConfig(port=0, token=TOKEN, **front)
    config = JobServerConfig(front_door=front_door, grace=1.0, helpers=1, **(fields or {}))
    async with open_job_server(config) as server:
        yield server


async def test_the_token_or_the_scrapers_token_is_required_on_metrics():
    async with job_server(metrics_token=SCRAPER) as server:
        port = server.front.port
        assert (await get(port, None))[0] == 403
        assert (await get(port, "wrong-token-1"))[0] == 403
        assert (await get(port, TOKEN))[0] == 200
        assert (await get(port, SCRAPER))[0] == 200


async def test_metrics_open_is_loopback_only_and_needs_no_token():
    with pytest.raises(ValueError, match="metrics_open"):
        FrontDoorConfig(host="0.0.0.0", token=TOKEN, metrics_open=True)
    async with job_server(metrics_open=True) as server:
        assert (await get(server.front.port, None))[0] == 200


async def test_runs_a_killed_helper_and_a_refusal_move_the_counters_exactly():
    async with job_server() as server:
        port = server.front.port
        before = await scrape(port)
        assert value(before, "trio_actors_helper_slots", state="idle") == 1
        async with open_client(port, f"/?token={TOKEN}") as client:
            await client.request("subscribe", cursor=0)
            for limit in (10, 20):
                receipt = await client.request(
                    "submit", operation="count_primes", arguments={"limit": limit}
                )
                events = await client.events_until(receipt["run_id"], {"job_finished"})
            pid = events[-1]["data"]["result"]["pid"]
            middle = await scrape(port)
            with server.runtime.pool_events.subscribe(kinds={"reaped"}) as reaped:
                os.kill(pid, signal.SIGKILL)  # a crash: the next job gets a new helper
                with trio.fail_after(TIMEOUT):
                    assert (await reaped.receive()).pid == pid
            receipt = await client.request(
                "submit", operation="count_primes", arguments={"limit": 30}
            )
            events = await client.events_until(receipt["run_id"], {"job_finished"})
            assert events[-1]["data"]["result"]["pid"] != pid
            after_kill = await scrape(port)
            # Fill the admission bound (256 runs in flight), then one more is refused.
            for i in range(257):
                receipt = await client.request(
                    "submit", operation="sleep", arguments={"seconds": 30 + i / 1000}
                )
                assert receipt["admitted"] is (i < 256), receipt
            assert receipt["code"] == "admission_full"
            full = await scrape(port)
    ops = {"operation": "count_primes"}
    assert value(before, "trio_actors_runs_submitted_total", **ops) == 0
    assert value(middle, "trio_actors_runs_submitted_total", **ops) == 2
    assert value(middle, "trio_actors_runs_finished_total", **ops, outcome="ok") == 2
    assert value(middle, "trio_actors_run_duration_seconds_count", **ops) == 2
    assert value(middle, "trio_actors_run_queue_wait_seconds_count", **ops) == 2
    assert value(after_kill, "trio_actors_helper_restarts_total", reason="crash") == 1
    assert value(after_kill, "trio_actors_runs_finished_total", **ops, outcome="ok") == 3
    assert value(full, "trio_actors_helper_restarts_total", reason="crash") == 1
    assert value(full, "trio_actors_runs_submitted_total", operation="sleep") == 256
    assert value(full, "trio_actors_refusals_total", code="admission_full") == 1
    assert value(full, "trio_actors_runs_queued") == 255
    assert value(full, "trio_actors_runs_running") == 1
    assert value(full, "trio_actors_subscribers") == 1
    assert value(full, "trio_actors_mailbox_capacity", actor="event_log") > 0


#: A pool that escalates at its first crash, and a tree that allows one restart each.
FRAGILE = {
    "max_restarts": 0,
    "tree_max_restarts": 1,
    "pool_backoff": Backoff(base=0.05, cap=0.1, reset_after=60.0),
}


async def test_pool_escalations_move_the_supervisor_counters_exactly():
    # The first escalation: ``services`` restarts the pool. The second, within the
    # tree's window, is one restart more than ``services`` allows: it gives up and
    # ``runtime`` starts a fresh ``services`` (with a fresh pool, incarnation 1).
    async with (
        job_server(FRAGILE) as server,
        open_client(server.front.port, f"/?token={TOKEN}") as client,
    ):
        await client.request("subscribe", cursor=0)
        port = server.front.port
        before = await scrape(port)
        await escalate_pool(server, client)
        await wait_tree(server, lambda view: running(view, "services", "pool", 2))
        once = await scrape(port)
        await escalate_pool(server, client)
        await wait_tree(
            server,
            lambda view: (
                running(view, "runtime", "services", 2) and running(view, "services", "pool", 1)
            ),
        )
        twice = await scrape(port)
        receipt = await client.request("submit", operation="count_primes", arguments={"limit": 10})
        events = await client.events_until(receipt["run_id"], {"job_finished"})
        assert events[-1]["data"]["verdict"] == "ok"  # the fresh pool serves

    def moved(samples: Samples) -> tuple[float, ...]:
        return tuple(
            value(samples, f"trio_actors_supervisor_{name}_total", supervisor=supervisor)
            for name in ("restarts", "escalations")
            for supervisor in ("services", "runtime")
        )

    # (restarts: services, runtime; escalations: services, runtime)
    assert moved(before) == (0, 0, 0, 0)
    assert moved(once) == (1, 0, 0, 0)
    assert moved(twice) == (1, 1, 1, 0)
    escalated = "trio_actors_helper_events_total"
    assert [value(s, escalated, kind="intensity_exceeded") for s in (before, once, twice)] == [
        0, 1, 2
    ]  # fmt: skip
