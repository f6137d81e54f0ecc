"""Records of the event log: operations, receipts, events, runs (design §6).

Everything here is plain data (attrs frozen, keyword-only) so it can cross the event-log
actor's mailbox and be turned into the client protocol's JSON with ``to_dict()``.
The behaviour lives in :mod:`actors._eventlog._eventlog`; durability in
:mod:`actors._eventlog._ledger`; subscribers in :mod:`actors._eventlog._ports`.
"""

from __future__ import annotations

import functools
import json
import os
from typing import TYPE_CHECKING, Any, Literal

import attrs

from protocol.messages import Event as Event
from protocol.messages import Receipt as Receipt

from .._core import count_field, duration_field

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "RUN_STATES",
    "TERMINAL_STATES",
    "VERDICT_NOT_RUN",
    "VERDICT_OK",
    "BootReport",
    "Drift",
    "Event",
    "EventLogConfig",
    "OperationSpec",
    "Receipt",
    "RunStatus",
    "WatchResult",
    "EventLogSnapshot",
    "canonical_json",
    "encode_json",
    "json_string",
]

RunState = Literal["queued", "running", "finished", "cancelled", "held"]
#: Every state a run can be in. ``held``: found unfinished at boot, waiting for
#: ``resume``/``discard`` (design §6.10).
RUN_STATES: tuple[RunState, ...] = ("queued", "running", "finished", "cancelled", "held")
#: States that never change again (design §6.6, §6.7).
TERMINAL_STATES = frozenset({"finished", "cancelled"})
#: The verdict of a run whose runner returned normally.
VERDICT_OK = "ok"
#: The verdict of a run whose runner raised: the reason is in the ``error`` record (§6.6).
VERDICT_NOT_RUN = "NOT_RUN"


def canonical_json(value: Any) -> str:
    """Return the canonical JSON text of ``value``: sorted keys, no spaces, no NaN.

    Two values that are equal as JSON give the same text, so it is used to compare
    request content (design §6.3) and to key coalescing (design §6.4).

    Raises:
        TypeError: ``value`` holds something JSON cannot represent.
        ValueError: ``value`` holds NaN or an infinity, a circular reference, or is
            nested too deeply to encode (instead of a bare ``RecursionError``).
    """
    try:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except RecursionError:
        raise ValueError("value is nested too deeply") from None


def _make_json_encoder() -> Callable[[Any], str]:
    # The C encoder called directly skips json.dumps' per-call set-up (about 2x faster
    # for small dicts). No circular check: the log encodes only data it built itself.
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - pure-Python json
        return functools.partial(
            json.dumps, separators=(",", ":"), ensure_ascii=True, allow_nan=False
        )
    ascii_string = json.encoder.encode_basestring_ascii
    chunks = make(None, None, ascii_string, None, ":", ",", False, False, False)

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode


#: ``encode_json(value)``: compact JSON text of data the log built or already checked
#: (key order kept, non-ASCII escaped so the text always encodes to UTF-8). Each event's
#: ``data`` is encoded exactly once, by the log, for its ledger row; not canonical.
encode_json = _make_json_encoder()
#: ``json_string(text)``: the JSON string literal of ``text`` (quoted, ASCII-escaped).
json_string: Callable[[str], str] = json.encoder.encode_basestring_ascii


def _name(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not value or len(value) > 128:
        raise ValueError(f"{attribute.name} must be a non-empty str of <= 128 chars")


def _names(value: Iterable[str]) -> frozenset[str]:
    # A typed converter: mypy's attrs plugin types a bare ``converter=frozenset`` as
    # taking ``Iterable[_T_co]``, which no argument matches (python/mypy#5313).
    return frozenset(value)


@attrs.frozen(kw_only=True)
class OperationSpec:
    """One operation the event log accepts, and its argument schema (design §6.2, §6.4).

    Example: ``OperationSpec(name="index", fields={"path"}, required={"path"})``.
    """

    name: str = attrs.field(validator=_name)
    """The operation's name as clients send it."""
    fields: frozenset[str] = attrs.field(converter=_names, factory=frozenset)
    """Allowed argument names; any other name is ``invalid_command``."""
    required: frozenset[str] = attrs.field(converter=_names, factory=frozenset)
    """Argument names that must be present (a subset of ``fields``)."""
    mutating: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    """True for operations that change state: they never coalesce (design §6.4)."""

    @required.validator
    def _check_required(self, attribute: attrs.Attribute[frozenset[str]], value: Any) -> None:
        extra = value - self.fields
        if extra:
            raise ValueError(f"required fields {sorted(extra)} are not in fields")


@attrs.frozen(kw_only=True)
class RunStatus:
    """The state of one run, as ``status``/``cancel``/``resume``/``discard`` return it."""

    run_id: int
    """The run's id (1, 2, ...; never reused, also across restarts)."""
    state: RunState
    """``queued``, ``running``, ``finished``, ``cancelled`` or ``held`` (found unfinished at
    boot, waiting for ``resume`` or ``discard``, design §6.10)."""
    operation: str
    """The operation it runs."""
    arguments: dict[str, Any]
    """Its arguments (pinned at submit)."""
    revision: int
    """The revision it is pinned to."""
    snapshot_id: str
    """Digest of revision, operation and arguments."""
    request_id: str
    """The request this status is for: the one that created the run, or the one asked
    about (each request joined to a run keeps its own status, design §6.14)."""
    verdict: str | None = None
    """``ok``, ``NOT_RUN`` or the executor's verdict, once finished."""
    result: Any = None
    """The runner's JSON-compatible result, once finished."""
    error: dict[str, str] | None = None
    """``{"category", "code", "message"}`` when the runner failed (message <= 1 KiB)."""
    cancelled_by: str | None = None
    """Who cancelled or discarded it (actor attribution, design §6.7)."""
    progress: float | None = None
    """The last progress fraction reported (0.0..1.0)."""
    interruptions: int = 0
    """How many times a process stopped while it was running (design §6.10)."""
    quarantined: bool = False
    """True once ``interruptions`` reached the quarantine threshold (2)."""
    waiters: int = 1
    """Requests waiting on the run (for a decided run: when it was decided); more than 1
    once equal requests joined it (design §6.14)."""

    @property
    def terminal(self) -> bool:
        """True for ``finished`` and ``cancelled``."""
        return self.state in TERMINAL_STATES

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-compatible dict."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class EventLogSnapshot:
    """Every live run and the cursor the whole is consistent with (design §6.15).

    Taken atomically: no event falls between the runs' states and ``cursor``. A client
    that lost its place (``cursor_expired``, a port's ``resync_required``) replaces its
    state of the runs with ``runs`` and follows the events after ``cursor`` (subscribe
    with ``cursor=snapshot.cursor``, or ``port.resync(snapshot.cursor)``). A run it knew
    that is not in ``runs`` was decided meanwhile: its ``status`` says how.
    """

    cursor: int
    """The seq of the last event the snapshot includes (the head when taken)."""
    revision: int
    """The current revision."""
    runs: tuple[RunStatus, ...]
    """The runs queued, running or held, by run id."""

    def to_dict(self) -> dict[str, Any]:
        """Return the snapshot as a JSON-compatible dict."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class WatchResult:
    """What ``watch(cursor)`` returns (design §6.8)."""

    events: tuple[Event, ...]
    """The events after the cursor, oldest first (at most the requested limit)."""
    cursor: int
    """The cursor to pass next time: the seq of the last event returned (or the input)."""
    head: int
    """The newest seq at the time of the call."""


@attrs.frozen(kw_only=True)
class BootReport:
    """Unfinished runs found in the ledger at boot, still undecided (design §6.10).

    ``survivors`` ⊇ ``interrupted`` ⊇ ``quarantined``: every admitted, unfinished run;
    those a process stop caught running; those caught running twice or more. None of them
    runs until ``resume`` or ``discard`` decides.
    """

    survivors: tuple[RunStatus, ...]
    """Every held run (admitted and unfinished when the previous process stopped)."""
    interrupted: tuple[RunStatus, ...]
    """Held runs with at least one interruption."""
    quarantined: tuple[RunStatus, ...]
    """Held runs at or past the quarantine threshold: ``resume`` needs ``override=True``."""
    head: int
    """The newest event seq."""
    revision: int
    """The current revision."""

    def to_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-compatible dict."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class Drift:
    """Which pinned ingredients of a run differ from the current ones (design §6.10)."""

    run_id: int
    """The run checked."""
    changed: tuple[str, ...]
    """Names among ``revision``, ``operation``, ``arguments`` that changed (sorted)."""
    pinned: dict[str, Any]
    """The run's ingredients."""
    current: dict[str, Any]
    """The ingredients compared against."""

    @property
    def drifted(self) -> bool:
        """True when any ingredient changed."""
        return bool(self.changed)


def _path_or_none(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, str | os.PathLike):
        return os.fspath(value)
    raise ValueError(f"ledger_path must be a path, a postgresql:// URL or None, got {value!r}")


@attrs.frozen(kw_only=True)
class EventLogConfig:
    """Settings of the event log; every count and duration is validated (design §1.6)."""

    ledger_path: str | None = attrs.field(default=None, converter=_path_or_none)
    """Where the ledger lives, for durability (design §6.10): a SQLite file, or a
    ``postgresql://`` URL (a PostgreSQL ledger several nodes may share, docs/cluster.rst);
    None keeps everything in memory."""
    max_inflight: int = count_field(256, minimum=1)
    """Admission bound on queued plus running runs (design §6.5)."""
    window: int = count_field(4096, minimum=1)
    """How many recent events stay in memory for ``watch`` (design §6.8)."""
    max_concurrency: int = count_field(4, minimum=1)
    """How many built-in runners execute at once (the drain, design §6.6)."""
    subscriber_bound: int = count_field(1024, minimum=1)
    """Default queue bound of a subscriber port, in events (design §6.9)."""
    progress_buffer: int = count_field(64, minimum=1)
    """Progress reports kept per queued run until it starts (the newest are kept)."""
    retain_runs: int = count_field(10_000, minimum=0)
    """Finished/cancelled runs kept in memory; older ones are read from the ledger."""
    ledger_retain_events: int = count_field(1_000_000, minimum=1)
    """Events the ledger keeps: at each open the older ones are deleted, and a ``watch``
    cursor below what is kept gets ``cursor_expired`` (design §6.8, never a silent gap)."""
    retain_requests: int = count_field(100_000, minimum=0)
    """Request ids kept in memory for idempotency; older ones are read from the ledger."""
    max_arguments_bytes: int = count_field(16 * 1024, minimum=2)
    """Bound on the canonical JSON of a submit's arguments, in bytes of UTF-8."""
    max_result_bytes: int = count_field(64 * 1024, minimum=4)
    """Bound on the canonical JSON of a run's result, in bytes of UTF-8."""
    quarantine_after: int = count_field(2, minimum=1)
    """Interruptions after which ``resume`` needs ``override=True`` (design §6.10)."""
    finished_runs_limit: int = count_field(1000, minimum=1)
    """The most runs one ``finished_runs`` page holds (its ``limit``, design §6.18)."""
    commit_linger: float = duration_field(0.0, maximum=0.010)
    """Seconds (trio clock) the ledger writer waits to grow a batch; <= 0.010 (§6.10)."""
    max_pending_rows: int = count_field(50_000, minimum=1)
    """Staged, uncommitted ledger rows above which ``wait_writable`` blocks and progress
    is coalesced to the newest report per run (design §6.19)."""
    synchronous: str = attrs.field(
        default="FULL", validator=attrs.validators.in_(("FULL", "NORMAL", "EXTRA"))
    )
    """SQLite ``PRAGMA synchronous``: FULL survives power loss, NORMAL a process crash."""
    close_timeout: float = duration_field(5.0, allow_zero=False)
    """Seconds (trio clock) allowed to flush and close the ledger when the log closes."""
    retry_after_min: float = duration_field(0.05, allow_zero=False)
    """Seconds: the smallest ``retry_after`` a refusal carries (design §6.16)."""
    retry_after_max: float = duration_field(5.0, allow_zero=False)
    """Seconds: the largest ``retry_after`` a refusal carries (design §6.16)."""
    ledger_retry_min: float = duration_field(0.05, allow_zero=False)
    """Seconds (trio clock) before the first retry of a failed commit (design §6.13)."""
    ledger_retry_max: float = duration_field(2.0, allow_zero=False)
    """Seconds (trio clock): the longest wait between retries of a failed commit."""
    ledger_read_timeout: float = duration_field(5.0, allow_zero=False)
    """Seconds (trio clock) a ledger read (``status``, ``watch``, a request look-up, a
    ``finished_runs`` page) may wait, for the commit before it and for SQLite; then
    ``ledger_unavailable`` (design §6.19)."""
    ledger_statement_timeout: float = duration_field(5.0, allow_zero=False)
    """Seconds a PostgreSQL ledger's server lets one statement run (its
    ``statement_timeout``); also bounds each connection attempt (docs/cluster.rst)."""
    commit_stall_timeout: float = duration_field(5.0, allow_zero=False)
    """Seconds (trio clock) a commit may run before the ledger is declared unavailable
    (``cause`` ``commit stalled``) until it ends (design §6.19)."""
    request_timeout: float = duration_field(5.0, allow_zero=False)
    """Seconds (trio clock) the event-log actor works on one request that waits (for
    durability or a ledger read); then it answers ``ledger_unavailable`` (§6.19)."""
    writable_timeout: float = duration_field(1.0, allow_zero=False)
    """Seconds (trio clock) the event-log actor holds its mailbox while more than
    ``max_pending_rows`` rows are staged; then a submit is refused with a ``admission_full``
    receipt carrying ``retry_after`` (design §6.19)."""
    run_timeout: float = duration_field(300.0, allow_zero=False)
    """Seconds (trio clock) a built-in runner may run; then it is cancelled and its run
    finished ``NOT_RUN`` with a ``deadline_exceeded`` error (design §6.19)."""

    cluster: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    """Share the ledger with other nodes (docs/cluster.rst): a ``postgresql://``
    ``ledger_path`` whose admission, event order and runs are decided in the database."""
    cluster_poll: float = duration_field(0.1, allow_zero=False, maximum=0.1)
    """Seconds between a cluster node's reads of the ledger's head when no ``NOTIFY``
    wakes it (at most 0.1; docs/cluster.rst)."""
    cluster_lease: float = duration_field(10.0, allow_zero=False, maximum=30.0)
    """Seconds a cluster node's lease lasts, judged by the database's clock: renewed
    every quarter of it; a node that stops renewing has its running runs held by the
    others within about this long, and fences itself after as long without renewing
    (docs/cluster.rst)."""

    def __attrs_post_init__(self) -> None:
        if self.cluster and not (
            self.ledger_path is not None
            and self.ledger_path.startswith(("postgresql://", "postgres://"))
        ):
            raise ValueError("cluster=True needs a postgresql:// ledger_path (docs/cluster.rst)")
        for low, high in (
            ("retry_after_min", "retry_after_max"),
            ("ledger_retry_min", "ledger_retry_max"),
        ):
            if getattr(self, high) < getattr(self, low):
                raise ValueError(f"{high} must be >= {low} ({getattr(self, low):g} s)")
