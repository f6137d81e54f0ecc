"""Shared pieces of the job server's supervision-tree tests: force a pool escalation,
wait for the tree's view (design §1.7, §7.8).

Real helper processes on the real clock; every wait is under ``fail_after``.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Any

import trio
from frontdoor_support import TIMEOUT

if TYPE_CHECKING:
    from collections.abc import Callable

    from examples.jobs.server import JobServer


async def job_may_fail(client: Any) -> None:
    """Submit a short job and wait for its end, whatever its verdict."""
    receipt = await client.request("submit", operation="count_primes", arguments={"limit": 11})
    await client.events_until(receipt["run_id"], {"job_finished"})


async def escalate_pool(server: JobServer, client: Any) -> None:
    """Kill the helper, then run a job: its replacement is one more than the pool's
    ``max_restarts`` (0) allows, so the pool escalates (``intensity_exceeded``)."""
    events = server.runtime.pool_events
    with events.subscribe(kinds={"reaped", "intensity_exceeded"}) as stream:
        helper = (await server.runtime.pool.snapshot()).helpers[0]
        assert helper is not None
        assert helper.pid is not None
        os.kill(helper.pid, signal.SIGKILL)
        with trio.fail_after(TIMEOUT):  # reaped first: the next job then spawns
            assert (await stream.receive()).kind == "reaped"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(job_may_fail, client)
            with trio.fail_after(TIMEOUT):
                assert (await stream.receive()).kind == "intensity_exceeded"


def tree_child(view: dict[str, Any], supervisor: str, child: str) -> dict[str, Any]:
    """The Observer's entry of ``child`` under ``supervisor`` (empty if none)."""
    for entry in view["tree"]:
        if entry["name"] == supervisor:
            for found in entry["children"]:
                if found["child"] == child:
                    return dict(found)
    return {}


async def wait_tree(server: JobServer, predicate: Callable[[dict[str, Any]], bool]) -> None:
    """Wait until the job server's Observer view satisfies ``predicate``."""
    lifecycle = server.runtime.metrics.lifecycle
    with trio.fail_after(TIMEOUT):
        seen = lifecycle.changes
        while not predicate(lifecycle.view(pool=None, mailboxes={})):
            seen = await lifecycle.wait_changed(seen)


def running(view: dict[str, Any], supervisor: str, child: str, incarnation: int) -> bool:
    """``child`` runs under ``supervisor`` in its ``incarnation``."""
    entry = tree_child(view, supervisor, child)
    return entry.get("state") == "running" and entry.get("incarnation") == incarnation
