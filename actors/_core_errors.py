"""The actor core's errors: mailboxes, asks, lifecycles, supervisors (design §1).

Defined here and re-exported by :mod:`actors.errors`, like every error of the runtime.
"""

from __future__ import annotations

from protocol.errors import ActorError

__all__ = [
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
    "MaxChildren",
]


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


class MaxChildren(ActorError):
    """A dynamic supervisor already runs ``max_children`` children (design §1.10).

    Raised by ``DynamicSupervisorRef.start_child``; Elixir's ``:max_children``.
    Retryable once a child ended, unlike :class:`ChildRunning`.
    """

    code = "max_children"
    category = "transient"
