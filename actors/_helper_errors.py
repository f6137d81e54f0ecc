"""The errors of helper processes and the jobs they run (design §3).

Defined here and re-exported by :mod:`actors.errors`, like every error of the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from protocol.errors import ActorError

if TYPE_CHECKING:
    from protocol.errors import Category
    from protocol.records import ErrorRecord

__all__ = [
    "HelperError",
    "HelperStartupFailed",
    "HelperExited",
    "HelperLost",
    "ReplyTimeout",
    "ForcedTermination",
    "JobCancelled",
    "JobFailed",
    "PoolClosed",
    "PoolFailed",
    "PoolBusy",
    "PoolRestarting",
    "JobStalled",
    "SignalFailed",
    "FunctionNotImportable",
    "NotPicklable",
    "FunctionRaised",
]


class HelperError(ActorError):
    """Base for failures of a helper process or of a job it ran (design §3)."""

    code = "helper_error"
    # Annotated so subclasses may pick another category (else mypy infers the literal).
    category: ClassVar[Category] = "transient"


class HelperStartupFailed(HelperError):
    """The helper did not reply *ready* within the startup timeout, or replied wrongly.

    The helper was killed. Unlike :class:`HelperExited`, the process was alive.
    """

    code = "helper_startup_failed"


class HelperExited(HelperError):
    """The helper process exited unexpectedly (crash, EOF on its reply pipe) (design §3.7).

    ``details`` has ``exit_code`` (negative for a signal, as in ``Popen.returncode``) and
    ``signal`` (the signal name, or None).
    """

    code = "helper_exited"


class HelperLost(HelperExited):
    """The link to a helper on another host died, so its fate is unknown (design §3.16).

    Raised by the helper pool (for a job, or a start, of a helper with a ``host``) when
    ``ssh`` ended without the warden's final ``exit`` frame, or when no frame came back
    from the warden for ``timeouts.heartbeat`` seconds (the parent then ends ``ssh``
    itself). Unlike :class:`HelperExited`, nobody saw the helper exit: the warden
    kills its tree by itself once the link is gone (§3.16). Transient, like its parent
    class: a retry policy may run the job again on a new incarnation. ``details`` has
    ``exit_code`` and ``signal`` (None: unknown) and ``cause``.
    """

    code = "helper_lost"


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

    code = "job_cancelled"
    category = "stale"


class JobFailed(HelperError):
    """The helper's handler reported an error; ``record`` holds it as data.

    ``code`` and ``category`` of the instance are the remote record's, so callers can
    classify it (design §1.5, §4.6). ``data`` holds the bytes the handler sent with
    it (``JobError(..., data=...)``, the reply's binary part, design §2.3): a read-only
    :class:`memoryview`, or None. They are not part of ``record``, which is what crosses
    a boundary.
    """

    code = "job_failed"

    def __init__(
        self, record: ErrorRecord, *, data: bytes | memoryview | None = None, **details: Any
    ) -> None:
        super().__init__(record.message, **details)
        self.record = record
        self.code = record.code  # type: ignore[misc]
        self.category = record.category  # type: ignore[misc]
        self.data = data


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
    The renderer raises it too, for a render abandoned because it showed no activity
    for ``abandon_after`` seconds after its deadline (design §5.3).
    """

    code = "job_stalled"


class SignalFailed(HelperError):
    """A signal of the escalation ladder could not be delivered (design §3.5, §3.11).

    ``details`` has ``pid``, ``signal`` and ``errno`` (e.g. ``EPERM``). Nothing is
    known to have stopped the helper, so unlike :class:`ForcedTermination` the job did
    not end by force and unlike :class:`JobCancelled` the helper did not agree: its slot
    stays quarantined until the process is gone.
    """

    code = "signal_failed"


class HelperAbandoned(HelperError):
    """The pool's close had to leave a helper process alive (design §3.5, §3.8).

    Raised by :meth:`HelperPool.aclose <actors.HelperPool.aclose>` (and by leaving
    ``open_helper_pool`` when its block raised nothing else) after the close has done
    everything else: its signals were refused again (``EPERM``) until the close's bound
    ran out, or it outlived SIGKILL. ``details["helpers"]`` lists each one: ``helper``,
    ``pid``, ``signal`` and ``errno``/``error`` of the refused signal (when one was),
    ``escaped`` (pids of its tree that outlived SIGKILL). Unlike :class:`SignalFailed`,
    which ends one job and keeps the slot quarantined, this is the pool's last word:
    nothing of ours watches those processes any more. Permanent: closing again cannot
    help; they need an operator.
    """

    code = "helper_abandoned"
    category = "permanent"


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
    Unlike :class:`JobFailed` (a named handler's error record), the helper
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
