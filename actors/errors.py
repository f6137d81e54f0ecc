"""The runtime's errors: one hierarchy rooted at :class:`ActorError` (design §1.5).

Every class has a class-level ``code`` (stable, snake_case) and ``category``
(``transient``, ``permanent`` or ``stale``). The protocol's errors share the root; they
are defined in :mod:`protocol.errors` and re-exported here.

Errors that cross an actor or process boundary travel as
:class:`protocol.records.ErrorRecord` (see :meth:`ActorError.to_record` and
:func:`error_from_record`), never as exception objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from protocol.errors import (
    ActorError,
    FrameTooLarge,
    InvalidMessage,
    MessageTooLarge,
    ProtocolError,
    ProtocolViolation,
    TruncatedFrame,
    UnknownMessageType,
)

if TYPE_CHECKING:
    from protocol.errors import Category
    from protocol.records import ErrorRecord

__all__ = [
    "ActorError",
    "ErrorRecord",
    "ProtocolError",
    "ProtocolViolation",
    "FrameTooLarge",
    "TruncatedFrame",
    "InvalidMessage",
    "MessageTooLarge",
    "UnknownMessageType",
    "ActorStopped",
    "ActorCrashed",
    "MailboxFull",
    "AskTimeout",
    "InvalidTransition",
    "RestartIntensityExceeded",
    "ActorRestarting",
    "ChildNotFound",
    "ChildRunning",
    "ChildAlreadyPresent",
    "ChildStartFailed",
    "TooManyChildren",
    "HelperError",
    "HelperStartupError",
    "HelperExitedError",
    "ReplyTimeout",
    "ForcedTermination",
    "JobCancelled",
    "HelperJobFailed",
    "PoolClosed",
    "PoolFailed",
    "PoolBusy",
    "PoolRestarting",
    "JobStalled",
    "SignalFailed",
    "FunctionNotImportable",
    "NotPicklable",
    "FunctionRaised",
    "DeadlineExceeded",
    "StaleResult",
    "RenderError",
    "PayloadInvalid",
    "SourceError",
    "SourceNotReady",
    "WorkCancelled",
    "ScheduleRejected",
    "UnsupportedOperation",
    "InvalidCommand",
    "RequestConflict",
    "PoolFull",
    "AlreadyDecided",
    "CursorExpired",
    "RemoteToggleDenied",
    "UnknownRun",
    "RunQuarantined",
    "LedgerError",
    "LedgerCorrupt",
    "LedgerVersionError",
    "LedgerUnavailable",
    "ServerShuttingDown",
    "error_from_record",
]


# --- actor core (design §1) -------------------------------------------------------------


class ActorStopped(ActorError):
    """The actor is stopping or stopped: its mailbox takes no more messages (design §1.2).

    Raised at once by ``send``/``try_send``/``ask`` on a stopped actor, and to an asker
    whose actor stopped before replying. Unlike :class:`MailboxFull`, waiting will not help.
    """

    code = "actor_stopped"
    category = "permanent"


class ActorCrashed(ActorError):
    """The actor's handler raised an unexpected exception while this ask was pending.

    The asker sees this instead of a reply; the actor itself fails to its parent
    (and a supervisor may restart it, design §1.4).
    """

    code = "actor_crashed"
    category = "transient"


class MailboxFull(ActorError):
    """``try_send`` found the mailbox at capacity (design §1.2).

    Retryable: unlike :class:`ActorStopped`, space may free up; ``send`` would wait for it.
    """

    code = "mailbox_full"
    category = "transient"


class AskTimeout(ActorError):
    """No reply arrived within the ask's timeout (design §1.2).

    Raised by ``ActorRef.ask``; the late reply, if any, is dropped (fenced by ask id).
    Distinct from ``trio.TooSlowError``, which we never reuse for our meanings.
    """

    code = "ask_timeout"
    category = "transient"


class InvalidTransition(ActorError):
    """A lifecycle or helper-job state machine was asked for a move its table forbids.

    Raised by the ``process_event`` tables in ``actors._core._lifecycle``; it means a bug or
    a peer out of protocol, never a user error.
    """

    code = "invalid_transition"
    category = "permanent"


class RestartIntensityExceeded(ActorError):
    """More than ``max_restarts`` restarts within ``period`` seconds (design §1.4, §3.7).

    Raised by a supervisor to its own parent after it stopped its children in reverse
    start order; by the helper pool, it marks the pool failed until restarted.
    """

    code = "restart_intensity_exceeded"
    category = "permanent"


class ActorRestarting(ActorError):
    """A supervised child is being restarted and no incarnation took the message in time.

    Raised by a :class:`~actors.LiveRef` (design §1.9) when the child's supervisor
    means to restart it but no new incarnation was running before the caller's bound
    (the ask's timeout, or the supervisor's ``restart_wait`` for a send), by
    ``try_send`` while the child restarts, and to an asker whose message the old
    incarnation took but did not answer before it ended. Retryable, unlike
    :class:`ActorStopped`, which says the child is gone for good.
    """

    code = "actor_restarting"
    category = "transient"


class ChildNotFound(ActorError, KeyError):
    """The supervisor has no child with this id (design §1.10).

    Raised by ``SupervisorRef.child``, ``terminate_child``, ``restart_child``,
    ``delete_child`` and ``restart_count``; a :class:`KeyError` too. Unlike
    :class:`ActorStopped`, the id itself is unknown (never added, deleted, or a
    temporary child that ended).
    """

    code = "child_not_found"
    category = "permanent"

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ChildRunning(ActorError):
    """The child is running, so the operation does not apply (design §1.10).

    Raised by ``start_child`` for an id whose child runs (OTP's ``already_started``),
    and by ``restart_child``/``delete_child`` on a running child (OTP's ``running``).
    Unlike :class:`ChildAlreadyPresent`, the child is alive.
    """

    code = "child_running"
    category = "permanent"


class ChildAlreadyPresent(ActorError):
    """``start_child`` named an id whose child exists but is not running (design §1.10).

    OTP's ``already_present``: use ``restart_child`` to start it again, or
    ``delete_child`` first. Unlike :class:`ChildRunning`, the child is not alive.
    """

    code = "child_already_present"
    category = "permanent"


class ChildStartFailed(ActorError):
    """A child failed its first start (design §1.10).

    Raised by ``Supervisor.run`` (through ``nursery.start``) when one of its initial
    children fails to start, and by ``start_child``/``restart_child``; ``details``
    names the ``child`` and the ``reason`` (the error's code or type), and the
    original error is the ``__cause__``. A failed *restart* is not this error: it
    counts toward the restart intensity and is retried (design §1.4).
    """

    code = "child_start_failed"
    category = "transient"

    @property
    def root_cause(self) -> BaseException:
        """The error that failed the start, through nested supervisors' starts."""
        error: BaseException = self
        while isinstance(error, ChildStartFailed) and error.__cause__ is not None:
            error = error.__cause__
        return error


class TooManyChildren(ActorError):
    """A dynamic supervisor already runs ``max_children`` children (design §1.10).

    Raised by ``DynamicSupervisorRef.start_child``; Elixir's ``:max_children``.
    Retryable once a child ended, unlike :class:`ChildRunning`.
    """

    code = "max_children"
    category = "transient"


# --- helper processes (design §3) -----------------------------------------------------


class HelperError(ActorError):
    """Base for failures of a helper process or of a job it ran (design §3)."""

    code = "helper_error"
    # Annotated so subclasses may pick another category (else mypy infers the literal).
    category: ClassVar[Category] = "transient"


class HelperStartupError(HelperError):
    """The helper did not reply *ready* within the startup timeout, or replied wrongly.

    The helper was killed. Unlike :class:`HelperExitedError`, the process was alive.
    """

    code = "helper_startup_failed"


class HelperExitedError(HelperError):
    """The helper process exited unexpectedly (crash, EOF on its reply pipe) (design §3.7).

    ``details`` has ``exit_code`` (negative for a signal, as in ``Popen.returncode``) and
    ``signal`` (the signal name, or None).
    """

    code = "helper_exited"


class ReplyTimeout(HelperError):
    """The helper did not reply within the reply timeout; it was stopped (design §3.6).

    If SIGKILL was needed to stop it, :class:`ForcedTermination` is raised instead.
    """

    code = "reply_timeout"


class ForcedTermination(HelperError):
    """The job ended because its helper had to be killed (design §3.5 steps 2-4).

    ``details`` has ``escalation``: the last step used (``sigterm``, ``sigkill`` or
    ``quarantined``) and ``parent_timeout`` (True when the reply deadline started it).
    """

    code = "forced_termination"


class JobCancelled(HelperError):
    """The job was cancelled by its caller and the helper acknowledged (design §3.5 step 1).

    Category ``stale``: the result is no longer wanted.
    """

    code = "cancelled"
    category = "stale"


class HelperJobFailed(HelperError):
    """The helper's handler reported an error; ``record`` holds it as data.

    ``code`` and ``category`` of the instance are the remote record's, so callers can
    classify it (design §1.5, §4.6).
    """

    code = "job_failed"

    def __init__(self, record: ErrorRecord, **details: Any) -> None:
        super().__init__(record.message, **details)
        self.record = record
        self.code = record.code  # type: ignore[misc]
        self.category = record.category  # type: ignore[misc]


class PoolClosed(HelperError):
    """The helper pool is closing or closed; no new job is accepted."""

    code = "pool_closed"
    category = "permanent"


class PoolFailed(HelperError):
    """Restart intensity was exceeded; the pool refuses jobs until restarted (design §3.7)."""

    code = "pool_failed"
    category = "permanent"


class PoolBusy(HelperError):
    """No helper of the pool became free within the acquire timeout (design §3.1).

    Raised by ``HelperPool.run_job`` before anything was sent to a helper. Transient,
    unlike :class:`PoolFailed`: a helper may be free on a retry.
    """

    code = "pool_busy"
    category = "transient"


class PoolRestarting(HelperError):
    """The pool exceeded its restart intensity and is being restarted (design §1.7, §3.7).

    Raised to jobs cut off by, or arriving during, an automatic recovery: the pool's
    supervisor (the runtime's tree, or the pool actor's own ``on_failure="restart"``)
    restarts it after a capped backoff, so a later retry may succeed; ``details`` may
    have ``retry_after`` (seconds). Unlike :class:`PoolFailed`, nobody needs to call
    ``restart()``.
    """

    code = "pool_restarting"
    category = "transient"


class JobStalled(HelperError):
    """The job sent no progress report within its ``stall`` timeout (design §3.12).

    The helper was stopped through the ladder (``details["escalation"]``) and
    ``details["stall"]`` is the timeout in seconds. Unlike :class:`ReplyTimeout`, which
    bounds the whole job, this bounds the silence between two progress reports, as the
    heartbeat timeout of a Temporal activity does. Transient: a retry may make progress.
    """

    code = "stalled"


class SignalFailed(HelperError):
    """A signal of the escalation ladder could not be delivered (design §3.5, §3.11).

    ``details`` has ``pid``, ``signal`` and ``errno`` (e.g. ``EPERM``). Nothing is
    known to have stopped the helper, so unlike :class:`ForcedTermination` the job did
    not end by force and unlike :class:`JobCancelled` the helper did not agree: its slot
    stays quarantined until the process is gone.
    """

    code = "signal_failed"


class FunctionNotImportable(HelperError):
    """``run_sync``/``map`` cannot send this function by reference (design §3.14).

    Raised in the parent before anything is sent (a lambda, a function defined inside
    another, one defined in ``__main__``, a bound method of an object no import reaches,
    something not callable), or when the helper could not import it. Unlike
    :class:`FunctionRaised`, the function never ran. ``details["function"]`` names it;
    ``details["reason"]`` is ``lambda``, ``local``, ``main``, ``bound_method``,
    ``no_name``, ``not_callable``, ``unresolved``, ``other_object`` or
    ``not_importable_in_helper``.
    """

    code = "function_not_importable"
    category = "permanent"


class NotPicklable(HelperError):
    """The arguments or the result of a ``run_sync`` call could not be pickled (§3.14).

    ``details["what"]`` is ``"arguments"`` (raised in the parent before anything is sent,
    or when the helper could not unpickle them) or ``"result"`` (the helper could not
    pickle it, or the parent could not unpickle it); ``details["function"]`` names the
    function. Unlike :class:`FunctionRaised`, the function's own code did not fail.
    """

    code = "not_picklable"
    category = "permanent"


class FunctionRaised(HelperError):
    """The function of a ``run_sync`` call raised in the helper (design §3.14).

    Carries the remote exception as text, in the attributes ``remote_type`` (e.g.
    ``"ValueError"`` or ``"my_pkg.errors.BadInput"``), ``remote_message`` and
    ``remote_traceback``; when the exception could be pickled in the helper and
    unpickled here, the original is this error's ``__cause__``. ``code`` and
    ``category`` are the exception's own when it carries valid ones (as
    :class:`actors.helper.JobError` does), else ``function_raised``/``permanent``.
    Unlike :class:`HelperJobFailed` (a named handler's error record), the helper
    process is fine and served the call to its end.
    """

    code = "function_raised"
    category: ClassVar[Category] = "permanent"

    def __init__(
        self,
        message: str,
        *,
        remote_type: str,
        remote_message: str,
        remote_traceback: str,
        code: str | None = None,
        category: Category | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message, remote_type=remote_type, **details)
        self.remote_type = remote_type
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        if code is not None:
            self.code = code  # type: ignore[misc]
        if category is not None:
            self.category = category  # type: ignore[misc]  # the remote exception's own


# --- scheduler and renderer (design §4, §5) -----------------------------------------------


class DeadlineExceeded(ActorError):
    """A job passed its absolute deadline (design §4.7); a transient failure."""

    code = "deadline_exceeded"
    category = "transient"


class StaleResult(ActorError):
    """A completion no longer matches the current generation, GUID or revision (design §4.8).

    Never published; the scheduler drops it silently.
    """

    code = "stale_result"
    category = "stale"


class RenderError(ActorError):
    """The renderer could not draw the payload from the observation (design §5.1)."""

    code = "render_failed"
    category = "permanent"


class PayloadInvalid(RenderError):
    """A rendered payload failed validation (type or size bounds) (design §5.1).

    Unlike :class:`RenderError`, drawing succeeded but the result may not be cached.
    """

    code = "payload_invalid"


class SourceError(ActorError):
    """A data source could not be read: missing, damaged, or not in the format expected."""

    code = "source_unreadable"
    category = "permanent"


class SourceNotReady(ActorError):
    """The source is still being written (a progressive source, design §4.5).

    Transient: the scheduler parks the result and re-polls.
    """

    code = "source_not_ready"
    category = "transient"


class WorkCancelled(ActorError):
    """A client cancelled the run this work was for (design §6.7); raised by an executor.

    Permanent: the scheduler marks the work failed and does not retry it until the
    source changes. Unlike :class:`JobCancelled` (``stale``: the work is still wanted
    and queued again), nobody wants this result any more.
    """

    code = "work_cancelled"
    category = "permanent"


class ScheduleRejected(ActorError, ValueError):
    """The scheduler refused a request; its state is unchanged (design §4.2, §4.8).

    Raised by the scheduler core (``set_priority`` or ``source_changed`` naming an
    unknown run id, a ``reconcile`` that reorders or removes runs) and passed to the
    asker by the scheduler actor. A :class:`ValueError` too, as design §4.2/§4.8 say.
    Unlike :class:`UnknownRun` (run ids of the event log), it concerns the
    scheduler's run table.
    """

    code = "schedule_rejected"
    category = "permanent"


# --- event log (design §6) --------------------------------------------------------------


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


class PoolFull(ActorError):
    """Admission refused: ``max_inflight`` runs are queued or running (design §6.5).

    ``details`` has ``depth`` and ``bound``. Retryable, unlike :class:`RequestConflict`.
    """

    code = "pool_full"
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
    """The SQLite ledger could not be opened or written (design §6.10)."""

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
    has ``retry_after`` (seconds) and ``cause`` (SQLite's error). Unlike
    :class:`LedgerCorrupt` it is transient: status and watch keep answering from what
    is durable, and admission resumes by itself once a commit succeeds.
    """

    code = "ledger_unavailable"
    category = "transient"


class LedgerVersionError(LedgerError):
    """The ledger's schema version is newer than this code knows; the file is untouched."""

    code = "ledger_version_unsupported"


class ServerShuttingDown(ActorError):
    """A server's front door refuses new work: it is shutting down (design §7.1).

    Raised by the example servers' websocket front door for ``submit``/``resume`` once
    SIGINT/SIGTERM started the graceful shutdown. Unlike :class:`ActorStopped` (the actor
    is already gone), the server still answers ``status``/``watch`` until it closes; a
    retry against the restarted server may succeed.
    """

    code = "server_shutting_down"
    category = "transient"


def __getattr__(name: str) -> Any:
    # ErrorRecord (attrs) is loaded on first use, so this module stays stdlib-only and
    # a helper child can raise these errors without paying for attrs at start-up.
    if name == "ErrorRecord":
        from protocol.records import ErrorRecord

        return ErrorRecord
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _all_error_classes() -> dict[str, type[ActorError]]:
    found: dict[str, type[ActorError]] = {}
    pending: list[type[ActorError]] = [ActorError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    return found


def error_from_record(record: ErrorRecord) -> ActorError:
    """Rebuild an exception from a record that crossed a boundary.

    A known ``code`` gives its class; an unknown one gives :class:`HelperJobFailed`
    carrying the record, so ``code`` and ``category`` are kept either way.
    """
    cls = _all_error_classes().get(record.code)
    if cls is None or cls.category != record.category or cls is HelperJobFailed:
        return HelperJobFailed(record)
    return cls(record.message)
