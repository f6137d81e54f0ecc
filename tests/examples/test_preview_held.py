"""The preview app discards its own runs a previous session left held, and only those.

Startup decides the survivors with the event log's one call, ``recover`` (design §6.17):
``preview`` runs are discarded (the app opens them afresh), other operations' runs stay
held for whoever owns them.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import attrs
import trio

from actors import EventLogActor, EventLogClient, EventLogConfig, OperationSpec
from examples.preview.app.eventlog_runs import OPERATION, EventLogRuns

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    import pytest

OPS = [OperationSpec(name=OPERATION, fields={"run_id"}), OperationSpec(name="other")]


@attrs.frozen
class FakeRuntime:
    """What :class:`EventLogRuns` reaches through the link at startup: the event log."""

    eventlog: EventLogClient


@asynccontextmanager
async def client(path: Path) -> AsyncIterator[EventLogClient]:
    config = EventLogConfig(ledger_path=path, synchronous="NORMAL")
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(EventLogActor(config, operations=OPS).run)
        try:
            yield EventLogClient(ref, timeout=5)
        finally:
            await ref.stop(grace=5)


async def test_startup_discards_the_preview_runs_held_and_keeps_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.db"
    async with client(path) as log:
        await log.submit(OPERATION, {"run_id": 1})
        await log.submit("other", {})
        await log.submit(OPERATION, {"run_id": 2})
        await log.start(3)  # running when the session ends: interrupted
    caplog.set_level(logging.INFO, logger="examples.preview")
    async with client(path) as log:
        runtime = cast("Any", FakeRuntime(eventlog=log))
        runs = EventLogRuns(runtime, cast("Any", None), cast("Any", None), db="sample-00000000")
        await runs.discard_held()
        states = [(await log.status(n)).state for n in (1, 2, 3)]
        assert states == ["cancelled", "held", "cancelled"]
        assert (await log.status(3)).cancelled_by == "preview_server"
    assert [r.discarded for r in caplog.records if hasattr(r, "discarded")] == [2]
