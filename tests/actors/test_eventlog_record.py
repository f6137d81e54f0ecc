"""Log-wide events of the runtime's other parts: ``EventLog.record`` (design §6.8, §3.10)."""

from __future__ import annotations

import math

import pytest

from actors import ActorStopped, EventLogConfig, open_event_log


async def test_a_recorded_event_takes_the_next_seq_and_reaches_watchers(ledger_at):
    async with open_event_log(EventLogConfig(ledger_path=ledger_at)) as log:
        before = log.head
        seq = log.record("helper_spawned", {"helper": 0, "pid": 123})
        assert seq == before + 1
        result = await log.watch(before)
        assert [(e.seq, e.kind, e.run_id, e.data) for e in result.events] == [
            (seq, "helper_spawned", None, {"helper": 0, "pid": 123})
        ]
    async with open_event_log(
        EventLogConfig(ledger_path=ledger_at)
    ) as log:  # durable like any other
        assert [e.kind for e in (await log.watch(0)).events] == ["helper_spawned"]


@pytest.mark.parametrize(
    "kind",
    ["", "Helper", "helper-spawned", "x" * 65, "héllo", "job_finished", "admission_paused",
     "request_detached", "revision_bumped", 7, "x_", "_x", "a__b"],
)  # fmt: skip
async def test_a_malformed_or_reserved_kind_is_refused(kind):
    async with open_event_log() as log:
        with pytest.raises(ValueError, match="kind"):
            log.record(kind, {})
        assert log.head == 0


@pytest.mark.parametrize("data", [{"x": math.nan}, {"x": object()}, [("a", 1, 2)]])
async def test_data_that_is_not_json_is_refused_and_appends_nothing(data):
    async with open_event_log() as log:
        with pytest.raises(ValueError, match="data"):
            log.record("helper_reaped", data)
        assert log.head == 0


async def test_recording_into_a_closed_log_is_actor_stopped():
    async with open_event_log() as log:
        pass
    with pytest.raises(ActorStopped):
        log.record("helper_reaped", {})
