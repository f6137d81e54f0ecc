"""Which tier each run is in, and which claim goes next (design §4.2, §4.4, §4.5).

Placements are validated now and applied at the next work boundary; the choice of the
next claim adds anti-starvation (aging) and progressive pages to the heap order.

Pure: no trio, no I/O. Owned by :class:`actors._scheduler._scheduler.Scheduler`; one
instance per source generation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ScheduleRejected
from ._state import PENDING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._config import SchedulerConfig
    from ._state import _Run
    from ._table import RunTable

__all__ = ["Priorities"]


class Priorities:
    """The runs placed in tiers better than the last one, and a pending change.

    Args:
        tiers: The declared tier names, best first.
    """

    __slots__ = ("fg_streak", "index", "pending", "placed", "since_page", "tiers")

    def __init__(self, tiers: tuple[str, ...]) -> None:
        self.tiers = tiers
        self.fg_streak = 0
        """Consecutive claims of better tiers than the last (design §4.4)."""
        self.since_page = [0] * len(tiers)
        """Ordinary claims per tier since that tier's last progressive page (§4.4)."""
        self.index = {name: t for t, name in enumerate(tiers)}
        self.placed: dict[int, int] = {}
        """Run position -> tier, for runs not in the last tier (applied)."""
        self.pending: dict[int, int] | None = None
        """The next placement (validated, not applied yet), or None."""

    @property
    def last(self) -> int:
        """Index of the last tier: where every run not placed elsewhere is."""
        return len(self.tiers) - 1

    def validate(
        self, table: RunTable, placements: Iterable[tuple[int, str, Iterable[int]]]
    ) -> None:
        """Check ``placements`` and keep them for :meth:`apply`; a later call replaces them.

        Args:
            table: The current run table.
            placements: ``(tier index, name for errors, run ids)`` triples.

        Raises:
            ScheduleRejected: (code ``schedule_rejected``, a ValueError) an id that is
                not a run of the current source (bools are not ids), or ids that are not
                an iterable (a str is refused); nothing changed.
        """
        placed: dict[int, int] = {}
        last = self.last
        for tier, name, run_ids in placements:
            if isinstance(run_ids, str | bytes) or not hasattr(run_ids, "__iter__"):
                raise ScheduleRejected(
                    f"{name} must be an iterable of run ids, got {run_ids!r:.80}"
                )
            for run_id in run_ids:
                order = table.lookup(run_id, name).order
                if tier < placed.get(order, last):
                    placed[order] = tier  # a run named in several tiers takes the best
        self.pending = placed

    def apply(self, table: RunTable) -> None:
        """Apply the pending placement: re-key only runs whose tier changed (design §4.2).

        Progressive runs that moved to a better tier jump to the front of the round,
        the best tier first (design §4.5).
        """
        placed = self.pending
        if placed is None:
            return
        self.pending = None
        old = self.placed
        self.placed = placed
        last = self.last
        improved: list[tuple[int, int]] = []
        for order in old.keys() | placed.keys():
            run = table.runs[order]
            tier = placed.get(order, last)
            if tier == run.tier:
                continue
            if tier < run.tier:
                improved.append((tier, order))
            run.tier = tier
            for k, slot in enumerate(run.slots):
                if slot.status == PENDING and slot.queued >= 0:
                    table.q.push(run, k)
        improved.sort(reverse=True)  # ReadyQueues.jump puts the last given first
        table.q.jump(order for _tier, order in improved)

    def first_tier_ready(self, table: RunTable) -> bool:
        """True when a run of the first tier has claimable work of a kind that needs
        others (e.g. the selected run's images): aging then waits (design §4.4)."""
        if self.last == 0:
            return False
        roots = table.graph.roots
        for order, tier in self.placed.items():
            if tier:
                continue
            run = table.runs[order]
            if run.waiting:
                continue
            for k, slot in enumerate(run.slots):
                if k not in roots and slot.status == PENDING and slot.queued >= 0:
                    return True
        return False

    def pick(
        self, table: RunTable, now: float, config: SchedulerConfig
    ) -> tuple[_Run, int, bool] | None:
        """Take the next (run, kind, is-a-page) off the queues, or None (§4.2-§4.5).

        The best heap head, except that after ``aging_after`` claims of better tiers
        the best last-tier root item goes first (unless :meth:`first_tier_ready`), and
        a due progressive page goes first in its tier after ``page_after`` ordinary
        claims of that tier.
        """
        queues = table.q
        graph = table.graph
        best = queues.best()
        page = queues.peek_page(now, config.page_interval)
        if best is None and page is None:
            return None
        last = self.last
        ordinary_tier = best[0].tier if best is not None else last + 1
        page_tier = page.tier if page is not None else last + 1
        choice: tuple[_Run, int, bool] | None = None
        if (
            self.fg_streak >= config.aging_after
            and min(ordinary_tier, page_tier) < last
            and not self.first_tier_ready(table)
        ):
            for k in graph.roots:
                aged = queues.top(last * len(graph) + k)
                if aged is not None:
                    choice = (aged, k, False)
                    break
            else:
                if page is not None and page_tier == last:
                    choice = (page, graph.progressive, True)
        if choice is None:
            if page is not None and (
                page_tier < ordinary_tier
                or (page_tier == ordinary_tier and self.since_page[page_tier] >= config.page_after)
            ):
                choice = (page, graph.progressive, True)
            else:
                assert best is not None
                choice = (best[0], best[1], False)
        run, k, is_page = choice
        tier = run.tier
        if is_page:
            queues.take_page(run, now)
            self.since_page[tier] = 0
        else:
            queues.pop(run, k)
            self.since_page[tier] += 1
        self.fg_streak = 0 if tier == last else self.fg_streak + 1
        return choice
