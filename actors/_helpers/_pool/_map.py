"""``map``: one function over many argument tuples, bounded and in order (design §3.14).

:func:`ordered_map` runs ``call(args)`` for each item with at most ``limit`` calls in
flight: ``limit`` worker tasks pull the next item from the shared iterator as each of
their calls ends, so the input is read lazily and never more than ``limit`` calls run.
It returns the results **as a list, in input order**, once every call has ended, like
``list(executor.map(...))``, not an iterator: a trio caller gets structured concurrency
(when it returns, nothing of it runs any more) and no async generator to close. The
first call that fails cancels every other call still running (each through its job's
cancel ladder, design §3.5) and pulls no more items; that first error is raised, bare.
Cancelling the caller cancels every call the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import trio

from ..._core import unwrap_sole_exception
from ...errors import ActorError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

__all__ = ["ordered_map"]

T = TypeVar("T")


async def ordered_map(
    call: Callable[[tuple[Any, ...]], Awaitable[T]],
    items: Iterable[tuple[Any, ...]],
    limit: int,
) -> list[T]:
    """Return ``[await call(args) for args in items]``, at most ``limit`` at once.

    Args:
        call: Runs one item; raises an ``ActorError`` when it fails.
        items: The argument tuples, read lazily (one more each time a call ends).
        limit: Most calls in flight, ``>= 1``.

    Raises:
        ActorError: the first call's failure (the others were cancelled first).
    """
    results: dict[int, T] = {}
    failures: list[ActorError] = []
    iterator = enumerate(items)

    async def worker(nursery: trio.Nursery) -> None:
        for index, args in iterator:
            try:
                results[index] = await call(args)
            except ActorError as exc:
                if not failures:
                    failures.append(exc)
                nursery.cancel_scope.cancel()
                return

    # A bug of the input (its iterator raised) or a Ctrl-C leaves bare.
    with unwrap_sole_exception():
        async with trio.open_nursery() as nursery:
            for _ in range(limit):
                nursery.start_soon(worker, nursery)
    if failures:
        raise failures[0]
    return [results[index] for index in range(len(results))]
