"""The event-log actor never hangs on a stalled disk, and one bad request never takes it
down (design §6.19): every request that waits is bounded by ``request_timeout``, the
mailbox by ``writable_timeout``, a full set of waiting requests refuses instead of
blocking, and an unexpected error fails only its own request.

A stalled disk holds commits in their worker thread (:mod:`ledger_support`); the
virtual clock is then moved by hand, so each deadline is checked exactly.
"""

from __future__ import annotations

import logging

import pytest
import trio
from ledger_support import StalledDisk, at, ledger_of
from trio.testing import wait_all_tasks_blocked

from actors import ActorState
from actors._core import Reply
from actors._eventlog import EventLogActor, EventLogClient, QueryFinished, Status, Subscribe
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import ActorCrashed, LedgerUnavailable, MailboxFull

OPS = [OperationSpec(name="job", fields={"n"})]


def config(tmp_path, **kwargs: object) -> EventLogConfig:
    return EventLogConfig(
        ledger_path=tmp_path / "ledger.db",
        synchronous="NORMAL",
        commit_stall_timeout=60,
        **kwargs,  # type: ignore[arg-type]
    )


def gone() -> Reply:
    """The reply of an ask whose asker already left (timed out)."""
    reply = Reply(1)
    reply._abandon()
    return reply


async def test_an_unexpected_error_fails_only_its_request(nursery, autojump_clock, caplog):
    caplog.set_level(logging.ERROR, logger="actors.eventlog")
    actor = EventLogActor(operations=OPS)
    client = EventLogClient(await nursery.start(actor.run), timeout=5)

    async def broken(run_id: int, current: object) -> None:
        raise RuntimeError("a bug in a drift check")

    actor.log.check_drift = broken  # type: ignore[method-assign]
    with pytest.raises(ActorCrashed, match="a bug in a drift check") as info:
        await client.check_drift(1)
    assert info.value.details["error_type"] == "RuntimeError"
    assert actor.state is ActorState.RUNNING
    assert (await client.submit("job", {"n": 1})).run_id == 1  # the log goes on
    (record,) = [r for r in caplog.records if getattr(r, "request", None)]
    assert record.exc_info is not None
    assert record.request.endswith("broken")
    assert record.error_type == "RuntimeError"


async def test_a_request_waiting_on_a_stalled_commit_gives_up_after_request_timeout(
    tmp_path, nursery, mock_clock
):
    actor = EventLogActor(config(tmp_path, request_timeout=2.0), operations=OPS)
    client = EventLogClient(await nursery.start(actor.run), timeout=10)
    first = await client.submit("job", {"n": 1})
    disk = StalledDisk(ledger_of(actor.log))
    answers: list[object] = []

    async def start() -> None:
        try:
            answers.append(await client.start(first.run_id))
        except LedgerUnavailable as exc:
            answers.append((trio.current_time(), exc.details))

    try:
        nursery.start_soon(start)
        await disk.stalled()  # the running state is being committed
        await at(mock_clock, 1.9)
        assert answers == []
        await client.progress(first.run_id, 0.5)  # the mailbox is not held meanwhile
        await at(mock_clock, 0.1)
        assert answers == [(2.0, {"cause": "request_timeout", "retry_after": 5.0})]
        # The decision stands: the run is running, durable once the disk is back.
        assert (await client.status(first.run_id)).state == "running"
    finally:
        disk.release.set()
    await disk.finished()


async def test_a_finished_runs_query_is_bounded_by_request_timeout(tmp_path, nursery, mock_clock):
    # finished_runs (design §6.18) is a request that waits, like status (§6.19).
    cfg = config(tmp_path, request_timeout=2.0, ledger_read_timeout=10.0)
    actor = EventLogActor(cfg, operations=OPS)
    client = EventLogClient(await nursery.start(actor.run), timeout=10)
    await client.submit("job", {"n": 1})
    disk = StalledDisk(ledger_of(actor.log))
    answers: list[object] = []

    async def page() -> None:
        try:
            answers.append(await client.finished_runs())
        except LedgerUnavailable as exc:
            answers.append((trio.current_time(), exc.details))

    try:
        actor.log.admit("job", {"n": 2})
        await disk.stalled()
        nursery.start_soon(page)
        await at(mock_clock, 1.9)
        assert answers == []
        await at(mock_clock, 0.1)
        assert answers == [(2.0, {"cause": "request_timeout", "retry_after": 5.0})]
    finally:
        disk.release.set()
    await disk.finished()
    assert (await client.finished_runs()).runs == ()  # nothing decided yet; it answers


class SmallLog(EventLogActor):
    max_pending = 1


async def test_a_full_set_of_waiting_requests_refuses_instead_of_blocking(
    tmp_path, nursery, mock_clock
):
    actor = SmallLog(config(tmp_path), operations=OPS)
    client = EventLogClient(await nursery.start(actor.run), timeout=10)
    first = await client.submit("job", {"n": 1}, request_id="r1")
    disk = StalledDisk(ledger_of(actor.log))
    second = trio.Event()

    async def submit_second() -> None:
        await client.submit("job", {"n": 2}, request_id="r2")  # waits for its commit
        second.set()

    try:
        nursery.start_soon(submit_second)
        await disk.stalled()
        await wait_all_tasks_blocked()
        with pytest.raises(MailboxFull) as info:
            await client.submit("job", {"n": 3}, request_id="r3")
        assert info.value.details == {"pending": 1, "retry_after": 5.0}
        await client.progress(first.run_id, 0.5)  # never held up behind them
        assert trio.current_time() == 0.0
    finally:
        disk.release.set()
    await second.wait()  # its slot is free again
    third = await client.submit("job", {"n": 3}, request_id="r3")
    assert third.run_id == 3  # the refused request had decided nothing


async def test_a_submit_waits_for_a_backlogged_ledger_only_writable_timeout(
    tmp_path, nursery, mock_clock
):
    cfg = config(tmp_path, max_pending_rows=1, writable_timeout=1.0)
    actor = EventLogActor(cfg, operations=OPS)
    client = EventLogClient(await nursery.start(actor.run), timeout=10)
    first = await client.submit("job", {"n": 1})
    disk = StalledDisk(ledger_of(actor.log))
    answers: list[object] = []

    async def submit() -> None:
        answers.append(await client.submit("job", {"n": 3}, request_id="r3"))

    try:
        actor.log.admit("job", {"n": 2})  # its commit stalls ...
        await disk.stalled()
        actor.log.apply_edit()  # ... while rows pile up past max_pending_rows
        actor.log.apply_edit()
        assert not actor.log.writable
        nursery.start_soon(submit)
        await at(mock_clock, 0.9)
        assert answers == []  # back-pressure: the mailbox waits ...
        await at(mock_clock, 0.1)
        (receipt,) = answers  # ... for writable_timeout, then refuses
        assert (receipt.admitted, receipt.code, receipt.retry_after) == (
            False,
            "admission_full",
            1.0,
        )
        assert (receipt.request_id, receipt.run_id, receipt.depth) == ("r3", None, 2)
        assert actor.log.statistics().queued == 2  # nothing was decided
        assert first.run_id == 1
    finally:
        disk.release.set()
    await disk.finished()


async def test_work_for_an_asker_who_left_is_skipped(nursery, autojump_clock):
    actor = EventLogActor(operations=OPS)
    await nursery.start(actor.run)
    reads = []

    async def status(run_id: int, request_id: str | None = None) -> None:
        reads.append(run_id)

    async def finished_runs(**query: object) -> None:
        reads.append(query)

    actor.log.status = status  # type: ignore[method-assign]
    actor.log.finished_runs = finished_runs  # type: ignore[method-assign]
    await actor.handle(Status(run_id=1), gone())
    await actor.handle(QueryFinished(), gone())
    await actor.handle(Subscribe(name="orphan"), gone())
    await wait_all_tasks_blocked()
    assert reads == []  # a read nobody waits for is not made
    assert actor.log.statistics().ports == ()  # nor a port nobody holds
    assert actor._pending.value == actor.max_pending
