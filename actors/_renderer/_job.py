"""One render job: a lane, a worker thread, a truthful verdict (design §5.1, §5.3, §4.14).

:func:`run_render` waits for a lane (counting against the job's deadline), runs the
render function in a worker thread, and raises the thread's abort flag at the deadline
(or on :class:`~actors.CancelRender`); ``check_cancel`` raises inside the thread at its
next call. The thread records when it had the payload, and the verdict uses that time,
not the moment the event loop noticed: a payload produced by the deadline is a success.
A thread still running ``abandon_after`` seconds after its deadline or cancel is
abandoned (:mod:`actors._renderer._lanes`): it showed no activity (a ``check_cancel``
call or its return) since its flag went up, so the job ends ``stalled``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import TYPE_CHECKING

import trio

from protocol.errors import describe_exception

from .._core import show_value
from ..errors import (
    ActorError,
    DeadlineExceeded,
    JobCancelled,
    JobStalled,
    PayloadInvalid,
    RenderFailed,
)
from ._config import Rendered
from ._lanes import JobThread

if TYPE_CHECKING:
    from ._config import PayloadCheck, Render, RendererConfig, RenderFn
    from ._lanes import Lanes

__all__ = ["LOGGER", "RenderToken", "run_render", "validate_payload"]

LOGGER = logging.getLogger("actors.renderer")


class _RenderAborted(Exception):
    """Raised inside the worker thread by ``check_cancel`` once the job must stop."""


class RenderToken:
    """One render job's cancellation handle, shared with its worker thread.

    :meth:`cancel` is for the event loop's thread; the worker thread only reads the
    flag through ``check_cancel``.
    """

    def __init__(self) -> None:
        self.abort = threading.Event()  # read by the worker thread
        self.cancel_requested = False  # set by CancelRender (event loop only)
        self.waiting: trio.CancelScope | None = None
        """The scope of the wait for a lane, while the job waits."""
        self.stop: trio.CancelScope | None = None
        """The scope that abandons the thread, while it runs."""
        self.grace = 0.0
        """Seconds the thread gets after a cancel before it is abandoned."""

    def cancel(self) -> None:
        """Cancel the job: its asker gets ``JobCancelled`` (code ``job_cancelled``)."""
        self.cancel_requested = True
        self.abort.set()
        if self.waiting is not None:
            self.waiting.cancel()
        if self.stop is not None:
            self.stop.deadline = min(self.stop.deadline, trio.current_time() + self.grace)

    def check(self) -> None:
        """The ``check_cancel`` given to ``render_fn``: raises once the job must stop."""
        if self.abort.is_set():
            raise _RenderAborted("render job cancelled")


async def _raise_abort_flag_at(token: RenderToken, deadline: float) -> None:
    # Runs beside the worker thread: at the deadline, or when the job ends or is
    # cancelled from outside (the actor stopping), the thread's flag goes up.
    try:
        await trio.sleep_until(deadline)
    finally:
        token.abort.set()


def validate_payload(
    data: object, *, min_bytes: int, max_bytes: int, check: PayloadCheck | None = None
) -> tuple[int | None, int | None]:
    """Check a payload before it may be cached or published (design §5.1).

    Args:
        data: The render function's result.
        min_bytes: Smallest valid size, in bytes.
        max_bytes: Largest valid size, in bytes.
        check: The embedder's content check; returns ``(width, height)`` or None.

    Returns:
        ``(width, height)`` in pixels from ``check``, else ``(None, None)``.

    Raises:
        PayloadInvalid: (code ``payload_invalid``) not ``bytes``, fewer than
            ``min_bytes`` or more than ``max_bytes`` bytes, or ``check`` refused it
            (its ``PayloadInvalid``, or its ``ValueError`` with reason ``invalid``).
            ``details`` has ``reason``.
        RenderFailed: (code ``render_failed``) ``check`` itself failed (raised anything
            else) or returned something other than a pair of ints >= 0 or None.
    """
    if not isinstance(data, bytes):
        raise PayloadInvalid(f"render returned {type(data).__name__}, not bytes", reason="type")
    size = len(data)
    if size < min_bytes:
        raise PayloadInvalid(
            f"payload has {size} bytes, fewer than {min_bytes}", reason="too_small", size=size
        )
    if size > max_bytes:
        raise PayloadInvalid(
            f"payload has {size} bytes, more than {max_bytes}", reason="too_large", size=size
        )
    if check is None:
        return None, None
    try:
        dimensions = check(data)
    except PayloadInvalid:
        raise
    except ValueError as exc:
        raise PayloadInvalid(f"payload refused: {exc}", reason="invalid") from None
    except Exception as exc:  # a bug in the check, not a verdict on the payload
        raise RenderFailed(f"payload check failed: {describe_exception(exc)}") from None
    if dimensions is None:
        return None, None
    if not (
        isinstance(dimensions, tuple)
        and len(dimensions) == 2
        and all(type(n) is int and n >= 0 for n in dimensions)
    ):
        raise RenderFailed(
            f"payload check returned {show_value(dimensions)}, not (width, height) or None"
        )
    width, height = dimensions
    return width, height


async def run_render(
    render_fn: RenderFn,
    request: Render,
    *,
    lanes: Lanes,
    config: RendererConfig,
    token: RenderToken | None = None,
) -> Rendered:
    """Run one render job in a worker thread, under its deadline (design §5.1, §5.3).

    The deadline is ``min(request.deadline, now + config.job_timeout)``. Waiting for a
    lane counts against it.

    Args:
        render_fn: The drawing function; it should call its ``check_cancel`` argument
            now and then (between drawing stages).
        request: What to draw.
        lanes: The renderer's lanes.
        config: Payload bounds and check, ``abandon_after``.
        token: Cancellation handle (for :class:`CancelRender`); a fresh one when None.

    Returns:
        The validated :class:`Rendered`, with ``produced_at`` from the worker thread.

    Raises:
        DeadlineExceeded: (code ``deadline_exceeded``, transient) no lane before the
            deadline; the thread stopped at its abort flag; or it produced the payload
            after the deadline.
        JobStalled: (code ``job_stalled``, transient) the render stopped making progress:
            ``abandon_after`` seconds after its abort flag went up at the deadline it
            had still not called ``check_cancel`` (its only sign of activity) nor
            returned, so its thread was abandoned (design §5.3). ``details``:
            ``kind``, ``abandoned`` (True) and ``abandon_after`` (seconds).
        JobCancelled: (code ``job_cancelled``, stale) the token was cancelled; also when a
            cancelled render is abandoned.
        RenderFailed: (code ``render_failed``, permanent) ``render_fn`` raised; the
            message names the exception. An :class:`~actors.errors.ActorError` raised by
            ``render_fn`` is passed on as it is. Also a payload check that itself
            failed (see :func:`validate_payload`).
        PayloadInvalid: (code ``payload_invalid``, permanent) see
            :func:`validate_payload`.

    Cancellation:
        If the caller is cancelled, the abort flag goes up and a running thread is
        abandoned at once (it keeps its lane accounting, design §5.3); then
        ``trio.Cancelled`` propagates.
    """
    token = token or RenderToken()
    start = trio.current_time()
    deadline = min(request.deadline, start + config.job_timeout)
    kind = request.kind
    job = JobThread()
    with trio.CancelScope(deadline=deadline) as waiting:
        token.waiting = waiting
        if token.cancel_requested:
            waiting.cancel()
        await lanes.acquire(job)
    token.waiting = None
    try:
        if token.cancel_requested:
            raise JobCancelled(f"{kind} render cancelled", kind=kind)
        if waiting.cancelled_caught:
            raise DeadlineExceeded(
                f"{kind} render passed its deadline waiting for a lane", kind=kind
            )
        token.grace = config.abandon_after
        data, error, aborted, abandoned = await _draw(
            render_fn, request, job, token, lanes, deadline
        )
    finally:
        lanes.release(job)
    if token.cancel_requested:
        raise JobCancelled(f"{kind} render cancelled", kind=kind)
    if abandoned:
        LOGGER.warning(
            "%s render ignored its abort flag: thread abandoned (%d still running, %d lanes lost)",
            kind, lanes.abandoned, lanes.lost,
            extra={"renderer_event": "abandoned", "kind": kind, "job_id": request.job_id,
                   "abandoned": lanes.abandoned, "lanes_lost": lanes.lost},
        )  # fmt: skip
        # No activity since the flag went up: a stall, not a late result (§5.3).
        raise JobStalled(
            f"{kind} render stalled: it did not call check_cancel within "
            f"{config.abandon_after:g} s of its abort flag going up at its deadline; "
            "its thread was abandoned",
            kind=kind,
            abandoned=True,
            abandon_after=config.abandon_after,
        )
    if aborted:
        raise DeadlineExceeded(
            f"{kind} render passed its deadline ({deadline - start:.3g} s after acceptance)",
            kind=kind,
        )
    if error is not None:
        raise error
    produced_at = job.produced_at
    assert produced_at is not None  # set by the thread before it returned
    if produced_at > deadline:
        raise DeadlineExceeded(
            f"{kind} render finished {produced_at - deadline:.3g} s after its deadline",
            kind=kind,
        )
    width, height = validate_payload(
        data, min_bytes=config.min_bytes, max_bytes=config.max_bytes, check=config.check_payload
    )
    assert isinstance(data, bytes)
    return Rendered(
        kind=kind,
        mime=config.mime,
        data=data,
        width=width,
        height=height,
        elapsed=trio.current_time() - start,
        version=config.version,
        produced_at=produced_at,
    )


async def _draw(
    render_fn: RenderFn,
    request: Render,
    job: JobThread,
    token: RenderToken,
    lanes: Lanes,
    deadline: float,
) -> tuple[object, ActorError | None, bool, bool]:
    """Run ``render_fn`` in a thread: ``(data, error, aborted, abandoned)``."""
    clock = trio.lowlevel.current_clock()
    trio_token = trio.lowlevel.current_trio_token()
    observation, kind, options = request.observation, request.kind, request.options

    def draw() -> object:
        with job.lock:
            run = not job.abandoned
            job.started = run
        try:
            if not run:  # the job gave up before this thread got going
                return None
            data = render_fn(observation, kind, options, token.check)
            job.produced_at = clock.current_time()  # the worker side's own record
            return data
        finally:
            with contextlib.suppress(trio.RunFinishedError):  # the loop is gone: no one
                trio_token.run_sync_soon(lanes.thread_ended, job)  # is left to account to

    data: object = None
    error: ActorError | None = None
    aborted = returned = False
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_raise_abort_flag_at, token, deadline)
        with trio.CancelScope(deadline=deadline + token.grace) as stop:
            token.stop = stop
            if token.cancel_requested:
                token.cancel()
            try:
                data = await trio.to_thread.run_sync(
                    draw, abandon_on_cancel=True, limiter=lanes.threads
                )
                returned = True
            except _RenderAborted:
                returned = aborted = True
            except ActorError as exc:
                returned, error = True, exc
            except Exception as exc:
                returned = True
                error = RenderFailed(
                    f"{kind} render failed: {describe_exception(exc)}",  # never raises
                    kind=kind,
                    error_type=type(exc).__name__,
                )
            finally:
                token.stop = None
                abandoned = not returned and lanes.give_up(job)
        nursery.cancel_scope.cancel()
    return data, error, aborted, abandoned
