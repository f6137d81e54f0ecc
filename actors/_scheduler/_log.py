"""``logging`` records of the scheduler's decisions (design §4.12).

Every event the scheduler actor forwards is also one record on the ``actors.scheduler``
logger, its fields in ``extra`` (``scheduler_event``, ``run_id``, ``guid``, ``kind``,
``revision`` and, as they apply, ``attempt``, ``reason``, ``code``, ``category``,
``not_before``, ``at``), so a log pipeline can filter on them. Ends of work items are
``INFO`` (published) or ``WARNING`` (failed, or interrupted by the shutdown); dropped
attempts, parks and settlements are ``DEBUG``.
"""

from __future__ import annotations

import logging
from typing import Any

from ._events import (
    Dropped,
    Failed,
    Interrupted,
    Invalidated,
    Parked,
    Published,
    Retrying,
    Settled,
)

__all__ = ["LOGGER", "log_event"]

LOGGER = logging.getLogger("actors.scheduler")


_LEVELS: dict[type, int] = {
    Published: logging.INFO,
    Failed: logging.WARNING,
    Interrupted: logging.WARNING,
    Retrying: logging.INFO,
    Dropped: logging.DEBUG,
    Parked: logging.DEBUG,
    Invalidated: logging.INFO,
    Settled: logging.DEBUG,
}


def log_event(event: Any) -> None:
    """Write one record for ``event`` (a core event or a stopped attempt's note)."""
    level = _LEVELS.get(type(event))
    if level is None or not LOGGER.isEnabledFor(level):
        return  # nothing is built for a record nobody keeps
    if isinstance(event, Published):
        fields = _fields(event, "published", attempt=event.attempt)
        LOGGER.info(
            "run %s: %s published (attempt %d)",
            event.run_id, event.kind, event.attempt, extra=fields,
        )  # fmt: skip
    elif isinstance(event, Failed):
        error = event.error
        fields = _fields(
            event, "failed", reason=event.reason, attempt=event.attempts,
            code=error.code, category=error.category, cause_kind=event.cause_kind,
        )  # fmt: skip
        LOGGER.warning(
            "run %s: %s failed (%s after %d attempts): %s: %s",
            event.run_id, event.kind, event.reason, event.attempts, error.code, error.message,
            extra=fields,
        )  # fmt: skip
    elif isinstance(event, Interrupted):
        fields = _fields(event, "interrupted", attempt=event.attempt, at=event.at)
        LOGGER.warning(
            "run %s: %s attempt %d interrupted by the shutdown; still to do",
            event.run_id, event.kind, event.attempt, extra=fields,
        )  # fmt: skip
    elif isinstance(event, Retrying):
        error = event.error
        fields = _fields(
            event, "retrying", attempt=event.attempt, not_before=event.not_before,
            code=error.code, category=error.category,
        )  # fmt: skip
        LOGGER.info(
            "run %s: %s attempt %d failed (%s); retry at %.6g s",
            event.run_id, event.kind, event.attempt, error.code, event.not_before, extra=fields,
        )  # fmt: skip
    elif isinstance(event, Dropped):
        fields = _fields(event, "dropped", reason=event.reason)
        LOGGER.debug(
            "run %s: stale %s attempt dropped (%s)",
            event.run_id, event.kind, event.reason, extra=fields,
        )  # fmt: skip
    elif isinstance(event, Parked):
        fields = _fields(event, "parked")
        LOGGER.debug("run %s: %s parked (still being written)", event.run_id, event.kind,
                     extra=fields)  # fmt: skip
    elif isinstance(event, Invalidated):
        fields = {"scheduler_event": "invalidated", "run_id": event.run_id,
                  "guid": event.guid, "revision": event.revision}  # fmt: skip
        LOGGER.info("run %s: source changed, revision %s", event.run_id, event.revision,
                    extra=fields)  # fmt: skip
    elif isinstance(event, Settled):
        fields = {"scheduler_event": "settled", "run_id": event.run_id, "guid": event.guid,
                  "revision": event.revision, "failed_kinds": event.failed}  # fmt: skip
        LOGGER.debug("run %s: settled (%d published, %d failed)", event.run_id,
                     len(event.published), len(event.failed), extra=fields)  # fmt: skip


def _fields(event: Any, name: str, **more: Any) -> dict[str, Any]:
    return {
        "scheduler_event": name,
        "run_id": event.run_id,
        "guid": event.guid,
        "kind": event.kind,
        "revision": event.revision,
        **more,
    }
