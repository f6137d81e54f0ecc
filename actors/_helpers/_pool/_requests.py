"""The pool actor's requests, each declared once (design §3, §1.7).

A request is its message class (an attrs class with its fields) and one row of
:data:`POOL_REQUESTS`: what it is answered with, and which :class:`~actors.PoolHandle`
method sends it. Everything else comes from that row: the pool actor dispatches a
message to its method ``_on_<request in snake_case>`` (one table lookup,
:func:`handler_name`), and the handle's methods that send a request are made by
:func:`ask_method` and :func:`send_method` from the row (their signature from the
message's fields, their default timeout and their docstring).
``tests/actors/test_pool_requests.py`` reads the table, the classes and the dispatch and
fails if a request is missing from one or spelled twice.
"""

from __future__ import annotations

import inspect
import re
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

import attrs

from protocol.envelope import MAX_OPERATION_LENGTH

from ..._core import check_hashable, show_value, validate_duration
from ._config import PoolSnapshot, PoolStatistics

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Hashable

    from ..._core import ActorRef
    from .._process import ProgressCallback

__all__ = [
    "POOL_REQUESTS",
    "REQUESTS",
    "CancelJob",
    "GetLease",
    "GetSnapshot",
    "GetPoolStatistics",
    "PoolRequest",
    "RestartPool",
    "RetireIdle",
    "RunJob",
    "ask_method",
    "handler_name",
    "send_method",
]

R = TypeVar("R")
_NONE: Final = type(None)


def _check_operation(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_OPERATION_LENGTH:
        raise ValueError(
            f"operation must be a str of 1..{MAX_OPERATION_LENGTH} characters, "
            f"got {show_value(value)}"
        )


def _optional_stall(value: object) -> float | None:
    return None if value is None else validate_duration("stall", value, allow_zero=False)


@attrs.frozen(kw_only=True)
class RunJob:
    """Ask: run one job on a helper; the answer is its result (design §3.4)."""

    job_id: Hashable = attrs.field(validator=check_hashable)
    """Key for :class:`CancelJob`; unique among the pool actor's running jobs."""
    operation: str = attrs.field(validator=_check_operation)
    """The handler's name, 1..128 characters."""
    payload: Any = None
    """JSON-compatible arguments."""
    on_progress: ProgressCallback | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.is_callable())
    )
    """``on_progress(fraction, note)`` for the job's progress reports, or None. Called
    in the job's task in the pool actor's nursery (never in ``handle``): sync, must not
    block; an exception from it is logged and ignored (design §3.9)."""
    stall: float | None = attrs.field(default=None, converter=_optional_stall)
    """Seconds the job may go without a progress report (design §3.12), or None. Only
    the job's progress frames count as activity, and its stderr output when the spec's
    ``stderr_is_activity`` is set."""


@attrs.frozen(kw_only=True)
class CancelJob:
    """Send (or ask, answered with a bool): cancel a running job (design §3.5).

    For a job of a :class:`RunJob` message; a job of :meth:`PoolHandle.run_job
    <actors.PoolHandle.run_job>` is cancelled by cancelling its caller.
    """

    job_id: Hashable
    """The :attr:`RunJob.job_id` to cancel; an unknown or finished id is ignored."""


@attrs.frozen(kw_only=True)
class GetSnapshot:
    """Ask: the pool's liveness snapshot (:class:`~actors.PoolSnapshot`, §3.8)."""


@attrs.frozen(kw_only=True)
class GetPoolStatistics:
    """Ask: the pool's counters (:class:`~actors.PoolStatistics`)."""


@attrs.frozen(kw_only=True)
class RestartPool:
    """Ask: clear a failed pool and start fresh incarnations (design §3.7)."""


@attrs.frozen(kw_only=True)
class RetireIdle:
    """Send (or ask, answered with None once done): take no new job and shut the idle
    helpers down now, while running jobs go on (design §3.8).

    A server sends it as its shutdown starts, so that the idle helpers' shutdown runs
    side by side with the grace its running work gets, not after it. Jobs sent after it
    fail with ``PoolClosed``; the pool closes when the actor stops.
    """


@attrs.frozen(kw_only=True)
class GetLease:
    """Ask (in-process only): the actor's ``PoolLease``, for a handle's direct job path."""


@attrs.frozen(kw_only=True)
class PoolRequest(Generic[R]):
    """One request of the pool actor: its message class and how it is sent and answered."""

    message: type[Any]
    """The message class (its fields are the request's)."""
    answer: type[R]
    """The type of the answer (``NoneType`` for none); a client method returns it."""
    reply: str
    """What the answer is (for the sender's docstring), or ``""`` for a send."""
    client: str | None = None
    """The :class:`~actors.PoolHandle` method made from this row, or None when the
    handle reaches the pool another way (a job's direct path, the lease's renewal)."""
    timeout: float | None = None
    """The client method's default timeout in seconds (trio clock); None: the method
    sends without waiting (``try_send``), the message is not answered."""
    raises: str = ""
    """Errors of the answer beyond the ask's own, for the docstring (``Raises:`` lines)."""

    @property
    def summary(self) -> str:
        """The first paragraph of the message's docstring, without its ``Ask:``/``Send``."""
        first = " ".join((self.message.__doc__ or "").strip().split("\n\n")[0].split())
        text = re.sub(r"^(Ask|Send)[^:]*: ", "", first).rstrip(".")
        return text[:1].upper() + text[1:]


RUN_JOB: Final = PoolRequest(message=RunJob, answer=object, reply="the job's result")
CANCEL_JOB: Final = PoolRequest(
    message=CancelJob,
    answer=bool,
    reply="True if the job was running",
    client="cancel_job",
    timeout=5.0,
)
GET_SNAPSHOT: Final = PoolRequest(
    message=GetSnapshot,
    answer=PoolSnapshot,
    reply="the pool's :class:`~actors.PoolSnapshot`",
    client="snapshot",
    timeout=5.0,
)
GET_STATISTICS: Final = PoolRequest(
    message=GetPoolStatistics,
    answer=PoolStatistics,
    reply="the pool's :class:`~actors.PoolStatistics`",
    client="statistics",
    timeout=5.0,
)
RESTART_POOL: Final = PoolRequest(
    message=RestartPool,
    answer=_NONE,
    reply="None, once the pool runs again",
    client="restart",
    timeout=30.0,
    raises=(
        "PoolClosed: (code ``pool_closed``) the pool is closing.\n"
        "HelperStartupFailed: (code ``helper_startup_failed``) an eager respawn failed."
    ),
)
RETIRE_IDLE: Final = PoolRequest(message=RetireIdle, answer=_NONE, reply="", client="retire_idle")
GET_LEASE: Final = PoolRequest(message=GetLease, answer=object, reply="the actor's lease")

#: Every request of the pool actor.
POOL_REQUESTS: Final[tuple[PoolRequest[Any], ...]] = (
    RUN_JOB,
    CANCEL_JOB,
    GET_SNAPSHOT,
    GET_STATISTICS,
    RESTART_POOL,
    RETIRE_IDLE,
    GET_LEASE,
)
#: The rows by message class.
REQUESTS: Final = {request.message: request for request in POOL_REQUESTS}


def handler_name(message: type[Any]) -> str:
    """The pool actor's method that answers ``message``: ``_on_`` and its snake_case name."""
    return "_on_" + re.sub(r"(?<!^)(?=[A-Z])", "_", message.__name__).lower()


class _Sender:
    """What a client method uses of its handle: the pool actor's current ref."""

    ref: ActorRef


def ask_method(request: PoolRequest[R]) -> Callable[..., Awaitable[R]]:
    """The :class:`~actors.PoolHandle` method that asks ``request``, from its row."""
    assert request.timeout is not None, f"{request.message.__name__} is sent, not asked"
    method: Callable[..., Awaitable[R]] = _client_method(request)
    return method


def send_method(request: PoolRequest[None]) -> Callable[..., None]:
    """The :class:`~actors.PoolHandle` method that sends ``request``, from its row."""
    assert request.timeout is None, f"{request.message.__name__} is asked, not sent"
    method: Callable[..., None] = _client_method(request)
    return method


def _client_method(request: PoolRequest[Any]) -> Any:
    """The :class:`~actors.PoolHandle` method that sends ``request``, from its row.

    Its positional parameters are the message's fields, in order; an asked request
    takes ``timeout`` (keyword, seconds on trio's clock, the row's default) and returns
    the answer, a sent one returns None at once.
    """
    message = request.message
    assert request.client is not None, f"{message.__name__} has no client method"
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        *(
            inspect.Parameter(field.name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for field in attrs.fields(message)
        ),
    ]
    default = request.timeout
    if default is not None:
        parameters.append(inspect.Parameter("timeout", keyword, default=default))
    signature = inspect.Signature(parameters)

    def build(self: _Sender, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        # A wrong call raises TypeError as a hand-written method would.
        arguments = signature.bind(self, *args, **kwargs).arguments
        del arguments["self"]
        timeout = arguments.pop("timeout", default)
        return message(**arguments), timeout

    if default is None:

        def send(self: _Sender, *args: Any, **kwargs: Any) -> None:
            self.ref.try_send(build(self, args, kwargs)[0])

        method: Any = send
        doc = (
            f"{request.summary}; never waits.\n\n"
            f"Sends :class:`~actors.{message.__name__}` (see there).\n\n"
            "Raises:\n"
            "    MailboxFull: (code ``mailbox_full``) the pool actor's mailbox is full.\n"
            "    ActorStopped: (code ``actor_stopped``) the pool actor is stopped.\n"
        )
    else:

        async def ask(self: _Sender, *args: Any, **kwargs: Any) -> Any:
            sent, timeout = build(self, args, kwargs)
            return await self.ref.ask(sent, timeout=timeout)

        method = ask
        raises = "".join(f"    {line}\n" for line in request.raises.splitlines())
        doc = (
            f"{request.summary}; ``timeout`` in seconds (trio clock).\n\n"
            f"Asks :class:`~actors.{message.__name__}` (see there).\n\n"
            f"Returns:\n    {request.reply[0].upper()}{request.reply[1:]}.\n\n"
            "Raises:\n"
            "    AskTimeout: (code ``ask_timeout``) no answer within ``timeout``.\n"
            "    ActorStopped: (code ``actor_stopped``) the pool actor is stopped.\n"
            f"{raises}"
        )
    method.__name__ = request.client
    method.__qualname__ = f"PoolHandle.{request.client}"
    method.__doc__ = doc
    method.__signature__ = signature
    method.request = request
    return method
