"""The Observer page at scale, in a real headless Chromium (design §7.8).

The job server runs 16 helpers while 1 000 trivial runs go through it, submitted at
once over a few connections. Meanwhile the page shows the 16 helper slots, its
timeline keeps its bound (the page shows at most :data:`TIMELINE_ROWS` events, and a
job's small steps never reach it: 1 000 runs add no row), and the page asks for
``/observer/state`` at most once a second while they run (the server counts the
requests it answers: runs never wake the long poll). Near the end one helper is
killed with SIGKILL: its slot shows the new incarnation within a second of the spawn.
Skipped when no chromium is installed. Real clock.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Any

import pytest
import trio
from frontdoor_support import TIMEOUT, assert_no_children, open_client
from test_dashboard import CHROMIUM, chromium, open_page, wait_for
from test_metrics_route import TOKEN

import examples.web.observer
from actors import Backoff
from examples.jobs.server import JobServerConfig, open_job_server
from examples.web.frontdoor import FrontDoorConfig
from examples.web.routes import Route

if TYPE_CHECKING:
    from pathlib import Path

    from test_dashboard import DevTools

    from examples.jobs.server import JobServer
    from examples.web.routes import HttpAnswer, HttpRequest

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="needs a headless Chromium (apt install chromium)"),
]

HELPERS = 16
RUNS = 1000
CLIENTS = 4
#: The most events the page's timeline shows (``observer.html``).
TIMELINE_ROWS = 100
ROWS = "document.querySelectorAll('#timeline tr').length"
SLOTS = "document.querySelectorAll('#helpers tr[data-slot]').length"


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The trio times at which the server answered ``/observer/state``."""
    times: list[float] = []
    made = examples.web.observer.observer_route

    def observer_route(*args: Any, **kwargs: Any) -> Route:
        route = made(*args, **kwargs)

        async def counted(request: HttpRequest) -> HttpAnswer:
            answer = await route.handler(request)
            times.append(trio.current_time())
            return answer

        return Route(prefix=route.prefix, handler=counted, name=route.name)

    monkeypatch.setattr(examples.web.observer, "observer_route", observer_route)
    return times


async def submit_all(port: int, limits: range) -> list[int]:
    """Send one submit per limit at once on one connection; the run ids, in order.

    Each run counts primes below its own limit: equal submits would be coalesced.
    """
    async with open_client(port, f"/?token={TOKEN}") as client:
        for limit in limits:
            submit = {"operation": "count_primes", "arguments": {"limit": limit}}
            await client.send({"type": "submit", "request_id": f"s{limit}", **submit})
        receipts = [await client.answer(f"s{limit}") for limit in limits]
    assert all(r["admitted"] and not r["coalesced"] for r in receipts), receipts
    return [int(receipt["run_id"]) for receipt in receipts]


async def kill_one_helper(server: JobServer, devtools: DevTools, session: str) -> None:
    """SIGKILL slot 0's helper: the page shows its new incarnation within a second."""
    victim = (await server.runtime.pool.snapshot()).helpers[0]
    slot = "document.querySelector('#helpers tr[data-slot=\"0\"]')"
    incarnation = f"{slot} && {slot}.dataset.incarnation === '{victim.incarnation + 1}'"
    with server.runtime.pool_events.subscribe(kinds={"spawned"}) as stream:
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        # A few runs more: the free slots go round, so one of them respawns slot 0.
        more = range(RUNS, RUNS + 2 * HELPERS)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(submit_all, server.front.port, more)
            with trio.fail_after(TIMEOUT):
                spawned = await stream.receive()
            assert spawned.incarnation == victim.incarnation + 1
            seen = trio.current_time()
            with trio.fail_after(1.0):  # the page shows the new incarnation within a second
                await wait_for(devtools, session, incarnation)
            shown = trio.current_time() - seen
    print(f"the new incarnation showed {shown:.2f} s after its spawn")


async def test_16_helpers_and_1000_runs_keep_the_page_bounded_and_live(
    tmp_path: Path, answered: list[float]
) -> None:
    config = JobServerConfig(
        front_door=FrontDoorConfig(port=0, token=TOKEN),
        grace=1.0,
        helpers=HELPERS,
        max_restarts=1,
        pool_backoff=Backoff(base=0.05, cap=0.1, reset_after=60.0),
    )
    async with (
        open_job_server(config) as server,
        chromium(tmp_path / "profile") as devtools,
        open_client(server.front.port, f"/?token={TOKEN}") as client,
    ):
        url = f"http://127.0.0.1:{server.front.port}/observer?token={TOKEN}"
        session = await open_page(devtools, url)
        await wait_for(devtools, session, f"{SLOTS} === {HELPERS}")
        rows_before = await devtools.evaluate(session, ROWS)
        assert rows_before <= TIMELINE_ROWS
        start, asked_before = trio.current_time(), len(answered)
        port = server.front.port
        run_ids: list[int] = []

        async def submitter(index: int) -> None:
            share = RUNS // CLIENTS
            run_ids.extend(await submit_all(port, range(index * share, (index + 1) * share)))

        async with trio.open_nursery() as nursery:
            for index in range(CLIENTS):
                nursery.start_soon(submitter, index)
        assert len(set(run_ids)) == RUNS
        run_ids.sort()
        # While the runs go through: 16 slots, and no run adds a row to the timeline.
        with trio.fail_after(TIMEOUT):
            while (await client.request("status", run_id=run_ids[-RUNS // 4]))["state"] not in (
                "finished",
                "cancelled",
            ):
                assert await devtools.evaluate(session, SLOTS) == HELPERS
                assert await devtools.evaluate(session, ROWS) == rows_before
                await trio.sleep(0.2)  # the page is in another process: polling is the way
        # Runs are no lifecycle steps: they never wake the page's long poll, so the page
        # asks at most once a second (plus the request under way at the start).
        running, asked = trio.current_time() - start, len(answered) - asked_before
        assert asked <= running + 1, (asked, running)
        await kill_one_helper(server, devtools, session)  # near the end
        for run_id in run_ids:
            await client.wait_state(run_id, "finished", "cancelled")
        assert await devtools.evaluate(session, SLOTS) == HELPERS
        rows = await devtools.evaluate(session, ROWS)
        assert rows_before < rows <= TIMELINE_ROWS  # the kill's steps, and no run's
        print(f"{RUNS} runs, {HELPERS} helpers: {running:.1f} s to 3/4, {asked} state requests, "
              f"timeline rows {rows_before} -> {rows}")  # fmt: skip
