"""``accept()`` out of file descriptors: one warning per episode, a backoff (design §7.3).

First a scripted listener on the autojump clock (exact virtual times, exact log
records); then the real job server as a subprocess whose descriptor limit the test
lowers (``prlimit``) until ``accept()`` fails with EMFILE, and raises again.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from frontdoor_support import TIMEOUT, assert_no_children, open_client

from actors import Backoff
from examples.web.accept import Acceptor

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]


class ScriptedListener(trio.abc.Listener[trio.abc.Stream]):
    """Plays a script: an errno fails ``accept()``, a stream is accepted, a number of
    seconds passes first (even if an ``accept()`` is cancelled meanwhile); then waits."""

    def __init__(self, script: list[int | float | trio.abc.Stream]) -> None:
        self.script = script
        self.closed = False

    async def accept(self) -> trio.abc.Stream:
        await trio.lowlevel.checkpoint()
        while self.script and isinstance(self.script[0], float):
            until = self.script[0]
            await trio.sleep_until(until)
            self.script.pop(0)
        if not self.script:
            await trio.sleep_forever()
        step = self.script.pop(0)
        if isinstance(step, int):
            raise OSError(step, os.strerror(step))
        assert isinstance(step, trio.abc.Stream)
        return step

    async def aclose(self) -> None:
        self.closed = True
        await trio.lowlevel.checkpoint()


class VirtualTimes(logging.Handler):
    """Keeps each ``accept_*`` record's event, fields and trio time (the mock clock's)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[tuple[float, str, dict[str, object]]] = []

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", "")
        if event.startswith("accept_"):
            keys = ("errno", "retry_in", "failures", "seconds")
            fields = {k: getattr(record, k) for k in keys if hasattr(record, k)}
            self.seen.append((round(trio.current_time(), 9), event, fields))


@pytest.fixture
def logged() -> Iterator[VirtualTimes]:
    handler = VirtualTimes()
    logger = logging.getLogger("examples.frontdoor")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


async def _play(
    script: list[int | float | trio.abc.Stream], backoff: Backoff, until: float
) -> tuple[list[tuple[float, object]], Acceptor, ScriptedListener]:
    """Serve ``script`` with an :class:`Acceptor` until ``until`` (trio clock)."""
    served: list[tuple[float, object]] = []

    async def handler(stream: trio.abc.Stream) -> None:
        served.append((round(trio.current_time(), 9), stream))
        await trio.lowlevel.checkpoint()

    listener = ScriptedListener(script)
    acceptor = Acceptor(handler, backoff=backoff)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        await nursery.start(acceptor.serve, [listener], nursery)
        await trio.sleep_until(until)
        nursery.cancel_scope.cancel()
    return served, acceptor, listener


async def test_an_episode_is_logged_once_and_retried_with_backoff(
    autojump_clock: trio.testing.MockClock,
    logged: VirtualTimes,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = trio.testing.memory_stream_pair()
    third, _ = trio.testing.memory_stream_pair()
    emfile, enfile = errno.EMFILE, errno.ENFILE
    served, acceptor, listener = await _play(
        [emfile, emfile, enfile, emfile, emfile, first, enfile, second, 3.75, emfile, third],
        Backoff(base=0.05, cap=0.2, reset_after=1.0),
        until=10.0,
    )
    # Backoff 0.05 + 0.1 + 0.2 + 0.2 + 0.2 s, a stream; one more failure of the same
    # episode (0.2 s), a stream; a second without failure since that retry ends the
    # episode at 1.95 s. At 3.75 s a new episode of one failure, over at 4.8 s.
    assert served == [(0.75, first), (0.95, second), (3.8, third)]
    assert logged.seen == [
        (0.0, "accept_failing", {"errno": "EMFILE", "retry_in": 0.05}),
        (1.95, "accept_recovered", {"failures": 6, "seconds": pytest.approx(0.75)}),
        (3.75, "accept_failing", {"errno": "EMFILE", "retry_in": 0.05}),
        (4.8, "accept_recovered", {"failures": 1, "seconds": 0.0}),
    ]
    assert acceptor.failures == 7
    assert listener.closed
    assert "Traceback" not in caplog.text


async def test_a_backoff_longer_than_the_quiet_period_is_still_one_episode(
    autojump_clock: trio.testing.MockClock, logged: VirtualTimes
) -> None:
    stream, _ = trio.testing.memory_stream_pair()
    emfile = errno.EMFILE
    served, _, _ = await _play(
        [emfile, emfile, emfile, emfile, stream],
        Backoff(base=0.5, cap=2.0, reset_after=1.0),
        until=10.0,
    )
    # Delays 0.5, 1, 2, 2 s: failures at 0, 0.5, 1.5 and 3.5 s; the stream at 5.5 s.
    assert served == [(5.5, stream)]
    assert logged.seen == [
        (0.0, "accept_failing", {"errno": "EMFILE", "retry_in": 0.5}),
        (6.5, "accept_recovered", {"failures": 4, "seconds": 3.5}),
    ]


async def test_another_accept_error_ends_the_loop(autojump_clock: trio.testing.MockClock) -> None:
    async def handler(stream: trio.abc.Stream) -> None:
        raise AssertionError("nothing is accepted")

    listener = ScriptedListener([errno.EMFILE, errno.EBADF])
    acceptor = Acceptor(handler, backoff=Backoff(base=0.05, cap=0.2))  # type: ignore[arg-type]
    bad = pytest.RaisesExc(OSError, check=lambda e: e.errno == errno.EBADF)
    with pytest.RaisesGroup(bad, flatten_subgroups=True):
        async with trio.open_nursery() as nursery:
            await nursery.start(acceptor.serve, [listener], nursery)
    assert trio.current_time() == pytest.approx(0.05)
    assert listener.closed


async def _read_until(stream: trio.abc.ReceiveStream, pattern: bytes, seen: bytearray) -> bytes:
    """Read ``stream`` into ``seen`` until ``pattern`` (a regex) matches; return the match."""
    with trio.fail_after(TIMEOUT):
        while (match := re.search(pattern, seen)) is None:
            chunk = await stream.receive_some(65536)
            assert chunk, seen.decode(errors="replace")
            seen += chunk
    return match.group(0)


async def test_a_real_server_out_of_descriptors_recovers_without_a_traceback(
    tmp_path: Path,
) -> None:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "examples.jobs.server", "--port", "0", "--helpers", "1"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stderr is not None
    out, err = bytearray(), bytearray()
    sockets: list[trio.socket.SocketType] = []
    try:
        line = await _read_until(process.stdout, rb"listening on \S+\n", out)
        port, token = re.fullmatch(
            rb"listening on ws://127.0.0.1:(\d+)/\?token=(\S+)\n", line
        ).groups()  # type: ignore[union-attr]
        soft, hard = resource.prlimit(process.pid, resource.RLIMIT_NOFILE)
        in_use = len(os.listdir(f"/proc/{process.pid}/fd"))
        resource.prlimit(process.pid, resource.RLIMIT_NOFILE, (in_use + 2, hard))
        for _ in range(6):  # two are accepted, the others wait in the backlog
            sock = trio.socket.socket()
            sockets.append(sock)
            await sock.connect(("127.0.0.1", int(port)))
        await _read_until(process.stderr, rb"failed with EMFILE[^\n]*\n", err)
        for sock in sockets:
            sock.close()
        sockets.clear()
        await _read_until(process.stderr, rb"works again: no failure for 1 s after[^\n]*\n", err)
        resource.prlimit(process.pid, resource.RLIMIT_NOFILE, (soft, hard))
        async with open_client(int(port), f"/?token={token.decode()}") as client:
            assert (await client.request("boot_report"))["type"] == "boot_report_reply"
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(TIMEOUT):
            await process.wait()
            err += await process.stderr.receive_some(65536) or b""
    finally:
        for sock in sockets:
            sock.close()
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.stdout.aclose()
        await process.stderr.aclose()
    text = err.decode()
    assert process.returncode == 0, text
    assert text.count("failed with EMFILE") == 1, text
    assert text.count("works again:") == 1, text
    assert "Traceback" not in text
    assert_no_children()
