"""The admission gate: when the event log refuses new runs, and the events that say so.

design §6.5, §6.13, §6.16. Admission closes for two reasons, each with its own episode
of events and log records:

* **capacity**: ``max_inflight`` runs are queued or running. The first refusal of a
  saturation episode emits ``admission_paused`` ``{depth, bound}``, the first decision
  that frees capacity afterwards ``admission_resumed`` ``{depth, bound}``. The depth is
  the caller's (the runs part counts it).
* **the ledger**: its commits fail (disk full, an I/O error). ``admission_paused``
  ``{reason: "ledger_unavailable", cause}`` when the first commit fails,
  ``admission_resumed`` ``{reason: "ledger_available"}`` when one succeeds again.

Every refusal says when to retry (``retry_after``, seconds): for capacity, the recent
interval between runs leaving the pool (a moving average, trio clock), clamped to
``[retry_after_min, retry_after_max]``; for the ledger, the delay before its next commit
attempt.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from ...errors import AdmissionFull, LedgerUnavailable

if TYPE_CHECKING:
    from .._journal import Journal
    from .._ledger import Ledger
    from .._types import EventLogConfig

__all__ = ["AdmissionGate"]

_log = logging.getLogger("actors.eventlog")

#: Weight of the newest interval in the moving average of intervals between frees.
_SMOOTHING = 0.2


class AdmissionGate:
    """Admission against ``bound`` runs in flight and a ledger that commits (§6.5, §6.13).

    Args:
        config: ``max_inflight`` and the ``retry_after`` bounds.
        journal: Where ``admission_paused``/``admission_resumed`` are emitted.
        ledger: The ledger whose commits must succeed, or None in memory.
    """

    __slots__ = (
        "_interval",
        "_journal",
        "_last_free",
        "_ledger",
        "_max",
        "_min",
        "bound",
        "paused",
    )

    def __init__(self, config: EventLogConfig, journal: Journal, ledger: Ledger | None) -> None:
        self.bound = config.max_inflight
        self._min = config.retry_after_min
        self._max = config.retry_after_max
        self._journal = journal
        self._ledger = ledger
        #: True between a capacity ``admission_paused`` and its ``admission_resumed``.
        self.paused = False
        self._last_free: float | None = None
        self._interval: float | None = None

    @property
    def unavailable(self) -> LedgerUnavailable | None:
        """The ledger's last commit error while its commits fail, else None."""
        return None if self._ledger is None else self._ledger.unavailable

    def retry_after(self) -> float:
        """Seconds after which a refused submit may be admitted (an estimate)."""
        interval = self._max if self._interval is None else self._interval
        return round(min(self._max, max(self._min, interval)), 3)

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
            _log.info(
                "admission paused: %d runs in flight (bound %d)",
                depth,
                self.bound,
                extra={"depth": depth, "bound": self.bound, "reason": "admission_full"},
            )
        return True

    def check_ledger(self) -> None:
        """Raise while the ledger cannot commit.

        Raises:
            LedgerUnavailable: (``ledger_unavailable``) ``details`` has ``cause`` and
                ``retry_after``.
        """
        error = self.unavailable
        if error is not None:
            raise LedgerUnavailable(error.message, **error.details)

    def check(self, depth: int) -> None:
        """Raise unless a run can be admitted at ``depth`` runs in flight.

        Raises:
            LedgerUnavailable: (``ledger_unavailable``) the ledger cannot commit now.
            AdmissionFull: (``admission_full``) at the bound; ``details`` has ``depth``, ``bound``
                and ``retry_after``.
        """
        self.check_ledger()
        if self.full(depth):
            raise AdmissionFull(
                f"{depth} runs in flight (bound {self.bound})",
                depth=depth,
                bound=self.bound,
                retry_after=self.retry_after(),
            )

    def freed(self, depth: int) -> None:
        """A run left the flight: ``admission_resumed`` if paused and below the bound."""
        now = trio.current_time()
        if self._last_free is not None:
            interval = now - self._last_free
            previous = self._interval
            self._interval = (
                interval if previous is None else previous + _SMOOTHING * (interval - previous)
            )
        self._last_free = now
        if self.paused and depth < self.bound:
            self.paused = False
            self._journal.emit("admission_resumed", None, {"depth": depth, "bound": self.bound})
            _log.info(
                "admission resumed: %d runs in flight (bound %d)",
                depth,
                self.bound,
                extra={"depth": depth, "bound": self.bound, "reason": "admission_full"},
            )

    def ledger_health(self, error: LedgerUnavailable | None) -> None:
        """The ledger's commits fail (``error``) or succeed again (None) (design §6.13).

        Called by the ledger's writer once when an outage starts and once when it ends.
        """
        if error is not None:
            cause = error.details.get("cause")
            self._journal.emit(
                "admission_paused", None, {"reason": "ledger_unavailable", "cause": cause}
            )
            _log.warning(
                "admission paused: the ledger cannot commit (%s)",
                cause,
                extra={"reason": "ledger_unavailable", "cause": cause},
            )
        else:
            self._journal.emit("admission_resumed", None, {"reason": "ledger_available"})
            _log.info(
                "admission resumed: the ledger commits again",
                extra={"reason": "ledger_available"},
            )
