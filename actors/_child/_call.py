"""The helper side of ``run_sync``: call a function named by reference (design §3.14).

This module runs **inside the helper child process** and, like :mod:`actors.helper`,
never imports trio, attrs nor cattrs. The serve loop imports it at the first job of
operation ``actors.call`` (``CALL_OPERATION``), so a helper that never serves such a
call never pays for ``pickle``.

A call's payload is ``[reference, arguments]``: the function as ``"module:qualname"``
and the list of its arguments, when they are all plain JSON values (None, bool, an int
of 64 bits, a finite float, a str) and there are no keywords; else a
:class:`~protocol.envelope.Blob` whose head is ``[reference]`` and whose binary part is the
pickled ``(args, kwargs)`` (design §2.3: raw bytes, no base64). The module is imported
at the first call that names it, and the resolved function is cached per reference.
The reply payload is ``[2, value]`` for a plain result; ``Blob(head=[3], data=result)``
for a result of type ``bytes`` (sent as it is, not pickled); ``Blob(head=[0],
data=pickled)`` for any other; or ``[1, type, message, traceback, None, code,
category]`` when it raised: the exception's type name, its message, the traceback text
(without this module's frame), and its own code and category if it has valid ones (as
:class:`actors.helper.JobError` has); that list is the head of a ``Blob`` whose binary
part is the pickled exception when it pickles (within :data:`MAX_EXCEPTION_BYTES`).

A failure of this machinery itself (the function cannot be imported, the arguments do
not unpickle, the result does not pickle) is an error reply whose record the parent turns into
:class:`~actors.errors.FunctionNotImportable` or :class:`~actors.errors.NotPicklable`.

Pickle is acceptable here because both ends are ours: the parent spawned this process
and the frames travel only over its private pipes, never a socket or a file.
"""

from __future__ import annotations

import pickle
import sys

from protocol.envelope import Blob, is_error_code
from protocol.errors import CATEGORIES

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the child ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Final

__all__ = ["call"]

#: Longest traceback text sent back, in bytes of UTF-8 (its tail is kept).
MAX_TRACEBACK_BYTES: Final = 16384
#: Largest pickled exception sent back, in bytes; a larger one travels as text only.
MAX_EXCEPTION_BYTES: Final = 65536
_MAX_MESSAGE_BYTES: Final = 1024
_INT_BOUND: Final = 2**63

_functions: dict[str, Callable[..., Any]] = {}
_dumps = pickle.dumps
_loads = pickle.loads
_PROTOCOL: Final = pickle.HIGHEST_PROTOCOL
_PICKLED_HEAD: Final = [0]
_BYTES_HEAD: Final = [3]


class CallFailed(Exception):
    """A failure of the call machinery, reported to the parent as an error record."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.category = "permanent"


def _bound(text: str, limit: int, *, tail: bool = False) -> str:
    raw = text.encode("utf-8", errors="backslashreplace")
    if len(raw) <= limit:
        return raw.decode("utf-8")
    if tail:
        return "…" + raw[-(limit - 3) :].decode("utf-8", errors="ignore")
    return raw[: limit - 3].decode("utf-8", errors="ignore") + "…"


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: not JSON text
        return False
    return True


def resolve(reference: str) -> Callable[..., Any]:
    """Return the function ``"module:qualname"`` names, importing its module once.

    Raises:
        CallFailed: (code ``function_not_importable``) the module does not import or
            has no such attribute, or the attribute is not callable.
    """
    fn = _functions.get(reference)
    if fn is not None:
        return fn
    module_name, _, qualname = reference.partition(":")
    try:
        __import__(module_name)
        target: Any = sys.modules[module_name]
        for part in qualname.split("."):
            target = getattr(target, part)
    except Exception as exc:
        raise CallFailed(
            _bound(f"{reference}: {type(exc).__name__}: {exc}", _MAX_MESSAGE_BYTES),
            "function_not_importable",
        ) from None
    if not callable(target):
        raise CallFailed(f"{reference} is not callable", "function_not_importable")
    _functions[reference] = target
    return target  # type: ignore[no-any-return]


def _raised(exc: Exception) -> list[Any] | Blob:
    import traceback  # only on failures: keep the first call fast

    kind = type(exc)
    module = kind.__module__
    name = kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
    # Skip this module's own frame: the traceback starts in the function.
    tb = exc.__traceback__
    text = "".join(traceback.format_exception(kind, exc, tb.tb_next if tb is not None else None))
    try:
        pickled: bytes | None = _dumps(exc, _PROTOCOL)
    except Exception:
        pickled = None
    if pickled is not None and len(pickled) > MAX_EXCEPTION_BYTES:
        pickled = None
    code = getattr(exc, "code", None)
    category = getattr(exc, "category", None)
    valid = is_error_code(code) and category in CATEGORIES
    try:
        message = str(exc)
    except Exception:  # a broken __str__ must not lose the type and the traceback
        message = f"<unprintable {name}>"
    head = [
        1,
        name,
        _bound(message, _MAX_MESSAGE_BYTES),
        _bound(text, MAX_TRACEBACK_BYTES, tail=True),
        None,
        code if valid else None,
        category if valid else None,
    ]
    return head if pickled is None else Blob(head=head, data=pickled)


def call(payload: Any, ctx: object) -> Any:
    """Run one ``run_sync`` call: the handler of ``CALL_OPERATION`` (design §3.14).

    Args:
        payload: ``[reference, arguments]`` or ``Blob(head=[reference], data=pickled)``
            (see the module docstring).
        ctx: The job's context (unused: the function gets only its own arguments).

    Returns:
        The reply payload: ``[2, value]``, a ``Blob`` with head ``[3]`` or ``[0]``, or
        ``[1, ...]`` (maybe as a ``Blob``'s head; see the module docstring).

    Raises:
        CallFailed: (code ``function_not_importable``, ``arguments_not_picklable`` or
            ``result_not_picklable``) the function cannot be imported, or its
            arguments or result do not pickle.
    """
    if type(payload) is list and len(payload) == 2 and type(payload[1]) is list:
        reference, data = payload  # plain arguments, as JSON
        if type(reference) is not str:
            raise CallFailed("a call payload's reference is a str", "invalid_call")
        fn = resolve(reference)
        try:
            result = fn(*data)
        except Exception as exc:
            return _raised(exc)
        return _reply(reference, result)
    if type(payload) is not Blob or type(payload.head) is not list or len(payload.head) != 1:
        raise CallFailed(
            "a call payload is [reference, arguments] or a Blob with head [reference]",
            "invalid_call",
        )
    reference = payload.head[0]
    if type(reference) is not str:
        raise CallFailed("a call payload's reference is a str", "invalid_call")
    fn = resolve(reference)
    try:
        args, kwargs = _loads(payload.data)
    except Exception as exc:
        raise CallFailed(
            _bound(
                f"the arguments of {reference} do not unpickle here: {type(exc).__name__}: {exc}",
                _MAX_MESSAGE_BYTES,
            ),
            "arguments_not_picklable",
        ) from None
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:
        return _raised(exc)
    return _reply(reference, result)


def _reply(reference: str, result: Any) -> Any:
    """``[2, result]`` for a plain value (see ``_run_sync.plain``), the bytes themselves
    for ``bytes`` (``Blob(head=[3])``), else the pickle (``Blob(head=[0])``)."""
    kind = type(result)
    if kind is bytes:
        return Blob(head=_BYTES_HEAD, data=result)
    if (
        result is None
        or kind is bool
        or (kind is int and -_INT_BOUND < result < _INT_BOUND)
        or (kind is str and (result.isascii() or _encodes(result)))
        or (kind is float and result - result == 0.0)  # finite: inf - inf and nan are nan
    ):
        return [2, result]
    try:
        return Blob(head=_PICKLED_HEAD, data=_dumps(result, _PROTOCOL))
    except Exception as exc:
        raise CallFailed(
            _bound(
                f"the result of {reference} does not pickle: {type(exc).__name__}: {exc}",
                _MAX_MESSAGE_BYTES,
            ),
            "result_not_picklable",
        ) from None
