"""Refusals say when to retry (design §6.16).

A ``admission_full`` receipt (and a ``AdmissionFull`` error from ``resume``) carries
``retry_after``: the recent interval between runs leaving the pool, a moving average on
the trio clock, clamped to ``[retry_after_min, retry_after_max]``.
"""

from __future__ import annotations

import pytest
import trio

from actors._eventlog._eventlog import open_event_log
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import AdmissionFull
from protocol.codec import unstructure_message

OPS = [OperationSpec(name="job", fields={"n"}, mutating=True)]


async def refusal(log) -> float:
    receipt = await log.submit("job", {"n": -1})
    assert (receipt.admitted, receipt.code, receipt.retryable) == (False, "admission_full", True)
    assert unstructure_message(receipt)["retry_after"] == receipt.retry_after
    return receipt.retry_after


async def test_with_no_run_gone_yet_the_hint_is_the_longest() -> None:
    config = EventLogConfig(max_inflight=1, retry_after_max=7.5)
    async with open_event_log(config, operations=OPS) as log:
        admitted = await log.submit("job", {"n": 1})
        assert "retry_after" not in unstructure_message(admitted)
        assert await refusal(log) == 7.5


@pytest.mark.parametrize(("every", "hint"), [(0.5, 0.5), (2.0, 2.0), (0.001, 0.05), (60.0, 5.0)])
async def test_the_hint_follows_how_often_runs_leave(
    autojump_clock, every: float, hint: float
) -> None:
    async with open_event_log(EventLogConfig(max_inflight=2), operations=OPS) as log:
        for n in range(6):
            receipt = await log.submit("job", {"n": n})
            await trio.sleep(every)
            log.finish(receipt.run_id, "ok")
        await log.submit("job", {"n": 100})
        await log.submit("job", {"n": 101})
        assert await refusal(log) == hint


async def test_the_hint_moves_towards_the_newest_interval(autojump_clock) -> None:
    async with open_event_log(EventLogConfig(max_inflight=2), operations=OPS) as log:
        for every in (1.0, 1.0, 3.0):
            receipt = await log.submit("job", {"n": every})
            await trio.sleep(every)
            log.finish(receipt.run_id, "ok")
        await log.submit("job", {"n": 100})
        await log.submit("job", {"n": 101})
        # intervals between frees 1.0 then 3.0: 1.0 + 0.2 * (3.0 - 1.0)
        assert await refusal(log) == 1.4


async def test_a_refused_resume_carries_the_hint_too(tmp_path) -> None:
    path = tmp_path / "ledger.db"
    async with open_event_log(EventLogConfig(ledger_path=path), operations=OPS) as log:
        for n in range(2):
            await log.submit("job", {"n": n})
    config = EventLogConfig(ledger_path=path, max_inflight=1)
    async with open_event_log(config, operations=OPS) as log:
        await log.resume(1)
        with pytest.raises(AdmissionFull) as info:
            await log.resume(2)
        assert info.value.details == {"depth": 1, "bound": 1, "retry_after": 5.0}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"retry_after_min": 2.0, "retry_after_max": 1.0}, "retry_after_max must be >="),
        ({"ledger_retry_min": 0.5, "ledger_retry_max": 0.1}, "ledger_retry_max must be >="),
        ({"retry_after_min": 0}, "retry_after_min must be > 0"),
    ],
)
def test_the_bounds_are_checked(fields: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EventLogConfig(**fields)  # type: ignore[arg-type]
