"""In-process supervision with Erlang/OTP semantics (design §1.4).

A :class:`Supervisor` starts its children (actors described by :class:`ChildSpec`) in
order, in its own nursery, each in its own cancel scope, and restarts them when they
exit, according to:

* the **strategy**: ``one_for_one`` restarts only the child that exited;
  ``one_for_all`` stops every other child (reverse start order) and restarts all;
  ``rest_for_one`` stops the children started after it (reverse order) and restarts
  it and them;
* the child's **restart type**: ``permanent`` (always restarted), ``transient``
  (restarted only after an abnormal exit, i.e. an exception; a normal return or an
  outside stop is a normal exit) or ``temporary`` (never restarted, not even when a
  sibling's restart stops it);
* the **restart intensity**: more than ``max_restarts`` restarts within ``period``
  seconds (inclusive) and the supervisor gives up: it stops all children in reverse
  start order and raises :class:`~actors.errors.RestartIntensityExceeded` to its
  parent;
* a capped exponential **backoff** before each restart (per child, reset after a
  quiet period, :mod:`actors._core._backoff`);
* the child's **shutdown**: a grace period in seconds (``ActorRef.stop(grace)``) or
  ``"brutal_kill"`` (its cancel scope is cancelled at once).

A child may itself be a :class:`Supervisor` (a supervision tree, design §1.7): its
``run`` is started like an actor's, and its :class:`SupervisorRef` stops it.

Every decision is a log record of the ``actors.supervisor`` logger (a child that
exited abnormally and its restart: WARNING; intensity exceeded: ERROR; a start: DEBUG)
and, given ``on_event``, a :class:`SupervisorEvent` (design §1.7).

Usage::

    sup = Supervisor([ChildSpec("cache", Cache), ChildSpec("db", Db)],
                     strategy="rest_for_one")
    ref = await nursery.start(sup.run)
    await ref.child("cache").ask("get", timeout=1.0)
    await ref.stop()

No task outlives the supervisor's nursery.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

import trio

from ..errors import RestartIntensityExceeded
from ._actor import _only_cancelled
from ._backoff import Backoff, BackoffTracker
from ._config import validate_count, validate_duration
from ._lifecycle import ActorEvent, ActorState, new_actor_lifecycle
from ._ref import enter_owner, inside, leave_owner
from ._supervisor_spec import (
    BRUTAL_KILL,
    STRATEGIES,
    ChildInfo,
    ChildRef,
    ChildSpec,
    RestartType,
    Runnable,
    Strategy,
    SupervisorEvent,
    exit_reason,
)

if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Sequence

    from ._actor import Actor

__all__ = [
    "BRUTAL_KILL",
    "ChildInfo",
    "ChildRef",
    "ChildSpec",
    "RestartType",
    "Strategy",
    "Supervisor",
    "SupervisorEvent",
    "SupervisorRef",
]

_log = logging.getLogger("actors.supervisor")


class _Incarnation:
    """One run of a child: one actor instance, in its own cancel scope."""

    __slots__ = ("actor", "done", "error", "number", "ref", "scope", "started", "stopping")

    def __init__(self, number: int, actor: Runnable) -> None:
        self.number = number
        self.actor = actor
        self.ref: ChildRef | None = None
        self.scope = trio.CancelScope()
        self.done = trio.Event()
        self.error: BaseException | None = None
        self.started = False
        self.stopping = False  # the supervisor stopped it: its exit is not reported


class _StartedRelay:
    """A ``task_status`` that records the child's ref before passing it on."""

    __slots__ = ("_inc", "_status")

    def __init__(self, inc: _Incarnation, status: trio.TaskStatus[ChildRef]) -> None:
        self._inc = inc
        self._status = status

    def started(self, value: ChildRef | None = None) -> None:
        assert value is not None
        self._inc.ref = value
        self._inc.started = True
        self._status.started(value)


class _Child:
    __slots__ = ("current", "index", "last_ref", "restarts", "spec", "tracker")

    def __init__(self, index: int, spec: ChildSpec, tracker: BackoffTracker) -> None:
        self.index = index
        self.spec = spec
        self.tracker = tracker
        self.restarts = 0
        self.current: _Incarnation | None = None
        self.last_ref: ChildRef | None = None


class Supervisor:
    """Starts, watches and restarts in-process actors (design §1.4).

    Args:
        children: The child specs, in start order; ids must be unique.
        strategy: ``"one_for_one"``, ``"one_for_all"`` or ``"rest_for_one"``.
        max_restarts: Restarts allowed within ``period`` (``>= 0``); one more and the
            supervisor gives up.
        period: The intensity window, seconds on the trio clock (``0 < period <= 300``).
        backoff: Delay policy before each restart (default: base 25 ms, cap 1 s).
        name: Used in errors, reprs, events and log records.
        rng: Random source for the backoff's jitter (seed it for deterministic tests).
        on_event: Called (sync, must not block; an exception from it is logged and
            ignored) with a :class:`SupervisorEvent` for each decision.

    Raises:
        ValueError: a duplicate id, an unknown strategy, a bad ``max_restarts`` or an
            invalid ``period`` (design §1.6; the message names the parameter).
    """

    def __init__(
        self,
        children: Sequence[ChildSpec],
        *,
        strategy: Strategy = "one_for_one",
        max_restarts: int = 3,
        period: float = 5.0,
        backoff: Backoff | None = None,
        name: str = "supervisor",
        rng: random.Random | None = None,
        on_event: Callable[[SupervisorEvent], object] | None = None,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        self._max_restarts = validate_count("max_restarts", max_restarts, minimum=0)
        self._period = validate_duration("period", period, allow_zero=False)
        policy = backoff if backoff is not None else Backoff()
        ids: set[str] = set()
        self._children: list[_Child] = []
        for index, spec in enumerate(children):
            if not isinstance(spec, ChildSpec):
                raise TypeError(f"children[{index}] must be a ChildSpec, got {spec!r}")
            if spec.id in ids:
                raise ValueError(f"duplicate child id {spec.id!r}")
            ids.add(spec.id)
            self._children.append(_Child(index, spec, BackoffTracker(policy, rng=rng)))
        self._by_id = {child.spec.id: child for child in self._children}
        self._strategy = strategy
        self._name = name
        self._on_event = on_event
        self._lifecycle = new_actor_lifecycle(name)
        self._ran = False
        self._nursery: trio.Nursery | None = None
        self._restart_times: list[float] = []
        self._restart_events = 0
        # Children whose current incarnation exited and awaits a decision (insertion
        # ordered; bounded by the number of children) and the loop's doorbell.
        self._pending: dict[_Child, None] = {}
        self._doorbell = trio.Event()
        self._loop_scope = trio.CancelScope()
        self._shutdown_scope: trio.CancelScope | None = None
        self._stop_deadline = float("inf")
        self._stopped = trio.Event()
        self._ref = SupervisorRef(self)

    @property
    def ref(self) -> SupervisorRef:
        """The handle returned by ``nursery.start(supervisor.run)``."""
        return self._ref

    async def run(
        self, *, task_status: trio.TaskStatus[SupervisorRef] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Start the children in order, supervise them until stopped (design §1.4).

        ``task_status.started(ref)`` is called once every child has started.
        Returns after :meth:`SupervisorRef.stop`.

        Raises:
            RuntimeError: this supervisor already ran.
            RestartIntensityExceeded: (code ``restart_intensity_exceeded``) more than
                ``max_restarts`` restarts within ``period`` seconds; every child was
                stopped in reverse start order first.
            Exception: a child failed its first start (``ChildSpec.start`` or the
                actor's ``on_start`` raised); the children already started were
                stopped in reverse order first. Raised by ``nursery.start``.
        """
        if self._ran:
            raise RuntimeError(f"supervisor {self._name!r} already ran; make a new one")
        self._ran = True
        failure: BaseException | None = None
        # Children inherit the mark, so a child's ``stop()`` of us does not wait for itself.
        owner_token = enter_owner(self)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    for child in self._children:
                        await self._start(child)
                        if child.current is not None and child.current.error is not None:
                            raise child.current.error
                except Exception as exc:
                    failure = exc
                    self._lifecycle.process_event(ActorEvent.STOP)
                    await self._stop_children(self._children)
                else:
                    if self._lifecycle.state is ActorState.STARTING:
                        self._lifecycle.process_event(ActorEvent.STARTED)
                    task_status.started(self._ref)
                    try:
                        with self._loop_scope:
                            await self._supervise()
                    except RestartIntensityExceeded as exc:
                        failure = exc  # children already stopped, in reverse order
                    else:
                        with trio.CancelScope(deadline=self._stop_deadline) as scope:
                            self._shutdown_scope = scope
                            await self._stop_children(self._children)
                # Whatever is left (the stop grace ran out) is cancelled, still one
                # child at a time in reverse start order; then nothing can remain.
                await self._kill_children(self._children)
                nursery.cancel_scope.cancel()
        except BaseException as exc:
            failure = failure or exc
            raise
        finally:
            self._lifecycle.process_event(ActorEvent.STOP)
            crashed = failure is not None and not _only_cancelled(failure)
            self._lifecycle.process_event(ActorEvent.CRASHED if crashed else ActorEvent.FINISHED)
            self._nursery = None
            self._stopped.set()
            leave_owner(owner_token)
        if failure is not None:
            raise failure

    # --- starting and stopping children ----------------------------------------------

    async def _start(self, child: _Child) -> None:
        # Start one new incarnation; a failure becomes that incarnation's exit.
        assert self._nursery is not None
        self._pending.pop(child, None)
        number = 1 if child.current is None else child.current.number + 1
        if number > 1:
            child.restarts += 1
        try:
            actor = child.spec.start()
        except Exception as exc:
            inc = _Incarnation(number, cast("Actor", None))
            child.current = inc
            inc.error = exc
            inc.done.set()
            self._report(child, inc)
            return
        inc = _Incarnation(number, actor)
        child.current = inc
        try:
            ref = await self._nursery.start(self._run_child, child, inc)
        except Exception as exc:
            inc.error = exc
            self._report(child, inc)
            return
        child.last_ref = ref
        self._event("child_started", child, number, logging.DEBUG, ref=ref)

    async def _run_child(
        self,
        child: _Child,
        inc: _Incarnation,
        *,
        task_status: trio.TaskStatus[ChildRef] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        relay = cast("trio.TaskStatus[ChildRef]", _StartedRelay(inc, task_status))
        try:
            with inc.scope:
                await inc.actor.run(task_status=relay)
        except Exception as exc:
            if not inc.started:
                raise  # nursery.start() in _start raises it
            inc.error = exc
        finally:
            inc.done.set()
        if inc.started:
            self._report(child, inc)

    def _report(self, child: _Child, inc: _Incarnation) -> None:
        if inc is child.current and not inc.stopping:
            self._pending[child] = None
            self._doorbell.set()

    async def _stop_child(self, child: _Child) -> None:
        inc = child.current
        if inc is None:
            return
        inc.stopping = True
        if inc.done.is_set():
            return
        self._event("child_stopped", child, inc.number, logging.DEBUG)
        shutdown = child.spec.shutdown
        if shutdown == BRUTAL_KILL or inc.ref is None:
            inc.scope.cancel()
        else:
            await inc.ref.stop(shutdown)
        await inc.done.wait()

    async def _kill_children(self, children: Sequence[_Child]) -> None:
        for child in reversed(children):
            inc = child.current
            if inc is not None and not inc.done.is_set():
                inc.stopping = True
                inc.scope.cancel()
                await inc.done.wait()

    async def _stop_children(self, children: Sequence[_Child]) -> None:
        for child in reversed(children):
            await self._stop_child(child)

    # --- the decision loop -------------------------------------------------------------

    async def _supervise(self) -> None:
        while True:
            while not self._pending:
                self._doorbell = trio.Event()
                await self._doorbell.wait()
            child = next(iter(self._pending))
            del self._pending[child]
            await self._on_exit(child)

    async def _on_exit(self, child: _Child) -> None:
        inc = child.current
        if inc is None or inc.stopping or not inc.done.is_set():
            return  # stale: already replaced or stopped on purpose
        inc.stopping = True  # decided once
        abnormal = inc.error is not None
        reason, message = exit_reason(inc.error)
        self._event(
            "child_exited",
            child,
            inc.number,
            logging.WARNING if abnormal else logging.INFO,
            reason=reason,
            message=message,
        )
        restart = child.spec.restart
        if restart == "temporary" or (restart == "transient" and not abnormal):
            return
        now = trio.current_time()
        self._restart_times = [t for t in self._restart_times if t >= now - self._period]
        self._restart_times.append(now)
        if len(self._restart_times) > self._max_restarts:
            self._event("intensity_exceeded", child, inc.number, logging.ERROR)
            self._lifecycle.process_event(ActorEvent.STOP)
            await self._stop_children(self._children)
            raise RestartIntensityExceeded(
                f"supervisor {self._name!r}: more than {self._max_restarts} restarts "
                f"within {self._period:g} s (last: child {child.spec.id!r})",
                supervisor=self._name,
                child=child.spec.id,
                max_restarts=self._max_restarts,
                period=self._period,
            )
        self._restart_events += 1
        if self._strategy == "one_for_one":
            group = [child]
        elif self._strategy == "one_for_all":
            group = list(self._children)
        else:
            group = self._children[child.index :]
        await self._stop_children([c for c in group if c is not child])
        delay = child.tracker.next_delay(now)
        self._event("child_restarting", child, inc.number + 1, logging.WARNING, delay=delay)
        await trio.sleep(delay)
        for member in group:
            if member is child or member.spec.restart != "temporary":
                await self._start(member)

    def _event(self, kind: str, child: _Child, incarnation: int, level: int, **fields: Any) -> None:
        """Log one decision and give it to ``on_event`` (design §1.7); never raises."""
        if _log.isEnabledFor(level):
            text = {
                "child_started": "started",
                "child_exited": f"exited ({fields.get('reason')})",
                "child_stopped": "stopped by its supervisor",
                "child_restarting": f"restarting in {fields.get('delay', 0):g} s",
                "intensity_exceeded": f"more than {self._max_restarts} restarts within "
                f"{self._period:g} s: giving up",
            }[kind]
            _log.log(
                level,
                "supervisor %r: child %r (incarnation %d) %s",
                self._name,
                child.spec.id,
                incarnation,
                text,
                extra={
                    "event": kind,
                    "supervisor": self._name,
                    "child": child.spec.id,
                    "incarnation": incarnation,
                    "time": trio.current_time(),
                    **{f"child_{key}": value for key, value in fields.items() if key != "ref"},
                },
            )
        if self._on_event is not None:
            event = SupervisorEvent(
                kind=kind,
                supervisor=self._name,
                child=child.spec.id,
                incarnation=incarnation,
                time=trio.current_time(),
                **fields,
            )
            try:
                self._on_event(event)
            except Exception:
                _log.exception("supervisor %r: on_event raised; ignored", self._name)

    # --- used by SupervisorRef ---------------------------------------------------------

    def _request_stop(self, grace: float) -> None:
        self._lifecycle.process_event(ActorEvent.STOP)
        deadline = trio.current_time() + grace
        if deadline < self._stop_deadline:
            self._stop_deadline = deadline
            if self._shutdown_scope is not None:
                self._shutdown_scope.deadline = deadline
        self._loop_scope.cancel()

    def __repr__(self) -> str:
        return f"<Supervisor {self._name!r} {self._lifecycle.state.value}>"


class SupervisorRef:
    """The handle to a running :class:`Supervisor` (design §1.4)."""

    __slots__ = ("_sup",)

    def __init__(self, supervisor: Supervisor) -> None:
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
        """Restart decisions taken so far (one per restart, whatever the strategy)."""
        return self._sup._restart_events

    def child(self, id: str) -> ChildRef:
        """Return the ref of the child's current incarnation (or its last one).

        Raises:
            KeyError: no child has this id.
        """
        ref = self._sup._by_id[id].last_ref
        if ref is None:  # pragma: no cover - every child started once before run's start
            raise KeyError(id)
        return ref

    def restart_count(self, id: str) -> int:
        """How many times child ``id`` was started again after its first start.

        Raises:
            KeyError: no child has this id.
        """
        return self._sup._by_id[id].restarts

    def which_children(self) -> list[ChildInfo]:
        """Describe every child, in start order; never waits."""
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
                    id=child.spec.id,
                    state=state,
                    restart=child.spec.restart,
                    restarts=child.restarts,
                    incarnation=0 if inc is None else inc.number,
                    ref=None if inc is None else inc.ref,
                )
            )
        return rows

    async def stop(self, grace: float = 5.0) -> None:
        """Stop every child in reverse start order, then return once the supervisor ended.

        Each child is stopped per its ``shutdown`` (grace or brutal kill); the whole
        shutdown takes at most ``grace`` seconds (trio clock), after which remaining
        children are cancelled. Idempotent; concurrent calls share the earliest
        deadline. Always a checkpoint.

        Called from inside the supervisor (a child's handler or one of its tasks), it
        requests the stop and returns after one checkpoint without waiting: the
        supervisor cannot finish while one of its children waits for it.

        Raises:
            ValueError: ``grace`` is invalid (design §1.6; names ``grace``).
        """
        seconds = validate_duration("grace", grace)
        sup = self._sup
        sup._request_stop(seconds)
        if inside(sup) and not sup._stopped.is_set():
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

    def __repr__(self) -> str:
        return f"<SupervisorRef {self.name!r} {self.state.value}>"
