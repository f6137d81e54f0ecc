"""The warden over real SSH: relay, the ladder's signals, partitions, failures (design §3.16).

The channels as design §2.5 has them: the parent's control frames on a forwarded Unix
socket (the control channel), the helper's requests and replies straight on ssh's stdin
and stdout, the warden's frames on ssh's stderr; or, relaying (``channel`` "relay", as
where the server refuses the forwarding), the control frames between the requests on
ssh's stdin.

A private ``sshd`` on loopback (``tests/remote_support.py``) makes this machine the
"remote" host, so every check of the remote side reads this machine's ``/proc``: no
process of a helper's tree, and no zombie, may be left. Real processes, the real clock
and short timeouts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
import uuid
from collections import deque
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import remote_support
import trio
from remote_support import assert_no_children_but, private_sshd, ps_lines

from actors._remote import channel_paths, classify_ssh_failure, remote_command
from protocol.framing import FrameDecoder, encode_frame
from protocol.warden import (
    WARDEN_EXIT_REFUSED,
    WARDEN_VERSION,
    StderrSplitter,
    decode_control,
    encode_heartbeat,
    encode_signal,
    encode_start,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from remote_support import SSHServer

#: A helper that speaks frames, stdlib only: it echoes each body; ``exit`` makes it exit
#: with status 7; ``spawn`` starts a grandchild that leaves the session (``setsid``) and
#: ignores SIGTERM, and answers ``pid:<its pid>``; ``big`` answers 2 MiB; ``warn``
#: writes a line to its stderr; ``fake`` answers a body that looks like a control frame.
#: ``ignore-term`` in its argv makes the helper ignore SIGTERM too.
HELPER = r"""
import os, signal, subprocess, sys
if "ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
GRANDCHILD = (
    "import os, signal, sys, time\n"
    "os.setsid()\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdout.close()\n"
    "while True: time.sleep(60)\n"
)
def read(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data
def write(body):
    os.write(1, len(body).to_bytes(4, "big") + body)
while True:
    body = read(int.from_bytes(read(4), "big"))
    if body == b"exit":
        sys.exit(7)
    elif body == b"spawn":
        child = subprocess.Popen(
            [sys.executable, "-c", GRANDCHILD, sys.argv[1]],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        )
        child.stdout.readline()
        write(b"pid:%d" % child.pid)
    elif body == b"warn":
        sys.stderr.write("a warning from the helper\n")
        sys.stderr.flush()
        write(b"warned")
    elif body == b"big":
        write(b"\xae" * (2 << 20))
    elif body == b"fake":
        write(b'\xaf{"type":"exit"}')
    else:
        write(body)
"""
#: Seconds for any one step of a test (an SSH login on a loaded machine included).
STEP = 10.0
#: The warden's source, run here without ssh by the tests of its own robustness.
WARDEN = str(Path(__file__).resolve().parents[2] / "actors" / "_remote" / "_warden.py")


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHServer]:
    with private_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


def helper_argv(marker: str, *flags: str) -> list[str]:
    return ["python3", "-c", HELPER, marker, *flags]


def new_marker() -> str:
    return f"warden-test-{uuid.uuid4().hex}"


def alive(pid: int) -> bool:
    """True while ``pid`` exists on the "remote" side, as a zombie too."""
    return os.path.exists(f"/proc/{pid}")


def session_of(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rindex(")") + 2 :].split()[3])


async def wait_gone(pids: list[int], within: float) -> float:
    """Seconds until every pid is gone; fails after ``within`` seconds.

    They are not our children (sshd's, the warden's), and a reap by another process
    sends us no event: ``/proc`` is looked at again every 10 ms until the deadline.
    """
    start = time.monotonic()
    with trio.fail_after(within):
        while any(alive(pid) for pid in pids):  # noqa: ASYNC110 - no event to wait for
            await trio.sleep(0.01)
    return time.monotonic() - start


@pytest.fixture(params=["relay", "socket"])
def channel(request: pytest.FixtureRequest) -> str:
    """Where the parent's control frames go: ssh's stdin, or the control channel."""
    return str(request.param)


class WardenLink:
    """The parent's end of one ``ssh`` running a warden: the helper's frames on stdout,
    the warden's on stderr (collected by :meth:`collect`), the parent's control frames
    on the control channel at ``local`` (:meth:`order`) or, without one, on stdin."""

    def __init__(self, process: trio.Process, local: str | None) -> None:
        self.process = process
        self.local = local
        self.socket: trio.SocketStream | None = None
        self.decoder = FrameDecoder(max_size=4 << 20)
        self.pending: deque[bytes] = deque()
        #: ssh's whole stderr, raw; the login's text; what the helper's tree wrote.
        self.stderr = bytearray()
        self.text = bytearray()
        self.helper_stderr = bytearray()
        self.controls, self._controls = trio.open_memory_channel[dict[str, object]](64)

    async def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(data)

    async def order(self, frame: bytes) -> None:
        """A control frame, on the control channel where there is one."""
        if self.socket is None:
            await self.send(frame)
        else:
            await self.socket.send_all(frame)

    async def body(self) -> bytes:
        """The helper's next frame, from ssh's stdout."""
        assert self.process.stdout is not None
        with trio.fail_after(STEP):
            while not self.pending:
                chunk = await self.process.stdout.receive_some()
                assert chunk, f"ssh ended; its stderr: {bytes(self.stderr)[-2000:]!r}"
                self.pending.extend(self.decoder.feed(chunk))
        return self.pending.popleft()

    async def control(self, kind: str) -> dict[str, object]:
        """The warden's next control frame, from ssh's stderr."""
        with trio.fail_after(STEP):
            try:
                message = await self._controls.receive()
            except trio.EndOfChannel:
                raise AssertionError(f"no {kind!r}; ssh's stderr: {bytes(self.stderr)!r}") from None
        assert message["type"] == kind, message
        return message

    async def collect(self, done: trio.Event) -> None:
        """Split ssh's stderr until its end."""
        assert self.process.stderr is not None
        splitter = StderrSplitter()
        async with self.controls:
            async for chunk in self.process.stderr:
                self.stderr.extend(chunk)
                for kind, data in splitter.feed(chunk):
                    if kind == "control":
                        await self.controls.send(decode_control(data))
                    else:
                        (self.text if kind == "text" else self.helper_stderr).extend(data)
            assert splitter.broken is None
        done.set()

    async def start(self, argv: list[str], **options: object) -> dict[str, object]:
        settings: dict[str, object] = {"heartbeat_timeout": 30.0, "sweep_timeout": 1.0}
        settings.update(options)
        start = encode_start(argv, **settings)  # type: ignore[arg-type]
        if self.local is None:
            await self.send(start)
        hello = await self.control("hello")
        assert hello["version"] == WARDEN_VERSION
        assert hello["channel"] is (self.local is not None)
        if self.local is not None:
            self.socket = await trio.open_unix_socket(self.local)
            await self.socket.send_all(start)
        self.warden = int(hello["pid"])  # type: ignore[call-overload]
        with trio.fail_after(STEP):
            answer = await self._controls.receive()
        assert answer["type"] in ("started", "refused"), answer
        return answer


@asynccontextmanager
async def open_warden(
    server: SSHServer, channel: str = "relay", **ssh: object
) -> AsyncIterator[WardenLink]:
    with tempfile.TemporaryDirectory(prefix="trio-actors-") as folder:
        local, remote = channel_paths(folder)
        argv = server.ssh_argv(
            remote_command(channel=remote if channel == "socket" else None),
            **ssh,  # type: ignore[arg-type]
        )
        if channel == "socket":
            argv[1:1] = ["-L", f"{local}:{remote}"]
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        link = WardenLink(process, local if channel == "socket" else None)
        async with _running(link):
            yield link


@asynccontextmanager
async def _running(link: WardenLink) -> AsyncIterator[None]:
    process = link.process
    collected = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.collect, collected)
            yield
            assert process.stdin is not None
            await process.stdin.aclose()
            if link.socket is not None:
                await link.socket.aclose()
            with trio.move_on_after(STEP):
                await process.wait()
                await collected.wait()  # ssh's stderr to its end
            nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()


def warden_frames(stderr: bytes) -> list[dict[str, object]]:
    """The warden's control frames in its stderr (run without ssh: no login text)."""
    splitter = StderrSplitter()
    parts = splitter.feed(stderr) + splitter.close()
    assert [kind for kind, _ in parts if kind != "control"] == [], parts
    return [decode_control(body) for _, body in parts]


async def test_frames_are_relayed_verbatim_both_ways_and_the_exit_is_reported(sshd, channel):
    marker = new_marker()
    async with open_warden(sshd, channel) as link:
        started = await link.start(helper_argv(marker), max_request=200_000)
        helper = int(started["pid"])  # type: ignore[call-overload]
        assert started["containment"] in ("cgroup", "tree")
        assert alive(helper)
        bodies = [b"\xae" + b"x" * 10, b"", b"\xae" + bytes(range(256)) * 300, b"\xaeend"]
        stream = b"".join(encode_frame(body, max_size=200_000) for body in bodies)
        # Whole, then one byte at a time: the warden relays frames, not writes.
        await link.send(stream)
        for body in bodies:
            assert await link.body() == body
        for byte in stream[:50]:
            await link.send(bytes((byte,)))
        await link.send(stream[50:])
        for body in bodies:
            assert await link.body() == body
        await link.send(encode_frame(b"warn"))
        assert await link.body() == b"warned"
        await link.order(encode_heartbeat(41))
        assert (await link.control("heartbeat"))["seq"] == 41
        await link.send(encode_frame(b"exit"))
        final = await link.control("exit")
        assert final == {
            "type": "exit",
            "cause": "exited",
            "returncode": 7,
            "signal": None,
            "empty": True,
            "left": [],
            "message": None,
        }
    assert link.process.returncode == 0
    # In a stderr frame on SSH's stderr channel; no text but the login's.
    assert link.helper_stderr == b"a warning from the helper\n"
    assert b"warning" not in link.text
    await wait_gone([link.warden, helper], STEP)
    assert ps_lines(marker) == []
    assert_no_children_but(sshd)


async def test_start_and_the_helper_s_frames_may_be_sent_before_hello(sshd):
    marker = new_marker()
    async with open_warden(sshd) as link:
        await link.send(
            encode_start(helper_argv(marker), heartbeat_timeout=30, sweep_timeout=1)
            + encode_frame(b"\xaefirst")
            + encode_frame(b"exit")
        )
        assert (await link.control("hello"))["version"] == WARDEN_VERSION
        helper = int((await link.control("started"))["pid"])  # type: ignore[call-overload]
        assert await link.body() == b"\xaefirst"
        final = await link.control("exit")
        assert (final["returncode"], final["empty"]) == (7, True)
    assert not alive(helper)
    assert ps_lines(marker) == []
    assert_no_children_but(sshd)


@pytest.mark.parametrize("containment", ["cgroup", "tree"])
async def test_sigterm_then_sigkill_reach_a_grandchild_that_left_the_session(
    sshd, containment, channel
):
    marker = new_marker()
    async with open_warden(sshd, channel) as link:
        started = await link.start(helper_argv(marker, "ignore-term"), containment=containment)
        if started["type"] == "refused":  # pragma: no cover - a host without cgroup v2
            pytest.skip(str(started["message"]))
        assert started["containment"] == containment
        helper = int(started["pid"])  # type: ignore[call-overload]
        await link.send(encode_frame(b"spawn"))
        grandchild = int((await link.body()).removeprefix(b"pid:"))
        assert session_of(grandchild) == grandchild != session_of(helper)

        await link.order(encode_signal("SIGTERM"))
        signalled = await link.control("signalled")
        assert {helper, grandchild} <= set(signalled["pids"])  # type: ignore[arg-type]
        assert signalled["failed"] == []
        # Both ignore SIGTERM: still there; prove it with a round trip through the helper.
        await link.send(encode_frame(b"\xaestill"))
        assert await link.body() == b"\xaestill"
        assert alive(grandchild)

        await link.order(encode_signal("SIGKILL"))
        signalled = await link.control("signalled")
        assert {helper, grandchild} <= set(signalled["pids"])  # type: ignore[arg-type]
        final = await link.control("exit")
        assert (final["cause"], final["signal"], final["empty"]) == ("exited", "SIGKILL", True)
    assert not alive(helper)
    assert not alive(grandchild)
    await wait_gone([link.warden], STEP)
    assert ps_lines(marker) == []
    assert_no_children_but(sshd)


async def test_a_helper_killed_by_sigterm_has_its_grandchild_swept(sshd, channel):
    marker = new_marker()
    async with open_warden(sshd, channel) as link:
        await link.start(helper_argv(marker))
        await link.send(encode_frame(b"spawn"))
        grandchild = int((await link.body()).removeprefix(b"pid:"))
        await link.order(encode_signal("SIGTERM"))
        await link.control("signalled")
        final = await link.control("exit")
        assert (final["signal"], final["empty"], final["left"]) == ("SIGTERM", True, [])
    assert not alive(grandchild)
    assert ps_lines(marker) == []
    assert_no_children_but(sshd)


async def test_killing_the_local_ssh_client_makes_the_warden_kill_the_remote_tree(sshd, channel):
    marker = new_marker()
    async with open_warden(sshd, channel) as link:
        started = await link.start(helper_argv(marker), heartbeat_timeout=60.0)
        helper = int(started["pid"])  # type: ignore[call-overload]
        await link.send(encode_frame(b"spawn"))
        grandchild = int((await link.body()).removeprefix(b"pid:"))
        link.process.send_signal(signal.SIGKILL)  # the partition: the link dies at once
        # Far below the heartbeat timeout: the end of the link alone stopped it all.
        await wait_gone([link.warden, helper, grandchild], STEP)
        await link.process.wait()
    assert link.process.returncode == -signal.SIGKILL
    assert ps_lines(marker) == []
    assert_no_children_but(sshd)


async def test_a_control_channel_that_ends_makes_the_warden_kill_the_remote_tree(sshd):
    """The control channel is the link for the warden: its end (the parent closed it, or
    its ssh forwarding died) ends the helper's tree as the end of the link does."""
    marker = new_marker()
    async with open_warden(sshd, "socket") as link:
        started = await link.start(helper_argv(marker), heartbeat_timeout=60.0)
        helper = int(started["pid"])  # type: ignore[call-overload]
        await link.send(encode_frame(b"spawn"))
        grandchild = int((await link.body()).removeprefix(b"pid:"))
        assert link.socket is not None
        await link.socket.aclose()
        final = await link.control("exit")
        assert (final["cause"], final["signal"], final["empty"]) == ("link_lost", "SIGKILL", True)
    assert not alive(helper)
    assert not alive(grandchild)
    assert ps_lines(marker) == []
    assert_no_children_but(sshd)


async def test_heartbeats_that_stop_make_the_warden_kill_the_remote_tree(sshd, channel):
    marker = new_marker()
    timeout = 1.5
    async with open_warden(sshd, channel) as link:
        started = await link.start(helper_argv(marker), heartbeat_timeout=timeout)
        helper = int(started["pid"])  # type: ignore[call-overload]
        await link.send(encode_frame(b"spawn"))
        grandchild = int((await link.body()).removeprefix(b"pid:"))
        # Heartbeats keep it alive past its timeout (twelve, near enough together for
        # a loaded machine to deliver each in time).
        for seq in range(12):
            if seq:
                await trio.sleep(timeout / 8)
            await link.order(encode_heartbeat(seq))
            last = time.monotonic()
            assert (await link.control("heartbeat"))["seq"] == seq
        final = await link.control("exit")  # the parent falls silent; the link stays up
        silent = time.monotonic() - last
        assert (final["cause"], final["signal"], final["empty"]) == (
            "heartbeat_lost",
            "SIGKILL",
            True,
        )
        assert timeout <= silent  # its clock started when it read the last heartbeat
        assert silent < timeout + STEP
    assert not alive(helper)
    assert not alive(grandchild)
    assert ps_lines(marker) == []
    assert_no_children_but(sshd)


async def test_a_version_mismatch_is_refused(sshd):
    async with open_warden(sshd) as link:
        await link.send(encode_start(["true"], heartbeat_timeout=5, sweep_timeout=1, version=9))
        assert (await link.control("hello"))["version"] == WARDEN_VERSION
        refused = await link.control("refused")
        assert refused["reason"] == "version_mismatch"
        assert (refused["version"], refused["got"]) == (WARDEN_VERSION, 9)
        assert "version" in str(refused["message"])
    assert link.process.returncode == WARDEN_EXIT_REFUSED
    assert_no_children_but(sshd)


async def test_a_helper_that_cannot_be_started_is_refused_with_its_errno(sshd):
    async with open_warden(sshd) as link:
        await link.send(encode_start(["/nonexistent/helper"], heartbeat_timeout=5, sweep_timeout=1))
        await link.control("hello")
        refused = await link.control("refused")
        assert (refused["reason"], refused["errno"]) == ("exec_failed", 2)
        assert "/nonexistent/helper" in str(refused["message"])
    assert link.process.returncode == WARDEN_EXIT_REFUSED
    assert_no_children_but(sshd)


def pipe_of(pid: int, fd: int) -> str:
    return os.readlink(f"/proc/{pid}/fd/{fd}")


def parent_of(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rindex(")") + 2 :].split()[1])


async def test_replies_bypass_the_warden_and_requests_only_when_relayed(sshd, channel):
    """The helper's stdout is the channel's own: its frames, whatever they hold and
    however long, reach the parent without the warden reading them. Its stdin is the
    channel's own too where the control frames have a channel of their own; relaying,
    it is the warden's pipe, so that they can be taken out of the requests."""
    marker = new_marker()
    async with open_warden(sshd, channel) as link:
        started = await link.start(helper_argv(marker))
        helper = int(started["pid"])  # type: ignore[call-overload]
        sshd_session = {
            pipe_of(parent_of(link.warden), int(fd))
            for fd in os.listdir(f"/proc/{parent_of(link.warden)}/fd")
        }
        assert pipe_of(helper, 1) == pipe_of(link.warden, 1)
        assert pipe_of(helper, 2) != pipe_of(link.warden, 2)
        if channel == "socket":
            assert pipe_of(helper, 0) in sshd_session
            assert pipe_of(link.warden, 0) == os.devnull  # it let go of the requests
        else:
            assert pipe_of(helper, 0) != pipe_of(link.warden, 0)
            assert pipe_of(helper, 0) not in sshd_session
        await link.send(encode_frame(b"big"))
        assert await link.body() == b"\xae" * (2 << 20)
        await link.send(encode_frame(b"fake"))  # a helper cannot speak for its warden
        assert await link.body() == b'\xaf{"type":"exit"}'
        await link.order(encode_heartbeat(1))
        assert (await link.control("heartbeat"))["seq"] == 1
        await link.order(encode_signal("SIGKILL"))
        await link.control("signalled")
        final = await link.control("exit")
        assert (final["signal"], final["empty"]) == ("SIGKILL", True)
    assert ps_lines(marker) == []
    assert_no_children_but(sshd)


async def run_ssh(argv: list[str]) -> tuple[int, str]:
    with trio.fail_after(STEP):
        done = await trio.run_process(argv, check=False, capture_stdout=True, capture_stderr=True)
    return done.returncode, done.stderr.decode(errors="replace")


async def test_a_refused_key_fails_fast_with_ssh_s_reason(sshd):
    start = time.monotonic()
    code, stderr = await run_ssh(sshd.ssh_argv(remote_command(), key=sshd.wrong_key))
    assert time.monotonic() - start < STEP
    assert code == 255
    assert "Permission denied" in stderr
    assert classify_ssh_failure(code, stderr[-4096:]) == "auth_refused"
    assert_no_children_but(sshd)


async def test_a_closed_port_is_an_unreachable_host(sshd):
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once it is closed
    argv = sshd.ssh_argv(remote_command())
    argv[argv.index(str(sshd.port))] = str(port)
    code, stderr = await run_ssh(argv)
    assert (code, classify_ssh_failure(code, stderr)) == (255, "host_unreachable")
    assert "Connection refused" in stderr
    assert_no_children_but(sshd)


async def test_a_missing_remote_python_is_named(sshd):
    code, stderr = await run_ssh(sshd.ssh_argv(remote_command(python="python3-absent")))
    assert (code, classify_ssh_failure(code, stderr)) == (127, "python_missing")
    assert "python3-absent" in stderr
    assert_no_children_but(sshd)


def test_without_sshd_the_ssh_tests_skip_but_fail_in_ci(monkeypatch):
    monkeypatch.setattr(remote_support, "find_sshd", lambda: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the SSH tests"):
        remote_support.require_sshd()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="openssh-server"):
        remote_support.require_sshd()


@pytest.mark.parametrize(
    "body",
    [
        b'{"type":"signal","signal":["SIGTERM"]}',  # a list cannot be looked up
        b"[" * 100_000 + b"]" * 100_000,  # nested too deep for the json module
        b'{"type":{"nested":1}}',
        b'"start"',
    ],
    ids=["signal-list", "deep", "type-object", "string"],
)
def test_a_malformed_control_frame_ends_the_warden_cleanly(body: bytes) -> None:
    """No traceback: the warden kills the helper and reports ``parent_protocol_error``.

    The warden runs here without ssh (stdin and stdout are the channel); the helper
    waits on its stdin, which only the warden's kill ends.
    """
    warden = WARDEN
    start = encode_start(
        ["python3", "-c", "import time; time.sleep(60)"], heartbeat_timeout=30.0, sweep_timeout=1.0
    )
    done = subprocess.run(
        ["python3", "-I", warden],
        input=start + encode_frame(b"\xaf" + body),
        capture_output=True,
        timeout=STEP,
        check=False,
    )
    assert done.stdout == b""  # the helper's, and it wrote nothing
    assert done.returncode == 0
    messages = warden_frames(done.stderr)  # no traceback: nothing but frames
    assert [m["type"] for m in messages] == ["hello", "started", "exit"]
    started, exit_message = messages[1], messages[2]
    assert exit_message["cause"] == "parent_protocol_error"
    assert exit_message["empty"] is True
    assert not alive(int(started["pid"]))  # type: ignore[call-overload]


#: A helper that starts a grandchild in a session of its own (it writes its pid to the
#: file ``argv[1]``), then waits on its stdin.
ESCAPER = r"""
import os, subprocess, sys
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(300)"],
    start_new_session=True, stdin=subprocess.DEVNULL,
)
with open(sys.argv[1] + ".tmp", "w") as out:
    out.write(str(child.pid))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
os.read(0, 1)
"""


async def test_a_sigkilled_warden_s_cgroup_is_emptied_by_the_next_warden(tmp_path: Path) -> None:
    """A warden SIGKILLed (the OOM killer) cannot sweep; its helper dies with it
    (PDEATHSIG), its helper's descendants are killed by the next warden on that host."""
    warden = WARDEN
    marker = tmp_path / "grandchild"
    start = encode_start(
        ["python3", "-c", ESCAPER, str(marker)],
        heartbeat_timeout=30.0,
        sweep_timeout=1.0,
        containment="cgroup",
    )
    first = await trio.lowlevel.open_process(
        ["python3", "-I", warden], stdin=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert first.stdin is not None
        assert first.stderr is not None
        await first.stdin.send_all(start)
        splitter = StderrSplitter()
        messages: list[dict[str, object]] = []
        with trio.fail_after(STEP):
            while len(messages) < 2:
                parts = splitter.feed(await first.stderr.receive_some())
                messages += [decode_control(body) for kind, body in parts if kind == "control"]
        if messages[1]["type"] == "refused":
            pytest.skip(f"no writable cgroup v2 here: {messages[1]['message']}")
        with trio.fail_after(STEP):
            while not marker.exists():  # noqa: ASYNC110 - a file written by another process
                await trio.sleep(0.01)
        grandchild = int(marker.read_text())
        first.kill()
        await first.wait()
        assert alive(grandchild)  # left behind in the dead warden's cgroup
        second = encode_start(["true"], heartbeat_timeout=30.0, sweep_timeout=1.0)
        await trio.to_thread.run_sync(
            lambda: subprocess.run(
                ["python3", "-I", warden], input=second, capture_output=True, timeout=STEP
            )
        )
        await wait_gone([grandchild], STEP)
    finally:
        if first.returncode is None:
            first.kill()
            await first.wait()


@pytest.mark.parametrize(
    ("argv", "cwd", "message", "errno"),
    [
        (["python3", "-c", "pass"], "/nonexistent/dir", "working directory '/nonexistent/dir'", 2),
        (["no-such-program-here"], None, "'no-such-program-here': no such program on the PATH", 2),
        (["/nonexistent/helper"], None, "'/nonexistent/helper': no such program", 2),
    ],
)
def test_a_refused_start_names_what_is_missing(
    argv: list[str], cwd: str | None, message: str, errno: int
) -> None:
    start = encode_start(argv, heartbeat_timeout=5.0, sweep_timeout=1.0, cwd=cwd)
    done = subprocess.run(
        ["python3", "-I", WARDEN], input=start, capture_output=True, timeout=STEP, check=False
    )
    assert done.returncode == WARDEN_EXIT_REFUSED, done.stderr[-400:]
    refused = warden_frames(done.stderr)[-1]
    assert (refused["type"], refused["reason"], refused["errno"]) == (
        "refused",
        "exec_failed",
        errno,
    )
    assert message in str(refused["message"]), refused["message"]
