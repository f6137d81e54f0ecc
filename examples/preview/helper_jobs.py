"""HelperJobs: the preview app's helper jobs, and what follows when helpers end.

**Jobs.** Every helper job of the app (``list_runs``, ``probe``, ``read_run``: the
database is only opened in helper processes) goes through :meth:`HelperJobs.run_job`,
within ``job_timeout`` seconds.

**Helper restarts** (design §3.7, §4.8). When a job fails or is cancelled, the watch
task (:meth:`HelperJobs.watch`) takes the pool's snapshot and compares it with the last
one (:class:`~examples.preview.helper_watch.HelperWatch`): a helper incarnation that
exited, or was replaced by a newer one, is a restart, and the scheduler is told
:class:`~actors.HelperRestarted` so that results claimed under the old incarnation are
fenced (dropped and claimed again, never published). Nothing polls: the watch sleeps
until a helper job fails.

**A failed pool** (design §1.4, §3.7). A job failing with
:class:`~actors.errors.PoolFailed` is noted by :attr:`HelperJobs.recovery`
(:class:`~examples.web.pool_recovery.PoolRecovery`), which restarts the pool once per
failure episode after a capped exponential backoff. After the restart the pool's
snapshot is taken (the retired incarnations are counted, not told twice), the
scheduler is told ``HelperRestarted`` once, and every run whose work failed with
``pool_failed`` is redrawn at a new revision
(:meth:`~examples.preview.revisions.Revisions.redraw_failed`), so its images are drawn
once the database reads work again.

Depends on the :class:`~examples.preview.runtime_link.RuntimeLink` (the pool, the
scheduler) and :class:`~examples.preview.revisions.Revisions`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from actors import HelperRestarted
from actors.errors import ActorError

from ..web.pool_recovery import PoolRecovery
from .helper_watch import HelperWatch

if TYPE_CHECKING:
    from ..web.pool_recovery import RecoveryConfig
    from .revisions import Revisions
    from .runtime_link import RuntimeLink

__all__ = ["HelperJobs"]

LOGGER = logging.getLogger("examples.preview")


class HelperJobs:
    """Runs helper jobs and tells the scheduler about helpers that ended (module doc).

    Args:
        link: The runtime (its pool and scheduler).
        revisions: Redraws the runs that failed with ``pool_failed`` after a restart.
        job_timeout: Seconds (trio clock) one helper job may take.
        ask_timeout: Seconds (trio clock) a snapshot of the pool may take.
        recovery: How a failed pool is restarted.
    """

    def __init__(
        self,
        link: RuntimeLink,
        revisions: Revisions,
        *,
        job_timeout: float,
        ask_timeout: float,
        recovery: RecoveryConfig,
    ) -> None:
        self._link = link
        self._revisions = revisions
        self._job_timeout = job_timeout
        self._ask_timeout = ask_timeout
        self._watch = HelperWatch()
        self._wake = trio.Event()
        self.restarts = 0
        """Helper incarnations seen ending (each one told to the scheduler)."""
        self.recovery = PoolRecovery(
            self._restart_pool, recovery, on_restarted=self._after_pool_restart
        )
        """Restarts the pool after it failed; its ``run`` is a task of the app."""

    async def baseline(self) -> None:
        """Take the pool's first snapshot: the helpers alive now are not restarts.

        Raises:
            ActorError: the pool did not answer.
        """
        self._watch.update(await self._link.runtime.pool.snapshot())

    async def run_job(self, operation: str, payload: Any) -> Any:
        """Run one helper job (within ``job_timeout`` seconds); its result.

        A job that fails or is cancelled wakes the watch task (its helper may be gone).

        Raises:
            ActorError: as :meth:`actors.PoolHandle.run_job`.
        """
        done = False
        try:
            result = await self._link.runtime.pool.run_job(
                operation, payload, timeout=self._job_timeout
            )
            done = True
            return result
        except ActorError as exc:
            self.recovery.note(exc)  # a PoolFailed starts a recovery episode
            raise
        finally:
            if not done:
                self._wake.set()

    async def watch(self) -> None:
        """Tell the scheduler about every helper incarnation that ended (a task)."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            try:
                ended = await self._count_ended()
                if ended:
                    LOGGER.info(
                        "%d helper incarnation(s) ended: fencing their results",
                        ended,
                        extra={"ended": ended},
                    )
                    await self._link.ask_scheduler(HelperRestarted())
            except ActorError as exc:
                LOGGER.warning("helper watch: %s", exc, extra={"code": exc.code})

    async def _count_ended(self) -> int:
        snapshot = await self._link.runtime.pool.snapshot(timeout=self._ask_timeout)
        ended = self._watch.update(snapshot)
        self.restarts += ended
        return ended

    async def _restart_pool(self, *, timeout: float) -> None:  # noqa: ASYNC109
        await self._link.runtime.pool.restart(timeout=timeout)

    async def _after_pool_restart(self) -> None:
        """The pool was restarted: fence old results, redraw ``pool_failed`` runs.

        Raises:
            ActorError: the snapshot or an ask of the scheduler failed.
        """
        await self._count_ended()
        await self._link.ask_scheduler(HelperRestarted())
        redrawn = await self._revisions.redraw_failed("pool_failed")
        LOGGER.info(
            "helper pool restarted: results fenced, failed runs asked again",
            extra={"redrawn": redrawn},
        )
