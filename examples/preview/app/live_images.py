"""LiveImages: draws the runs being written as live images (design §4.5, §5).

A run whose ``is_completed`` is 0 is parked by the scheduler, which pages it; every
parked read with new rows is handed to :meth:`LiveImages.queue`. One task
(:meth:`LiveImages.run`) draws the newest queued read of each run (an older one that
was not drawn yet is replaced), the selected run first, as a thumbnail and a preview
with the renderer's status band, and keeps them in the
:class:`~examples.preview.app.images.ImageStore` at the read's client revision, so clients
get them pushed like any other image. A cancelled run's queued read is dropped
(:meth:`LiveImages.discard`).

Depends on the running runtime (its renderer),
the :class:`~examples.preview.app.runs.RunTable`, the image store and the
:class:`~examples.preview.app.selection.Selection`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from actors import Render
from actors.errors import ActorError

from .config import RENDER_SLACK
from .images import StoredImage
from .runs import IMAGE_KINDS

if TYPE_CHECKING:
    from actors import Runtime

    from .images import ImageStore
    from .runs import RunRecord, RunTable
    from .selection import Selection

__all__ = ["LiveImages"]

LOGGER = logging.getLogger("examples.preview")


class LiveImages:
    """Draws the newest partial read of each run being written (see the module docstring).

    Args:
        runtime: The running runtime (its renderer).
        table: The runs (their client revisions).
        images: Where the images are kept (and pushed from).
        selection: Whose selected run is drawn first.
        job_timeout: Seconds (trio clock) one drawing may take.
    """

    def __init__(
        self,
        runtime: Runtime,
        table: RunTable,
        images: ImageStore,
        selection: Selection,
        *,
        job_timeout: float,
    ) -> None:
        self._runtime = runtime
        self._table = table
        self._images = images
        self._selection = selection
        self._job_timeout = job_timeout
        self._pending: dict[int, dict[str, Any]] = {}
        self._wake = trio.Event()

    def queue(self, record: RunRecord, observation: dict[str, Any]) -> None:
        """Draw ``observation`` (a parked read of ``record``); replaces an undrawn one."""
        self._pending[record.run_id] = observation
        self._wake.set()

    def discard(self, run_id: int) -> None:
        """Forget the undrawn read of ``run_id``, if any (its run was cancelled)."""
        self._pending.pop(run_id, None)

    async def run(self) -> None:
        """Draw the queued reads until cancelled (a task)."""
        while True:
            if not self._pending:
                self._wake = trio.Event()
                await self._wake.wait()
                continue
            selected = self._selection.selected
            run_id = selected if selected in self._pending else next(iter(self._pending))
            assert run_id is not None
            await self._draw(run_id, self._pending.pop(run_id))

    async def _draw(self, run_id: int, observation: dict[str, Any]) -> None:
        number = self._table.runs[run_id].number(str(observation.get("revision")))
        for kind in IMAGE_KINDS:
            deadline = trio.current_time() + self._job_timeout
            try:
                rendered = await self._runtime.renderer.ask(
                    Render(observation=observation, kind=kind, deadline=deadline),
                    timeout=self._job_timeout + RENDER_SLACK,
                )
            except ActorError as exc:
                LOGGER.warning(
                    "run %d: live %s failed: %s",
                    run_id,
                    kind,
                    exc,
                    extra={"run_id": run_id, "kind": kind, "code": exc.code},
                )
                continue
            self._images.put(
                StoredImage(
                    run_id=run_id, kind=kind, revision=number, data=rendered.data, live=True
                )
            )
