"""Coalesced requests are waiters of their run (design §6.14).

Each request joined to a run keeps its own status. Cancelling one detaches that waiter
(its status: cancelled by its actor) and the run goes on for the others; the run is
cancelled when its last waiter leaves. Success and failure reach every waiter still
waiting, truthfully.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors._eventlog import EventLogActor, EventLogClient
from actors._eventlog._eventlog import open_event_log
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import InvalidCommand

OPS = [OperationSpec(name="render", fields={"n"})]
ACTORS = ("alice", "bob", "carol")


async def join_three(log) -> int:
    """Three actors submit the same request: one run, three waiters."""
    receipts = [
        await log.submit("render", {"n": 1}, request_id=f"r-{actor}", actor=actor)
        for actor in ACTORS
    ]
    assert [r.coalesced for r in receipts] == [False, True, True]
    assert len({r.run_id for r in receipts}) == 1
    return receipts[0].run_id


async def kinds_of(log, run_id: int) -> list[tuple[str, dict]]:
    events = (await log.watch(0, limit=1000)).events
    return [(e.kind, e.data) for e in events if e.run_id == run_id]


@pytest.mark.parametrize("leaving", ACTORS)
async def test_one_waiter_leaves_and_the_run_finishes_for_the_others(leaving: str) -> None:
    async with open_event_log(operations=OPS) as log:
        run_id = await join_three(log)
        log.start(run_id)
        left = await log.cancel(run_id, leaving)
        assert (left.state, left.cancelled_by, left.request_id) == (
            "cancelled",
            leaving,
            f"r-{leaving}",
        )
        status = await log.status(run_id)
        assert (status.state, status.waiters) == ("running", 2)
        log.finish(run_id, "ok", {"png": 3})
        for actor in ACTORS:
            view = await log.status(run_id, request_id=f"r-{actor}")
            if actor == leaving:
                assert (view.state, view.cancelled_by, view.result) == ("cancelled", leaving, None)
            else:
                assert (view.state, view.verdict, view.result) == ("finished", "ok", {"png": 3})
        kinds = [kind for kind, _ in await kinds_of(log, run_id)]
        assert kinds.count("request_detached") == 1
        assert "job_cancelled" not in kinds


async def test_the_run_is_cancelled_when_its_last_waiter_leaves() -> None:
    async with open_event_log(operations=OPS) as log:
        run_id = await join_three(log)
        for actor in ACTORS[:2]:
            assert (await log.cancel(run_id, actor)).state == "cancelled"
            assert (await log.status(run_id)).state == "queued"
        last = await log.cancel(run_id, "carol")
        assert (last.state, last.cancelled_by, last.waiters) == ("cancelled", "carol", 1)
        views = [await log.status(run_id, request_id=f"r-{a}") for a in ACTORS]
        assert [(v.state, v.cancelled_by) for v in views] == [
            ("cancelled", "alice"),
            ("cancelled", "bob"),
            ("cancelled", "carol"),
        ]
        events = await kinds_of(log, run_id)
        assert events[1:] == [
            ("request_detached", {"request_id": "r-alice", "by": "alice", "waiters": 2}),
            ("request_detached", {"request_id": "r-bob", "by": "bob", "waiters": 1}),
            ("job_cancelled", {"by": "carol", "was": "queued"}),
        ]
        # A later equal request starts a fresh run: the cancelled one is not joined.
        again = await log.submit("render", {"n": 1}, request_id="r-dave", actor="dave")
        assert (again.coalesced, again.run_id) == (False, run_id + 1)


async def test_a_running_runner_goes_on_until_its_last_waiter_leaves(autojump_clock) -> None:
    started, cancelled = trio.Event(), trio.Event()

    async def runner(run, report):
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    async with open_event_log(operations=OPS, runners={"render": runner}) as log:
        run_id = await join_three(log)
        await started.wait()
        await log.cancel(run_id, "alice")
        await log.cancel(run_id, "bob")
        await trio.testing.wait_all_tasks_blocked()
        assert not cancelled.is_set()
        assert (await log.status(run_id)).state == "running"
        await log.cancel(run_id, "carol")
        await cancelled.wait()
        assert (await log.status(run_id)).cancelled_by == "carol"


async def test_failure_reaches_every_waiter_still_waiting() -> None:
    release = trio.Event()

    async def runner(run, report):
        await release.wait()
        raise RuntimeError("the renderer broke")

    async with open_event_log(operations=OPS, runners={"render": runner}) as log:
        run_id = await join_three(log)
        await log.cancel(run_id, "bob")
        release.set()
        with trio.fail_after(5):
            while not (await log.status(run_id)).terminal:
                await trio.testing.wait_all_tasks_blocked()
        alice, bob, carol = [await log.status(run_id, request_id=f"r-{a}") for a in ACTORS]
        for view in (alice, carol):
            assert (view.state, view.verdict) == ("finished", "NOT_RUN")
            assert view.error is not None
            assert view.error["code"] == "runner_failed"
        assert (bob.state, bob.cancelled_by, bob.error) == ("cancelled", "bob", None)


async def test_cancel_names_one_request_or_comes_from_outside() -> None:
    async with open_event_log(operations=OPS) as log:
        run_id = await join_three(log)
        view = await log.cancel(run_id, "ops", request_id="r-bob")
        assert (view.request_id, view.state, view.cancelled_by) == ("r-bob", "cancelled", "ops")
        again = await log.cancel(run_id, "ops", request_id="r-bob")  # already left: as it is
        assert (again.state, again.cancelled_by) == ("cancelled", "ops")
        with pytest.raises(InvalidCommand) as info:
            await log.cancel(run_id, "ops", request_id="r-nobody")
        assert info.value.details == {"fields": ["request_id"]}
        with pytest.raises(InvalidCommand):
            await log.status(run_id, request_id="r-nobody")
        # An actor that submitted none of them cancels the run for everyone left.
        everyone = await log.cancel(run_id, "ops")
        assert (everyone.state, everyone.cancelled_by) == ("cancelled", "ops")
        assert (await log.status(run_id, request_id="r-alice")).state == "cancelled"


async def test_waiters_survive_a_restart(ledger_at: str) -> None:
    config = EventLogConfig(ledger_path=ledger_at, synchronous="NORMAL")
    async with open_event_log(config, operations=OPS) as log:
        run_id = await join_three(log)
        await log.cancel(run_id, "alice")
    async with open_event_log(config, operations=OPS) as log:
        held = await log.status(run_id)
        assert (held.state, held.waiters) == ("held", 2)
        left = await log.status(run_id, request_id="r-alice")
        assert (left.state, left.cancelled_by) == ("cancelled", "alice")
        assert (await log.cancel(run_id, "bob")).state == "cancelled"
        assert (await log.status(run_id)).state == "held"  # carol still waits
        assert (await log.cancel(run_id, "carol")).state == "cancelled"
        assert (await log.status(run_id)).cancelled_by == "carol"
    async with open_event_log(config, operations=OPS) as log:
        views = [await log.status(run_id, request_id=f"r-{a}") for a in ACTORS]
        assert [v.cancelled_by for v in views] == list(ACTORS)


async def test_through_the_actor(nursery) -> None:
    actor = EventLogActor(operations=OPS)
    log = EventLogClient(await nursery.start(actor.run), timeout=5)
    run_id = await join_three(log)
    view = await log.cancel(run_id, "bob")
    assert (view.request_id, view.state) == ("r-bob", "cancelled")
    assert (await log.status(run_id, request_id="r-carol")).state == "queued"
    assert (await log.cancel(run_id, "x", request_id="r-alice")).cancelled_by == "x"
    assert (await log.status(run_id)).waiters == 1
