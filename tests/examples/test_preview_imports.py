"""The preview server process never imports numpy, Pillow or matplotlib: the helpers
read and draw (design §5.4).

A real server (``python -m examples.preview.server``) in a subprocess, on the real clock
with short deadlines, serves a real client what a dashboard session asks: the
thumbnails of a database of finished runs (``list_runs``, then a ``GET`` of each
``image_ready`` URL); or, on the sample file, every run's images, the live images of
its run being written (before and after this test writes rows into it, as a
measurement does), a run's details, its data to explore (``run_data``) and a drawing
with its report (``draw``). When it has stopped (SIGTERM), it says which modules it
had imported.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import trio
from frontdoor_support import TIMEOUT, Client, assert_no_children
from preview_support import LIVE_RUN, append_rows, fetch_png
from process_support import interruptible
from trio_websocket import open_websocket_url

from examples.preview.sample_db import create_many_runs_database

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

ROOT = Path(__file__).resolve().parents[2]
RUNS = 6
#: Runs the server as ``python -m`` does, and writes at exit which of its modules come
#: from numpy, Pillow or matplotlib.
_SERVER = """\
import atexit, json, runpy, sys
DRAWING = ("numpy", "PIL", "matplotlib")
def _report():
    with open({marker!r}, "w") as out:
        json.dump(sorted(m for m in sys.modules if m.split(".")[0] in DRAWING), out)
atexit.register(_report)
runpy.run_module("examples.preview.server", run_name="__main__", alter_sys=True)
"""
_LISTENING = re.compile(rb"listening on (ws://\S+)")


async def _url_of(process: trio.Process) -> str:
    assert process.stdout is not None
    seen = b""
    while (found := _LISTENING.search(seen)) is None:
        chunk = await process.stdout.receive_some()
        assert chunk, f"the server ended before listening: {seen!r}"
        seen += chunk
    return found[1].decode()


@asynccontextmanager
async def _server(db: Path, tmp_path: Path, *options: str) -> AsyncIterator[tuple[str, Path]]:
    """A server of ``db`` in a subprocess: its websocket URL and the file that names,
    once it stopped (SIGTERM, at the end of the block), the drawing modules it loaded."""
    marker = tmp_path / "modules.json"
    argv = [sys.executable, "-c", _SERVER.format(marker=str(marker)), str(db), "--port", "0",
            "--no-token", "--cache-dir", str(tmp_path / "cache"), "--grace", "1",
            *options]  # fmt: skip
    env = {**os.environ, "TRIO_ACTORS_RUNTIME_DIR": str(tmp_path / "info")}
    with (tmp_path / "server.stderr").open("wb") as errors:
        process = await trio.lowlevel.open_process(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=errors,
            preexec_fn=interruptible,
        )  # fmt: skip
    try:
        with trio.fail_after(6 * TIMEOUT):
            yield await _url_of(process), marker
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()


async def _thumbnails(client: Client, url: str, runs: set[int]) -> None:
    """Take pushes until a thumbnail of each of ``runs`` came; fetch each."""
    seen: set[int] = set()
    while not runs <= seen:
        notice = await client.next_push()
        if notice["type"] == "image_ready" and notice["kind"] == "thumbnail":
            assert (await fetch_png(url, notice))[:4] == b"\x89PNG"
            seen.add(notice["run_id"])


async def test_a_server_serving_thumbnails_has_neither_numpy_nor_pillow(tmp_path: Path) -> None:
    db = create_many_runs_database(tmp_path / "runs.db", RUNS)
    async with (
        _server(db, tmp_path, "--helpers", "1") as (url, marker),
        open_websocket_url(url, max_message_size=4 << 20) as ws,
    ):
        client = Client(ws)
        assert len((await client.request("list_runs"))["runs"]) == RUNS
        await _thumbnails(client, url, set(range(1, RUNS + 1)))
    assert json.loads(marker.read_text()) == []
    assert_no_children()


async def test_a_dashboard_session_with_a_run_being_written_draws_nothing_in_the_server(
    writable_db: Path, tmp_path: Path
) -> None:
    # Live images, details, exploring and drawing: all read and drawn in the helpers.
    async with (
        _server(writable_db, tmp_path, "--helpers", "2", "--poll", "0.1") as (url, marker),
        open_websocket_url(url, max_message_size=4 << 20) as ws,
    ):
        client = Client(ws)
        runs = {row["run_id"] for row in (await client.request("list_runs"))["runs"]}
        assert LIVE_RUN in runs
        await _thumbnails(client, url, runs)  # the run being written's is a live image

        await trio.to_thread.run_sync(append_rows, writable_db, 120, 150)  # the measurement
        while True:  # its new rows are drawn as a new revision of its live images
            notice = await client.next_push()
            if (notice["type"], notice.get("run_id"), notice.get("revision", 0)) == (
                "image_ready", LIVE_RUN, 2,
            ):  # fmt: skip
                assert (await fetch_png(url, notice))[:4] == b"\x89PNG"
                break

        details = await client.request("run_details", run_id=LIVE_RUN)
        assert details["type"] == "run_details_reply"
        data = await client.request("run_data", run_id=LIVE_RUN)
        assert data["type"] == "run_data_reply"
        assert data["series"]
        drawing = await client.request("draw", run_id=6, scale="linear")
        assert drawing["type"] == "drawing"
        assert drawing["report"]["panels"]
        assert (await fetch_png(url, drawing))[:4] == b"\x89PNG"
    assert json.loads(marker.read_text()) == []
    assert_no_children()
