"""Built-in runners are bounded and their failures visible (design §6.6, §6.19).

In memory (no worker threads), so the autojump clock gives exact virtual times.
"""

from __future__ import annotations

import logging

import trio

from actors._eventlog._eventlog import open_event_log
from actors._eventlog._types import EventLogConfig, OperationSpec

OPS = [OperationSpec(name="job", fields={"n"})]


async def hung(run, report):
    report(0.1)
    await trio.sleep_forever()


async def test_a_hung_runner_is_cancelled_after_run_timeout(autojump_clock, caplog):
    caplog.set_level(logging.WARNING, logger="actors.eventlog")
    cfg = EventLogConfig(run_timeout=30, max_concurrency=1)
    finished: list[tuple[int | None, float]] = []

    def listen(event) -> None:
        if event.kind == "job_finished":
            finished.append((event.run_id, trio.current_time()))

    async with open_event_log(cfg, operations=OPS, runners={"job": hung}) as log:
        log.subscribe("clock", listener=listen)
        first = await log.submit("job", {"n": 1})
        second = await log.submit("job", {"n": 2})
        await trio.sleep(31)
        status = await log.status(first.run_id)
        assert (status.state, status.verdict) == ("finished", "NOT_RUN")
        assert status.error is not None
        assert (status.error["code"], status.error["category"]) == (
            "deadline_exceeded",
            "transient",
        )
        # Its max_concurrency slot went to the next run, which gets 30 s of its own.
        assert (await log.status(second.run_id)).state == "running"
        await trio.sleep(30)
    assert finished == [(1, 30.0), (2, 60.0)]
    timed_out = [r for r in caplog.records if hasattr(r, "run_timeout")]
    assert [(r.run_id, r.run_timeout) for r in timed_out] == [(1, 30.0), (2, 30.0)]


async def test_a_cancelled_runner_is_not_a_timeout(autojump_clock):
    async with open_event_log(EventLogConfig(run_timeout=30), operations=OPS,
                              runners={"job": hung}) as log:  # fmt: skip
        receipt = await log.submit("job", {"n": 1})
        await trio.sleep(1)
        await log.cancel(receipt.run_id, "ops")
        await trio.sleep(60)
        status = await log.status(receipt.run_id)
    assert (status.state, status.cancelled_by, status.error) == ("cancelled", "ops", None)


async def test_a_runner_that_raises_has_its_traceback_logged(autojump_clock, caplog):
    caplog.set_level(logging.WARNING, logger="actors.eventlog")

    async def broken(run, report):
        raise KeyError("missing input")

    async with open_event_log(operations=OPS, runners={"job": broken}) as log:
        receipt = await log.submit("job", {"n": 1})
        await trio.sleep(1)
        status = await log.status(receipt.run_id)
    assert status.error is not None
    assert (status.verdict, status.error["code"]) == ("NOT_RUN", "runner_failed")
    (record,) = [r for r in caplog.records if getattr(r, "operation", None) == "job"]
    assert record.levelno == logging.WARNING
    assert record.exc_info is not None
    assert record.exc_info[0] is KeyError
    assert record.run_id == receipt.run_id
