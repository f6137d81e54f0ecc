"""Resync that converges: snapshot, then follow from its cursor (design §6.15).

The first report: ``cursor_expired`` answered the oldest retained event, which the next
event evicted; a client following it while events flowed expired again, 20 times out of
20. Now it points at a snapshot: the state of every live run and the cursor it is
consistent with, taken atomically; subscribing from that cursor converges, whatever the
emission rate, because no event falls between the two.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors._eventlog import EventLogActor, EventLogClient
from actors._eventlog._eventlog import open_event_log
from actors._eventlog._ports import ResyncRequired
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import CursorExpired

OPS = [OperationSpec(name="job", fields={"n"})]
WINDOW = 4096


async def test_the_snapshot_holds_every_live_run_at_its_cursor(ledger_at) -> None:
    config = EventLogConfig(ledger_path=ledger_at, synchronous="NORMAL")
    async with open_event_log(config, operations=OPS) as log:
        for n in range(4):
            await log.submit("job", {"n": n})
    async with open_event_log(config, operations=OPS) as log:
        await log.resume(1)
        await log.discard(2)
        fresh = await log.submit("job", {"n": 9})
        log.start(fresh.run_id)
        log.progress(fresh.run_id, 0.25)
        log.apply_edit()
        snapshot = log.snapshot()
        assert snapshot.cursor == log.head
        assert snapshot.revision == 1
        assert [(s.run_id, s.state) for s in snapshot.runs] == [
            (1, "queued"),
            (3, "held"),
            (4, "held"),
            (5, "running"),
        ]
        assert snapshot.runs[-1].progress == 0.25
        assert snapshot.to_dict()["runs"][0]["run_id"] == 1


async def follow(client: EventLogClient, until: int) -> tuple[int, dict[int, float | None]]:
    """The documented path: snapshot, subscribe from its cursor, apply the events.

    The reader takes every event already queued each time it runs (as a sender that
    writes batches does), so it keeps up with a writer that emits many per checkpoint.
    """
    snapshot = await client.snapshot()
    progress = {status.run_id: status.progress for status in snapshot.runs}
    port = await client.subscribe(cursor=snapshot.cursor, bound=WINDOW)
    seen = snapshot.cursor
    with port:
        while seen < until:
            batch = [await port.receive()]
            while True:
                try:
                    batch.append(port.receive_nowait())
                except trio.WouldBlock:
                    break
            for item in batch:
                assert not isinstance(item, ResyncRequired)
                assert item.seq == seen + 1  # never a gap, never a repeat
                seen = item.seq
                if item.kind == "job_progress":
                    progress[item.run_id] = item.data["fraction"]  # type: ignore[index]
    return snapshot.cursor, progress


async def test_snapshot_then_subscribe_catches_up_at_full_emission_rate() -> None:
    config = EventLogConfig(window=WINDOW, subscriber_bound=WINDOW)
    async with trio.open_nursery() as nursery:
        actor = EventLogActor(config, operations=OPS)
        client = EventLogClient(await nursery.start(actor.run), timeout=10)
        log = actor.log
        run_id = (await client.submit("job", {"n": 1})).run_id
        log.start(run_id)
        done, filled = trio.Event(), trio.Event()

        async def produce() -> None:
            step = 0
            while not done.is_set():
                for _ in range(64):  # as fast as the loop goes, yielding now and then
                    step += 1
                    log.progress(run_id, (step % 1000) / 1000)
                if log.head > WINDOW + 100:
                    filled.set()
                await trio.lowlevel.checkpoint()

        nursery.start_soon(produce)
        started_at, first_head = trio.current_time(), log.head
        with trio.fail_after(10):
            await filled.wait()
        for _ in range(20):
            with pytest.raises(CursorExpired) as info:
                await client.watch(0)  # lost its place: below the window
            assert info.value.details["resync"] == "snapshot"
            with trio.fail_after(10):
                cursor, progress = await follow(client, until=log.head + 2000)
            assert cursor > 0
            assert progress[run_id] is not None
        rate = (log.head - first_head) / (trio.current_time() - started_at)
        assert rate > 5_000  # events per second while the client resynced, 20 of 20
        done.set()
        await trio.testing.wait_all_tasks_blocked()
        with trio.fail_after(10):
            _, progress = await follow(client, until=log.head)
        assert progress[run_id] == (await client.status(run_id)).progress
        await client.ref.stop(grace=5)


async def test_a_dropped_port_resyncs_from_a_snapshot(autojump_clock) -> None:
    async with open_event_log(EventLogConfig(window=64), operations=OPS) as log:
        run_id = (await log.submit("job", {"n": 1})).run_id
        log.start(run_id)
        port = log.subscribe("slow", bound=8)
        for i in range(5):
            log.progress(run_id, i / 100)
        got = [port.receive_nowait().seq for _ in range(3)]
        for i in range(100):  # falls behind
            log.progress(run_id, 0.5 + i / 1000)
        notice = port.receive_nowait()
        # Dropped at the first event past its bound (seq 15), after it got seq 6.
        assert notice == ResyncRequired(head=15, cursor=got[-1])
        assert log.head - notice.cursor > 64  # its place left the window: watch cannot help
        with pytest.raises(CursorExpired):
            port.resync(notice.cursor)
        snapshot = log.snapshot()
        port.resync(snapshot.cursor)
        log.progress(run_id, 0.99)
        event = port.receive_nowait()
        assert (event.seq, event.data) == (snapshot.cursor + 1, {"fraction": 0.99})
        assert snapshot.runs[0].progress == 0.5 + 99 / 1000
