"""Running any importable function in a helper: ``run_sync`` (design §3.14).

:meth:`HelperPool.run_sync <actors.HelperPool.run_sync>` (and
:meth:`PoolHandle.run_sync <actors.PoolHandle.run_sync>`) send a function **by
reference** (``"module:qualname"``) with its arguments pickled, as one job of the
built-in operation ``actors.call`` that every Python-entry helper serves (the child side
is :mod:`actors._child._call`). So the call has the pool's whole contract: a free slot
within ``acquire_timeout``, the reply deadline, the stall timeout, the cancel ladder,
fencing, events and statistics.

What can be sent is decided here, **before anything is sent**
(:func:`function_reference`): a function (or class, builtin, classmethod, or method
bound to an importable object) that an import of its ``__module__`` followed by
attribute lookups of its ``__qualname__`` gives back. A lambda, a function defined
inside another (a closure), one defined in ``__main__`` (the helper does not run the
parent's script), a method of a class no import reaches, a method bound to a builtin
object, or a callable instance is refused with
:class:`~actors.errors.FunctionNotImportable`. A :class:`functools.partial` of a
sendable function is unwrapped: its arguments travel with the call's. A method bound to
an instance of an importable class travels as its class's function with the instance,
pickled, as the first argument: it runs on a copy of the object, as in
``multiprocessing``.

Pickle, not JSON, carries arguments and results: any Python object the two ends can
both import. It is acceptable here because both ends are ours, the parent and the child
it spawned, and the bytes travel only over that child's private pipes (never a socket,
a file or another user's process); unpickling there trusts no one it did not start.
"""

from __future__ import annotations

import functools
import math
import pickle
import random
import sys
from types import MethodType, ModuleType
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio

from protocol import Blob

from ...errors import (
    ActorError,
    FunctionNotImportable,
    FunctionRaised,
    JobFailed,
    NotPicklable,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ..._scheduler import RetryPolicy

__all__ = [
    "Emit",
    "attempts",
    "decode_reply",
    "encode_call",
    "function_reference",
    "map_job_error",
]

_MAX_CACHED: Final = 4096
_PROTOCOL: Final = pickle.HIGHEST_PROTOCOL
_references: dict[Any, str] = {}
_dumps = pickle.dumps
_loads = pickle.loads
_rng = random.Random()


class Emit(Protocol):
    """``emit(kind, text, **details)``: one pool event and log record (design §3.10)."""

    def __call__(self, kind: str, text: str, **details: Any) -> None: ...


def _describe(fn: object) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    module = getattr(fn, "__module__", None)
    if isinstance(name, str):
        return f"{module}.{name}" if isinstance(module, str) else name
    return repr(fn)[:200]


def _refuse(fn: object, reason: str, why: str) -> FunctionNotImportable:
    name = _describe(fn)
    return FunctionNotImportable(
        f"run_sync cannot send {name}: {why}", function=name, reason=reason
    )


def _resolve_reference(fn: object) -> str:
    if not callable(fn):
        raise _refuse(fn, "not_callable", "it is not callable")
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, type | ModuleType):
        raise _refuse(
            fn,
            "bound_method",
            "it is a method bound to an object no import reaches; pass a module-level "
            "function (or a functools.partial of one) instead",
        )
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise _refuse(
            fn,
            "no_name",
            "it has no importable name (no __module__ and __qualname__, e.g. a callable "
            "instance); pass a module-level function",
        )
    if "<lambda>" in qualname:
        raise _refuse(
            fn, "lambda", "a lambda has no importable name; define a function at module level"
        )
    if "<locals>" in qualname:
        outer = qualname.split(".<locals>", 1)[0]
        raise _refuse(
            fn,
            "local",
            f"it is defined inside {outer}() (a closure or local function), which a "
            "helper cannot import; define it at module level",
        )
    if module == "__main__":
        raise _refuse(
            fn,
            "main",
            "it is defined in __main__, which a helper does not run; move it into a "
            "module the helper can import",
        )
    target: Any = sys.modules.get(module)
    try:
        if target is None:
            target = __import__(module, fromlist=["_"])
        for part in qualname.split("."):
            target = getattr(target, part)
    except Exception as exc:
        raise _refuse(
            fn, "unresolved", f"{module}:{qualname} does not resolve ({type(exc).__name__}: {exc})"
        ) from None
    if target is not fn and target != fn:
        raise _refuse(fn, "other_object", f"{module}:{qualname} names another object")
    return f"{module}:{qualname}"


def function_reference(fn: Callable[..., Any]) -> str:
    """Return ``"module:qualname"`` of a function a helper can import (design §3.14).

    Cached per function (at most 4096 of them), so a repeated call costs one lookup.

    Raises:
        FunctionNotImportable: (code ``function_not_importable``) see the module
            docstring; the message names the function and says why.
    """
    try:
        cached = _references.get(fn)
    except TypeError:  # an unhashable callable: no cache
        return _resolve_reference(fn)
    if cached is not None:
        return cached
    reference = _resolve_reference(fn)
    if len(_references) >= _MAX_CACHED:
        _references.clear()
    _references[fn] = reference
    return reference


_INT_BOUND: Final = 2**63


def plain(value: object) -> bool:
    """True if ``value`` travels as itself in JSON: exactly a None, bool, int of 64
    bits, finite float, or str that is valid Unicode (JSON gives back an equal value
    of the same type, so pickle is not needed; design §3.14)."""
    kind = type(value)
    if kind is int:
        return -_INT_BOUND < value < _INT_BOUND  # type: ignore[operator]
    if kind is str:
        if value.isascii():  # type: ignore[attr-defined]
            return True
        try:
            value.encode("utf-8")  # type: ignore[attr-defined]
        except UnicodeEncodeError:  # a lone surrogate
            return False
        return True
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    return value is None or kind is bool


def encode_call(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, str]:
    """Return the job payload and the function's reference.

    The payload is ``[reference, arguments]``, the list of the arguments, when they are
    all :func:`plain` and there are no keywords (no pickle on either side); else
    ``Blob(head=[reference], data=pickled)``: the pickled ``(args, kwargs)`` as the
    job frame's binary part (design §2.3), without base64.

    Raises:
        FunctionNotImportable: (code ``function_not_importable``) ``fn`` cannot be sent.
        NotPicklable: (code ``not_picklable``, ``details["what"] == "arguments"``) the
            arguments do not pickle.
    """
    kind = type(fn)
    if kind is functools.partial or kind is MethodType:
        while type(fn) is functools.partial:
            args = (*fn.args, *args)
            kwargs = {**fn.keywords, **kwargs}
            fn = fn.func
        if type(fn) is MethodType and not isinstance(fn.__self__, type | ModuleType):
            # The object travels by value as the first argument, its method by reference.
            args = (fn.__self__, *args)
            fn = fn.__func__
    try:
        reference = _references[fn]
    except (KeyError, TypeError):
        reference = function_reference(fn)
    if not kwargs:
        for arg in args:
            if not plain(arg):
                break
        else:
            return [reference, [*args]], reference
    try:
        data = _dumps((args, kwargs), _PROTOCOL)
    except Exception as exc:
        raise NotPicklable(
            f"the arguments of {reference} do not pickle: {type(exc).__name__}: {exc}",
            what="arguments",
            function=reference,
        ) from None
    return Blob(head=[reference], data=data), reference


def decode_reply(reply: Any, reference: str) -> Any:
    """Return the result of a call's reply payload, or raise what the function raised.

    ``reply`` is the call's reply payload (the child's ``actors._child._call``): ``[2,
    value]``, or a :class:`~protocol.envelope.Blob` with head ``[3]`` (a ``bytes`` result, its
    binary part: returned as ``bytes``, the one copy out of the frame a caller that
    asked for ``bytes`` needs) or ``[0]`` (a pickle, loaded straight from the frame), or
    ``[1, ...]`` when the function raised (a ``Blob`` when the exception pickled).

    Raises:
        FunctionRaised: (the exception's code, default ``function_raised``) the
            function raised; the original exception is the ``__cause__`` when it
            unpickles here.
        NotPicklable: (code ``not_picklable``, ``details["what"] == "result"``) the
            result does not unpickle here.
    """
    data = None
    if type(reply) is Blob:
        reply, data = reply
    tag = reply[0]
    if tag == 2:
        return reply[1]  # a plain value, as JSON
    if tag == 3:
        return bytes(data)  # type: ignore[arg-type]
    if tag == 0:
        try:
            return _loads(data)  # type: ignore[arg-type]
        except Exception as exc:
            raise NotPicklable(
                f"the result of {reference} does not unpickle here: {type(exc).__name__}: {exc}",
                what="result",
                function=reference,
            ) from None
    _, kind, message, traceback, _, code, category = reply
    cause: BaseException | None = None
    if data is not None:
        try:
            cause = _loads(data)
        except Exception:
            cause = None  # its class may not import here: the text still says what it was
        if not isinstance(cause, BaseException):
            cause = None
    error = FunctionRaised(
        f"{reference} raised {kind}: {message}",
        remote_type=kind,
        remote_message=message,
        remote_traceback=traceback,
        code=code,
        category=category,
        function=reference,
    )
    raise error from cause


def map_job_error(exc: JobFailed, reference: str) -> ActorError:
    """The error of the call machinery's own failures in the helper (design §3.14)."""
    code = exc.code
    if code == "function_not_importable":
        return FunctionNotImportable(
            f"the helper cannot import {reference}: {exc.message}",
            function=reference,
            reason="not_importable_in_helper",
        )
    if code in ("arguments_not_picklable", "result_not_picklable"):
        return NotPicklable(exc.message, what=code.split("_", 1)[0], function=reference)
    return exc


async def attempts(
    once: Callable[[float], Awaitable[Any]],
    reference: str,
    retry: RetryPolicy | None,
    deadline: float,
    emit: Emit,
) -> Any:
    """Run ``once(deadline)`` until it succeeds or ``retry`` gives up (design §3.14).

    Without a policy, one attempt. With one, a ``transient`` error whose code is not in
    ``non_retryable_codes`` is retried after ``retry.delay(attempt)`` seconds (trio
    clock), up to ``maximum_attempts`` attempts and ``maximum_crashes`` attempts that
    took their helper down (a crash counts as an attempt, and as a crash); never past
    ``deadline`` or the policy's ``overall_timeout``; each attempt is bounded by
    ``attempt_timeout`` if set. Each retry is a ``call_retried`` event.

    Raises:
        ActorError: the last attempt's error.
    """
    if retry is None:
        return await once(deadline)
    now = trio.current_time()
    if retry.overall_timeout is not None:
        deadline = min(deadline, now + retry.overall_timeout)
    attempt = crashes = 0
    while True:
        attempt += 1
        bound = deadline
        if retry.attempt_timeout is not None:
            bound = min(deadline, trio.current_time() + retry.attempt_timeout)
        try:
            return await once(bound)
        except ActorError as exc:
            if exc.category != "transient":
                raise
            if exc.code in retry.crash_codes:
                crashes += 1
            if retry.gives_up(exc.code, attempts=attempt, crashes=crashes) is not None:
                raise
            delay = retry.delay(attempt, _rng if retry.jitter else None)
            if trio.current_time() + delay >= deadline:
                raise
            emit(
                "call_retried",
                f"{reference}: attempt {attempt} failed ({exc.code}); retrying in {delay:g} s",
                function=reference,
                attempt=attempt,
                code=exc.code,
                delay=delay,
            )
        await trio.sleep(delay)
