"""The helper side of helper processes: a serve loop for the child (SPEC §3.9).

This module runs **inside the helper child process**. It imports only the standard
library and :mod:`protocol.framing` / :mod:`protocol.envelope` (never trio, attrs or
cattrs), so a helper is ready in about the time a bare interpreter takes to start.

A helper entry point registers handlers and calls :func:`serve`::

    from actors.helper import JobContext, JobError, serve

    def echo(payload, ctx: JobContext):
        return payload

    def count(payload, ctx: JobContext):
        total = 0
        for i in range(payload["n"]):
            ctx.check_cancel()          # raises CancelRequested once the parent cancels
            total += i
        return total

    def main():
        serve({"echo": echo, "count": count}, on_startup=lambda options: {"db": "x.db"})

and the parent names it ``HelperSpec(entry="my_pkg.my_helper:main")``.

The wire protocol (frames of :mod:`protocol.framing`, envelopes of
:mod:`protocol.envelope`): the parent sends ``startup`` (payload ``options``, ``fault``,
``max_request``, ``max_reply``), the helper answers ``ready`` with its pid, its handler
names, what ``on_startup`` returned, and which heavy modules it has loaded. Then, one at a
time, ``job`` frames, each answered by one ``reply`` with status ``ok``, ``error`` or
``cancelled``. A ``cancel`` frame for the running job's generation makes
:meth:`JobContext.cancelled` true. ``shutdown`` or end of input ends the loop (exit 0).

Handlers are plain functions ``fn(payload, ctx)``; they run in the main thread. There is
no reader thread: :meth:`JobContext.cancelled` polls the input pipe without blocking, so a
handler that checks it notices a cancel frame within one check. A handler that never
checks is stopped by the parent's escalation (SIGTERM, then SIGKILL, SPEC §3.5).

``stdout`` belongs to the frame stream, so the loop moves it aside first: the frames use a
private duplicate of file descriptor 1, and fd 1 (and ``sys.stdout``) then point at
stderr, so a ``print`` in a handler, or a grandchild writing to its stdout, cannot corrupt
a frame. Likewise fd 0 is replaced by ``/dev/null`` so a grandchild cannot steal input.

Fault modes (SPEC §3.9) for tests are chosen by the startup frame's ``fault`` (set by
``HelperSpec.fault``) or the ``ACTORS_HELPER_FAULT`` environment variable; see
:data:`FAULT_MODES`.
"""

from __future__ import annotations

import collections
import os
import select
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, Final

from protocol.envelope import (
    PROTOCOL_VERSION,
    Envelope,
    decode_envelope,
    encode_envelope,
    new_session,
)
from protocol.framing import DEFAULT_MAX_REPLY, DEFAULT_MAX_REQUEST, FrameDecoder

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    Handler = Callable[[Any, "JobContext"], Any]

__all__ = [
    "FAULT_ENV",
    "FAULT_EXIT_CODE",
    "FAULT_MODES",
    "HEAVY_MODULES",
    "CancelRequested",
    "JobContext",
    "JobError",
    "serve",
]

#: Environment variable that selects a fault mode when the startup frame names none.
FAULT_ENV: Final = "ACTORS_HELPER_FAULT"
#: Exit status of a helper that crashes on purpose (fault ``crash_before_reply``).
FAULT_EXIT_CODE: Final = 17
#: Exit status when the parent breaks the protocol (bad frame, foreign session).
PROTOCOL_EXIT_CODE: Final = 2
#: Modules a helper child should not load; the ready frame reports those it has.
HEAVY_MODULES: Final = ("trio", "attr", "attrs", "cattrs")
#: Fault modes of SPEC §3.9, for tests:
#:
#: * ``hang_startup``: never answer the startup frame;
#: * ``crash_before_reply``: exit with :data:`FAULT_EXIT_CODE` instead of replying;
#: * ``malformed_reply``: reply with a frame that is not JSON;
#: * ``oversized_reply``: declare a reply one byte over the limit, then hang;
#: * ``stale_generation`` / ``stale_session`` / ``wrong_version``: a reply whose
#:   generation is the previous one / whose session is another / whose version is wrong;
#: * ``partial_frame``: send half a reply frame, then hang;
#: * ``ignore_sigterm``: ignore SIGTERM (jobs run normally);
#: * ``grandchild_ignores_sigterm``: at startup, start a grandchild (in the helper's
#:   process group) that ignores SIGTERM; the ready info has its ``grandchild_pid``.
FAULT_MODES: Final = frozenset(
    {
        "hang_startup",
        "crash_before_reply",
        "malformed_reply",
        "oversized_reply",
        "stale_generation",
        "stale_session",
        "wrong_version",
        "partial_frame",
        "ignore_sigterm",
        "grandchild_ignores_sigterm",
    }
)
_CATEGORIES: Final = ("transient", "permanent", "stale")
_MAX_MESSAGE_BYTES: Final = 1024
_HANG_STEP: Final = 3600.0


class CancelRequested(Exception):
    """Raised by :meth:`JobContext.check_cancel` once the parent cancelled the job.

    The serve loop answers it with status ``cancelled`` (SPEC §3.5 step 1). This is the
    helper's own exception; it has nothing to do with ``trio.Cancelled``.
    """


class JobError(Exception):
    """Raise from a handler to fail the job with a classified error record (SPEC §1.5).

    The parent raises :class:`actors.HelperJobFailed` with this ``code`` and
    ``category``. Any exception with string attributes ``code`` (snake_case) and
    ``category`` is treated the same way; other exceptions become code
    ``handler_failed``, category ``permanent``.

    Args:
        message: Human-readable text; cut to 1 KiB of UTF-8 when sent.
        code: Stable snake_case code, e.g. ``"source_unreadable"``.
        category: ``"transient"``, ``"permanent"`` or ``"stale"``.
    """

    def __init__(
        self, message: str, *, code: str = "handler_failed", category: str = "permanent"
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.category = category


class _Stdio:
    """The frame stream: private duplicates of fds 0/1, a decoder, and decoded frames."""

    def __init__(self) -> None:
        # os.dup gives non-inheritable descriptors (PEP 446): grandchildren never get them.
        self.rfd = os.dup(0)
        self.wfd = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self.decoder = FrameDecoder(max_size=DEFAULT_MAX_REQUEST)
        self.max_reply = DEFAULT_MAX_REPLY
        self.pending: collections.deque[Envelope] = collections.deque()
        self.eof = False

    def set_limits(self, max_request: int, max_reply: int) -> None:
        """Adopt the limits of the startup frame, in bytes (nothing else is buffered)."""
        if self.decoder.buffered == 0:
            self.decoder = FrameDecoder(max_size=max_request)
        self.max_reply = max_reply

    def _feed(self, data: bytes) -> None:
        if not data:
            self.eof = True
            self.decoder.close()
            return
        for payload in self.decoder.feed(data):
            self.pending.append(decode_envelope(payload))

    def receive(self) -> Envelope | None:
        """Block until the next envelope; None at end of input."""
        while not self.pending and not self.eof:
            self._feed(os.read(self.rfd, 65536))
        return self.pending.popleft() if self.pending else None

    def poll(self) -> None:
        """Read whatever input is ready, without blocking."""
        while not self.eof and select.select([self.rfd], [], [], 0)[0]:
            self._feed(os.read(self.rfd, 65536))

    def send(self, env: Envelope) -> None:
        self.write(encode_envelope(env, max_size=self.max_reply))

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.wfd, view) :]


class JobContext:
    """What a handler gets besides its payload: the job's identity and cancellation.

    Attributes:
        operation: The job's operation name.
        generation: The job's generation within this helper's session (SPEC §2.3).
    """

    def __init__(self, stdio: _Stdio, job: Envelope) -> None:
        self._stdio = stdio
        self.operation = job.operation
        self.generation = job.generation
        self._cancelled = False
        self.shutdown_requested = False

    def cancelled(self) -> bool:
        """Return True once the parent has cancelled this job (SPEC §3.5 step 1).

        Polls the input pipe without blocking (one ``select`` call when nothing is
        ready). End of input or a shutdown frame also counts as a cancel.
        """
        if not self._cancelled:
            self._stdio.poll()
            keep: collections.deque[Envelope] = collections.deque()
            for env in self._stdio.pending:
                if env.kind == "cancel" and env.generation == self.generation:
                    self._cancelled = True
                elif env.kind == "shutdown":
                    self._cancelled = self.shutdown_requested = True
                elif env.kind != "cancel":  # a stale cancel is dropped
                    keep.append(env)
            self._stdio.pending = keep
            if self._stdio.eof:
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


def _bound(message: str) -> str:
    raw = message.encode("utf-8", errors="replace")
    if len(raw) <= _MAX_MESSAGE_BYTES:
        return message
    return raw[: _MAX_MESSAGE_BYTES - 3].decode("utf-8", errors="ignore") + "…"


def _error_record(exc: BaseException) -> dict[str, str]:
    """Turn a handler's exception into data: category, code, bounded message (§1.5)."""
    code = getattr(exc, "code", None)
    category = getattr(exc, "category", None)
    text = str(getattr(exc, "message", "") or exc)
    valid = (
        isinstance(code, str)
        and 0 < len(code) <= 64
        and code.replace("_", "a").isalnum()
        and code.islower()
        and category in _CATEGORIES
    )
    if not valid:
        code, category = "handler_failed", "permanent"
        text = f"{type(exc).__name__}: {text}"
    return {"category": str(category), "code": str(code), "message": _bound(text)}


def _hang() -> None:
    while True:
        time.sleep(_HANG_STEP)


def _print_traceback() -> None:
    import traceback  # only on failures: keep the start fast

    traceback.print_exc()  # to stderr, for the operator; never over the wire


def _start_sigterm_ignoring_grandchild() -> int:
    import shutil  # fault mode only: keep the start fast
    import subprocess

    # SIG_IGN survives exec, so set it around the spawn and restore ours afterwards.
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        sleep = shutil.which("sleep")
        argv = [sleep, "300"] if sleep else [sys.executable, "-c", "import time; time.sleep(300)"]
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return child.pid


def _faulty_reply(stdio: _Stdio, fault: str, reply: Envelope) -> bool:
    """Send the broken reply of ``fault`` instead of ``reply``; False if not a reply fault."""
    if fault == "crash_before_reply":
        os._exit(FAULT_EXIT_CODE)
    if fault == "malformed_reply":
        stdio.write(len(b"not json").to_bytes(4, "big") + b"not json")
    elif fault == "oversized_reply":
        stdio.write((stdio.max_reply + 1).to_bytes(4, "big") + b"{")
        _hang()
    elif fault == "partial_frame":
        frame = encode_envelope(reply, max_size=stdio.max_reply)
        stdio.write(frame[: len(frame) // 2])
        _hang()
    elif fault in ("stale_generation", "stale_session", "wrong_version"):
        fields = reply.to_json()
        if fault == "stale_generation":
            fields["generation"] = reply.generation - 1
        elif fault == "stale_session":
            fields["session"] = new_session()
        else:
            fields["version"] = PROTOCOL_VERSION + 1
        stdio.send(Envelope(**fields))
    else:
        return False
    return True


def _run_job(
    stdio: _Stdio, handlers: Mapping[str, Handler], job: Envelope, fault: str | None
) -> bool:
    """Run one job and reply; return True if the parent asked to shut down meanwhile."""
    ctx = JobContext(stdio, job)
    answer: dict[str, Any] = {"status": "ok"}
    handler = handlers.get(job.operation)
    if handler is None:
        answer = {
            "status": "error",
            "error": {
                "category": "permanent",
                "code": "unknown_operation",
                "message": _bound(f"this helper has no handler for {job.operation!r}"),
            },
        }
    else:
        try:
            answer["payload"] = handler(job.payload, ctx)
        except CancelRequested:
            answer = {"status": "cancelled"}
        except Exception as exc:
            answer = {"status": "error", "error": _error_record(exc)}
            if answer["error"]["code"] == "handler_failed":
                _print_traceback()
    reply = Envelope(
        version=PROTOCOL_VERSION,
        kind="reply",
        session=job.session,
        generation=job.generation,
        operation=job.operation,
        **answer,
    )
    if fault is not None and _faulty_reply(stdio, fault, reply):
        return ctx.shutdown_requested
    try:
        stdio.send(reply)
    except Exception as exc:  # not JSON, or over the reply limit: report it as an error
        record = {
            "category": "permanent",
            "code": "reply_unencodable",
            "message": _bound(f"the result could not be sent: {exc}"),
        }
        stdio.send(
            Envelope(
                version=PROTOCOL_VERSION,
                kind="reply",
                session=job.session,
                generation=job.generation,
                operation=job.operation,
                status="error",
                error=record,
            )
        )
    return ctx.shutdown_requested


def _protocol_exit(message: str) -> None:
    print(f"actors.helper: {message}; exiting", file=sys.stderr)
    sys.exit(PROTOCOL_EXIT_CODE)


def serve(
    handlers: Mapping[str, Handler],
    *,
    on_startup: Callable[[dict[str, Any]], Any] | None = None,
) -> None:
    """Serve jobs on stdin/stdout until shutdown or end of input (SPEC §3.9).

    Args:
        handlers: Operation name → ``fn(payload, ctx)``. ``payload`` is the job's JSON
            value; the return value (JSON-compatible) is the reply's payload.
        on_startup: Called once with the spec's ``options`` (a dict) before the helper
            replies *ready*; what it returns (JSON-compatible, e.g. which database it
            opened) is sent as the ready frame's ``info``. If it raises, the ready frame
            carries the error record and the parent's spawn fails
            (``HelperStartupError``, code ``helper_startup_failed``).

    Returns:
        None after a shutdown frame or end of input; the interpreter then exits 0.
        A parent that breaks the protocol makes the process exit with status 2.
    """
    stdio = _Stdio()
    try:
        startup = stdio.receive()
    except Exception as exc:
        _protocol_exit(f"bad startup frame: {exc}")
        return
    if startup is None:
        return
    if startup.kind != "startup" or not isinstance(startup.payload, dict):
        _protocol_exit(f"expected a startup frame, got {startup.kind!r}")
        return
    settings: dict[str, Any] = startup.payload
    session = startup.session
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
    if fault == "hang_startup":
        _hang()
    if fault == "ignore_sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if fault == "grandchild_ignores_sigterm":
        info["grandchild_pid"] = _start_sigterm_ignoring_grandchild()
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
    stdio.send(
        Envelope(
            version=PROTOCOL_VERSION,
            kind="ready",
            session=session,
            generation=0,
            operation="startup",
            payload=info,
            **ready,
        )
    )
    if ready["status"] != "ok":
        return
    while True:
        try:
            env = stdio.receive()
        except Exception as exc:
            _protocol_exit(f"bad frame from the parent: {exc}")
            return
        if env is None or env.kind == "shutdown":
            return
        if env.session != session:
            _protocol_exit(f"frame for another session {env.session!r}")
            return
        if env.kind == "cancel":
            continue  # the job it names has already been answered
        if env.kind != "job":
            _protocol_exit(f"unexpected {env.kind!r} frame")
            return
        if _run_job(stdio, handlers, env, fault):
            return
