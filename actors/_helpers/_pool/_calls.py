"""``run_sync`` and ``map`` calls: one algorithm for the pool and the handle (§3.14).

A call sends a function by reference and its arguments (see
:mod:`actors._helpers._pool._run_sync` for what can be sent and why pickle is
acceptable), runs each attempt as one job of operation ``actors.call``, retries
transient failures under a :class:`~actors.RetryPolicy`, and maps many items through
:func:`~actors._helpers._pool._map.ordered_map`. The algorithm is written once, on a
:class:`CallTarget`; the two targets differ only in how an attempt's job is run:
:class:`~actors.HelperPool` (``run_job`` with an absolute ``deadline``) and
:class:`~actors.PoolHandle` (``runtime.pool``: its direct path, which follows the pool
actor across restarts, with a relative ``timeout``). The public methods are the four
functions at the end, bound as ``run_sync``/``map`` by each class.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

import trio

from ..._child import CALL_OPERATION
from ..._core import MAX_DURATION, validate_count, validate_duration
from ...errors import FunctionRaised, JobFailed
from ._map import ordered_map
from ._run_sync import attempts, decode_reply, encode_call, map_job_error

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Hashable, Iterable

    from ..._scheduler import RetryPolicy
    from .._events import PoolEvents
    from .._process import ProgressCallback
    from ._config import PoolConfig

__all__ = [
    "CallHandle",
    "CallLease",
    "CallPool",
    "CallTarget",
    "handle_map",
    "handle_run_sync",
    "pool_map",
    "pool_run_sync",
]

T = TypeVar("T")
_INF: Final = math.inf
_log: Final = logging.getLogger("actors.helpers")


class CallTarget(Protocol):
    """Where a call's attempts run: what the one call algorithm needs of a pool or handle."""

    def run_attempt(
        self, payload: list[str], deadline: float, stall: float | None
    ) -> Awaitable[Any]:
        """One attempt's job (operation ``actors.call``) by ``deadline`` (trio clock), to
        await: the target's own ``run_job`` call, so no frame is added to the hot path."""
        ...

    def emit(self, kind: str, text: str, **details: Any) -> None:
        """One pool event and log record (a retry, design §3.10)."""
        ...

    def call_failed(self) -> None:
        """Count a call whose function raised as a failed job, not a succeeded one."""
        ...

    async def default_limit(self, deadline: float) -> int:
        """The pool's size: a map's default number of calls at once."""
        ...


async def _attempt(
    target: CallTarget, payload: list[str], reference: str, deadline: float, stall: float | None
) -> Any:
    """One attempt of a call: its result, or the error it ended with."""
    try:
        reply = await target.run_attempt(payload, deadline, stall)
    except JobFailed as exc:
        raise map_job_error(exc, reference) from None
    try:
        return decode_reply(reply, reference)
    except FunctionRaised:
        target.call_failed()
        raise


async def call(
    target: CallTarget,
    fn: Callable[..., T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    retry: RetryPolicy | None,
    deadline: float,
    stall: float | None,
) -> T:
    """``fn(*args, **kwargs)`` in a helper of ``target``, retried under ``retry``."""
    payload, reference = encode_call(fn, args, kwargs)
    if retry is None:  # one attempt: no closures on the common path
        first: T = await _attempt(target, payload, reference, deadline, stall)
        return first

    async def once(bound: float) -> Any:
        return await _attempt(target, payload, reference, bound, stall)

    result: T = await attempts(once, reference, retry, deadline, target.emit)
    return result


async def call_map(
    target: CallTarget,
    fn: Callable[..., T],
    iterables: tuple[Iterable[Any], ...],
    limit: int | None,
    retry: RetryPolicy | None,
    deadline: float,
    stall: float | None,
) -> list[T]:
    """``[fn(*args) for args in zip(*iterables)]`` in ``target``'s helpers, in order."""
    bound = None if limit is None else validate_count("limit", limit, minimum=1, maximum=4096)
    _, reference = encode_call(fn, (), {})  # refuse an unsendable fn before any item
    if bound is None:
        bound = await target.default_limit(deadline)

    async def one(args: tuple[Any, ...]) -> T:
        payload, _ = encode_call(fn, args, {})

        async def once(at: float) -> Any:
            return await _attempt(target, payload, reference, at, stall)

        result: T = await attempts(once, reference, retry, deadline, target.emit)
        return result

    return await ordered_map(one, zip(*iterables, strict=False), bound)


# --- the pool: absolute deadlines ------------------------------------------------------


class CallPool(Protocol):
    """What a call uses of its pool (the public face of a ``HelperPool``)."""

    @property
    def config(self) -> PoolConfig: ...

    @property
    def events(self) -> PoolEvents: ...

    async def run_job(
        self,
        operation: str,
        payload: Any = None,
        *,
        job_id: Hashable | None = None,
        on_progress: ProgressCallback | None = None,
        deadline: float = _INF,
        stall: float | None = None,
    ) -> Any: ...

    def _count_call_failed(self) -> None: ...


class _OnPool:
    """A :class:`CallTarget` on a ``HelperPool``: each attempt is one ``run_job``."""

    __slots__ = ("_pool",)

    def __init__(self, pool: CallPool) -> None:
        self._pool = pool

    def run_attempt(
        self, payload: list[str], deadline: float, stall: float | None
    ) -> Awaitable[Any]:
        return self._pool.run_job(CALL_OPERATION, payload, deadline=deadline, stall=stall)

    def emit(self, kind: str, text: str, **details: Any) -> None:
        self._pool.events.emit(kind, text, **details)

    def call_failed(self) -> None:
        self._pool._count_call_failed()

    async def default_limit(self, deadline: float) -> int:
        return self._pool.config.size


# --- the handle: relative timeouts, through the pool actor's lease ---------------------


class CallLease(Protocol):
    """What a call uses of a handle's lease (a ``PoolLease``): its pool."""

    @property
    def pool(self) -> CallPool: ...


class CallHandle(Protocol):
    """What a call uses of its handle (a ``PoolHandle``)."""

    @property
    def _lease(self) -> CallLease | None: ...

    async def run_job(
        self,
        operation: str,
        payload: Any = None,
        *,
        timeout: float,  # noqa: ASYNC109
        on_progress: ProgressCallback | None = None,
        stall: float | None = None,
    ) -> Any: ...

    async def _renew(self, deadline: float, seconds: float) -> CallLease: ...


class _OnHandle:
    """A :class:`CallTarget` on a ``PoolHandle``: each attempt is one job of its direct
    path, bounded by the time left to the call's deadline."""

    __slots__ = ("_handle",)

    def __init__(self, handle: CallHandle) -> None:
        self._handle = handle

    def run_attempt(
        self, payload: list[str], deadline: float, stall: float | None
    ) -> Awaitable[Any]:
        left = deadline - trio.current_time()
        return self._handle.run_job(CALL_OPERATION, payload, timeout=max(left, 1e-9), stall=stall)

    def emit(self, kind: str, text: str, **details: Any) -> None:
        lease = self._handle._lease
        if lease is not None:
            lease.pool.events.emit(kind, text, **details)
        else:  # no pool seen yet: the log record alone
            _log.info(text, extra=details)

    def call_failed(self) -> None:
        if self._handle._lease is not None:
            self._handle._lease.pool._count_call_failed()

    async def default_limit(self, deadline: float) -> int:
        lease = self._handle._lease
        if lease is None:
            lease = await self._handle._renew(deadline, deadline - trio.current_time())
        return lease.pool.config.size


def _deadline(timeout: float | None) -> float:
    if timeout is None:
        return trio.current_time() + MAX_DURATION
    return trio.current_time() + validate_duration("timeout", timeout, allow_zero=False)


# --- the public methods ----------------------------------------------------------------


async def pool_run_sync(
    self: CallPool,
    fn: Callable[..., T],
    /,
    *args: Any,
    retry: RetryPolicy | None = None,
    deadline: float = _INF,
    stall: float | None = None,
    **kwargs: Any,
) -> T:
    """Run ``fn(*args, **kwargs)`` in a helper and return its result (design §3.14).

    ``fn`` is sent by reference (``"module:qualname"``), its arguments and its result
    pickled between this process and its own helpers (acceptable: both ends are ours,
    over the helper's private pipes). The helper imports ``fn``'s module at the first
    call that names it and keeps it. The call is a job of the pool like any other:
    it waits for a free helper (``acquire_timeout``), is bounded by ``timeouts.reply``
    and ``deadline``, and its cancellation runs the cancel ladder (design §3.5).

    The keywords ``retry``, ``deadline`` and ``stall`` are this method's own; to pass
    arguments of those names to ``fn``, wrap it: ``functools.partial(fn, deadline=3)``.

    Args:
        fn: A module-level function, builtin, class, or method bound to an importable
            object (or a ``functools.partial`` of one). Not a lambda, a closure, a
            function of ``__main__`` or a method of an object no import reaches.
        *args: Its positional arguments (picklable).
        retry: Optional :class:`~actors.RetryPolicy`: a transient failure (the helper
            crashed, the reply timed out, the pool is restarting, ...) is retried after
            its backoff (a crash counts as an attempt), never past ``deadline``;
            ``permanent`` errors (``fn`` raised, by default) and
            ``non_retryable_codes`` are not. None: one attempt.
        deadline: Absolute deadline of the whole call, retries included, in seconds on
            trio's clock; none by default.
        stall: Seconds the call may go without a progress report (design §3.12).
        **kwargs: Its keyword arguments (picklable).

    Returns:
        What ``fn`` returned, unpickled.

    Cancellation:
        As :meth:`run_job`: the job's cancel ladder runs (shielded, at most
        ``timeouts.ladder`` seconds), then ``trio.Cancelled`` propagates.

    Raises:
        FunctionNotImportable: (code ``function_not_importable``) ``fn`` cannot be sent
            (nothing was sent), or the helper could not import it.
        NotPicklable: (code ``not_picklable``) the arguments (``details["what"] ==
            "arguments"``; nothing was sent) or the result (``"result"``) do not pickle.
        FunctionRaised: (code ``function_raised``, or the exception's own) ``fn``
            raised; it carries the remote type, message and traceback text, and the
            original exception as ``__cause__`` when it unpickles.
        ActorError: every error of :meth:`run_job` (``DeadlineExceeded``,
            ``ReplyTimeout``, ``HelperExited``, ``PoolRestarting``, ...), after the
            retries ``retry`` allows.
    """
    return await call(_OnPool(self), fn, args, kwargs, retry, deadline, stall)


async def pool_map(
    self: CallPool,
    fn: Callable[..., T],
    /,
    *iterables: Iterable[Any],
    limit: int | None = None,
    retry: RetryPolicy | None = None,
    deadline: float = _INF,
    stall: float | None = None,
) -> list[T]:
    """Run ``fn`` over the items of ``iterables`` in helpers; the results in order (§3.14).

    Like ``concurrent.futures.Executor.map``, ``fn`` gets one argument from each
    iterable (they are zipped; the shortest ends the map). Each item is one
    :meth:`run_sync` call with ``retry``, ``deadline`` and ``stall``; at most ``limit``
    run at once, and the iterables are read lazily, one item as each call ends. It
    returns a **list** once every call has ended (nothing of it runs after it returns
    or raises), not an async iterator.

    Args:
        fn: As for :meth:`run_sync`.
        *iterables: The arguments, one iterable per parameter of ``fn``.
        limit: Most calls at once, ``1..4096`` (a larger one is refused, not capped:
            ``ValueError``); default the pool's size.
        retry: Retry policy of each call (see :meth:`run_sync`).
        deadline: Absolute deadline of the whole map, in seconds on trio's clock.
        stall: Stall timeout of each call, in seconds (design §3.12).

    Returns:
        ``[fn(*args) for args in zip(*iterables)]``, in input order.

    Cancellation:
        Cancelling the caller cancels every call in flight, each through its ladder.

    Raises:
        ActorError: the first call's error (as :meth:`run_sync` raises it); the calls
            still in flight were cancelled first (each through its ladder) and no
            further item was started.
        FunctionNotImportable: (code ``function_not_importable``) ``fn`` cannot be
            sent; nothing was sent.
        ValueError: ``limit`` is not an int in ``[1, 4096]``.
    """
    return await call_map(_OnPool(self), fn, iterables, limit, retry, deadline, stall)


async def handle_run_sync(
    self: CallHandle,
    fn: Callable[..., T],
    /,
    *args: Any,
    retry: RetryPolicy | None = None,
    timeout: float | None = None,  # noqa: ASYNC109
    stall: float | None = None,
    **kwargs: Any,
) -> T:
    """Run ``fn(*args, **kwargs)`` in a helper of the pool actor (design §3.14).

    As :meth:`actors.HelperPool.run_sync` (what can be sent, pickle, errors, retries),
    through this handle's direct path: the call runs in the caller's task and follows
    the pool actor across its restarts. The keywords ``retry``, ``timeout`` and
    ``stall`` are this method's own (wrap ``fn`` in ``functools.partial`` to pass
    arguments of those names).

    Args:
        fn: A function a helper can import (see :meth:`actors.HelperPool.run_sync`).
        *args: Its positional arguments (picklable).
        retry: Optional :class:`~actors.RetryPolicy` for transient failures.
        timeout: Longest the whole call may take, retries included, in seconds (trio
            clock); None: 300 s, and each attempt is still bounded by the pool's
            ``timeouts.reply``.
        stall: Seconds the call may go without a progress report (design §3.12).
        **kwargs: Its keyword arguments (picklable).

    Returns:
        What ``fn`` returned, unpickled.

    Raises:
        FunctionNotImportable: (code ``function_not_importable``) ``fn`` cannot be sent.
        NotPicklable: (code ``not_picklable``) the arguments or the result do not pickle.
        FunctionRaised: (code ``function_raised``, or the exception's own) ``fn`` raised.
        AskTimeout: (code ``ask_timeout``) no result within ``timeout``; the job was
            stopped through its ladder.
        ActorError: every other error of :meth:`run_job`, after the retries allowed.
        ValueError: ``timeout`` is not a valid duration.
    """
    return await call(_OnHandle(self), fn, args, kwargs, retry, _deadline(timeout), stall)


async def handle_map(
    self: CallHandle,
    fn: Callable[..., T],
    /,
    *iterables: Iterable[Any],
    limit: int | None = None,
    retry: RetryPolicy | None = None,
    timeout: float | None = None,  # noqa: ASYNC109
    stall: float | None = None,
) -> list[T]:
    """Run ``fn`` over ``zip(*iterables)`` in the pool actor's helpers (design §3.14).

    As :meth:`actors.HelperPool.map` (a list in input order, at most ``limit`` calls at
    once, the first failure cancels the rest and is raised), through this handle.

    Args:
        fn: A function a helper can import.
        *iterables: Its arguments, one iterable per parameter.
        limit: Most calls at once, ``1..4096``; default the pool's size.
        retry: Retry policy of each call.
        timeout: Longest the whole map may take, in seconds (trio clock); None: 300 s.
        stall: Stall timeout of each call, in seconds (design §3.12).

    Returns:
        The results, in input order.

    Raises:
        ActorError: the first call's error; the others were cancelled first.
        ValueError: ``limit`` or ``timeout`` is invalid.
    """
    deadline = _deadline(timeout)
    return await call_map(_OnHandle(self), fn, iterables, limit, retry, deadline, stall)
