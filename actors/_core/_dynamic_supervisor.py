"""A supervisor of many children of one spec: OTP's ``simple_one_for_one`` (design §1.10).

Elixir's ``DynamicSupervisor`` is the other model. It starts with no child;
:meth:`DynamicSupervisorRef.start_child` starts a new instance of the template spec with
the arguments given (``template.start(*args)``), as an id of its own
(``"<template id>-<n>"``). Each child is restarted alone (``one_for_one``) per the
template's restart type; a child that will not run again — a temporary child that
ended, a transient child's normal exit, ``terminate_child`` — is forgotten.
``restart_child`` and ``delete_child`` do not apply (OTP answers ``simple_one_for_one``).
"""

from __future__ import annotations

import functools
import itertools
from typing import TYPE_CHECKING, Any, cast

import attrs
import trio

from ..errors import TooManyChildren
from ._config import validate_count
from ._supervisor import Supervisor
from ._supervisor_spec import ChildCounts, ChildInfo, ChildSpec

if TYPE_CHECKING:
    import random
    from collections.abc import Callable

    from ._backoff import Backoff
    from ._lifecycle import ActorState
    from ._live_ref import LiveRef
    from ._supervisor_ref import SupervisorRef
    from ._supervisor_spec import AutoShutdown, Runnable, SupervisorEvent

__all__ = ["DynamicSupervisor", "DynamicSupervisorRef"]


class DynamicSupervisor:
    """Starts children of one spec on demand, and restarts each alone (design §1.10).

    ``max_restarts``, ``period``, ``backoff``, ``name``, ``rng``, ``on_event``,
    ``auto_shutdown`` and ``restart_wait`` are those of :class:`Supervisor`.

    Args:
        template: The spec of every child; its ``start`` takes the arguments given to
            ``start_child``; its id prefixes the children's ids.
        max_children: At most this many children at once (``>= 1``), or None.

    Raises:
        TypeError: ``template`` is not a :class:`ChildSpec`.
        ValueError: ``max_children`` or a :class:`Supervisor` argument is invalid
            (design §1.6; names the parameter).
    """

    def __init__(
        self,
        template: ChildSpec,
        *,
        max_children: int | None = None,
        max_restarts: int = 3,
        period: float = 5.0,
        backoff: Backoff | None = None,
        name: str = "dynamic_supervisor",
        rng: random.Random | None = None,
        on_event: Callable[[SupervisorEvent], object] | None = None,
        auto_shutdown: AutoShutdown = "never",
        restart_wait: float = 5.0,
    ) -> None:
        if not isinstance(template, ChildSpec):
            raise TypeError(f"template must be a ChildSpec, got {template!r}")
        self._template = template
        self._max_children = (
            None if max_children is None else validate_count("max_children", max_children)
        )
        self._supervisor = Supervisor(
            [],
            strategy="one_for_one",
            max_restarts=max_restarts,
            period=period,
            backoff=backoff,
            name=name,
            rng=rng,
            on_event=on_event,
            auto_shutdown=auto_shutdown,
            restart_wait=restart_wait,
        )
        self._supervisor._forget_stopped = True
        self._numbers = itertools.count(1)
        self._ref = DynamicSupervisorRef(self)

    @property
    def ref(self) -> DynamicSupervisorRef:
        """The handle returned by ``nursery.start(dynamic_supervisor.run)``."""
        return self._ref

    async def run(
        self, *, task_status: trio.TaskStatus[DynamicSupervisorRef] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Supervise until stopped; ``task_status.started(ref)`` at once (design §1.10).

        Raises:
            RuntimeError: this supervisor already ran.
            RestartIntensityExceeded: (code ``restart_intensity_exceeded``) its children
                restarted too often; every child was stopped first.
        """
        relay = cast("trio.TaskStatus[SupervisorRef]", _Relay(task_status, self._ref))
        await self._supervisor.run(task_status=relay)

    def __repr__(self) -> str:
        return f"<DynamicSupervisor {self._supervisor._name!r}>"


class _Relay:
    """Passes the dynamic supervisor's ref on instead of the inner one."""

    __slots__ = ("_ref", "_status")

    def __init__(
        self, status: trio.TaskStatus[DynamicSupervisorRef], ref: DynamicSupervisorRef
    ) -> None:
        self._status = status
        self._ref = ref

    def started(self, value: object = None) -> None:
        self._status.started(self._ref)


class DynamicSupervisorRef:
    """The handle to a running :class:`DynamicSupervisor` (design §1.10)."""

    __slots__ = ("_dyn", "_inner")

    def __init__(self, dynamic: DynamicSupervisor) -> None:
        self._dyn = dynamic
        self._inner: SupervisorRef = dynamic._supervisor.ref

    @property
    def name(self) -> str:
        """The supervisor's name."""
        return self._inner.name

    @property
    def state(self) -> ActorState:
        """``running``, then ``stopping``, then ``stopped`` (or ``failed``)."""
        return self._inner.state

    @property
    def restarts(self) -> int:
        """Restarts counted so far (one per restart round)."""
        return self._inner.restarts

    async def start_child(self, *args: Any) -> LiveRef[Any, Any]:
        """Start a new child: ``template.start(*args)`` (OTP ``start_child/2``).

        Always a checkpoint.

        Returns:
            The new child's :class:`LiveRef`; its ``name`` is the child's id.

        Raises:
            TooManyChildren: (code ``max_children``, transient) ``max_children`` run.
            ChildStartFailed: (code ``child_start_failed``) it failed to start.
            ActorStopped: (code ``actor_stopped``) the supervisor is not running, or was
                stopped while the child started.
        """
        dyn = self._dyn
        template = dyn._template
        start = cast("Callable[..., Runnable]", template.start)
        spec = attrs.evolve(
            template,
            id=f"{template.id}-{next(dyn._numbers)}",
            start=functools.partial(start, *args),
        )
        return await self._inner._start_child(spec, admit=self._admit)

    def _admit(self) -> None:
        # Under the supervisor's lock: the children starting count as well.
        dyn = self._dyn
        limit = dyn._max_children
        if limit is not None and len(dyn._supervisor._children) >= limit:
            raise TooManyChildren(
                f"dynamic supervisor {self.name!r} already has {limit} children",
                supervisor=self.name,
                max_children=limit,
            )

    async def terminate_child(self, id: str) -> None:
        """Stop child ``id`` and forget it (OTP ``terminate_child/2`` with a pid).

        Raises:
            ChildNotFound: (code ``child_not_found``) no child has this id.
            ActorStopped: (code ``actor_stopped``) the supervisor is not running.
        """
        await self._inner.terminate_child(id)

    def child(self, id: str) -> LiveRef[Any, Any]:
        """The :class:`LiveRef` of child ``id``.

        Raises:
            ChildNotFound: (code ``child_not_found``) no child has this id.
        """
        return self._inner.child(id)

    def which_children(self) -> list[ChildInfo]:
        """Describe every child, in start order; never waits."""
        return self._inner.which_children()

    def count_children(self) -> ChildCounts:
        """OTP's counts for ``simple_one_for_one``: one spec, and the children."""
        counts = self._inner.count_children()
        return attrs.evolve(counts, specs=1)

    async def stop(self, grace: float = 5.0) -> None:
        """Stop every child (reverse start order) within ``grace`` s; see ``SupervisorRef.stop``.

        Raises:
            ValueError: ``grace`` is invalid (design §1.6; names ``grace``).
        """
        await self._inner.stop(grace)

    def stop_nowait(self, grace: float = 5.0) -> None:
        """Request a stop without waiting for it.

        Raises:
            ValueError: ``grace`` is invalid (design §1.6; names ``grace``).
        """
        self._inner.stop_nowait(grace)

    async def wait_stopped(self) -> None:
        """Wait until the supervisor's ``run`` has ended."""
        await self._inner.wait_stopped()

    def __repr__(self) -> str:
        return f"<DynamicSupervisorRef {self.name!r} {self.state.value}>"
