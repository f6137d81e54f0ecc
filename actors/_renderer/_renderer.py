"""The renderer system actor: draws payloads off the event loop (design §5).

Generic: it is built with a ``render_fn(observation, kind, options, check_cancel) ->
bytes`` and a :class:`RendererConfig` whose ``check_payload`` is the embedder's check of
a payload's content (an example application passes its own drawing and format check);
it knows no payload format. Each :class:`Render` ask becomes one task in the actor's nursery:

1. wait for a job slot (at most ``max_jobs`` at once; the handler waits, so a busy
   renderer pushes back on its mailbox) and then for a lane (``threads`` of them);
2. run ``render_fn`` in a worker thread of its lane;
3. raise the thread's abort flag at the job's absolute deadline, or on
   :class:`CancelRender` (or the actor stopping); ``check_cancel`` raises as soon as
   ``render_fn`` next calls it, so the thread ends promptly;
4. judge the job by when the thread had the payload (the thread records it, design
   §4.14), then validate the payload (``bytes``, size bounds in bytes, the embedder's
   check) before it is answered, so nothing invalid is cached or published;
5. classify failures (design §1.5): :class:`~actors.errors.DeadlineExceeded` (transient),
   :class:`~actors.errors.JobStalled` (transient: abandoned, see below),
   :class:`~actors.errors.JobCancelled` (stale), :class:`~actors.errors.PayloadInvalid`
   and :class:`~actors.errors.RenderFailed` (permanent).

No wedged lanes (design §5.3): a render that ignores its abort flag is abandoned
``abandon_after`` seconds after its deadline or cancel (it ends ``stalled``, or
``cancelled`` after a cancel: a render's activity is a ``check_cancel`` call, and it
showed none), and its lane is given to a
replacement thread while fewer than ``max_abandoned`` abandoned threads still run
(:mod:`actors._renderer._lanes`). Stopping the actor abandons running threads at once,
so a wedged render never holds up the renderer's shutdown. Each abandonment is a
``logging`` warning on ``actors.renderer`` (fields in ``extra``: ``renderer_event``,
``kind``, ``job_id``, ``abandoned``, ``lanes_lost``).

Usage::

    config = RendererConfig(threads=2, mime="image/png", check_payload=check_image)
    ref = await nursery.start(Renderer(render, config).run)
    done = await ref.ask(
        Render(observation=obs, kind="summary", deadline=trio.current_time() + 5),
        timeout=6,
    )
    done.data  # the payload; done.width, done.height from check_image
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from .._core import Actor
from ..errors import ActorError, DeadlineExceeded, JobCancelled, JobStalled, RenderFailed
from ._config import CancelRender, GetRendererStatistics, Render, RendererStatistics
from ._config import RendererConfig as RendererConfig  # the runtime imports it from here
from ._config import RenderFn as RenderFn
from ._job import RenderToken, run_render
from ._lanes import Lanes

if TYPE_CHECKING:
    from collections.abc import Hashable

    from .._core import Reply

__all__ = ["Renderer"]


class Renderer(Actor):
    """The renderer system actor (design §5.1); see the module docstring.

    Messages (asks): :class:`Render` → :class:`Rendered`; :class:`CancelRender` →
    bool; :class:`GetRendererStatistics` → :class:`RendererStatistics`. Anything else
    is answered with :class:`~actors.errors.RenderFailed`.

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
        self._lanes = Lanes(self.config.threads, self.config.max_abandoned)
        self._slots = trio.Semaphore(self.config.max_jobs)
        self._jobs: dict[Hashable, RenderToken] = {}
        self._active = 0
        self._counts = dict.fromkeys(("completed", "failed", "cancelled", "deadline", "stalled"), 0)

    def render_statistics(self) -> RendererStatistics:
        """The counters, without waiting."""
        lanes = self._lanes
        limiter = lanes.limiter.statistics()
        return RendererStatistics(
            active=self._active,
            drawing=limiter.borrowed_tokens - lanes.lost,
            waiting_for_thread=limiter.tasks_waiting,
            completed=self._counts["completed"],
            failed=self._counts["failed"],
            cancelled=self._counts["cancelled"],
            deadline_exceeded=self._counts["deadline"],
            stalled=self._counts["stalled"],
            abandoned=lanes.abandoned,
            abandoned_total=lanes.abandoned_total,
            lanes_lost=lanes.lost,
        )

    async def handle(self, message: Any, reply: Reply) -> None:
        """Dispatch one message (see the class docstring).

        Raises:
            DeadlineExceeded: (code ``deadline_exceeded``) no job slot freed up before
                the :class:`Render` deadline (or ``job_timeout``, whichever is first).
            RenderFailed: (code ``render_failed``) an unknown message, or a ``job_id``
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
            raise RenderFailed(f"the renderer cannot handle a {type(message).__name__} message")

    async def _accept(self, request: Render, reply: Reply) -> None:
        if request.job_id is not None and request.job_id in self._jobs:
            raise RenderFailed(f"render job {request.job_id!r} is already running")
        # A far deadline does not hold the mailbox longer than a job may run.
        wait_until = min(request.deadline, trio.current_time() + self.config.job_timeout)
        with trio.move_on_at(wait_until) as waited:
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
                self.render_fn, request, lanes=self._lanes, config=self.config, token=token
            )
        except JobCancelled as exc:
            self._counts["cancelled"] += 1
            reply.fail(exc)
        except DeadlineExceeded as exc:
            self._counts["deadline"] += 1
            reply.fail(exc)
        except JobStalled as exc:
            self._counts["stalled"] += 1
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
