"""The owned parts an event log is composed of, built with their dependencies (§6).

:func:`build_parts` makes each part of an :class:`~actors._eventlog._eventlog.EventLog`
once, passing every dependency explicitly (no part looks another up): the
:class:`~actors._eventlog._ledger.SQLiteLedger` when ``ledger_path`` is a file, the
:class:`~actors._eventlog._ledger.BatchLedger` on a
:class:`~actors._eventlog._ledger.PostgresStore` when it is a ``postgresql://`` URL (its
statements bounded by ``ledger_statement_timeout``; docs/cluster.rst), its reads bounded
by ``ledger_read_timeout``, its commits watched against ``commit_stall_timeout``,
design §6.19), the :class:`~actors._eventlog._journal.Journal` (the event sequence,
window and ports), the :class:`~actors._eventlog._gate.AdmissionGate`, the
:class:`~actors._eventlog._runs.Runs` (lifecycle, cancel, drain), the
:class:`~actors._eventlog._intake.Intake` (validation, idempotency through the
:class:`~actors._eventlog._requests.RequestStore`, coalescing, admission, revision), the
:class:`~actors._eventlog._recovery.Recovery` (boot report, resume, discard, drift,
``recover``) and :class:`~actors._eventlog._finished.FinishedRuns` (the query for
finished runs, §6.18).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from .._core import Backoff
from ._admission import AdmissionGate, Intake, RequestStore
from ._finished import FinishedRuns
from ._journal import Journal
from ._ledger import BatchLedger, PostgresStore, SQLiteLedger, is_postgres_url
from ._operations import Operations
from ._recovery import Recovery
from ._runs import Runs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from ._ledger import Ledger
    from ._operations import Runner
    from ._types import EventLogConfig, OperationSpec

__all__ = ["Parts", "build_parts"]


@attrs.frozen(kw_only=True)
class Parts:
    """The parts of one event log; see the module docstring."""

    operations: Operations
    """The accepted operations and their built-in runners."""
    ledger: Ledger | None
    """The ledger (SQLite or PostgreSQL), or None in memory."""
    journal: Journal
    """The event sequence, window and ports."""
    gate: AdmissionGate
    """Admission: the bound, pauses, ledger outages."""
    runs: Runs
    """Run lifecycle, cancel, the drain."""
    intake: Intake
    """Submissions: validation, idempotency, coalescing, admission."""
    recovery: Recovery
    """After a restart: boot report, resume, discard, drift, ``recover``."""
    finished: FinishedRuns
    """The query for finished runs."""


def build_parts(
    config: EventLogConfig,
    operations: Iterable[OperationSpec],
    runners: Mapping[str, Runner] | None,
    *,
    check_open: Callable[[], None],
) -> Parts:
    """Build the parts of an event log with ``config``.

    Args:
        config: The event log's settings.
        operations: The operations ``submit`` accepts.
        runners: Built-in runners by operation name (each operation must be listed).
        check_open: Raises ``ActorStopped`` unless the log is running.
    """
    ops = Operations()
    for spec in operations:
        ops.register(spec)
    for name, runner in (runners or {}).items():
        ops.register(ops.specs[name], runner)
    # A cluster node decides in the database itself (its ClusterNode), not via a ledger.
    ledger = _build_ledger(config) if config.ledger_path and not config.cluster else None
    journal = Journal(config, ledger)
    gate = AdmissionGate(config, journal, ledger)
    runs = Runs(config, operations=ops, journal=journal, ledger=ledger, freed=gate.freed)
    intake = Intake(
        config,
        operations=ops,
        requests=RequestStore(config.retain_requests, ledger),
        runs=runs,
        gate=gate,
        journal=journal,
        ledger=ledger,
        check_open=check_open,
    )
    recovery = Recovery(
        config,
        operations=ops,
        runs=runs,
        intake=intake,
        gate=gate,
        journal=journal,
        check_open=check_open,
    )
    return Parts(
        operations=ops,
        ledger=ledger,
        journal=journal,
        gate=gate,
        runs=runs,
        intake=intake,
        recovery=recovery,
        finished=FinishedRuns(config, runs=runs, ledger=ledger),
    )


def _build_ledger(config: EventLogConfig) -> Ledger:
    """The ledger ``config.ledger_path`` names: a PostgreSQL URL or a SQLite file."""
    assert config.ledger_path is not None
    retry = Backoff(base=config.ledger_retry_min, cap=config.ledger_retry_max)
    if is_postgres_url(config.ledger_path):
        store = PostgresStore(
            config.ledger_path,
            statement_timeout=config.ledger_statement_timeout,
            read_timeout=config.ledger_read_timeout,
            retry_after=retry.base,
        )
        return BatchLedger(
            store,
            commit_linger=config.commit_linger,
            max_pending_rows=config.max_pending_rows,
            retry=retry,
            stall_timeout=config.commit_stall_timeout,
        )
    return SQLiteLedger(
        config.ledger_path,
        synchronous=config.synchronous,
        commit_linger=config.commit_linger,
        max_pending_rows=config.max_pending_rows,
        retry=retry,
        read_timeout=config.ledger_read_timeout,
        stall_timeout=config.commit_stall_timeout,
    )
