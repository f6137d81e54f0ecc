"""The command-line client keeps up with a long event log, and comes back after the
server dropped it for falling behind (design §7.2, §7.4).

Real preview servers with real helpers on the real clock (contributing §F.3), with a
``watch_limit`` far below the event log's length. The first has a port bound of one
event too: a client that subscribed from the start would overflow its port at once. In
the second the drop is forced by the server's own
:meth:`~examples.web.connection.Connection.mark_resync` while one run's read stalls in
a helper (so the client cannot be done yet), and the stall ends only when the test
cancels that run. No child is left.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import trio
from frontdoor_support import assert_no_children
from preview_support import server_config

from examples.preview.app.preview_app import open_database
from examples.preview.cli.client import collect
from examples.preview.sample_db import create_many_runs_database
from examples.preview.server import open_preview_server
from examples.web.frontdoor import FrontDoorConfig

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    import pytest

    from examples.preview.app.preview_app import PreviewApp
    from examples.preview.cli.client_collection import Collection
    from examples.web.frontdoor import FrontDoor

RUNS = 10
KINDS = ("thumbnail", "preview")
#: Events in one ``events`` answer, and in a client's port: far below the log's events.
WATCH_LIMIT = 16
SUBSCRIBER_BOUND = 1
#: Seconds (real clock) a condition polled here may take to hold.
WAIT = 30


async def until(predicate: Callable[[], bool], what: str) -> None:
    """Poll state that other tasks and processes change; bounded by :data:`WAIT`."""
    with trio.move_on_after(WAIT) as waited:
        while not predicate():  # noqa: ASYNC110 - changed by helpers and the client
            await trio.sleep(0.02)
    assert not waited.cancelled_caught, f"timed out waiting until {what}"


def number(pattern: str, line: str) -> int:
    """The number ``pattern``'s group captures in ``line``."""
    found = re.search(pattern, line)
    assert found is not None, (pattern, line)
    return int(found[1])


def reconnect_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if "reconnecting" in line]


def small_bounds_server(
    db: Path, tmp_path: Path, subscriber_bound: int = SUBSCRIBER_BOUND, **overrides: object
) -> AbstractAsyncContextManager[tuple[FrontDoor, PreviewApp]]:
    """The preview server of ``db`` with ``watch_limit`` :data:`WATCH_LIMIT`."""
    config = server_config(db, tmp_path, **overrides)
    front_config = FrontDoorConfig(
        port=0, watch_limit=WATCH_LIMIT, subscriber_bound=subscriber_bound
    )
    return open_preview_server(config, front_config, open_database(db))


async def many_runs(tmp_path: Path) -> Path:
    return await trio.to_thread.run_sync(create_many_runs_database, tmp_path / "runs.db", RUNS)


async def test_a_client_pages_through_a_long_log_and_is_not_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every run is drawn before the client connects: its backlog is many times the
    # bounds. It reads it with watch, page by page, and subscribes once it is read.
    async with small_bounds_server(await many_runs(tmp_path), tmp_path) as (front, _app):
        with trio.fail_after(WAIT):
            while (taken := await front.eventlog.snapshot()).runs:  # noqa: ASYNC110
                await trio.sleep(0.05)  # polled: the helpers draw meanwhile
        head = taken.cursor
        assert head > 2 * (WATCH_LIMIT + SUBSCRIBER_BOUND)
        out = tmp_path / "out"
        seen = await collect(front.url, out, timeout=WAIT)
        accepted = front.statistics().accepted
    assert seen.complete, seen.missing()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"run{r}-{k}.png" for r in range(1, RUNS + 1) for k in KINDS
    )
    assert [event.seq for event in seen.events] == list(range(1, head + 1))  # no gap
    assert accepted == 1
    assert reconnect_lines(capsys) == []
    assert_no_children()


async def test_a_client_dropped_for_falling_behind_reconnects_and_saves_every_image(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stalled = tmp_path / "stalled"
    fault = {"stall": {"run_id": RUNS, "seconds": 120, "marker": str(stalled)}}
    # A port of the default bound: the cancel's events must not drop the client again.
    server = small_bounds_server(
        await many_runs(tmp_path), tmp_path, 256, helper_faults=fault, job_timeout=120
    )
    async with server as (front, app), trio.open_nursery() as nursery:
        results: list[Collection] = []

        async def client() -> None:
            results.append(await collect(front.url, tmp_path / "out", timeout=WAIT))

        def subscribed() -> list[int]:
            return [c.id for c in front.connections if c.statistics().subscribed]

        nursery.start_soon(client)
        await until(lambda: stalled.exists() and len(subscribed()) == 1, "the client follows")
        first = next(c for c in front.connections if c.statistics().subscribed)
        cursor = first.statistics().cursor
        assert cursor is not None  # it was sent its backlog
        first.mark_resync()  # as when its queue stays full: resync_required, close 4000
        await until(lambda: subscribed() not in ([], [first.id]), "the client is back")
        assert results == []  # run RUNS is still being read: the client is not done
        job = app.runs[RUNS].job
        assert job is not None
        await front.eventlog.cancel(job)  # its end: nothing more will come of it
        await until(lambda: bool(results), "the client is done")
        accepted = front.statistics().accepted
    [seen] = results
    assert seen.complete, seen.missing()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        f"run{r}-{k}.png" for r in range(1, RUNS) for k in KINDS
    )
    assert seen.status(RUNS) == "cancelled"
    assert [event.seq for event in seen.events] == list(range(1, seen.cursor + 1))  # no gap
    assert accepted == 2
    [line] = reconnect_lines(capsys)
    assert "resync required" in line
    # It resumed after the close's cursor: the newest event sent to it, which may be
    # newer than the one sent when the test dropped it (events go on meanwhile).
    resumed = number(r"after event (\d+)", line)
    assert number(r"cursor=(\d+)", line) == resumed >= cursor
    assert_no_children()
