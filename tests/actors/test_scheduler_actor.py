"""Tests of the scheduler actor (design §4) under ``autojump_clock`` with exact times."""

from __future__ import annotations

import itertools
import threading

import pytest
import trio
import trio.testing
from scheduler_support import Recorder, config, running, settled

from actors import (
    DiskCache,
    Failed,
    FormatChanged,
    GetSchedulerStatistics,
    HelperRestarted,
    Invalidated,
    Kind,
    Parked,
    PayloadCache,
    Progressive,
    Published,
    Reconcile,
    Retrying,
    RunInfo,
    RunStarted,
    SchedulerActor,
    SchedulerActorStatistics,
    SchedulerConfig,
    SetPriority,
    SetTiers,
    Settled,
    SourceChanged,
    SwitchSource,
)
from actors.errors import InvalidCommand, PoolBusy, RenderFailed, ScheduleRejected


def runs(n: int, *, start: int = 1, prefix: str = "g") -> list[RunInfo]:
    return [RunInfo(run_id=i, guid=f"{prefix}{i}", revision="r1") for i in range(start, start + n)]


# --- timer, retries, deadlines -------------------------------------------------------------


async def test_timer_wakes_the_scheduler_exactly_when_the_earliest_backoff_ends(autojump_clock):
    calls: list[tuple[float, str]] = []

    async def execute(job):
        calls.append((trio.current_time(), job.claim.kind))
        if job.claim.kind == "metadata" and len(calls) <= 4:
            raise PoolBusy("no helper free")
        return b"ok"

    async with running(execute, runs=runs(1)) as (_actor, _ref, rec):
        await rec.until(settled(1))
    assert [kind for _t, kind in calls] == ["metadata"] * 5 + ["thumbnail", "preview"]
    starts = [t for t, _k in calls[:5]]
    assert [round(b - a, 9) for a, b in itertools.pairwise(starts)] == [
        0.025,
        0.05,
        0.1,
        0.2,
    ]
    assert starts[4] == starts[0] + 0.025 + 0.05 + 0.1 + 0.2
    retries = rec.of(Retrying)
    assert [r.attempt for r in retries] == [1, 2, 3, 4]
    assert [r.not_before for r in retries] == starts[1:]


async def test_timer_wakes_for_the_earliest_of_several_backoffs(autojump_clock):
    calls: list[tuple[float, int]] = []
    failures = {1: 3, 2: 1}  # run 1 fails 3 times, run 2 once

    async def execute(job):
        claim = job.claim
        calls.append((trio.current_time(), claim.run_id))
        if claim.kind == "metadata" and failures.get(claim.run_id, 0) > 0:
            failures[claim.run_id] -= 1
            raise PoolBusy("no helper free")
        return b"ok"

    async with running(execute, runs=runs(2), config=config(workers=2)) as (_a, _r, rec):
        await rec.until(settled(2))
    t0 = calls[0][0]
    meta = [(round(t - t0, 9), run) for t, run in calls if run in (1, 2)][:6]
    assert meta[:2] == [(0.0, 1), (0.0, 2)]
    # Both retried when their 25 ms backoffs end; then run 1 alone at 75 ms and 175 ms.
    assert (0.025, 1) in meta
    assert (0.025, 2) in meta
    retries = [round(e.not_before - t0, 9) for e in rec.of(Retrying)]
    assert retries == [0.025, 0.025, 0.075, 0.175]


async def test_deadline_is_a_transient_failure(autojump_clock):
    calls: list[float] = []

    async def execute(job):
        calls.append(trio.current_time())
        if len(calls) == 1:
            await trio.sleep_forever()
        return b"m"

    async with running(execute, runs=runs(1), config=config(job_deadline=2.0)) as (_a, _r, rec):
        await rec.until(settled(1))
    (retry,) = rec.of(Retrying)
    assert retry.error.code == "deadline_exceeded"
    assert retry.error.category == "transient"
    # Stopped at its deadline plus the 0.5 s grace (design §4.14), retried 25 ms later.
    assert calls[1] - calls[0] == pytest.approx(2.0 + 0.5 + 0.025, abs=1e-9)
    assert retry.not_before == calls[1]


async def test_errors_are_classified_and_bounded(autojump_clock):
    async def execute(job):
        if job.claim.run_id == 1:
            raise RenderFailed("bad data")
        raise ZeroDivisionError("x" * 5000)

    async with running(execute, runs=runs(2)) as (_a, _r, rec):
        await rec.until(settled(2))
    failed = {(e.run_id, e.kind): e for e in rec.of(Failed)}
    assert failed[1, "metadata"].error.code == "render_failed"
    assert failed[1, "thumbnail"].cause_kind == "metadata"
    unexpected = failed[2, "metadata"].error
    assert (unexpected.category, unexpected.code) == ("permanent", "unexpected_error")
    assert unexpected.message.startswith("ZeroDivisionError: xxx")
    assert len(unexpected.message.encode()) <= 1024
    assert not rec.of(Published)


# --- the happy path, priorities and caches ------------------------------------------------------


async def test_publishes_each_kind_once_in_priority_order(autojump_clock):
    order: list[tuple[int, str]] = []
    observations: dict[tuple[int, str], object] = {}

    async def execute(job, tag):
        claim = job.claim
        order.append((claim.run_id, claim.kind))
        observations[claim.run_id, claim.kind] = job.observation
        await trio.sleep(0.1)
        if claim.kind == "metadata":
            return {"run": claim.run_id, "tag": tag}
        return f"{claim.kind}-{claim.run_id}".encode()

    async with running(execute, "T", runs=runs(3)) as (_actor, ref, rec):
        await ref.send(SetPriority(selected=3, visible=(2,)))
        await rec.until(settled(3))
        stats = await ref.ask(GetSchedulerStatistics(), timeout=1.0)
    # Run 1's metadata was claimed before the priority arrived; then 3, 2, 1.
    assert order == [
        (1, "metadata"),
        (3, "metadata"),
        (3, "thumbnail"),
        (3, "preview"),
        (2, "metadata"),
        (2, "thumbnail"),
        (2, "preview"),
        (1, "thumbnail"),
        (1, "preview"),
    ]
    published = rec.of(Published)
    assert len(published) == len({(p.run_id, p.kind, p.revision) for p in published}) == 9
    assert observations[3, "thumbnail"] == {"run": 3, "tag": "T"}  # from the observation LRU
    assert observations[3, "metadata"] is None
    started = rec.of(RunStarted)
    assert [s.run_id for s in started] == [1, 3, 2]
    first = rec.events.index(started[0])
    assert rec.events.index(published[0]) > first
    assert isinstance(stats, SchedulerActorStatistics)
    assert (stats.core.published, stats.core.done, stats.workers) == (9, 9, 1)
    assert stats.observations.entries == 3


async def test_rejected_messages_fail_the_ask_and_change_nothing(autojump_clock):
    gate = trio.Event()

    async def execute(job):
        await gate.wait()
        return b"x"

    async with running(execute, runs=runs(3)) as (actor, ref, rec):
        await ref.ask(SetPriority(selected=2, visible=(3,)), timeout=1.0)
        with pytest.raises(ScheduleRejected):
            await ref.ask(SetPriority(selected=99), timeout=1.0)
        with pytest.raises(ScheduleRejected):
            await ref.ask(Reconcile(runs=runs(2)), timeout=1.0)
        with pytest.raises(InvalidCommand):
            await ref.ask("hello", timeout=1.0)
        with pytest.raises(InvalidCommand):
            await ref.ask(FormatChanged(renderer_version="2", options="", kinds={"x"}), timeout=1)
        assert actor.scheduler.statistics().priority_pending
        gate.set()
        await rec.until(settled(3))
    assert [s.run_id for s in rec.of(RunStarted)] == [1, 2, 3]


async def test_source_changed_is_deferred_while_the_job_runs(autojump_clock):
    gate = trio.Event()
    calls: list[tuple[str, str]] = []

    async def execute(job):
        calls.append((job.claim.kind, job.claim.revision))
        if len(calls) == 1:
            await gate.wait()
        return b"x"

    async with running(execute, runs=runs(1)) as (_a, ref, rec):
        await trio.testing.wait_all_tasks_blocked()
        await ref.ask(SourceChanged(run_id=1, revision="r2"), timeout=1.0)
        gate.set()
        await rec.until(lambda evs: any(isinstance(e, Settled) and e.revision == "r2" for e in evs))
    meta = [e for e in rec.events if isinstance(e, Published | Invalidated)][:2]
    assert isinstance(meta[0], Published)
    assert (meta[0].kind, meta[0].revision) == ("metadata", "r1")
    assert isinstance(meta[1], Invalidated)
    assert meta[1].revision == "r2"
    assert calls == [
        ("metadata", "r1"),
        ("metadata", "r2"),
        ("thumbnail", "r2"),
        ("preview", "r2"),
    ]


async def test_switch_source_cancels_stale_jobs_and_publishes_nothing_old(autojump_clock):
    calls: list[str] = []

    async def execute(job):
        calls.append(job.claim.guid)
        if job.claim.guid == "old1":
            await trio.sleep_forever()
        return b"x"

    async with running(execute, runs=runs(1, prefix="old")) as (_a, ref, rec):
        await trio.testing.wait_all_tasks_blocked()
        await ref.ask(SwitchSource(source="new.db", runs=runs(1, prefix="new")), timeout=1.0)
        await rec.until(settled(1))
        stats = await ref.ask(GetSchedulerStatistics(), timeout=1.0)
    assert calls == ["old1", "new1", "new1", "new1"]
    assert all(p.guid == "new1" for p in rec.of(Published))
    assert stats.cancelled_stale == 1
    assert stats.core.generation == 1
    assert stats.core.dropped == 1


async def test_helper_restarted_reruns_metadata_of_the_old_incarnation(autojump_clock):
    calls: list[tuple[float, int]] = []

    async def execute(job):
        calls.append((trio.current_time(), job.claim.incarnation))
        if len(calls) == 1:
            await trio.sleep_forever()
        return b"x"

    async with running(execute, runs=runs(1)) as (_a, ref, rec):
        await trio.testing.wait_all_tasks_blocked()
        await ref.send(HelperRestarted())
        await rec.until(settled(1))
    # The stale job was cancelled, its result fenced, and its work queued again at once.
    assert [inc for _t, inc in calls] == [0, 1, 1, 1]
    assert calls[1][0] == calls[0][0]
    assert len(rec.of(Published)) == 3


async def test_progressive_run_is_parked_and_paged_10_ms_apart(autojump_clock):
    pages: list[float] = []

    async def execute(job):
        if job.claim.kind == "metadata":
            pages.append(trio.current_time())
            if len(pages) <= 3:
                return Progressive({"rows": len(pages)})
            return {"rows": 99}
        return b"img"

    async with running(execute, runs=runs(1)) as (_a, _ref, rec):
        await rec.until(settled(1))
    assert [p.result for p in rec.of(Parked)] == [{"rows": 1}, {"rows": 2}, {"rows": 3}]
    gaps = [round(b - a, 9) for a, b in itertools.pairwise(pages)]
    assert gaps == [0.0, 0.01, 0.01]  # the first page may follow the first read at once
    (meta,) = [p for p in rec.of(Published) if p.kind == "metadata"]
    assert meta.result == {"rows": 99}


async def test_stop_is_prompt_and_closes_the_events_channel(autojump_clock):
    async def execute(job):
        return b"x"

    async with trio.open_nursery() as nursery:
        actor = SchedulerActor(execute, runs=runs(2), config=config())
        ref = await nursery.start(actor.run)
        recorder = Recorder()
        nursery.start_soon(recorder.collect, actor.events)
        await recorder.until(settled(2))
        start = trio.current_time()
        await ref.stop(grace=5.0)
        assert trio.current_time() == start  # idle workers exit at once: no grace wait
    assert len(recorder.of(Published)) == 6  # and the collector saw EndOfChannel


async def test_a_slow_reader_holds_back_workers_not_the_mailbox(autojump_clock):
    async def execute(job):
        return b"x"

    async with trio.open_nursery() as nursery:
        actor = SchedulerActor(execute, runs=runs(20), events_capacity=2, config=config())
        ref = await nursery.start(actor.run)
        await trio.testing.wait_all_tasks_blocked()
        stats = await ref.ask(GetSchedulerStatistics(), timeout=1.0)  # the mailbox still answers
        assert stats.core.claims <= 4
        assert stats.events_queued <= 6
        recorder = Recorder()
        nursery.start_soon(recorder.collect, actor.events)
        await recorder.until(settled(20))
        await ref.stop(grace=1.0)


# --- caches (real clock: worker threads do file I/O) ----------------------------------------


async def test_payloads_come_from_the_disk_cache_after_a_restart(tmp_path):
    executed: list[str] = []

    async def execute(job):
        executed.append(job.claim.kind)
        return {"m": 1} if job.claim.kind == "metadata" else f"png-{job.claim.kind}".encode()

    for _attempt in range(2):
        cache = PayloadCache(directory=tmp_path, disk_max_bytes=100_000)
        kwargs = {"runs": runs(1), "source": "db", "payload_cache": cache, "renderer_version": "1"}
        async with running(execute, **kwargs) as (_a, ref, rec):
            await rec.until(settled(1), seconds=10)
            stats = await ref.ask(GetSchedulerStatistics(), timeout=5.0)
        assert {p.kind: p.result for p in rec.of(Published) if p.kind != "metadata"} == {
            "thumbnail": b"png-thumbnail",
            "preview": b"png-preview",
        }
    assert executed == ["metadata", "thumbnail", "preview", "metadata"]
    assert stats.payload_disk.hits == 2


class CountingDisk(DiskCache):
    """A disk cache that counts the reads that reach its files."""

    reads = 0

    def get(self, key, **options):
        CountingDisk.reads += 1
        return super().get(key, **options)


async def test_keys_the_disk_does_not_hold_are_misses_without_a_read(tmp_path):
    CountingDisk.reads = 0
    for _attempt in range(2):
        cache = PayloadCache()
        cache.disk = CountingDisk(tmp_path, max_bytes=100_000)
        kwargs = {"runs": runs(2), "source": "db", "payload_cache": cache}
        async with running(execute_png, **kwargs) as (_a, ref, rec):
            await rec.until(settled(2), seconds=10)
            stats = await ref.ask(GetSchedulerStatistics(), timeout=5.0)
        if _attempt == 0:  # a fresh folder: four misses, no file opened for them
            assert (CountingDisk.reads, stats.payload_disk.misses) == (0, 4)
    assert (CountingDisk.reads, stats.payload_disk.hits, stats.payload_disk.misses) == (4, 4, 0)


class HeldDisk(DiskCache):
    """A disk cache whose writes wait until :attr:`release` is set (a threading.Event)."""

    release = threading.Event()

    def put(self, key, data, **options):
        if not HeldDisk.release.wait(10):
            raise TimeoutError("never released")
        return super().put(key, data, **options)


async def test_a_payload_is_published_before_its_disk_write(tmp_path):
    # A slow disk never delays a result: it is out (and in the memory level) while its
    # disk write still waits; the write follows.
    HeldDisk.release.clear()
    cache = PayloadCache()
    cache.disk = HeldDisk(tmp_path, max_bytes=100_000)
    kwargs = {"runs": runs(1), "source": "db", "payload_cache": cache}
    try:
        async with running(execute_png, **kwargs) as (_a, ref, rec):
            published = lambda events: any(  # noqa: E731
                isinstance(e, Published) and e.kind == "thumbnail" for e in events
            )
            await rec.until(published, seconds=10)
            assert cache.disk.statistics().entries == 0  # its write is still held
            assert len(cache.memory) >= 1
            HeldDisk.release.set()
            await rec.until(settled(1), seconds=10)
            with trio.fail_after(10):
                while cache.disk.statistics().entries < 2:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            stats = await ref.ask(GetSchedulerStatistics(), timeout=5.0)
    finally:
        HeldDisk.release.set()
    assert stats.disk_errors == 0
    assert {p.kind for p in rec.of(Published)} == {"metadata", "thumbnail", "preview"}


async def execute_png(job):
    return {"m": 1} if job.claim.kind == "metadata" else f"png-{job.claim.kind}".encode()


async def test_format_change_gives_new_cache_keys(tmp_path):
    executed: list[str] = []
    fail_thumbnail = [True]

    async def execute(job):
        executed.append(job.claim.kind)
        if job.claim.kind == "thumbnail" and fail_thumbnail[0]:
            raise RenderFailed("bad options")
        return {"m": 1} if job.claim.kind == "metadata" else b"png"

    cache = PayloadCache()
    async with running(execute, runs=runs(1), payload_cache=cache) as (_a, ref, rec):
        await rec.until(settled(1), seconds=10)
        fail_thumbnail[0] = False
        await ref.ask(FormatChanged(renderer_version="2", options="{}"), timeout=5)
        await rec.until(
            lambda evs: any(isinstance(e, Published) and e.kind == "thumbnail" for e in evs),
            seconds=10,
        )
    assert executed == ["metadata", "thumbnail", "preview", "thumbnail"]


# --- declared kinds and tiers through the actor (design §4.11, §4.2) -------------------------


async def test_a_kind_gets_the_results_of_every_kind_it_needs(autojump_clock):
    kinds = (
        Kind(name="read"),
        Kind(name="stats", needs=("read",)),
        Kind(name="report", needs=("read", "stats")),
    )
    seen: dict[str, tuple[object, dict]] = {}

    async def execute(job):
        seen[job.claim.kind] = (job.observation, dict(job.inputs))
        return f"{job.claim.kind} of {job.claim.run_id}"

    async with running(execute, runs=runs(1), config=SchedulerConfig(kinds=kinds)) as (
        _a,
        _r,
        rec,
    ):
        await rec.until(settled(1))
    assert seen == {
        "read": (None, {}),
        "stats": ("read of 1", {"read": "read of 1"}),
        "report": ("read of 1", {"read": "read of 1", "stats": "stats of 1"}),
    }


async def test_set_tiers_places_runs_in_declared_tiers(autojump_clock):
    order: list[int] = []
    gate = trio.Event()

    async def execute(job):
        await gate.wait()
        order.append(job.claim.run_id)
        return b"x"

    config = SchedulerConfig(kinds=(Kind(name="job"),), tiers=("now", "soon", "later"))
    async with running(execute, runs=runs(4), config=config) as (_a, ref, rec):
        await ref.ask(SetTiers(placements={"soon": [2], "now": [4]}), timeout=1.0)
        with pytest.raises(ScheduleRejected, match="not a tier"):
            await ref.ask(SetTiers(placements={"never": [1]}), timeout=1.0)
        gate.set()
        await rec.until(settled(4))
    assert order == [1, 4, 2, 3]  # run 1 was claimed before the placement arrived


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: FormatChanged(renderer_version=2, options=""), "renderer_version"),
        (lambda: FormatChanged(renderer_version="2", options=None), "options"),
        (lambda: FormatChanged(renderer_version="2", options="", kinds=5), "kinds"),
        (lambda: FormatChanged(renderer_version="2", options="", kinds=[["x"]]), "kinds"),
        (lambda: FormatChanged(renderer_version="2", options="", kinds="preview"), "kinds"),
        (lambda: SwitchSource(source=None, runs=runs(1)), "source"),
        (lambda: SwitchSource(source=b"db", runs=runs(1)), "source"),
    ],
)
def test_scheduler_messages_refuse_mistyped_fields_by_name(build, field):
    # Such a message used to reach the actor: FormatChanged(kinds=5) crashed it in
    # handle(), and a non-str version, options or source crashed a worker at the next
    # cached claim (the payload cache key refused it there).
    with pytest.raises(ValueError, match=field):
        build()


def test_a_mistyped_source_is_refused_and_changes_nothing():
    async def execute(job):
        return b"x"

    with pytest.raises(ScheduleRejected, match="source"):
        SchedulerActor(execute, runs=runs(1), source=5, config=config())
    actor = SchedulerActor(execute, runs=runs(2), source="db", config=config())
    core = actor.scheduler
    with pytest.raises(ScheduleRejected, match="source"):
        core.switch_source(None, runs(1))  # type: ignore[arg-type]
    assert (core.source, core.generation, len(core)) == ("db", 0, 2)
