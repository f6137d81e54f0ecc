"""The Observer page in a real headless Chromium (design §7.8).

The job server runs in this process with a token; Chromium opens
``/observer?token=T``: the tree shows both supervisors with their strategy and the pool
running in its first incarnation. The test kills a helper with SIGKILL: the page shows
the exit within a second of the pool reaping it, and the slot's new incarnation within
a second of its spawn. A second kill exceeds the pool's restart intensity: the page
shows the escalation (``intensity_exceeded``) and, within a second of the ``services``
supervisor restarting the pool, its new incarnation, the restart and why (``pool_failed``).
A pool that keeps escalating past the supervisor's own intensity: the tree marks
``services`` as having given up and shows ``runtime`` restarting it.
``/observer/state`` wants the token. Skipped when no chromium is installed. Real clock.
"""

from __future__ import annotations

import base64
import os
import signal
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio
from frontdoor_support import TIMEOUT, assert_no_children, open_client
from jobs_support import escalate_pool, job_may_fail, running, wait_tree
from test_dashboard import CHROMIUM, chromium, open_page, wait_for
from test_metrics_route import TOKEN

from actors import Backoff
from examples.jobs.server import JobServerConfig, open_job_server
from examples.web.frontdoor import FrontDoorConfig
from examples.web.httpconn import HttpRequest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from examples.jobs.server import JobServer

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="needs a headless Chromium (apt install chromium)"),
]


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


@asynccontextmanager
async def job_server(**fields: Any) -> AsyncIterator[JobServer]:
    fields.setdefault("max_restarts", 1)
    config = JobServerConfig(
        front_door=FrontDoorConfig(port=0, token=TOKEN),
        grace=1.0,
        helpers=1,
        pool_backoff=Backoff(base=0.05, cap=0.1, reset_after=60.0),
        **fields,
    )
    async with open_job_server(config) as server:
        yield server


async def run_job(client: Any) -> int:
    receipt = await client.request("submit", operation="count_primes", arguments={"limit": 10})
    events = await client.events_until(receipt["run_id"], {"job_finished"})
    return int(events[-1]["data"].get("result", {}).get("pid", 0))


async def test_the_state_route_wants_the_token():
    async with job_server() as server:
        route = next(r for r in server.front.router.routes if r.name == "observer")
        assert route.protected
        assert route.tokens == ()
        answer = await route.handler(HttpRequest(method="GET", path="/observer/state",
                                                 query={}, headers={}))  # fmt: skip
        assert answer.status == 200
        assert answer.content_type == "application/json"
        bad = await route.handler(HttpRequest(method="GET", path="/observer/state",
                                              query={"after": "x"}, headers={}))  # fmt: skip
        assert bad.status == 400


async def test_a_killed_helper_and_an_escalation_show_within_a_second(tmp_path: Path):
    async with (
        job_server() as server,
        chromium(tmp_path / "profile") as devtools,
        open_client(server.front.port, f"/?token={TOKEN}") as client,
    ):
        await client.request("subscribe", cursor=0)
        session = await open_page(devtools, f"http://127.0.0.1:{server.front.port}/observer")
        refused = "document.body.dataset.refused === '403'"
        await wait_for(devtools, session, refused)  # no token: the data is refused
        await devtools.call(
            "Page.navigate",
            session,
            url=f"http://127.0.0.1:{server.front.port}/observer?token={TOKEN}",
        )
        slot = "document.querySelector('#helpers tr[data-slot=\"0\"]')"
        await wait_for(devtools, session, f"{slot} && {slot}.dataset.incarnation === '1'")
        await wait_for(devtools, session, TREE_AT_START)
        await wait_for(devtools, session, NESTED)
        pid = await run_job(client)
        events = server.runtime.pool_events
        with events.subscribe(kinds={"reaped", "spawned", "intensity_exceeded"}) as stream:
            os.kill(pid, signal.SIGKILL)
            with trio.fail_after(TIMEOUT):
                assert (await stream.receive()).kind == "reaped"
            with trio.fail_after(1.0):  # the page shows the exit within a second
                await wait_for(devtools, session, f"{slot}.textContent.includes('SIGKILL')")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_job, client)  # the next job spawns incarnation 2
                with trio.fail_after(TIMEOUT):
                    spawned = await stream.receive()
                assert (spawned.kind, spawned.incarnation) == ("spawned", 2)
                with trio.fail_after(1.0):
                    await wait_for(devtools, session, f"{slot}.dataset.incarnation === '2'")
            # A second crash: one replacement more than max_restarts allows.
            pid = (await server.runtime.pool.snapshot()).helpers[0].pid
            os.kill(pid, signal.SIGKILL)
            with trio.fail_after(TIMEOUT):  # reaped first: the next job then spawns
                while (await stream.receive()).kind != "reaped":
                    pass
            async with trio.open_nursery() as nursery:
                nursery.start_soon(job_may_fail, client)
                with trio.fail_after(TIMEOUT):
                    while (await stream.receive()).kind != "intensity_exceeded":
                        pass
                with trio.fail_after(1.0):
                    await wait_for(devtools, session, ESCALATED)
        # ``services`` restarts the failed pool: within a second the tree shows it.
        await wait_tree(server, lambda view: running(view, "services", "pool", 2))
        with trio.fail_after(1.0):
            await wait_for(devtools, session, POOL_RESTARTED)
        # The fresh pool's slot: its first incarnation, and no exit of the old pool's
        # helpers beside it (they were other incarnations of another pool).
        await run_job(client)
        await wait_for(devtools, session, f"{slot}.dataset.incarnation === '1'")
        assert await devtools.evaluate(session, f"{slot}.dataset.lastExit") == ""
        await wait_for(devtools, session, NESTED)
        shot = await devtools.call("Page.captureScreenshot", session, format="png")
        (tmp_path / "observer.png").write_bytes(base64.b64decode(shot["data"]))
        keep = os.environ.get("OBSERVER_SCREENSHOT")
        if keep:
            (tmp_path / "observer.png").replace(keep)


#: The page's timeline shows the pool's escalation.
ESCALATED = "!!document.querySelector('#timeline tr[data-kind=\"intensity_exceeded\"]')"


def _entry(supervisor: str, child: str | None = None) -> str:
    """A JS expression: the tree's entry of ``supervisor``, or of its ``child``."""
    selector = f'li[data-supervisor="{supervisor}"]'
    if child is not None:
        selector += f' li[data-child="{child}"]'
    return f"document.querySelector('#tree {selector}')"


def _shows(supervisor: str, child: str, **data: str) -> str:
    """A JS expression: the child's entry exists and its ``data-*`` are ``data``."""
    entry = _entry(supervisor, child)
    checks = [f"{entry}.dataset.{key} === '{value}'" for key, value in data.items()]
    return " && ".join([f"!!{entry}", *checks])


#: Both supervisors with their strategy; the pool and the event log running, first
#: incarnation, no restart.
TREE_AT_START = " && ".join([
    *(f"{_entry(name)}?.dataset.strategy === 'one_for_one'" for name in ("runtime", "services")),
    _shows("runtime", "services", state="running", incarnation="1", restarts="0"),
    _shows("runtime", "event_log", state="running", incarnation="1", restarts="0"),
    _shows("services", "pool", state="running", incarnation="1", restarts="0"),
])  # fmt: skip
#: The tree nested as it runs: ``runtime`` is the root; ``services`` is inside the entry
#: of ``runtime``'s child that runs it, and the pool inside ``services``.
NESTED = " && ".join([
    "document.querySelector('#tree > ul > li').dataset.supervisor === 'runtime'",
    "document.querySelectorAll('#tree > ul > li').length === 1",
    "!!document.querySelector('#tree li[data-supervisor=\"runtime\"] > ul > "
    "li[data-child=\"services\"] > ul > li[data-supervisor=\"services\"] > ul > "
    "li[data-child=\"pool\"]')",
    "!!document.querySelector('#tree li[data-supervisor=\"runtime\"] > ul > "
    "li[data-child=\"event_log\"]')",
])  # fmt: skip
#: ``services`` restarted the pool after its escalation; the supervisor's decision is
#: on the timeline.
POOL_RESTARTED = " && ".join([
    _shows("services", "pool", state="running", incarnation="2", restarts="1",
           lastExit="pool_failed"),
    "!!document.querySelector('#timeline tr[data-kind=\"child_restarting\"]')",
])  # fmt: skip
#: ``services`` gave up (its escalation, marked on the pool it could not keep up) and
#: ``runtime`` restarted it: a fresh ``services`` with a fresh pool.
SERVICES_RESTARTED = " && ".join([
    _shows("services", "pool", state="running", incarnation="1", escalated="true"),
    _shows("runtime", "services", state="running", incarnation="2", restarts="1",
           lastExit="restart_intensity_exceeded"),
    f"{_entry('services', 'pool')}.textContent.includes('ESCALATED')",
])  # fmt: skip


async def test_a_supervisor_that_gives_up_shows_escalated_and_restarted(tmp_path: Path):
    async with (
        job_server(max_restarts=0, tree_max_restarts=1) as server,
        chromium(tmp_path / "profile") as devtools,
        open_client(server.front.port, f"/?token={TOKEN}") as client,
    ):
        await client.request("subscribe", cursor=0)
        url = f"http://127.0.0.1:{server.front.port}/observer?token={TOKEN}"
        session = await open_page(devtools, url)
        await wait_for(devtools, session, TREE_AT_START)
        await escalate_pool(server, client)  # ``services`` restarts the pool
        await wait_tree(server, lambda view: running(view, "services", "pool", 2))
        await escalate_pool(server, client)  # one restart too many for ``services``
        await wait_tree(
            server,
            lambda view: (
                running(view, "runtime", "services", 2) and running(view, "services", "pool", 1)
            ),
        )
        with trio.fail_after(1.0):  # the page shows it within a second
            await wait_for(devtools, session, SERVICES_RESTARTED)
