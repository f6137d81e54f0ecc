"""Helpers forked warm from the pool's zygote (design §3.17).

Real processes, real clock, short timeouts; afterwards no child, no zombie and none of
the grandchildren is left. A forked helper is the pool's own child in a session of its
own, contained as a spawned one is; a crash's replacement is a fork; a zygote that dies
is reported and replaced; one that cannot hold the entry's module leaves the pool to
spawn.
"""

from __future__ import annotations

import os
import signal
import sys

import pytest
import trio
import zygote_functions as fns
from helper_support import FAST, MODES, assert_no_children, spec, wait_gone
from process_support import pid_gone

from actors import (
    ForcedTermination,
    HelperExited,
    HelperSpec,
    HelperTimeouts,
    PoolEvent,
    PoolEvents,
    ReplyTimeout,
    open_helper_pool,
)
from actors._child._zygote import CLONE_SYSCALLS
from actors._helpers._process._containment import TAG_ENV

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.uname().machine not in CLONE_SYSCALLS,
    reason="the zygote needs Linux on x86-64 or AArch64",
)


def forked(**fields: object) -> HelperSpec:
    fields.setdefault("start_method", "zygote")
    return spec(**fields)


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


def kinds(events: list[PoolEvent], *wanted: str) -> list[PoolEvent]:
    return [event for event in events if event.kind in wanted]


def drain(stream) -> list[PoolEvent]:  # type: ignore[no-untyped-def]
    events = []
    while (event := stream.receive_nowait()) is not None:
        events.append(event)
    return events


async def next_event(stream, kind: str, within: float = 5.0) -> PoolEvent:  # type: ignore[no-untyped-def]
    with trio.fail_after(within):
        async for event in stream:
            if event.kind == kind:
                return event
    raise AssertionError(f"no {kind} event")  # pragma: no cover


async def test_forked_helpers_are_the_pools_children_in_their_own_sessions():
    hub = PoolEvents("helper")
    with hub.subscribe() as stream:
        async with open_helper_pool(forked(), size=2, timeouts=FAST, events=hub) as pool:
            assert pool.zygote is not None
            zygote = pool.zygote.pid
            results = [await pool.run_sync(fns.parent_and_session) for _ in range(4)]
            assert await pool.run_job("echo", {"a": [1, 2]}) == {"a": [1, 2]}
            pids = {helper.pid for helper in pool.snapshot().helpers if helper is not None}
        events = drain(stream)
    for pid, parent, session in results:
        assert pid in pids
        assert parent == os.getpid()  # not the zygote's: reaped here, as a spawned one
        assert session == pid  # a session (and process group) of its own
    spawned = kinds(events, "spawned")
    assert [event.details["start_method"] for event in spawned] == ["zygote", "zygote"]
    started = kinds(events, "zygote_started")
    assert [event.details["zygote_pid"] for event in started] == [zygote]
    reaped = kinds(events, "reaped")
    assert [event.details["exit_code"] for event in reaped] == [0, 0]
    assert pid_gone(zygote)


async def test_each_forked_helper_has_its_own_random_state():
    async with open_helper_pool(forked(), size=2, timeouts=FAST) as pool:
        async with trio.open_nursery() as nursery:
            values: list[float] = []

            async def draw() -> None:
                values.append(await pool.run_sync(fns.random_value))

            for _ in range(2):
                nursery.start_soon(draw)
        pids = [helper.pid for helper in pool.snapshot().helpers if helper is not None]
    assert len(set(pids)) == 2
    assert values[0] != values[1]


@pytest.mark.parametrize("mode", MODES)
async def test_the_ladder_takes_a_forked_helpers_setsid_grandchild_along(mode, strays):
    # A grandchild that left the session and ignores SIGTERM: SIGTERM ends the helper,
    # the sweep's SIGKILL the grandchild, as for a spawned helper.
    timeouts = HelperTimeouts(reply=0.3, cancel_grace=0.1, terminate=0.3, kill=1.0)
    async with open_helper_pool(forked(containment=mode), timeouts=timeouts) as pool:
        grandchild = await pool.run_job("spawn_setsid")
        strays.append(grandchild)
        with pytest.raises(ReplyTimeout) as caught:
            await pool.run_job("sleep", 30)
        helper = pool.snapshot().helpers[0]
        assert helper is not None
        assert not helper.alive
        assert pid_gone(grandchild)
    assert caught.value.details["escalation"] == "sigterm"


async def test_the_whole_ladder_on_a_forked_helper_that_ignores_sigterm(strays):
    # Cancel frame unanswered, SIGTERM ignored by the helper and by its setsid
    # grandchild: SIGKILL ends both, and the pool reaps the helper itself.
    timeouts = HelperTimeouts(reply=0.3, cancel_grace=0.1, terminate=0.2, kill=1.0)
    hub = PoolEvents("helper")
    with hub.subscribe() as stream:
        async with open_helper_pool(
            forked(fault="ignore_sigterm"), timeouts=timeouts, events=hub
        ) as pool:
            grandchild = await pool.run_job("spawn_setsid")
            strays.append(grandchild)
            with pytest.raises(ForcedTermination) as caught:
                await pool.run_job("sleep", 30)
            assert pid_gone(grandchild)
            assert await pool.run_job("echo", 1) == 1  # its replacement: a fork
        events = drain(stream)
    assert caught.value.details["escalation"] == "sigkill"
    steps = [e.kind for e in events if e.incarnation == 1]
    assert steps[-4:] == ["grace_expired", "sigterm_sent", "sigkill_sent", "reaped"]
    assert kinds(events, "reaped")[0].details["signal"] == "SIGKILL"
    assert [e.details["start_method"] for e in kinds(events, "spawned")] == ["zygote"] * 2


@pytest.mark.parametrize("mode", MODES)
async def test_a_forked_grandchild_without_exec_carries_the_tree_tag(mode, strays):
    # No exec: its /proc environ is its helper's initial environment, where the helper
    # wrote its tag over the zygote's placeholder; so the tree finds it after the
    # helper's SIGKILL too.
    timeouts = HelperTimeouts(reply=0.3, cancel_grace=0.1, terminate=0.3, kill=1.0)
    async with open_helper_pool(forked(containment=mode), timeouts=timeouts) as pool:
        grandchild = await pool.run_sync(fns.fork_stubborn)
        strays.append(grandchild)
        environ = await pool.run_sync(fns.environ_of, grandchild)
        helper = pool.snapshot().helpers[0]
        assert helper is not None
        tags = [item for item in environ if item.startswith(f"{TAG_ENV}=")]
        assert len(tags) == 1
        assert tags[0] != f"{TAG_ENV}={'-' * 32}"  # the helper's own, not the placeholder
    await wait_gone(grandchild)


async def test_a_crash_is_replaced_by_a_fork():
    hub = PoolEvents("helper")
    with hub.subscribe() as stream:
        async with open_helper_pool(forked(), timeouts=FAST, events=hub) as pool:
            with pytest.raises(HelperExited):
                await pool.run_job("crash", 3)
            assert await pool.run_job("echo", 2) == 2
            assert pool.zygote is not None
            assert (pool.zygote.starts, pool.zygote.forks) == (1, 2)
        events = drain(stream)
    spawned = kinds(events, "spawned")
    assert [(e.incarnation, e.details["start_method"]) for e in spawned] == [
        (1, "zygote"),
        (2, "zygote"),
    ]
    assert spawned[1].details["replaces"] is True


async def test_a_zygote_that_dies_is_reported_and_replaced(caplog):
    hub = PoolEvents("helper")
    with hub.subscribe() as stream:
        async with open_helper_pool(forked(), timeouts=FAST, events=hub) as pool:
            assert pool.zygote is not None
            first = pool.zygote.pid
            assert first is not None
            helper = pool.snapshot().helpers[0]
            assert helper is not None
            os.kill(first, signal.SIGKILL)
            exited = await next_event(stream, "zygote_exited")
            restarted = await next_event(stream, "zygote_started")
            assert exited.details["zygote_pid"] == first
            assert exited.details["signal"] == "SIGKILL"
            assert restarted.details["restarts"] == 1
            assert restarted.details["zygote_pid"] == pool.zygote.pid != first
            # The helper it forked lives on, untouched; the next one is a fork of the
            # new zygote.
            assert await pool.run_job("echo", 1) == 1
            same = pool.snapshot().helpers[0]
            assert same is not None
            assert (same.pid, same.incarnation, same.alive) == (helper.pid, 1, True)
            with pytest.raises(HelperExited):
                await pool.run_job("crash", 3)
            assert await pool.run_job("echo", 3) == 3
            assert (pool.zygote.starts, pool.zygote.forks) == (2, 2)
    assert [r.levelname for r in caplog.records if "zygote: pid" in r.getMessage()] == ["WARNING"]
    await wait_gone(first)


async def test_a_zygote_that_cannot_hold_the_module_leaves_the_pool_to_spawn():
    hub = PoolEvents("threaded")
    with hub.subscribe() as stream:
        async with open_helper_pool(
            forked(entry="threaded_entry:main", name="threaded"), timeouts=FAST, events=hub
        ) as pool:
            assert await pool.run_sync(fns.random_value) < 1
            assert pool.zygote is not None
            assert pool.zygote.unavailable is not None
            assert "threads" in pool.zygote.unavailable
        events = drain(stream)
    unavailable = kinds(events, "zygote_unavailable")
    assert len(unavailable) == 1
    assert [e.details["start_method"] for e in kinds(events, "spawned")] == ["spawn"]


async def test_spawn_stays_an_option():
    async with open_helper_pool(spec(start_method="spawn"), timeouts=FAST) as pool:
        assert pool.zygote is None
        assert await pool.run_job("echo", 1) == 1


def test_zygote_needs_an_entry_helper_on_this_host():
    with pytest.raises(ValueError, match="start_method"):
        HelperSpec(argv=["true"], start_method="zygote")
    with pytest.raises(ValueError, match="start_method"):
        HelperSpec(entry="m:f", host="example.org", start_method="zygote")
    with pytest.raises(ValueError, match="start_method"):
        HelperSpec(entry="m:f", start_method="fork")
