"""The renderer system actor: draws payloads off the event loop (design §5.1).

Generic: it is built with a ``render_fn(observation, kind, options, check_cancel) ->
bytes`` (the preview server passes :func:`examples.preview.drawing.render.render`) and
knows nothing of QCoDeS. Each :class:`Render` ask becomes one task in the actor's nursery:

1. wait for a job slot (at most ``max_jobs`` at once; the handler waits, so a busy
   renderer pushes back on its mailbox) and then for a worker thread
   (a :class:`trio.CapacityLimiter` of ``threads``);
2. run ``render_fn`` in a worker thread (``trio.to_thread.run_sync`` with
   ``abandon_on_cancel=False``: a thread is never left running behind our back);
3. enforce the job's absolute deadline with a cancel scope. When the deadline passes,
   or the job is cancelled (:class:`CancelRender`, or the actor stopping), a
   thread-safe flag is raised; ``check_cancel`` raises as soon as ``render_fn`` next
   calls it, so the thread ends promptly;
4. validate the payload (``bytes``, size bounds in bytes, the PNG signature and header
   when the mime type is PNG) before it is answered, so nothing invalid is cached or
   published;
5. classify failures (design §1.5): :class:`~actors.errors.DeadlineExceeded` (transient),
   :class:`~actors.errors.JobCancelled` (stale), :class:`~actors.errors.PayloadInvalid`
   and :class:`~actors.errors.RenderError` (permanent).

Usage::

    ref = await nursery.start(Renderer(render, RendererConfig(threads=2)).run)
    done = await ref.ask(
        Render(observation=obs, kind="preview", deadline=trio.current_time() + 5),
        timeout=6,
    )
    done.data  # PNG bytes; done.width, done.height in pixels
"""

from __future__ import annotations

import math
import struct
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._core._actor import Actor
from .._core._config import count_field, duration_field
from ..errors import ActorError, DeadlineExceeded, JobCancelled, PayloadInvalid, RenderError

if TYPE_CHECKING:
    from .._core._ref import Reply

__all__ = [
    "PNG_MIME",
    "PNG_SIGNATURE",
    "CancelRender",
    "GetRendererStatistics",
    "Render",
    "RenderFn",
    "RenderToken",
    "Rendered",
    "Renderer",
    "RendererConfig",
    "RendererStatistics",
    "run_render",
    "validate_payload",
]

#: ``render_fn(observation, kind, options, check_cancel) -> payload bytes``.
RenderFn = Callable[[Any, str, Mapping[str, Any], Callable[[], None]], bytes]

PNG_MIME = "image/png"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_MIN_PNG_BYTES = 67  # signature + IHDR + one IDAT + IEND: the smallest valid PNG


def _check_deadline(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{attribute.name} must be a finite trio time in seconds, got {value!r}")


def _check_kind(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not 1 <= len(value) <= 64:
        raise ValueError(f"{attribute.name} must be a string of 1..64 characters, got {value!r}")


@attrs.frozen(kw_only=True)
class RendererConfig:
    """Limits of the renderer actor (design §5.1); validated at construction (§1.6).

    Raises:
        ValueError: a field is out of range (the message names it), or
            ``max_bytes < min_bytes``.
    """

    threads: int = count_field(1, minimum=1, maximum=16)
    """Worker threads drawing at once (a ``trio.CapacityLimiter``)."""
    max_jobs: int = count_field(16, minimum=1, maximum=4096)
    """Jobs accepted at once (drawing or waiting for a thread); more wait in the mailbox."""
    mailbox_capacity: int = count_field(16, minimum=0, maximum=65536)
    """The actor's mailbox size in messages."""
    job_timeout: float = duration_field(15.0, allow_zero=False)
    """Upper bound on one job in seconds, from acceptance (trio clock); a
    :class:`Render` deadline later than this is cut to it (design §4.7)."""
    min_bytes: int = count_field(_MIN_PNG_BYTES, minimum=1)
    """Smallest valid payload, in bytes."""
    max_bytes: int = count_field(4 * 1024 * 1024, minimum=1)
    """Largest valid payload, in bytes."""
    mime: str = attrs.field(default=PNG_MIME, validator=attrs.validators.instance_of(str))
    """Mime type of every payload; ``image/png`` also checks the PNG signature."""
    version: str = attrs.field(default="1", validator=attrs.validators.instance_of(str))
    """Renderer version, reported with each payload (part of cache keys, design §4.10)."""

    def __attrs_post_init__(self) -> None:
        if self.max_bytes < self.min_bytes:
            raise ValueError(
                f"max_bytes ({self.max_bytes}) must be >= min_bytes ({self.min_bytes})"
            )


def _options(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(value or {})


@attrs.frozen(kw_only=True)
class Render:
    """Ask: draw one payload (design §5.1). Answered with :class:`Rendered`."""

    observation: Any
    """What to draw (JSON-compatible; e.g. a QCoDeS observation)."""
    kind: str = attrs.field(validator=_check_kind)
    """Which picture, e.g. ``"thumbnail"`` or ``"preview"``."""
    deadline: float = attrs.field(validator=_check_deadline)
    """Absolute deadline, seconds on trio's clock (``trio.current_time()``)."""
    options: Mapping[str, Any] = attrs.field(factory=dict, converter=_options)
    """Options passed to ``render_fn``."""
    job_id: Hashable | None = None
    """Name for :class:`CancelRender`; None if the job need not be cancellable."""


@attrs.frozen(kw_only=True)
class CancelRender:
    """Ask: cancel the job with this ``job_id``. Answered with True if it was running.

    The job's asker gets :class:`~actors.errors.JobCancelled` (code ``cancelled``).
    """

    job_id: Hashable


@attrs.frozen(kw_only=True)
class GetRendererStatistics:
    """Ask: answered with :class:`RendererStatistics`."""


@attrs.frozen(kw_only=True)
class Rendered:
    """A validated payload (the answer to :class:`Render`)."""

    kind: str
    """The requested kind."""
    mime: str
    """Mime type, e.g. ``image/png``."""
    data: bytes = attrs.field(repr=lambda data: f"<{len(data)} bytes>")
    """The payload."""
    width: int | None
    """Image width in pixels (from the PNG header), or None for other mime types."""
    height: int | None
    """Image height in pixels, or None."""
    elapsed: float
    """Seconds (trio clock) from acceptance to validated payload."""
    version: str
    """The renderer version (:attr:`RendererConfig.version`)."""

    @property
    def size_bytes(self) -> int:
        """``len(data)``, in bytes."""
        return len(self.data)


@attrs.frozen(kw_only=True)
class RendererStatistics:
    """Counters of one renderer actor; taken without waiting."""

    active: int
    """Jobs accepted and not finished (waiting for a thread or drawing)."""
    drawing: int
    """Worker threads busy now."""
    waiting_for_thread: int
    """Jobs waiting for a worker thread."""
    completed: int
    """Jobs answered with a payload."""
    failed: int
    """Jobs that failed with ``RenderError`` or ``PayloadInvalid``."""
    cancelled: int
    """Jobs ended by :class:`CancelRender`."""
    deadline_exceeded: int
    """Jobs that passed their deadline."""


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
        self.scope: trio.CancelScope | None = None

    def cancel(self) -> None:
        """Cancel the job: its asker gets ``JobCancelled`` (code ``cancelled``)."""
        self.cancel_requested = True
        self.abort.set()
        if self.scope is not None:
            self.scope.cancel()

    def check(self) -> None:
        """The ``check_cancel`` given to ``render_fn``: raises once the job must stop."""
        if self.abort.is_set():
            raise _RenderAborted("render job cancelled")


async def _raise_abort_flag_when_cancelled(token: RenderToken) -> None:
    # Runs beside the worker thread: whatever cancels this task (deadline, CancelRender,
    # the actor stopping) raises the flag the thread polls through check_cancel.
    try:
        await trio.sleep_forever()
    finally:
        token.abort.set()


def validate_payload(
    data: object, *, mime: str, min_bytes: int, max_bytes: int
) -> tuple[int | None, int | None]:
    """Check a payload before it may be cached or published (design §5.1).

    Returns:
        ``(width, height)`` in pixels for a PNG, else ``(None, None)``.

    Raises:
        PayloadInvalid: (code ``payload_invalid``) not ``bytes``, fewer than
            ``min_bytes`` or more than ``max_bytes`` bytes, or (for ``image/png``) no
            PNG signature or a bad ``IHDR`` header. ``details`` has ``reason``.
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
    if mime != PNG_MIME:
        return None, None
    if not data.startswith(PNG_SIGNATURE):
        raise PayloadInvalid("payload is not a PNG (bad signature)", reason="not_png")
    if len(data) < 24 or data[12:16] != b"IHDR":
        raise PayloadInvalid("PNG has no IHDR header", reason="not_png")
    width, height = struct.unpack(">II", data[16:24])
    if width == 0 or height == 0:
        raise PayloadInvalid(f"PNG is {width}x{height} pixels", reason="not_png")
    return int(width), int(height)


async def run_render(
    render_fn: RenderFn,
    request: Render,
    *,
    limiter: trio.CapacityLimiter,
    config: RendererConfig,
    token: RenderToken | None = None,
) -> Rendered:
    """Run one render job in a worker thread, under its deadline (design §5.1).

    The deadline is ``min(request.deadline, now + config.job_timeout)``. Waiting for a
    thread counts against it.

    Args:
        render_fn: The drawing function; it must call its ``check_cancel`` argument now
            and then (between drawing stages).
        request: What to draw.
        limiter: Bounds the worker threads.
        config: Payload bounds and mime type.
        token: Cancellation handle (for :class:`CancelRender`); a fresh one when None.

    Returns:
        The validated :class:`Rendered`.

    Raises:
        DeadlineExceeded: (code ``deadline_exceeded``, transient) the deadline passed
            before the payload was ready.
        JobCancelled: (code ``cancelled``, stale) the token was cancelled.
        RenderError: (code ``render_failed``, permanent) ``render_fn`` raised; the
            message names the exception. An :class:`~actors.errors.ActorError` raised by
            ``render_fn`` is passed on as it is.
        PayloadInvalid: (code ``payload_invalid``, permanent) see
            :func:`validate_payload`.

    Cancellation:
        If the caller is cancelled, the abort flag is raised and this waits for the
        thread to return (``render_fn`` should notice at its next check), then
        ``trio.Cancelled`` propagates.
    """
    token = token or RenderToken()
    start = trio.current_time()
    deadline = min(request.deadline, start + config.job_timeout)
    observation, kind, options = request.observation, request.kind, request.options
    data: object = None
    error: ActorError | None = None
    aborted = False

    def draw() -> object:
        return render_fn(observation, kind, options, token.check)

    with trio.CancelScope(deadline=deadline) as scope:
        token.scope = scope
        if token.cancel_requested:
            scope.cancel()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_raise_abort_flag_when_cancelled, token)
            try:
                data = await trio.to_thread.run_sync(draw, abandon_on_cancel=False, limiter=limiter)
            except _RenderAborted:
                aborted = True
            except ActorError as exc:
                error = exc
            except Exception as exc:
                error = RenderError(
                    f"{kind} render failed: {type(exc).__name__}: {exc}",
                    kind=kind,
                    error_type=type(exc).__name__,
                )
            finally:
                nursery.cancel_scope.cancel()
    token.scope = None
    if token.cancel_requested:
        raise JobCancelled(f"{kind} render cancelled", kind=kind)
    if scope.cancelled_caught or aborted:
        raise DeadlineExceeded(
            f"{kind} render passed its deadline ({deadline - start:.3g} s after acceptance)",
            kind=kind,
        )
    if error is not None:
        raise error
    width, height = validate_payload(
        data, mime=config.mime, min_bytes=config.min_bytes, max_bytes=config.max_bytes
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
    )


class Renderer(Actor):
    """The renderer system actor (design §5.1); see the module docstring.

    Messages (asks): :class:`Render` → :class:`Rendered`; :class:`CancelRender` →
    bool; :class:`GetRendererStatistics` → :class:`RendererStatistics`. Anything else
    is answered with :class:`~actors.errors.RenderError`.

    Args:
        render_fn: ``render_fn(observation, kind, options, check_cancel) -> bytes``;
            runs in a worker thread, so it must not touch trio objects.
        config: Limits; defaults to :class:`RendererConfig`.
    """

    name = "renderer"

    def __init__(self, render_fn: RenderFn, config: RendererConfig | None = None) -> None:
        if not callable(render_fn):
            raise TypeError(f"render_fn must be callable, got {render_fn!r}")
        self.render_fn = render_fn
        self.config = config or RendererConfig()
        self.mailbox_capacity = self.config.mailbox_capacity
        self._limiter = trio.CapacityLimiter(self.config.threads)
        self._slots = trio.Semaphore(self.config.max_jobs)
        self._jobs: dict[Hashable, RenderToken] = {}
        self._active = 0
        self._counts = dict.fromkeys(("completed", "failed", "cancelled", "deadline"), 0)

    def render_statistics(self) -> RendererStatistics:
        """The counters, without waiting."""
        limiter = self._limiter.statistics()
        return RendererStatistics(
            active=self._active,
            drawing=limiter.borrowed_tokens,
            waiting_for_thread=limiter.tasks_waiting,
            completed=self._counts["completed"],
            failed=self._counts["failed"],
            cancelled=self._counts["cancelled"],
            deadline_exceeded=self._counts["deadline"],
        )

    async def handle(self, message: Any, reply: Reply) -> None:
        """Dispatch one message (see the class docstring).

        Raises:
            DeadlineExceeded: (code ``deadline_exceeded``) no job slot freed up before
                the :class:`Render` deadline.
            RenderError: (code ``render_failed``) an unknown message, or a ``job_id``
                that is already running.
        """
        if isinstance(message, Render):
            await self._accept(message, reply)
        elif isinstance(message, CancelRender):
            token = self._jobs.get(message.job_id)
            if token is not None:
                token.cancel()
            reply.send(token is not None)
        elif isinstance(message, GetRendererStatistics):
            reply.send(self.render_statistics())
        else:
            raise RenderError(f"the renderer cannot handle a {type(message).__name__} message")

    async def _accept(self, request: Render, reply: Reply) -> None:
        if request.job_id is not None and request.job_id in self._jobs:
            raise RenderError(f"render job {request.job_id!r} is already running")
        with trio.move_on_at(request.deadline) as waited:
            await self._slots.acquire()
        if waited.cancelled_caught:
            self._counts["deadline"] += 1
            raise DeadlineExceeded(
                f"{request.kind} render passed its deadline waiting for a job slot",
                kind=request.kind,
            )
        token = RenderToken()
        if request.job_id is not None:
            self._jobs[request.job_id] = token
        self._active += 1
        self.nursery.start_soon(self._job, request, reply, token)

    async def _job(self, request: Render, reply: Reply, token: RenderToken) -> None:
        try:
            result = await run_render(
                self.render_fn, request, limiter=self._limiter, config=self.config, token=token
            )
        except JobCancelled as exc:
            self._counts["cancelled"] += 1
            reply.fail(exc)
        except DeadlineExceeded as exc:
            self._counts["deadline"] += 1
            reply.fail(exc)
        except ActorError as exc:
            self._counts["failed"] += 1
            reply.fail(exc)
        else:
            self._counts["completed"] += 1
            reply.send(result)
        finally:
            self._active -= 1
            if request.job_id is not None and self._jobs.get(request.job_id) is token:
                del self._jobs[request.job_id]
            self._slots.release()
