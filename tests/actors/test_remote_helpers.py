"""Helpers on other hosts through the pool and HelperProcess, over real SSH (design §3.16).

A private ``sshd`` on loopback (``tests/remote_support.py``) makes this machine the
"remote" host. Each test's helpers run in a working directory of its own, so what is
left of them on the "remote" side is found in ``/proc`` by that directory; and no local
child or zombie may be left but the sshd. Real processes, the real clock, short timeouts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing
from helper_support import ENTRY, HERE
from remote_support import assert_no_children_but, private_sshd

import protocol.warden
from actors import (
    FrameTooLarge,
    HelperExited,
    HelperLost,
    HelperSpec,
    HelperStartupFailed,
    HelperTimeouts,
    open_helper_pool,
)
from actors._helpers._process import HelperProcess

if TYPE_CHECKING:
    from collections.abc import Iterator

    from remote_support import SSHServer

#: Seconds for any one step of a test (an SSH login on a loaded machine included).
STEP = 10.0
#: Graces long enough that each rung is reached on a loaded machine by its own cause (a
#: cancel answered, a SIGTERM obeyed), never by the next rung's: a helper that obeys ends
#: the wait at once, so only the stubborn cases pay them.
TIMEOUTS = HelperTimeouts(
    startup=STEP, reply=STEP, cancel_grace=1.0, shutdown=2.0, terminate=1.5, kill=3.0
)
#: Crash cycles run by :func:`test_crash_cycles_leave_nothing_behind`, ``PARALLEL`` at a
#: time: as many as fit in about 10 s of a loaded two-core machine. ``.ci/run`` runs the
#: test once more with ``ACTORS_REMOTE_CYCLES=200`` (about a minute, one SSH login each).
CYCLES = int(os.environ.get("ACTORS_REMOTE_CYCLES", "32"))
PARALLEL = 4


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHServer]:
    with private_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture
def place(tmp_path: Path, sshd: SSHServer) -> Iterator[Path]:
    """The working directory of the test's remote helpers; nothing may be left in it."""
    yield tmp_path
    assert remote_processes(tmp_path) == []
    assert_no_children_but(sshd)


def remote_spec(server: SSHServer, place: Path, **fields: Any) -> HelperSpec:
    fields.setdefault("entry", ENTRY)
    options = server.ssh_options()
    # -i and -p are given as the spec's own fields (the rest as extra options).
    key = options.index("-i")
    identity, port = options[key + 1], int(options[key + 3])
    del options[key : key + 4]
    return HelperSpec(
        host=server.destination,
        port=port,
        identity=fields.pop("identity", identity),
        ssh_options=options,
        cwd=str(place),
        # The checkout itself first, as a deployed project would be: not the editable
        # install's link tree, which a reinstall rebuilds while tests run.
        env={"PYTHONPATH": os.pathsep.join((str(HERE.parents[1]), str(HERE)))},
        **fields,
    )


def remote_processes(place: Path) -> list[int]:
    """Pids of the processes whose working directory is ``place`` (zombies too)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/cwd") == str(place):
                    found.append(int(name))
            except OSError:
                continue  # gone, or a zombie (no cwd): then its stat says Z
    return found


def alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def _stat(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def parent_of(pid: int) -> int:
    return int(_stat(pid)[1])


def session_of(pid: int) -> int:
    return int(_stat(pid)[3])


async def wait_gone(pids: list[int], within: float) -> float:
    """Seconds until every pid is gone (not our children: ``/proc`` is looked at every
    10 ms); fails after ``within`` seconds."""
    start = time.monotonic()
    with trio.fail_after(within):
        while any(alive(pid) for pid in pids):  # noqa: ASYNC110 - no event to wait for
            await trio.sleep(0.01)
    return time.monotonic() - start


# --- jobs, progress and run_sync -------------------------------------------------------


async def test_jobs_progress_and_run_sync_over_ssh(sshd, place):
    import run_sync_functions

    async with open_helper_pool(remote_spec(sshd, place), size=2, timeouts=TIMEOUTS) as pool:
        reports: list[float] = []
        assert await pool.run_job("echo", {"x": [1, 2]}) == {"x": [1, 2]}
        payload = {"reports": [[0.5, "half"], [1.0, None]], "result": 7}
        result = await pool.run_job(
            "progress_then", payload, on_progress=lambda f, n: reports.append(f)
        )
        assert (result, reports) == (7, [0.5, 1.0])
        assert await pool.run_sync(run_sync_functions.add, 2, 3) == 5
        snapshot = pool.snapshot().helpers[0]
        assert snapshot is not None
        remote = snapshot.ready["pid"]
        assert remote != snapshot.pid  # the helper is not the local ssh
        assert parent_of(parent_of(remote)) != os.getpid()  # under a warden under sshd
        # Its stdin and stdout are the SSH channel's, sshd's own (design §2.5).
        assert len(channel_ends(remote)) == 2
    assert not alive(remote)


def fds_of(pid: int) -> set[str]:
    """What ``pid``'s descriptors are (``pipe:[…]``, ``socket:[…]``, paths)."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return found


def channel_ends(helper: int) -> set[str]:
    """The pipes to sshd (the SSH channel's stdin, stdout) a helper under a warden holds."""
    held = {end for end in fds_of(helper) if end.startswith("pipe:")}
    return held & fds_of(parent_of(parent_of(helper)))


async def test_where_the_server_refuses_the_control_channel_the_warden_relays(
    tmp_path_factory, place, caplog
):
    """``AllowStreamLocalForwarding no``: the start falls back to version 2's relay, says
    so, and everything works as before: jobs, the ladder, the tree's end."""
    caplog.set_level(logging.WARNING, logger="actors.helpers")
    with private_sshd(tmp_path_factory.mktemp("sshd"), forwarding=False) as server:
        helper = HelperProcess(remote_spec(server, place, fault="ignore_sigterm"), TIMEOUTS)
        async with trio.open_nursery() as nursery:
            await helper.start(nursery)
            remote = helper.ready["pid"]
            # Its stdin is the warden's pipe; its stdout is still the channel's.
            assert len(channel_ends(remote)) == 1
            assert await helper.run_job("echo", {"x": 1}) == {"x": 1}
            grandchild = await helper.run_job("spawn_setsid")
            with trio.move_on_after(0.2):
                await helper.run_job("sleep", 30)
            assert helper.last_escalation == "sigkill"
            helper.discard()
        assert helper.snapshot().exit_code == -signal.SIGKILL
        assert not alive(remote)
        assert not alive(grandchild)
        refused = [
            r for r in caplog.records if getattr(r, "event", None) == "control_channel_refused"
        ]
        assert len(refused) == 1
        assert "refused the forwarding" in refused[0].getMessage()


async def test_stderr_is_logged_and_replies_are_checked_as_a_local_helper_s(sshd, place, caplog):
    """The warden relays the helper's stderr (design §2.5) and the parent logs it; the
    replies bypass the warden, so the parent checks their limit itself, and a helper that
    breaks it is killed through the warden as a local one would be."""
    caplog.set_level(logging.WARNING, logger="actors.helpers.stderr")
    async with open_helper_pool(remote_spec(sshd, place), timeouts=TIMEOUTS) as pool:
        assert await pool.run_job("noisy", {"x": 1}) == {"x": 1}
    # The pool's close waited for ssh's stderr to end: every line is logged by now.
    lines = [r.line for r in caplog.records if r.name == "actors.helpers.stderr"]
    assert "this goes to stderr, not into the frame stream" in lines
    assert "raw bytes on fd 1 go to stderr too" in lines

    spec = remote_spec(sshd, place, fault="oversized_reply")
    async with open_helper_pool(spec, timeouts=TIMEOUTS) as pool:
        with pytest.raises(FrameTooLarge) as caught:
            await pool.run_job("echo", 1)
        assert caught.value.details["size"] == spec.max_reply + 1
        helper = pool.snapshot().helpers[0]
        assert helper is not None
        assert (helper.alive, helper.exit_code) == (False, -signal.SIGKILL)


# --- the ladder (design §3.5) reaches the remote tree -----------------------------------


@pytest.mark.parametrize(
    ("fault", "handler", "escalation", "exit_code"),
    [
        (None, "cooperative", "cooperative", 0),
        (None, "sleep", "sigterm", -signal.SIGTERM),
        ("ignore_sigterm", "sleep", "sigkill", -signal.SIGKILL),
    ],
)
async def test_every_rung_reaches_a_grandchild_that_left_the_session(
    sshd, place, fault, handler, escalation, exit_code
):
    helper = HelperProcess(remote_spec(sshd, place, fault=fault), TIMEOUTS)
    async with trio.open_nursery() as nursery:
        await helper.start(nursery)
        remote = helper.ready["pid"]
        grandchild = await helper.run_job("spawn_setsid")
        assert alive(grandchild)
        assert session_of(grandchild) == grandchild != session_of(remote)
        with trio.move_on_after(0.2):
            await helper.run_job(handler, 30)
        assert helper.last_escalation == escalation
        if escalation == "cooperative":
            assert await helper.run_job("echo", "still") == "still"
            assert alive(grandchild)
            assert await helper.shutdown() == "shutdown"
        assert helper.exited
        helper.discard()
    assert helper.snapshot().exit_code == exit_code
    # "Reaped" means the warden said the tree is empty: nothing is left already.
    assert not alive(remote)
    assert not alive(grandchild)


# --- partitions (design §3.16) -----------------------------------------------------------


async def test_killing_the_local_ssh_loses_the_helper_and_the_warden_kills_its_tree(sshd, place):
    timeouts = HelperTimeouts(startup=STEP, reply=STEP, heartbeat=3.0, kill=1.0)
    async with open_helper_pool(remote_spec(sshd, place), timeouts=timeouts) as pool:
        grandchild = await pool.run_job("spawn_setsid")
        snapshot = pool.snapshot().helpers[0]
        assert snapshot is not None
        remote = snapshot.ready["pid"]
        warden = parent_of(remote)
        errors: list[BaseException] = []

        async def job() -> None:
            try:
                await pool.run_job("sleep", 30)
            except HelperLost as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(job)
            await trio.sleep(0.2)  # the job is on the helper (sleep checks nothing)
            os.kill(snapshot.pid, signal.SIGKILL)  # the partition: the link dies at once
            # Within the heartbeat timeout (the warden sees its stdin end at once).
            await wait_gone([warden, remote, grandchild], timeouts.heartbeat)
        [error] = errors
        assert (error.code, error.category) == ("helper_lost", "transient")
        assert await pool.run_job("echo", "again") == "again"  # a new incarnation


async def test_a_warden_that_stops_answering_is_given_up_after_the_heartbeat_timeout(sshd, place):
    timeouts = HelperTimeouts(startup=STEP, reply=STEP, heartbeat=1.0, kill=1.0)
    helper = HelperProcess(remote_spec(sshd, place), timeouts)
    async with trio.open_nursery() as nursery:
        await helper.start(nursery)
        remote = helper.ready["pid"]
        warden = parent_of(remote)
        os.kill(warden, signal.SIGSTOP)  # a link that hangs without closing
        try:
            start = trio.current_time()
            with pytest.raises(HelperLost) as caught:
                await helper.run_job("sleep", 30)
            # Given up between 2/3 and 4/3 of the timeout (the beat's resolution).
            assert 1.0 * 2 / 3 <= trio.current_time() - start <= 1.0 * 4 / 3 + 1.0
        finally:
            os.kill(warden, signal.SIGCONT)
        assert caught.value.code == "helper_lost"
        await wait_gone([warden, remote], STEP)  # it woke to a closed link: killed it all
        helper.discard()


# --- clear startup failures ----------------------------------------------------------------


async def start_failure(spec: HelperSpec) -> HelperStartupFailed:
    helper = HelperProcess(spec, TIMEOUTS)
    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        with pytest.raises(HelperStartupFailed) as caught:
            await helper.start(nursery)
        assert trio.current_time() - start < TIMEOUTS.startup  # never a hang
    helper.discard()
    return caught.value


async def test_a_refused_key_fails_the_start_with_the_reason_and_ssh_s_stderr(sshd, place):
    error = await start_failure(remote_spec(sshd, place, identity=str(sshd.wrong_key)))
    assert error.details["reason"] == "auth_refused"
    assert "Permission denied" in error.details["stderr"]
    assert "Permission denied" in error.message


async def test_an_unreachable_host_fails_the_start(sshd, place):
    spec = remote_spec(sshd, place)
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = await start_failure(HelperSpec(**{**_fields(spec), "port": port}))
    assert error.details["reason"] == "host_unreachable"
    assert "Connection refused" in error.details["stderr"]


async def test_a_missing_remote_python_fails_the_start(sshd, place):
    error = await start_failure(remote_spec(sshd, place, python="/nonexistent/python3"))
    assert error.details["reason"] == "python_missing"


async def test_a_remote_python_without_the_project_fails_the_start(sshd, place):
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK):  # pragma: no cover - every Debian has one
        pytest.skip("no system python3")
    error = await start_failure(
        HelperSpec(**{**_fields(remote_spec(sshd, place)), "python": python, "env": {}})
    )
    assert error.details["reason"] == "project_missing"
    assert "not importable" in error.details["stderr"]


async def test_a_warden_of_another_version_is_not_used(sshd, place, monkeypatch):
    monkeypatch.setattr(protocol.warden, "WARDEN_VERSION", protocol.warden.WARDEN_VERSION + 1)
    error = await start_failure(remote_spec(sshd, place))
    assert error.details["reason"] == "version_mismatch"
    # The start was sent with the first frames: the helper may have started (or may
    # start only now); the link's end makes the warden kill it and exit. Wait for the
    # whole remote session under sshd to end, the warden included.
    with trio.fail_after(STEP):
        while sessions_of(sshd) or remote_processes(place):  # noqa: ASYNC110 - no event
            await trio.sleep(0.01)


def sessions_of(server: SSHServer) -> list[int]:
    """Pids of the processes under the "remote" sshd (its sessions, wardens, helpers)."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                parents[int(name)] = parent_of(int(name))
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    found = []
    for pid in parents:
        ancestor = parents.get(pid)
        while ancestor is not None and ancestor != server.pid:
            ancestor = parents.get(ancestor)
        if ancestor == server.pid:
            found.append(pid)
    return found


def _fields(spec: HelperSpec) -> dict[str, Any]:
    import attrs

    return attrs.asdict(spec, recurse=False)


# --- crash cycles ---------------------------------------------------------------------


async def test_crash_cycles_leave_nothing_behind(sshd, place):
    spec = remote_spec(sshd, place)

    async def cycles(count: int) -> None:
        for number in range(count):
            helper = HelperProcess(spec, TIMEOUTS, incarnation=number + 1)
            async with trio.open_nursery() as nursery:
                await helper.start(nursery)
                with pytest.raises(HelperExited) as caught:
                    await helper.run_job("crash", 3)
                assert type(caught.value) is HelperExited  # exited, not lost
                assert caught.value.details["exit_code"] == 3
            helper.discard()

    async with trio.open_nursery() as nursery:
        for worker in range(PARALLEL):
            nursery.start_soon(cycles, CYCLES // PARALLEL + (worker < CYCLES % PARALLEL))


# --- the spec's fields ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"host": ""}, "host"),
        ({"host": "-oProxyCommand=x"}, "host"),
        ({"host": "h", "port": 0}, "port"),
        ({"host": "h", "port": True}, "port"),
        ({"host": "h", "ssh_options": ("-v", 3)}, "ssh_options"),
        ({"port": 22}, "need a host"),
        ({"identity": "/k"}, "need a host"),
    ],
)
def test_bad_remote_fields_are_refused_naming_the_field(fields, field):
    with pytest.raises(ValueError, match=field):
        HelperSpec(entry=ENTRY, **fields)


def test_the_ssh_command_line_has_batch_mode_a_connect_timeout_and_the_spec_s_options():
    from actors._helpers._process._remote import RemoteLink

    spec = HelperSpec(
        entry=ENTRY, host="me@lab-pc", port=2222, identity="/k", ssh_options=("-o", "A=b")
    )
    link = RemoteLink(spec, HelperTimeouts(startup=2.5), "tag", lambda *a, **k: None)
    argv = link.command()
    try:
        assert argv[:6] == ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3"]
        assert argv[6:10] == ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
        assert argv[10:16] == ["-p", "2222", "-i", "/k", "-o", "A=b"]
        # The control channel: a local socket in a private folder, forwarded to the
        # socket the warden listens on (its path is the warden's argument).
        assert (argv[16], argv[18]) == ("-L", "--")
        local, remote = argv[17].split(":")
        assert Path(local).parent.stat().st_mode & 0o777 == 0o700
        assert remote.startswith("/tmp/trio-actors-")
        assert argv[19] == "me@lab-pc"
        assert argv[20].startswith("exec ")
        assert argv[20].endswith(f" {remote}")
    finally:
        link.close()
    assert not Path(local).parent.exists()


async def test_a_control_channel_closed_while_it_is_watched_ends_the_watch_quietly():
    """The reaper closes the link (its sweep timed out) while the link's task still
    watches the control channel: the watch ends, no error reaches the pool's nursery."""
    import socket

    from actors._helpers._process._remote import RemoteLink

    spec = HelperSpec(entry=ENTRY, host="me@lab-pc")
    link = RemoteLink(spec, HelperTimeouts(), "tag", lambda *a, **k: None)
    ours, theirs = socket.socketpair()
    with theirs:
        ours.setblocking(False)
        link._socket = ours
        link._socket_open.set()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link._watch_socket)
            await trio.testing.wait_all_tasks_blocked()
            link.close()
    assert ours.fileno() == -1
    assert link._socket_closed.is_set()
