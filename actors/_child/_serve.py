"""The helper child's serve loop, its job context and the helper library's errors
(design §3.9); :mod:`actors.helper` is its public face, and its docstring describes the
wire protocol, the handlers and the fault modes.

Runs **inside the helper child process**: it imports only a few C-level standard modules
and :mod:`protocol.framing` / :mod:`protocol.envelope` / :mod:`protocol.errors` (never
trio, attrs, cattrs, nor even ``typing``).
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque

from protocol.envelope import (
    MAX_PROGRESS_NOTE_BYTES,
    PROTOCOL_VERSION,
    Blob,
    Envelope,
    encode_fields,
    encode_positional,
    is_error_code,
)
from protocol.errors import CATEGORIES, ProtocolError, bound_message
from protocol.framing import DEFAULT_MAX_REPLY, DEFAULT_MAX_REQUEST

from ._stdio import ChildStdio as _Stdio
from ._subreaper import become_subreaper

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the child ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, Final

    Handler = Callable[[Any, "JobContext"], Any]

__all__ = [
    "CALL_OPERATION",
    "FAULT_ENV",
    "FAULT_EXIT_CODE",
    "FAULT_MODES",
    "HEAVY_MODULES",
    "PROGRESS_INTERVAL",
    "CancelRequested",
    "JobContext",
    "JobError",
    "in_helper_child",
    "serve",
    "serve_calls",
]

#: The operation name of a ``run_sync`` call (a name no handler can take by accident);
#: the serve loop answers it with the call machinery of ``actors._child._call``.
CALL_OPERATION: Final = "actors.call"
# Documented in actors.helper (its public face).
FAULT_ENV: Final = "ACTORS_HELPER_FAULT"
# Documented in actors.helper (its public face).
FAULT_EXIT_CODE: Final = 17
#: Exit status when the parent breaks the protocol (bad frame, foreign session).
PROTOCOL_EXIT_CODE: Final = 2
# Documented in actors.helper (its public face).
HEAVY_MODULES: Final = ("trio", "attr", "attrs", "cattrs")
# Documented in actors.helper (its public face).
PROGRESS_INTERVAL: Final = 0.05
# Documented in actors.helper (its public face).
FAULT_MODES: Final = frozenset(
    {
        "hang_startup",
        "exit_at_startup",
        "bad_ready",
        "crash_before_reply",
        "malformed_reply",
        "oversized_reply",
        "stale_generation",
        "stale_session",
        "wrong_version",
        "stale_progress",
        "partial_frame",
        "ignore_sigterm",
        "grandchild_ignores_sigterm",
    }
)
_monotonic = time.monotonic
#: A handler's result of one of these types is sent as a binary part (design §2.3).
_BYTES: Final = (bytes, bytearray, memoryview)


def in_helper_child() -> bool:
    """Return True inside a helper child started from a ``HelperSpec(entry=...)``.

    The child bootstrap (``actors._helpers._process._spec.BOOTSTRAP``) loads ``actors`` as a bare
    package stub, without its ``__init__``: there ``actors.errors`` and the rest of the
    runtime cannot be imported without pulling in attrs and trio. Code imported by both
    sides (e.g. an entry's error classes) can ask this to choose what to import; inside
    the child, raise :class:`JobError` (or an exception with ``code``/``category``), or
    subclass :class:`protocol.errors.ActorError`, which is stdlib-only.
    """
    return getattr(sys.modules.get("actors"), "HELPER_CHILD", False) is True


class CancelRequested(Exception):
    """Raised by :meth:`JobContext.check_cancel` once the parent cancelled the job.

    The serve loop answers it with status ``cancelled`` (design §3.5 step 1). This is the
    helper's own exception; it has nothing to do with ``trio.Cancelled``.
    """


class JobError(Exception):
    """Raise from a handler to fail the job with a classified error record (design §1.5).

    The parent raises :class:`actors.JobFailed` with this ``code`` and
    ``category``. Any exception with string attributes ``code`` (snake_case) and
    ``category`` is treated the same way; other exceptions become code
    ``handler_failed``, category ``permanent``.

    Args:
        message: Human-readable text; cut to 1 KiB of UTF-8 when sent.
        code: Stable snake_case code, e.g. ``"source_unreadable"``.
        category: ``"transient"``, ``"permanent"`` or ``"stale"``.
        data: Optional bytes sent with the error record as the reply's binary part
            (design §2.3), e.g. the input that could not be parsed; the parent's
            :class:`actors.JobFailed` has them as ``data``. They count towards the
            reply limit: over it, the job fails with code ``reply_unencodable``.

    Raises:
        TypeError: ``data`` is not bytes, bytearray or memoryview.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "handler_failed",
        category: str = "permanent",
        data: bytes | bytearray | memoryview | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.category = category
        if data is not None and not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"JobError data must be bytes-like or None, got {type(data).__name__}")
        self.data = data


class JobContext:
    """What a handler gets besides its payload: the job's identity, cancellation, progress.

    Attributes:
        operation: The job's operation name.
        generation: The job's generation within this helper's session (design §2.3).
    """

    __slots__ = (
        "_cancelled",
        "_last_progress",
        "_stdio",
        "generation",
        "operation",
        "shutdown_requested",
    )

    def __init__(self, stdio: _Stdio, job: Envelope) -> None:
        self._stdio = stdio
        self.operation = job.operation
        self.generation = job.generation
        self._cancelled = False
        self._last_progress = -PROGRESS_INTERVAL
        self.shutdown_requested = False

    def cancelled(self) -> bool:
        """Return True once the parent has cancelled this job (design §3.5 step 1).

        Polls the input pipe without blocking (one ``select`` call when nothing is
        ready). End of input or a shutdown frame also counts as a cancel.
        """
        if not self._cancelled:
            stdio = self._stdio
            stdio.poll()
            if stdio.pending:
                keep: deque[Envelope] = deque()
                for env in stdio.pending:
                    if env.kind == "cancel" and env.generation == self.generation:
                        self._cancelled = True
                    elif env.kind == "shutdown":
                        self._cancelled = self.shutdown_requested = True
                    elif env.kind != "cancel":  # a stale cancel is dropped
                        keep.append(env)
                stdio.pending = keep
            if stdio.eof:
                self._cancelled = self.shutdown_requested = True
        return self._cancelled

    def check_cancel(self) -> None:
        """Raise :class:`CancelRequested` if the parent has cancelled this job.

        Raises:
            CancelRequested: the job was cancelled; let it propagate so the loop
                replies ``cancelled``.
        """
        if self.cancelled():
            raise CancelRequested(f"job {self.generation} ({self.operation}) cancelled")

    def progress(
        self,
        fraction: float,
        note: str | None = None,
        *,
        data: bytes | bytearray | memoryview | None = None,
    ) -> bool:
        """Report how far the job is, as a ``progress`` frame to the parent (design §3.9).

        Cheap to call often: a report that comes less than :data:`PROGRESS_INTERVAL`
        (50 ms, monotonic clock) after the last one sent is dropped, unless ``fraction``
        is 1.0. The parent hands each report to the job's ``on_progress`` callback:
        ``on_progress(fraction, note)``, or ``on_progress(fraction, note, data)`` for a
        report with ``data``.

        Args:
            fraction: How much of the job is done, a number in ``[0, 1]``.
            note: Optional text for a human (e.g. ``"page 3 of 7"``); cut to 1 KiB of
                UTF-8.
            data: Optional bytes sent as the frame's binary part (design §2.3), e.g. a
                partial image; the frame must fit the reply limit, in bytes.

        Returns:
            True if a frame was sent, False if the report was dropped by the rate limit.

        Raises:
            ValueError: ``fraction`` is not a number in ``[0, 1]``, or ``note`` is not
                a str or None.
            TypeError: ``data`` is not bytes, bytearray, memoryview or None.
            FrameTooLarge: (code ``frame_too_large``, ``details["field"] == "data"``)
                the report with its ``data`` is over the reply limit; nothing was sent.
        """
        if (
            not isinstance(fraction, int | float)
            or isinstance(fraction, bool)
            or not 0.0 <= fraction <= 1.0
        ):
            raise ValueError(f"fraction must be a number in [0, 1], got {fraction!r}")
        if note is not None and not isinstance(note, str):
            raise ValueError(f"note must be a str or None, got {type(note).__name__}")
        report: Any = None  # built before the rate limit: a bad ``data`` always raises
        if data is not None:
            report = Blob(data=data)
        now = _monotonic()
        if fraction != 1 and now - self._last_progress < PROGRESS_INTERVAL:
            return False
        self._last_progress = now
        stdio = self._stdio
        assert stdio.session is not None
        if note is not None:
            note = bound_message(note, MAX_PROGRESS_NOTE_BYTES)
        payload: Any = {"fraction": float(fraction), "note": note}
        if report is not None:
            payload = Blob(head=payload, data=report.data)
        stdio.write(
            encode_fields(
                kind="progress",
                session=stdio.session,
                generation=self.generation,
                operation=self.operation,
                payload=payload,
                max_size=stdio.max_reply,
            )
        )
        return True


def _error_record(exc: BaseException) -> dict[str, str]:
    """Turn a handler's exception into data: category, code, bounded message (§1.5)."""
    code = getattr(exc, "code", None)
    category = getattr(exc, "category", None)
    text = str(getattr(exc, "message", "") or exc)
    valid = is_error_code(code) and category in CATEGORIES
    if not valid:
        code, category = "handler_failed", "permanent"
        text = f"{type(exc).__name__}: {text}"
    return {"category": str(category), "code": str(code), "message": bound_message(text)}


def _error_data(exc: JobError) -> Blob | None:
    """A :class:`JobError`'s ``data`` as the error reply's binary part, or None.

    A subclass may have set something else there: then the record goes alone.
    """
    data = getattr(exc, "data", None)
    if data is None:
        return None
    try:
        return Blob(data=data)
    except (TypeError, ValueError):
        return None


def _unencodable(exc: BaseException) -> dict[str, str]:
    return {
        "category": "permanent",
        "code": "reply_unencodable",
        "message": bound_message(f"the result could not be sent: {exc}"),
    }


def _print_traceback() -> None:
    import traceback  # only on failures: keep the start fast

    traceback.print_exc()  # to stderr, for the operator; never over the wire


_calls: list[Handler] = []


def _call_handler() -> Handler:
    """The handler of ``run_sync`` calls, imported at the first one (design §3.14)."""
    if not _calls:
        from ._call import call  # only a helper that serves calls pays for pickle

        _calls.append(call)
    return _calls[0]


def _run_job(
    stdio: _Stdio, handlers: Mapping[str, Handler], job: Envelope, fault: str | None
) -> bool:
    """Run one job and reply; return True if the parent asked to shut down meanwhile."""
    ctx = JobContext(stdio, job)
    # Read once, before the handler runs (it may write to ctx): slots, not properties.
    operation, generation = ctx.operation, ctx.generation
    status = "ok"
    result: Any = None
    error: dict[str, str] | None = None
    handler = handlers.get(operation)
    if handler is None and operation == CALL_OPERATION:
        handler = _call_handler()
    if handler is None:
        status = "error"
        error = {
            "category": "permanent",
            "code": "unknown_operation",
            "message": bound_message(f"this helper has no handler for {operation!r}"),
        }
    else:
        try:
            result = handler(job.payload, ctx)
            if type(result) in _BYTES:  # bytes alone: the binary part, no head (§2.3)
                result = Blob(data=result)
        except CancelRequested:
            status = "cancelled"
        except Exception as exc:
            status = "error"
            error = _error_record(exc)
            if error["code"] == "handler_failed":
                _print_traceback()
            elif isinstance(exc, JobError):
                result = _error_data(exc)  # sent beside the record, if any
    if fault is not None:
        from ._faults import faulty_reply  # fault modes only: keep the start fast

        answer: dict[str, Any] = {"status": status}
        if status == "ok":
            answer["payload"] = result
        elif status == "error":
            answer["error"] = error
        if faulty_reply(stdio, fault, job, answer, FAULT_EXIT_CODE):
            return ctx.shutdown_requested
    session = job.session
    try:
        frame = encode_positional(
            "reply", session, generation, operation, status, result, error, stdio.max_reply
        )
    except Exception as exc:  # not JSON, or over the reply limit: report it as an error
        frame = encode_fields(
            kind="reply",
            session=session,
            generation=generation,
            operation=operation,
            status="error",
            error=_unencodable(exc),
            max_size=stdio.max_reply,
        )
    written = os.write(stdio.wfd, frame)  # stdio.write's usual case, without its call
    if written < len(frame):
        stdio.write(frame[written:])
    return ctx.shutdown_requested


def serve_calls() -> None:
    """An entry that serves only ``run_sync``/``map`` calls (design §3.14).

    ``HelperSpec(entry="actors.helper:serve_calls")`` is the spec of a pool that runs
    any importable function and has no named handlers.
    """
    serve({})


def _protocol_exit(message: str) -> None:
    print(f"actors.helper: {message}; exiting", file=sys.stderr)
    sys.exit(PROTOCOL_EXIT_CODE)


def serve(
    handlers: Mapping[str, Callable[[Any, JobContext], Any]],
    *,
    on_startup: Callable[[dict[str, Any]], Any] | None = None,
) -> None:
    """Serve jobs on stdin/stdout until shutdown or end of input (design §3.9).

    Args:
        handlers: Operation name → ``fn(payload, ctx)``. ``payload`` is the job's JSON
            value; the return value (JSON-compatible) is the reply's payload, or bytes
            (``bytes``, ``bytearray``, ``memoryview``) sent raw as the reply's binary
            part, or a :class:`~protocol.envelope.Blob` for both: a JSON head and bytes
            (design §2.3). ``ctx`` is the :class:`JobContext` (cancellation checks,
            progress reports).
        on_startup: Called once with the spec's ``options`` (a dict) before the helper
            replies *ready*; what it returns (JSON-compatible, e.g. which database it
            opened) is sent as the ready frame's ``info``. If it raises, the ready frame
            carries the error record and the parent's spawn fails
            (``HelperStartupFailed``, code ``helper_startup_failed``).

    Returns:
        None after a shutdown frame or end of input; the interpreter then exits 0.
        A parent that breaks the protocol makes the process exit with status 2. A
        parent that is gone (its end of the reply pipe closed, e.g. it was killed) ends
        the loop too, with one line on stderr instead of a traceback.
    """
    stdio = _Stdio()
    try:
        _serve(stdio, handlers, on_startup)
    except BrokenPipeError:
        print("actors.helper: the parent closed the reply pipe; exiting", file=sys.stderr)


def _serve(
    stdio: _Stdio,
    handlers: Mapping[str, Handler],
    on_startup: Callable[[dict[str, Any]], Any] | None,
) -> None:
    try:
        startup = stdio.receive()
    except Exception as exc:
        _protocol_exit(f"bad startup frame: {exc}")
        return
    if startup is None:
        return
    if (
        startup.kind != "startup"
        or startup.version != PROTOCOL_VERSION
        or not isinstance(startup.payload, dict)
    ):
        _protocol_exit(f"expected a version {PROTOCOL_VERSION} startup frame, got {startup!r:.200}")
        return
    settings: dict[str, Any] = startup.payload
    session = stdio.session = startup.session
    stdio.set_limits(
        int(settings.get("max_request", DEFAULT_MAX_REQUEST)),
        int(settings.get("max_reply", DEFAULT_MAX_REPLY)),
    )
    fault = settings.get("fault") or os.environ.get(FAULT_ENV) or None
    if fault is not None and fault not in FAULT_MODES:
        _protocol_exit(f"unknown fault mode {fault!r}")
        return
    ready: dict[str, Any] = {"status": "ok"}
    info: dict[str, Any] = {}
    if fault is not None:
        from ._faults import at_startup

        info.update(at_startup(fault, stdio, FAULT_EXIT_CODE))
    if settings.get("subreaper"):
        info["subreaper"] = become_subreaper()
    try:
        if on_startup is not None:
            info["info"] = on_startup(dict(settings.get("options") or {}))
    except Exception as exc:
        _print_traceback()
        ready = {"status": "error", "error": _error_record(exc)}
    info.update(
        pid=os.getpid(),
        handlers=sorted(handlers),
        heavy_modules=[name for name in HEAVY_MODULES if name in sys.modules],
    )
    try:
        frame = encode_fields(
            kind="ready",
            session=session,
            generation=0,
            operation="startup",
            payload=info,
            max_size=stdio.max_reply,
            **ready,
        )
    except Exception as exc:  # on_startup returned something that cannot be sent
        ready = {"status": "error", "error": _unencodable(exc)}
        frame = encode_fields(
            kind="ready",
            session=session,
            generation=0,
            operation="startup",
            max_size=stdio.max_reply,
            **ready,
        )
    stdio.write(frame)
    if ready["status"] != "ok":
        return
    while True:
        try:
            env = stdio.receive()
        except ProtocolError as exc:
            _protocol_exit(f"bad frame from the parent: {exc}")
            return
        if env is None or env.kind == "shutdown":
            break
        # A cancel here is for a job that has already been answered: nothing to do.
        if env.kind == "job" and _run_job(stdio, handlers, env, fault):
            break
    if stdio.broken is not None:
        _protocol_exit(f"bad frame from the parent: {stdio.broken}")
