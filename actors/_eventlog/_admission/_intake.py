"""The intake of the event log: validation, idempotency, coalescing, admission (§6.1-6.5).

* Validation (§6.2): ``arguments`` must be a mapping of JSON values whose keys are in the
  operation's ``fields`` (and include its ``required`` ones).
* Idempotency (§6.3): requests are compared by the canonical JSON of (operation,
  arguments); a stored receipt is returned for the same content, ``request_conflict``
  for other content. Only admitted requests are stored (a refusal may be retried).
* Coalescing (§6.4): a non-mutating request equal to a run queued or running at the same
  revision joins it (``coalesced: true``) and needs no capacity.
* Admission (§6.5): at ``max_inflight`` queued plus running runs, the receipt is a
  refusal (the gate emits ``admission_paused``/``admission_resumed``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...errors import (
    AdmissionFull,
    InvalidCommand,
    LedgerUnavailable,
    RequestConflict,
    UnsupportedOperation,
)
from .._checks import check_text
from .._types import Receipt, canonical_json
from ._decided import Admission

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._journal import Journal
    from .._ledger import Ledger, LedgerSnapshot, Ticket
    from .._operations import Operations
    from .._run import Run
    from .._runs import Runs
    from .._types import EventLogConfig, OperationSpec
    from ._gate import AdmissionGate
    from ._idempotency import RequestStore

__all__ = ["Intake"]


class _Submission:
    """A validated request: what deciding it needs."""

    __slots__ = ("actor", "arguments", "arguments_json", "content", "request_id", "spec")

    def __init__(
        self,
        spec: OperationSpec,
        arguments: dict[str, Any],
        arguments_json: str,
        request_id: str,
        actor: str | None,
    ) -> None:
        self.spec = spec
        self.arguments = arguments
        self.arguments_json = arguments_json
        self.request_id = request_id
        self.actor = actor
        #: What idempotency compares (design §6.3).
        self.content = f"{canonical_json(spec.name)}:{arguments_json}"


def _receipt(run: Run, request_id: str, *, coalesced: bool = False) -> Receipt:
    return Receipt._make(
        request_id, run.run_id, run.snapshot_id, run.revision, run.queued_seq - 1, coalesced
    )


class Intake:
    """Decides submitted requests and keeps the revision (design §6.1-6.5).

    Args:
        config: The event log's settings.
        operations: The accepted operations.
        requests: The stored requests (idempotency).
        runs: Where admitted requests become (or join) runs.
        gate: The admission bound.
        journal: Where ``revision_bumped`` is emitted.
        ledger: Where the revision is stored, or None in memory.
        check_open: Raises ``ActorStopped`` unless the log is running.
    """

    def __init__(
        self,
        config: EventLogConfig,
        *,
        operations: Operations,
        requests: RequestStore,
        runs: Runs,
        gate: AdmissionGate,
        journal: Journal,
        ledger: Ledger | None,
        check_open: Callable[[], None],
    ) -> None:
        self._config = config
        self._operations = operations
        self._requests = requests
        self._runs = runs
        self._gate = gate
        self._journal = journal
        self._ledger = ledger
        self._check_open = check_open
        self._revision = 0
        self.refusals: dict[str, int] = {}
        """Submissions refused so far, by code (``admission_full``, ``ledger_unavailable``)."""

    @property
    def revision(self) -> int:
        """The current revision (design §6.4)."""
        return self._revision

    def boot(self, snapshot: LedgerSnapshot) -> None:
        """Continue from the ledger's revision and stored requests."""
        self._revision = snapshot.revision
        self._requests.boot(snapshot)

    def admit(
        self,
        operation: str,
        arguments: Mapping[str, Any],
        request_id: str | None,
        actor: str | None,
    ) -> Admission:
        """Decide a request now if memory knows enough; see :meth:`EventLog.admit`."""
        submission = self.check(operation, arguments, request_id, actor)
        if self._requests.must_load(submission.request_id):
            return Admission(None, None, functools.partial(self._decide_later, submission))
        return Admission(*self._decide(submission))

    def refuse(
        self,
        operation: str,
        arguments: Mapping[str, Any],
        request_id: str | None,
        actor: str | None,
        retry_after: float,
    ) -> Receipt:
        """A ``admission_full`` receipt for a valid request, deciding nothing (design §6.19)."""
        submission = self.check(operation, arguments, request_id, actor)
        return self._refusal(submission.request_id, self._runs.depth, retry_after)

    def check(
        self,
        operation: str,
        arguments: Mapping[str, Any],
        request_id: str | None,
        actor: str | None,
    ) -> _Submission:
        """Validate a request as :meth:`admit` does, deciding nothing (design §6.2).

        What the cluster's admission (docs/cluster.rst) decides in the database.

        Raises:
            UnsupportedOperation, InvalidCommand, ActorStopped: as :meth:`EventLog.submit`.
        """
        self._check_open()
        spec, args, args_json = self._validate(operation, arguments)
        if request_id is None:
            request_id = f"req-{secrets.token_hex(8)}"
        else:
            check_text("request_id", request_id)
        if actor is not None:
            check_text("actor", actor)
        return _Submission(spec, args, args_json, request_id, actor)

    def _refusal(self, request_id: str, depth: int, retry_after: float) -> Receipt:
        self._refused(AdmissionFull.code)
        return Receipt(
            admitted=False,
            run_id=None,
            request_id=request_id,
            snapshot_id=None,
            revision=self._revision,
            event_cursor=self._journal.head,
            code=AdmissionFull.code,
            retryable=True,
            depth=depth,
            bound=self._gate.bound,
            retry_after=retry_after,
        )

    async def _decide_later(self, submission: _Submission) -> tuple[Receipt, Ticket | None]:
        await self._requests.load(submission.request_id)
        self._check_open()
        return self._decide(submission)

    def _decide(self, submission: _Submission) -> tuple[Receipt, Ticket | None]:
        known = self._requests.get(submission.request_id)
        if known is None:
            return self._admit(submission)
        if known.content != submission.content:
            raise RequestConflict(
                f"request id {submission.request_id!r} was used with other content",
                request_id=submission.request_id,
            )
        return known.receipt, known.ticket

    def _validate(
        self, operation: object, arguments: object
    ) -> tuple[OperationSpec, dict[str, Any], str]:
        if not isinstance(operation, str):
            raise InvalidCommand("operation must be a str", fields=["operation"])
        spec = self._operations.specs.get(operation)
        if spec is None:
            raise UnsupportedOperation(f"unknown operation {operation!r}", operation=operation)
        if not isinstance(arguments, Mapping):
            raise InvalidCommand(
                f"arguments must be a mapping, got {type(arguments).__name__}",
                fields=["arguments"],
            )
        outside = sorted(str(k) for k in arguments if k not in spec.fields)
        if outside:
            raise InvalidCommand(
                f"fields outside the schema of {operation!r}: {', '.join(outside)}",
                fields=outside,
            )
        missing = sorted(spec.required.difference(arguments))
        if missing:
            raise InvalidCommand(f"missing required fields: {', '.join(missing)}", fields=missing)
        try:
            args_json = canonical_json(dict(arguments))
            size = len(args_json.encode())  # UnicodeEncodeError (a ValueError): surrogates
        except (TypeError, ValueError) as exc:
            raise InvalidCommand(
                f"arguments must be JSON-compatible: {exc}"[:300], fields=["arguments"]
            ) from None
        if size > self._config.max_arguments_bytes:
            raise InvalidCommand(
                f"arguments exceed {self._config.max_arguments_bytes} bytes",
                fields=["arguments"],
            )
        try:
            args = json.loads(args_json)
        except RecursionError:  # encodable here, yet too deep to decode again
            raise InvalidCommand("arguments are nested too deeply", fields=["arguments"]) from None
        return spec, args, args_json

    def _admit(self, submission: _Submission) -> tuple[Receipt, Ticket | None]:
        # A new request needs a row in the ledger: refused while commits fail (§6.13).
        try:
            self._gate.check_ledger()
        except LedgerUnavailable:
            self._refused(LedgerUnavailable.code)
            raise
        spec, request_id = submission.spec, submission.request_id
        joined = None
        if not spec.mutating:
            joined = self._runs.joinable((spec.name, submission.arguments_json, self._revision))
        if joined is not None:
            self._runs.join(joined, request_id, submission.actor)
            receipt = _receipt(joined, request_id, coalesced=True)
            return receipt, self._store(submission, receipt)
        depth = self._runs.depth
        if self._gate.full(depth):
            return self._refusal(request_id, depth, self._gate.retry_after()), None
        digest = hashlib.sha256(f"{self._revision}:{submission.content}".encode()).hexdigest()[:16]
        run, _ = self._runs.new(
            spec.name,
            submission.arguments,
            submission.arguments_json,
            self._revision,
            digest,
            request_id,
            submission.actor,
        )
        receipt = _receipt(run, request_id)
        return receipt, self._store(submission, receipt)

    def _store(self, submission: _Submission, receipt: Receipt) -> Ticket | None:
        return self._requests.store(
            submission.request_id, submission.content, receipt, submission.actor
        )

    def _refused(self, code: str) -> None:
        self.refusals[code] = self.refusals.get(code, 0) + 1

    def apply_edit(self) -> int:
        """Bump the revision; see :meth:`EventLog.apply_edit`."""
        self._revision += 1
        self._journal.emit("revision_bumped", None, {"revision": self._revision})
        if self._ledger is not None:
            self._ledger.stage_meta("revision", str(self._revision))
        return self._revision
