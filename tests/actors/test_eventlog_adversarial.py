"""Adversarial tests of the event log and its ports (design §6.3-§6.9), in memory.

Concurrent identical submits, coalescing against mutating operations, admission
episodes under churn, cancel racing start/finish, cursors at every edge, slow and
failing subscribers, re-entrant listeners, and runners that fail in awkward ways.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from actors._eventlog._eventlog import open_event_log
from actors._eventlog._ports import ResyncRequired
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import (
    AlreadyDecided,
    CursorExpired,
    InvalidCommand,
    RequestConflict,
)

OPS = [
    OperationSpec(name="read", fields={"k", "blob"}),
    OperationSpec(name="write", fields={"k"}, mutating=True),
]


async def everything(log: Any) -> list[Any]:
    return list((await log.watch(0, limit=1_000_000)).events)


def kinds(events: list[Any], run_id: int | None = None) -> list[str]:
    return [e.kind for e in events if run_id is None or e.run_id == run_id]


# -- idempotency and coalescing (design §6.3, §6.4) ------------------------------------------


async def test_concurrent_identical_submits_with_one_request_id_make_one_run() -> None:
    async with open_event_log(operations=OPS) as log:
        receipts: list[Any] = []
        conflicts: list[str] = []

        async def submit(k: int) -> None:
            try:
                receipts.append(await log.submit("read", {"k": k}, request_id="same"))
            except RequestConflict as exc:
                conflicts.append(exc.code)

        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(submit, 1)
            nursery.start_soon(submit, 2)  # same id, other content
        # trio starts the tasks in no fixed order: whichever content came first owns
        # the id; every other content conflicts, every equal one replays the receipt
        assert (len(receipts), len(conflicts)) in ((20, 1), (1, 20))
        assert set(conflicts) == {"request_conflict"}
        assert all(r == receipts[0] for r in receipts)
        assert kinds(await everything(log)) == ["job_queued"]


async def test_coalescing_joins_reads_but_never_writes() -> None:
    async with open_event_log(operations=OPS) as log:
        a = await log.submit("read", {"k": 1})
        b = await log.submit("read", {"k": 1})
        assert (b.run_id, b.coalesced) == (a.run_id, True)
        # argument order and spelling of equal JSON do not matter
        c = await log.submit("read", {"blob": {"y": 1, "x": [1.0, 2]}, "k": 1})
        d = await log.submit("read", {"k": 1, "blob": {"x": [1.0, 2], "y": 1}})
        assert d.run_id == c.run_id != a.run_id
        w1 = await log.submit("write", {"k": 1})
        w2 = await log.submit("write", {"k": 1})
        assert w1.run_id != w2.run_id
        assert not w2.coalesced
        # once the read is decided, an equal one runs fresh
        log.finish(a.run_id, "ok")
        e = await log.submit("read", {"k": 1})
        assert e.run_id not in (a.run_id, c.run_id)
        assert not e.coalesced
        # a bumped revision does not join the old in-flight run either
        log.apply_edit()
        f = await log.submit("read", {"k": 1})
        assert f.run_id != e.run_id
        assert f.revision == 1


async def test_coalesced_request_replays_its_own_receipt() -> None:
    async with open_event_log(operations=OPS) as log:
        first = await log.submit("read", {"k": 1}, request_id="a")
        joined = await log.submit("read", {"k": 1}, request_id="b")
        log.finish(first.run_id, "ok")
        # after the run is decided, replaying "b" still gives its stored receipt
        again = await log.submit("read", {"k": 1}, request_id="b")
        assert again == joined
        assert again.coalesced


# -- admission (design §6.5) -----------------------------------------------------------------


async def test_admission_paused_and_resumed_once_per_episode_under_churn() -> None:
    rng = random.Random(1234)
    async with open_event_log(EventLogConfig(max_inflight=3), operations=OPS) as log:
        live: list[int] = []
        refusals = 0
        for step in range(400):
            action = rng.random()
            if action < 0.55:
                receipt = await log.submit("write", {"k": step})
                if receipt.admitted:
                    live.append(receipt.run_id)
                else:
                    refusals += 1
                    assert (receipt.code, receipt.retryable) == ("admission_full", True)
                    assert (receipt.depth, receipt.bound) == (3, 3)
            elif live:
                run_id = live.pop(rng.randrange(len(live)))
                choice = rng.random()
                if choice < 0.4:
                    await log.cancel(run_id, "churn")
                elif choice < 0.7:
                    log.start(run_id)
                    log.finish(run_id, "ok")
                else:
                    log.finish(run_id, "failed")
                # deciding twice is refused, and changes nothing
                with pytest.raises(AlreadyDecided):
                    log.finish(run_id, "ok")
        events = await everything(log)
        flags = [e.kind for e in events if e.kind.startswith("admission_")]
        assert refusals > 10
        assert flags, "the bound was never hit"
        # strictly alternating, starting with a pause: one pair per episode
        assert flags == ["admission_paused", "admission_resumed"] * (len(flags) // 2) + (
            ["admission_paused"] if len(flags) % 2 else []
        )
        # every pause comes right at a refusal: depth == bound; every resume below it
        for event in events:
            if event.kind == "admission_paused":
                assert event.data == {"depth": 3, "bound": 3}
            if event.kind == "admission_resumed":
                assert event.data["depth"] < 3
        assert log.statistics().paused == (len(flags) % 2 == 1)


async def test_status_cancel_and_watch_work_while_saturated() -> None:
    async with open_event_log(EventLogConfig(max_inflight=1), operations=OPS) as log:
        first = await log.submit("write", {"k": 1})
        refused = await log.submit("write", {"k": 2})
        assert not refused.admitted
        assert (await log.status(first.run_id)).state == "queued"
        assert (await log.watch(0)).cursor == 2
        assert (await log.cancel(first.run_id, "me")).state == "cancelled"
        assert (await log.submit("write", {"k": 3})).admitted


# -- truthful cancel (design §6.7) and already_decided (§6.6) --------------------------------


async def test_cancel_racing_start_and_finish_always_reports_the_true_state() -> None:
    async with open_event_log(operations=OPS) as log:
        queued = (await log.submit("write", {"k": 1})).run_id
        running = (await log.submit("write", {"k": 2})).run_id
        finished = (await log.submit("write", {"k": 3})).run_id
        log.start(running)
        log.start(finished)
        log.finish(finished, "empty", {"rows": 0})
        assert (await log.cancel(queued, "a")).state == "cancelled"
        status = await log.cancel(running, "b")
        assert (status.state, status.cancelled_by) == ("cancelled", "b")
        done = await log.cancel(finished, "c")
        assert (done.state, done.verdict, done.cancelled_by) == ("finished", "empty", None)
        # the executor finishing after the cancel is refused; cancel again is truthful
        with pytest.raises(AlreadyDecided):
            log.finish(running, "ok")
        with pytest.raises(AlreadyDecided):
            log.start(queued)
        with pytest.raises(AlreadyDecided):
            log.progress(running, 0.5)
        with pytest.raises(AlreadyDecided):
            log.progress(finished, 1.0)
        again = await log.cancel(running, "z")
        assert (again.state, again.cancelled_by) == ("cancelled", "b")
        events = await everything(log)
        assert kinds(events, queued) == ["job_queued", "job_cancelled"]
        assert kinds(events, running) == [
            "job_queued",
            "job_started",
            "job_progress",
            "job_cancelled",
        ]
        assert kinds(events, finished)[-1] == "job_finished"
        assert [e for e in events if e.kind == "job_cancelled"][1].data == {
            "by": "b",
            "was": "running",
        }


async def test_cancel_from_inside_the_builtin_runner_and_progress_after_it() -> None:
    outcome: list[str] = []

    async def runner(status: Any, report: Any) -> Any:
        report(0.5)
        with trio.CancelScope(shield=True):
            await log.cancel(status.run_id, "self")  # decided at once; scope cancelled
        try:
            report(0.9)  # no checkpoint since the cancel: the run is already decided
        except AlreadyDecided as exc:
            outcome.append(exc.code)
        await trio.lowlevel.checkpoint()
        outcome.append("not reached")

    async with open_event_log(operations=OPS, runners={"read": runner}) as log:
        run_id = (await log.submit("read", {"k": 1})).run_id
        await trio.testing.wait_all_tasks_blocked()
        assert (await log.status(run_id)).state == "cancelled"
        assert outcome == ["already_decided"]
        events = await everything(log)
        assert kinds(events, run_id) == [
            "job_queued",
            "job_started",
            "job_progress",
            "job_progress",
            "job_cancelled",
        ]


# -- runners that fail awkwardly (design §6.6: the drain goes on) --------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("behaviour", "verdict", "code"),
    [
        ("raise", "NOT_RUN", "runner_failed"),
        ("unprintable", "NOT_RUN", "runner_failed"),
        ("nan", "NOT_RUN", "invalid_command"),
        ("set", "NOT_RUN", "invalid_command"),
        ("deep", "NOT_RUN", "invalid_command"),
        ("huge", "NOT_RUN", "invalid_command"),
        ("ok", "ok", None),
    ],
)
async def test_runner_failures_become_failed_completions_and_the_drain_goes_on(
    behaviour: str, verdict: str, code: str | None
) -> None:
    async def runner(status: Any, report: Any) -> Any:
        await trio.lowlevel.checkpoint()
        if status.arguments["k"] == 0:
            return "fine"
        if behaviour == "raise":
            raise KeyError("x")
        if behaviour == "unprintable":
            raise Unprintable
        if behaviour == "nan":
            return {"v": float("nan")}
        if behaviour == "set":
            return {1, 2}
        if behaviour == "deep":
            return nested(100_000)
        if behaviour == "huge":
            return "x" * (1 << 20)
        return {"v": 1}

    async with open_event_log(operations=OPS, runners={"read": runner}) as log:
        bad = (await log.submit("read", {"k": 1})).run_id
        good = (await log.submit("read", {"k": 0})).run_id
        await trio.testing.wait_all_tasks_blocked()
        status = await log.status(bad)
        assert (status.state, status.verdict) == ("finished", verdict)
        assert (status.error or {}).get("code") == code
        assert (await log.status(good)).verdict == "ok"
        # and the drain still takes new work
        later = (await log.submit("read", {"k": 0, "blob": 1})).run_id
        await trio.testing.wait_all_tasks_blocked()
        assert (await log.status(later)).verdict == "ok"


@pytest.mark.parametrize("depth", [50, 5000, 100_000])
async def test_deeply_nested_arguments_are_refused_or_accepted_cleanly(depth: int) -> None:
    async with open_event_log(operations=OPS) as log:
        error: InvalidCommand | None = None
        try:
            receipt = await log.submit("read", {"blob": nested(depth)})
        except InvalidCommand as exc:
            error = exc
        if error is None:
            assert (await log.status(receipt.run_id)).arguments["blob"] == nested(depth)
        else:
            assert error.details["fields"] == ["arguments"]


# -- cursors (design §6.8) --------------------------------------------------------------------


async def test_watch_cursors_at_every_edge() -> None:
    async with open_event_log(EventLogConfig(window=4), operations=OPS) as log:
        for k in range(10):
            await log.submit("write", {"k": k})
        stats = log.statistics()
        head, floor = stats.head, stats.floor
        assert (head, floor) == (10, 7)
        result = await log.watch(floor - 1)
        assert [e.seq for e in result.events] == [7, 8, 9, 10]
        assert (result.cursor, result.head) == (10, 10)
        assert [e.seq for e in (await log.watch(floor)).events] == [8, 9, 10]
        at_head = await log.watch(head)
        assert (at_head.events, at_head.cursor) == ((), head)
        below = {"resync": "snapshot", "floor": floor}
        beyond = {"resync": "snapshot", "resume_from": head}
        for cursor, details in ((floor - 2, below), (0, below), (head + 1, beyond)):
            with pytest.raises(CursorExpired) as info:
                await log.watch(cursor)
            assert info.value.details == details
        for bad in (-1, True, False, 1.0, "3", None, 2**70 * -1):
            with pytest.raises(InvalidCommand):
                await log.watch(bad)  # type: ignore[arg-type]
        with pytest.raises(CursorExpired):
            await log.watch(2**70)
        for bad_limit in (0, -1, True, 1.5):
            with pytest.raises(InvalidCommand):
                await log.watch(head, limit=bad_limit)  # type: ignore[arg-type]
        limited = await log.watch(floor - 1, limit=2)
        assert [e.seq for e in limited.events] == [7, 8]
        assert limited.cursor == 8  # resume exactly after what was returned: no gap


# -- subscribers (design §6.9) ------------------------------------------------------------------


async def test_slow_subscriber_never_slows_the_fast_one_or_the_writer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_event_log(EventLogConfig(subscriber_bound=8), operations=OPS) as log:
        slow = log.subscribe("slow")
        fast = log.subscribe("fast", bound=10_000)
        got_fast: list[int] = []
        got_slow: list[Any] = []

        async def read_fast() -> None:
            async for item in fast:
                got_fast.append(item.seq)
                if len(got_fast) == 1000:
                    return

        async def read_slow() -> None:
            async for item in slow:
                got_slow.append(item)
                await trio.sleep(1)
                if isinstance(item, ResyncRequired):
                    return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_fast)
            nursery.start_soon(read_slow)
            for k in range(1000):
                log.apply_edit()  # one event each, synchronously: the writer never waits
                if k % 100 == 0:
                    await trio.lowlevel.checkpoint()
            assert trio.current_time() == 0
        assert got_fast == list(range(1, 1001))
        assert isinstance(got_slow[-1], ResyncRequired)
        stats = {s.name: s for s in log.statistics().ports}
        assert stats["slow"].resync_required
        assert stats["slow"].peak <= 8
        assert stats["fast"].dropped == 0


async def test_a_raising_listener_is_contained_even_if_its_error_cannot_be_printed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="actors.eventlog")
    async with open_event_log(operations=OPS) as log:
        seen: list[int] = []

        def bad(event: Any) -> None:
            raise Unprintable

        def good(event: Any) -> None:
            seen.append(event.seq)

        log.subscribe("bad", listener=bad)
        log.subscribe("good", listener=good)
        await log.submit("write", {"k": 1})
        await log.submit("write", {"k": 2})
        stats = {s.name: s for s in log.statistics().ports}
        assert not stats["bad"].enabled
        assert stats["bad"].error is not None
        assert stats["bad"].error["code"] == "listener_failed"
        assert seen == [1, 2]
    # Said once, with its traceback: the port is disabled after the first failure.
    (record,) = [r for r in caplog.records if getattr(r, "port", None) == "bad"]
    assert (record.levelno, record.code, record.seq) == (logging.WARNING, "listener_failed", 1)
    assert record.exc_info is not None


async def test_a_listener_that_emits_events_does_not_reorder_other_ports() -> None:
    # A listener may react synchronously, e.g. start a run when it is queued, which
    # emits more events while the first one is still being fanned out.
    async with open_event_log(operations=OPS) as log:

        def starter(event: Any) -> None:
            if event.kind == "job_queued":
                log.start(event.run_id)

        log.subscribe("starter", listener=starter)
        later = log.subscribe("later")
        await log.submit("write", {"k": 1})
        received = [later.receive_nowait().seq for _ in range(3)]
        assert received == [1, 2, 3]  # job_queued, job_started, job_progress in order
        assert (await log.status(1)).state == "running"


async def test_resync_and_ack_edges() -> None:
    async with open_event_log(EventLogConfig(window=16), operations=OPS) as log:
        port = log.subscribe("p", bound=2)
        for _k in range(3):
            log.apply_edit()
        notice = port.receive_nowait()
        assert isinstance(notice, ResyncRequired)
        assert notice.head == 3
        with pytest.raises(trio.WouldBlock):
            port.receive_nowait()  # nothing until resync: never a silent gap
        log.apply_edit()
        with pytest.raises(trio.WouldBlock):
            port.receive_nowait()
        with pytest.raises(CursorExpired):
            port.resync(99)
        assert port.statistics().resync_required
        port.resync(3)
        assert port.receive_nowait().seq == 4
        for bad in (-1, True, 1.5):
            with pytest.raises(ValueError, match="seq"):
                port.ack(bad)  # type: ignore[arg-type]
        log.apply_edit()
        log.apply_edit()
        port.ack(5)
        assert port.receive_nowait().seq == 6
        port.ack(1)  # going back is ignored
        assert port.statistics().acked == 5


async def test_check_drift_with_non_json_values_is_an_invalid_command() -> None:
    # It used to raise a bare TypeError, which crashes the event-log actor's handler.
    async with open_event_log(operations=OPS) as log:
        run_id = (await log.submit("read", {"k": 1})).run_id
        for current in ({"arguments": {1, 2}}, {"revision": float("nan")}):
            with pytest.raises(InvalidCommand) as info:
                await log.check_drift(run_id, current)
            assert info.value.details["fields"] == ["current"]
        drift = await log.check_drift(run_id, {"arguments": {"k": 2}, "revision": 0})
        assert drift.changed == ("arguments",)
