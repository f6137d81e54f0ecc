"""One run's mutable state, private to the event log (design §6.6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._types import TERMINAL_STATES, RunStatus

if TYPE_CHECKING:
    from collections import deque
    from collections.abc import Callable

    import trio

    from ._types import RunState

__all__ = ["CoalesceKey", "Run"]

#: ``(operation, canonical arguments JSON, revision)``: equal requests join (§6.4).
CoalesceKey = tuple[str, str, int]


class Run:
    """One run's mutable state; the runs part owns every instance."""

    __slots__ = (
        "arguments",
        "arguments_json",
        "buffered",
        "cancelled_by",
        "detached",
        "error",
        "error_json",
        "finished_at",
        "interruptions",
        "key",
        "on_cancel",
        "operation",
        "progress",
        "queued_seq",
        "request_id",
        "result",
        "result_json",
        "revision",
        "run_id",
        "scope",
        "snapshot_id",
        "state",
        "verdict",
        "waiters",
    )

    # Set from ``**fields`` in ``__init__`` (a fresh run or a ``runs`` row).
    run_id: int
    request_id: str
    operation: str
    arguments: dict[str, Any]
    arguments_json: str
    revision: int
    snapshot_id: str

    def __init__(self, **fields: Any) -> None:
        self.state: RunState = "queued"
        self.verdict: str | None = None
        self.result: Any = None
        self.result_json: str | None = None
        self.error: dict[str, str] | None = None
        self.error_json: str | None = None
        self.cancelled_by: str | None = None
        self.progress: float | None = None
        self.interruptions = 0
        #: When it was decided: seconds since the epoch (wall clock), or None.
        self.finished_at: float | None = None
        self.queued_seq = 0
        self.buffered: deque[tuple[float, str | None]] | None = None
        self.scope: trio.CancelScope | None = None
        self.on_cancel: Callable[[], object] | None = None
        self.key: CoalesceKey | None = None
        #: The requests waiting on the run, and who submitted each (design §6.14).
        self.waiters: dict[str, str | None] = {}
        #: The requests that left it, and who detached each.
        self.detached: dict[str, str] = {}
        for name, value in fields.items():
            setattr(self, name, value)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def status(self, quarantine_after: int, waiters: int | None = None) -> RunStatus:
        return RunStatus(
            run_id=self.run_id,
            state=self.state,
            operation=self.operation,
            arguments=self.arguments,
            revision=self.revision,
            snapshot_id=self.snapshot_id,
            request_id=self.request_id,
            verdict=self.verdict,
            result=self.result,
            error=self.error,
            cancelled_by=self.cancelled_by,
            progress=self.progress,
            interruptions=self.interruptions,
            quarantined=self.interruptions >= quarantine_after,
            waiters=len(self.waiters) if waiters is None else waiters,
        )

    def row(self) -> tuple[Any, ...]:
        """The ``runs`` row, in ``RUN_COLUMNS`` order; JSON columns use the cached text."""
        return (
            self.run_id,
            self.request_id,
            self.operation,
            self.arguments_json,
            self.revision,
            self.snapshot_id,
            self.state,
            self.verdict,
            self.result_json,
            self.error_json,
            self.cancelled_by,
            self.progress,
            self.interruptions,
            self.finished_at,
        )
