"""Settings of the scheduler core and actor: workers, kinds, tiers, pacing (design §4).

Pure data, validated at construction (design §1.6); no trio.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any, Final

import attrs

from .._core import count_field, duration_field
from ._kinds import DEFAULT_KINDS, Kind, KindGraph, unordered

__all__ = ["DEFAULT_TIERS", "MAX_TIERS", "SchedulerConfig"]

#: The tiers used when the embedder declares none, best first (design §4.2).
DEFAULT_TIERS: Final = ("selected", "visible", "remaining")
#: Most priority tiers one scheduler accepts.
MAX_TIERS: Final = 8


def _tuple(value: Any) -> Any:
    if isinstance(value, str | bytes | Set):
        return value  # the validator names the field
    try:
        return tuple(value)
    except TypeError:
        return value


def _check_kinds(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    error = unordered(attribute.name, value)
    if error is not None:
        raise error
    if not isinstance(value, tuple):
        raise ValueError(f"{attribute.name} must be a sequence of Kind, got {value!r:.80}")


def _check_tiers(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    error = unordered(attribute.name, value)
    if error is not None:
        raise error
    if (
        not isinstance(value, tuple)
        or not 1 <= len(value) <= MAX_TIERS
        or not all(isinstance(t, str) and 1 <= len(t) <= 64 and t.isprintable() for t in value)
        or len(set(value)) != len(value)
    ):
        raise ValueError(
            f"{attribute.name} must be 1..{MAX_TIERS} distinct printable names, best first, "
            f"got {value!r:.120}"
        )


@attrs.frozen(kw_only=True)
class SchedulerConfig:
    """Settings of the scheduler core and actor (design §4.2-§4.14).

    Raises:
        ValueError: a field is out of range, or the kinds do not form a DAG (design
            §4.11); the message names the field.
    """

    workers: int = count_field(1, minimum=1, maximum=1024)
    """K: how many claims may be active (executing) at once (design §4.3, §4.13)."""
    kinds: tuple[Kind, ...] = attrs.field(
        default=DEFAULT_KINDS, converter=_tuple, validator=_check_kinds
    )
    """The kinds of work per run, in priority order, with their needs, retry policies
    and roles (design §4.11); a set is refused. Default: one kind, ``work``."""
    tiers: tuple[str, ...] = attrs.field(
        default=DEFAULT_TIERS, converter=_tuple, validator=_check_tiers
    )
    """Priority tiers, best first (design §4.2; a set is refused); runs not placed in a
    tier are in the last one. ``set_priority(selected, visible)`` fills the first and
    the second."""
    job_deadline: float = duration_field(15.0, allow_zero=False)
    """Default per-attempt deadline in seconds, for kinds whose policy sets no
    ``attempt_timeout`` (design §4.7, §4.12); at most 300."""
    deadline_grace: float = duration_field(0.5)
    """Seconds after an attempt's deadline before the actor cancels it, so a result
    produced in time but still on its way is judged by when it was produced (§4.14)."""
    page_interval: float = duration_field(0.010)
    """Least seconds between two progressive pages (design §4.5)."""
    cache_io_timeout: float = duration_field(5.0, allow_zero=False)
    """Seconds a payload-cache disk read or write may take; a slower one is abandoned
    (its worker thread finishes on its own) and counts as a miss or a skipped write
    (design §4.10)."""
    aging_after: int = count_field(8, minimum=1)
    """Consecutive claims of better tiers before one last-tier root item (design §4.4)."""
    page_after: int = count_field(3, minimum=0)
    """Same-tier ordinary claims before a due progressive page goes first (design §4.4)."""
    graph: KindGraph = attrs.field(init=False, eq=False, repr=False)
    """The checked DAG of :attr:`kinds` (derived)."""

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "graph", KindGraph(self.kinds, field="kinds"))
