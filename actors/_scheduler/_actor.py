"""The scheduler system actor: K workers driving the scheduler core with trio (design §4).

Wiring (for the runtime)::

    async def execute(job: SchedulerJob, pool_ref, renderer_ref) -> Any:
        claim = job.claim                    # run_id, guid, kind, revision, deadline...
        if claim.kind == "metadata":         # read the source (a helper-process job);
            return await read_run(pool_ref, claim)   # Progressive(partial) if still
                                                     # being written
        observation = job.observation or await read_run(pool_ref, claim)
        return await render(renderer_ref, observation, claim)  # payload (bytes)

    actor = SchedulerActor(
        execute, pool_ref, renderer_ref,            # fn, *args (design §1.2 style)
        runs=[RunInfo(run_id=1, guid="...", revision="...")],
        source="/path/to/db.sqlite",
        config=SchedulerConfig(workers=2),          # K, job deadline, pacing, backoff
        payload_cache=PayloadCache(directory=cache_dir),    # optional
        payload_to_bytes=..., payload_from_bytes=...,       # if results are not bytes
    )
    ref = await nursery.start(actor.run)
    nursery.start_soon(forward, actor.events)        # one task reads the events:
    # async for notice in events: RunStarted / Published / Parked / Retrying /
    #                             Failed / Invalidated / Settled
    await ref.send(SetPriority(selected=3, visible=(1, 2, 4)))
    ...
    await ref.stop(grace=2.0)     # running jobs may finish within grace; then cancelled

*Messages* (send or ask; asks are answered ``None`` unless said otherwise):
:class:`SetPriority`, :class:`SourceChanged`, :class:`Reconcile`,
:class:`SwitchSource`, :class:`HelperRestarted`, :class:`FormatChanged`, and
:class:`GetSchedulerStatistics` (answered with :class:`SchedulerActorStatistics`). A
rejected request (unknown run id, a reconcile that is not append-only) fails the ask with
:class:`~actors.errors.ScheduleRejected` and changes nothing.

*execute* is ``async def execute(job: SchedulerJob, *args) -> result``. It runs in one
of K worker tasks under a cancel scope whose deadline is ``job.claim.deadline`` (design §4.7):
passing it counts as :class:`~actors.errors.DeadlineExceeded` (transient). Errors are
classified by ``ActorError.category`` (design §4.6); any other exception is a permanent
failure with code ``unexpected_error`` and a bounded message. A job made stale by
``SwitchSource`` or ``HelperRestarted`` is cancelled.

*Events* (:attr:`SchedulerActor.events`, a bounded channel, in order): :class:`RunStarted`
at a run's first claim per revision, then the core's
:class:`~actors.Published` ``(run_id, guid, kind, revision, result, generation)`` (once
per run, kind and revision, design §4.9), :class:`~actors.Parked`,
:class:`~actors.Retrying`, :class:`~actors.Failed`, :class:`~actors.Invalidated` and
:class:`~actors.Settled`. Stale results are dropped silently. A slow reader holds back
the workers (never the mailbox); the channel closes when the actor stops.

*Caches* (design §4.10): conclusive metadata results are kept in an
:class:`~actors.ObservationCache` keyed by (source, guid, revision) and handed to the
images' jobs as ``job.observation``; thumbnails and previews are looked up in the
optional :class:`~actors.PayloadCache` (memory, then disk in a worker thread) before
``execute`` runs, and stored there after. Progressive (parked) results are never cached.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING, Any

import attrs
import trio

from protocol.errors import describe_exception

from .._core._actor import Actor
from .._core._config import validate_count
from ..errors import (
    ActorError,
    DeadlineExceeded,
    ErrorRecord,
    InvalidCommand,
    JobCancelled,
)
from ._cache import ObservationCache, PayloadCache, PayloadKey, approximate_size
from ._scheduler import Scheduler
from ._state import (
    KINDS,
    Claim,
    Dropped,
    Progressive,
    Published,
    RunInfo,
    SchedulerConfig,
    SchedulerEvent,
    SchedulerStatistics,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from .._core._ref import Reply
    from ._cache import CacheStatistics, DiskCacheStatistics

__all__ = [
    "FormatChanged",
    "GetSchedulerStatistics",
    "HelperRestarted",
    "SchedulerJob",
    "Reconcile",
    "SchedulerActor",
    "SchedulerActorStatistics",
    "SetPriority",
    "SourceChanged",
    "RunStarted",
    "SwitchSource",
]

#: Code of the record made from an exception that is not an ActorError.
UNEXPECTED_ERROR = "unexpected_error"
#: Kinds whose results go to the payload cache.
PAYLOAD_KINDS = frozenset({"thumbnail", "preview"})


def _runs(value: Iterable[RunInfo]) -> tuple[RunInfo, ...]:
    return tuple(value)


def _ids(value: Iterable[int]) -> tuple[int, ...]:
    # Typed, unlike ``converter=tuple`` (mypy's attrs plugin: python/mypy#5313).
    return tuple(value)


# --- messages ----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SetPriority:
    """Choose the selected run and the visible runs (design §4.2)."""

    selected: int | None = None
    """The selected run's id, or None."""
    visible: tuple[int, ...] = attrs.field(default=(), converter=_ids)
    """Ids of the runs in the viewport."""


@attrs.frozen(kw_only=True)
class SourceChanged:
    """A run's source data changed (design §4.8); deferred while its job is active."""

    run_id: int
    revision: str | None = None
    """The new revision, or None to make one up."""


@attrs.frozen(kw_only=True)
class Reconcile:
    """The source's full run list: append-only (design §4.8)."""

    runs: tuple[RunInfo, ...] = attrs.field(converter=_runs)


@attrs.frozen(kw_only=True)
class SwitchSource:
    """Serve another source: a new generation; older results are stale (design §4.8)."""

    source: str
    runs: tuple[RunInfo, ...] = attrs.field(converter=_runs)


@attrs.frozen(kw_only=True)
class HelperRestarted:
    """The helper was restarted; results of its old incarnation are invalid (§4.8)."""


@attrs.frozen(kw_only=True)
class FormatChanged:
    """The renderer version or options changed: new cache keys, failures retried (§4.6)."""

    renderer_version: str
    options: str
    """Canonical text of the rendering options (e.g. sorted-key JSON)."""
    kinds: frozenset[str] | None = None
    """Kinds whose format changed; None for all."""


@attrs.frozen(kw_only=True)
class GetSchedulerStatistics:
    """Ask for a :class:`SchedulerActorStatistics`."""


# --- what execute gets, and the extra event -------------------------------------------------


@attrs.frozen(kw_only=True)
class SchedulerJob:
    """What ``execute`` is called with."""

    claim: Claim
    """The unit of work: run, kind, revision, absolute deadline (trio clock seconds)."""
    observation: Any = None
    """For thumbnail/preview: the run's conclusive metadata result from the observation
    cache, or None (a miss, or a metadata job): then read the source again."""


@attrs.frozen(kw_only=True)
class RunStarted:
    """The first claim of a run at a revision (for the event log's ``job_started``)."""

    run_id: int
    guid: str
    revision: str
    kind: str


@attrs.frozen(kw_only=True)
class SchedulerActorStatistics:
    """A snapshot of the scheduler actor (STYLE 16)."""

    core: SchedulerStatistics
    workers: int
    busy: int
    """Workers running a job now."""
    events_queued: int
    """Events waiting for the reader (outbox + channel buffer)."""
    cancelled_stale: int
    """Jobs cancelled because they became stale."""
    observations: CacheStatistics
    payload_memory: CacheStatistics | None
    payload_disk: DiskCacheStatistics | None
    disk_errors: int
    """Disk cache reads or writes that failed with ``OSError`` (treated as misses)."""


# --- the actor ----------------------------------------------------------------------------------


class SchedulerActor(Actor):
    """The scheduler system actor (design §4); see the module docstring for wiring.

    Args:
        execute: ``async execute(job, *args) -> result``.
        *args: Passed to ``execute`` after the job.
        runs: The source's initial runs, in table order.
        source: Identity of the source.
        config: Core settings (K workers, job deadline, pacing, backoff).
        payload_cache: Cache of thumbnail/preview payloads, or None.
        observations: Cache of metadata results (default: 8 MiB, 512 entries).
        renderer_version: Part of the payload cache key.
        options: Rendering options (canonical text), part of the payload cache key.
        events_capacity: Buffer of the events channel, in events (>= 1).
        observation_size: Size estimate of a metadata result, in bytes.
        payload_to_bytes: What to store in the payload cache for a result (None: do
            not cache it); default: bytes-like results as bytes.
        payload_from_bytes: Rebuild a result from cached bytes; default: the bytes.

    Raises:
        ScheduleRejected: (code ``schedule_rejected``) two runs share an id.
        ValueError: ``events_capacity`` is invalid.
    """

    name = "scheduler"

    def __init__(
        self,
        execute: Callable[..., Awaitable[Any]],
        *args: Any,
        runs: Iterable[RunInfo] = (),
        source: str = "",
        config: SchedulerConfig | None = None,
        payload_cache: PayloadCache | None = None,
        observations: ObservationCache[tuple[str, str, str], Any] | None = None,
        renderer_version: str = "",
        options: str = "",
        events_capacity: int = 64,
        observation_size: Callable[[Any], int] = approximate_size,
        payload_to_bytes: Callable[[Any], bytes | None] | None = None,
        payload_from_bytes: Callable[[bytes], Any] | None = None,
    ) -> None:
        self._capacity = validate_count("events_capacity", events_capacity, minimum=1)
        self._core = Scheduler(runs, source=source, config=config)
        self._execute = execute
        self._args = args
        self._payloads = payload_cache
        self._observations: ObservationCache[tuple[str, str, str], Any] = (
            observations if observations is not None else ObservationCache()
        )
        self._renderer_version = renderer_version
        self._options = options
        self._observation_size = observation_size
        self._to_bytes = payload_to_bytes or _bytes_or_none
        self._from_bytes = payload_from_bytes or _identity
        self._events_send, self._events_receive = trio.open_memory_channel[Any](self._capacity)
        self._outbox: deque[Any] = deque()
        self._outbox_changed = trio.Event()
        self._room = trio.Event()
        self._changed = trio.Event()
        self._scopes: dict[int, trio.CancelScope] = {}
        self._stale_ids: set[int] = set()
        self._closing = False
        self._live_workers = 0
        self._busy = 0
        self._cancelled_stale = 0
        self._disk_errors = 0

    # --- public surface ----------------------------------------------------------------------

    @property
    def events(self) -> trio.MemoryReceiveChannel[Any]:
        """The receive side of the events channel (one reader; clone it for more)."""
        return self._events_receive

    @property
    def scheduler(self) -> Scheduler:
        """The core state machine (read-only use: queries and statistics)."""
        return self._core

    async def on_start(self) -> None:
        """Start the publisher and the K worker tasks in the actor's nursery."""
        workers = self._core.config.workers
        self._live_workers = workers
        self.nursery.start_soon(self._publisher)
        for index in range(workers):
            self.nursery.start_soon(self._worker, name=f"scheduler-worker-{index}")

    async def handle(self, message: Any, reply: Reply) -> None:
        """Apply one message to the core (see the module docstring).

        Raises:
            ScheduleRejected: (code ``schedule_rejected``) unknown run id, or a
                reconcile that reorders or removes runs; nothing changed.
            InvalidCommand: (code ``invalid_command``) not a scheduler message.
        """
        core = self._core
        events: list[SchedulerEvent] = []
        answer: Any = None
        if isinstance(message, SetPriority):
            core.set_priority(message.selected, message.visible)
        elif isinstance(message, SourceChanged):
            events = core.source_changed(message.run_id, message.revision)
        elif isinstance(message, Reconcile):
            events = core.reconcile(message.runs)
        elif isinstance(message, SwitchSource):
            self._cancel_stale(core.switch_source(message.source, message.runs))
        elif isinstance(message, HelperRestarted):
            self._cancel_stale(core.helper_restarted())
        elif isinstance(message, FormatChanged):
            kinds = KINDS if message.kinds is None else message.kinds
            unknown = set(kinds) - set(KINDS)
            if unknown:
                raise InvalidCommand(f"unknown kinds {sorted(unknown)}", fields=["kinds"])
            self._renderer_version = message.renderer_version
            self._options = message.options
            core.format_changed(kinds)
        elif isinstance(message, GetSchedulerStatistics):
            answer = self.scheduler_statistics()
        else:
            raise InvalidCommand(f"the scheduler does not handle {type(message).__name__}")
        self._emit(events)
        self._ring()
        reply.send(answer)
        if len(self._outbox) > 4 * self._capacity:
            await self._wait_room()  # last-resort bound; workers wait long before this

    def scheduler_statistics(self) -> SchedulerActorStatistics:
        """A snapshot of the core, the caches and the workers; never waits."""
        payloads = self._payloads
        return SchedulerActorStatistics(
            core=self._core.statistics(),
            workers=self._core.config.workers,
            busy=self._busy,
            events_queued=len(self._outbox) + self._events_send.statistics().current_buffer_used,
            cancelled_stale=self._cancelled_stale,
            observations=self._observations.statistics(),
            payload_memory=None if payloads is None else payloads.memory.statistics(),
            payload_disk=None
            if payloads is None or payloads.disk is None
            else payloads.disk.statistics(),
            disk_errors=self._disk_errors,
        )

    # --- internals: the end of the message loop -------------------------------------------------

    async def on_drained(self) -> None:
        """Let the workers finish their current job and exit, and the publisher flush.

        The mailbox is closed and handled (``stop()``); the grace period still bounds
        all of it. After a crash the nursery is cancelled instead.
        """
        self._closing = True
        self._ring()
        self._outbox_changed.set()

    # --- internals: workers ---------------------------------------------------------------------

    def _ring(self) -> None:
        # Wake every idle worker: something may be claimable now.
        self._changed.set()
        self._changed = trio.Event()

    async def _worker(self) -> None:
        try:
            while True:
                claim = await self._next_claim()
                if claim is None:
                    return
                self._busy += 1
                try:
                    await self._run_job(claim)
                finally:
                    self._busy -= 1
                self._ring()
                await self._wait_room()
        finally:
            self._live_workers -= 1
            self._outbox_changed.set()

    async def _next_claim(self) -> Claim | None:
        core = self._core
        while not self._closing:
            now = trio.current_time()
            claim = core.claim(now)
            if claim is not None:
                if claim.first:
                    self._emit_one(
                        RunStarted(
                            run_id=claim.run_id,
                            guid=claim.guid,
                            revision=claim.revision,
                            kind=claim.kind,
                        )
                    )
                return claim
            wake = core.next_wakeup()
            # No polling: sleep until the earliest backoff end / page pacing time
            # (design §4.6), or until a message or a completion rings.
            deadline = wake if wake is not None and wake > now else math.inf
            changed = self._changed
            with trio.move_on_at(deadline):
                await changed.wait()
        return None

    async def _run_job(self, claim: Claim) -> None:
        scope = trio.CancelScope(deadline=claim.deadline)
        self._scopes[claim.claim_id] = scope
        error: ErrorRecord | None = None
        result: Any = None
        stale = False
        try:
            with scope:
                result = await self._produce(claim)
        except ActorError as exc:
            error = exc.to_record()
        except trio.TooSlowError as exc:  # execute's own timeout: worth a retry
            error = ErrorRecord(
                category="transient", code=DeadlineExceeded.code, message=str(exc) or "timeout"
            )
        except Exception as exc:
            text = describe_exception(exc)  # never raises, even for a broken __str__
            error = ErrorRecord(category="permanent", code=UNEXPECTED_ERROR, message=text)
        finally:
            del self._scopes[claim.claim_id]
            stale = claim.claim_id in self._stale_ids
            self._stale_ids.discard(claim.claim_id)
        if scope.cancel_called:
            # Cancelled by us (stale: the core drops it anyway) or the deadline passed:
            # whatever execute made of the cancellation, that is a transient failure
            # (design §4.7).
            if stale:
                error = JobCancelled("the job became stale").to_record()
            else:
                error = DeadlineExceeded(
                    f"{claim.kind} of run {claim.run_id} passed its deadline"
                ).to_record()
        now = trio.current_time()
        if error is None:
            events = self._core.complete(claim.claim_id, result, now=now)
        else:
            events = self._core.fail(claim.claim_id, error, now=now)
        self._emit(events, source=claim.source)

    async def _produce(self, claim: Claim) -> Any:
        payloads = self._payloads if claim.kind in PAYLOAD_KINDS else None
        key = None
        if payloads is not None:
            key = PayloadKey(
                source=claim.source,
                guid=claim.guid,
                kind=claim.kind,
                revision=claim.revision,
                renderer_version=self._renderer_version,
                options=self._options,
            )
            data = payloads.memory.get(key)
            if data is None and payloads.disk is not None:
                try:
                    data = await trio.to_thread.run_sync(payloads.disk.get, key)
                except OSError:
                    self._disk_errors += 1
                if data is not None:
                    payloads.memory.put(key, data, len(data))
            if data is not None:
                return self._from_bytes(data)
        observation = None
        if claim.kind != "metadata":
            observation = self._observations.get((claim.source, claim.guid, claim.revision))
        result = await self._execute(
            SchedulerJob(claim=claim, observation=observation), *self._args
        )
        if payloads is not None and key is not None and not isinstance(result, Progressive):
            data = self._to_bytes(result)
            if data is not None:
                payloads.memory.put(key, data, len(data))
                if payloads.disk is not None:
                    try:
                        await trio.to_thread.run_sync(payloads.disk.put, key, data)
                    except OSError:
                        self._disk_errors += 1
        return result

    def _cancel_stale(self, claim_ids: list[int]) -> None:
        for claim_id in claim_ids:
            scope = self._scopes.get(claim_id)
            if scope is not None:
                self._stale_ids.add(claim_id)
                scope.cancel()
                self._cancelled_stale += 1

    # --- internals: events ----------------------------------------------------------------------

    def _emit(self, events: list[SchedulerEvent], *, source: str | None = None) -> None:
        for event in events:
            if isinstance(event, Dropped):
                continue  # stale: dropped silently (design §4.6)
            if isinstance(event, Published) and event.kind == "metadata" and source is not None:
                self._observations.put(
                    (source, event.guid, event.revision),
                    event.result,
                    self._observation_size(event.result),
                )
            self._emit_one(event)

    def _emit_one(self, event: Any) -> None:
        self._outbox.append(event)
        self._outbox_changed.set()

    async def _wait_room(self) -> None:
        while len(self._outbox) >= self._capacity:
            await self._room.wait()

    async def _publisher(self) -> None:
        send = self._events_send
        outbox = self._outbox
        with send:
            while True:
                while outbox:
                    try:
                        await send.send(outbox[0])
                    except trio.BrokenResourceError:
                        outbox.clear()  # nobody reads any more: drop quietly
                    else:
                        outbox.popleft()
                    self._room.set()
                    self._room = trio.Event()
                if self._closing and self._live_workers == 0:
                    return
                self._outbox_changed = trio.Event()
                await self._outbox_changed.wait()


def _bytes_or_none(result: Any) -> bytes | None:
    if isinstance(result, bytes | bytearray | memoryview):
        return bytes(result)
    return None


def _identity(data: bytes) -> Any:
    return data
