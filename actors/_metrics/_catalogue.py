"""Every metric the runtime exports: name, type, labels and meaning (design §1.7).

One table, read both by :class:`~actors._metrics._metrics.RuntimeMetrics` (which makes
the metrics from it) and by the documentation (``docs/conf.py`` writes the metric table
from it), so the two cannot drift. Names follow the Prometheus conventions: the
``trio_actors_`` prefix, base units (seconds, bytes), ``_total`` for counters; labels
have a few values each (never a run id or a pid).
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = ["METRICS", "MetricSpec"]


@attrs.frozen(kw_only=True)
class MetricSpec:
    """One metric: what Prometheus shows, and where its value comes from."""

    name: str
    """The full name, without ``_total`` for counters (prometheus_client adds it)."""
    type: str
    """``counter``, ``gauge`` or ``histogram``."""
    labels: tuple[str, ...]
    """Label names, each with a small, fixed set of values."""
    help: str
    """One sentence (the ``# HELP`` line)."""
    source: str
    """Where it is measured: an event (counted as it happens) or a statistic (read at
    scrape time)."""

    @property
    def exported(self) -> str:
        """The name a scrape shows (counters end in ``_total``)."""
        return f"{self.name}_total" if self.type == "counter" else self.name


def _spec(name: str, kind: str, labels: tuple[str, ...], text: str, source: str) -> MetricSpec:
    return MetricSpec(
        name=f"trio_actors_{name}", type=kind, labels=labels, help=text, source=source
    )


#: The metric catalogue, in the order of the documentation.
METRICS: Final[tuple[MetricSpec, ...]] = (
    # -- runs (the event log, design §6) ----------------------------------------------
    _spec("runs_submitted", "counter", ("operation",),
          "Runs admitted to the event log (a coalesced request joins a run: not counted).",
          "event job_queued"),
    _spec("runs_finished", "counter", ("operation", "outcome"),
          "Runs decided, by outcome: succeeded, failed, cancelled.",
          "events job_finished (verdict), job_cancelled"),
    _spec("runs_queued", "gauge", (),
          "Runs admitted and waiting for an executor.", "EventLog.statistics().queued"),
    _spec("runs_running", "gauge", (),
          "Runs started and not decided.", "EventLog.statistics().running"),
    _spec("run_queue_wait_seconds", "histogram", ("operation",),
          "Seconds from a run's admission to its start (trio clock).",
          "events job_queued, job_started"),
    _spec("run_duration_seconds", "histogram", ("operation",),
          "Seconds from a run's start to its verdict (trio clock).",
          "events job_started, job_finished"),
    _spec("refusals", "counter", ("code",),
          "Submissions refused, by error code (admission_full, ledger_unavailable).",
          "EventLog.statistics().refusals"),
    # -- scheduler (design §4) ----------------------------------------------------------
    _spec("retries", "counter", ("kind", "reason"),
          "Retries decided: the scheduler's (kind = work kind, reason = the error code) "
          "and helper calls' (kind = helper_call, reason = the failed attempt's code).",
          "scheduler event Retrying, pool event call_retried"),
    _spec("work_failed", "counter", ("kind", "reason"),
          "Scheduler work items that ended failed, by kind and reason (design §4.12).",
          "scheduler event Failed"),
    _spec("work_published", "counter", ("kind",),
          "Scheduler results published, by kind.", "scheduler event Published"),
    _spec("queue_depth", "gauge", ("kind", "tier"),
          "Scheduler slots ready to be claimed, by work kind and priority tier (0 is the "
          "best).", "SchedulerStatistics.ready_by_kind"),
    _spec("scheduler_active", "gauge", (),
          "Scheduler claims handed out and not yet reported.", "SchedulerStatistics.active"),
    # -- helper pool (design §3) --------------------------------------------------------
    _spec("helper_slots", "gauge", ("state",),
          "Helper pool slots by state: idle, busy, starting, stopping, quarantined, down.",
          "HelperPool.snapshot()"),
    _spec("helper_jobs_running", "gauge", (),
          "Jobs holding a helper.", "HelperPool.statistics().busy"),
    _spec("helper_jobs_waiting", "gauge", (),
          "Jobs waiting for a free helper.", "HelperPool.statistics().waiting"),
    _spec("helper_restarts", "counter", ("reason",),
          "Helpers replaced, by what ended the one before: crash, stall, deadline, "
          "startup_failure, cancel.",
          "pool events spawned, startup_failed, cancel_sent, grace_expired, sigkill_sent"),
    _spec("helper_events", "counter", ("kind",),
          "Steps of the helper pool, by kind (design §3.10).", "every pool event"),
    # -- supervision tree (design §1.4) -------------------------------------------------
    _spec("supervisor_restarts", "counter", ("supervisor",),
          "Children restarted by each supervisor.", "supervisor event child_restarting"),
    _spec("supervisor_escalations", "counter", ("supervisor",),
          "Restart intensity exceeded: the supervisor gave up and failed its parent.",
          "supervisor event intensity_exceeded"),
    _spec("mailbox_depth", "gauge", ("actor",),
          "Messages queued in a system actor's mailbox.", "ActorRef.statistics().queued"),
    _spec("mailbox_capacity", "gauge", ("actor",),
          "Capacity of a system actor's mailbox, in messages.",
          "ActorRef.statistics().capacity"),
    # -- event log and ledger (design §6) ----------------------------------------------
    _spec("eventlog_head", "gauge", (), "The newest event's seq.",
          "EventLog.statistics().head"),
    _spec("eventlog_events", "counter", ("kind",),
          "Events appended to the event log, by kind.", "every event-log event"),
    _spec("ledger_commits", "counter", (), "Ledger transactions committed.",
          "LedgerStatistics.commits"),
    _spec("ledger_rows", "counter", (), "Rows the ledger committed (rows / commits is "
          "the mean batch size).", "LedgerStatistics.rows"),
    _spec("eventlog_append_seconds", "histogram", (),
          "Seconds each ledger commit took, from the transaction's start to its durable "
          "end (trio clock; a batch's rows wait at most this plus the commit linger).",
          "SQLiteLedger.on_commit"),
    _spec("ledger_commit_rows", "histogram", (), "Rows in each ledger commit (batch size).",
          "SQLiteLedger.on_commit"),
    _spec("ledger_largest_batch_rows", "gauge", (), "Most rows in one ledger commit.",
          "LedgerStatistics.largest_batch"),
    _spec("ledger_pending_rows", "gauge", (), "Rows staged and not yet committed.",
          "LedgerStatistics.pending_rows"),
    _spec("ledger_failed_commits", "counter", (), "Ledger commit attempts that failed.",
          "LedgerStatistics.failed_commits"),
    _spec("ledger_available", "gauge", (), "1 while the ledger commits, 0 while it cannot.",
          "LedgerStatistics.unavailable"),
    _spec("subscribers", "gauge", (), "Subscriber ports open on the event log.",
          "EventLog.statistics().ports"),
    _spec("subscribers_left", "counter", ("reason",),
          "Subscriber ports closed, by reason: closed, slow (dropped), protocol_error.",
          "EventLog.statistics().subscribers_left"),
    _spec("subscriber_events_dropped", "gauge", (),
          "Events dropped by the open subscriber ports (overflow).",
          "PortStatistics.dropped"),
    _spec("admission_paused", "gauge", (), "1 while the event log refuses new runs.",
          "EventLog.statistics().paused"),
)  # fmt: skip
