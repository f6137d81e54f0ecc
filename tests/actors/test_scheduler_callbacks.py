"""The embedder's callbacks and the payload cache's disk never take the scheduler actor
down (design §4.10): a raising ``observation_size``, ``payload_to_bytes`` or
``payload_from_bytes`` leaves the result uncached, and a disk call that hangs is
abandoned after ``cache_io_timeout``. Under ``autojump_clock`` with exact virtual times.
"""

from __future__ import annotations

import logging
import threading

import pytest
import trio
import trio.testing
from scheduler_support import config, running, runs, settled

from actors import DiskCache, GetSchedulerStatistics, PayloadCache, Published


async def execute(job):
    return {"m": 1} if job.claim.kind == "metadata" else f"png-{job.claim.kind}".encode()


def published(rec) -> dict[str, object]:
    return {p.kind: p.result for p in rec.of(Published)}


EVERY_KIND = {"metadata": {"m": 1}, "thumbnail": b"png-thumbnail", "preview": b"png-preview"}


def boom(*_args):
    raise RuntimeError("callback broke")


async def test_a_raising_observation_size_keeps_the_actor_and_the_results(autojump_clock, caplog):
    caplog.set_level(logging.ERROR, logger="actors.scheduler")
    async with running(execute, runs=runs(1), observation_size=boom) as (_a, ref, rec):
        await rec.until(settled(1))
        stats = await ref.ask(GetSchedulerStatistics(), timeout=5)
    assert published(rec) == EVERY_KIND
    assert stats.callback_errors >= 1
    assert any(getattr(r, "callback", None) == "observation_size" for r in caplog.records)


@pytest.mark.parametrize("size", [-1, 2.5, "big", None])
async def test_an_observation_size_that_is_not_a_byte_count_is_a_callback_error(
    autojump_clock, size
):
    kwargs = {"runs": runs(1), "observation_size": lambda _result: size}
    async with running(execute, **kwargs) as (_a, ref, rec):
        await rec.until(settled(1))
        stats = await ref.ask(GetSchedulerStatistics(), timeout=5)
    assert published(rec) == EVERY_KIND
    assert stats.callback_errors >= 1
    assert stats.observations.entries == 0


@pytest.mark.parametrize("data", [7, "text", ["b"]])
async def test_payload_to_bytes_returning_no_bytes_is_a_callback_error(mock_clock, tmp_path, data):
    """A clock that stands still: the disk reads (misses) take no virtual time."""
    cache = PayloadCache(directory=tmp_path, disk_max_bytes=100_000)
    kwargs = {"runs": runs(1), "payload_cache": cache, "payload_to_bytes": lambda _r: data,
              "config": config(page_interval=0)}  # fmt: skip
    async with running(execute, **kwargs) as (_a, ref, rec):
        await rec.until(settled(1))
        stats = await ref.ask(GetSchedulerStatistics(), timeout=5)
    assert published(rec) == EVERY_KIND
    assert (stats.callback_errors, stats.disk_errors) == (2, 0)
    assert stats.payload_memory.entries == stats.payload_disk.entries == 0


async def test_a_raising_payload_to_bytes_publishes_uncached(autojump_clock, caplog):
    caplog.set_level(logging.ERROR, logger="actors.scheduler")
    cache = PayloadCache()
    kwargs = {"runs": runs(1), "payload_cache": cache, "payload_to_bytes": boom}
    async with running(execute, **kwargs) as (_a, ref, rec):
        await rec.until(settled(1))
        stats = await ref.ask(GetSchedulerStatistics(), timeout=5)
    assert published(rec) == EVERY_KIND
    assert stats.callback_errors == 2  # thumbnail and preview, the cached kinds
    assert stats.payload_memory.entries == 0
    failed = [r for r in caplog.records if getattr(r, "callback", None) == "payload_to_bytes"]
    assert sorted(r.kind for r in failed) == ["preview", "thumbnail"]


async def test_a_raising_payload_from_bytes_is_a_miss_and_the_kind_runs_again(autojump_clock):
    cache = PayloadCache()
    executed: list[str] = []

    async def counting(job):
        executed.append(job.claim.kind)
        return await execute(job)

    async with running(counting, runs=runs(1), payload_cache=cache) as (_a, _r, rec):
        await rec.until(settled(1))
    kwargs = {"runs": runs(1), "payload_cache": cache, "payload_from_bytes": boom}
    async with running(counting, **kwargs) as (_a, ref, rec):
        await rec.until(settled(1))
        stats = await ref.ask(GetSchedulerStatistics(), timeout=5)
    assert published(rec) == EVERY_KIND
    assert executed == ["metadata", "thumbnail", "preview"] * 2
    assert stats.callback_errors == 2


class HeldDisk(DiskCache):
    """A disk cache whose reads (or writes) hang until the test lets go; each hung call
    sets the next of :attr:`entered`."""

    def __init__(self, *args, hold: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.hold = hold
        self.entered = [threading.Event() for _ in range(2)]
        self.release = threading.Event()

    def _hang(self, what: str) -> None:
        if self.hold == what:
            next(e for e in self.entered if not e.is_set()).set()
            self.release.wait(10)

    def absent(self, key):
        return False  # every read goes to the file, where it hangs

    def get(self, key, **options):
        self._hang("read")
        return super().get(key, **options)

    def put(self, key, data, **options):
        self._hang("write")
        return super().put(key, data, **options)


@pytest.mark.parametrize("hold", ["read", "write"])
async def test_a_hung_disk_call_is_abandoned_after_cache_io_timeout(
    tmp_path, mock_clock, caplog, hold
):
    """Virtual time moved by hand (autojump would also jump while the disk works):
    each hung call is abandoned exactly when the clock passes ``cache_io_timeout``."""
    caplog.set_level(logging.WARNING, logger="actors.scheduler")
    cache = PayloadCache()
    cache.disk = disk = HeldDisk(tmp_path, max_bytes=100_000, hold=hold)
    try:
        cfg = config(cache_io_timeout=2.0, page_interval=0)
        async with running(execute, runs=runs(1), payload_cache=cache, config=cfg) as (
            _a,
            ref,
            rec,
        ):
            for done, entered in enumerate(disk.entered):  # thumbnail's, then preview's
                assert await trio.to_thread.run_sync(entered.wait, 10)
                mock_clock.jump(1.5)
                await trio.testing.wait_all_tasks_blocked()
                assert len(timeouts(caplog)) == done  # still waiting at 1.5 s
                mock_clock.jump(0.5)
                await trio.testing.wait_all_tasks_blocked()
                assert len(timeouts(caplog)) == done + 1  # abandoned at 2.0 s
            await rec.until(settled(1))
            stats = await ref.ask(GetSchedulerStatistics(), timeout=5)
    finally:
        disk.release.set()
    assert published(rec) == EVERY_KIND
    assert trio.current_time() == 4.0
    assert stats.disk_errors == 2
    assert [r.io for r in timeouts(caplog)] == [hold, hold]


def timeouts(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "scheduler_event", "") == "cache_io_timeout"]
