"""The pool actor's handle: what callers (and ``runtime.pool``) use (design §3, §1.7).

:class:`PoolHandle` wraps the pool actor's ref. Its control requests (snapshot,
statistics, restart, cancel by id) are asks through the mailbox. Its jobs take a
*direct path*: the handle asks the actor once (per actor incarnation) for a lease, then
runs each job in the caller's own task, on the actor's pool, as ``trio.run_process``
runs a process in its caller's task. The actor still owns the helpers: it bounds the
jobs in flight (``max_jobs``), gives them its stop's grace, and closes the pool (which
cancels them, each through its ladder) when it stops. Why: a job through the mailbox
costs three more passes of the run loop and a task, more than the whole round trip of
a short job; and a job in the caller's task is stopped by the caller's own cancel
scope, ladder included, before the caller goes on (no cancel message can be lost).

Given a :class:`RefSource` instead of a ref (the runtime does this), the handle follows
the actor across restarts: a job that arrives while the actor is being restarted waits
for the new incarnation, within its own timeout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

import trio
from trio.lowlevel import enable_ki_protection

from ..._core import MAX_DURATION, ActorRef, ActorState, validate_duration
from ...errors import ActorStopped, AskTimeout, DeadlineExceeded, PoolClosed
from ._calls import handle_map, handle_run_sync
from ._pool import expected
from ._requests import (
    CANCEL_JOB,
    GET_SNAPSHOT,
    GET_STATISTICS,
    RESTART_POOL,
    RETIRE_IDLE,
    GetLease,
    ask_method,
    send_method,
)

if TYPE_CHECKING:
    from .._process import ProgressCallback
    from ._actor import PoolLease

__all__ = ["PoolHandle", "RefSource"]

_RUNNING = ActorState.RUNNING
T = TypeVar("T")


class RefSource(Protocol):
    """Where a handle finds the current incarnation of a restartable actor (§1.7)."""

    def current(self) -> ActorRef | None:
        """The running incarnation's ref, or None while it is being restarted."""

    async def wait(self, deadline: float, *, other_than: ActorRef | None = None) -> ActorRef:
        """Wait (until ``deadline``, trio clock) for a running incarnation, other than
        ``other_than`` if given (that one is failing).

        Raises:
            ActorStopped: (code ``actor_stopped``) none will come (the tree stops).
            AskTimeout: (code ``ask_timeout``) none came before ``deadline``.
        """


class _FixedRef:
    """The :class:`RefSource` of one ref that never changes."""

    def __init__(self, ref: ActorRef) -> None:
        self.ref = ref

    def current(self) -> ActorRef | None:
        return self.ref

    async def wait(self, deadline: float, *, other_than: ActorRef | None = None) -> ActorRef:
        await trio.lowlevel.checkpoint()
        return self.ref


class PoolHandle:
    """A facade over the pool actor (design §3); see the module docstring.

    Args:
        ref: The ref returned by ``nursery.start(PoolActor(...).run)``, or a
            :class:`RefSource` that follows the actor across restarts.
    """

    def __init__(self, ref: ActorRef | RefSource) -> None:
        self._source: RefSource = _FixedRef(ref) if isinstance(ref, ActorRef) else ref
        self._lease: PoolLease | None = None

    @property
    def ref(self) -> ActorRef:
        """The pool actor's current ref (its last one while it is restarted).

        Raises:
            ActorStopped: (code ``actor_stopped``) no incarnation has run yet.
        """
        ref = self._source.current() or (None if self._lease is None else self._lease.ref)
        if ref is None:
            raise ActorStopped("the pool actor is not running", actor="pool")
        return ref

    # Any importable function, by reference (design §3.14); see ``_calls``.
    run_sync = handle_run_sync
    map = handle_map

    # The requests through the mailbox, made from their declarations (``_requests``).
    cancel_job = ask_method(CANCEL_JOB)
    snapshot = ask_method(GET_SNAPSHOT)
    statistics = ask_method(GET_STATISTICS)
    restart = ask_method(RESTART_POOL)
    retire_idle = send_method(RETIRE_IDLE)

    @overload
    async def run_job(
        self, operation: str, payload: Any = None, *, timeout: float,  # noqa: ASYNC109
        on_progress: ProgressCallback | None = None, stall: float | None = None,
        expect: None = None,
    ) -> Any: ...  # fmt: skip
    @overload
    async def run_job(
        self, operation: str, payload: Any = None, *, timeout: float,  # noqa: ASYNC109
        on_progress: ProgressCallback | None = None, stall: float | None = None,
        expect: type[T],
    ) -> T: ...  # fmt: skip
    @enable_ki_protection
    async def run_job(
        self,
        operation: str,
        payload: Any = None,
        *,
        timeout: float,  # noqa: ASYNC109
        on_progress: ProgressCallback | None = None,
        stall: float | None = None,
        expect: type[T] | None = None,
    ) -> Any:
        """Run one job and return its result, within ``timeout`` seconds (trio clock).

        The job runs in this task (see the module docstring). If the caller is
        cancelled or the timeout passes, the job's escalation ladder runs first
        (design §3.5, at most ``timeouts.ladder`` seconds), so when this returns or
        raises, the job has really ended. To see the pool's own ``ReplyTimeout`` rather
        than ``AskTimeout``, give a ``timeout`` above ``timeouts.reply``.

        Args:
            operation: The handler's name.
            payload: JSON-compatible arguments.
            timeout: Longest wait for the result (for a free helper, or for the pool
                actor's restart, included), in seconds (trio clock).
            on_progress: Optional ``on_progress(fraction, note)``: called for each
                progress report of the job (``fraction`` a float in ``[0, 1]``, ``note``
                a str or None; plus ``data`` for a report sent with bytes, design
                §2.3), in this task. It is sync and must not block; an
                exception from it is logged and ignored. Never called after this
                method has returned or raised.
            stall: Seconds the job may go without a progress report (design §3.12);
                none by default. Stderr output counts too when the spec's
                ``stderr_is_activity`` is set.
            expect: The type the result must be (e.g. ``dict``), checked with
                ``isinstance``; type checkers then see it as the return type.

        Raises:
            AskTimeout: (code ``ask_timeout``) no result within ``timeout``; the job
                was stopped.
            ValueError: ``timeout`` or ``stall`` is invalid (design §1.6).
            TypeError: the result is not an instance of ``expect``.
            ActorStopped: (code ``actor_stopped``) the pool actor is stopped (or
                stopped while the job ran).
            ActorError: whatever the job failed with, as in
                :meth:`actors.HelperPool.run_job` (``JobCancelled``,
                ``ReplyTimeout``, ``JobStalled``, ``ForcedTermination``,
                ``SignalFailed``, ``HelperExited``, ``ProtocolViolation``,
                ``PoolFailed``, ``PoolRestarting``, ``PoolBusy``, ...).
        """
        kind = type(timeout)
        if (kind is float or kind is int) and 0 < timeout <= MAX_DURATION:
            seconds = float(timeout)
        else:
            seconds = validate_duration("timeout", timeout, allow_zero=False)
        deadline = trio.current_time() + seconds
        lease = self._lease
        if (
            lease is None
            or lease.ref.state is not _RUNNING
            or (lease.escalates and lease.pool.failed)
        ):
            lease = await self._renew(deadline, seconds)
        if lease.in_flight >= lease.max_jobs:
            lease.room()  # raises PoolBusy
        lease.in_flight += 1
        try:
            result = await lease.pool.run_job(
                operation, payload, on_progress=on_progress, deadline=deadline, stall=stall
            )
        except DeadlineExceeded as exc:
            raise AskTimeout(
                f"actor {lease.ref.name!r} did not answer within {seconds:g} s",
                actor=lease.ref.name,
                timeout=seconds,
                escalation=exc.details.get("escalation"),
            ) from None
        except PoolClosed:
            if lease.ref.state is _RUNNING:
                raise
            raise ActorStopped(f"actor {lease.ref.name!r} stopped", actor=lease.ref.name) from None
        finally:
            lease.ended()
        return result if expect is None else expected(result, expect, operation)

    @enable_ki_protection
    async def _renew(self, deadline: float, seconds: float) -> PoolLease:
        """Lease the pool of the actor's current incarnation (one ask per incarnation).

        An incarnation whose pool failed and is being restarted is skipped: the job
        waits for the next one (within its deadline), never runs twice.
        """
        old = self._lease
        failing = old.ref if old is not None and old.escalates and old.pool.failed else None
        while True:
            with trio.move_on_at(deadline) as waited:
                ref = await self._source.wait(deadline, other_than=failing)
            if waited.cancelled_caught:
                raise AskTimeout(
                    f"actor 'pool' was not running within {seconds:g} s",
                    actor="pool",
                    timeout=seconds,
                )
            left = deadline - trio.current_time()
            if left <= 0:
                raise AskTimeout(
                    f"actor {ref.name!r} did not answer within {seconds:g} s",
                    actor=ref.name,
                    timeout=seconds,
                )
            lease: PoolLease = await ref.ask(GetLease(), timeout=left)
            if lease.ref.state is not _RUNNING:
                raise ActorStopped(f"actor {ref.name!r} stopped", actor=ref.name)
            if not (lease.escalates and lease.pool.failed) or isinstance(self._source, _FixedRef):
                self._lease = lease
                return lease
            failing = ref
