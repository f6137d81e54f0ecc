"""Where the runtime's own events go in the event log (design §1.7, §3.10).

The helper pool's steps (:class:`~actors._helpers._events.PoolEvent`) and the
supervision tree's decisions (:class:`~actors._core._supervisor.SupervisorEvent`) are
appended to the event log as log-wide events (no run), so websocket clients that follow
the log see them: ``helper_<kind>`` (e.g. ``helper_reaped``, ``helper_pool_restarted``)
and ``actor_<kind>`` (``actor_started``, ``actor_exited``, ``actor_restarting``,
``actor_intensity_exceeded``).

:class:`EventLogSink` is the one place that knows how: the event log's client API has
no call that appends a log-wide event, so it appends through the running
:class:`~actors._eventlog._eventlog.EventLog` itself (:meth:`~actors.EventLog.record`),
in this process, without waiting (design §6.8: an append is O(1)). While the event log
is being restarted nothing can be appended: those events are counted in
:attr:`EventLogSink.dropped` (and stay in the logging records).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .._core import ActorState

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._eventlog import EventLogActor

__all__ = ["EventLogSink"]

_log = logging.getLogger("actors.runtime")


class EventLogSink:
    """Appends the runtime's events to the running event log (see the module docstring).

    Args:
        current: Returns the running event-log actor, or None while it restarts.
    """

    def __init__(self, current: Callable[[], EventLogActor | None]) -> None:
        self._current = current
        self.appended = 0
        """Events appended so far."""
        self.dropped = 0
        """Events that found no running event log."""

    def append(self, kind: str, data: dict[str, Any]) -> bool:
        """Append one log-wide event; never waits, never raises.

        Returns:
            True if it was appended.
        """
        actor = self._current()
        if actor is None or actor.state is not ActorState.RUNNING or not actor.log.writable:
            self.dropped += 1
            return False
        try:
            actor.log.record(kind, data)
        except Exception:  # a full or broken ledger must not break the runtime
            _log.exception("could not append %s to the event log", kind)
            self.dropped += 1
            return False
        self.appended += 1
        return True
