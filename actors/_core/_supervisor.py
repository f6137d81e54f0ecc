"""In-process supervision with Erlang/OTP semantics (design §1.4, §1.9, §1.10).

A :class:`Supervisor` starts its children (actors, or supervisors, described by
:class:`ChildSpec`) in order, in its own nursery, each in its own cancel scope, and
restarts them when they exit, as OTP's ``supervisor`` does:

* the **strategy**: ``one_for_one`` restarts only the child that exited;
  ``one_for_all`` stops every other child (reverse start order) and starts all again;
  ``rest_for_one`` stops the children started after it (reverse order) and starts it
  and them again;
* the child's **restart type**: ``permanent`` (always restarted), ``transient``
  (restarted only after an abnormal exit, i.e. an exception; a normal return or an
  outside stop is a normal exit) or ``temporary`` (never restarted, and forgotten when
  it ends, even when a sibling's restart stopped it);
* **restart rounds**: a round starts the children of its group in start order; when
  one of them fails to start, the round is aborted there and a new round is run *from
  that child* (``restart_failed``) as the next decision in turn, exactly as OTP's
  ``try_again_restart`` message;
* the **restart intensity**: every round, the retried ones included, is one restart
  (OTP's ``add_restart``); more than ``max_restarts`` within ``period`` seconds
  (inclusive) and the supervisor gives up: it stops all children in reverse start
  order and raises :class:`~actors.errors.RestartIntensityExceeded` to its parent;
* a capped exponential **backoff** before each round (per child, reset after a quiet
  period, :mod:`actors._core._backoff`) — OTP restarts at once; we wait a little so a
  crash loop does not spin;
* the child's **shutdown**: a grace in seconds (``ActorRef.stop(grace)``),
  ``"brutal_kill"`` (its cancel scope is cancelled at once) or ``"infinity"`` (its own
  shutdown, unbounded but for the supervisor's own stop grace);
* **auto shutdown** (OTP 24): with ``auto_shutdown="any_significant"`` the supervisor
  stops when a significant child ends by itself (and is not restarted); with
  ``"all_significant"`` when the last one has.

Children can be added, stopped, started again and removed while it runs
(:meth:`SupervisorRef.start_child` etc., design §1.10); every call and every restart
decision is taken one at a time, as in OTP's single supervisor process.
:meth:`SupervisorRef.child` gives a :class:`LiveRef` that follows the child across
restarts (design §1.9).

Every decision is a log record of the ``actors.supervisor`` logger (an abnormal exit, a
restart round and a failed restart: WARNING; intensity exceeded: ERROR; the rest DEBUG
or INFO) and, given ``on_event``, a :class:`SupervisorEvent` (design §1.4).

Usage::

    sup = Supervisor([ChildSpec("cache", Cache), ChildSpec("db", Db)],
                     strategy="rest_for_one")
    ref = await nursery.start(sup.run)
    await ref.child("cache").ask("get", timeout=1.0)
    await ref.stop()

No task outlives the supervisor's nursery.

The handle :class:`SupervisorRef` (what ``await nursery.start(supervisor.run)``
returns) lives here with the supervisor whose private state it drives: besides stopping
it offers OTP's child administration (design §1.10) and the name registry of live
references (:meth:`SupervisorRef.child`, design §1.9). :class:`DynamicSupervisor` (OTP's
``simple_one_for_one``, Elixir's ``DynamicSupervisor``) is a supervisor in that mode
with a template spec: it starts with no child, and
:meth:`DynamicSupervisorRef.start_child` starts ``template.start(*args)`` as
``"<template id>-<n>"``; a child that will not run again is forgotten, and
``restart_child``/``delete_child`` do not apply.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import TYPE_CHECKING, Any, cast

import attrs
import trio

from ..errors import (
    ActorStopped,
    ChildAlreadyPresent,
    ChildNotFound,
    ChildRunning,
    ChildStartFailed,
    MaxChildren,
    RestartIntensityExceeded,
)
from ._actor import ActorRef, enter_owner, inside, leave_owner, request_unbounded_stop
from ._backoff import Backoff, BackoffTracker
from ._child import (
    GONE,
    RESTARTING,
    RUNNING,
    STOPPED,
    Child,
    Incarnation,
    StartedRelay,
    start_failure,
)
from ._config import MAX_DURATION, validate_count, validate_duration
from ._groups import only_cancelled
from ._lifecycle import ActorEvent, ActorState, new_actor_lifecycle
from ._live_ref import LiveRef
from ._supervisor_events import EventReporter
from ._supervisor_spec import (
    AUTO_SHUTDOWNS,
    BRUTAL_KILL,
    INFINITY,
    STRATEGIES,
    AutoShutdown,
    ChildCounts,
    ChildInfo,
    ChildRef,
    ChildSpec,
    Strategy,
    SupervisorEvent,
    exit_reason,
)

if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Sequence

    from ._supervisor_spec import Runnable

__all__ = [
    "BRUTAL_KILL",
    "INFINITY",
    "ChildRef",
    "ChildSpec",
    "DynamicSupervisor",
    "DynamicSupervisorRef",
    "Supervisor",
    "SupervisorEvent",
    "SupervisorRef",
]


class Supervisor:
    """Starts, watches and restarts in-process actors (design §1.4, §1.10).

    Args:
        children: The child specs, in start order; ids must be unique.
        strategy: ``"one_for_one"``, ``"one_for_all"`` or ``"rest_for_one"``.
        max_restarts: Restarts allowed within ``period`` (``>= 0``); one more and the
            supervisor gives up.
        period: The intensity window, seconds on the trio clock (``0 < period <= 300``).
        backoff: Delay policy before each restart round (default: base 25 ms, cap 1 s).
        name: Used in errors, reprs, events and log records.
        rng: Random source for the backoff's jitter (seed it for deterministic tests).
        on_event: Called (sync, must not block; an exception from it is logged and
            ignored) with a :class:`SupervisorEvent` for each decision.
        auto_shutdown: ``"never"``, ``"any_significant"`` or ``"all_significant"``
            (design §1.10).
        restart_wait: Seconds (trio clock) a send through a :class:`LiveRef` waits for
            a restarting child's new incarnation (design §1.9).

    Raises:
        ValueError: a duplicate id, an unknown strategy or ``auto_shutdown``, a bad
            ``max_restarts``, or an invalid ``period`` or ``restart_wait`` (design §1.6;
            the message names the parameter).
        TypeError: a child is not a :class:`ChildSpec`.
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
        auto_shutdown: AutoShutdown = "never",
        restart_wait: float = 5.0,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        if auto_shutdown not in AUTO_SHUTDOWNS:
            raise ValueError(
                f"auto_shutdown must be one of {AUTO_SHUTDOWNS}, got {auto_shutdown!r}"
            )
        self._max_restarts = validate_count("max_restarts", max_restarts, minimum=0)
        self._period = validate_duration("period", period, allow_zero=False)
        self._restart_wait = validate_duration("restart_wait", restart_wait)
        self._policy = backoff if backoff is not None else Backoff()
        self._rng = rng
        self._strategy = strategy
        self._auto_shutdown = auto_shutdown
        self._name = name
        self._report = EventReporter(name, on_event, max_restarts=self._max_restarts,
                                     period=self._period)  # fmt: skip
        self._children: list[Child] = []
        self._by_id: dict[str, Child] = {}
        for index, spec in enumerate(children):
            if not isinstance(spec, ChildSpec):
                raise TypeError(f"children[{index}] must be a ChildSpec, got {spec!r}")
            if spec.id in self._by_id:
                raise ValueError(f"duplicate child id {spec.id!r}")
            self._add(spec)
        #: A dynamic supervisor forgets a child that will not run again (OTP's
        #: ``simple_one_for_one``); set by :class:`DynamicSupervisor`.
        self._forget_stopped = False
        self._lifecycle = new_actor_lifecycle(name)
        self._ran = False
        self._closing = False
        self._stop_requested = False
        self._nursery: trio.Nursery | None = None
        self._restart_times: list[float] = []
        self._restart_events = 0
        # One decision at a time: the restart loop and every SupervisorRef call.
        self._lock = trio.Lock()
        # What awaits a decision, in order (bounded by the number of children): a child
        # whose incarnation exited (False), or one whose restart failed and is to be
        # tried again (True, OTP's try_again_restart message); and the loop's doorbell.
        self._pending: dict[Child, bool] = {}
        self._doorbell = trio.Event()
        self._loop_scope = trio.CancelScope()
        self._shutdown_scope: trio.CancelScope | None = None
        self._stop_deadline = math.inf
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
        Returns after :meth:`SupervisorRef.stop`, or after an auto shutdown.

        Raises:
            RuntimeError: this supervisor already ran.
            RestartIntensityExceeded: (code ``restart_intensity_exceeded``) more than
                ``max_restarts`` restarts within ``period`` seconds; every child was
                stopped in reverse start order first.
            ChildStartFailed: (code ``child_start_failed``) a child failed its first
                start (``ChildSpec.start`` or the actor's ``on_start`` raised); it names
                the child and the reason, its ``__cause__`` is the error; the children
                already started were stopped in reverse order first. Raised by
                ``nursery.start``.
            ActorStopped: (code ``actor_stopped``) :meth:`SupervisorRef.stop` was
                called while the children were starting; those started were stopped.
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
                    for child in list(self._children):
                        await self._start_first(child)
                except Exception as exc:
                    failure = exc
                    self._closing = True
                    self._lifecycle.process_event(ActorEvent.STOP)
                    await self._shutdown()
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
                        self._closing = True
                        self._report.event("shutdown", "", 0)
                        await self._shutdown()
                # Whatever is left (the stop grace ran out) is cancelled, still one
                # child at a time in reverse start order; then nothing can remain.
                await self._kill_children(self._children)
                nursery.cancel_scope.cancel()
        except BaseException as exc:
            failure = failure or exc
            raise
        finally:
            self._closing = True
            self._lifecycle.process_event(ActorEvent.STOP)
            # Stopped while its children were starting: stopped, not failed (as Actor).
            stopped_early = isinstance(failure, ActorStopped) and self._stop_requested
            crashed = failure is not None and not only_cancelled(failure) and not stopped_early
            self._lifecycle.process_event(ActorEvent.CRASHED if crashed else ActorEvent.FINISHED)
            self._nursery = None
            for child in self._children:
                child.set_status(GONE)
            self._stopped.set()
            leave_owner(owner_token)
        if failure is not None:
            raise failure

    async def _shutdown(self) -> None:
        # Stop the children in reverse order, within the stop's grace (if one was asked).
        with trio.CancelScope(deadline=self._stop_deadline) as scope:
            self._shutdown_scope = scope
            await self._stop_children(self._children)

    # --- the children ------------------------------------------------------------------

    def _add(self, spec: ChildSpec) -> Child:
        tracker = BackoffTracker(self._policy, rng=self._rng)
        child = Child(spec, tracker, supervisor=self._name, restart_wait=self._restart_wait)
        self._children.append(child)
        self._by_id[spec.id] = child
        return child

    def _forget(self, child: Child, *, report: bool = True) -> None:
        # OTP keeps no spec of a temporary child that ended, nor of a deleted one.
        if self._by_id.get(child.id) is child:
            del self._by_id[child.id]
            self._children.remove(child)
            child.set_status(GONE)
            if report:
                number = 0 if child.current is None else child.current.number
                self._report.event("child_deleted", child.id, number)

    def _check_open(self) -> None:
        """Raise unless the supervisor takes calls (it runs and is not stopping).

        Raises:
            ActorStopped: (code ``actor_stopped``) it is stopping or stopped, or not
                started yet.
        """
        if self._closing or self._nursery is None:
            raise ActorStopped(f"supervisor {self._name!r} is not running", actor=self._name)

    async def _start_first(self, child: Child) -> None:
        """Start ``child`` outside a restart round (its first start, or ``restart_child``).

        Raises:
            ChildStartFailed: (code ``child_start_failed``) it failed to start, or did
                not start within its ``start_timeout`` (reason ``start_timeout``).
            ActorStopped: (code ``actor_stopped``) the supervisor is stopping (a stop
                during the start cancels it).
        """
        if await self._start(child):
            return
        inc = child.current
        error = inc.error if inc is not None else None
        reason, message = start_failure(inc)
        child.set_status(STOPPED)
        raise ChildStartFailed(
            f"supervisor {self._name!r}: child {child.id!r} failed to start: {message}",
            supervisor=self._name,
            child=child.id,
            reason=reason,
        ) from error

    async def _start(self, child: Child) -> bool:
        # Start one new incarnation; True once it runs. A failure is kept as the
        # incarnation's error (it never becomes an exit to decide on).
        nursery = self._nursery
        if self._closing or nursery is None:
            # A stop was requested since our last checkpoint: inside the decision loop
            # its cancellation lands here; during the first starts, we fail to start.
            await trio.lowlevel.checkpoint()
            raise ActorStopped(f"supervisor {self._name!r} is stopping", actor=self._name)
        number = 1 if child.current is None else child.current.number + 1
        if number > 1:
            child.restarts += 1
        try:
            actor = child.spec.start()
        except Exception as exc:
            inc = Incarnation(number, None)
            child.current = inc
            inc.error = exc
            inc.done.set()
            return False
        inc = Incarnation(number, actor)
        child.current = inc
        timeout = child.spec.start_timeout
        inc.scope.deadline = trio.current_time() + timeout  # lifted once it started
        try:
            ref = await nursery.start(self._run_child, child, inc)
        except Exception as exc:
            if inc.stopping:
                # A stop cut the start short: the supervisor is stopping, the child did
                # not fail. Inside the decision loop the stop's cancellation lands here.
                await trio.lowlevel.checkpoint()
                raise ActorStopped(
                    f"supervisor {self._name!r} is stopping", actor=self._name
                ) from None
            error: Exception = exc
            if inc.scope.cancelled_caught:
                inc.timed_out = True
                error = TimeoutError(f"child {child.id!r} did not start within {timeout:g} s")
            inc.error = error
            return False
        child.type = "worker" if isinstance(ref, ActorRef) else "supervisor"
        child.set_status(RUNNING)
        self._report.event("child_started", child.id, number, ref=ref)
        return True

    async def _run_child(
        self,
        child: Child,
        inc: Incarnation,
        *,
        task_status: trio.TaskStatus[ChildRef] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        relay = cast("trio.TaskStatus[ChildRef]", StartedRelay(inc, task_status))
        assert inc.actor is not None
        try:
            with inc.scope:
                await inc.actor.run(task_status=relay)
        except Exception as exc:
            if not inc.started:
                raise  # nursery.start() in _start raises it
            inc.error = exc
        finally:
            inc.done.set()
        if inc.started and inc is child.current and not inc.stopping:
            self._exited(child, inc)

    def _exited(self, child: Child, inc: Incarnation) -> None:
        # Say at once what refs may expect (design §1.9); the loop decides in turn.
        restart = child.spec.restart
        if self._closing or restart == "temporary":
            child.set_status(GONE)
        elif restart == "permanent" or inc.error is not None:
            child.set_status(RESTARTING)
        else:
            child.set_status(GONE if self._forget_stopped else STOPPED)
        self._pending[child] = False
        self._doorbell.set()

    async def _stop_child(self, child: Child, status: str) -> None:
        """Stop ``child``'s incarnation per its ``shutdown``; it moves to ``status``."""
        child.set_status(status)
        inc = child.current
        if inc is None:
            return
        inc.stopping = True
        if inc.done.is_set():
            return
        self._report.event("child_stopped", child.id, inc.number)
        shutdown = child.spec.shutdown
        ref = inc.ref
        if shutdown == BRUTAL_KILL:
            inc.scope.cancel()  # stopping is set: a start cut short raises ActorStopped
        elif ref is None:
            # A start under way: no ref to stop it by, so it is cancelled at its grace
            # (with infinity, at the stopping supervisor's deadline).
            if shutdown != INFINITY:
                deadline = trio.current_time() + shutdown
                inc.scope.deadline = min(inc.scope.deadline, deadline)
        elif shutdown == INFINITY:
            # No grace of its own: only the stopping supervisor's deadline bounds it.
            if isinstance(ref, ActorRef):
                request_unbounded_stop(ref)
            elif isinstance(ref, SupervisorRef):
                ref._sup._request_stop(math.inf)
            else:  # another kind of child: its longest grace
                await ref.stop(MAX_DURATION)
        else:
            await ref.stop(shutdown)
        await inc.done.wait()

    async def _kill_children(self, children: Sequence[Child]) -> None:
        for child in reversed(list(children)):
            inc = child.current
            if inc is not None and not inc.done.is_set():
                inc.stopping = True
                inc.scope.cancel()
                await inc.done.wait()

    async def _stop_children(self, children: Sequence[Child]) -> None:
        if self._forget_stopped:
            # A dynamic supervisor's children are alike and independent: OTP stops a
            # simple_one_for_one's children all at once, so the slowest bounds it.
            async with trio.open_nursery() as nursery:
                for child in list(children):
                    nursery.start_soon(self._stop_child, child, GONE)
            return
        for child in reversed(list(children)):
            await self._stop_child(child, GONE)

    # --- the decision loop -------------------------------------------------------------

    async def _supervise(self) -> None:
        while True:
            while not self._pending:
                self._doorbell = trio.Event()
                await self._doorbell.wait()
            child, retry = next(iter(self._pending.items()))
            del self._pending[child]
            # Calls waiting for the lock come in between, as OTP's messages do between
            # two tries: a terminate_child can end a restart loop that keeps failing.
            async with self._lock:
                if retry:
                    if child in self._children and child.status == RESTARTING:
                        await self._restart(child)
                elif await self._on_exit(child):
                    return  # auto shutdown

    async def _on_exit(self, child: Child) -> bool:
        # True when the supervisor shuts itself down (auto_shutdown).
        inc = child.current
        if inc is None or inc.stopping or not inc.done.is_set() or child not in self._children:
            return False  # stale: already replaced, stopped on purpose, or forgotten
        inc.stopping = True  # decided once
        abnormal = inc.error is not None
        reason, message = exit_reason(inc.error)
        self._report.event(
            "child_exited", child.id, inc.number, abnormal=abnormal, reason=reason,
            message=message,
        )  # fmt: skip
        restart = child.spec.restart
        if restart == "temporary" or (restart == "transient" and not abnormal):
            if restart == "temporary" or self._forget_stopped:
                self._forget(child)
            return self._auto_shutdown_due(child)
        await self._restart(child)
        return False

    def _auto_shutdown_due(self, child: Child) -> bool:
        if not child.spec.significant or self._auto_shutdown == "never":
            return False
        if self._auto_shutdown == "all_significant" and any(
            c.spec.significant and c.status not in (STOPPED, GONE) for c in self._children
        ):
            return False
        number = 0 if child.current is None else child.current.number
        self._report.event("auto_shutdown", child.id, number)
        self._lifecycle.process_event(ActorEvent.STOP)
        return True

    async def _restart(self, child: Child) -> None:
        # OTP's restart/2: one round, one restart. A round aborted by a failed start is
        # tried again from the child that failed, as the next decision in turn.
        await self._add_restart(child)
        failed = await self._round(child)
        if failed is not None:
            self._pending[failed] = True
            self._doorbell.set()

    async def _add_restart(self, child: Child) -> None:
        now = trio.current_time()
        self._restart_times = [t for t in self._restart_times if t >= now - self._period]
        self._restart_times.append(now)
        if len(self._restart_times) <= self._max_restarts:
            self._restart_events += 1
            return
        number = 0 if child.current is None else child.current.number
        self._report.event("intensity_exceeded", child.id, number)
        self._closing = True
        self._lifecycle.process_event(ActorEvent.STOP)
        await self._stop_children(self._children)
        raise RestartIntensityExceeded(
            f"supervisor {self._name!r}: more than {self._max_restarts} restarts "
            f"within {self._period:g} s (last: child {child.id!r})",
            supervisor=self._name,
            child=child.id,
            max_restarts=self._max_restarts,
            period=self._period,
        )

    async def _round(self, target: Child) -> Child | None:
        # One restart round for ``target``; returns the child that failed to start.
        if self._strategy == "one_for_one":
            group = [target]
        elif self._strategy == "one_for_all":
            group = list(self._children)
        else:
            group = self._children[self._children.index(target) :]
        for member in reversed(group):
            if member is not target:
                temporary = member.spec.restart == "temporary"
                await self._stop_child(member, GONE if temporary else RESTARTING)
                if temporary:
                    self._forget(member)
        group = [member for member in group if member.id in self._by_id]
        target.set_status(RESTARTING)
        number = 1 if target.current is None else target.current.number + 1
        delay = target.tracker.next_delay(trio.current_time())
        self._report.event("child_restarting", target.id, number, delay=delay)
        await trio.sleep(delay)
        for member in group:
            if not await self._start(member):
                inc = member.current
                reason, message = start_failure(inc)
                member.set_status(RESTARTING)
                self._report.event(
                    "restart_failed", member.id, 0 if inc is None else inc.number,
                    reason=reason, message=message,
                )  # fmt: skip
                return member
        return None

    # --- used by SupervisorRef ---------------------------------------------------------

    def _running_inside(self) -> bool:
        """True if the current task runs this supervisor's code (a child's)."""
        return inside(self)

    def _request_stop(self, grace: float) -> None:
        self._lifecycle.process_event(ActorEvent.STOP)
        self._closing = True
        self._stop_requested = True
        deadline = trio.current_time() + grace
        if deadline < self._stop_deadline:
            self._stop_deadline = deadline
            if self._shutdown_scope is not None:
                self._shutdown_scope.deadline = deadline
        self._loop_scope.cancel()
        # A start under way (a first start, start_child, restart_child) holds no scope
        # of ours: cancel it within the child's own shutdown grace.
        for child in self._children:
            child.cut_start(grace)

    def __repr__(self) -> str:
        return f"<Supervisor {self._name!r} {self._lifecycle.state.value}>"


class SupervisorRef:
    """The handle to a running :class:`Supervisor` (design §1.4, §1.9, §1.10)."""

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
        ref = child.running_ref()
        if ref is None:
            raise child.absent_error()
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
            MaxChildren: (code ``max_children``, transient) ``max_children`` run.
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
            raise MaxChildren(
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
