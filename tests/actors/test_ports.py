"""Tests of subscriber ports: bounded queues, resync, toggles, listeners (design §6.9)."""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel
import trio.testing

from actors._eventlog._eventlog import open_event_log
from actors._eventlog._ports import ResyncRequired
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import CursorExpired, InvalidCommand, RemoteToggleDenied
from protocol.codec import unstructure_message

OPS = [OperationSpec(name="job", fields={"n"})]


async def started_run(log):
    receipt = await log.submit("job", {"n": 1})
    log.start(receipt.run_id)  # events 1..3: queued, started, synthetic progress
    return receipt.run_id


async def test_slow_subscriber_is_marked_and_never_slows_the_writer(autojump_clock):
    total = 10_000
    async with open_event_log(EventLogConfig(subscriber_bound=100), operations=OPS) as log:
        run_id = await started_run(log)
        slow = log.subscribe("slow", cursor=log.head)
        fast = log.subscribe("fast", cursor=log.head, bound=16)
        fast_seen: list[tuple[int, float]] = []
        slow_items: list[object] = []
        peaks = []

        async def read_fast():
            async for item in fast:
                assert not isinstance(item, ResyncRequired)
                fast_seen.append((item.seq, trio.current_time()))
                if len(fast_seen) == total:
                    return

        async def read_slow():
            async for item in slow:
                slow_items.append(item)
                await trio.sleep(1)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_fast)
            nursery.start_soon(read_slow)
            await trio.testing.wait_all_tasks_blocked()
            for i in range(total):
                log.progress(run_id, i / total)
                peaks.append(slow.statistics().queued)
                await trio.lowlevel.checkpoint()  # a writer that yields; the fast reader keeps up
            emitted_at = trio.current_time()
            await trio.sleep(5)
            nursery.cancel_scope.cancel()

        assert emitted_at == 0.0  # the writer was never slowed
        assert [seq for seq, _ in fast_seen] == list(range(4, 4 + total))
        assert all(at == 0.0 for _, at in fast_seen)  # every event, promptly
        stats = slow.statistics()
        assert stats.resync_required
        assert stats.resyncs == 1
        assert max(peaks) <= 100
        assert stats.peak <= 100
        assert stats.queued == 0
        assert stats.delivered + stats.dropped == total
        notices = [i for i in slow_items if isinstance(i, ResyncRequired)]
        assert len(notices) == 1
        assert notices[0].head <= 3 + total
        # The resume cursor is the last event the reader got before the drop.
        before = slow_items[: slow_items.index(notices[0])]
        assert notices[0].cursor == (before[-1].seq if before else 3)
        assert unstructure_message(notices[0]) == {
            "type": "resync_required",
            "head": notices[0].head,
            "cursor": notices[0].cursor,
        }
        assert fast.statistics().dropped == 0


async def test_resync_resumes_after_the_given_head_and_ack_drops():
    async with open_event_log(EventLogConfig(window=50), operations=OPS) as log:
        run_id = await started_run(log)
        port = log.subscribe(bound=4)
        for i in range(6):
            log.progress(run_id, i / 10)
        assert isinstance(port.receive_nowait(), ResyncRequired)
        with pytest.raises(trio.WouldBlock):
            port.receive_nowait()  # nothing more until resync
        log.progress(run_id, 0.9)
        with pytest.raises(CursorExpired):
            port.resync(log.head + 1)
        assert port.statistics().resync_required
        port.resync(log.head - 2)
        assert [port.receive_nowait().seq for _ in range(2)] == [log.head - 1, log.head]
        for i in range(3):
            log.progress(run_id, i / 10)
        port.ack(log.head - 1)
        assert port.statistics().acked == log.head - 1
        assert port.receive_nowait().seq == log.head
        with pytest.raises(ValueError, match="seq"):
            port.ack(-1)


async def test_only_local_callers_toggle_ports_and_reenable_forces_resync():
    async with open_event_log(operations=OPS) as log:
        run_id = await started_run(log)
        port = log.subscribe("p", local=False)
        with pytest.raises(RemoteToggleDenied) as info:
            log.set_port_enabled("p", False, local=False)
        assert info.value.code == "remote_toggle_denied"
        with pytest.raises(InvalidCommand):
            log.set_port_enabled("nope", False, local=True)
        assert not log.set_port_enabled("p", False, local=True).enabled
        log.progress(run_id, 0.5)
        with pytest.raises(trio.WouldBlock):
            port.receive_nowait()
        log.set_port_enabled("p", True, local=True)
        notice = port.receive_nowait()  # it missed an event: never a silent gap
        assert notice == ResyncRequired(head=log.head, cursor=log.head - 1)
        with pytest.raises(InvalidCommand, match="already open"):
            log.subscribe("p")
        with log.subscribe("closed") as closed:
            pass
        log.progress(run_id, 0.6)
        assert closed.statistics().queued == 0
        assert [s.name for s in log.statistics().ports] == ["p"]


async def test_failing_listener_is_contained():
    got = []

    def bad(event):
        raise ValueError("listener bug")

    async with open_event_log(operations=OPS) as log:
        log.subscribe("bad", listener=bad)
        log.subscribe("good", listener=got.append)
        port = log.subscribe("queue")
        run_id = await started_run(log)
        log.progress(run_id, 0.5)
        assert [e.seq for e in got] == [1, 2, 3, 4]
        assert [port.receive_nowait().seq for _ in range(4)] == [1, 2, 3, 4]
        stats = {s.name: s for s in log.statistics().ports}
        assert not stats["bad"].enabled
        assert stats["bad"].error["code"] == "listener_failed"
        assert "listener bug" in stats["bad"].error["message"]


async def test_receive_waits_and_iteration_ends_when_the_log_closes(autojump_clock):
    received = []
    async with trio.open_nursery() as nursery, open_event_log(operations=OPS) as log:
        port = log.subscribe()

        async def reader():
            async for item in port:
                received.append((item.seq, trio.current_time()))

        nursery.start_soon(reader)
        await trio.sleep(1)
        await log.submit("job", {"n": 1})
        await trio.sleep(1)
    assert received == [(1, 1.0)]
    port.close()
    with pytest.raises(trio.ClosedResourceError):
        port.receive_nowait()
