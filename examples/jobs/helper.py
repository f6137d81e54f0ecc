"""Helper-process entry point of the job server (design §3.9, §7).

Runs inside a helper child: standard library and :mod:`actors.helper` only (never trio,
attrs or cattrs). The parent names it ``HelperSpec(entry="examples.jobs.helper:main",
cwd=<the repository root>)``.

Operations (payload → result, all JSON); every result carries the helper's ``pid`` so a
client can see which incarnation ran it (design §3.7):

* ``hash_file`` ``{"path": str, "root": str}`` → ``{"sha256", "size", "pid"}``: reads
  the regular file ``path`` (relative to ``root``, or absolute) in 1 MiB chunks, checks
  for a cancel between chunks. The file must lie inside ``root`` once symlinks and
  ``..`` are resolved (:func:`resolve_inside`), checked before it is opened and again
  on the opened file (so a symlink swapped in between cannot lead out); a path outside
  gets :data:`OUTSIDE_ROOT` whether it exists or not (design §7.3). The job server
  checks the same at ``submit`` and adds ``root`` (its ``--files-root``);
* ``count_primes`` ``{"limit": int}`` → ``{"limit", "count", "pid"}``: primes below
  ``limit`` (at most 10**9) by trial division, a deliberately long computation that
  checks for a cancel every 2048 numbers;
* ``sleep`` ``{"seconds": float}`` → ``{"slept", "pid"}``: waits in 20 ms steps, checking
  for a cancel (a long job that costs no CPU);
* ``crash`` ``{}``: exits the process at once with status 3 (``os._exit``), so the job
  fails with ``helper_exited`` and the next job gets a fresh incarnation.

Each handler reports progress with ``ctx.progress(fraction)`` (progress frames, rate
limited by :mod:`actors.helper`; the parent turns them into ``job_progress`` events)
and ends with ``ctx.progress(1.0)``. A bad payload fails the job with code
``invalid_command``; an unreadable file with ``source_unreadable``.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from typing import TYPE_CHECKING, Any

from actors.helper import JobError, serve

if TYPE_CHECKING:
    from actors.helper import JobContext

__all__ = ["MAX_LIMIT", "MAX_SLEEP", "OUTSIDE_ROOT", "main", "resolve_inside"]

#: Largest ``count_primes`` limit.
MAX_LIMIT = 10**9
#: Longest ``sleep``, in seconds.
MAX_SLEEP = 300.0
#: Exit status of the ``crash`` operation.
CRASH_EXIT_CODE = 3
_CHUNK = 1 << 20
#: The one answer for every path outside the files root: it never says whether the path
#: exists, so a client cannot probe the rest of the file system.
OUTSIDE_ROOT = "path must name a file inside the server's files root"
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC


def resolve_inside(root: str, path: str) -> str | None:
    """``path`` (relative to ``root``, or absolute) with symlinks and ``..`` resolved, if
    that lies inside ``root`` (itself resolved); else None. Touches the file system
    (``lstat`` of each component, ``readlink``), never opens the file.
    """
    base = os.path.realpath(root)
    resolved = os.path.realpath(os.path.join(base, path))
    try:
        inside = os.path.commonpath([base, resolved]) == base
    except ValueError:  # e.g. nothing in common
        return None
    return resolved if inside else None


def _invalid(message: str) -> JobError:
    return JobError(message, code="invalid_command", category="permanent")


def _payload(payload: object) -> dict[str, Any]:
    if not isinstance(payload, dict):
        raise _invalid("the payload must be a JSON object")
    return payload


def hash_file(payload: object, ctx: JobContext) -> dict[str, Any]:
    """SHA-256 of a regular file inside ``root``, read in 1 MiB chunks; cancellable.

    Raises:
        JobError: ``invalid_command`` (no ``path`` or ``root``, or the path is outside
            ``root``: :data:`OUTSIDE_ROOT`), ``source_unreadable`` (cannot read, or not
            a regular file).
        CancelRequested: the parent cancelled the job.
    """
    fields = _payload(payload)
    path = fields.get("path")
    root = fields.get("root")
    if not isinstance(path, str) or not path:
        raise _invalid("path must be a non-empty string")
    if "\x00" in path:  # open() would raise ValueError: an unclassified handler_failed
        raise _invalid("path must not contain a NUL character")
    if not isinstance(root, str) or not root or "\x00" in root:
        raise _invalid("root must be a non-empty string (the server's files root)")
    resolved = resolve_inside(root, path)
    if resolved is None:
        raise _invalid(OUTSIDE_ROOT)
    digest = hashlib.sha256()
    done = 0
    try:
        # O_NONBLOCK: opening a FIFO must not hang the helper (it is refused below).
        fd = os.open(resolved, _OPEN_FLAGS)
        with open(fd, "rb") as file:
            opened = f"/proc/self/fd/{fd}"
            if os.path.exists(opened) and resolve_inside(root, os.readlink(opened)) is None:
                raise _invalid(OUTSIDE_ROOT)  # a symlink swapped in after the check
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise JobError(
                    f"cannot read {path!r}: not a regular file",
                    code="source_unreadable", category="permanent",
                )  # fmt: skip
            os.set_blocking(fd, True)
            size = info.st_size
            while chunk := file.read(_CHUNK):
                ctx.check_cancel()
                digest.update(chunk)
                done += len(chunk)
                ctx.progress(min(done / size, 1.0) if size else 1.0, f"{done} of {size} bytes")
    except OSError as exc:
        raise JobError(
            f"cannot read {path!r}: {exc.strerror}", code="source_unreadable", category="permanent"
        ) from None
    ctx.progress(1.0, f"{done} bytes")
    return {"sha256": digest.hexdigest(), "size": done, "pid": os.getpid()}


def _is_prime(n: int) -> bool:
    if n < 4:
        return n >= 2
    if n % 2 == 0:
        return False
    divisor = 3
    while divisor * divisor <= n:
        if n % divisor == 0:
            return False
        divisor += 2
    return True


def count_primes(payload: object, ctx: JobContext) -> dict[str, Any]:
    """Count the primes below ``limit`` by trial division; cancellable, with progress.

    Raises:
        JobError: ``invalid_command`` (``limit`` not an int in [0, 10**9]).
        CancelRequested: the parent cancelled the job.
    """
    fields = _payload(payload)
    limit = fields.get("limit")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
        raise _invalid(f"limit must be an integer from 0 to {MAX_LIMIT}")
    count = 0
    for n in range(limit):
        if n % 2048 == 0:
            ctx.check_cancel()
            if n:  # the event log already emitted a synthetic 0.0 at the start
                ctx.progress(n / limit)
        if _is_prime(n):
            count += 1
    ctx.progress(1.0, f"{count} primes")
    return {"limit": limit, "count": count, "pid": os.getpid()}


def sleep(payload: object, ctx: JobContext) -> dict[str, Any]:
    """Wait ``seconds`` in 20 ms steps; cancellable, with progress.

    Raises:
        JobError: ``invalid_command`` (``seconds`` not a number in [0, 300]).
        CancelRequested: the parent cancelled the job.
    """
    fields = _payload(payload)
    seconds = fields.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise _invalid("seconds must be a number")
    if not 0 <= seconds <= MAX_SLEEP:
        raise _invalid(f"seconds must be from 0 to {MAX_SLEEP:g}")
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < seconds:
        ctx.check_cancel()
        if elapsed:
            ctx.progress(elapsed / seconds)
        time.sleep(min(0.02, seconds - elapsed))
    ctx.progress(1.0)
    return {"slept": seconds, "pid": os.getpid()}


def crash(payload: object, ctx: JobContext) -> None:
    """Exit the helper process at once with status 3 (no reply, no cleanup)."""
    os._exit(CRASH_EXIT_CODE)


#: When set, a folder where each execution of a job leaves one file (an audit of what
#: ran, and how often: the cluster's tests count executions here, not in the ledger).
TRACE_ENV = "TRIO_ACTORS_JOBS_TRACE"


def _traced(name: str, handler: Any) -> Any:
    folder = os.environ.get(TRACE_ENV)
    if not folder:
        return handler

    def run(payload: object, ctx: JobContext) -> Any:
        text = json.dumps({"operation": name, "payload": payload}, sort_keys=True)
        path = os.path.join(folder, f"{os.getpid()}-{time.monotonic_ns()}.json")
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        return handler(payload, ctx)

    return run


def main() -> None:
    """Serve the job server's operations until shutdown (the helper's entry point).

    With ``TRIO_ACTORS_JOBS_TRACE`` set to a folder, every execution first writes one
    file there: ``{"operation", "payload"}``.
    """
    handlers = {
        "hash_file": hash_file,
        "count_primes": count_primes,
        "sleep": sleep,
        "crash": crash,
    }
    serve(
        {name: _traced(name, handler) for name, handler in handlers.items()},
        on_startup=lambda options: {"pid": os.getpid()},
    )
