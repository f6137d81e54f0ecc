"""HelperWatch: counts the helper incarnations that ended; no I/O (design §3.7, §4.8).

:class:`~examples.preview.helper_jobs.HelperJobs` feeds it the pool's snapshots; each
end it counts is one ``HelperRestarted`` for the scheduler. Depends on nothing of the app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from actors import PoolSnapshot

__all__ = ["HelperWatch"]


class HelperWatch:
    """Counts helper incarnations that ended, from successive pool snapshots (no I/O).

    Per pool slot it remembers the newest incarnation seen and whether its end was
    counted. The first snapshot is the baseline: nothing in it counts.
    """

    def __init__(self) -> None:
        self._slots: dict[int, tuple[int, bool]] = {}

    def update(self, snapshot: PoolSnapshot) -> int:
        """Take a snapshot; return how many incarnations ended since the last one.

        An incarnation ends when its process is seen exited, or when a newer
        incarnation of its slot is seen first; each end is counted once.
        """
        ended = 0
        for index, helper in enumerate(snapshot.helpers):
            if helper is None:
                continue
            seen = self._slots.get(index)
            if seen is None:
                self._slots[index] = (helper.incarnation, not helper.alive)
                continue
            incarnation, counted = seen
            if helper.incarnation > incarnation:
                ended += not counted  # it ended between two snapshots
                incarnation, counted = helper.incarnation, False
            if not helper.alive and not counted:
                ended += 1
                counted = True
            self._slots[index] = (incarnation, counted)
        return ended
