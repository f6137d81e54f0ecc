"""The event log's counters, returned by ``EventLog.statistics()``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._ledger import LedgerStatistics
    from ._ports import PortStatistics

__all__ = ["EventLogStatistics"]


@attrs.frozen(kw_only=True)
class EventLogStatistics:
    """Counters of an event log, taken without waiting."""

    head: int
    """The newest seq."""
    floor: int
    """The oldest seq in the in-memory window (``head + 1`` when empty)."""
    queued: int
    """Runs waiting for an executor."""
    running: int
    """Runs started and not decided."""
    held: int
    """Runs found at boot, waiting for ``resume``/``discard``."""
    bound: int
    """``max_inflight``."""
    paused: bool
    """True between ``admission_paused`` and ``admission_resumed`` (capacity or ledger)."""
    revision: int
    """The current revision."""
    ports: tuple[PortStatistics, ...]
    """One entry per open subscriber port."""
    ledger: LedgerStatistics | None
    """The ledger's counters, or None in memory."""
    subscribers_left: Mapping[str, int] = attrs.field(factory=dict)
    """Subscriber ports closed so far, by reason: ``closed``, ``slow`` (dropped for
    falling behind), ``protocol_error`` (design §6.9); each also a ``subscriber_left``
    event."""
    progress_folded: int = 0
    """Progress reports folded into a newer one of their run while the ledger was
    backlogged (design §6.19)."""
    refusals: Mapping[str, int] = attrs.field(factory=dict)
    """Submissions refused so far, by code: ``admission_full`` (a receipt with
    ``admitted=False``), ``ledger_unavailable`` (design §6.13, §6.19)."""
