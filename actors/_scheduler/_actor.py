"""The scheduler system actor: K workers driving the scheduler core with trio (design §4).

Wiring (for the runtime)::

    KINDS = (
        Kind(name="read", helper=True, progressive=True),       # read the source
        Kind(name="summary", needs=("read",), cached=True),     # derive from it
        Kind(name="report", needs=("read",), cached=True,
             retry=RetryPolicy(maximum_attempts=3, overall_timeout=60)),
    )

    async def execute(job: SchedulerJob, pool_ref, renderer_ref) -> Any:
        claim = job.claim                    # run_id, guid, kind, revision, deadline...
        if claim.kind == "read":             # read the source (a helper-process job);
            return await read_run(pool_ref, claim)   # Progressive(partial) if still
                                                     # being written
        observation = job.inputs.get("read") or await read_run(pool_ref, claim)
        rendered = await render(renderer_ref, observation, claim)
        return Produced(rendered.data, at=rendered.produced_at)  # judged by when made

    actor = SchedulerActor(
        execute, pool_ref, renderer_ref,            # fn, *args (design §1.2 style)
        runs=[RunInfo(run_id=1, guid="...", revision="...")],
        source="/path/to/db.sqlite",
        config=SchedulerConfig(kinds=KINDS, workers=2),
        payload_cache=PayloadCache(directory=cache_dir),    # optional
        payload_to_bytes=..., payload_from_bytes=...,       # if results are not bytes
    )
    ref = await nursery.start(actor.run)
    nursery.start_soon(forward, actor.events)        # one task reads the events:
    # async for notice in events: RunStarted / Published / Parked / Retrying /
    #                             Failed / Invalidated / Settled / Interrupted
    await ref.send(SetPriority(selected=3, visible=(1, 2, 4)))
    ...
    await ref.stop(grace=2.0)     # running jobs may finish within grace; then cancelled
                                  # and reported Interrupted

*Messages* (send or ask; asks are answered ``None`` unless said otherwise):
:class:`SetPriority`, :class:`SetTiers`, :class:`SourceChanged`, :class:`Reconcile`,
:class:`SwitchSource`, :class:`HelperRestarted`, :class:`FormatChanged`, and
:class:`GetSchedulerStatistics` (answered with :class:`SchedulerActorStatistics`). A
rejected request (unknown run id, a reconcile that is not append-only) fails the ask with
:class:`~actors.errors.ScheduleRejected` and changes nothing.

*execute* is ``async def execute(job: SchedulerJob, *args) -> result``; one call is one
attempt. It runs in one of K worker tasks under a stop scope whose deadline is
``job.claim.deadline`` plus ``config.deadline_grace``: executors are expected to honour
the claim's deadline themselves and hand back a result produced in time, which may
still be on its way when the deadline passes. The attempt is judged by when its result
was produced (:func:`~actors._scheduler._attempt.judge`, design §4.14); an attempt
stopped by the scope, or whose result came after the deadline, fails with
:class:`~actors.errors.DeadlineExceeded` (transient). Errors are classified by
``ActorError.category`` and the kind's :class:`~actors.RetryPolicy` (design §4.12); any
other exception is a permanent failure with code ``unexpected_error``. A job made stale
by ``SwitchSource`` or ``HelperRestarted`` is cancelled. The outcome is reported to the
core only once ``execute`` has returned, however long it takes to stop, so at most one
execution per (run, kind) runs at a time (design §4.13); an executor that hands work to
another actor or process must therefore not return before that work has ended.

*Events* (:attr:`SchedulerActor.events`, a bounded channel, in order): :class:`RunStarted`
at a run's first claim per revision, then the core's :class:`~actors.Published`,
:class:`~actors.Parked`, :class:`~actors.Retrying`, :class:`~actors.Failed`,
:class:`~actors.Invalidated` and :class:`~actors.Settled`, and at the end
:class:`~actors.Interrupted` for each attempt the stop cut off (its slot stays
``interrupted``: still to do, not failed). Stale results are dropped
(logged, not forwarded). Every event is also a ``logging`` record (design §4.12). A slow
reader holds back the workers (never the mailbox); the channel closes when the actor
stops.

*Caches* (design §4.10): results of kinds that others need are kept in an
:class:`~actors.ObservationCache` keyed by (source, guid, kind, revision) and handed to
the dependent kinds' jobs (``job.inputs``, ``job.observation``); results of kinds
declared ``cached`` are looked up in the optional :class:`~actors.PayloadCache` (memory,
then disk in a worker thread) before ``execute`` runs, and stored there after, outside
the attempt's deadline. Progressive (parked) results are never cached.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import deque
from typing import TYPE_CHECKING, Any

import trio

from .._core import Actor, validate_count
from ..errors import DeadlineExceeded, ErrorRecord, InvalidCommand
from ._attempt import judge, run_attempt
from ._cache import ObservationCache, PayloadCache, PayloadKey, approximate_size
from ._events import Dropped, Published, SchedulerEvent
from ._log import LOGGER, log_event
from ._messages import (
    FormatChanged,
    GetSchedulerStatistics,
    HelperRestarted,
    Reconcile,
    RunStarted,
    SchedulerActorStatistics,
    SchedulerJob,
    SetPriority,
    SetTiers,
    SourceChanged,
    SwitchSource,
)
from ._scheduler import Scheduler
from ._state import Claim, Progressive, RunInfo, SchedulerConfig

if TYPE_CHECKING:
    import random
    from collections.abc import Awaitable, Callable, Iterable

    from .._core import Reply

__all__ = ["SchedulerActor"]

#: Key of the observation cache: (source, guid, kind, revision).
ObservationKey = tuple[str, str, str, str]
#: A payload's disk write still to do: ``DiskCache.put`` and its arguments.
_DiskWrite = tuple["Callable[[PayloadKey, bytes], bool]", PayloadKey, bytes]
_MISSING = object()


class SchedulerActor(Actor):
    """The scheduler system actor (design §4); see the module docstring for wiring.

    Args:
        execute: ``async execute(job, *args) -> result``: one attempt.
        *args: Passed to ``execute`` after the job.
        runs: The source's initial runs, in table order.
        source: Identity of the source.
        config: Core settings (kinds, tiers, K workers, deadlines, pacing).
        payload_cache: Cache of the results of kinds declared ``cached``, or None.
        observations: Cache of the results other kinds need (default: 8 MiB, 512
            entries).
        renderer_version: Part of the payload cache key.
        options: Rendering options (canonical text), part of the payload cache key.
        events_capacity: Buffer of the events channel, in events (>= 1).
        observation_size: Size estimate of a result kept for other kinds, in bytes.
        payload_to_bytes: What to store in the payload cache for a result (None: do
            not cache it); default: bytes-like results as bytes.
        payload_from_bytes: Rebuild a result from cached bytes; default: the bytes.
            A callback that raises is logged and counted, and the result stays
            uncached (design §4.10); it never stops the actor.
        rng: Random source for retry jitter (design §4.12); seed it for reproducible
            delays.

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
        observations: ObservationCache[ObservationKey, Any] | None = None,
        renderer_version: str = "",
        options: str = "",
        events_capacity: int = 64,
        observation_size: Callable[[Any], int] = approximate_size,
        payload_to_bytes: Callable[[Any], bytes | None] | None = None,
        payload_from_bytes: Callable[[bytes], Any] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._capacity = validate_count("events_capacity", events_capacity, minimum=1)
        self._core = Scheduler(runs, source=source, config=config, rng=rng)
        self._graph = self._core.config.graph
        self._execute = execute
        self._args = args
        self._payloads = payload_cache
        self._observations: ObservationCache[ObservationKey, Any] = (
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
        self._stopped = 0
        self._disk_errors = 0
        self._disk_aborted = 0
        self._callback_errors = 0
        self._reader_gone = False

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
            ScheduleRejected: (code ``schedule_rejected``) unknown run id or tier, or a
                reconcile that reorders or removes runs; nothing changed.
            InvalidCommand: (code ``invalid_command``) not a scheduler message, or a
                ``FormatChanged`` naming an undeclared kind (``fields == ["kinds"]``).
        """
        core = self._core
        events: list[SchedulerEvent] = []
        answer: Any = None
        if isinstance(message, SetPriority):
            core.set_priority(message.selected, message.visible)
        elif isinstance(message, SetTiers):
            core.set_tiers(message.placements)
        elif isinstance(message, SourceChanged):
            events = core.source_changed(message.run_id, message.revision)
        elif isinstance(message, Reconcile):
            events = core.reconcile(message.runs)
        elif isinstance(message, SwitchSource):
            self._cancel_stale(core.switch_source(message.source, message.runs))
        elif isinstance(message, HelperRestarted):
            self._cancel_stale(core.helper_restarted())
        elif isinstance(message, FormatChanged):
            kinds = core.kinds if message.kinds is None else message.kinds
            unknown = set(kinds) - set(core.kinds)
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
            disk_aborted=self._disk_aborted,
            stopped=self._stopped,
            callback_errors=self._callback_errors,
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
        result: Any = None
        error: ErrorRecord | None = None
        written: _DiskWrite | None = None
        now = trio.current_time()
        if claim.deadline <= now:
            # The overall deadline passed in the queue, or an attempt timeout below the
            # clock's resolution left no time at all: say which.
            overall = claim.overall_deadline is not None and claim.overall_deadline <= now
            which = "the overall deadline" if overall else "its deadline"
            error = DeadlineExceeded(
                f"{claim.kind} of run {claim.run_id}: {which} passed before "
                f"attempt {claim.attempt} could start"
            ).to_record()
        else:
            ended = False
            try:
                result, error, written = await self._attempt(claim)
                ended = True
            finally:
                if not ended:
                    # Cut off by the shutdown (the stop's grace ended, or a crash): the
                    # slot says so, and the work stays to do (design §4.13).
                    self._emit(self._core.interrupt(claim.claim_id, now=trio.current_time()))
        now = trio.current_time()
        if error is None:
            events = self._core.complete(claim.claim_id, result, now=now)
        else:
            events = self._core.fail(claim.claim_id, error, now=now)
        self._emit(events, source=claim.source)
        if written is not None:
            # After the result is out: clients never wait for the disk (design §4.10).
            await self._disk("write", *written)

    async def _attempt(self, claim: Claim) -> tuple[Any, ErrorRecord | None, _DiskWrite | None]:
        # The stop scope exists (for _cancel_stale) from here, but only execute runs in
        # it: cache reads and writes are outside the attempt's deadline (design §4.14).
        # Returns the result, the error, and the payload's disk write still to do.
        scope = trio.CancelScope(deadline=claim.deadline + self._core.config.deadline_grace)
        self._scopes[claim.claim_id] = scope
        try:
            key = self._payload_key(claim)
            cached = _MISSING if key is None else await self._cached(key)
            if cached is not _MISSING:
                return cached, None, None
            attempt = await run_attempt(self._execute, self._job(claim), self._args, scope)
        finally:
            del self._scopes[claim.claim_id]
            stale = claim.claim_id in self._stale_ids
            self._stale_ids.discard(claim.claim_id)
        if attempt.stopped and not stale:
            self._stopped += 1
            LOGGER.warning(
                "run %s: %s attempt %d stopped %.3g s after its deadline",
                claim.run_id, claim.kind, claim.attempt,
                trio.current_time() - claim.deadline,
                extra={"scheduler_event": "stopped", "run_id": claim.run_id,
                       "guid": claim.guid, "kind": claim.kind, "revision": claim.revision,
                       "attempt": claim.attempt},
            )  # fmt: skip
        result, error = judge(claim, attempt, stale=stale)
        written = None
        if error is None and key is not None and not isinstance(result, Progressive):
            written = self._store(key, result)
        return result, error, written

    def _job(self, claim: Claim) -> SchedulerJob:
        graph = self._graph
        needs = graph.needs[graph.index[claim.kind]]
        inputs = {}
        for n in needs:
            name = graph.names[n]
            value = self._observations.get((claim.source, claim.guid, name, claim.revision))
            if value is not None:
                inputs[name] = value
        first = inputs.get(graph.names[needs[0]]) if needs else None
        return SchedulerJob(claim=claim, observation=first, inputs=inputs)

    def _payload_key(self, claim: Claim) -> PayloadKey | None:
        if self._payloads is None or self._graph.index[claim.kind] not in self._graph.cached:
            return None
        return PayloadKey(
            source=claim.source,
            guid=claim.guid,
            kind=claim.kind,
            revision=claim.revision,
            renderer_version=self._renderer_version,
            options=self._options,
        )

    async def _cached(self, key: PayloadKey) -> Any:
        payloads = self._payloads
        assert payloads is not None
        data = payloads.memory.get(key)
        # A key the disk's index does not hold is a miss without a thread hop.
        if data is None and payloads.disk is not None and not payloads.disk.absent(key):
            data = await self._disk("read", payloads.disk.get, key)
            if data is not None:
                payloads.memory.put(key, data, len(data))
        if data is None:
            return _MISSING
        try:
            return self._from_bytes(data)
        except Exception as exc:  # the embedder's callback: a miss, not a crash
            self._callback_failed("payload_from_bytes", key.kind, exc)
            payloads.memory.discard(key)
            return _MISSING

    def _store(self, key: PayloadKey, result: Any) -> _DiskWrite | None:
        # Into the memory level now (a lookup right after the publication hits it); the
        # disk write, if any, is returned for the worker to do once the result is out.
        payloads = self._payloads
        assert payloads is not None
        try:
            data = self._to_bytes(result)
            if data is None:
                return None
            if not isinstance(data, bytes | bytearray | memoryview):
                raise TypeError(f"returned {type(data).__name__}, not bytes or None")
            data = bytes(data)
        except Exception as exc:  # the embedder's callback: the result stays uncached
            self._callback_failed("payload_to_bytes", key.kind, exc)
            return None
        payloads.memory.put(key, data, len(data))
        if payloads.disk is None:
            return None
        return payloads.disk.put, key, data

    async def _disk(self, what: str, call: Callable[..., Any], *args: Any) -> Any:
        """One payload-cache disk call in a worker thread (design §4.10).

        ``call(*args, abort=flag)`` checks ``flag`` between chunks. The call may take
        ``cache_io_timeout`` seconds from its start: past that it is abandoned (its
        flag raised, so it stops and cleans up at its next chunk) and, like an error,
        it is a miss / a skipped write. When the actor stops meanwhile, the flag goes
        up and the thread is *waited for* (still at most until that timeout): the
        call ends at its next chunk and removes its temporary file, so nothing of
        ours touches the cache once ``stop()`` has returned.
        """
        timeout = self._core.config.cache_io_timeout
        abort = threading.Event()
        ended = trio.Event()
        give_up = trio.CancelScope(deadline=trio.current_time() + timeout, shield=True)
        results: list[Any] = []
        errors: list[Exception] = []

        async def in_thread() -> None:
            # Shielded from the stop: only the call's own timeout abandons the thread.
            try:
                with give_up:
                    try:
                        results.append(
                            await trio.to_thread.run_sync(
                                functools.partial(call, *args, abort=abort),
                                abandon_on_cancel=True,
                            )
                        )
                    except Exception as exc:  # OSError, or a damaged entry met by the reader
                        errors.append(exc)
            finally:
                abort.set()  # an abandoned call stops at its next chunk
                ended.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(in_thread)
            try:
                await ended.wait()
            finally:
                if not ended.is_set():  # the actor stops: end the call, then wait for it
                    abort.set()
                    self._disk_aborted += 1
                    LOGGER.info(
                        "payload cache %s cut short by the stop", what,
                        extra={"scheduler_event": "cache_io_aborted", "io": what},
                    )  # fmt: skip
        if give_up.cancelled_caught:
            self._disk_errors += 1
            LOGGER.warning(
                "payload cache %s took longer than %.3g s; abandoned", what, timeout,
                extra={"scheduler_event": "cache_io_timeout", "io": what, "timeout": timeout},
            )  # fmt: skip
            return None
        if errors:
            exc = errors[0]
            self._disk_errors += 1
            LOGGER.warning(
                "payload cache %s failed: %r", what, exc,
                extra={"scheduler_event": "cache_io_failed", "io": what,
                       "errno": getattr(exc, "errno", None)},
            )  # fmt: skip
            return None
        return results[0]

    def _callback_failed(self, name: str, kind: str, exc: Exception) -> None:
        self._callback_errors += 1
        LOGGER.error(
            "%s raised for a %s result: %r; the result is kept uncached", name, kind, exc,
            exc_info=exc,
            extra={"scheduler_event": "callback_failed", "callback": name, "kind": kind},
        )  # fmt: skip

    def _cancel_stale(self, claim_ids: list[int]) -> None:
        for claim_id in claim_ids:
            scope = self._scopes.get(claim_id)
            if scope is not None:
                self._stale_ids.add(claim_id)
                scope.cancel()
                self._cancelled_stale += 1

    # --- internals: events ----------------------------------------------------------------------

    def _emit(self, events: list[SchedulerEvent], *, source: str | None = None) -> None:
        graph = self._graph
        for event in events:
            log_event(event)
            if isinstance(event, Dropped):
                continue  # stale: dropped silently (design §4.6)
            if (
                isinstance(event, Published)
                and source is not None
                and graph.index[event.kind] in graph.feeds
            ):
                try:
                    size = self._observation_size(event.result)
                    if type(size) is not int or size < 0:
                        raise TypeError(f"returned {size!r}, not a byte count (int >= 0)")
                except Exception as exc:  # the embedder's callback: not kept, not a crash
                    self._callback_failed("observation_size", event.kind, exc)
                else:
                    self._observations.put(
                        (source, event.guid, event.kind, event.revision), event.result, size
                    )
            self._emit_one(event)

    def _emit_one(self, event: Any) -> None:
        self._outbox.append(event)
        self._outbox_changed.set()

    async def _wait_room(self) -> None:
        while len(self._outbox) >= self._capacity:
            await self._room.wait()

    async def _publisher(self) -> None:
        # The channel is closed by on_stop, once every worker is gone: the notices of
        # attempts cut off by the stop come after this task ended.
        send = self._events_send
        outbox = self._outbox
        while True:
            while outbox:
                try:
                    await send.send(outbox[0])
                except trio.BrokenResourceError:
                    self._reader_left()
                    outbox.clear()
                else:
                    outbox.popleft()
                self._room.set()
                self._room = trio.Event()
            if self._closing and self._live_workers == 0:
                return
            self._outbox_changed = trio.Event()
            await self._outbox_changed.wait()

    def _reader_left(self) -> None:
        if not self._reader_gone:  # said once; later events go the same way
            self._reader_gone = True
            LOGGER.warning(
                "the events reader is gone; events are dropped from now on",
                extra={"scheduler_event": "events_dropped"},
            )

    async def on_stop(self) -> None:
        """Hand the reader what the stop left in the outbox, then close the channel.

        Every task of the actor has ended, so this includes the :class:`~actors.Interrupted`
        notices of attempts the stop cut off. Never waits: what the channel's buffer
        cannot take is dropped, counted and logged (``events_undelivered``).
        """
        send = self._events_send
        outbox = self._outbox
        with send:
            while outbox:
                try:
                    send.send_nowait(outbox[0])
                except trio.BrokenResourceError:
                    self._reader_left()
                    break
                except trio.WouldBlock:
                    LOGGER.warning(
                        "%d events not delivered: the events channel is full at stop",
                        len(outbox),
                        extra={"scheduler_event": "events_undelivered", "count": len(outbox)},
                    )
                    break
                outbox.popleft()
            outbox.clear()


def _bytes_or_none(result: Any) -> bytes | None:
    if isinstance(result, bytes | bytearray | memoryview):
        return bytes(result)
    return None


def _identity(data: bytes) -> Any:
    return data
