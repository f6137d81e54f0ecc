"""Shared pieces of the scheduler-core tests: run tables, error records, claim loops.

The core is sans-io: no clock, ``now`` is passed in.
"""

from __future__ import annotations

from typing import Any

from actors._scheduler._scheduler import Scheduler
from actors._scheduler._state import Claim, RunInfo, SchedulerConfig
from actors.errors import ErrorRecord, SourceError

TRANSIENT = ErrorRecord(category="transient", code="reply_timeout", message="slow")
PERMANENT = SourceError("no such table").to_record()


def runs(n: int, *, start: int = 1, revision: str = "r1") -> list[RunInfo]:
    """``n`` runs with ids ``start..``, GUIDs ``g<id>``, all at ``revision``."""
    return [RunInfo(run_id=i, guid=f"g{i}", revision=revision) for i in range(start, start + n)]


def make(n: int = 5, **config: Any) -> Scheduler:
    """A scheduler over ``runs(n)`` with ``SchedulerConfig(**config)``."""
    return Scheduler(runs(n), source="db", config=SchedulerConfig(**config))


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
