"""The preview server under faults: a helper that crashes, a client that cancels (§4.8, §6.7).

The server runs in this process with real helper processes on a copy of the real
sample, with the helper's test faults (:mod:`examples.preview.child.helper`): ``crash_once``
kills the helper the first time run 4 is read; ``stall`` makes every read of run 5
wait, checking for a cancel. Real clock, short intervals, generous deadlines
(contributing §F.3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
from frontdoor_support import TIMEOUT, assert_no_children
from preview_support import SIZES, Seen, connect, preview_server, pump, server_config

from examples.preview.child.helper import CRASH_EXIT_CODE

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

ALL_RUNS = set(range(1, 13))
KINDS = ("metadata", "thumbnail", "preview")


def _notes(seen: Seen, run: int) -> list[str]:
    return [e["data"].get("note") for e in seen.by_run[run] if e["kind"] == "job_progress"]


def _kinds(seen: Seen, run: int) -> list[str]:
    return [e["kind"] for e in seen.by_run[run]]


async def _until(predicate: Callable[[], bool], what: str) -> None:
    """Poll server state changed by another process (a helper); bounded."""
    with trio.move_on_after(20) as waited:
        while not predicate():  # noqa: ASYNC110 - the change comes from a helper process
            await trio.sleep(0.02)
    assert not waited.cancelled_caught, f"timed out waiting until {what}"


async def test_a_helper_crash_is_fenced_and_every_kind_is_published_once(
    real_db: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "crashed"
    config = server_config(
        real_db, tmp_path, stall_after=0.5,
        helper_faults={"crash_once": {"run_id": 4, "marker": str(marker)}},
    )  # fmt: skip
    seen = Seen()
    async with preview_server(config) as (front, app), connect(front) as client:
        seen.add(await client.request("subscribe", cursor=0))
        await client.request("list_runs")
        with trio.fail_after(40):
            await pump(client, seen, lambda: all(seen.finished(r) for r in ALL_RUNS))
            await pump(client, seen, lambda: all(seen.newest(4, k) for k in SIZES))
        assert marker.exists()  # run 4's first read killed its helper
        scheduler = app.runtime.scheduler_actor.scheduler
        # The runtime's own events in the log: the crash (and, rarely, a retired helper
        # more) ended a helper, and the runtime told the scheduler HelperRestarted.
        ended = [e["data"] for e in seen.events if e["kind"] == "helper_reaped"]
        assert CRASH_EXIT_CODE in [data["exit_code"] for data in ended]
        assert 1 <= scheduler.incarnation <= len(ended)
        statistics = await app.runtime.pool.statistics()
        assert statistics.jobs_failed >= 1
    for run in ALL_RUNS:  # exactly once per kind, on one event-log run each (design §4.9)
        notes = _notes(seen, run)
        assert [notes.count(kind) for kind in KINDS] == [1, 1, 1], (run, notes)
        assert len(seen.jobs_of(run)) == 1, run
    finished = seen.finished(4)
    assert finished is not None
    assert finished["verdict"] == "ok"
    assert finished["result"]["published"] == sorted(KINDS)
    assert_no_children()


async def test_cancel_stops_a_runs_work_and_is_reported_truthfully(
    real_db: Path, tmp_path: Path
) -> None:
    stalled = tmp_path / "stalled"
    config = server_config(
        real_db, tmp_path, stall_after=0.5,
        helper_faults={"stall": {"run_id": 5, "seconds": 60, "marker": str(stalled)}},
    )  # fmt: skip
    seen = Seen()
    async with preview_server(config) as (front, app), connect(front) as client:
        seen.add(await client.request("subscribe", cursor=0))
        await client.request("select", run_id=5)
        job = app.runs[5].job
        assert job is not None
        await _until(stalled.exists, "run 5's read stalls in a helper")
        # The event-log run is started when the app handles the scheduler's RunStarted
        # notice, which may come after the helper's read began: cancelled before that,
        # it would be a queued run's cancel (``job_queued job_cancelled``), not the
        # running one's this test is about.
        with trio.fail_after(TIMEOUT):
            await pump(client, seen, lambda: "job_started" in _kinds(seen, 5))
        start = trio.current_time()
        reply = await client.request("cancel", run_id=job)
        assert (reply["type"], reply["state"]) == ("status_reply", "cancelled")
        assert reply["detail"]["cancelled_by"].startswith("ws-1@127.0.0.1:")

        # The read in the helper stops (cooperatively: the helper lives on), and the
        # run's remaining kinds are given up without any work.
        record = app.runs[5]
        await _until(lambda: set(record.errors) == set(KINDS), "run 5 settles")
        assert trio.current_time() - start < 10  # not the 60 s stall, nor the job timeout
        assert {e.code for e in record.errors.values()} == {"work_cancelled"}
        with trio.fail_after(10):  # the helper read itself was cancelled, not waited out
            while (await app.runtime.pool.statistics()).jobs_cancelled < 1:  # noqa: ASYNC110
                await trio.sleep(0.02)
        assert trio.current_time() - start < 10

        await client.request("list_runs")
        others = ALL_RUNS - {5}
        with trio.fail_after(40):
            await pump(client, seen, lambda: all(seen.finished(r) for r in others))
        # A cooperative cancel: the helper lives on, so the runtime saw no helper end.
        assert not [e for e in seen.events if e["kind"] == "helper_reaped"]
        assert app.runtime.scheduler_actor.scheduler.incarnation == 0
        kinds = _kinds(seen, 5)
        assert kinds == ["job_queued", "job_started", "job_progress", "job_cancelled"], kinds
        assert seen.by_run[5][2]["data"] == {"fraction": 0.0, "synthetic": True}
        assert not any(run == 5 for run, _ in seen.images)

        # Cancel tells the true state: again cancelled; a finished run stays finished.
        assert (await client.request("cancel", run_id=job))["state"] == "cancelled"
        done = await client.request("cancel", run_id=app.runs[4].job)
        assert (done["state"], done["verdict"]) == ("finished", "ok")
        row = next(r for r in (await client.request("list_runs"))["runs"] if r["run_id"] == 5)
        assert row["job_run_id"] == job
        assert row["status"] is None  # never read: its only read was cancelled
    assert_no_children()
