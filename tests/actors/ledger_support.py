"""A stalled disk for the event log's tests: commits held in their worker thread.

The virtual clock is moved by hand with :func:`at` (``mock_clock.jump``): an autojump
clock would also jump while the worker thread is busy (design §6.19).
"""

from __future__ import annotations

import sqlite3
import threading
from typing import TYPE_CHECKING

import trio
from trio.testing import wait_all_tasks_blocked

from actors._eventlog._ledger import SQLiteLedger

if TYPE_CHECKING:
    from actors._eventlog._eventlog import EventLog
    from actors._eventlog._ledger._commit import Batch


def ledger_of(log: EventLog) -> SQLiteLedger:
    ledger = log._ledger
    assert isinstance(ledger, SQLiteLedger)
    return ledger


class StalledDisk:
    """Holds each commit of ``ledger`` in its worker thread until :attr:`release` is set."""

    def __init__(self, ledger: SQLiteLedger) -> None:
        self._commit = ledger._commit_sync
        self.entered = threading.Event()
        self.release = threading.Event()
        self.left = threading.Event()
        ledger._commit_sync = self.commit  # type: ignore[method-assign]

    def commit(self, batch: Batch) -> None:
        self.entered.set()
        try:
            if not self.release.wait(10):
                raise sqlite3.OperationalError("the test never released the disk")
            self._commit(batch)
        finally:
            self.left.set()

    async def stalled(self) -> None:
        assert await trio.to_thread.run_sync(self.entered.wait, 10)

    async def finished(self) -> None:
        assert await trio.to_thread.run_sync(self.left.wait, 10)


async def at(mock_clock: trio.testing.MockClock, seconds: float) -> None:
    """Let every task settle, move the virtual clock by ``seconds``, let them react."""
    await wait_all_tasks_blocked()
    mock_clock.jump(seconds)
    await wait_all_tasks_blocked()


async def events_until(port, kind: str) -> list[tuple[str, dict]]:  # type: ignore[no-untyped-def]
    """The ``(kind, data)`` of the events ``port`` delivers, up to the first ``kind``."""
    seen = []
    with trio.fail_after(20):
        async for event in port:
            seen.append((event.kind, event.data))
            if event.kind == kind:
                return seen
    raise AssertionError(f"no {kind} in {seen}")
