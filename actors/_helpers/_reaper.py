"""The task that waits for a helper to exit and makes sure nothing of it is left (§3.11).

:class:`Reaper` is the part of a :class:`~actors._helpers._process.HelperProcess` that
runs in the pool's nursery for the whole life of the process: it waits for the leader
to exit and reaps it, then sweeps its tree (:meth:`ProcessTree.sweep`: SIGKILL to what
is left, up to ``kill`` seconds for it to go). Only then is the helper *exited*. What
outlives the sweep is reported as escaped (an event, an ERROR record, and
``details["escaped"]`` of the helper's exit error), and the incarnation stays
quarantined until it is gone too. The wait is shielded: only :meth:`abandon` (the
pool's close giving up on an unkillable process) stops it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio
from trio.lowlevel import enable_ki_protection

from .._core._lifecycle import HelperEvent, HelperState
from ._containment import _wait_gone
from ._outcomes import exit_details

if TYPE_CHECKING:
    from ._process import HelperProcess

__all__ = ["Reaper"]


class Reaper:
    """Waits for one helper's exit and sweeps its tree (see the module docstring).

    Args:
        helper: The incarnation it reaps.
    """

    def __init__(self, helper: HelperProcess) -> None:
        self._helper = helper
        self.reaped = False
        """The leader was waited for (its tree may still be swept)."""
        self.escaped: list[int] = []
        """Pids of the tree that outlived the sweep (design §3.11)."""
        self.undeliverable: list[tuple[int, int]] = []
        """``(pid, errno)`` of each SIGKILL of the sweep that could not be delivered."""
        # Shielded so that outside cancellation cannot stop the reaping; only
        # :meth:`abandon` cancels it (a quarantined process we finally give up on).
        self._scope = trio.CancelScope(shield=True)

    def abandon(self) -> None:
        """Stop waiting (the pool's close gives up on an unkillable process)."""
        self._scope.cancel()

    @enable_ki_protection
    async def run(self) -> None:
        """Wait, reap, sweep, then mark the helper exited (runs in the pool's nursery)."""
        helper = self._helper
        process = helper._process
        assert process is not None
        tree = helper._tree
        with self._scope:
            await process.wait()
            self.reaped = True
            helper._returncode = process.returncode
            tree.mark_reaped()
            survivors, failures = await tree.sweep(helper.timeouts.kill)
            self.undeliverable = failures
            if survivors:
                self.escaped = survivors
                if helper.state is not HelperState.QUARANTINED:
                    helper._advance(HelperEvent.ESCAPED)
                helper._emit(
                    "escaped",
                    f"{len(survivors)} process(es) of its tree outlived SIGKILL by "
                    f"{helper.timeouts.kill:g} s: {survivors}; quarantined until they are gone",
                    pids=survivors,
                    undeliverable=[list(item) for item in failures],
                    containment=tree.mode,
                )
                for pid in survivors:
                    await _wait_gone(pid)
        if self._scope.cancelled_caught:
            tree.close()
            return
        tree.close()
        if helper._stderr is not None:
            helper._stderr.drain_nowait()
        quarantined = helper.state is HelperState.QUARANTINED
        expected = helper._stopping or helper.state in (
            HelperState.SHUTTING_DOWN,
            HelperState.TERMINATING,
            HelperState.KILLING,
        )
        helper._advance(HelperEvent.REAPED)
        helper._exited.set()
        details = exit_details(helper._returncode)
        helper._emit(
            "reaped",
            _describe(details, helper._returncode),
            level=None if expected and not quarantined else logging.WARNING,
            **details,
            escaped=self.escaped,
        )
        if quarantined:
            helper._emit("released", "gone at last: released from quarantine")
        if helper._on_exit is not None:
            helper._on_exit(helper)


def _describe(details: dict[str, object], returncode: int | None) -> str:
    if details["signal"]:
        return f"reaped, killed by {details['signal']}"
    return f"reaped, exit code {returncode}"
