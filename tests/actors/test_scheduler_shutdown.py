"""What a stop leaves behind (design §4.13, §4.10): nothing of ours still running, and
every attempt it cut off marked ``interrupted``.

The interruption tests run under ``autojump_clock`` with exact times; the disk-cache
test uses the real clock (its writes run in real worker threads).
"""

from __future__ import annotations

import logging
import threading

import trio
import trio.testing
from scheduler_support import Recorder, config

from actors import (
    DiskCache,
    Failed,
    Interrupted,
    PayloadCache,
    Published,
    RunInfo,
    SchedulerActor,
)

WAIT = 10.0  # real seconds for what happens at once unless the code is broken


def runs(n: int) -> list[RunInfo]:
    return [RunInfo(run_id=i, guid=f"g{i}", revision="r1") for i in range(1, n + 1)]


async def test_attempts_cut_off_by_a_stop_end_interrupted_not_failed(autojump_clock, caplog):
    async def execute(job):
        if job.claim.kind == "metadata":
            return {"m": 1}
        await trio.sleep(10)  # a drawing still running when the grace ends
        return b"late"

    caplog.set_level(logging.INFO, logger="actors.scheduler")
    async with trio.open_nursery() as nursery:
        actor = SchedulerActor(execute, runs=runs(1), config=config(workers=2))
        ref = await nursery.start(actor.run)
        recorder = Recorder()
        nursery.start_soon(recorder.collect, actor.events)
        await recorder.until(lambda events: len(events) >= 2)  # RunStarted, metadata out
        await trio.testing.wait_all_tasks_blocked()
        core = actor.scheduler
        assert [core.status(1, kind) for kind in ("thumbnail", "preview")] == ["active"] * 2
        start = trio.current_time()
        await ref.stop(grace=1.0)
        assert trio.current_time() == start + 1.0  # the grace, then the cut
    # The snapshot says what to redo...
    assert [core.status(1, kind) for kind in core.kinds] == ["done", "interrupted", "interrupted"]
    stats = core.statistics()
    assert (stats.active, stats.interrupted, stats.failed, stats.done) == (0, 2, 0, 1)
    assert core.active_claims() == []
    # ...and so do the notices (delivered before the events channel closed) and the log.
    notices = recorder.of(Interrupted)
    assert sorted((n.run_id, n.kind, n.revision, n.attempt) for n in notices) == [
        (1, "preview", "r1", 1),
        (1, "thumbnail", "r1", 1),
    ]
    assert all(n.at == start + 1.0 for n in notices)
    assert recorder.of(Failed) == []
    assert [p.kind for p in recorder.of(Published)] == ["metadata"]
    records = [r for r in caplog.records if getattr(r, "scheduler_event", None) == "interrupted"]
    assert sorted((r.levelname, r.run_id, r.kind, r.attempt) for r in records) == [
        ("WARNING", 1, "preview", 1),
        ("WARNING", 1, "thumbnail", 1),
    ]


async def test_an_interrupted_slot_is_redone_when_its_source_changes(autojump_clock):
    # Interrupted is not a verdict on the work: a reset makes it pending again.
    async def execute(job):
        await trio.sleep(10)

    kinds = config().kinds[:1]  # metadata only
    async with trio.open_nursery() as nursery:
        actor = SchedulerActor(execute, runs=runs(1), config=config(kinds=kinds))
        ref = await nursery.start(actor.run)
        nursery.start_soon(Recorder().collect, actor.events)
        await trio.testing.wait_all_tasks_blocked()
        await ref.stop(grace=0)
    core = actor.scheduler
    assert core.status(1, "metadata") == "interrupted"
    core.source_changed(1, "r2")
    assert core.status(1, "metadata") == "pending"
    assert core.statistics().interrupted == 0


class HeldDisk(DiskCache):
    """A disk cache whose writes block until released, the way a long write runs
    between its chunks: each wait also ends when the writer's abort flag goes up."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.entered = threading.Event()
        self.release = threading.Event()
        self.inside = 0

    def put(self, key, data, **options):
        self.inside += 1
        try:
            self.entered.set()
            abort = options.get("abort")
            (self.release if abort is None else abort).wait(WAIT)
            return super().put(key, data, **options)
        finally:
            self.inside -= 1


async def test_no_cache_write_outlives_stop(tmp_path):
    cache = PayloadCache()
    cache.disk = disk = HeldDisk(tmp_path, max_bytes=100_000)

    async def execute(job):
        return {"m": 1} if job.claim.kind == "metadata" else b"png"

    kinds = config().kinds[:2]  # metadata, thumbnail (cached)
    try:
        async with trio.open_nursery() as nursery:
            actor = SchedulerActor(
                execute, runs=runs(1), source="db", payload_cache=cache,
                config=config(kinds=kinds),
            )  # fmt: skip
            ref = await nursery.start(actor.run)
            nursery.start_soon(Recorder().collect, actor.events)
            # The thumbnail is published; its disk write is under way in a thread.
            assert await trio.to_thread.run_sync(disk.entered.wait, WAIT)
            await ref.stop(grace=0)
            # stop() has returned: no thread of ours may still touch the cache.
            assert disk.inside == 0
            assert sorted(p.name for p in tmp_path.iterdir()) == []  # no temp file either
        assert actor.scheduler_statistics().disk_aborted == 1
        assert disk.statistics().entries == 0
    finally:
        disk.release.set()  # main's write would go on here
