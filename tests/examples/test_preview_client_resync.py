"""The command-line client comes back after the server dropped it for falling behind
(design §7.2, §7.4).

A real preview server with real helpers on the real clock (STYLE rule 21), made to drop
its client: every run is drawn and the event log is still before the client connects,
and its bounds (``watch_limit``, ``subscriber_bound``) are smaller than the log, so a
subscription from the start overflows its port at once, every time, and the client must
come back from its cursor until the backlog fits. No child is left.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import trio
from frontdoor_support import assert_no_children
from preview_support import server_config

from examples.preview.app import open_database
from examples.preview.client import collect
from examples.preview.sample_db import create_many_runs_database
from examples.preview.server import open_preview_server
from examples.web.frontdoor import FrontDoorConfig

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from examples.web.frontdoor import FrontDoor

RUNS = 10
#: Events in one ``events`` answer, and in a client's port: far below the log's events.
WATCH_LIMIT = 16
SUBSCRIBER_BOUND = 1


def number(pattern: str, line: str) -> int:
    """The number ``pattern``'s group captures in ``line``."""
    found = re.search(pattern, line)
    assert found is not None, (pattern, line)
    return int(found[1])


async def wait_settled(front: FrontDoor) -> int:
    """Wait until no run is live in the event log; its head then (seconds: real clock)."""
    with trio.fail_after(60):
        while True:
            taken = await front.eventlog.snapshot()
            if not taken.runs and taken.cursor > 0:
                return taken.cursor
            await trio.sleep(0.05)  # the condition is polled, never assumed


async def test_a_client_dropped_for_falling_behind_reconnects_and_saves_every_image(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = await trio.to_thread.run_sync(create_many_runs_database, tmp_path / "runs.db", RUNS)
    config = server_config(db, tmp_path)
    identity = await trio.to_thread.run_sync(open_database, db)
    front_config = FrontDoorConfig(
        port=0, watch_limit=WATCH_LIMIT, subscriber_bound=SUBSCRIBER_BOUND
    )
    async with open_preview_server(config, front_config, identity) as (front, _app):
        head = await wait_settled(front)
        assert head > WATCH_LIMIT + SUBSCRIBER_BOUND  # so the first subscription overflows
        out = tmp_path / "out"
        seen = await collect(front.url, out, timeout=60)
        accepted = front.statistics().accepted
    assert seen.complete, seen.missing()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"run{r}-{k}.png" for r in range(1, RUNS + 1) for k in ("thumbnail", "preview")
    )
    assert [event.seq for event in seen.events] == list(range(1, head + 1))  # no gap
    lines = capsys.readouterr().err.splitlines()
    reconnects = [line for line in lines if "reconnecting" in line]
    assert reconnects, lines
    assert len(reconnects) == accepted - 1  # every connection but the last was dropped
    assert all("resync required" in line for line in reconnects)
    # Each connection resumed after the cursor the one before was dropped at.
    cursors = [number(r"cursor=(\d+)", line) for line in reconnects]
    resumed = [number(r"after event (\d+)", line) for line in reconnects]
    assert cursors == resumed
    assert cursors == sorted(set(cursors))
    assert_no_children()
