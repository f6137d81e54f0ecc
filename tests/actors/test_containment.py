"""Nothing escapes a helper: its whole process tree goes with it, or is reported (§3.11).

Real helpers that start grandchildren which leave the helper's session (``setsid``),
ignore SIGTERM, or double-fork into orphaned daemons without the helper's environment.
Each containment mode this machine has is tried: ``cgroup`` where a cgroup v2 can be
made here, ``tree`` (``/proc`` and a child subreaper) on Linux. Real clock, short
timeouts; afterwards no child, no zombie and none of the grandchildren is left.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys

import pytest
import trio
from helper_support import FAST, MODES, assert_no_children, spec, wait_gone
from process_support import pid_gone

from actors import (
    DeadlineExceeded,
    HelperExited,
    HelperTimeouts,
    PoolEvents,
    ReplyTimeout,
    open_helper_pool,
)
from actors._helpers._process import _containment as containment_module

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


@pytest.fixture
def unreadable(monkeypatch):
    """Pids whose environment the sweep cannot read (None, as on EACCES)."""
    pids: list[int] = []
    real_read = containment_module._read_environ
    monkeypatch.setattr(
        containment_module, "_read_environ", lambda pid: None if pid in pids else real_read(pid)
    )
    return pids


@pytest.mark.parametrize("mode", MODES)
async def test_a_setsid_grandchild_that_ignores_sigterm_goes_with_its_helper(mode, strays):
    async with open_helper_pool(spec(containment=mode), timeouts=FAST) as pool:
        grandchild = await pool.run_job("spawn_setsid")
        strays.append(grandchild)
        assert pool.snapshot().helpers[0].alive
    assert pid_gone(grandchild)


@pytest.mark.parametrize("mode", MODES)
async def test_an_orphaned_daemon_without_the_tag_goes_too(mode, strays):
    # A double fork with an empty environment: the daemon is orphaned at once, has
    # left the helper's session and carries no tag. In ``cgroup`` mode it never left
    # the cgroup; in ``tree`` mode it became the helper's child (the subreaper).
    async with open_helper_pool(spec(containment=mode), timeouts=FAST) as pool:
        daemon = await pool.run_job("spawn_daemon", False)
        strays.append(daemon)
        helper = pool.snapshot().helpers[0]
        assert helper.ready.get("subreaper", False) is (mode == "tree")
    assert pid_gone(daemon)


@pytest.mark.parametrize("mode", MODES)
async def test_a_helper_killed_by_the_ladder_takes_its_tree_along(mode, strays):
    timeouts = HelperTimeouts(reply=0.2, cancel_grace=0.1, terminate=0.2, kill=1.0)
    async with open_helper_pool(spec(containment=mode), timeouts=timeouts) as pool:
        grandchild = await pool.run_job("spawn_setsid")
        strays.append(grandchild)
        with pytest.raises(ReplyTimeout) as caught:  # SIGTERM kills the helper, not
            await pool.run_job("sleep", 30)  # the grandchild: the sweep's SIGKILL does
        helper = pool.snapshot().helpers[0]
        assert not helper.alive
        assert pid_gone(grandchild)
    assert caught.value.details["escalation"] == "sigterm"


async def test_a_crashed_helper_leaves_no_orphan(strays):
    async with open_helper_pool(spec(containment="tree"), timeouts=FAST) as pool:
        grandchild = await pool.run_job("spawn_setsid")
        strays.append(grandchild)
        with pytest.raises(HelperExited) as caught:
            await pool.run_job("crash", 3)
        assert pid_gone(grandchild)  # "exited" means: reaped and its tree is gone
    assert "escaped" not in caught.value.details


async def test_a_grandchild_caught_inside_its_exec_is_looked_at_again(monkeypatch, strays):
    # Inside its exec a process has no environment yet (/proc/PID/environ reads empty),
    # so no tag, and once the helper has crashed its parent is no longer the helper.
    # Held there for the sweep's first looks, it is looked at again until it can be
    # told apart, then killed; nothing is reported as escaped.
    real_read = containment_module._read_environ
    watched: dict[str, int] = {}
    held: list[int] = []

    def read(pid: int) -> bytes | None:
        if pid == watched.get("grandchild") and pid_gone(watched["helper"]) and len(held) < 3:
            held.append(pid)
            return b""
        return real_read(pid)

    monkeypatch.setattr(containment_module, "_read_environ", read)
    async with open_helper_pool(spec(containment="tree"), timeouts=FAST) as pool:
        grandchild = await pool.run_job("spawn_setsid")
        strays.append(grandchild)
        helper_pid = pool.snapshot().helpers[0].pid
        assert helper_pid is not None
        watched.update(grandchild=grandchild, helper=helper_pid)
        with pytest.raises(HelperExited) as caught:
            await pool.run_job("crash", 3)
        assert pid_gone(grandchild)
    assert held == [grandchild] * 3
    assert "escaped" not in caught.value.details


async def test_a_grandchild_that_cannot_be_read_until_the_end_is_reported_not_killed(
    unreadable, strays
):
    # Orphaned by a crash before anything looked, its environment unreadable (EACCES, as
    # once it changed credentials) for the whole kill timeout: nothing proves it is the
    # helper's, so it is not signalled, but it is not ignored either: reported as escaped
    # (unidentified), and the slot waits until it is gone.
    hub = PoolEvents("helper")
    with hub.subscribe() as stream:
        async with open_helper_pool(
            spec(containment="tree"),
            timeouts=HelperTimeouts(kill=0.3),
            events=hub,
            acquire_timeout=0.2,
        ) as pool:
            grandchild = await pool.run_job("spawn_setsid")
            strays.append(grandchild)
            unreadable.append(grandchild)
            with pytest.raises(HelperExited):
                await pool.run_job("crash", 3)
            events = []
            with trio.fail_after(10):
                async for event in stream:
                    events.append(event)
                    if event.kind == "escaped":
                        break
            assert not pid_gone(grandchild)  # not signalled
            assert pool.snapshot().helpers[0].quarantined
            os.kill(grandchild, signal.SIGKILL)
            await wait_gone(grandchild)
            with trio.fail_after(5):
                while pool.statistics().idle == 0:  # noqa: ASYNC110 (the reaper frees it)
                    await trio.sleep(0.01)
    escaped = events[-1]
    assert escaped.details["pids"] == [grandchild]
    assert escaped.details["unidentified"] == [grandchild]
    assert escaped.details["undeliverable"] == []


async def test_an_unreadable_process_that_is_not_an_orphan_of_the_tree_is_left_alone(
    unreadable, strays
):
    # Started while the helper lived, unreadable to the sweep, but a child of this
    # process (not a subreaper), so never an orphan of the helper's tree: not a suspect,
    # not reported, not signalled.
    hub = PoolEvents("helper")
    with hub.subscribe() as stream:
        async with open_helper_pool(
            spec(containment="tree"), timeouts=HelperTimeouts(kill=0.3), events=hub
        ) as pool:
            await pool.run_job("echo", 1)
            neighbour = await trio.lowlevel.open_process(
                [sys.executable, "-c", "import time; time.sleep(30)"], stdin=subprocess.DEVNULL
            )
            strays.append(neighbour.pid)
            unreadable.append(neighbour.pid)
            try:
                with pytest.raises(HelperExited) as caught:
                    await pool.run_job("crash", 3)
                assert not pool.snapshot().helpers[0].quarantined
                assert neighbour.poll() is None
            finally:
                neighbour.kill()
                await neighbour.wait()
        kinds = []
        while (event := stream.receive_nowait()) is not None:
            kinds.append(event.kind)
    assert "reaped" in kinds
    assert "escaped" not in kinds
    assert "escaped" not in caught.value.details


async def test_what_cannot_be_killed_is_reported_as_escaped_and_quarantines(monkeypatch, strays):
    # The grandchild refuses every signal (EPERM, as a setuid process would): after the
    # helper exits, the sweep reports it, and the slot waits until it is gone.
    real_kill = containment_module._kill
    protected: list[int] = []

    def kill(pid: int, sig: int) -> None:
        if pid in protected:
            raise PermissionError(errno.EPERM, "Operation not permitted")
        real_kill(pid, sig)

    monkeypatch.setattr(containment_module, "_kill", kill)
    hub = PoolEvents("helper")
    timeouts = HelperTimeouts(kill=0.3)
    with hub.subscribe() as stream:
        async with open_helper_pool(
            spec(containment="tree"), timeouts=timeouts, events=hub, acquire_timeout=0.2
        ) as pool:
            grandchild = await pool.run_job("spawn_setsid")
            strays.append(grandchild)
            protected.append(grandchild)
            with pytest.raises(HelperExited) as caught:
                await pool.run_job("crash", 3)
            events = []
            with trio.fail_after(10):  # the sweep reports it (it may end after the job)
                async for event in stream:
                    events.append(event)
                    if event.kind == "escaped":
                        break
            helper = pool.snapshot().helpers[0]
            assert (helper.quarantined, helper.exit_code) == (True, 3)
            protected.clear()
            os.kill(grandchild, signal.SIGKILL)
            await wait_gone(grandchild)
            with trio.fail_after(5):
                while pool.statistics().idle == 0:  # noqa: ASYNC110 (the reaper frees it)
                    await trio.sleep(0.01)
        while (event := stream.receive_nowait()) is not None:
            events.append(event)
    escaped = [e for e in events if e.kind == "escaped"]
    assert [e.details["pids"] for e in escaped] == [[grandchild]]
    assert escaped[0].details["undeliverable"] == [[grandchild, errno.EPERM]]
    if "escaped" in caught.value.details:  # when the sweep ended before the job did
        assert caught.value.details["escaped"] == [grandchild]
        assert "escaped" in caught.value.message
    kinds = [e.kind for e in events]
    assert kinds[kinds.index("escaped") :] == ["escaped", "reaped", "released"]


async def test_process_group_containment_cannot_see_a_setsid_grandchild(strays):
    # What holds off Linux (design §3.11): only the group is signalled, so a grandchild
    # that left it is neither killed nor reported.
    async with open_helper_pool(spec(containment="group"), timeouts=FAST) as pool:
        grandchild = await pool.run_job("spawn_setsid")
        strays.append(grandchild)
    assert not pid_gone(grandchild)


@pytest.mark.parametrize("mode", [*MODES, "group"])
async def test_each_process_of_the_tree_gets_sigterm_once(mode, strays, tmp_path, monkeypatch):
    # Two SIGTERM counters below a helper that ignores SIGTERM: one in the helper's
    # process group, one that left it. The ladder's SIGTERM reaches each exactly once,
    # as each counts it (a file per pid) and as the parent sent it.
    real_kill, real_killpg = containment_module._kill, containment_module._killpg
    sent: list[tuple[str, int, int]] = []

    def kill(pid: int, sig: int) -> None:
        real_kill(pid, sig)
        sent.append(("pid", pid, sig))

    def killpg(pgid: int, sig: int) -> None:
        real_killpg(pgid, sig)
        sent.append(("group", pgid, sig))

    monkeypatch.setattr(containment_module, "_kill", kill)
    monkeypatch.setattr(containment_module, "_killpg", killpg)
    timeouts = HelperTimeouts(cancel_grace=0.1, terminate=30, kill=2)
    async with (
        trio.open_nursery() as nursery,
        open_helper_pool(spec(fault="ignore_sigterm", containment=mode), timeouts=timeouts) as pool,
    ):
        counters = await pool.run_job("spawn_term_counters", str(tmp_path))
        strays.extend(counters)
        groups = {pid: os.getpgid(pid) for pid in counters}
        with pool.events.subscribe() as stream:

            async def job() -> None:
                with pytest.raises(DeadlineExceeded):
                    await pool.run_job("sleep", 300, deadline=trio.current_time() + 0.1)

            nursery.start_soon(job)
            async for event in stream:
                if event.kind == "sigterm_sent":
                    break
        reached = counters if mode != "group" else counters[:1]
        with trio.fail_after(10):  # each counter writes its line when it handles SIGTERM
            while not all(_counted(tmp_path / str(pid)) for pid in reached):  # noqa: ASYNC110
                await trio.sleep(0.01)
        pool.hurry()  # SIGKILL now, instead of waiting out the 30 s terminate timeout
    if mode == "group":
        os.kill(counters[1], signal.SIGKILL)
        await wait_gone(counters[1])
    for pid in counters:
        assert pid_gone(pid)
    terms = {
        pid: sum(
            1
            for target, number, sig in sent
            if sig == signal.SIGTERM
            and ((target, number) == ("pid", pid) or (target, number) == ("group", groups[pid]))
        )
        for pid in counters
    }
    assert terms == {pid: int(pid in reached) for pid in counters}
    for pid in reached:
        assert (tmp_path / str(pid)).read_text() == "TERM\n"


def _counted(path) -> bool:
    """The counter has written a whole line (the file exists as soon as it is opened)."""
    try:
        return path.read_text().endswith("\n")
    except FileNotFoundError:
        return False
