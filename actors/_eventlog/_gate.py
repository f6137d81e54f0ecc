"""The admission gate: when the event log refuses new runs, and the events that say so.

design §6.5. The gate keeps the bound on queued plus running runs; the depth is the
caller's (the runs part counts it), so the gate depends on nothing but the journal it
reports to. The first refusal of a saturation episode emits ``admission_paused``, the
first decision that frees capacity afterwards ``admission_resumed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import PoolFull

if TYPE_CHECKING:
    from ._journal import Journal

__all__ = ["AdmissionGate"]


class AdmissionGate:
    """Admission against ``bound`` runs in flight (design §6.5).

    Args:
        bound: ``max_inflight``: queued plus running runs at which admission refuses.
        journal: Where ``admission_paused``/``admission_resumed`` are emitted.
    """

    __slots__ = ("_journal", "bound", "paused")

    def __init__(self, bound: int, journal: Journal) -> None:
        self.bound = bound
        self._journal = journal
        #: True between ``admission_paused`` and ``admission_resumed``.
        self.paused = False

    def full(self, depth: int) -> bool:
        """True if no run can be admitted at ``depth`` runs in flight.

        The first refusal of an episode emits ``admission_paused``, whatever was refused
        (a submit, or a resume of a held run).
        """
        if depth < self.bound:
            return False
        if not self.paused:
            self.paused = True
            self._journal.emit("admission_paused", None, {"depth": depth, "bound": self.bound})
        return True

    def check(self, depth: int) -> None:
        """Raise unless a run can be admitted at ``depth`` runs in flight.

        Raises:
            PoolFull: (``pool_full``) at the bound; ``details`` has ``depth``, ``bound``.
        """
        if self.full(depth):
            raise PoolFull(
                f"{depth} runs in flight (bound {self.bound})", depth=depth, bound=self.bound
            )

    def freed(self, depth: int) -> None:
        """A run left the flight: ``admission_resumed`` if paused and below the bound."""
        if self.paused and depth < self.bound:
            self.paused = False
            self._journal.emit("admission_resumed", None, {"depth": depth, "bound": self.bound})
