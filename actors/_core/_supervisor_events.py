"""How a supervisor reports its decisions: log records and events (design §1.4).

Each decision is a record of the ``actors.supervisor`` logger, with its fields as
``extra``, and, given ``on_event``, a :class:`SupervisorEvent`. Levels: a start, a stop
by the supervisor and a deletion DEBUG; a normal exit, an auto shutdown and the
supervisor's own shutdown INFO; an
abnormal exit, a restart round and a failed restart WARNING; giving up ERROR.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from ._supervisor_spec import SupervisorEvent

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["EventReporter"]

_log = logging.getLogger("actors.supervisor")

_LEVELS = {
    "child_started": logging.DEBUG,
    "child_stopped": logging.DEBUG,
    "child_deleted": logging.DEBUG,
    "auto_shutdown": logging.INFO,
    "shutdown": logging.INFO,
    "child_restarting": logging.WARNING,
    "restart_failed": logging.WARNING,
    "intensity_exceeded": logging.ERROR,
}


class EventReporter:
    """Logs a supervisor's decisions and hands them to its ``on_event``; never raises."""

    __slots__ = ("_max_restarts", "_name", "_on_event", "_period")

    def __init__(
        self,
        name: str,
        on_event: Callable[[SupervisorEvent], object] | None,
        *,
        max_restarts: int,
        period: float,
    ) -> None:
        self._name = name
        self._on_event = on_event
        self._max_restarts = max_restarts
        self._period = period

    def event(
        self, kind: str, child: str, incarnation: int, *, abnormal: bool = False, **fields: Any
    ) -> None:
        """Report one decision about ``child`` (its id) and its incarnation number."""
        if kind == "child_exited":
            level = logging.WARNING if abnormal else logging.INFO
        else:
            level = _LEVELS[kind]
        if _log.isEnabledFor(level):
            extra = {
                "event": kind,
                "supervisor": self._name,
                "child": child,
                "incarnation": incarnation,
                "time": trio.current_time(),
            }
            if kind == "shutdown":
                _log.log(level, "supervisor %r: stopping its children", self._name, extra=extra)
            else:
                extra.update(
                    {f"child_{key}": value for key, value in fields.items() if key != "ref"}
                )
                _log.log(
                    level,
                    "supervisor %r: child %r (incarnation %d) %s",
                    self._name,
                    child,
                    incarnation,
                    self._text(kind, fields),
                    extra=extra,
                )
        if self._on_event is not None:
            event = SupervisorEvent(
                kind=kind,
                supervisor=self._name,
                child=child,
                incarnation=incarnation,
                time=trio.current_time(),
                **fields,
            )
            try:
                self._on_event(event)
            except Exception:
                _log.exception("supervisor %r: on_event raised; ignored", self._name)

    def _text(self, kind: str, fields: dict[str, Any]) -> str:
        if kind == "child_exited":
            return f"exited ({fields.get('reason')})"
        if kind == "child_restarting":
            return f"restarting in {fields.get('delay', 0):g} s"
        if kind == "restart_failed":
            return f"failed to restart ({fields.get('reason')}): the round is retried from it"
        if kind == "intensity_exceeded":
            return f"more than {self._max_restarts} restarts within {self._period:g} s: giving up"
        return {
            "child_started": "started",
            "child_stopped": "stopped by its supervisor",
            "child_deleted": "deleted",
            "auto_shutdown": "ended, a significant child: the supervisor shuts down",
        }[kind]
