"""Tests of the event log's front door, lifecycle and cursors (design §6.1-6.8), in memory."""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

from actors._eventlog._eventlog import open_event_log
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import (
    AlreadyDecided,
    CursorExpired,
    InvalidCommand,
    RequestConflict,
    UnknownRun,
    UnsupportedOperation,
)
from protocol import messages
from protocol.codec import unstructure_message

OPS = [
    OperationSpec(name="preview", fields={"run_id", "kind"}, required={"run_id"}),
    OperationSpec(name="edit", fields={"run_id"}, mutating=True),
    OperationSpec(name="work", fields={"n", "fail", "steps"}),
]


def lifecycle(events, run_id):
    return [e.kind for e in events if e.run_id == run_id]


async def all_events(log):
    return list((await log.watch(0, limit=1_000_000)).events)


# -- receipts and validation (design §6.1, §6.2) ------------------------------------------


async def test_submit_returns_receipt_and_never_runs_inside():
    async with open_event_log(operations=OPS) as log:
        receipt = await log.submit("preview", {"run_id": 3}, request_id="r1")
        assert receipt.admitted
        assert not receipt.coalesced
        assert receipt.run_id == 1
        assert receipt.request_id == "r1"
        assert receipt.revision == 0
        assert receipt.event_cursor == 0
        assert len(receipt.snapshot_id) == 16
        fields = unstructure_message(receipt)  # the client's receipt message
        assert "verdict" not in fields
        assert fields["code"] is None
        # Made without attrs' validators on the hot path: the same as a validated one.
        assert type(receipt) is messages.Receipt
        assert receipt == messages.Receipt(**attrs.asdict(receipt))
        # no runner is registered for "preview": it waits for an external executor
        assert (await log.status(receipt.run_id)).state == "queued"
        events = await all_events(log)
        assert [(e.seq, e.kind, e.run_id) for e in events] == [(1, "job_queued", 1)]
        assert events[0].data["arguments"] == {"run_id": 3}
        generated = await log.submit("preview", {"run_id": 4})
        assert generated.request_id.startswith("req-")


async def test_validation_errors_name_the_problem():
    async with open_event_log(operations=OPS) as log:
        with pytest.raises(UnsupportedOperation) as info:
            await log.submit("nope", {})
        assert info.value.code == "unsupported_operation"
        with pytest.raises(InvalidCommand) as info:
            await log.submit("preview", [("run_id", 1)])  # type: ignore[arg-type]
        assert info.value.details["fields"] == ["arguments"]
        with pytest.raises(InvalidCommand) as info:
            await log.submit("preview", {"run_id": 1, "zoom": 2, "color": 1})
        assert info.value.code == "invalid_command"
        assert info.value.details["fields"] == ["color", "zoom"]
        assert "color, zoom" in str(info.value)
        with pytest.raises(InvalidCommand) as info:
            await log.submit("preview", {"kind": "x"})
        assert info.value.details["fields"] == ["run_id"]
        with pytest.raises(InvalidCommand):
            await log.submit("preview", {"run_id": float("nan")})
        assert log.head == 0


# -- idempotency (design §6.3) --------------------------------------------------------------


async def test_replay_returns_stored_receipt_and_conflict_is_refused():
    async with open_event_log(operations=OPS) as log:
        first = await log.submit("preview", {"run_id": 1, "kind": "a"}, request_id="x")
        # same content, keys in another order: canonical JSON makes it equal
        again = await log.submit("preview", {"kind": "a", "run_id": 1}, request_id="x")
        assert again == first
        assert log.head == 1  # no new run, no new event
        with pytest.raises(RequestConflict) as info:
            await log.submit("preview", {"run_id": 2}, request_id="x")
        assert info.value.code == "request_conflict"
        await log.cancel(first.run_id)
        # still idempotent once the run is decided: the same receipt, no new run
        assert await log.submit("preview", {"run_id": 1, "kind": "a"}, request_id="x") == first


# -- coalescing and revision (design §6.4) -----------------------------------------------


async def test_coalescing_and_its_exceptions():
    async with open_event_log(operations=OPS) as log:
        a = await log.submit("preview", {"run_id": 7})
        b = await log.submit("preview", {"run_id": 7})
        assert b.coalesced
        assert b.run_id == a.run_id
        assert b.snapshot_id == a.snapshot_id
        assert b.event_cursor == a.event_cursor
        other = await log.submit("preview", {"run_id": 8})
        assert not other.coalesced
        assert other.run_id != a.run_id
        # mutating operations never coalesce
        e1 = await log.submit("edit", {"run_id": 7})
        e2 = await log.submit("edit", {"run_id": 7})
        assert not e1.coalesced
        assert not e2.coalesced
        assert e1.run_id != e2.run_id
        # a running run still coalesces; a decided one does not
        log.start(a.run_id)
        assert (await log.submit("preview", {"run_id": 7})).run_id == a.run_id
        log.finish(a.run_id, "ok")
        fresh = await log.submit("preview", {"run_id": 7})
        assert not fresh.coalesced
        assert fresh.run_id not in (a.run_id, other.run_id)


async def test_apply_edit_bumps_revision_so_later_submissions_run_fresh():
    async with open_event_log(operations=OPS) as log:
        a = await log.submit("preview", {"run_id": 7})
        assert log.apply_edit() == 1
        b = await log.submit("preview", {"run_id": 7})
        assert not b.coalesced
        assert b.run_id != a.run_id
        assert (b.revision, a.revision) == (1, 0)
        assert b.snapshot_id != a.snapshot_id
        assert (await log.submit("preview", {"run_id": 7})).run_id == b.run_id
        kinds = [e.kind for e in await all_events(log)]
        assert kinds == ["job_queued", "revision_bumped", "job_queued"]
        drift = await log.check_drift(a.run_id)
        assert drift.drifted
        assert drift.changed == ("revision",)
        assert not (await log.check_drift(b.run_id)).drifted
        drift = await log.check_drift(b.run_id, {"arguments": {"run_id": 8}, "revision": 1})
        assert drift.changed == ("arguments",)
        with pytest.raises(InvalidCommand):
            await log.check_drift(b.run_id, {"color": 1})


# -- admission (design §6.5) ----------------------------------------------------------------


async def test_admission_full_pauses_and_resumes_once_per_episode():
    async with open_event_log(EventLogConfig(max_inflight=2), operations=OPS) as log:
        r1 = await log.submit("preview", {"run_id": 1})
        r2 = await log.submit("preview", {"run_id": 2})
        for n in (3, 4, 5):
            refused = await log.submit("preview", {"run_id": n}, request_id=f"q{n}")
            assert not refused.admitted
            assert refused.run_id is None
            assert refused.code == "admission_full"
            assert (refused.retryable, refused.depth, refused.bound) == (True, 2, 2)
        # a coalescing request needs no capacity: it joins the run in flight
        assert (await log.submit("preview", {"run_id": 1})).run_id == r1.run_id
        # cancel, status and watch never need capacity
        assert (await log.status(r2.run_id)).state == "queued"
        await log.watch(0)
        assert log.statistics().paused
        assert (await log.cancel(r1.run_id, "alice")).state == "cancelled"
        # the refused request id was not stored: a retry is admitted now
        retried = await log.submit("preview", {"run_id": 3}, request_id="q3")
        assert retried.admitted
        assert not (await log.submit("preview", {"run_id": 9})).admitted  # episode 2
        log.start(r2.run_id)
        log.finish(r2.run_id, "ok")
        kinds = [e.kind for e in await all_events(log)]
        admission = [k for k in kinds if k.startswith("admission")]
        assert admission == [
            "admission_paused",
            "admission_resumed",
            "admission_paused",
            "admission_resumed",
        ]
        paused = next(e for e in await all_events(log) if e.kind == "admission_paused")
        assert paused.data == {"depth": 2, "bound": 2}


# -- lifecycle (design §6.6) ----------------------------------------------------------------


async def test_external_lifecycle_buffers_progress_and_rejects_late_progress():
    async with open_event_log(operations=OPS) as log:
        r = await log.submit("preview", {"run_id": 1})
        log.progress(r.run_id, 0.25, "metadata")
        log.progress(r.run_id, 0.5)
        assert lifecycle(await all_events(log), r.run_id) == ["job_queued"]
        log.start(r.run_id)
        log.start(r.run_id)  # idempotent while running
        log.progress(r.run_id, 1.0)
        status = log.finish(r.run_id, "empty", {"rows": 0})
        assert (status.state, status.verdict, status.result) == ("finished", "empty", {"rows": 0})
        events = await all_events(log)
        assert lifecycle(events, r.run_id) == [
            "job_queued",
            "job_started",
            "job_progress",
            "job_progress",
            "job_progress",
            "job_finished",
        ]
        progress = [e.data for e in events if e.kind == "job_progress"]
        assert progress == [
            {"fraction": 0.25, "note": "metadata"},
            {"fraction": 0.5},
            {"fraction": 1.0},
        ]
        with pytest.raises(AlreadyDecided) as info:
            log.progress(r.run_id, 0.9)
        assert info.value.code == "already_decided"
        with pytest.raises(AlreadyDecided):
            log.finish(r.run_id, "ok")
        with pytest.raises(InvalidCommand):
            log.progress(r.run_id, 1.5)
        with pytest.raises(UnknownRun):
            log.start(99)


async def test_run_without_progress_gets_one_synthetic_zero():
    async with open_event_log(operations=OPS) as log:
        r = await log.submit("preview", {"run_id": 1})
        log.finish(r.run_id, "ok")  # finishing a queued run starts it first
        events = await all_events(log)
        assert lifecycle(events, r.run_id) == [
            "job_queued",
            "job_started",
            "job_progress",
            "job_finished",
        ]
        assert events[2].data == {"fraction": 0.0, "synthetic": True}


async def test_runner_lifecycle_order_under_concurrent_progress(autojump_clock):
    began = {}

    async def runner(run, report):
        began[run.run_id] = trio.current_time()

        async def part(i):
            for step in range(3):
                await trio.sleep(0.125 * (i + 1))
                report((i * 3 + step) / 12)

        async with trio.open_nursery() as nursery:
            for i in range(4):
                nursery.start_soon(part, i)
        return {"n": run.arguments["n"]}

    config = EventLogConfig(max_concurrency=3)
    async with open_event_log(config, operations=OPS, runners={"work": runner}) as log:
        receipts = [await log.submit("work", {"n": n}) for n in range(6)]
        log.progress(receipts[5].run_id, 0.01)  # while queued: buffered
        await trio.sleep(10)
        events = await all_events(log)
        for receipt in receipts:
            kinds = lifecycle(events, receipt.run_id)
            assert kinds[:2] == ["job_queued", "job_started"]
            assert kinds[-1] == "job_finished"
            assert set(kinds[2:-1]) == {"job_progress"}
            assert len(kinds[2:-1]) == 13
        buffered = [e for e in events if e.run_id == receipts[5].run_id][2]
        assert buffered.data == {"fraction": 0.01}
        # bounded concurrency: runs 4..6 start only when 1..3 finished, at t = 1.5 s
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        started = [e.run_id for e in events if e.kind == "job_started"]
        first_finish = next(i for i, e in enumerate(events) if e.kind == "job_finished")
        assert set(started[:3]) == {1, 2, 3}
        assert all(e.kind != "job_started" or e.run_id <= 3 for e in events[:first_finish])
        assert began == {1: 0.0, 2: 0.0, 3: 0.0, 4: 1.5, 5: 1.5, 6: 1.5}
        assert trio.current_time() == 10


async def test_runner_exception_is_a_failed_completion_and_the_drain_goes_on(autojump_clock):
    calls = []

    async def runner(run, report):
        calls.append(run.run_id)
        await trio.sleep(1)
        if run.arguments.get("fail"):
            raise RuntimeError("boom " + "x" * 5000)
        return "done"

    config = EventLogConfig(max_concurrency=1)
    async with open_event_log(config, operations=OPS, runners={"work": runner}) as log:
        bad = await log.submit("work", {"fail": True})
        good = await log.submit("work", {"n": 1})
        await trio.sleep(2)
        assert trio.current_time() == 2
        failed = await log.status(bad.run_id)
        assert (failed.state, failed.verdict) == ("finished", "NOT_RUN")
        assert failed.error["code"] == "runner_failed"
        assert failed.error["message"].startswith("RuntimeError: boom")
        assert len(failed.error["message"].encode()) <= 1024
        ok = await log.status(good.run_id)
        assert (ok.state, ok.verdict, ok.result) == ("finished", "ok", "done")
        assert calls == [bad.run_id, good.run_id]


# -- cancel (design §6.7) -------------------------------------------------------------------


async def test_cancel_is_truthful_and_attributed(autojump_clock):
    seen = []

    async def runner(run, report):
        try:
            await trio.sleep(5)
        except trio.Cancelled:
            seen.append(("cancelled", run.run_id, trio.current_time()))
            raise
        return "done"

    config = EventLogConfig(max_concurrency=1)
    async with open_event_log(config, operations=OPS, runners={"work": runner}) as log:
        running = await log.submit("work", {"n": 1})
        queued = await log.submit("work", {"n": 2})
        await trio.sleep(1)
        status = await log.cancel(queued.run_id, "bob")
        assert (status.state, status.cancelled_by) == ("cancelled", "bob")
        status = await log.cancel(running.run_id, "alice")
        assert (status.state, status.cancelled_by) == ("cancelled", "alice")
        await trio.testing.wait_all_tasks_blocked()
        assert seen == [("cancelled", running.run_id, 1.0)]
        third = await log.submit("work", {"n": 3})  # the slot was freed: done at t=6
        await trio.sleep(5.5)
        assert trio.current_time() == 6.5
        done = await log.cancel(third.run_id, "carol")
        assert (done.state, done.verdict, done.cancelled_by) == ("finished", "ok", None)
        again = await log.cancel(queued.run_id, "dave")
        assert again.cancelled_by == "bob"  # the true decision, not a new one
        events = await all_events(log)
        assert lifecycle(events, queued.run_id) == ["job_queued", "job_cancelled"]
        cancelled = [e.data for e in events if e.kind == "job_cancelled"]
        assert cancelled == [{"by": "bob", "was": "queued"}, {"by": "alice", "was": "running"}]
        with pytest.raises(UnknownRun):
            await log.cancel(99)


async def test_cancel_calls_the_external_executors_hook():
    async with open_event_log(operations=OPS) as log:
        r = await log.submit("preview", {"run_id": 1})
        scope = trio.CancelScope()
        log.start(r.run_id, on_cancel=scope.cancel)
        await log.cancel(r.run_id, "ui")
        assert scope.cancel_called
        with pytest.raises(AlreadyDecided):
            log.finish(r.run_id, "ok")

        def broken():
            raise RuntimeError("hook failed")

        r2 = await log.submit("preview", {"run_id": 2})
        log.start(r2.run_id, on_cancel=broken)
        assert (await log.cancel(r2.run_id)).state == "cancelled"  # contained
        last = (await all_events(log))[-1]
        assert last.data["on_cancel_error"] == "RuntimeError: hook failed"


# -- the log (design §6.8) ------------------------------------------------------------------


async def test_cursor_expired_below_floor_and_beyond_head():
    async with open_event_log(EventLogConfig(window=8), operations=OPS) as log:
        r = await log.submit("preview", {"run_id": 1})
        log.start(r.run_id)
        for i in range(20):
            log.progress(r.run_id, i / 20)
        head = log.head
        assert head == 23
        with pytest.raises(CursorExpired) as info:
            await log.watch(head + 1)
        assert info.value.code == "cursor_expired"
        assert info.value.details == {"resume_from": head, "resync": "snapshot"}
        with pytest.raises(CursorExpired) as info:
            await log.watch(3)
        # Below the floor no cursor is safe to follow while events flow: a snapshot is.
        assert info.value.details == {"resync": "snapshot", "floor": head - 7}
        result = await log.watch(head - 8)
        assert [e.seq for e in result.events] == list(range(head - 7, head + 1))
        assert (result.cursor, result.head) == (head, head)
        empty = await log.watch(head)
        assert (empty.events, empty.cursor) == ((), head)


async def test_no_gaps_across_window_eviction():
    async with open_event_log(EventLogConfig(window=16), operations=OPS) as log:
        r = await log.submit("preview", {"run_id": 1})
        log.start(r.run_id)
        cursor, seen = 0, []
        for burst in range(50):
            for i in range(burst % 13):
                log.progress(r.run_id, i / 13)
            while True:
                result = await log.watch(cursor, limit=5)
                seen.extend(e.seq for e in result.events)
                if result.cursor == cursor:
                    break
                cursor = result.cursor
        assert seen == list(range(1, log.head + 1))


async def test_runs_cancelled_while_queued_do_not_pile_up(autojump_clock):
    async def runner(run, report):
        await trio.sleep(1000)

    config = EventLogConfig(max_concurrency=1)
    async with open_event_log(config, operations=OPS, runners={"work": runner}) as log:
        await log.submit("work", {"n": -1})  # occupies the only slot
        for n in range(1000):
            receipt = await log.submit("work", {"n": n})
            await log.cancel(receipt.run_id)
        assert len(log._runs._drain._ready) <= 64 + 2
        last = await log.submit("work", {"n": "last"})
        await log.cancel(1)  # the slot frees: the next live run starts
        await trio.testing.wait_all_tasks_blocked()
        assert (await log.status(last.run_id)).state == "running"
