"""HelperJobs: the preview app's helper jobs, and its redraws after the pool restarted.

**Jobs.** Every helper job of the app (``list_runs``, ``probe``, ``read_run``,
``draw``: the database is only opened in helper processes, which draw the thumbnails
and previews too, design §5.4) goes through :meth:`HelperJobs.run_job`, within
``job_timeout`` seconds.

**Helper and pool restarts** are the runtime's (design §1.7, §3.7, §4.8): it replaces
a helper that ended and tells the scheduler ``HelperRestarted`` itself (results claimed
under the old incarnation are fenced), and it restarts a failed pool after a capped
backoff. Work caught in between fails with the transient ``pool_restarting``, which the
scheduler retries (the default retry policy of :mod:`examples.preview.app.runtime_kinds`). A run
whose last attempt still failed with it is drawn again at a new revision when the pool
restarts (:meth:`HelperJobs.redraw_after_restarts`, fed the runtime's
``pool_restarted`` events; nothing polls).

Depends on the running runtime (its pool) and
:class:`~examples.preview.app.revisions.Revisions`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from actors.errors import ActorError, PoolRestarting

if TYPE_CHECKING:
    from actors import PoolEventStream, Runtime

    from .revisions import Revisions

__all__ = ["HelperJobs"]

LOGGER = logging.getLogger("examples.preview")


class HelperJobs:
    """Runs helper jobs; redraws the runs a pool restart left failed (module doc).

    Args:
        runtime: The running runtime (its pool).
        revisions: Redraws the runs that failed with ``pool_restarting``.
        job_timeout: Seconds (trio clock) one helper job may take.
    """

    def __init__(self, runtime: Runtime, revisions: Revisions, *, job_timeout: float) -> None:
        self._runtime = runtime
        self._revisions = revisions
        self._job_timeout = job_timeout

    async def run_job(self, operation: str, payload: Any) -> Any:
        """Run one helper job (within ``job_timeout`` seconds); its result.

        Raises:
            ActorError: as :meth:`actors.PoolHandle.run_job` (e.g. ``PoolRestarting``,
                code ``pool_restarting``, while the runtime restarts a failed pool).
        """
        return await self._runtime.pool.run_job(operation, payload, timeout=self._job_timeout)

    async def redraw_after_restarts(self, restarts: PoolEventStream) -> None:
        """For each ``pool_restarted`` event, redraw every run whose work failed with
        ``pool_restarting`` (a task; ends with the stream, which it closes).

        Args:
            restarts: A subscription to the runtime's pool events (design §3.10); only
                its ``pool_restarted`` events count.
        """
        with restarts:
            async for event in restarts:
                if event.kind != "pool_restarted":
                    continue
                try:
                    redrawn = await self._revisions.redraw_failed(PoolRestarting.code)
                except ActorError as exc:
                    LOGGER.warning(
                        "after the helper pool restart: %s", exc, extra={"code": exc.code}
                    )
                    continue
                LOGGER.info(
                    "helper pool restarted: %d failed run(s) asked again",
                    redrawn,
                    extra={"redrawn": redrawn, "seq": event.seq},
                )
