"""Resuming after a crash is one call: ``recover(decide)`` (design §6.17).

Each test runs the event-log actor on a real ledger (SQLite in ``tmp_path``, and
PostgreSQL), stops it with runs unfinished (one of them running: the stop interrupts
it), starts a new one on the same ledger, and decides the survivors through
:meth:`EventLogClient.recover`. The clock is trio's real one: the ledger works in a
worker thread, which an autojump clock would take for idleness and jump past the asks'
deadlines; nothing here waits on time.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
import trio

from actors import (
    Decision,
    EventLogActor,
    EventLogClient,
    EventLogConfig,
    OperationSpec,
    Survivor,
)
from actors.errors import ActorStopped, InvalidCommand

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

OPS = [OperationSpec(name="job", fields={"n"})]


def cfg(path: Path, **kwargs: int) -> EventLogConfig:
    return EventLogConfig(ledger_path=path, synchronous="NORMAL", **kwargs)


@asynccontextmanager
async def client(config: EventLogConfig) -> AsyncIterator[EventLogClient]:
    """The event-log actor on ``config`` and its client, stopped (ledger closed) at exit."""
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(EventLogActor(config, operations=OPS).run)
        try:
            yield EventLogClient(ref, timeout=5)
        finally:
            await ref.stop(grace=5)


async def crash_with_three_survivors(config: EventLogConfig) -> None:
    """Runs 1 (running when stopped) and 2 at revision 0; run 3 at revision 1."""
    async with client(config) as log:
        for n in (1, 2):
            await log.submit("job", {"n": n})
        await log.apply_edit()
        await log.submit("job", {"n": 3})
        assert (await log.start(1)).state == "running"


async def test_one_call_resumes_one_survivor_discards_another_and_keeps_the_third(
    ledger_at: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = cfg(ledger_at)
    await crash_with_three_survivors(config)
    seen: list[tuple[int, str, int, tuple[str, ...]]] = []

    async def decide(survivor: Survivor) -> Decision:
        status, drift = survivor.status, survivor.drift
        seen.append((survivor.run_id, status.state, status.interruptions, drift.changed))
        if status.interruptions:
            return "resume"  # it was running: do it again
        return "discard" if drift.drifted else "keep"

    caplog.set_level(logging.INFO, logger="actors.eventlog")
    async with client(config) as log:
        outcomes = await log.recover(decide, actor="ops")
        assert seen == [
            (1, "held", 1, ("revision",)),
            (2, "held", 0, ("revision",)),
            (3, "held", 0, ()),
        ]
        assert [(o.run_id, o.decision, o.status.state, o.ok) for o in outcomes] == [
            (1, "resume", "queued", True),
            (2, "discard", "cancelled", True),
            (3, "keep", "held", True),
        ]
        assert outcomes[1].status.cancelled_by == "ops"
        # The decisions are durable events like any resume or discard (design §6.10).
        events = (await log.watch(0, limit=100)).events
        resumed = [e.data for e in events if e.kind == "job_queued" and e.run_id == 1]
        assert resumed[-1]["resumed"] is True
        cancelled = [e.data for e in events if e.kind == "job_cancelled"]
        assert cancelled == [{"by": "ops", "was": "held", "reason": "discarded"}]
        assert [s.run_id for s in (await log.boot_report()).survivors] == [3]
        # A second call asks only about the run still held.
        again = await log.recover(decide)
        assert [(o.run_id, o.decision) for o in again] == [(3, "keep")]
    records = [r for r in caplog.records if getattr(r, "decision", None)]
    assert [(r.run_id, r.decision, r.state) for r in records[:3]] == [  # type: ignore[attr-defined]
        (1, "resume", "queued"),
        (2, "discard", "cancelled"),
        (3, "keep", "held"),
    ]
    # The next process finds run 1 queued -> held again, run 2 decided, run 3 held.
    async with client(config) as log:
        assert [s.run_id for s in (await log.boot_report()).survivors] == [1, 3]
        assert (await log.status(2)).state == "cancelled"


async def test_a_refused_decision_is_reported_for_its_run_and_the_others_go_on(
    ledger_at: str,
) -> None:
    config = cfg(ledger_at, quarantine_after=1)
    await crash_with_three_survivors(config)

    async def resume_all(survivor: Survivor) -> Decision:
        return "resume"

    async with client(config) as log:
        first = await log.recover(resume_all)
        assert [(o.run_id, o.status.state) for o in first] == [
            (1, "held"),  # interrupted once: quarantined at quarantine_after=1
            (2, "queued"),
            (3, "queued"),
        ]
        refused = first[0].error
        assert refused is not None
        assert (refused.code, first[0].ok) == ("run_quarantined", False)

        async def override(survivor: Survivor) -> Decision:
            assert survivor.status.quarantined
            return "override"

        second = await log.recover(override)
        assert [(o.run_id, o.decision, o.status.state, o.error) for o in second] == [
            (1, "override", "queued", None)
        ]
        assert await log.recover(override) == ()


async def test_a_decision_that_is_not_one_names_decide_and_leaves_the_run_held(
    ledger_at: str,
) -> None:
    config = cfg(ledger_at)
    await crash_with_three_survivors(config)

    async def unsure(survivor: Survivor) -> Decision:
        return "maybe"  # type: ignore[return-value]

    async with client(config) as log:
        with pytest.raises(InvalidCommand) as info:
            await log.recover(unsure)
        assert info.value.details["fields"] == ["decide"]
        assert "maybe" in str(info.value)
        with pytest.raises(InvalidCommand) as bad_current:
            await log.recover(unsure, current={"colour": "red"})
        assert bad_current.value.details["fields"] == ["colour"]
        with pytest.raises(InvalidCommand) as bad_actor:
            await log.recover(unsure, actor="")
        assert bad_actor.value.details["fields"] == ["actor"]
        assert len((await log.boot_report()).survivors) == 3  # nothing was decided


async def test_a_sync_decide_names_decide_and_leaves_the_runs_held(ledger_at: str) -> None:
    config = cfg(ledger_at)
    await crash_with_three_survivors(config)

    def sync_decide(survivor: Survivor) -> Decision:
        return "resume"

    async with client(config) as log:
        for decide in (sync_decide, None):
            with pytest.raises(InvalidCommand, match="async function") as info:
                await log.recover(decide)  # type: ignore[arg-type]
            assert info.value.details["fields"] == ["decide"]
        assert len((await log.boot_report()).survivors) == 3  # nothing was decided


async def test_an_error_in_decide_propagates_and_the_rest_stay_held(ledger_at: str) -> None:
    config = cfg(ledger_at)
    await crash_with_three_survivors(config)

    async def second_fails(survivor: Survivor) -> Decision:
        if survivor.run_id == 2:
            raise RuntimeError("operator away")
        return "discard"

    async with client(config) as log:
        with pytest.raises(RuntimeError, match="operator away"):
            await log.recover(second_fails)
        assert [s.run_id for s in (await log.boot_report()).survivors] == [2, 3]


async def test_recover_on_a_stopped_log_raises_actor_stopped(ledger_at: str) -> None:
    config = cfg(ledger_at)
    async with client(config) as log:
        pass

    async def never(survivor: Survivor) -> Decision:
        raise AssertionError("not called")

    with pytest.raises(ActorStopped):
        await log.recover(never)
