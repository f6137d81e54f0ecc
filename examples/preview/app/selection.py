"""Selection: the run a client selected and the runs in its viewport (design §4.2).

Both are given to the scheduler as one atomic ``SetPriority``, one at a time, so what
this object holds is always what the scheduler has. The image pushes and the live
images read it to serve the selected run first. Built inside the runtime's lifetime
(:meth:`PreviewApp.running <examples.preview.app.preview_app.PreviewApp.running>`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from actors import SetPriority

if TYPE_CHECKING:
    from actors import Runtime

__all__ = ["Selection"]


class Selection:
    """The selected run and the visible runs, as the scheduler has them.

    Args:
        runtime: The running runtime (its scheduler is asked ``SetPriority``).
        ask_timeout: Seconds (trio clock) an ask of the scheduler may take.
    """

    def __init__(self, runtime: Runtime, *, ask_timeout: float) -> None:
        self._runtime = runtime
        self._ask_timeout = ask_timeout
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
            message = SetPriority(selected=run_id, visible=visible)
            await self._runtime.scheduler.ask(message, timeout=self._ask_timeout)
            self.selected = run_id

    async def show(self, run_ids: tuple[int, ...]) -> None:
        """Make ``run_ids`` the visible runs; changed only once the scheduler took it.

        Raises:
            ActorError: the scheduler's ask failed; nothing changed.
        """
        async with self._lock:
            message = SetPriority(selected=self.selected, visible=run_ids)
            await self._runtime.scheduler.ask(message, timeout=self._ask_timeout)
            self.visible = frozenset(run_ids)
