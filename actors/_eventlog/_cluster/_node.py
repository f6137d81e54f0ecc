"""One node of a cluster: an event log whose decisions are made in PostgreSQL.

A :class:`ClusterNode` is what an :class:`~actors._eventlog._eventlog.EventLog` in
cluster mode (``EventLogConfig(cluster=True)``, docs/cluster.rst) delegates to. Its
parts, each a task of its nursery:

* the **writer** gathers the node's decisions (admissions, claims, progress, finishes,
  cancels, recorded events) from a bounded channel and writes them in batches, one
  transaction each (:class:`~actors._eventlog._cluster._store.ClusterStore`); a caller's
  answer comes once its batch committed;
* the **follower** reads the committed events after the last one it delivered, woken by
  ``NOTIFY`` but polling every ``cluster_poll`` seconds anyway, and delivers only a
  gap-free prefix: to the window (``watch``), the mirror of live runs (``snapshot``) and
  the subscriber ports. Every node sees every node's events in one order;
* the **drain** claims queued runs for the node's runners (``FOR UPDATE SKIP LOCKED``),
  at most ``max_concurrency`` at once, and records their outcome conditional on this
  node's incarnation id; a cancel requested on another node reaches the owner through
  its follower, which stops the work before recording ``job_cancelled``;
* the **heartbeat** renews the node's lease (``cluster_lease`` seconds, judged by the
  database's clock) on a connection of its own, and has the runs of nodes whose lease
  expired held. A node whose lease was taken, or that could not renew it for
  ``cluster_lease`` seconds of its own monotonic clock, *fences itself*: it stops its
  runners at once, records nothing about their runs, and claims nothing until it holds
  a lease again.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import secrets
from collections import deque
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from ...errors import (
    ActorError,
    CursorExpired,
    DeadlineExceeded,
    InvalidCommand,
    LedgerError,
    LedgerUnavailable,
    UnknownRun,
)
from .._checks import check_fraction
from .._drain import runner_failure
from .._ports import PortHub
from .._statistics import EventLogStatistics
from .._types import (
    VERDICT_NOT_RUN,
    VERDICT_OK,
    BootReport,
    Event,
    EventLogSnapshot,
    RunStatus,
    WatchResult,
    encode_json,
)
from ._store import Batch, ClusterStore, Op, Outcome

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from .._operations import Operations
    from .._ports import Port, PortOptions
    from .._types import EventLogConfig, Receipt
    from ._store import ClaimedRun

    Check = Callable[[str, Mapping[str, Any], str | None, str | None], Any]

__all__ = ["ClusterNode"]

_T = TypeVar("_T")

_log = logging.getLogger("actors.eventlog")

#: Operations written in one transaction at most.
_BATCH = 256
#: Events the follower reads per query: well below a port's default bound, and the
#: next read is a checkpoint, so subscribers drain between pages.
_PAGE = 256
_TERMINAL = frozenset({"job_finished", "job_cancelled"})


class _Local:
    """A run this node executes: its cancel scope and who asked it to stop."""

    __slots__ = ("cancelled_by", "fenced", "scope")

    def __init__(self, scope: trio.CancelScope) -> None:
        self.scope = scope
        self.cancelled_by: str | None = None
        #: Stopped by the node's fencing: its outcome is not this node's to record.
        self.fenced = False


class ClusterNode:
    """One node of a cluster on a PostgreSQL ledger (docs/cluster.rst).

    Args:
        config: The event log's settings (``ledger_path`` a ``postgresql://`` URL).
        operations: The operations and their built-in runners.
        check: Validates a submission as the single-node intake does.
    """

    def __init__(self, config: EventLogConfig, operations: Operations, check: Check) -> None:
        assert config.ledger_path is not None
        self._config = config
        self._operations = operations
        self._check = check
        #: This start's incarnation id: random, never the host name.
        self.node = f"node-{secrets.token_hex(8)}"
        self.store = ClusterStore(
            config.ledger_path,
            node=self.node,
            max_inflight=config.max_inflight,
            retry_after=config.retry_after_min,
            statement_timeout=config.ledger_statement_timeout,
            read_timeout=config.ledger_read_timeout,
            # Well within a lease: a paused node's locks go before its lease is judged.
            idle_timeout=config.cluster_lease / 2,
        )
        self._follow_limiter = trio.CapacityLimiter(1)
        self._send, self._receive = trio.open_memory_channel[tuple[Op, trio.Event] | None](4096)
        self._progress: dict[int, float] = {}
        self._window: deque[tuple[int, str, int | None, dict[str, Any]]] = deque(
            maxlen=config.window
        )
        self._head = 0
        self._live: dict[int, dict[str, Any]] = {}
        self._local: dict[int, _Local] = {}
        #: Cancels requested for runs this node owns, heard before their task began.
        self._stop: dict[int, str] = {}
        #: Runs whose runner ended and whose outcome is being written.
        self._finishing: set[int] = set()
        #: A claim's outcome was lost (its commit may have happened): the next claim
        #: also takes the runs this node owns in the ledger but does not run.
        self._adopt = False
        self._decided: dict[int, trio.Event] = {}
        self._claimable = trio.Event()
        self._seen = trio.Event()
        self.unavailable: LedgerUnavailable | None = None
        #: Set while the node holds no lease it can trust: it runs and claims nothing.
        self.fenced = False
        self._unfenced = trio.Event()
        self._heartbeat_limiter = trio.CapacityLimiter(1)
        self.refusals: dict[str, int] = {}
        self.hub = PortHub(
            self._replay,
            default_bound=config.subscriber_bound,
            head=lambda: self._head,
            on_leave=lambda data: self.record("subscriber_left", data),
        )

    @property
    def head(self) -> int:
        """The newest seq this node's follower delivered."""
        return self._head

    # -- running ------------------------------------------------------------------------

    async def run(
        self,
        closing: trio.Event,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Open the ledger, run the writer, follower and drain until ``closing`` is set.

        Raises:
            LedgerError: (``ledger_error``) not a cluster ledger, or PostgreSQL failed.
        """
        store = self.store
        try:
            self._head, runs = await trio.to_thread.run_sync(
                store.open_cluster, limiter=store.limiter
            )
            for row in runs:
                status = _status(row, self._config.quarantine_after)
                self._live[status.run_id] = {
                    "state": status.state,
                    "operation": status.operation,
                    "arguments": status.arguments,
                    "revision": status.revision,
                    "snapshot_id": status.snapshot_id,
                    "request_id": status.request_id,
                    "progress": status.progress,
                    "interruptions": status.interruptions,
                }
            await trio.to_thread.run_sync(
                store.join, self._config.cluster_lease, limiter=store.limiter
            )
            _log.info(
                "cluster node %s on ledger %s from seq %d",
                self.node,
                store.path,
                self._head,
                extra={"node": self.node, "ledger": store.path, "head": self._head},
            )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer)
                nursery.start_soon(self._follower)
                nursery.start_soon(self._drain, nursery)
                nursery.start_soon(self._heartbeat)
                task_status.started()
                await closing.wait()
                nursery.cancel_scope.cancel()
        finally:
            self.hub.close()
            with trio.CancelScope(shield=True), trio.move_on_after(self._config.close_timeout):
                await trio.to_thread.run_sync(self._retire, limiter=store.limiter)

    def _retire(self) -> None:
        # The runs this node leaves unfinished are held (job_interrupted), as at a
        # restart of a single node; then its lease is dropped and its connections closed.
        store = self.store
        try:
            if not store.closed and store.connections:
                retire = Op(
                    kind="reap",
                    fields={"retire": True, "quarantine_after": self._config.quarantine_after},
                )
                store.write(Batch([retire]))
        except store.errors as exc:
            _log.warning(
                "cluster node %s: could not hold its runs at close: %s",
                self.node,
                store.classify(exc, "closing").message,
                extra={"node": self.node},
            )
        finally:
            store.close_connections()

    # -- the lease ----------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        lease = self._config.cluster_lease
        interval = lease / 4
        renewed = trio.current_time()
        store = self.store
        while True:
            began = trio.current_time()
            held: bool | None = None
            expired = 0
            with trio.move_on_after(interval):
                try:
                    held, expired = await trio.to_thread.run_sync(
                        store.renew, lease, limiter=self._heartbeat_limiter, abandon_on_cancel=True
                    )
                except store.errors as exc:
                    _log.warning(
                        "cluster node %s: could not renew its lease: %s",
                        self.node,
                        store.classify(exc, "renewing the lease").message,
                        extra={"node": self.node},
                    )
            if held is True:
                renewed = began
                if self.fenced:
                    await self._unfence()
                if expired:
                    await self._reap({})
            elif held is False:
                self._fence("lease_lost", "another node found its lease expired")
                await self._rejoin()
            elif trio.current_time() - renewed > lease:
                self._fence("lease_expired", f"no renewal for {lease:g} s")
            await trio.sleep_until(began + interval)

    async def _reap(self, fields: dict[str, Any]) -> bool:
        outcome = await self._decide(
            "reap", quarantine_after=self._config.quarantine_after, **fields
        )
        if outcome.error is not None:
            _log.warning(
                "cluster node %s: could not hold expired leases' runs: %s",
                self.node,
                outcome.error,
                extra={"node": self.node},
            )
            return False
        dead, held = outcome.value
        if dead or held:
            _log.warning(
                "cluster node %s: held %d runs of %s (lease expired)",
                self.node,
                len(held),
                ", ".join(dead),
                extra={"node": self.node, "dead": dead, "held": held},
            )
        return True

    def _fence(self, code: str, why: str) -> None:
        if self.fenced:
            return
        self.fenced = True
        self._unfenced = trio.Event()
        _log.error(
            "cluster node %s fences itself (%s): %s; its %d runs are stopped and not recorded",
            self.node,
            code,
            why,
            len(self._local),
            extra={"node": self.node, "code": code, "runs": sorted(self._local)},
        )
        for local in self._local.values():
            local.fenced = True
            local.scope.cancel()

    async def _rejoin(self) -> None:
        try:
            await trio.to_thread.run_sync(
                self.store.join, self._config.cluster_lease, limiter=self.store.limiter
            )
        except self.store.errors:
            return  # the next beat tries again, fenced meanwhile

    async def _unfence(self) -> None:
        # Whatever this node still owns was stopped by its fencing: held, as at a
        # restart (another node may have done so already).
        if await self._reap({"own": True}):
            self.fenced = False
            self._unfenced.set()
            _log.info("cluster node %s holds a lease again", self.node, extra={"node": self.node})

    # -- the writer ---------------------------------------------------------------------

    async def _do(self, kind: str, **fields: Any) -> Outcome:
        """Have ``kind`` decided in the next batch; its outcome once committed."""
        op, done = Op(kind=kind, fields=fields), trio.Event()
        with trio.fail_after(self._config.request_timeout):
            await self._send.send((op, done))
            await done.wait()
        assert op.outcome is not None
        return op.outcome

    async def _decide(self, kind: str, **fields: Any) -> Outcome:
        """:meth:`_do`, with a writer slower than ``request_timeout`` as a retryable
        refusal (``ledger_unavailable``): the request may still commit, as a lost
        answer may (docs/cluster.rst), and no caller's task dies of it."""
        try:
            return await self._do(kind, **fields)
        except trio.TooSlowError:
            return Outcome(
                error=LedgerUnavailable(
                    "the ledger did not answer in time",
                    cause="request_timeout",
                    retry_after=self._config.retry_after_max,
                )
            )

    async def _writer(self) -> None:
        while True:
            first = await self._receive.receive()
            items = [] if first is None else [first]
            while len(items) < _BATCH:
                try:
                    item = self._receive.receive_nowait()
                except trio.WouldBlock:
                    break
                if item is not None:
                    items.append(item)
            progress, self._progress = self._progress, {}
            ops = [
                Op(kind="progress", fields={"run_id": r, "fraction": f})
                for r, f in progress.items()
            ]
            ops += [op for op, _ in items]
            if ops:
                await self._write(ops)
            for _, done in items:
                done.set()

    async def _write(self, ops: list[Op]) -> None:
        store = self.store
        error: LedgerError | None = None
        # The thread writes copies: one abandoned after a stall sets their outcomes when
        # its commit ends, never those its callers were given meanwhile.
        attempt = [Op(kind=op.kind, fields=op.fields) for op in ops]
        with trio.move_on_after(self._config.commit_stall_timeout) as scope:
            try:
                await trio.to_thread.run_sync(
                    store.write, Batch(attempt), limiter=store.limiter, abandon_on_cancel=True
                )
                for op, tried in zip(ops, attempt, strict=True):
                    op.outcome = tried.outcome
            except store.errors as exc:
                error = store.classify(exc, "committing", retry_after=self._config.retry_after_min)
        if scope.cancelled_caught:
            await store.cancel()
            error = LedgerUnavailable(
                f"ledger {store.path!r}: a commit took longer than"
                f" {self._config.commit_stall_timeout:g} s",
                cause="commit stalled",
                retry_after=self._config.retry_after_min,
            )
        if error is None:
            if self.unavailable is not None:
                _log.info("ledger %s: commits succeed again", store.path)
            self.unavailable = None
            return
        if isinstance(error, LedgerUnavailable):
            self.unavailable = error
        _log.warning(
            "ledger %s: a batch of %d decisions failed: %s",
            store.path,
            len(ops),
            error.message,
            extra={"ledger": store.path, "node": self.node, "code": error.code},
        )
        for op in ops:
            op.outcome = Outcome(error=error)

    # -- the follower -------------------------------------------------------------------

    async def _follower(self) -> None:
        store, wait = self.store, 0.0
        delay = self._config.ledger_retry_min
        while True:
            try:
                rows, head = await trio.to_thread.run_sync(
                    store.follow, self._head, _PAGE, wait, limiter=self._follow_limiter
                )
            except store.errors as exc:
                _log.warning(
                    "cluster node %s: following the ledger failed (reconnecting): %s",
                    self.node,
                    store.classify(exc, "following").message,
                    extra={"node": self.node, "ledger": store.path},
                )
                await trio.sleep(delay)
                delay = min(2 * delay, self._config.ledger_retry_max)
                continue
            delay = self._config.ledger_retry_min
            delivered = self._deliver(rows)
            # A full page, or a gap (an event committed later with a lower seq cannot
            # be: the head row orders commits; this is the reader's own guard): read on.
            wait = 0.0 if delivered == _PAGE else self._config.cluster_poll
            if head > self._head and delivered == 0:
                wait = min(wait, 0.01)

    def _deliver(self, rows: list[tuple[Any, ...]]) -> int:
        delivered = 0
        for seq, kind, run_id, text in rows:
            if seq != self._head + 1:
                break  # never past a gap: the lower seq comes first
            data = json.loads(text)
            self._head = seq
            self._window.append((seq, kind, run_id, data))
            if run_id is not None:
                self._mirror(kind, run_id, data)
            if self.hub.listening:
                self.hub.publish(Event._make(seq, kind, run_id, data))
            delivered += 1
        if delivered:
            self._seen.set()
            self._seen = trio.Event()
        return delivered

    def _mirror(self, kind: str, run_id: int, data: dict[str, Any]) -> None:
        if kind == "job_queued":
            self._live[run_id] = {"state": "queued", **data}
            self._claimable.set()
        elif kind == "job_started":
            live = self._live.get(run_id)
            if live is not None:
                live["state"] = "running"
        elif kind == "job_interrupted":
            live = self._live.get(run_id)
            if live is not None:
                live["state"] = "held"
                live["interruptions"] = data.get("interruptions", 0)
        elif kind == "job_progress":
            live = self._live.get(run_id)
            if live is not None:
                live["progress"] = data.get("fraction")
        elif kind == "job_cancel_requested" and data.get("owner") == self.node:
            local = self._local.get(run_id)
            if local is None:
                self._stop[run_id] = data["by"]
            else:
                local.cancelled_by = data["by"]
                local.scope.cancel()
        elif kind in _TERMINAL:
            self._live.pop(run_id, None)
            self._stop.pop(run_id, None)
            decided = self._decided.pop(run_id, None)
            if decided is not None:
                decided.set()

    # -- the drain ----------------------------------------------------------------------

    async def _drain(self, nursery: trio.Nursery) -> None:
        slots = trio.Semaphore(self._config.max_concurrency)
        while True:
            await slots.acquire()
            while self.fenced:
                await self._unfenced.wait()
            free = 1
            while True:
                try:
                    slots.acquire_nowait()
                except trio.WouldBlock:
                    break
                free += 1
            self._claimable = trio.Event()
            claimed: list[ClaimedRun] = []
            runners = sorted(self._operations.runners)
            if runners:
                claimed = await self._claim(runners, free)
            for _ in range(free - len(claimed)):
                slots.release()
            for run in claimed:
                local = _Local(trio.CancelScope())
                self._local[run.run_id] = local
                nursery.start_soon(self._execute, run, local, slots)
            if not claimed:
                with trio.move_on_after(self._config.cluster_poll * 5):
                    await self._claimable.wait()

    async def _claim(self, runners: list[str], limit: int) -> list[ClaimedRun]:
        """Up to ``limit`` runs for this node's runners, claimed in the ledger."""
        fields: dict[str, Any] = {"operations": runners, "limit": limit}
        if self._adopt:
            # A claim seen failing may have committed (a stalled commit given up, a
            # connection cut before its answer): its runs are this node's, with their
            # job_started recorded, and no other node will ever run or hold them while
            # this node's lease lives. They are taken with this claim and run now.
            fields["adopt"] = sorted(self._local.keys() | self._finishing)
        try:
            outcome = await self._do("claim", **fields)
        except trio.TooSlowError:  # the writer is busy: the claim may still commit
            outcome = Outcome(error=LedgerUnavailable("the writer is busy", cause="busy"))
        if outcome.error is not None:
            if not self._adopt:
                _log.warning(
                    "cluster node %s: a claim failed and may have committed (%s);"
                    " its next claim takes the runs it owns unknowingly",
                    self.node,
                    outcome.error,
                    extra={"node": self.node},
                )
            self._adopt = True
            return []
        claimed: list[ClaimedRun] = outcome.value
        if self._adopt:
            _log.info(
                "cluster node %s: claimed runs %s, with any it owned unknowingly",
                self.node,
                [run.run_id for run in claimed],
                extra={"node": self.node, "runs": [run.run_id for run in claimed]},
            )
            if len(claimed) < limit:
                self._adopt = False  # every run it owned unknowingly was taken
        return claimed

    async def _execute(self, run: ClaimedRun, local: _Local, slots: trio.Semaphore) -> None:
        fields: dict[str, Any]
        try:
            stop = self._stop.pop(run.run_id, None)
            if stop is not None:
                local.cancelled_by = stop
                local.scope.cancel()
            status = RunStatus(
                run_id=run.run_id,
                state="running",
                operation=run.operation,
                arguments=run.arguments,
                revision=run.revision,
                snapshot_id=run.snapshot_id,
                request_id=run.request_id,
            )
            runner = self._operations.runners[run.operation]
            report = functools.partial(self._report, run.run_id)
            fields = {"verdict": VERDICT_OK, "result_json": None, "error_json": None}
            with local.scope:
                local.scope.deadline = trio.current_time() + self._config.run_timeout
                try:
                    result = await runner(status, report)
                except Exception as exc:
                    fields = _failed(run, exc)
                else:
                    try:
                        fields["result_json"] = encode_json(result)
                    except (TypeError, ValueError) as exc:
                        fields = _failed(run, exc)
            if local.fenced:
                return  # not this node's to record: its run is held (by it or another)
            if local.cancelled_by is not None:
                # The work stopped: only now is the cancel recorded (truthful, §6.7).
                fields = {"cancelled_by": local.cancelled_by}
            elif local.scope.cancelled_caught:
                error = DeadlineExceeded(
                    f"the runner of run {run.run_id} ran longer than"
                    f" {self._config.run_timeout:g} s",
                    run_timeout=self._config.run_timeout,
                )
                fields = {
                    "verdict": VERDICT_NOT_RUN,
                    "result_json": None,
                    "error_json": encode_json(error.to_record().to_dict()),
                }
        finally:
            self._local.pop(run.run_id, None)
            # The runner is done: its slot may take the next run while the outcome is
            # written (in the same batch as that claim, often).
            slots.release()
        self._finishing.add(run.run_id)
        try:
            await self._finish(run.run_id, fields)
        finally:
            self._finishing.discard(run.run_id)

    def _report(self, run_id: int, fraction: float, note: str | None = None) -> None:
        self._progress[run_id] = check_fraction(fraction)
        with contextlib.suppress(trio.WouldBlock):  # full: the writer is busy anyway
            self._send.send_nowait(None)  # wakes the writer

    async def _finish(self, run_id: int, fields: dict[str, Any]) -> None:
        delay = self._config.ledger_retry_min
        while True:
            try:
                outcome = await self._do("finish", run_id=run_id, **fields)
            except trio.TooSlowError:
                outcome = Outcome(error=LedgerUnavailable("the writer is busy", cause="busy"))
            if outcome.error is None:
                if not outcome.value:
                    _log.warning(
                        "run %d is no longer this node's: its outcome is not recorded",
                        run_id,
                        extra={"run_id": run_id, "node": self.node},
                    )
                return
            # Retried until written: a result is never dropped for an outage.
            await trio.sleep(delay)
            delay = min(2 * delay, self._config.ledger_retry_max)

    # -- the API (as EventLog's) --------------------------------------------------------

    async def submit(
        self,
        operation: str,
        arguments: Mapping[str, Any],
        request_id: str | None,
        actor: str | None,
    ) -> Receipt:
        """Admit a request cluster-wide; its receipt once committed (docs/cluster.rst).

        Raises:
            UnsupportedOperation, InvalidCommand, RequestConflict, ActorStopped,
            LedgerUnavailable: as :meth:`EventLog.submit`.
        """
        submission = self._check(operation, arguments, request_id, actor)
        outcome = await self._decide(
            "submit",
            request_id=submission.request_id,
            content=submission.content,
            actor=submission.actor,
            operation=submission.spec.name,
            arguments_json=submission.arguments_json,
            mutating=submission.spec.mutating,
        )
        if outcome.error is not None:
            if isinstance(outcome.error, ActorError):
                self.refusals[outcome.error.code] = self.refusals.get(outcome.error.code, 0) + 1
            raise outcome.error
        receipt: Receipt = outcome.value
        if not receipt.admitted and receipt.code is not None:
            self.refusals[receipt.code] = self.refusals.get(receipt.code, 0) + 1
        return receipt

    async def cancel(self, run_id: int, actor: str) -> RunStatus:
        """Cancel a run wherever it runs; its true state (docs/cluster.rst).

        A queued run is cancelled at once; a running one is asked to stop, and the
        answer comes once its owner stopped it and recorded ``job_cancelled`` (or it
        finished first), within ``request_timeout`` seconds (else its state: running).

        Raises:
            UnknownRun: (``unknown_run``) no such run.
            LedgerUnavailable: (``ledger_unavailable``) the request is not durable.
        """
        decided = self._decided.setdefault(run_id, trio.Event())
        outcome = await self._decide("cancel", run_id=run_id, actor=actor)
        if outcome.error is not None:
            raise outcome.error
        if outcome.value == "unknown":
            self._decided.pop(run_id, None)
            raise UnknownRun(f"no run {run_id}", run_id=run_id)
        if outcome.value == "requested":
            with trio.move_on_after(self._config.request_timeout):
                await decided.wait()
        return await self.status(run_id)

    async def resume(self, run_id: int, override: bool) -> RunStatus:
        """Queue a held run again, for any node to claim (``job_queued`` with
        ``resumed``); its status as decided (docs/cluster.rst).

        Raises:
            RunQuarantined: (``run_quarantined``) interrupted too often and no override.
            AdmissionFull: (``admission_full``) no capacity cluster-wide; retry later.
            AlreadyDecided: (``already_decided``) the run is finished or cancelled.
            InvalidCommand: (``invalid_command``) the run is queued or running.
            UnknownRun: (``unknown_run``) no such run.
            LedgerUnavailable: (``ledger_unavailable``) the decision is not durable.
        """
        outcome = await self._decide(
            "resume",
            run_id=run_id,
            override=override,
            quarantine_after=self._config.quarantine_after,
        )
        if outcome.error is not None:
            raise outcome.error
        return await self.status(run_id)

    async def discard(self, run_id: int, actor: str) -> RunStatus:
        """Decide a held run cancelled by ``actor`` (``job_cancelled``, was ``held``).

        Raises:
            AlreadyDecided, InvalidCommand, UnknownRun, LedgerUnavailable: as
            :meth:`resume`.
        """
        outcome = await self._decide("discard", run_id=run_id, actor=actor)
        if outcome.error is not None:
            raise outcome.error
        return await self.status(run_id)

    async def status(self, run_id: int) -> RunStatus:
        """A run's committed state, read from the ledger.

        Raises:
            UnknownRun: (``unknown_run``) no such run.
            LedgerUnavailable: (``ledger_unavailable``) no answer in time.
        """
        row = await self._read(self.store.read_run, run_id, doing="reading a run")
        if row is None:
            raise UnknownRun(f"no run {run_id}", run_id=run_id)
        return _status(row, self._config.quarantine_after)

    async def _read(self, read: Callable[..., _T], *args: Any, doing: str) -> _T:
        """``read(*args)`` on the reader's connection, within ``ledger_read_timeout``
        seconds (then its statement is cancelled on the server)."""
        store = self.store
        try:
            with trio.fail_after(self._config.ledger_read_timeout):
                return await trio.to_thread.run_sync(
                    read, *args, limiter=store.read_limiter, abandon_on_cancel=True
                )
        except trio.TooSlowError:
            await store.cancel_statement("reader")
            raise LedgerUnavailable(
                f"the ledger did not answer in time ({doing})",
                cause="read_timeout",
                retry_after=self._config.retry_after_max,
            ) from None
        except store.errors as exc:
            raise store.classify(exc, doing) from None

    async def watch(self, cursor: int, limit: int) -> WatchResult:
        """Events after ``cursor``, from the window or the ledger (design §6.8).

        Raises:
            CursorExpired: (``cursor_expired``) ``cursor`` is beyond the committed head.
            InvalidCommand: (``invalid_command``) ``cursor`` or ``limit`` is not an int.
            LedgerUnavailable: (``ledger_unavailable``) no answer in time.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidCommand(f"limit must be an int >= 1, got {limit!r}", fields=["limit"])
        _check_cursor(cursor)
        if cursor > self._head:
            await self._catch_up(cursor)
        floor = self._window[0][0] if self._window else self._head + 1
        if floor - 1 <= cursor <= self._head:
            events = self._replay(cursor, limit)
            await trio.lowlevel.checkpoint()
        else:
            rows = await self._read(self.store.read_events, cursor, limit, doing="reading events")
            events = []
            for seq, kind, run_id, text in rows:
                if seq != cursor + len(events) + 1:
                    break
                events.append(Event._make(seq, kind, run_id, json.loads(text)))
            if not events and cursor > self._head:
                raise CursorExpired(
                    f"cursor {cursor} is beyond the head {self._head};"
                    " take a snapshot and subscribe from its cursor",
                    resume_from=self._head,
                    resync="snapshot",
                )
        head = max(self._head, events[-1].seq if events else 0)
        return WatchResult(
            events=tuple(events), cursor=events[-1].seq if events else cursor, head=head
        )

    async def _catch_up(self, cursor: int) -> None:
        """Wait (``ledger_read_timeout`` seconds at most) until this node's follower
        delivered ``cursor``, if the ledger has that seq: a client that moves from a
        node ahead of this one resumes from its cursor here, with no resync
        (docs/cluster.rst)."""
        rows = await self._read(self.store.read_events, cursor - 1, 1, doing="reading events")
        if rows and rows[0][0] == cursor:
            with trio.move_on_after(self._config.ledger_read_timeout):
                await self.wait_seen(cursor)

    def _replay(self, cursor: int, limit: int | None = None) -> list[Event]:
        _check_cursor(cursor)
        floor = self._window[0][0] if self._window else self._head + 1
        if cursor > self._head or cursor < floor - 1:
            raise CursorExpired(
                f"cursor {cursor} is outside this node's window [{floor - 1}, {self._head}];"
                " take a snapshot and subscribe from its cursor",
                resume_from=self._head,
                resync="snapshot",
            )
        start = cursor - floor + 1
        entries = list(self._window)[start : None if limit is None else start + limit]
        return [Event._make(*entry) for entry in entries]

    async def wait_seen(self, seq: int) -> None:
        """Wait until the follower delivered ``seq`` (a checkpoint)."""
        while self._head < seq:
            await self._seen.wait()
        await trio.lowlevel.checkpoint()

    def subscribe(self, name: str | None, **options: Any) -> Port:
        """A subscriber port fed by the follower (design §6.9)."""
        opts: PortOptions = options  # type: ignore[assignment]
        return self.hub.open_port(name, **opts)

    def record(self, kind: str, data: Mapping[str, Any]) -> int:
        """Queue a log-wide event; return the head this node has delivered (its seq is
        assigned at commit and is greater)."""
        op = Op(kind="record", fields={"kind": kind, "data_json": encode_json(dict(data))})
        try:
            self._send.send_nowait((op, trio.Event()))
        except trio.WouldBlock:
            _log.warning(
                "cluster node %s: event %s dropped (the writer is backlogged)",
                self.node,
                kind,
                extra={"node": self.node, "kind": kind},
            )
        return self._head

    def snapshot(self) -> EventLogSnapshot:
        """Every live run this node's follower knows and its cursor (design §6.15)."""
        return EventLogSnapshot(
            cursor=self._head,
            revision=0,
            runs=tuple(
                _live_status(run_id, live, self._config.quarantine_after)
                for run_id, live in self._live.items()
            ),
        )

    def boot_report(self) -> BootReport:
        """The runs held in the cluster now (a dead node's, docs/cluster.rst), as this
        node's follower knows them, with their interruptions and quarantine."""
        held = tuple(
            _live_status(run_id, live, self._config.quarantine_after)
            for run_id, live in self._live.items()
            if live["state"] == "held"
        )
        return BootReport(
            survivors=held,
            interrupted=tuple(run for run in held if run.interruptions),
            quarantined=tuple(run for run in held if run.quarantined),
            head=self._head,
            revision=0,
        )

    def statistics(self) -> EventLogStatistics:
        """The node's counters, from its mirror of the cluster's runs (``ledger`` None)."""
        states = [live["state"] for live in self._live.values()]
        return EventLogStatistics(
            head=self._head,
            floor=self._window[0][0] if self._window else self._head + 1,
            queued=states.count("queued"),
            running=states.count("running"),
            held=states.count("held"),
            bound=self._config.max_inflight,
            paused=self.unavailable is not None,
            revision=0,
            ports=tuple(self.hub.ports()),
            ledger=None,
            subscribers_left=self.hub.leaves(),
            refusals=dict(self.refusals),
        )


def _check_cursor(cursor: object) -> None:
    if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
        raise InvalidCommand(f"cursor must be an int >= 0, got {cursor!r}", fields=["cursor"])


def _failed(run: ClaimedRun, exc: Exception) -> dict[str, Any]:
    record = runner_failure(run.run_id, run.operation, exc)
    return {
        "verdict": VERDICT_NOT_RUN,
        "result_json": None,
        "error_json": encode_json(record.to_dict()),
    }


def _status(row: tuple[Any, ...], quarantine_after: int) -> RunStatus:
    (run_id, request_id, operation, arguments, revision, snapshot_id, state, _owner) = row[:8]
    verdict, result, error, cancelled_by, progress, waiters, interruptions = row[8:15]
    return RunStatus(
        run_id=int(run_id),
        state=state,
        operation=operation,
        arguments=json.loads(arguments),
        revision=int(revision),
        snapshot_id=snapshot_id,
        request_id=request_id,
        verdict=verdict,
        result=None if result is None else json.loads(result),
        error=None if error is None else json.loads(error),
        cancelled_by=cancelled_by,
        progress=progress,
        interruptions=int(interruptions),
        quarantined=int(interruptions) >= quarantine_after,
        waiters=int(waiters),
    )


def _live_status(run_id: int, live: dict[str, Any], quarantine_after: int) -> RunStatus:
    interruptions = live.get("interruptions", 0)
    return RunStatus(
        run_id=run_id,
        state=live["state"],
        operation=live["operation"],
        arguments=live["arguments"],
        revision=live["revision"],
        snapshot_id=live["snapshot_id"],
        request_id=live["request_id"],
        progress=live.get("progress"),
        interruptions=interruptions,
        quarantined=interruptions >= quarantine_after,
    )
