"""The handle to a running supervisor: stopping, the children, dynamic supervision.

:class:`SupervisorRef` is what ``await nursery.start(supervisor.run)`` returns (design
§1.4). Besides stopping the supervisor it offers OTP's child administration (design
§1.10) — ``start_child``, ``terminate_child``, ``restart_child``, ``delete_child``,
``which_children``, ``count_children`` — and the name registry of live references
(:meth:`SupervisorRef.child`, design §1.9). Each call is taken in turn with the
supervisor's restart decisions, as the calls of OTP's supervisor process are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

import trio

from ..errors import ChildAlreadyPresent, ChildNotFound, ChildRunning, ChildStartFailed
from ._child import GONE, STOPPED, Child
from ._config import validate_duration
from ._lifecycle import ActorState
from ._live_ref import LiveRef
from ._supervisor_spec import ChildCounts, ChildInfo, ChildSpec

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._lifecycle import ActorEvent, StateMachine
    from ._supervisor_events import EventReporter

__all__ = ["SupervisorCore", "SupervisorRef"]


class SupervisorCore(Protocol):
    """What :class:`SupervisorRef` needs of the supervisor it drives."""

    _name: str
    _lifecycle: StateMachine[ActorState, ActorEvent]
    _restart_events: int
    _lock: trio.Lock
    _children: list[Child]
    _by_id: dict[str, Child]
    _stopped: trio.Event
    _forget_stopped: bool
    _report: EventReporter

    def _add(self, spec: ChildSpec) -> Child: ...

    def _forget(self, child: Child, *, report: bool = ...) -> None: ...

    def _check_open(self) -> None: ...

    async def _start_first(self, child: Child) -> None: ...

    async def _stop_child(self, child: Child, status: str) -> None: ...

    def _request_stop(self, grace: float) -> None: ...

    def _running_inside(self) -> bool: ...


class SupervisorRef:
    """The handle to a running :class:`Supervisor` (design §1.4, §1.9, §1.10)."""

    __slots__ = ("_sup",)

    def __init__(self, supervisor: SupervisorCore) -> None:
        self._sup = supervisor

    @property
    def name(self) -> str:
        """The supervisor's name."""
        return self._sup._name

    @property
    def state(self) -> ActorState:
        """``running``, then ``stopping``, then ``stopped`` (or ``failed``)."""
        return self._sup._lifecycle.state

    @property
    def restarts(self) -> int:
        """Restarts counted so far (one per restart round, retried rounds included)."""
        return self._sup._restart_events

    # --- the name registry (design §1.9) ----------------------------------------------

    def child(self, id: str) -> LiveRef[Any, Any]:
        """Return the :class:`LiveRef` of child ``id``: it follows the child's restarts.

        The same object for as long as the child belongs to this supervisor. Annotate
        it to type it: ``cache: LiveRef[Get, bytes] = sup.child("cache")``.

        Raises:
            ChildNotFound: (code ``child_not_found``, also a ``KeyError``) no child has
                this id.
        """
        child = self._get(id)
        if child.live is None:
            live: LiveRef[Any, Any] = LiveRef(child)
            child.live = live
        return cast("LiveRef[Any, Any]", child.live)

    def child_supervisor(self, id: str) -> SupervisorRef:
        """Return the running :class:`SupervisorRef` of child ``id``, a supervisor.

        Raises:
            ChildNotFound: (code ``child_not_found``) no child has this id.
            ActorStopped: (code ``actor_stopped``) or ActorRestarting (code
                ``actor_restarting``): no incarnation of it runs now.
            TypeError: the child is not a supervisor.
        """
        child = self._get(id)
        live: LiveRef[Any, Any] = self.child(id)
        ref = child.running_ref()
        if ref is None:
            raise live._absent()
        if not isinstance(ref, SupervisorRef):
            raise TypeError(f"child {id!r} is not a supervisor")
        return ref

    def restart_count(self, id: str) -> int:
        """How many times child ``id`` was started again after its first start.

        Raises:
            ChildNotFound: (code ``child_not_found``) no child has this id.
        """
        return self._get(id).restarts

    # --- OTP's child administration (design §1.10) --------------------------------------

    async def start_child(self, spec: ChildSpec) -> LiveRef[Any, Any]:
        """Add child ``spec`` after the others and start it (OTP ``start_child/2``).

        If it fails to start, the spec is not kept. Always a checkpoint.

        Returns:
            Its :class:`LiveRef`.

        Raises:
            TypeError: ``spec`` is not a :class:`ChildSpec`.
            ChildRunning: (code ``child_running``) a child with this id runs.
            ChildAlreadyPresent: (code ``child_already_present``) a child with this id
                exists but does not run (``restart_child`` or ``delete_child`` it).
            ChildStartFailed: (code ``child_start_failed``) it failed to start, or did
                not within its ``start_timeout`` (reason ``start_timeout``); the message
                names the child and the reason, ``__cause__`` is the error.
            ActorStopped: (code ``actor_stopped``) the supervisor is not running, or was
                stopped while the child started (the start was cancelled).
        """
        return await self._start_child(spec)

    async def _start_child(
        self, spec: ChildSpec, *, admit: Callable[[], None] | None = None
    ) -> LiveRef[Any, Any]:
        # ``admit`` (raising to refuse) runs under the lock, so that a limit such as a
        # dynamic supervisor's ``max_children`` holds against concurrent calls.
        if not isinstance(spec, ChildSpec):
            raise TypeError(f"spec must be a ChildSpec, got {spec!r}")
        sup = self._sup
        async with sup._lock:
            sup._check_open()
            if admit is not None:
                admit()
            existing = sup._by_id.get(spec.id)
            if existing is not None:
                raise self._exists(existing)
            child = sup._add(spec)
            try:
                await sup._start_first(child)
            except BaseException:
                sup._forget(child, report=False)
                raise
            return self.child(spec.id)

    async def terminate_child(self, id: str) -> None:
        """Stop child ``id`` per its ``shutdown``; keep its spec (OTP ``terminate_child/2``).

        Its supervisor will not restart it by itself (``restart_child`` does); a
        temporary child's spec, and any child of a dynamic supervisor, is forgotten.
        Stopping a child that does not run is fine. Always a checkpoint.

        Raises:
            ChildNotFound: (code ``child_not_found``) no child has this id.
            ActorStopped: (code ``actor_stopped``) the supervisor is not running.
        """
        sup = self._sup
        async with sup._lock:
            sup._check_open()
            child = self._get(id)
            forget = child.spec.restart == "temporary" or sup._forget_stopped
            await sup._stop_child(child, GONE if forget else STOPPED)
            if forget:
                sup._forget(child)

    async def restart_child(self, id: str) -> LiveRef[Any, Any]:
        """Start child ``id`` again after ``terminate_child`` (OTP ``restart_child/2``).

        Not counted toward the restart intensity. Always a checkpoint.

        Returns:
            Its :class:`LiveRef`.

        Raises:
            ChildNotFound: (code ``child_not_found``) no child has this id.
            ChildRunning: (code ``child_running``) it runs (or is being restarted).
            ChildStartFailed: (code ``child_start_failed``) it failed to start, or did
                not within its ``start_timeout``; the spec is kept.
            ActorStopped: (code ``actor_stopped``) the supervisor is not running, or was
                stopped while the child started.
        """
        sup = self._sup
        async with sup._lock:
            sup._check_open()
            child = self._get_stopped(id)
            try:
                await sup._start_first(child)
            except ChildStartFailed:
                child.set_status(STOPPED)
                raise
            return self.child(id)

    async def delete_child(self, id: str) -> None:
        """Forget child ``id``, which must not run (OTP ``delete_child/2``).

        Its :class:`LiveRef` then raises ``ActorStopped``. Always a checkpoint.

        Raises:
            ChildNotFound: (code ``child_not_found``) no child has this id.
            ChildRunning: (code ``child_running``) it runs (``terminate_child`` first).
            ActorStopped: (code ``actor_stopped``) the supervisor is not running.
        """
        sup = self._sup
        async with sup._lock:
            sup._check_open()
            child = self._get_stopped(id)
            sup._forget(child)

    def which_children(self) -> list[ChildInfo]:
        """Describe every child, in start order; never waits (OTP ``which_children/1``)."""
        rows: list[ChildInfo] = []
        for child in self._sup._children:
            inc = child.current
            if inc is None:
                state = ActorState.STARTING
            elif inc.ref is None:
                state = ActorState.FAILED if inc.done.is_set() else ActorState.STARTING
            else:
                state = inc.ref.state
            rows.append(
                ChildInfo(
                    id=child.id,
                    state=state,
                    type=child.type,
                    running=child.running,
                    restart=child.spec.restart,
                    restarts=child.restarts,
                    incarnation=0 if inc is None else inc.number,
                    ref=None if inc is None else inc.ref,
                )
            )
        return rows

    def count_children(self) -> ChildCounts:
        """OTP's ``count_children/1``: specs, active, supervisors, workers; never waits."""
        children = self._sup._children
        supervisors = sum(1 for child in children if child.type == "supervisor")
        return ChildCounts(
            specs=len(children),
            active=sum(1 for child in children if child.running),
            supervisors=supervisors,
            workers=len(children) - supervisors,
        )

    # --- stopping -------------------------------------------------------------------

    async def stop(self, grace: float = 5.0) -> None:
        """Stop every child in reverse start order, then return once the supervisor ended.

        Each child is stopped per its ``shutdown`` (grace, brutal kill or infinity); the
        whole shutdown takes at most ``grace`` seconds (trio clock), after which
        remaining children are cancelled. Idempotent; concurrent calls share the
        earliest deadline. Always a checkpoint.

        Called from inside the supervisor (a child's handler or one of its tasks), it
        requests the stop and returns after one checkpoint without waiting: the
        supervisor cannot finish while one of its children waits for it.

        Raises:
            ValueError: ``grace`` is invalid (design §1.6; names ``grace``).
        """
        seconds = validate_duration("grace", grace)
        sup = self._sup
        sup._request_stop(seconds)
        if sup._running_inside() and not sup._stopped.is_set():
            await trio.lowlevel.checkpoint()
            return
        await sup._stopped.wait()

    def stop_nowait(self, grace: float = 5.0) -> None:
        """Request a stop like :meth:`stop`, without waiting for it (design §1.3).

        A later, shorter grace wins: ``stop_nowait(0)`` during a stop cancels every
        child that is left at once (a second Ctrl-C, design §3.13).

        Raises:
            ValueError: ``grace`` is invalid (design §1.6; names ``grace``).
        """
        self._sup._request_stop(validate_duration("grace", grace))

    async def wait_stopped(self) -> None:
        """Wait until the supervisor's ``run`` has ended (stopped or failed)."""
        await self._sup._stopped.wait()

    # --- internals -------------------------------------------------------------------

    def _get(self, id: str) -> Child:
        child = self._sup._by_id.get(id)
        if child is None:
            raise ChildNotFound(
                f"supervisor {self.name!r} has no child {id!r}", supervisor=self.name, child=id
            )
        return child

    def _get_stopped(self, id: str) -> Child:
        child = self._get(id)
        if child.status != STOPPED:
            raise ChildRunning(f"child {id!r} of {self.name!r} is running", child=id)
        return child

    def _exists(self, child: Child) -> ChildRunning | ChildAlreadyPresent:
        if child.status == STOPPED:
            return ChildAlreadyPresent(
                f"child {child.id!r} of {self.name!r} exists and is not running",
                child=child.id,
            )
        return ChildRunning(f"child {child.id!r} of {self.name!r} is running", child=child.id)

    def __repr__(self) -> str:
        return f"<SupervisorRef {self.name!r} {self.state.value}>"
