"""The preview server process never imports numpy or Pillow: the helpers draw (design §5.4).

A real server (``python -m examples.preview.server``) in a subprocess, on the real clock
with short deadlines, serves the thumbnails of a database of finished runs to a real
client (``list_runs``, then a ``GET`` of each ``image_ready`` URL); when it has stopped
(SIGTERM), it says which modules it had imported.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import trio
from frontdoor_support import TIMEOUT, Client, assert_no_children
from preview_support import fetch_png
from process_support import interruptible
from trio_websocket import open_websocket_url

from examples.preview.sample_db import create_many_runs_database

ROOT = Path(__file__).resolve().parents[2]
RUNS = 6
#: Runs the server as ``python -m`` does, and writes at exit which of its modules come
#: from numpy or Pillow.
_SERVER = """\
import atexit, json, runpy, sys
def _report():
    with open({marker!r}, "w") as out:
        json.dump(sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "PIL")), out)
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


async def test_a_server_serving_thumbnails_has_neither_numpy_nor_pillow(tmp_path: Path) -> None:
    db = create_many_runs_database(tmp_path / "runs.db", RUNS)
    marker = tmp_path / "modules.json"
    argv = [sys.executable, "-c", _SERVER.format(marker=str(marker)), str(db), "--port", "0",
            "--no-token", "--cache-dir", str(tmp_path / "cache"), "--helpers", "1",
            "--grace", "1"]  # fmt: skip
    env = {**os.environ, "TRIO_ACTORS_RUNTIME_DIR": str(tmp_path / "info")}
    with (tmp_path / "server.stderr").open("wb") as errors:
        process = await trio.lowlevel.open_process(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=errors,
            preexec_fn=interruptible,
        )  # fmt: skip
    try:
        with trio.fail_after(6 * TIMEOUT):
            url = await _url_of(process)
            async with open_websocket_url(url, max_message_size=4 << 20) as ws:
                client = Client(ws)
                assert len((await client.request("list_runs"))["runs"]) == RUNS
                thumbnails: set[int] = set()
                while len(thumbnails) < RUNS:
                    notice = await client.next_push()
                    if notice["type"] == "image_ready" and notice["kind"] == "thumbnail":
                        assert (await fetch_png(url, notice))[:4] == b"\x89PNG"
                        thumbnails.add(notice["run_id"])
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
    assert json.loads(marker.read_text()) == []
    assert_no_children()
