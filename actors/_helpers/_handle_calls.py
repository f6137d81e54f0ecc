"""``PoolHandle.run_sync`` and ``PoolHandle.map``: calls through the runtime (§3.14).

The same calls as :mod:`actors._helpers._pool_calls`, on a
:class:`~actors._helpers._pool_handle.PoolHandle` (``runtime.pool``): each attempt is
one job of the handle's direct path (so it follows the pool actor across its restarts),
bounded by a ``timeout`` in seconds rather than an absolute deadline, as the handle's
:meth:`run_job` is.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

import trio

from .._core import MAX_DURATION, validate_count, validate_duration
from ..errors import FunctionRaised, HelperJobFailed
from ._map import ordered_map
from ._run_sync import CALL_OPERATION, attempts, decode_reply, encode_call, map_job_error

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from .._scheduler import RetryPolicy
    from ._pool_actor import PoolLease
    from ._process import ProgressCallback

__all__ = ["CallHandle", "handle_map", "handle_run_sync"]

T = TypeVar("T")
_log: Final = logging.getLogger("actors.helpers")


class CallHandle(Protocol):
    """What a call uses of its handle (a ``PoolHandle``)."""

    _lease: PoolLease | None

    async def run_job(
        self,
        operation: str,
        payload: Any = None,
        *,
        timeout: float,  # noqa: ASYNC109
        on_progress: ProgressCallback | None = None,
        stall: float | None = None,
    ) -> Any: ...

    async def _renew(self, deadline: float, seconds: float) -> PoolLease: ...


def _deadline(timeout: float | None) -> float:
    if timeout is None:
        return trio.current_time() + MAX_DURATION
    return trio.current_time() + validate_duration("timeout", timeout, allow_zero=False)


def _emit(handle: CallHandle, kind: str, text: str, **details: Any) -> None:
    lease = handle._lease
    if lease is not None:
        lease.pool.events.emit(kind, text, **details)
    else:  # no pool seen yet: the log record alone
        _log.info(text, extra=details)


async def _run(
    handle: CallHandle, payload: list[str], reference: str, deadline: float, stall: float | None
) -> Any:
    left = deadline - trio.current_time()
    try:
        reply = await handle.run_job(CALL_OPERATION, payload, timeout=max(left, 1e-9), stall=stall)
    except HelperJobFailed as exc:
        raise map_job_error(exc, reference) from None
    try:
        return decode_reply(reply, reference)
    except FunctionRaised:
        if handle._lease is not None:
            handle._lease.pool._count_call_failed()
        raise


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
    payload, reference = encode_call(fn, args, kwargs)
    deadline = _deadline(timeout)
    if retry is None:  # one attempt: no closures on the common path
        first: T = await _run(self, payload, reference, deadline, stall)
        return first

    async def once(bound: float) -> Any:
        return await _run(self, payload, reference, bound, stall)

    result: T = await attempts(once, reference, retry, deadline, partial(_emit, self))
    return result


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
    _, reference = encode_call(fn, (), {})
    if limit is not None:
        bound = validate_count("limit", limit, minimum=1, maximum=4096)
    else:
        lease = self._lease
        if lease is None:
            lease = await self._renew(deadline, deadline - trio.current_time())
        bound = lease.pool.config.size

    emit = partial(_emit, self)

    async def call(args: tuple[Any, ...]) -> T:
        payload, _ = encode_call(fn, args, {})

        async def once(at: float) -> Any:
            return await _run(self, payload, reference, at, stall)

        result: T = await attempts(once, reference, retry, deadline, emit)
        return result

    return await ordered_map(call, zip(*iterables, strict=False), bound)
