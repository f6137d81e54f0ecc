"""Messages of the scheduler actor, what ``execute`` gets, and the actor's own notices.

Pure data (attrs frozen classes, design §4). The actor is
:class:`actors._scheduler._actor.SchedulerActor`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from .._core import show_value

if TYPE_CHECKING:
    from ._cache import CacheStatistics, DiskCacheStatistics
    from ._events import SchedulerStatistics
    from ._state import Claim, RunInfo

__all__ = [
    "FormatChanged",
    "GetSchedulerStatistics",
    "HelperRestarted",
    "Reconcile",
    "RunStarted",
    "SchedulerActorStatistics",
    "SchedulerJob",
    "SetPriority",
    "SetTiers",
    "SourceChanged",
    "SwitchSource",
]


def _runs(value: Iterable[RunInfo]) -> tuple[RunInfo, ...]:
    return tuple(value)


def _ids(value: Iterable[int]) -> tuple[int, ...]:
    # Typed, unlike ``converter=tuple`` (mypy's attrs plugin: python/mypy#5313).
    return tuple(value)


def _check_str(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{attribute.name} must be a str, got {show_value(value)}")


def _kind_names(value: Any) -> Any:
    if value is None or isinstance(value, str | bytes):
        return value  # the validator names the field (a str is not a set of names)
    try:
        return frozenset(value)
    except TypeError:  # not iterable, or unhashable items
        return value


def _check_kinds(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (
        not isinstance(value, frozenset) or not all(isinstance(k, str) for k in value)
    ):
        raise ValueError(
            f"{attribute.name} must be a collection of kind names or None, got {show_value(value)}"
        )


def _placements(value: Mapping[str, Iterable[int]]) -> dict[str, tuple[int, ...]]:
    if not isinstance(value, Mapping):
        raise ValueError(f"placements must map tier names to run ids, got {value!r:.80}")
    return {name: tuple(ids) for name, ids in value.items()}


@attrs.frozen(kw_only=True)
class SetPriority:
    """Choose the selected run (first tier) and the visible runs (second) (§4.2)."""

    selected: int | None = None
    """The selected run's id, or None."""
    visible: tuple[int, ...] = attrs.field(default=(), converter=_ids)
    """Ids of the runs in the viewport."""


@attrs.frozen(kw_only=True)
class SetTiers:
    """Place runs in the declared tiers; the rest go to the last one (design §4.2)."""

    placements: dict[str, tuple[int, ...]] = attrs.field(converter=_placements)
    """Tier name -> run ids."""


@attrs.frozen(kw_only=True)
class SourceChanged:
    """A run's source data changed (design §4.8); deferred while its job is active."""

    run_id: int
    revision: str | None = None
    """The new revision, or None to make one up."""


@attrs.frozen(kw_only=True)
class Reconcile:
    """The source's full run list: append-only (design §4.8)."""

    runs: tuple[RunInfo, ...] = attrs.field(converter=_runs)


@attrs.frozen(kw_only=True)
class SwitchSource:
    """Serve another source: a new generation; older results are stale (design §4.8).

    Raises:
        ValueError: ``source`` is not a str.
    """

    source: str = attrs.field(validator=_check_str)
    """Identity of the new source (part of every cache key, design §4.10)."""
    runs: tuple[RunInfo, ...] = attrs.field(converter=_runs)


@attrs.frozen(kw_only=True)
class HelperRestarted:
    """The helper was restarted; results of its old incarnation are invalid (§4.8)."""


@attrs.frozen(kw_only=True)
class FormatChanged:
    """The renderer version or options changed: new cache keys, failures retried (§4.6).

    Raises:
        ValueError: a field has the wrong type (a str is not a collection of kinds); the
            message names it.
    """

    renderer_version: str = attrs.field(validator=_check_str)
    """Part of the payload cache key (design §4.10)."""
    options: str = attrs.field(validator=_check_str)
    """Canonical text of the rendering options (e.g. sorted-key JSON)."""
    kinds: frozenset[str] | None = attrs.field(
        default=None, converter=_kind_names, validator=_check_kinds
    )
    """Kinds whose format changed; None for all."""


@attrs.frozen(kw_only=True)
class GetSchedulerStatistics:
    """Ask for a :class:`SchedulerActorStatistics`."""


@attrs.frozen(kw_only=True)
class SchedulerJob:
    """What ``execute`` is called with: one attempt (design §4.11-§4.14)."""

    claim: Claim
    """The attempt: run, kind, revision, attempt number, absolute deadline (trio
    clock seconds)."""
    observation: Any = None
    """The result of the first kind this kind needs, from the observation cache, or
    None (a kind that needs nothing, or an evicted result: then read it again)."""
    inputs: Mapping[str, Any] = attrs.field(factory=dict)
    """Needed kind -> its published result at this revision, for each one still in the
    observation cache (design §4.10)."""


@attrs.frozen(kw_only=True)
class RunStarted:
    """The first claim of a run at a revision (for the event log's ``job_started``)."""

    run_id: int
    guid: str
    revision: str
    kind: str


@attrs.frozen(kw_only=True)
class SchedulerActorStatistics:
    """A snapshot of the scheduler actor, the answer to :class:`GetSchedulerStatistics`."""

    core: SchedulerStatistics
    workers: int
    busy: int
    """Workers running an attempt now (including one still stopping, design §4.13)."""
    events_queued: int
    """Events waiting for the reader (outbox + channel buffer)."""
    cancelled_stale: int
    """Jobs cancelled because they became stale."""
    observations: CacheStatistics
    payload_memory: CacheStatistics | None
    payload_disk: DiskCacheStatistics | None
    disk_errors: int
    """Disk cache reads or writes that failed with ``OSError`` or took longer than
    ``cache_io_timeout`` (treated as misses or skipped writes)."""
    stopped: int = 0
    """Attempts the actor cancelled at their deadline plus grace (design §4.14)."""
    callback_errors: int = 0
    """Calls of the embedder's ``observation_size``, ``payload_to_bytes`` or
    ``payload_from_bytes`` that raised (logged; the result is kept uncached)."""
    disk_aborted: int = 0
    """Disk cache reads or writes cut short by the actor's stop: their thread stopped at
    its next chunk and was waited for; a write left nothing behind (design §4.10)."""
