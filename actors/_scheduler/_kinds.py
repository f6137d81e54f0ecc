"""The embedder's declaration of the kinds of work per run and their DAG (design §4.11).

A :class:`Kind` names one kind of work, the kinds it needs (each must be conclusive,
i.e. published at the run's revision, before it may start), its
:class:`~actors._scheduler._retry.RetryPolicy`, and how its results are treated (helper
fencing, progressive parking, payload caching). :class:`KindGraph` is the checked,
indexed form the scheduler core uses: kinds are numbered in declaration order, which is
also their priority order within a tier (design §4.2). Pure data: no trio, no I/O.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any, Final

import attrs

from .._core import show_value
from ._retry import RetryPolicy

__all__ = ["MAX_KINDS", "Kind", "KindGraph", "unordered"]

#: Most kinds one scheduler accepts (every run holds one slot per kind, design §4.3).
MAX_KINDS: Final = 32


def _check_name(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not 1 <= len(value) <= 64 or not value.isprintable():
        raise ValueError(
            f"{attribute.name} must be a printable str of 1..64 characters, got {show_value(value)}"
        )


def _names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str | bytes | Set):
        return value  # type: ignore[return-value]  # the validator names the field
    try:
        return tuple(value)
    except TypeError:
        return value  # type: ignore[no-any-return]


def _check_bool(instance: object, attribute: attrs.Attribute[bool], value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{attribute.name} must be True or False, got {show_value(value)}")


def _check_retry(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, RetryPolicy):
        raise ValueError(f"{attribute.name} must be a RetryPolicy, got {show_value(value)}")


def unordered(field: str, value: object) -> ValueError | None:
    """The error for a set given where order has a meaning (priority, first need)."""
    if not isinstance(value, Set):
        return None
    # A set's order changes from one process to the next (str hashes are randomised).
    return ValueError(
        f"{field} must be an ordered sequence (its order has a meaning), "
        f"got a {type(value).__name__}"
    )


def _check_needs(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    error = unordered(attribute.name, value)
    if error is not None:
        raise error
    if not isinstance(value, tuple) or not all(isinstance(name, str) for name in value):
        raise ValueError(f"{attribute.name} must be a sequence of kind names, got {value!r:.80}")
    if len(set(value)) != len(value):
        raise ValueError(f"{attribute.name} names a kind twice: {value!r:.80}")


@attrs.frozen(kw_only=True)
class Kind:
    """One kind of work per run, declared by the embedder (design §4.11).

    Raises:
        ValueError: a field is invalid; the message names it.
    """

    name: str = attrs.field(validator=_check_name)
    """The kind's name, e.g. ``"metadata"``; carried by claims and events."""
    needs: tuple[str, ...] = attrs.field(default=(), converter=_names, validator=_check_needs)
    """Kinds that must be conclusive (published at the run's revision) first, in order:
    the first one's result is the job's ``observation``. A set is refused."""
    retry: RetryPolicy = attrs.field(factory=RetryPolicy, validator=_check_retry)
    """Backoff, attempt limits and deadlines of this kind (design §4.12)."""
    helper: bool = attrs.field(default=False, validator=_check_bool)
    """Its results come from a helper process: ``helper_restarted`` fences them (§4.8)."""
    progressive: bool = attrs.field(default=False, validator=_check_bool)
    """It may answer :class:`~actors.Progressive` ("still being written"): parked and
    re-polled (design §4.5). At most one kind per declaration."""
    cached: bool = attrs.field(default=False, validator=_check_bool)
    """Its results go to the payload cache (design §4.10)."""


class KindGraph:
    """The checked, indexed declaration of kinds: the DAG the core walks (design §4.11).

    Args:
        kinds: The declaration, in priority order.
        field: Name used in error messages (the configuration field).

    Raises:
        ValueError: no kinds, more than :data:`MAX_KINDS`, a repeated name, a kind that
            needs an unknown kind or itself, a cycle, or more than one progressive
            kind; the message starts with ``field``.
    """

    __slots__ = (
        "cached",
        "dependents",
        "downstream",
        "feeds",
        "helper",
        "index",
        "kinds",
        "names",
        "needs",
        "policies",
        "progressive",
        "roots",
        "topo",
    )

    def __init__(self, kinds: tuple[Kind, ...], *, field: str = "kinds") -> None:
        if not kinds or len(kinds) > MAX_KINDS:
            raise ValueError(f"{field} must declare 1..{MAX_KINDS} kinds, got {len(kinds)}")
        for kind in kinds:
            if not isinstance(kind, Kind):
                raise ValueError(f"{field} must hold Kind declarations, got {kind!r:.80}")
        names = tuple(kind.name for kind in kinds)
        index = {name: k for k, name in enumerate(names)}
        if len(index) != len(names):
            repeated = next(name for name in names if names.count(name) > 1)
            raise ValueError(f"{field}: kind {repeated!r} is declared twice")
        needs: list[tuple[int, ...]] = []
        for kind in kinds:
            for need in kind.needs:
                if need == kind.name:
                    raise ValueError(f"{field}: kind {kind.name!r} needs itself")
                if need not in index:
                    raise ValueError(f"{field}: kind {kind.name!r} needs unknown kind {need!r}")
            needs.append(tuple(index[need] for need in kind.needs))
        progressive = [k for k, kind in enumerate(kinds) if kind.progressive]
        if len(progressive) > 1:
            raise ValueError(
                f"{field}: at most one kind may be progressive, got "
                f"{[names[k] for k in progressive]}"
            )
        self.kinds = kinds
        self.names = names
        self.index = index
        self.needs = tuple(needs)
        """Per kind: the indexes of the kinds it needs."""
        self.dependents = tuple(
            tuple(d for d in range(len(kinds)) if k in needs[d]) for k in range(len(kinds))
        )
        """Per kind: the indexes of the kinds that need it directly."""
        downstream = [self._downstream(k, field) for k in range(len(kinds))]
        self.topo = self._topological()
        """Every kind, each after all the kinds it needs (declaration order breaks ties)."""
        position = {k: p for p, k in enumerate(self.topo)}
        self.downstream = tuple(tuple(sorted(ks, key=position.__getitem__)) for ks in downstream)
        """Per kind: every kind that needs it, directly or not, in :attr:`topo` order."""
        self.roots = tuple(k for k in range(len(kinds)) if not needs[k])
        """Kinds that need nothing: pending as soon as a run (revision) is known."""
        self.progressive = progressive[0] if progressive else -1
        """Index of the progressive kind, or -1."""
        self.helper = frozenset(k for k, kind in enumerate(kinds) if kind.helper)
        self.cached = frozenset(k for k, kind in enumerate(kinds) if kind.cached)
        self.feeds = frozenset(k for k in range(len(kinds)) if self.dependents[k])
        """Kinds whose results others need: kept in the observation cache (§4.10)."""
        self.policies = tuple(kind.retry for kind in kinds)

    def __len__(self) -> int:
        return len(self.kinds)

    def _downstream(self, k: int, field: str) -> tuple[int, ...]:
        # Depth-first over "is needed by"; meeting ``k`` again is a cycle.
        seen: list[int] = []
        stack = list(self.dependents[k])
        while stack:
            d = stack.pop()
            if d == k:
                raise ValueError(f"{field}: the needs of kind {self.names[k]!r} form a cycle")
            if d not in seen:
                seen.append(d)
                stack.extend(self.dependents[d])
        return tuple(sorted(seen))

    def _topological(self) -> tuple[int, ...]:
        # Kahn's algorithm, smallest index first; the graph has no cycle (checked).
        waiting = [len(needs) for needs in self.needs]
        ready = [k for k, count in enumerate(waiting) if count == 0]
        order: list[int] = []
        while ready:
            k = min(ready)
            ready.remove(k)
            order.append(k)
            for d in self.dependents[k]:
                waiting[d] -= 1
                if waiting[d] == 0:
                    ready.append(d)
        return tuple(order)

    def lookup(self, name: object, field: str) -> int:
        """The index of kind ``name``.

        Raises:
            ValueError: not a declared kind; the message names ``field``.
        """
        k = self.index.get(name) if isinstance(name, str) else None
        if k is None:
            raise ValueError(f"{field}: {name!r:.80} is not a declared kind {list(self.names)}")
        return k


#: The declaration used when the embedder declares none: one kind per run.
DEFAULT_KINDS: Final = (Kind(name="work"),)
