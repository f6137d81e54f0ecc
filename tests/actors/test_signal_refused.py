"""A helper whose signals were refused is not abandoned (design §3.5, §3.8, §3.11).

The ladder's signals to a real helper are refused with ``EPERM`` (the module's one
place signals leave is patched to raise, as for a process that changed its
credentials): the job ends with ``signal_failed`` and the slot stays quarantined. The
close then retries SIGTERM and SIGKILL within its bound and reaps the helper once they
work; what it must leave it names (an ``abandoned`` event, an ERROR record and
``HelperAbandoned``). In ``cgroup`` containment a refused SIGTERM still goes on to
``cgroup.kill``. Real clock, short timeouts; no child or zombie is left.
"""

from __future__ import annotations

import errno
import logging
import sys

import pytest
import trio
from helper_support import assert_no_children, spec
from process_support import pid_gone

from actors import (
    DeadlineExceeded,
    HelperAbandoned,
    HelperTimeouts,
    PoolEvent,
    PoolEvents,
    SignalFailed,
    open_helper_pool,
)
from actors._helpers._process import _containment as containment_module
from actors._helpers._process._containment import available_mode

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")

TIMEOUTS = HelperTimeouts(cancel_grace=0.1, shutdown=0.2, terminate=0.3, kill=0.5)


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


class Refusals:
    """Every signal is refused with EPERM while ``left`` is above 0 (one per call)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.left = 0
        self.processes: list[trio.Process] = []  # to kill if a close leaves them
        real_kill, real_killpg = containment_module._kill, containment_module._killpg

        def refuse(real, target: int, sig: int) -> None:
            if self.left > 0:
                self.left -= 1
                raise PermissionError(errno.EPERM, "Operation not permitted")
            real(target, sig)

        monkeypatch.setattr(containment_module, "_kill", lambda p, s: refuse(real_kill, p, s))
        monkeypatch.setattr(containment_module, "_killpg", lambda p, s: refuse(real_killpg, p, s))

    def watch(self, pool) -> int:
        """Note the pool's helper, to kill it if the close leaves it; its pid."""
        process = pool._slots[0].helper._process  # only ours can reap it
        self.processes.append(process)
        return process.pid

    async def cleanup(self) -> None:
        """Kill and reap what a close left (our children: nobody else will)."""
        self.left = 0
        for process in self.processes:
            if process.returncode is None:
                process.kill()
                with trio.fail_after(5):
                    await process.wait()


@pytest.fixture
async def refusals(monkeypatch):
    refusals = Refusals(monkeypatch)
    try:
        yield refusals
    finally:
        await refusals.cleanup()


def drain(stream) -> list[PoolEvent]:
    events = []
    while (event := stream.receive_nowait()) is not None:
        events.append(event)
    return events


async def _refused_job(pool) -> int:
    """Run a job whose ladder's SIGTERM is refused; return the helper's pid."""
    pid = pool.snapshot().helpers[0].pid
    with pytest.raises(SignalFailed) as caught:
        await pool.run_job("sleep", 30, deadline=trio.current_time() + 0.05)
    assert (caught.value.details["pid"], caught.value.details["errno"]) == (pid, errno.EPERM)
    helper = pool.snapshot().helpers[0]
    assert (helper.quarantined, helper.alive) == (True, True)
    return pid


async def test_the_close_retries_a_refused_helper_and_reaps_it(refusals):
    # The job's SIGTERM is refused, and so are the close's first tries (the permission
    # comes back during the close): the close reaps the helper, raises nothing.
    hub = PoolEvents("helper")
    with hub.subscribe() as stream:
        async with open_helper_pool(
            spec(containment="tree"), timeouts=TIMEOUTS, events=hub
        ) as pool:
            refusals.watch(pool)
            refusals.left = 8  # the job's SIGTERM (2 calls), then 6 of the close's
            pid = await _refused_job(pool)
        events = drain(stream)
    assert refusals.left == 0
    assert pid_gone(pid)
    kinds = [event.kind for event in events]
    assert "signal_retried" in kinds
    assert kinds[-1] == "reaped"
    assert "abandoned" not in kinds
    assert pool.snapshot().helpers[0].alive is False


async def test_the_close_names_what_it_had_to_leave(refusals, caplog):
    # Refused to the end: the close gives up after its bound (shutdown + terminate +
    # kill seconds) and says so by name: event, ERROR record, HelperAbandoned.
    caplog.set_level(logging.ERROR, logger="actors.helpers")
    hub = PoolEvents("helper")
    with hub.subscribe() as stream:
        async with open_helper_pool(
            spec(containment="tree"), timeouts=TIMEOUTS, events=hub
        ) as pool:
            refusals.watch(pool)
            refusals.left = 10**9
            pid = await _refused_job(pool)
            start = trio.current_time()
            with pytest.raises(HelperAbandoned) as caught:
                await pool.aclose()
            elapsed = trio.current_time() - start
        # Leaving the block closes again: the first close's error is not raised twice.
        events = drain(stream)
    assert not pid_gone(pid)  # left alive, as it says (the fixture kills it)
    assert caught.value.code == "helper_abandoned"
    [left] = caught.value.details["helpers"]
    assert (left["pid"], left["errno"], left["error"], left["signal"]) == (
        pid,
        errno.EPERM,
        "EPERM",
        "SIGTERM",
    )
    assert elapsed >= TIMEOUTS.shutdown_bound  # it kept trying for its whole bound
    [abandoned] = [event for event in events if event.kind == "abandoned"]
    assert (abandoned.pid, abandoned.details["errno"]) == (pid, errno.EPERM)
    assert any(
        record.pid == pid and "left alive" in record.getMessage() for record in caplog.records
    )


@pytest.mark.skipif(
    not (sys.platform.startswith("linux") and available_mode("auto") == "cgroup"),
    reason="no cgroup v2 here",
)
async def test_in_a_cgroup_a_refused_sigterm_still_goes_on_to_cgroup_kill(refusals):
    hub = PoolEvents("helper")
    with hub.subscribe() as stream:
        async with open_helper_pool(
            spec(containment="cgroup"), timeouts=TIMEOUTS, events=hub
        ) as pool:
            pid = refusals.watch(pool)
            refusals.left = 10**9  # every kill(2) is refused; cgroup.kill is a write
            with pytest.raises(DeadlineExceeded) as caught:
                await pool.run_job("sleep", 30, deadline=trio.current_time() + 0.05)
            assert caught.value.details["escalation"] == "sigkill"
            assert pid_gone(pid)
            refusals.left = 0
        events = drain(stream)
    kinds = [event.kind for event in events]
    assert kinds[kinds.index("signal_failed") :][:3] == ["signal_failed", "sigkill_sent", "reaped"]
