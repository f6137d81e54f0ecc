"""Progressive sources and change detection in the preview server (design §4.5).

A plain ``sqlite3`` writer plays the measurement: it appends rows to a copy of the real
unfinished run 12 (``is_completed = 0``, 120 of 200 planned points), then completes it,
and adds a new run. The server (in this process, real helpers, real websocket) must
notice each change through its probe, redraw the run at a new revision, and finish it
when it completes. Real clock, short poll interval, generous deadlines (contributing §F.3).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import trio
from frontdoor_support import assert_no_children
from preview_support import (
    LIVE_RUN,
    Seen,
    append_rows,
    connect,
    decode_png,
    fetch_png,
    preview_server,
    pump,
    server_config,
)

if TYPE_CHECKING:
    from pathlib import Path

#: Poll interval of these tests, seconds.
POLL = 0.1


def _note(seen: Seen, run: int) -> str:
    notes = [e["data"].get("note") for e in seen.by_run[run] if e["kind"] == "job_progress"]
    return str([n for n in notes if n][-1]) if any(notes) else ""


async def test_a_run_being_written_refreshes_and_finishes(
    writable_db: Path, tmp_path: Path
) -> None:
    config = server_config(writable_db, tmp_path, poll_interval=POLL, stall_after=60.0)
    seen = Seen()
    async with preview_server(config) as (front, app), connect(front) as client:
        seen.add(await client.request("subscribe", cursor=0))
        listed = await client.request("list_runs")
        assert {r["run_id"]: r["completed"] for r in listed["runs"]}[LIVE_RUN] is False
        assert (await client.request("select", run_id=LIVE_RUN))["type"] == "ok"
        started = trio.current_time()

        # Parked, not finished: live images of the 120 rows so far.
        with trio.fail_after(20):
            await pump(client, seen, lambda: seen.newest(LIVE_RUN, "preview") is not None)
            await pump(client, seen, lambda: seen.newest(LIVE_RUN, "thumbnail") is not None)
            await pump(client, seen, lambda: _note(seen, LIVE_RUN) != "")
        first = seen.newest(LIVE_RUN, "thumbnail")
        assert first is not None
        first_png = await fetch_png(front.url, first)
        assert decode_png(first_png).size == (160, 120)
        assert _note(seen, LIVE_RUN) == "being written: 120 of 200 points"
        assert seen.finished(LIVE_RUN) is None
        assert app.runs[LIVE_RUN].parked

        # The writer adds 40 rows: the thumbnail is drawn again at a new revision.
        await trio.to_thread.run_sync(append_rows, writable_db, 120, 160)
        with trio.fail_after(20):
            await pump(
                client,
                seen,
                lambda: seen.newest(LIVE_RUN, "thumbnail")["revision"] > first["revision"],  # type: ignore[index]
            )
            await pump(client, seen, lambda: "160 of 200" in _note(seen, LIVE_RUN))
        second = seen.newest(LIVE_RUN, "thumbnail")
        assert second is not None
        assert await fetch_png(front.url, second) != first_png
        assert seen.finished(LIVE_RUN) is None

        # The writer completes the run: it is read again, published, and finishes ok.
        await trio.to_thread.run_sync(lambda: append_rows(writable_db, 160, 200, complete=True))
        with trio.fail_after(20):
            await pump(client, seen, lambda: seen.finished(LIVE_RUN) is not None)
            await pump(
                client,
                seen,
                lambda: seen.newest(LIVE_RUN, "preview")["revision"] > second["revision"],  # type: ignore[index]
            )
        finished = seen.finished(LIVE_RUN)
        assert finished is not None
        assert finished["verdict"] == "ok"
        assert finished["result"]["rows"] == 200
        assert finished["result"]["status"] == "ok"
        kinds = [e["kind"] for e in seen.by_run[LIVE_RUN]]
        assert kinds[:2] == ["job_queued", "job_started"]
        assert kinds.count("job_finished") == 1
        assert kinds[-1] == "job_finished"
        relisted = await client.request("list_runs")
        row = {r["run_id"]: r for r in relisted["runs"]}[LIVE_RUN]
        assert row["completed"] is True
        assert row["rows"] == 200

        # No busy polling: one probe per interval at most (plus slack for a slow start).
        elapsed = trio.current_time() - started
        assert app.probes <= elapsed / POLL + 5
    assert_no_children()


def _add_run(db: Path, run_id: int) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO runs (run_id, exp_id, name, result_table_name, result_counter, "
            "run_timestamp, completed_timestamp, is_completed, parameters, guid, "
            "run_description, snapshot, captured_run_id, captured_counter, parent_datasets) "
            "SELECT ?, exp_id, 'sine_sweep_again', result_table_name, result_counter, "
            "run_timestamp, completed_timestamp, 1, parameters, ?, run_description, snapshot, "
            "?, captured_counter, parent_datasets FROM runs WHERE run_id = 1",
            (run_id, f"aaaaaaaa-0000-0000-0000-{run_id:012d}", run_id),
        )
    finally:
        conn.close()


async def test_a_new_run_is_listed_submitted_and_drawn(writable_db: Path, tmp_path: Path) -> None:
    config = server_config(writable_db, tmp_path, poll_interval=POLL, helpers=1)
    seen = Seen()
    async with preview_server(config) as (front, app), connect(front) as client:
        seen.add(await client.request("subscribe", cursor=0))
        await client.request("list_runs")
        await trio.to_thread.run_sync(_add_run, writable_db, 13)
        with trio.fail_after(20):
            await pump(client, seen, lambda: seen.finished(13) is not None)
            await pump(client, seen, lambda: seen.newest(13, "preview") is not None)
            # The changed run list is pushed too (request_id null).
            await pump(
                client,
                seen,
                lambda: any(m["type"] == "run_list" and len(m["runs"]) == 13 for m in seen.other),
            )
        assert seen.finished(13)["verdict"] == "ok"  # type: ignore[index]
        thumbnail = await fetch_png(front.url, seen.newest(13, "thumbnail"))  # type: ignore[arg-type]
        assert decode_png(thumbnail).size == (160, 120)
        assert app.runs[13].summary["name"] == "sine_sweep_again"
    assert_no_children()
