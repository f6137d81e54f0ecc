"""trio-actors: an actor-model runtime built on trio.

Public names are re-exported here; modules starting with ``_`` are private.
"""

from __future__ import annotations

from ._config import MAX_DURATION as MAX_DURATION
from ._config import validate_count as validate_count
from ._config import validate_duration as validate_duration
from .errors import *  # noqa: F403  (the error hierarchy is public as a whole)
from .errors import __all__ as _error_names

# --- CORE builder exports (actor, ref, mailbox, lifecycle, backoff, supervisor) ---
# --- end CORE ---

# --- POOL builder exports (helper processes, supervisor actor) ---
# --- end POOL ---

# --- SCHED builder exports (scheduler, cache) ---
# --- end SCHED ---

# --- ELOG builder exports (event log, ledger, ports) ---
# --- end ELOG ---

# --- EXAMPLES builder exports (renderer actor) ---
# --- end EXAMPLES ---

# --- lead exports (runtime) ---
# --- end lead ---

__all__ = [
    "MAX_DURATION",
    "validate_count",
    "validate_duration",
    *_error_names,
]
