"""Ordered indexes of the scheduler core: ready heaps, backoff timers, progressive rounds.

Pure: no trio, no I/O. Used only by :class:`actors._scheduler._scheduler.Scheduler` (design §4.3).

*Ready heaps.* One binary heap per (tier, kind), in priority order, holds the
positions (``_Run.order``, an ``int`` already owned by the run, so an entry costs one
pointer) of claimable slots. Invalidation is lazy: a slot records in ``queued`` the tier
of its one live entry; any other entry for it is discarded when it reaches a heap's top.
Moving a run to another tier pushes one new entry per pending slot and leaves the old
one to die. A heap holding more than ``2 * live + 1024`` entries is rebuilt, so memory
stays proportional to the pending work and pops stay ``O(log n)`` amortised.

*Timers.* A heap of ``(not_before, order, kind)``; an entry is valid while its slot is
still in backoff with that very ``not_before``.

*Progressive rounds (design §4.5).* ``progressive`` is the set of parked runs. In a round
every parked run gets one page, best (tier, run order) first, so selected runs come
before visible ones and those before the rest; a run parked during a round joins it;
when every parked run has had its page a new round starts. Runs that become selected
or visible jump to the front (``front``), even if already paged in this round.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import TYPE_CHECKING

from ._state import BACKOFF, PENDING

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from ._state import _Run, _Slot

__all__ = ["ReadyQueues"]

# A heap is rebuilt when it holds more than 2 * live + this many entries.
COMPACT_SLACK = 1024


class ReadyQueues:
    """The scheduler's indexes over one run table (one source generation).

    Args:
        runs: The run table, shared with the scheduler (appended to in place).
        tiers: Number of priority tiers.
        kinds: Number of declared kinds.
    """

    __slots__ = (
        "front",
        "heaps",
        "kinds",
        "last_page_at",
        "paged",
        "progressive",
        "queued",
        "runs",
        "tiers",
        "timers",
    )

    def __init__(self, runs: list[_Run], tiers: int, kinds: int) -> None:
        self.runs = runs
        self.tiers = tiers
        self.kinds = kinds
        self.heaps: list[list[int]] = [[] for _ in range(tiers * kinds)]
        """Index ``tier * kinds + kind``: positions of claimable slots."""
        self.queued = [0] * (tiers * kinds)
        """Live entries per heap (slots whose ``queued`` names that heap's tier)."""
        self.timers: list[tuple[float, int, int]] = []
        self.progressive: dict[int, None] = {}
        """Ordered set of the positions of parked (pageable) runs."""
        self.paged: set[int] = set()
        """Runs paged in the current round."""
        self.front: deque[int] = deque()
        """Runs that jumped to the front of the round (design §4.5)."""
        self.last_page_at = -math.inf
        """When the last progressive page was claimed, seconds on the caller's clock."""

    # --- ready heaps -------------------------------------------------------------------

    def push(self, run: _Run, k: int) -> None:
        """Give the pending slot ``k`` of ``run`` a live entry in its tier's heap."""
        slot = run.slots[k]
        tier = run.tier
        if slot.queued == tier:
            return  # its live entry is already in the right heap
        self.unqueue(slot, k)
        slot.queued = tier
        h = tier * self.kinds + k
        self.queued[h] += 1
        heap = self.heaps[h]
        heapq.heappush(heap, run.order)
        if len(heap) > 2 * self.queued[h] + COMPACT_SLACK:
            self._compact(h)

    def unqueue(self, slot: _Slot, k: int) -> None:
        """Forget the slot's live entry (the entry itself dies lazily)."""
        if slot.queued >= 0:
            self.queued[slot.queued * self.kinds + k] -= 1
            slot.queued = -1

    def top(self, h: int) -> _Run | None:
        """The run at the top of heap ``h`` whose slot is claimable, or None.

        Stale entries on the way are popped. A run waiting for a deferred source change
        (design §4.8) or for an older execution of its GUID (design §4.13) is set aside
        (``queued = -1``); the end of the wait re-queues it.
        """
        heap = self.heaps[h]
        tier, k = divmod(h, self.kinds)
        runs = self.runs
        while heap:
            run = runs[heap[0]]
            slot = run.slots[k]
            if slot.queued == tier and slot.status == PENDING:
                if run.deferred is None and not run.held:
                    return run
                self.unqueue(slot, k)
            heapq.heappop(heap)
        return None

    def best(self) -> tuple[_Run, int] | None:
        """The best claimable (run, kind) in (tier, kind, run order), or None."""
        heaps = self.heaps
        for h in range(len(heaps)):
            if heaps[h]:  # skip empty heaps without a call: most tiers are empty
                run = self.top(h)
                if run is not None:
                    return run, h % self.kinds
        return None

    def pop(self, run: _Run, k: int) -> None:
        """Remove ``run``'s slot ``k``, just returned by :meth:`top`, from its heap."""
        heapq.heappop(self.heaps[run.tier * self.kinds + k])
        self.unqueue(run.slots[k], k)

    def ready_counts(self) -> tuple[int, ...]:
        """Live entries per tier, best tier first."""
        queued, kinds = self.queued, self.kinds
        return tuple(sum(queued[t * kinds : (t + 1) * kinds]) for t in range(self.tiers))

    def ready_by_kind(self, names: tuple[str, ...]) -> dict[tuple[int, str], int]:
        """Live entries per (tier, kind name), every pair included (zeros too)."""
        kinds = self.kinds
        return {(h // kinds, names[h % kinds]): count for h, count in enumerate(self.queued)}

    def _compact(self, h: int) -> None:
        tier, k = divmod(h, self.kinds)
        runs = self.runs
        live = {
            order
            for order in self.heaps[h]
            if runs[order].slots[k].queued == tier and runs[order].slots[k].status == PENDING
        }
        self.heaps[h] = sorted(live)  # a sorted list is a heap

    # --- backoff timers ------------------------------------------------------------------

    def add_timer(self, run: _Run, k: int, when: float) -> None:
        """Remember that slot ``k`` of ``run`` may be retried at ``when`` (seconds)."""
        heapq.heappush(self.timers, (when, run.order, k))

    def _timer_valid(self, entry: tuple[float, int, int]) -> bool:
        when, order, k = entry
        slot = self.runs[order].slots[k]
        return slot.status == BACKOFF and slot.retry is not None and slot.retry.not_before == when

    def due_timers(self, now: float) -> Iterator[tuple[_Run, int]]:
        """Pop and yield the (run, kind) whose backoff ended by ``now``."""
        timers = self.timers
        while timers and timers[0][0] <= now:
            entry = heapq.heappop(timers)
            if self._timer_valid(entry):
                yield self.runs[entry[1]], entry[2]

    def next_timer(self) -> float | None:
        """The earliest valid backoff end, in seconds, or None."""
        timers = self.timers
        while timers and not self._timer_valid(timers[0]):
            heapq.heappop(timers)
        return timers[0][0] if timers else None

    # --- progressive round ------------------------------------------------------------------

    def peek_page(self, now: float, interval: float) -> _Run | None:
        """The parked run whose page is next, if pages are due at ``now`` (design §4.5)."""
        if not self.progressive or now < self.last_page_at + interval:
            return None
        return self.runs[self._next_page()]

    def take_page(self, run: _Run, now: float) -> None:
        """Claim the page just returned by :meth:`peek_page` at ``now``."""
        order = run.order
        if self.front and self.front[0] == order:
            self.front.popleft()
        self.paged.add(order)
        del self.progressive[order]
        self.last_page_at = now

    def jump(self, orders: Iterable[int]) -> None:
        """Put parked runs at the front of the round, the last given first (design §4.5).

        A run already paged in this round is paged again first: a newly selected or
        visible run jumps the queue.
        """
        front = self.front
        for order in orders:
            if order in self.progressive:
                if order in front:
                    front.remove(order)
                front.appendleft(order)

    def _next_page(self) -> int:
        # Jumpers first; then the best (tier, run order) parked run not yet paged in
        # this round; a new round when every parked run had its page. O(parked runs):
        # few runs are being written at once, and pages are paced.
        progressive = self.progressive
        front = self.front
        while front:
            if front[0] in progressive:
                return front[0]
            front.popleft()
        paged = self.paged
        waiting = [order for order in progressive if order not in paged]
        if not waiting:
            paged.clear()
            waiting = list(progressive)
        runs = self.runs
        return min(waiting, key=lambda order: (runs[order].tier, order))
