"""Prometheus metrics of one runtime, kept in a registry of its own (design §1.7).

:class:`RuntimeMetrics` measures what the runtime already reports; it adds no probe to
the actors' code. Two ways in:

* **events**, counted as they happen: the event log's events through a listener port
  (:meth:`RuntimeMetrics.attach_event_log`), the helper pool's events through a
  subscription (:meth:`RuntimeMetrics.follow_pool`), the supervision tree's decisions
  (:meth:`RuntimeMetrics.on_supervisor_event`) and the scheduler's notices
  (:meth:`RuntimeMetrics.on_scheduler_event`). Each costs a counter increment (and,
  for a run, a dictionary entry while it lives);
* **statistics**, read only when someone scrapes: a custom collector calls the
  ``statistics()``/``snapshot()`` of the sources given to :meth:`RuntimeMetrics.watch`
  (queue depths, helper slots by state, mailbox depths, the ledger's counters).

Nothing is written to files and nothing global is touched: every runtime has its own
:class:`~prometheus_client.CollectorRegistry` (:attr:`RuntimeMetrics.registry`), which
an application serves (:func:`prometheus_client.generate_latest`) or pushes itself. The
metric list is :mod:`actors.metrics`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import attrs
import prometheus_client
import trio
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .._scheduler import Failed, Published, Retrying
from ._catalogue import METRICS, MetricSpec
from ._lifecycle import Lifecycle

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

    from .._core import ActorRef, SupervisorEvent
    from .._eventlog import Event, EventLog
    from .._helpers import HelperPool, PoolEvent, PoolEventStream
    from .._scheduler import SchedulerStatistics

__all__ = ["RuntimeMetrics", "Sources"]

_log = logging.getLogger("actors.metrics")

#: Histogram buckets for run waits and durations, in seconds.
RUN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
               300.0, 1800.0)  # fmt: skip
#: Histogram buckets for a ledger commit's duration, in seconds.
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                  2.5, 5.0)  # fmt: skip
#: Histogram buckets for a ledger commit's size, in rows.
ROW_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 5000.0,
               50000.0)  # fmt: skip
#: Name of the event-log port the metrics listen on (not counted as a subscriber).
PORT_NAME = "trio_actors_metrics"
#: Why the ladder was started (``cancel_sent``'s reason, design §3.7) -> the restart's
#: reason, should the ladder have to go past the grace (``grace_expired``, ``sigkill_sent``).
_LADDER_CAUSES = {"stalled": "stall", "cancelled": "cancel", "caller_cancelled": "cancel"}
#: Helper states (design §3.5) grouped as the ``helper_slots`` gauge shows them.
_SLOT_STATES = {
    "starting": "starting",
    "idle": "idle",
    "busy": "busy",
    "cancelling": "busy",
    "shutting_down": "stopping",
    "terminating": "stopping",
    "killing": "stopping",
    "quarantined": "quarantined",
    "exited": "down",
}
_SPECS = {spec.name: spec for spec in METRICS}


def _nothing() -> None:
    return None


@attrs.define(kw_only=True)
class Sources:
    """Where the scrape-time statistics come from: each a callable returning the
    current object, or None while it is not running (then its metrics are left out)."""

    event_log: Callable[[], EventLog | None] = _nothing
    pool: Callable[[], HelperPool | None] = _nothing
    scheduler: Callable[[], SchedulerStatistics | None] = _nothing
    mailboxes: Callable[[], Mapping[str, ActorRef]] = dict


class RuntimeMetrics:
    """The metrics of one runtime in a registry of its own; see the module docstring.

    Args:
        registry: Where to register them; a new :class:`~prometheus_client.CollectorRegistry`
            by default (never prometheus_client's global one).
    """

    def __init__(
        self,
        registry: prometheus_client.CollectorRegistry | None = None,
        *,
        lifecycle: Lifecycle | None = None,
    ) -> None:
        self.lifecycle = Lifecycle() if lifecycle is None else lifecycle
        """The live tree and helpers for an Observer page (fed the same events)."""
        self.registry = CollectorRegistry(auto_describe=True) if registry is None else registry
        """The registry: serve it with :func:`prometheus_client.generate_latest`."""
        self.sources = Sources()
        """The statistics read at scrape time (:meth:`watch`)."""
        self._runs: dict[int, _Run] = {}
        self._slot_cause: dict[int, str] = {}
        self._ladder_cause: dict[int, str] = {}
        self._log_attached: object = None

        def made(name: str, buckets: tuple[float, ...] = RUN_BUCKETS) -> Any:
            spec = _SPECS[name]
            if spec.type == "histogram":
                return Histogram(
                    spec.name, spec.help, spec.labels, registry=self.registry, buckets=buckets
                )
            return Counter(spec.name, spec.help, spec.labels, registry=self.registry)

        p = "trio_actors_"
        self.runs_submitted = made(p + "runs_submitted")
        self.runs_finished = made(p + "runs_finished")
        self.queue_wait = made(p + "run_queue_wait_seconds")
        self.run_duration = made(p + "run_duration_seconds")
        self.retries = made(p + "retries")
        self.work_failed = made(p + "work_failed")
        self.work_published = made(p + "work_published")
        self.helper_restarts = made(p + "helper_restarts")
        self.helper_events = made(p + "helper_events")
        self.supervisor_restarts = made(p + "supervisor_restarts")
        self.supervisor_escalations = made(p + "supervisor_escalations")
        self.eventlog_events = made(p + "eventlog_events")
        self.commit_seconds = made(p + "eventlog_append_seconds", COMMIT_BUCKETS)
        self.commit_rows = made(p + "ledger_commit_rows", ROW_BUCKETS)
        self.registry.register(_StatisticsCollector(self.sources))

    def watch(
        self,
        *,
        event_log: Callable[[], EventLog | None] | None = None,
        pool: Callable[[], HelperPool | None] | None = None,
        scheduler: Callable[[], SchedulerStatistics | None] | None = None,
        mailboxes: Callable[[], Mapping[str, ActorRef]] | None = None,
    ) -> None:
        """Name the sources of the scrape-time statistics (those given replace the old)."""
        for name, value in (("event_log", event_log), ("pool", pool),
                            ("scheduler", scheduler), ("mailboxes", mailboxes)):  # fmt: skip
            if value is not None:
                setattr(self.sources, name, value)

    # --- events ---------------------------------------------------------------------

    def attach_event_log(self, log: EventLog) -> None:
        """Count ``log``'s events from now on, through a listener port (idempotent).

        Call it again for each new incarnation of the event log.
        """
        if self._log_attached is log:
            return
        self._log_attached = log
        self._runs.clear()  # the runs of an earlier incarnation are reported by its boot
        log.observe_commits(self.on_commit)
        try:
            log.subscribe(PORT_NAME, listener=self.on_log_event)
        except Exception:  # a port of that name is open: this log is counted already
            _log.warning("the event log already has a metrics port", exc_info=True)

    def on_log_event(self, event: Event) -> None:
        """Count one event-log event (design §6.8); never raises, never waits."""
        kind = event.kind
        self.eventlog_events.labels(kind).inc()
        run_id = event.run_id
        if run_id is None:
            return
        if kind == "job_queued":
            operation = str(event.data.get("operation", ""))
            self.runs_submitted.labels(operation).inc()
            self._runs[run_id] = _Run(operation, _now())
        elif kind == "job_started":
            run = self._runs.get(run_id)
            if run is not None:
                run.started = _now()
                self.queue_wait.labels(run.operation).observe(run.started - run.queued)
        elif kind in ("job_finished", "job_cancelled"):
            run = self._runs.pop(run_id, None)
            operation = "" if run is None else run.operation
            if kind == "job_cancelled":
                outcome = "cancelled"
            else:
                outcome = str(event.data.get("verdict", "unknown"))
            self.runs_finished.labels(operation, outcome).inc()
            if run is not None and run.started is not None:
                self.run_duration.labels(operation).observe(_now() - run.started)

    def on_commit(self, rows: int, seconds: float) -> None:
        """Observe one ledger commit: its rows and its seconds (design §6.10)."""
        self.commit_rows.observe(rows)
        self.commit_seconds.observe(seconds)

    async def follow_pool(self, stream: PoolEventStream) -> None:
        """Count the helper pool's events from ``stream`` until its hub closes."""
        with stream:
            async for event in stream:
                self.on_pool_event(event)

    def on_pool_event(self, event: PoolEvent) -> None:
        """Count one helper-pool event (design §3.10); never raises, never waits."""
        kind = event.kind
        self.helper_events.labels(kind).inc()
        self.lifecycle.on_pool_event(event)
        slot = event.slot
        if kind == "call_retried":
            # The error code that failed the attempt (helper_exited, reply_timeout, ...).
            self.retries.labels("helper_call", str(event.details.get("code", "unknown"))).inc()
        if slot is None:
            return
        if kind == "startup_failed":
            self._slot_cause[slot] = "startup_failure"
        elif kind == "cancel_sent":
            # Only a cause if the helper does not answer: one that does stays, and
            # should it crash later, that is a crash.
            reason = str(event.details.get("reason", ""))
            self._ladder_cause[slot] = _LADDER_CAUSES.get(reason, "deadline")
        elif kind in ("grace_expired", "sigkill_sent") and slot not in self._slot_cause:
            self._slot_cause[slot] = self._ladder_cause.pop(slot, "deadline")
        elif kind == "spawned":
            self._ladder_cause.pop(slot, None)
            cause = self._slot_cause.pop(slot, "crash")
            if (event.incarnation or 1) > 1:
                self.helper_restarts.labels(cause).inc()

    def on_supervisor_event(self, event: SupervisorEvent) -> None:
        """Count one decision of a supervisor (design §1.4); never raises."""
        self.lifecycle.on_supervisor_event(event)
        if event.kind == "child_restarting":
            self.supervisor_restarts.labels(event.supervisor).inc()
        elif event.kind == "intensity_exceeded":
            self.supervisor_escalations.labels(event.supervisor).inc()

    def on_scheduler_event(self, notice: object) -> None:
        """Count one scheduler notice (design §4.12): retries, failures, results."""
        if isinstance(notice, Retrying):
            self.retries.labels(notice.kind, notice.error.code).inc()
        elif isinstance(notice, Failed):
            self.work_failed.labels(notice.kind, notice.reason).inc()
        elif isinstance(notice, Published):
            self.work_published.labels(notice.kind).inc()


@attrs.define
class _Run:
    operation: str
    queued: float
    started: float | None = None


def _now() -> float:
    return trio.current_time()


class _StatisticsCollector(Collector):
    """Reads the sources' statistics at scrape time (nothing on the actors' path)."""

    def __init__(self, sources: Sources) -> None:
        self._sources = sources

    def describe(self) -> Iterable[Metric]:
        return []  # the families vary with what runs: never checked for clashes early

    def collect(self) -> Iterator[Metric]:
        sources = self._sources
        log = sources.event_log()
        if log is not None:
            yield from _event_log_metrics(log)
        pool = sources.pool()
        if pool is not None:
            yield from _pool_metrics(pool)
        scheduler = sources.scheduler()
        if scheduler is not None:
            depth = _gauge("queue_depth")
            for (tier, kind), ready in scheduler.ready_by_kind.items():
                depth.add_metric([kind, str(tier)], ready)
            yield depth
            yield _gauge("scheduler_active", scheduler.active)
        mailboxes = sources.mailboxes()
        if mailboxes:
            depth, capacity = _gauge("mailbox_depth"), _gauge("mailbox_capacity")
            for name, ref in mailboxes.items():
                statistics = ref.statistics()
                depth.add_metric([name], statistics.queued)
                capacity.add_metric([name], statistics.capacity)
            yield depth
            yield capacity


def _family(spec: MetricSpec, value: float | None) -> Any:
    kind = CounterMetricFamily if spec.type == "counter" else GaugeMetricFamily
    if value is None:
        return kind(spec.name, spec.help, labels=spec.labels)
    return kind(spec.name, spec.help, value=value)


def _gauge(name: str, value: float | None = None) -> Any:
    return _family(_SPECS["trio_actors_" + name], value)


_counter = _gauge  # the spec says which: one helper for both


def _event_log_metrics(log: EventLog) -> Iterator[Metric]:
    statistics = log.statistics()
    yield _gauge("runs_queued", statistics.queued)
    yield _gauge("runs_running", statistics.running)
    yield _gauge("eventlog_head", statistics.head)
    yield _gauge("admission_paused", int(statistics.paused))
    ports = [port for port in statistics.ports if port.name != PORT_NAME]
    yield _gauge("subscribers", len(ports))
    yield _gauge("subscriber_events_dropped", sum(port.dropped for port in ports))
    left = _counter("subscribers_left")
    for reason, count in sorted(statistics.subscribers_left.items()):
        left.add_metric([reason], count)
    yield left
    refusals = _counter("refusals")
    for code, count in sorted(statistics.refusals.items()):
        refusals.add_metric([code], count)
    yield refusals
    ledger = statistics.ledger
    if ledger is not None:
        yield _counter("ledger_commits", ledger.commits)
        yield _counter("ledger_rows", ledger.rows)
        yield _counter("ledger_failed_commits", ledger.failed_commits)
        yield _gauge("ledger_largest_batch_rows", ledger.largest_batch)
        yield _gauge("ledger_pending_rows", ledger.pending_rows)
        yield _gauge("ledger_available", int(ledger.unavailable is None))


def _pool_metrics(pool: HelperPool) -> Iterator[Metric]:
    statistics = pool.statistics()
    yield _gauge("helper_jobs_running", statistics.busy)
    yield _gauge("helper_jobs_waiting", statistics.waiting)
    counts = dict.fromkeys(("idle", "busy", "starting", "stopping", "quarantined", "down"), 0)
    for helper in pool.snapshot().helpers:
        state = "down" if helper is None else _SLOT_STATES.get(helper.state, "stopping")
        if helper is not None and helper.quarantined:
            state = "quarantined"
        counts[state] += 1
    slots = _gauge("helper_slots")
    for state, count in counts.items():
        slots.add_metric([state], count)
    yield slots
