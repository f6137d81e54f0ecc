"""Job-server processes of a cluster for the tests (docs/cluster.rst).

:func:`start_node` starts ``python -m examples.jobs.server --cluster`` on a ledger URL,
with ``TRIO_ACTORS_JOBS_TRACE`` set so that its helpers leave one file per execution;
:func:`stop_nodes` resumes (``SIGCONT``) and stops (``SIGTERM``) those still running and
waits for each; :func:`session` is a websocket client session of one node;
:class:`Load` is clients submitting jobs to whichever nodes are alive;
:func:`processes_of` finds every process a test's nodes started, helpers included.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import urllib.parse
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import trio
from pg_support import committed
from trio_websocket import ConnectionClosed, HandshakeError, wrap_client_stream

from examples.jobs.follow import Session
from examples.web.closing import RESYNC_REQUIRED

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

__all__ = [
    "TIMEOUT",
    "TOKEN",
    "Follower",
    "Load",
    "node_ids",
    "processes_of",
    "session",
    "start_node",
    "stop_nodes",
]

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "cluster-token"
#: Seconds a server process may take to start or stop: generous on a loaded machine.
TIMEOUT = 60.0
_NODES = itertools.count(1)


async def start_node(url: str, trace: Path, *options: str) -> tuple[trio.Process, str]:
    """Start a cluster node on ``url`` (2 helpers); the process and its ``ws://`` URL."""
    argv = [sys.executable, "-m", "examples.jobs.server", "--port", "0", "--helpers", "2",
            "--token", TOKEN, "--ledger", url, "--cluster", *options]  # fmt: skip
    env = {**os.environ, "TRIO_ACTORS_JOBS_TRACE": str(trace)}
    # Its log goes beside the trace folder, for a failing test's reader.
    log = os.open(trace.parent / f"node-{next(_NODES)}.log", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        process = await trio.lowlevel.open_process(
            argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, env=env
        )
    finally:
        os.close(log)
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
    """A client session of the node at ``url``.

    Its TCP stream is this function's, closed however the session ends: a node killed
    during the opening handshake must leave no socket behind (trio-websocket's own
    connect leaves that one to the garbage collector). Connecting and the handshake
    take ``TIMEOUT / 6`` seconds each at most (else ``OSError``).
    """
    headers = [(b"authorization", f"Bearer {TOKEN}".encode())]
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname is not None, url
    assert parts.port is not None, url
    try:
        async with trio.open_nursery() as nursery:
            with trio.move_on_after(TIMEOUT / 6) as connecting:
                stream = await trio.open_tcp_stream(parts.hostname, parts.port)
            if connecting.cancelled_caught:
                raise OSError(f"no connection to {url} within {TIMEOUT / 6:g} s")
            try:
                with trio.move_on_after(TIMEOUT / 6) as connecting:
                    ws = await wrap_client_stream(
                        nursery, stream, f"{parts.hostname}:{parts.port}", parts.path or "/",
                        extra_headers=headers,
                    )  # fmt: skip
                if connecting.cancelled_caught:
                    raise OSError(f"no websocket handshake with {url} within {TIMEOUT / 6:g} s")
                try:
                    yield Session(ws)
                finally:
                    await ws.aclose()
            finally:
                await trio.aclose_forcefully(stream)
    except BaseExceptionGroup as group:
        # One error comes out alone, as from trio-websocket's own connect.
        if len(group.exceptions) == 1 and isinstance(group.exceptions[0], Exception):
            raise group.exceptions[0] from None
        raise


def node_ids(url: str) -> set[str]:
    """The incarnation ids of the nodes holding a lease in the ledger at ``url`` (none
    before the first node created the cluster's tables)."""
    if committed(url, "SELECT to_regclass('cluster_nodes')") == [(None,)]:
        return set()
    return {node for (node,) in committed(url, "SELECT node FROM cluster_nodes")}


def processes_of(trace: Path) -> list[int]:
    """Pids still running with ``trace`` as their ``TRIO_ACTORS_JOBS_TRACE``: the nodes
    started on it and everything they started (zombies of other parents excluded)."""
    marker = f"TRIO_ACTORS_JOBS_TRACE={trace}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, parent = stat[stat.rindex(")") + 2 :].split()[:2]
        if marker in environ.split(b"\0") and (state != "Z" or int(parent) == os.getpid()):
            found.append(int(entry))
    return found


#: What a client sees when the node it talks to dies under it.
_NODE_GONE = (ConnectionClosed, HandshakeError, OSError, trio.BrokenResourceError)


class Load:
    """Clients submitting ``sleep`` jobs to the nodes alive now, round-robin.

    Each job has its own request id (``job-N``) and its own ``seconds`` (``seconds`` plus
    N microseconds: no two coalesce); every third is sent again, with the same id, to the
    next node, whose receipt must name the same run. A client whose node dies under it
    sends the job again to another node (an answer lost with its node is no receipt).
    The clients wait while more than ``queued`` runs are queued, so the load stays steady.

    Args:
        ledger: The cluster's ``postgresql://`` URL (for the queue's depth).
        urls: The ``ws://`` URLs of the nodes alive now.
        seconds: Each job's length, in seconds.
        queued: Queued runs above which the clients wait.
        clients: Clients submitting at once.
    """

    def __init__(
        self,
        ledger: str,
        urls: Callable[[], list[str]],
        *,
        seconds: float,
        queued: int,
        clients: int = 3,
    ) -> None:
        self._ledger = ledger
        self._urls = urls
        self._seconds = seconds
        self._queued = queued
        self._clients = clients
        self._depth = 0
        self._jobs = itertools.count()
        self._stopping = False
        self._done = trio.Event()
        #: Request id -> run id, for every receipt a client got.
        self.receipts: dict[str, int] = {}
        #: Requests sent twice (to two nodes) and answered twice with one run.
        self.repeats = 0
        #: Answers lost with their node (the job was sent again elsewhere).
        self.lost_answers = 0
        #: Refusals a client got, by code (each retried after its ``retry_after``).
        self.refusals: dict[str, int] = {}

    def request_of(self, seconds: float) -> str:
        """The request id of the job that slept ``seconds``."""
        return f"job-{round((seconds - self._seconds) * 1e6)}"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Submit until :meth:`stop`; each client ends after its job's receipts."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_depth)
            async with trio.open_nursery() as clients:
                for _ in range(self._clients):
                    clients.start_soon(self._client)
                task_status.started()
            nursery.cancel_scope.cancel()
        self._done.set()

    async def stop(self) -> None:
        """Stop submitting; return once every client got its last job's receipts."""
        self._stopping = True
        with trio.fail_after(TIMEOUT):
            await self._done.wait()

    async def _watch_depth(self) -> None:
        sql = "SELECT count(*) FROM cluster_runs WHERE state = 'queued'"
        while True:
            # (The last depth stands while the database is away.)
            with contextlib.suppress(psycopg.OperationalError):
                ((self._depth,),) = committed(self._ledger, sql)
            await trio.sleep(0.05)

    async def _client(self) -> None:
        while not self._stopping:
            if self._depth > self._queued:
                await trio.sleep(0.02)
                continue
            n = next(self._jobs)
            request_id = f"job-{n}"
            arguments = {"seconds": self._seconds + n / 1e6}
            run_id = await self._submit(n, request_id, arguments)
            self.receipts[request_id] = run_id
            if n % 3 == 0:
                again = await self._submit(n + 1, request_id, arguments, once=True)
                if again is not None:
                    assert again == run_id, (request_id, run_id, again)
                    self.repeats += 1

    async def _submit(
        self, n: int, request_id: str, arguments: dict[str, Any], *, once: bool = False
    ) -> Any:
        """The run id of ``request_id``'s receipt from the ``n``-th live node (the next
        one after a node died); None if ``once`` and the node died."""
        while True:
            urls = self._urls()
            url = urls[n % len(urls)]
            try:
                async with session(url) as client:
                    answer = await client.request(
                        "submit", request_id=request_id, operation="sleep", arguments=arguments
                    )
            except _NODE_GONE:
                self.lost_answers += 1
                if once:
                    return None
                n += 1
                await trio.sleep(0.02)
                continue
            if answer.get("admitted"):
                return answer["run_id"]
            code = answer.get("code")
            assert code in ("admission_full", "ledger_unavailable"), answer
            assert answer.get("retry_after", 0) > 0, answer
            self.refusals[code] = self.refusals.get(code, 0) + 1
            await trio.sleep(answer["retry_after"])


class Follower:
    """A client of one node following every event from cursor 0 (``subscribe``); dropped
    (for falling behind, or its node's restart of a port), it resumes after its cursor
    on a new connection, as clients do (design §6.15). A gap would show in
    :attr:`events`: a push is kept unless it repeats one already kept.

    Args:
        url: The node's ``ws://`` URL.
    """

    def __init__(self, url: str) -> None:
        #: The node it follows; changed, the next connection goes there (from the cursor).
        self.url = url
        #: ``(seq, kind, run_id)`` of every event received, in order.
        self.events: list[tuple[int, str, int | None]] = []
        self._moved = trio.Event()

    @property
    def cursor(self) -> int:
        """The seq of the last event received (0: none)."""
        return self.events[-1][0] if self.events else 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Follow until cancelled; started once the first subscription is answered."""
        while True:
            try:
                async with session(self.url) as client:
                    answer = await client.request("subscribe", cursor=self.cursor)
                    assert answer["type"] == "events", answer
                    # The replayed events come inside the answer, untagged: read first.
                    client.pushed[:0] = [{"type": "event", **e} for e in answer["events"]]
                    task_status.started()
                    task_status = trio.TASK_STATUS_IGNORED
                    while True:
                        push = await client.next_push()
                        if push["type"] == "resync_required":
                            break
                        assert push["type"] == "event", push
                        if push["seq"] > self.cursor:
                            self.events.append((push["seq"], push["kind"], push["run_id"]))
                            self._moved.set()
                            self._moved = trio.Event()
            except ConnectionClosed as exc:
                if exc.reason is None or exc.reason.code != RESYNC_REQUIRED:
                    raise

    async def wait_for(self, seq: int) -> None:
        """Wait until the event ``seq`` (or a later one) arrived."""
        with trio.fail_after(TIMEOUT):
            while self.cursor < seq:
                await self._moved.wait()
