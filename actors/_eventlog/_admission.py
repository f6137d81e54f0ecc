"""The front door of the event log: validation, idempotency, coalescing, admission.

design §6.1-6.5. :class:`FrontDoorMixin` is only meant to be mixed into
:class:`actors._eventlog._eventlog.EventLog`; it is split out to keep modules small.

* Validation (§6.2): ``arguments`` must be a mapping of JSON values whose keys are in the
  operation's ``fields`` (and include its ``required`` ones).
* Idempotency (§6.3): requests are compared by the canonical JSON of (operation,
  arguments); a stored receipt is returned for the same content, ``request_conflict``
  for other content. Only admitted requests are stored (a refusal may be retried).
* Coalescing (§6.4): a non-mutating request equal to a run queued or running at the same
  revision joins it (``coalesced: true``) and needs no capacity.
* Admission (§6.5): at ``max_inflight`` queued plus running runs, the receipt is a
  refusal; the first refusal of a saturation episode emits ``admission_paused``, and the
  first decision that frees capacity afterwards emits ``admission_resumed``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import attrs
import trio

from ..errors import (
    InvalidCommand,
    PoolFull,
    RequestConflict,
    UnsupportedOperation,
)
from ._types import OperationSpec, Receipt, canonical_json, encode_json

if TYPE_CHECKING:
    from ._eventlog import EventLog
    from ._ledger import Ledger, LedgerSnapshot, Ticket
    from ._runs import Run
    from ._types import EventLogConfig

__all__ = ["Admission", "FrontDoorMixin"]

#: The receipt's fields, stored as JSON with its request (read back by ``Receipt(**)``).
_RECEIPT_FIELDS = tuple(field.name for field in attrs.fields(Receipt))


class Admission:
    """A request decided by :meth:`EventLog.admit`; its receipt once durable."""

    __slots__ = ("_later", "_log", "_ticket", "receipt")

    def __init__(
        self,
        log: EventLog,
        receipt: Receipt | None,
        ticket: Ticket | None,
        later: tuple[OperationSpec, dict[str, Any], str, str, str] | None = None,
    ) -> None:
        self._log = log
        self.receipt = receipt
        self._ticket = ticket
        self._later = later

    async def wait(self) -> Receipt:
        """Return the receipt once its request is durable (design §6.10); a checkpoint.

        Raises:
            RequestConflict: (``request_conflict``) found in the ledger with other content.
            LedgerError: (``ledger_error``) the request could not be made durable.
        """
        if self._later is not None:
            later, self._later = self._later, None
            await self._log._load_request(later[-1])
            self._log._check_open()
            self.receipt, self._ticket = self._log._decide(*later)
        await _durable(self._ticket)
        assert self.receipt is not None
        return self.receipt


class _Request:
    __slots__ = ("content", "receipt", "ticket")

    def __init__(self, content: str, receipt: Receipt, ticket: Ticket | None) -> None:
        self.content = content
        self.receipt = receipt
        self.ticket = ticket


async def _durable(ticket: Ticket | None) -> None:
    if ticket is None:
        await trio.lowlevel.checkpoint()
    else:
        await ticket.wait()


def _is_run_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _text(name: str, value: object, limit: int = 128) -> str:
    """Check a str of 1..``limit`` chars that UTF-8 can encode (the ledger stores it)."""
    if not isinstance(value, str) or not 1 <= len(value) <= limit or not _encodable(value):
        raise InvalidCommand(f"{name} must be a str of 1..{limit} chars", fields=[name])
    return value


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate: SQLite could not store it
        return False
    return True


class FrontDoorMixin:
    """Submit, admission and revision of the event log; mixed into ``EventLog`` only."""

    if TYPE_CHECKING:
        config: EventLogConfig
        _ledger: Ledger | None
        _ops: dict[str, OperationSpec]
        _runs: dict[int, Run]
        _requests: dict[str, _Request]
        _ledger_has_more_requests: bool
        _next_position: int
        _inflight: dict[tuple[str, str, int], int]
        _paused: bool
        _revision: int
        _head: int
        _queued: int
        _running: int

        def _check_open(self) -> None: ...
        def _emit(
            self, kind: str, run_id: int | None, data: dict[str, Any], text: str | None = None
        ) -> int: ...
        def _new_run(
            self,
            operation: str,
            arguments: dict[str, Any],
            arguments_json: str,
            revision: int,
            snapshot_id: str,
            request_id: str,
        ) -> Run: ...

    async def submit(
        self, operation: str, arguments: Mapping[str, Any], request_id: str | None = None
    ) -> Receipt:
        """Admit a request and return its receipt once the request is durable (design §6.1).

        Never runs anything and never waits for a verdict. A refusal for lack of capacity
        is a receipt too (``admitted=False``, ``code="pool_full"``), not an exception.
        Same as ``await log.admit(...).wait()``.

        Args:
            operation: A registered operation's name.
            arguments: A mapping whose keys are within the operation's ``fields``.
            request_id: The caller's id for idempotent retries (1..128 chars); None makes
                one up.

        Raises:
            UnsupportedOperation: (``unsupported_operation``) unknown operation (§6.2).
            InvalidCommand: (``invalid_command``) arguments not a mapping, fields outside
                the schema or missing (``details["fields"]`` names them), not JSON, or too
                large; or a bad request id.
            RequestConflict: (``request_conflict``) ``request_id`` was used with other
                content (§6.3).
            ActorStopped: (``actor_stopped``) the event log is not running.
            LedgerError: (``ledger_error``) the request could not be made durable.
        """
        return await self.admit(operation, arguments, request_id).wait()

    def admit(
        self, operation: str, arguments: Mapping[str, Any], request_id: str | None = None
    ) -> Admission:
        """Decide a request now, without waiting; ``await .wait()`` for its receipt.

        The synchronous half of :meth:`submit`, so the event-log actor admits requests in
        mailbox order while their durability is awaited concurrently. (Only a request id
        that memory no longer holds is decided later, after a ledger look-up.)

        Raises:
            UnsupportedOperation, InvalidCommand, RequestConflict, ActorStopped: as
                :meth:`submit`.
        """
        self._check_open()
        # This mixin only ever lives in ``EventLog``; ``Admission`` keeps the full log.
        log = cast("EventLog", self)
        spec, args, args_json = self._validate(operation, arguments)
        content = f"{canonical_json(operation)}:{args_json}"
        if request_id is None:
            request_id = f"req-{secrets.token_hex(8)}"
        else:
            _text("request_id", request_id)
            if request_id not in self._requests and self._ledger_has_more_requests:
                return Admission(log, None, None, (spec, args, args_json, content, request_id))
        return Admission(log, *self._decide(spec, args, args_json, content, request_id))

    def _decide(
        self,
        spec: OperationSpec,
        args: dict[str, Any],
        args_json: str,
        content: str,
        request_id: str,
    ) -> tuple[Receipt, Ticket | None]:
        known = self._requests.get(request_id)
        if known is None:
            return self._admit(spec, args, args_json, content, request_id)
        if known.content != content:
            raise RequestConflict(
                f"request id {request_id!r} was used with other content",
                request_id=request_id,
            )
        return known.receipt, known.ticket

    def _validate(
        self, operation: object, arguments: object
    ) -> tuple[OperationSpec, dict[str, Any], str]:
        if not isinstance(operation, str):
            raise InvalidCommand("operation must be a str", fields=["operation"])
        spec = self._ops.get(operation)
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
        if size > self.config.max_arguments_bytes:
            raise InvalidCommand(
                f"arguments exceed {self.config.max_arguments_bytes} bytes",
                fields=["arguments"],
            )
        try:
            args = json.loads(args_json)
        except RecursionError:  # encodable here, yet too deep to decode again
            raise InvalidCommand("arguments are nested too deeply", fields=["arguments"]) from None
        return spec, args, args_json

    def _admit(
        self,
        spec: OperationSpec,
        args: dict[str, Any],
        args_json: str,
        content: str,
        request_id: str,
    ) -> tuple[Receipt, Ticket | None]:
        key = None if spec.mutating else (spec.name, args_json, self._revision)
        joined = self._runs.get(self._inflight[key]) if key in self._inflight else None
        if joined is not None:
            receipt = Receipt(
                admitted=True,
                run_id=joined.run_id,
                request_id=request_id,
                snapshot_id=joined.snapshot_id,
                revision=joined.revision,
                event_cursor=joined.queued_seq - 1,
                coalesced=True,
            )
            return receipt, self._store_request(request_id, content, receipt)
        full = self._at_capacity()
        if full is not None:
            depth, bound = full
            refused = Receipt(
                admitted=False,
                run_id=None,
                request_id=request_id,
                snapshot_id=None,
                revision=self._revision,
                event_cursor=self._head,
                code=PoolFull.code,
                retryable=True,
                depth=depth,
                bound=bound,
            )
            return refused, None
        digest = hashlib.sha256(f"{self._revision}:{content}".encode()).hexdigest()[:16]
        run = self._new_run(spec.name, args, args_json, self._revision, digest, request_id)
        receipt = Receipt(
            admitted=True,
            run_id=run.run_id,
            request_id=request_id,
            snapshot_id=run.snapshot_id,
            revision=run.revision,
            event_cursor=run.queued_seq - 1,
        )
        return receipt, self._store_request(request_id, content, receipt)

    def _coalesce_key(self, run: Run) -> tuple[str, str, int] | None:
        spec = self._ops.get(run.operation)
        if spec is None or spec.mutating:
            return None
        key = (run.operation, run.arguments_json, run.revision)
        if key in self._inflight:
            return None
        self._inflight[key] = run.run_id
        return key

    def _store_request(self, request_id: str, content: str, receipt: Receipt) -> Ticket | None:
        ticket = None
        if self._ledger is not None:
            ticket = self._ledger.stage_request(
                request_id,
                content,
                receipt.run_id or 0,
                encode_json({name: getattr(receipt, name) for name in _RECEIPT_FIELDS}),
                self._next_position,
            )
            self._next_position += 1
        requests = self._requests
        requests[request_id] = _Request(content, receipt, ticket)
        while len(requests) > self.config.retain_requests:
            del requests[next(iter(requests))]
            self._ledger_has_more_requests = self._ledger is not None
        return ticket

    def _boot_requests(self, snapshot: LedgerSnapshot) -> None:
        for request_id, content, _, receipt_json in snapshot.requests:
            receipt = Receipt(**json.loads(receipt_json))
            self._requests[request_id] = _Request(content, receipt, None)
        self._ledger_has_more_requests = snapshot.request_total > len(self._requests)
        self._next_position = snapshot.next_request_position

    async def _load_request(self, request_id: str) -> None:
        assert self._ledger is not None
        await self._ledger.flush()
        row = await self._ledger.fetch_request(request_id)
        if row is not None and request_id not in self._requests:
            content, _, receipt_json = row
            self._requests[request_id] = _Request(
                content, Receipt(**json.loads(receipt_json)), None
            )

    def apply_edit(self) -> int:
        """Bump the revision: later submissions run fresh instead of coalescing (§6.4).

        Emits ``revision_bumped``; returns the new revision.
        """
        self._revision += 1
        self._emit("revision_bumped", None, {"revision": self._revision})
        if self._ledger is not None:
            self._ledger.stage_meta("revision", str(self._revision))
        return self._revision

    def _capacity_freed(self) -> None:
        depth = self._queued + self._running
        if self._paused and depth < self.config.max_inflight:
            self._paused = False
            self._emit(
                "admission_resumed", None, {"depth": depth, "bound": self.config.max_inflight}
            )

    def _at_capacity(self) -> tuple[int, int] | None:
        """``(depth, bound)`` if no run can be admitted now, else None (design §6.5).

        The first refusal of a saturation episode emits ``admission_paused``, whatever
        was refused (a submit, or a resume of a held run).
        """
        depth = self._queued + self._running
        bound = self.config.max_inflight
        if depth < bound:
            return None
        if not self._paused:
            self._paused = True
            self._emit("admission_paused", None, {"depth": depth, "bound": bound})
        return depth, bound

    def _check_capacity(self) -> None:
        full = self._at_capacity()
        if full is not None:
            depth, bound = full
            raise PoolFull(f"{depth} runs in flight (bound {bound})", depth=depth, bound=bound)
