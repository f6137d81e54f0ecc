"""The task that waits for a helper to exit and makes sure nothing of it is left (§3.11).

:class:`Reaper` is the part of a :class:`~actors._helpers._process._process.HelperProcess` that
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
from typing import TYPE_CHECKING, Protocol

import trio
from trio.lowlevel import enable_ki_protection

from ..._core import HelperEvent, HelperState
from ._outcomes import exit_details, exited_error

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...errors import HelperExited
    from ._containment import ProcessTree
    from ._spec import HelperTimeouts
    from ._stderr import StderrTail
    from ._zygote import ChildProcess

__all__ = ["ReapedHelper", "Reaper"]


class ReapedHelper(Protocol):
    """What the reaper reads of the helper it reaps (its public face)."""

    @property
    def label(self) -> str: ...

    @property
    def timeouts(self) -> HelperTimeouts: ...

    @property
    def state(self) -> HelperState: ...


class Reaper:
    """Waits for one helper's exit and sweeps its tree (see the module docstring).

    Args:
        helper: The incarnation it reaps (its ``timeouts.kill``: seconds on trio's
            clock the sweep gives the tree to go after SIGKILL).
        tree: Its process tree (its containment).
        advance: Applies an event to the helper's lifecycle (design §3).
        emit: Reports a step: ``emit(kind, text, *, level=None, **details)``, an event
            and a log record (design §3.10).
        on_exit: Called (synchronously) once the helper has exited, or None.
    """

    def __init__(
        self,
        helper: ReapedHelper,
        *,
        tree: ProcessTree,
        advance: Callable[[HelperEvent], HelperState],
        emit: Callable[..., None],
        on_exit: Callable[[], object] | None,
    ) -> None:
        self._helper = helper
        self._tree = tree
        self._kill = helper.timeouts.kill
        self._advance = advance
        self._emit = emit
        self._on_exit = on_exit
        self.exited = trio.Event()
        """Set once the helper is reaped and nothing of its tree is left (or it never
        started)."""
        self.stopping = False
        """The helper is being stopped on purpose: its exit is expected."""
        self.returncode: int | None = None
        """The leader's exit status once reaped (negative: killed by that signal)."""
        self.reaped = False
        """The leader was waited for (its tree may still be swept)."""
        self.escaped: list[int] = []
        """Pids of the tree that outlived the sweep (design §3.11)."""
        # Shielded so that outside cancellation cannot stop the reaping; only
        # :meth:`abandon` cancels it (a quarantined process we finally give up on).
        self._scope = trio.CancelScope(shield=True)

    def exited_error(self, what: str, stderr: str | None = None) -> HelperExited:
        """The error of the helper's exit during ``what`` (design §3.3, §3.7): its exit
        code, its escaped pids and, when given, ``stderr`` (the tail it wrote)."""
        helper = self._helper
        state = helper.state.value
        return exited_error(
            f"{helper.label}: {what}",
            self.returncode,
            state,
            stderr,
            self.escaped,
            lost=self._tree.lost,
        )

    def never_started(self) -> None:
        """The helper could not be spawned: it is exited at once, with nothing to reap."""
        self._advance(HelperEvent.REAPED)
        self.exited.set()

    def abandon(self) -> None:
        """Stop waiting (the pool's close gives up on an unkillable process)."""
        self._scope.cancel()

    @enable_ki_protection
    async def run(self, process: ChildProcess, stderr: StderrTail) -> None:
        """Wait, reap, sweep, then mark the helper exited (runs in the pool's nursery).

        Args:
            process: The helper's leader process.
            stderr: Its stderr reader, drained once the tree is gone.
        """
        tree = self._tree
        advance, emit, kill = self._advance, self._emit, self._kill
        with self._scope:
            await process.wait()
            self.reaped = True
            self.returncode = process.returncode
            tree.mark_reaped()
            survivors, failures = await tree.sweep(kill)
            self.returncode = tree.exit_status(self.returncode)
            if survivors:
                self.escaped = survivors
                unidentified = tree.unidentified
                if self._helper.state is not HelperState.QUARANTINED:
                    advance(HelperEvent.ESCAPED)
                emit(
                    "escaped",
                    f"{len(survivors)} process(es) of its tree outlived SIGKILL by "
                    f"{kill:g} s: {survivors}"
                    + (
                        f" ({unidentified} not signalled: environment unreadable)"
                        if unidentified
                        else ""
                    )
                    + "; quarantined until they are gone",
                    pids=survivors,
                    unidentified=unidentified,
                    undeliverable=[list(item) for item in failures],
                    containment=tree.mode,
                )
                for pid in survivors:
                    await tree.wait_gone(pid)
        if self._scope.cancelled_caught:
            tree.close()
            return
        tree.close()
        stderr.drain_nowait()
        state = self._helper.state
        quarantined = state is HelperState.QUARANTINED
        expected = self.stopping or state in (
            HelperState.SHUTTING_DOWN,
            HelperState.TERMINATING,
            HelperState.KILLING,
        )
        advance(HelperEvent.REAPED)
        self.exited.set()
        details = exit_details(self.returncode)
        emit(
            "reaped",
            _describe(details, self.returncode),
            level=None if expected and not quarantined else logging.WARNING,
            **details,
            escaped=self.escaped,
        )
        if quarantined:
            emit("released", "gone at last: released from quarantine")
        if self._on_exit is not None:
            self._on_exit()


def _describe(details: dict[str, object], returncode: int | None) -> str:
    if details["signal"]:
        return f"reaped, killed by {details['signal']}"
    return f"reaped, exit code {returncode}"
