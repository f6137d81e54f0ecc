"""Shared pieces of the scheduler-core tests: kinds, run tables, error records, claim loops.

The core is sans-io: no clock, ``now`` is passed in. Most tests use :data:`KINDS`, a
three-kind DAG shaped like the preview server's (one source read, two drawings that
need it), declared here as an embedder would.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any

import trio

from actors import Kind, RetryPolicy, SchedulerActor, Settled
from actors._scheduler._scheduler import Scheduler
from actors._scheduler._state import Claim, RunInfo, SchedulerConfig
from actors.errors import ErrorRecord, SourceUnreadable

#: A transient error that is not a crash (does not count toward maximum_crashes).
TRANSIENT = ErrorRecord(category="transient", code="source_busy", message="busy")
#: A transient error that took the helper down (one of the default crash codes).
CRASH = ErrorRecord(category="transient", code="helper_exited", message="exit code 70")
PERMANENT = SourceUnreadable("no such table").to_record()


def kinds(retry: RetryPolicy | None = None, **policies: RetryPolicy) -> tuple[Kind, ...]:
    """metadata (helper, progressive) -> thumbnail, preview (cached); ``retry`` for all
    kinds, or per kind by name."""
    base = retry if retry is not None else RetryPolicy()

    def policy(name: str) -> RetryPolicy:
        return policies.get(name, base)

    return (
        Kind(name="metadata", helper=True, progressive=True, retry=policy("metadata")),
        Kind(name="thumbnail", needs=("metadata",), cached=True, retry=policy("thumbnail")),
        Kind(name="preview", needs=("metadata",), cached=True, retry=policy("preview")),
    )


KINDS = kinds()


def config(**fields: Any) -> SchedulerConfig:
    """``SchedulerConfig(**fields)`` with :data:`KINDS` unless ``kinds`` is given."""
    fields.setdefault("kinds", KINDS)
    return SchedulerConfig(**fields)


def runs(n: int, *, start: int = 1, revision: str = "r1") -> list[RunInfo]:
    """``n`` runs with ids ``start..``, GUIDs ``g<id>``, all at ``revision``."""
    return [RunInfo(run_id=i, guid=f"g{i}", revision=revision) for i in range(start, start + n)]


def make(n: int = 5, **fields: Any) -> Scheduler:
    """A scheduler over ``runs(n)`` with ``config(**fields)``."""
    return Scheduler(runs(n), source="db", config=config(**fields))


def drain(s: Scheduler, now: float = 0.0, limit: int = 1000) -> list[tuple[int, str]]:
    """Claim and complete everything claimable at ``now``; return (run_id, kind) order."""
    order = []
    for _ in range(limit):
        claim = s.claim(now)
        if claim is None:
            return order
        order.append((claim.run_id, claim.kind))
        s.complete(claim.claim_id, f"{claim.kind}:{claim.run_id}", now=now)
    raise AssertionError("drain did not finish")


def claim_kind(s: Scheduler, run_id: int, kind: str, now: float = 0.0) -> Claim:
    """Claim once and check it is ``kind`` of ``run_id``."""
    claim = s.claim(now)
    assert claim is not None
    assert (claim.run_id, claim.kind) == (run_id, kind)
    return claim


# --- the actor ------------------------------------------------------------------------------


class Recorder:
    """Collects the actor's events; ``until`` waits for a condition without polling."""

    def __init__(self) -> None:
        self.events: list[object] = []
        self._changed = trio.Event()

    async def collect(self, channel) -> None:
        async for event in channel:
            self.events.append(event)
            self._changed.set()
            self._changed = trio.Event()

    async def until(self, predicate, seconds: float = 60.0) -> None:
        with trio.fail_after(seconds):
            while not predicate(self.events):
                await self._changed.wait()

    def of(self, cls):
        return [e for e in self.events if isinstance(e, cls)]


@asynccontextmanager
async def running(execute, *args, **kwargs):
    """A running :class:`SchedulerActor` (``config()`` unless given) and its recorder."""
    kwargs.setdefault("config", config())
    async with trio.open_nursery() as nursery:
        actor = SchedulerActor(execute, *args, **kwargs)
        ref = await nursery.start(actor.run)
        recorder = Recorder()
        nursery.start_soon(recorder.collect, actor.events)
        try:
            yield actor, ref, recorder
        finally:
            await ref.stop(grace=1.0)


def settled(n: int):
    """A :meth:`Recorder.until` predicate: ``n`` runs settled."""
    return lambda events: sum(isinstance(e, Settled) for e in events) >= n
