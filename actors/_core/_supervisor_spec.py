"""What a :class:`~actors._core._supervisor.Supervisor` is given and reports (design §1.4, §1.10).

The child specs (:class:`ChildSpec`), the rows of ``which_children`` (:class:`ChildInfo`),
the counts of ``count_children`` (:class:`ChildCounts`) and the decisions given to
``on_event`` (:class:`SupervisorEvent`), as data; kept apart from the supervisor's logic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import attrs

from protocol.errors import describe_exception

from ..errors import ActorError
from ._config import validate_duration

if TYPE_CHECKING:
    from collections.abc import Callable

    import trio

    from ._lifecycle import ActorState

__all__ = [
    "BRUTAL_KILL",
    "INFINITY",
    "AutoShutdown",
    "ChildCounts",
    "ChildInfo",
    "ChildRef",
    "ChildSpec",
    "RestartType",
    "Strategy",
    "SupervisorEvent",
]

Strategy = Literal["one_for_one", "one_for_all", "rest_for_one"]
RestartType = Literal["permanent", "transient", "temporary"]
AutoShutdown = Literal["never", "any_significant", "all_significant"]
ChildType = Literal["worker", "supervisor"]

#: ``ChildSpec.shutdown`` value meaning "cancel the child at once".
BRUTAL_KILL: Final = "brutal_kill"
#: ``ChildSpec.shutdown`` value meaning "wait for the child's own shutdown, however
#: long": meant for children that are supervisors, whose own children's shutdowns bound
#: it (design §1.10). The stopping supervisor's own grace still bounds the whole stop.
INFINITY: Final = "infinity"

STRATEGIES: Final = ("one_for_one", "one_for_all", "rest_for_one")
RESTART_TYPES: Final = ("permanent", "transient", "temporary")
AUTO_SHUTDOWNS: Final = ("never", "any_significant", "all_significant")


class ChildRef(Protocol):
    """What a supervisor needs of a running child: an ``ActorRef`` or ``SupervisorRef``."""

    @property
    def name(self) -> str: ...

    @property
    def state(self) -> ActorState: ...

    async def stop(self, grace: float = ...) -> None: ...


class Runnable(Protocol):
    """What ``ChildSpec.start`` makes: an :class:`Actor` or a :class:`Supervisor`."""

    async def run(self, *, task_status: trio.TaskStatus[Any] = ...) -> None: ...


@attrs.frozen(kw_only=True)
class SupervisorEvent:
    """One decision of a supervisor (design §1.7), given to its ``on_event``."""

    kind: str
    """``child_started``, ``child_exited`` (it ended by itself), ``child_stopped`` (its
    supervisor stopped it: a sibling's restart, ``terminate_child``, or the supervisor's
    own stop), ``child_restarting`` (a restart round begins), ``restart_failed`` (a
    restart attempt failed to start the child; the round is retried from it),
    ``child_deleted`` (``delete_child``, or a temporary child's end removed its spec),
    ``intensity_exceeded``, ``auto_shutdown`` (a significant child ended, design
    §1.10) or ``shutdown`` (the supervisor stops its children: a stop was asked for, or
    an auto shutdown)."""
    supervisor: str
    """The supervisor's name."""
    child: str
    """The child's id (empty for ``shutdown``)."""
    incarnation: int
    """The child's incarnation the event is about (1 for its first start; 0 for
    ``shutdown``)."""
    time: float
    """When, seconds on trio's clock."""
    ref: ChildRef | None = None
    """``child_started``: the new incarnation's ref."""
    reason: str | None = None
    """``child_exited`` and ``restart_failed``: ``"normal"``, ``"start_timeout"`` (a
    start took longer than ``ChildSpec.start_timeout``), or the error's code (an
    ``ActorError``) or type."""
    message: str | None = None
    """``child_exited`` and ``restart_failed``: the error, bounded to 1 KiB, or None
    after a normal exit."""
    delay: float | None = None
    """``child_restarting``: seconds of backoff before the restart."""

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-compatible data (the ref left out)."""
        return attrs.asdict(self, filter=lambda attribute, value: attribute.name != "ref")


def _check_id(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"id must be a non-empty str, got {value!r}")


def _shutdown_converter(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= 10**300:
        return float(value)
    return value  # the validator names junk (and an int too large for a float)


def _check_shutdown(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value in (BRUTAL_KILL, INFINITY) and isinstance(value, str):
        return
    validate_duration("shutdown", value)


def _check_start_timeout(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    validate_duration("start_timeout", value, allow_zero=False)


def _check_significant(
    instance: ChildSpec, attribute: attrs.Attribute[bool], value: object
) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"significant must be a bool, got {value!r}")
    if value and instance.restart == "permanent":
        raise ValueError("significant must be False for a permanent child (it never ends)")


@attrs.frozen
class ChildSpec:
    """How to start, restart and stop one child of a :class:`Supervisor` (design §1.4).

    Raises:
        ValueError: ``id`` is empty, ``restart`` is unknown, ``shutdown`` is neither
            ``"brutal_kill"``, ``"infinity"`` nor a valid duration (design §1.6; names
            ``shutdown``), ``start_timeout`` is not a valid duration above 0 (names
            ``start_timeout``), or ``significant`` is set on a permanent child.
        TypeError: ``start`` is not callable, or ``significant`` is not a bool.
    """

    id: str = attrs.field(validator=_check_id)
    """Unique name of the child within its supervisor."""
    start: Callable[[], Runnable] = attrs.field(validator=attrs.validators.is_callable())
    """Makes a fresh actor (or supervisor) instance for each incarnation (e.g. the
    actor class)."""
    restart: RestartType = attrs.field(
        default="permanent", validator=attrs.validators.in_(RESTART_TYPES)
    )
    """``permanent``, ``transient`` or ``temporary``."""
    shutdown: float | Literal["brutal_kill", "infinity"] = attrs.field(
        default=5.0, converter=_shutdown_converter, validator=_check_shutdown
    )
    """Grace in seconds (trio clock) for ``ActorRef.stop``, ``"brutal_kill"``, or
    ``"infinity"`` (no grace of its own: for supervisor children, design §1.10)."""
    significant: bool = attrs.field(default=False, validator=_check_significant)
    """Whether its end (by itself, not restarted) may shut its supervisor down, per the
    supervisor's ``auto_shutdown`` (design §1.10). Only for transient or temporary
    children."""
    start_timeout: float = attrs.field(default=5.0, converter=_shutdown_converter,
                                       validator=_check_start_timeout)  # fmt: skip
    """Seconds (trio clock) one start (``on_start``, or a child supervisor's first
    starts) may take; a longer start is a failed start, reason ``start_timeout``
    (design §1.4). OTP waits forever by default; we bound it, as every wait, so that a
    hanging start cannot hold the supervisor's calls and restarts. Give a child
    supervisor more than the sum of its children's."""


@attrs.frozen(kw_only=True)
class ChildInfo:
    """One row of :meth:`SupervisorRef.which_children` (design §1.10)."""

    id: str
    """The child's id."""
    state: ActorState
    """Lifecycle state of the current (or last) incarnation."""
    type: ChildType
    """``worker`` (an actor) or ``supervisor``, as OTP's child type."""
    running: bool
    """True while an incarnation runs (OTP lists a pid, not ``undefined``)."""
    restart: RestartType
    """The child's restart type."""
    restarts: int
    """How many times this child was started again after its first start."""
    incarnation: int
    """1 for the first start, then +1 per restart."""
    ref: ChildRef | None
    """The current incarnation's ref; None if it failed before it could start."""


@attrs.frozen(kw_only=True)
class ChildCounts:
    """What :meth:`SupervisorRef.count_children` returns: OTP's four counts (§1.10)."""

    specs: int
    """Child specs the supervisor holds, running or not (a dynamic supervisor: 1)."""
    active: int
    """Children with a running incarnation."""
    supervisors: int
    """Children (running or not) that are supervisors."""
    workers: int
    """Children (running or not) that are workers (actors)."""


def exit_reason(error: BaseException | None) -> tuple[str, str | None]:
    """``("normal", None)``, or the error's code (or type) and bounded text."""
    if error is None:
        return "normal", None
    code = error.code if isinstance(error, ActorError) else type(error).__name__
    return code, describe_exception(error)
