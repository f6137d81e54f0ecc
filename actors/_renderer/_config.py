"""The renderer's settings, messages and answers (design §5.1, §5.3).

Pure data (attrs frozen classes), validated at construction (design §1.6). Nothing here
knows a payload format: the embedder passes its check (``check_payload``), e.g. one
that verifies an image's header.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import attrs

from .._core import check_hashable, count_field, duration_field, show_value

__all__ = [
    "CancelRender",
    "GetRendererStatistics",
    "PayloadCheck",
    "Render",
    "RenderFn",
    "Rendered",
    "RendererConfig",
    "RendererStatistics",
]

#: ``render_fn(observation, kind, options, check_cancel) -> payload bytes``.
RenderFn = Callable[[Any, str, Mapping[str, Any], Callable[[], None]], bytes]
#: ``check(payload) -> (width, height) in pixels, or None``; raises
#: :class:`~actors.errors.PayloadInvalid` (or ``ValueError``) for a bad payload.
PayloadCheck = Callable[[bytes], tuple[int, int] | None]


def _check_deadline(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{attribute.name} must be a finite trio time in seconds, got {value!r}")


def _check_kind(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not 1 <= len(value) <= 64:
        raise ValueError(f"{attribute.name} must be a string of 1..64 characters, got {value!r}")


def _check_text(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not value or len(value) > 255:
        raise ValueError(f"{attribute.name} must be a str of 1..255 characters, got {value!r}")


def _check_callable(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not callable(value):
        raise ValueError(f"{attribute.name} must be callable or None, got {show_value(value)}")


@attrs.frozen(kw_only=True)
class RendererConfig:
    """Limits of the renderer actor (design §5.1, §5.3); validated at construction (§1.6).

    Raises:
        ValueError: a field is out of range (the message names it), or
            ``max_bytes < min_bytes``.
    """

    threads: int = count_field(1, minimum=1, maximum=16)
    """Lanes: render functions running at once, each in its own worker thread."""
    max_jobs: int = count_field(16, minimum=1, maximum=4096)
    """Jobs accepted at once (drawing or waiting for a lane); more wait in the mailbox."""
    mailbox_capacity: int = count_field(16, minimum=0, maximum=65536)
    """The actor's mailbox size in messages."""
    job_timeout: float = duration_field(15.0, allow_zero=False)
    """Upper bound on one job in seconds, from acceptance (trio clock); a
    :class:`Render` deadline later than this is cut to it (design §4.7)."""
    abandon_after: float = duration_field(1.0)
    """Seconds a render may go on after its deadline (or a cancel) without returning,
    its abort flag raised, before its thread is abandoned and its lane given to a
    replacement thread (design §5.3). A render's only activity is a ``check_cancel``
    call (which raises once the flag is up) or its return; one that shows none for this
    long has stalled and ends with :class:`~actors.errors.JobStalled` (code
    ``stalled``), or ``cancelled`` after a :class:`CancelRender`."""
    max_abandoned: int = count_field(4, minimum=0, maximum=64)
    """Most abandoned threads still running that get a replacement lane; beyond it an
    abandoned thread keeps its lane until it returns (design §5.3)."""
    min_bytes: int = count_field(1, minimum=1)
    """Smallest valid payload, in bytes."""
    max_bytes: int = count_field(4 * 1024 * 1024, minimum=1)
    """Largest valid payload, in bytes."""
    mime: str = attrs.field(default="application/octet-stream", validator=_check_text)
    """Mime type of every payload, reported with it."""
    check_payload: PayloadCheck | None = attrs.field(default=None, validator=_check_callable)
    """The embedder's check of a payload's content (e.g. a PNG header), run before it is
    answered; returns ``(width, height)`` in pixels or None (design §5.1)."""
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
    """Ask: draw one payload (design §5.1). Answered with :class:`Rendered`.

    Raises:
        ValueError: a field is invalid (``kind``, ``deadline``, an unhashable
            ``job_id``); the message names it.
    """

    observation: Any
    """What to draw (JSON-compatible)."""
    kind: str = attrs.field(validator=_check_kind)
    """Which derived payload of the observation, e.g. ``"summary"`` (the embedder's
    ``render_fn`` decides what each kind means)."""
    deadline: float = attrs.field(validator=_check_deadline)
    """Absolute deadline, seconds on trio's clock (``trio.current_time()``)."""
    options: Mapping[str, Any] = attrs.field(factory=dict, converter=_options)
    """Options passed to ``render_fn``."""
    job_id: Hashable | None = attrs.field(default=None, validator=check_hashable)
    """Name for :class:`CancelRender` (hashable); None if the job need not be
    cancellable."""


@attrs.frozen(kw_only=True)
class CancelRender:
    """Ask: cancel the job with this ``job_id``. Answered with True if it was running.

    The job's asker gets :class:`~actors.errors.JobCancelled` (code ``job_cancelled``).

    Raises:
        ValueError: ``job_id`` is not hashable.
    """

    job_id: Hashable = attrs.field(validator=check_hashable)


@attrs.frozen(kw_only=True)
class GetRendererStatistics:
    """Ask: answered with :class:`RendererStatistics`."""


@attrs.frozen(kw_only=True)
class Rendered:
    """A validated payload (the answer to :class:`Render`)."""

    kind: str
    """The requested kind."""
    mime: str
    """Mime type (:attr:`RendererConfig.mime`)."""
    data: bytes = attrs.field(repr=lambda data: f"<{len(data)} bytes>")
    """The payload."""
    width: int | None
    """Image width in pixels (from the embedder's check), or None."""
    height: int | None
    """Image height in pixels, or None."""
    elapsed: float
    """Seconds (trio clock) from acceptance to validated payload."""
    version: str
    """The renderer version (:attr:`RendererConfig.version`)."""
    produced_at: float = 0.0
    """When the worker thread finished drawing, seconds on trio's clock, recorded by
    that thread: judge deadlines by it (design §4.14, e.g. ``Produced(data, at=...)``)."""

    @property
    def size_bytes(self) -> int:
        """``len(data)``, in bytes."""
        return len(self.data)


@attrs.frozen(kw_only=True)
class RendererStatistics:
    """Counters of one renderer actor; taken without waiting."""

    active: int
    """Jobs accepted and not finished (waiting for a lane or drawing)."""
    drawing: int
    """Lanes busy now."""
    waiting_for_thread: int
    """Jobs waiting for a lane."""
    completed: int
    """Jobs answered with a payload."""
    failed: int
    """Jobs that failed with ``RenderFailed`` or ``PayloadInvalid``."""
    cancelled: int
    """Jobs ended by :class:`CancelRender`."""
    deadline_exceeded: int
    """Jobs that passed their deadline."""
    stalled: int = 0
    """Jobs abandoned because they stopped making progress past their deadline
    (:class:`~actors.errors.JobStalled`, design §5.3)."""
    abandoned: int = 0
    """Abandoned worker threads still running (design §5.3)."""
    abandoned_total: int = 0
    """Threads abandoned since the start."""
    lanes_lost: int = 0
    """Lanes held by abandoned threads beyond ``max_abandoned`` (no replacement)."""
