"""``HelperPool.run_sync`` and ``HelperPool.map`` (design §3.14).

The two functions here are the pool's methods (the class binds them), kept apart so the
pool's module stays about the job path; see :mod:`actors._helpers._run_sync` for what
can be sent and why pickle is acceptable, :mod:`actors._helpers._map` for the map.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from .._core import validate_count
from ..errors import FunctionRaised, HelperJobFailed
from ._map import ordered_map
from ._run_sync import (
    CALL_OPERATION,
    attempts,
    decode_reply,
    encode_call,
    map_job_error,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable

    from .._scheduler import RetryPolicy
    from ._events import PoolEvents
    from ._pool_config import PoolConfig
    from ._process import ProgressCallback

__all__ = ["CallPool", "pool_map", "pool_run_sync", "run_call"]

T = TypeVar("T")
_INF: Final = math.inf


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


async def run_call(
    pool: CallPool, payload: list[str], reference: str, deadline: float, stall: float | None
) -> Any:
    """One attempt of a call on ``pool``: its result, or the error it ended with."""
    try:
        reply = await pool.run_job(CALL_OPERATION, payload, deadline=deadline, stall=stall)
    except HelperJobFailed as exc:
        raise map_job_error(exc, reference) from None
    try:
        return decode_reply(reply, reference)
    except FunctionRaised:
        pool._count_call_failed()
        raise


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
            ``ReplyTimeout``, ``HelperExitedError``, ``PoolRestarting``, ...), after the
            retries ``retry`` allows.
    """
    payload, reference = encode_call(fn, args, kwargs)
    if retry is None:  # one attempt: no closures on the common path
        first: T = await run_call(self, payload, reference, deadline, stall)
        return first

    async def once(bound: float) -> Any:
        return await run_call(self, payload, reference, bound, stall)

    result: T = await attempts(once, reference, retry, deadline, self.events.emit)
    return result


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
    bound = (
        self.config.size
        if limit is None
        else validate_count("limit", limit, minimum=1, maximum=4096)
    )
    _, reference = encode_call(fn, (), {})  # refuse an unsendable fn before any item
    emit = self.events.emit

    async def call(args: tuple[Any, ...]) -> T:
        payload, _ = encode_call(fn, args, {})

        async def once(at: float) -> Any:
            return await run_call(self, payload, reference, at, stall)

        result: T = await attempts(once, reference, retry, deadline, emit)
        return result

    return await ordered_map(call, zip(*iterables, strict=False), bound)
