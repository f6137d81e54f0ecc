"""The event log's errors: admission, cursors, runs, the ledger (design §6, §7.1).

Defined here and re-exported by :mod:`actors.errors`, like every error of the runtime;
:class:`ServerShuttingDown` is the example servers' refusal of new runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from protocol.errors import ActorError

if TYPE_CHECKING:
    from protocol.errors import Category

__all__ = [
    "UnsupportedOperation",
    "InvalidCommand",
    "RequestConflict",
    "AdmissionFull",
    "AlreadyDecided",
    "CursorExpired",
    "RemoteToggleDenied",
    "UnknownRun",
    "RunQuarantined",
    "LedgerError",
    "LedgerCorrupt",
    "LedgerUnavailable",
    "LedgerVersionUnsupported",
    "ServerShuttingDown",
]


class UnsupportedOperation(ActorError):
    """``submit`` named an operation the event log does not know (design §6.2)."""

    code = "unsupported_operation"
    category = "permanent"


class InvalidCommand(ActorError):
    """Arguments are not a mapping, or have fields outside the schema (design §6.2).

    ``details`` has ``fields``: the offending field names.
    """

    code = "invalid_command"
    category = "permanent"


class RequestConflict(ActorError):
    """A ``request_id`` was reused with different content (design §6.3)."""

    code = "request_conflict"
    category = "permanent"


class AdmissionFull(ActorError):
    """Admission refused: ``max_inflight`` runs are queued or running (design §6.5).

    ``details`` has ``depth`` and ``bound``. Retryable, unlike :class:`RequestConflict`.
    """

    code = "admission_full"
    category = "transient"


class AlreadyDecided(ActorError):
    """Progress or a verdict arrived for a run already finished or cancelled (design §6.6)."""

    code = "already_decided"
    category = "stale"


class CursorExpired(ActorError):
    """A watch cursor is below the retained floor or beyond the head (design §6.8).

    ``details`` has ``resume_from``: the cursor to resubscribe from. Never a silent gap.
    """

    code = "cursor_expired"
    category = "stale"


class RemoteToggleDenied(ActorError):
    """A remote caller tried to enable or disable a port; only local callers may (§6.9)."""

    code = "remote_toggle_denied"
    category = "permanent"


class UnknownRun(ActorError):
    """No run (or request) has the given id."""

    code = "unknown_run"
    category = "permanent"


class RunQuarantined(ActorError):
    """The run was interrupted twice; resuming it needs an explicit override (design §6.10)."""

    code = "run_quarantined"
    category = "permanent"


class LedgerError(ActorError):
    """The ledger (SQLite or PostgreSQL) could not be opened or written (design §6.10)."""

    code = "ledger_error"
    # Annotated so LedgerUnavailable may be transient (else mypy infers the literal).
    category: ClassVar[Category] = "permanent"


class LedgerCorrupt(LedgerError):
    """The ledger holds something the event log never wrote (design §6.11, §6.12).

    At boot (the file is refused and left untouched): not a readable SQLite database,
    failing its integrity check, a damaged or foreign write-ahead log, or a bad or
    missing row. At run time: a row read back for one request is bad; that request gets
    this error and everything else keeps working. ``details`` names ``table``, ``key``
    and ``column`` for a row (``frame`` for the write-ahead log). Unlike
    :class:`LedgerUnavailable`, retrying will not help.
    """

    code = "ledger_corrupt"


class LedgerUnavailable(LedgerError):
    """The ledger cannot commit now: disk full, an I/O error, locked (design §6.13).

    Raised by the event log for a new submission or resume while its commits fail, and
    to a caller waiting for a decision that is not durable yet (the decision stands and
    is committed once the ledger recovers: retry with the same request id). ``details``
    has ``retry_after`` (seconds) and ``cause`` (the engine's error). Unlike
    :class:`LedgerCorrupt` it is transient: status and watch keep answering from what
    is durable, and admission resumes by itself once a commit succeeds.
    """

    code = "ledger_unavailable"
    category = "transient"


class LedgerVersionUnsupported(LedgerError):
    """The ledger's schema version is newer than this code knows; the file is untouched."""

    code = "ledger_version_unsupported"


class LedgerInUse(LedgerError):
    """Another event log writes to this PostgreSQL ledger (docs/cluster.rst).

    Raised by the PostgreSQL ledger at start when another process holds the ledger's
    writer lock (an advisory lock its writer connection holds): the start is refused and
    nothing was written. A running log whose connection was cut and that finds the lock
    taken when it reconnects cannot commit: its commits fail as an outage
    (:class:`LedgerUnavailable`, with this error's message as ``cause``) until the other
    holder lets go, so two logs never write one ledger at once. Unlike
    :class:`LedgerUnavailable`, at start it refuses instead of waiting; ``details`` has
    ``cause``.
    """

    code = "ledger_in_use"
    category = "transient"


class ServerShuttingDown(ActorError):
    """A server's front door refuses new work: it is shutting down (design §7.1).

    Raised by the example servers' websocket front door for ``submit``/``resume`` once
    SIGINT/SIGTERM started the graceful shutdown. Unlike :class:`ActorStopped` (the actor
    is already gone), the server still answers ``status``/``watch`` until it closes; a
    retry against the restarted server may succeed.
    """

    code = "server_shutting_down"
    category = "transient"
