"""The job server on a PostgreSQL ledger: ``--ledger postgresql://…`` (docs/cluster.rst).

Real server processes on the session's throwaway PostgreSQL (``tests/pg_support.py``),
the real clock, short deadlines; no child is left.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
import trio
from frontdoor_support import assert_no_children
from pg_support import committed

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from pg_support import PostgresServer

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "pg-token"
#: Seconds a server process or a client may take: generous, since a server's start
#: (imports, a helper process) is slow on a loaded machine; a failure is still bounded.
TIMEOUT = 60.0


async def first_line(stream: trio.abc.ReceiveStream) -> bytes:
    """The first line the server prints (``listening on ...``), read a byte at a time."""
    line = b""
    with trio.fail_after(TIMEOUT):
        while not line.endswith(b"\n"):
            chunk = await stream.receive_some(1)
            assert chunk, f"the server exited before printing a line: {line!r}"
            line += chunk
    return line


@pytest.fixture(autouse=True)
def _no_child_left():  # type: ignore[no-untyped-def]
    yield
    assert_no_children()


def _server_argv(ledger: str) -> list[str]:
    return [sys.executable, "-m", "examples.jobs.server", "--port", "0", "--helpers", "1",
            "--token", TOKEN, "--ledger", ledger]  # fmt: skip


async def _client(url: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(TIMEOUT):
        return await trio.run_process(
            [sys.executable, "-m", "examples.jobs.client", "--url", url, "--token", TOKEN, *args],
            cwd=ROOT, capture_stdout=True, capture_stderr=True, check=False,
        )  # fmt: skip


async def _serve_then(
    ledger: str, *commands: tuple[str, ...], meanwhile: Callable[[], Awaitable[None]] | None = None
) -> list[str]:
    """Start a job server on ``ledger``, run the client ``commands`` against it (then
    ``meanwhile``), stop it with SIGTERM; return each command's stdout (each must
    succeed)."""
    process = await trio.lowlevel.open_process(
        _server_argv(ledger), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    outputs = []
    try:
        assert process.stdout is not None
        line = (await first_line(process.stdout)).decode()
        assert line.startswith("listening on ws://"), line
        url = line.split()[2].partition("?")[0]
        for command in commands:
            done = await _client(url, *command)
            assert done.returncode == 0, done.stderr
            outputs.append(done.stdout.decode())
        if meanwhile is not None:
            await meanwhile()
    finally:
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(TIMEOUT):
            await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()
    return outputs


async def _refused(ledger: str) -> str:
    """Start a job server on ``ledger`` that must refuse it: its one line on stderr."""
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            _server_argv(ledger), cwd=ROOT, capture_stdout=True, capture_stderr=True,
            check=False,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("job_server: "), lines
    return lines[0]


async def test_the_job_server_keeps_its_runs_in_postgresql_and_refuses_a_second_writer(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.fresh_url()
    refusals = []

    async def second() -> None:  # one event log writes a ledger at a time
        refusals.append(await _refused(url))

    submit = ("submit", "sleep", '{"seconds": 0.05}')
    (submitted,) = await _serve_then(url, submit, meanwhile=second)
    assert ": ok" in submitted
    assert "is in use: the ledger's writer lock is held by backend pid" in refusals[0]
    assert committed(url, "SELECT run_id, state, verdict FROM runs") == [(1, "finished", "ok")]
    # A second server on the same database reads the run back.
    (status,) = await _serve_then(url, ("status", "1"))
    assert status.startswith("run 1: ok"), status
    seqs = [seq for (seq,) in committed(url, "SELECT seq FROM events ORDER BY seq")]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_a_foreign_or_newer_postgresql_schema_refuses_the_start_in_one_line(
    postgres_server: PostgresServer,
) -> None:
    foreign = postgres_server.fresh_url()
    with psycopg.connect(foreign, autocommit=True) as conn:
        conn.execute("CREATE TABLE jobs (id integer)")
    newer = postgres_server.fresh_url()
    await _serve_then(newer)  # creates the ledger's tables
    with psycopg.connect(newer, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    for ledger, words in (
        (foreign, "but not an event-log ledger"),
        (newer, "has schema version 99, newer than the supported"),
    ):
        assert words in await _refused(ledger)
    assert committed(foreign, "SELECT count(*) FROM jobs") == [(0,)]
