"""Selection: the run a client selected and the runs in its viewport (design §4.2).

Both are given to the scheduler as one atomic ``SetPriority``, one at a time, so what
this object holds is always what the scheduler has. The image pushes and the live
images read it to serve the selected run first. Depends on the
:class:`~examples.preview.runtime_link.RuntimeLink`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from actors import SetPriority

if TYPE_CHECKING:
    from .runtime_link import RuntimeLink

__all__ = ["Selection"]


class Selection:
    """The selected run and the visible runs, as the scheduler has them.

    Args:
        link: The runtime (its scheduler is asked ``SetPriority``).
    """

    def __init__(self, link: RuntimeLink) -> None:
        self._link = link
        self._lock = trio.Lock()
        self.selected: int | None = None
        """The selected run, or None."""
        self.visible: frozenset[int] = frozenset()
        """The runs in the client's viewport."""

    def priority(self) -> tuple[int | None, frozenset[int]]:
        """``(selected, visible)`` now."""
        return self.selected, self.visible

    async def select(self, run_id: int | None) -> None:
        """Select ``run_id`` (None: no run); changed only once the scheduler took it.

        Raises:
            ActorError: the scheduler's ask failed; nothing changed.
        """
        async with self._lock:
            visible = tuple(sorted(self.visible))
            await self._link.ask_scheduler(SetPriority(selected=run_id, visible=visible))
            self.selected = run_id

    async def show(self, run_ids: tuple[int, ...]) -> None:
        """Make ``run_ids`` the visible runs; changed only once the scheduler took it.

        Raises:
            ActorError: the scheduler's ask failed; nothing changed.
        """
        async with self._lock:
            await self._link.ask_scheduler(SetPriority(selected=self.selected, visible=run_ids))
            self.visible = frozenset(run_ids)
