"""Job-server processes of a cluster for the tests (docs/cluster.rst).

:func:`start_node` starts ``python -m examples.jobs.server --cluster`` on a ledger URL,
with ``TRIO_ACTORS_JOBS_TRACE`` set so that its helpers leave one file per execution;
:func:`stop_nodes` resumes (``SIGCONT``) and stops (``SIGTERM``) those still running and
waits for each; :func:`session` is a websocket client session of one node.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from examples.jobs.follow import Session
from examples.web.wsclient import open_websocket_client

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["TIMEOUT", "TOKEN", "session", "start_node", "stop_nodes"]

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "cluster-token"
#: Seconds a server process may take to start or stop: generous on a loaded machine.
TIMEOUT = 60.0


async def start_node(url: str, trace: Path, *options: str) -> tuple[trio.Process, str]:
    """Start a cluster node on ``url`` (2 helpers); the process and its ``ws://`` URL."""
    argv = [sys.executable, "-m", "examples.jobs.server", "--port", "0", "--helpers", "2",
            "--token", TOKEN, "--ledger", url, "--cluster", *options]  # fmt: skip
    env = {**os.environ, "TRIO_ACTORS_JOBS_TRACE": str(trace)}
    process = await trio.lowlevel.open_process(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert process.stdout is not None
    line = b""
    with trio.fail_after(TIMEOUT):
        while not line.endswith(b"\n"):
            chunk = await process.stdout.receive_some(1)
            assert chunk, f"the server exited before printing a line: {line!r}"
            line += chunk
    text = line.decode()
    assert text.startswith("listening on ws://"), text
    return process, text.split()[2].partition("?")[0]


async def stop_nodes(processes: list[trio.Process]) -> None:
    """Stop every node still running (resumed first, if paused) and wait for each."""
    for process in processes:
        if process.returncode is None:
            process.send_signal(signal.SIGCONT)
            process.send_signal(signal.SIGTERM)
    with trio.fail_after(TIMEOUT):
        for process in processes:
            await process.wait()
            if process.stdout is not None:
                await process.stdout.aclose()


@asynccontextmanager
async def session(url: str) -> AsyncIterator[Session]:
    """A client session of the node at ``url``."""
    headers = [(b"authorization", f"Bearer {TOKEN}".encode())]
    async with open_websocket_client(url, extra_headers=headers) as ws:
        yield Session(ws)
