"""A helper entry point for the tests: runs in the helper child (no trio, no attrs).

Its ``time.sleep`` calls are the *workload* of simulated blocking jobs inside the child
process (which has no event loop), not test timing: the tests that drive these jobs wait
on the parent's cancel scopes and events.

Spec: ``HelperSpec(entry="helper_entry:main", cwd="tests/actors")`` (see ``helper_support.spec``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

from actors.helper import Blob, CancelRequested, JobContext, JobError, in_helper_child, serve
from protocol.envelope import encode_fields


def echo(payload: Any, ctx: JobContext) -> Any:
    return payload


def sleep(payload: Any, ctx: JobContext) -> Any:
    """Sleep ``payload`` seconds without ever checking for cancellation."""
    time.sleep(float(payload))
    return payload


def cooperative(payload: Any, ctx: JobContext) -> Any:
    """Loop for up to ``payload`` seconds, checking for cancellation every 2 ms."""
    deadline = time.monotonic() + float(payload)
    while time.monotonic() < deadline:
        ctx.check_cancel()
        time.sleep(0.002)
    return "finished"


def fail(payload: Any, ctx: JobContext) -> Any:
    raise JobError(payload["message"], code=payload["code"], category=payload["category"])


def boom(payload: Any, ctx: JobContext) -> Any:
    raise ValueError("boom " + "x" * int(payload or 0))


def crash(payload: Any, ctx: JobContext) -> Any:
    os._exit(int(payload))


def kill_self(payload: Any, ctx: JobContext) -> Any:
    os.kill(os.getpid(), signal.SIGKILL)


def modules(payload: Any, ctx: JobContext) -> Any:
    return sorted(sys.modules)


def in_child(payload: Any, ctx: JobContext) -> Any:
    return in_helper_child()


def module_files(payload: Any, ctx: JobContext) -> Any:
    """Where each loaded module of ours came from."""
    return {
        name: getattr(module, "__file__", None)
        for name, module in sys.modules.items()
        if name.split(".")[0] in ("actors", "protocol")
    }


def noisy(payload: Any, ctx: JobContext) -> Any:
    print("this goes to stderr, not into the frame stream")
    os.write(1, b"raw bytes on fd 1 go to stderr too\n")
    return payload


def big(payload: Any, ctx: JobContext) -> Any:
    return "x" * int(payload)


def unencodable(payload: Any, ctx: JobContext) -> Any:
    return {1, 2, 3}


def pattern(size: int) -> bytes:
    """``size`` bytes of every value 0..255 in turn (like the parent's ``pattern``)."""
    return (bytes(range(256)) * (size // 256 + 1))[:size]


def blob(payload: Any, ctx: JobContext) -> Any:
    """``{"size": n, "raw": bool}``: n bytes as a binary part, alone or with a head."""
    data = pattern(int(payload["size"]))
    if payload.get("raw"):
        return data
    return Blob(head={"size": len(data)}, data=data)


def blob_progress(payload: Any, ctx: JobContext) -> Any:
    """Report progress with bytes twice (``payload`` bytes each), then return bytes."""
    ctx.progress(0.5, "half", data=pattern(int(payload)))
    ctx.progress(1.0, data=memoryview(pattern(int(payload))))
    return b"done"


def blob_fail(payload: Any, ctx: JobContext) -> Any:
    """Fail with an error record and ``payload`` bytes beside it."""
    raise JobError("the input does not parse", code="bad_input", data=pattern(int(payload)))


def blob_lie(payload: Any, ctx: JobContext) -> Any:
    """Send a whole reply frame whose binary part declares 1 byte more than it carries."""
    frame = bytearray(
        encode_fields(
            kind="reply",
            session=ctx._stdio.session,  # type: ignore[attr-defined, arg-type]
            generation=ctx.generation,
            operation=ctx.operation,
            status="ok",
            payload=Blob(head={"size": 3}, data=b"abc"),
        )
    )
    frame[-7:-3] = (4).to_bytes(4, "big")  # the part's length field: 4, not 3
    os.write(ctx._stdio.wfd, frame)  # type: ignore[attr-defined]
    time.sleep(30)  # the parent kills a helper that breaks the protocol
    return None


def progress(payload: Any, ctx: JobContext) -> Any:
    """Report ``steps`` evenly spaced fractions, ``pause`` seconds apart (cancellable)."""
    steps, pause = int(payload["steps"]), float(payload["pause"])
    for i in range(1, steps + 1):
        deadline = time.monotonic() + pause
        while time.monotonic() < deadline:
            ctx.check_cancel()
            time.sleep(0.002)
        ctx.progress(i / steps, note=f"step {i}")
    return "done"


def progress_stubborn(payload: Any, ctx: JobContext) -> Any:
    """Report progress every 60 ms for ``payload`` seconds, never checking for cancel."""
    deadline = time.monotonic() + float(payload)
    while time.monotonic() < deadline:
        time.sleep(0.06)
        ctx.progress(0.5, note="still going")
    return "done"


def stderr_ticks(payload: Any, ctx: JobContext) -> Any:
    """Write a line to stderr every 50 ms for ``payload`` seconds, never reporting
    progress nor checking for a cancel (third-party code that says it is alive)."""
    deadline = time.monotonic() + float(payload)
    while time.monotonic() < deadline:
        os.write(2, b"still working\n")
        time.sleep(0.05)
    return "done"


def progress_burst(payload: Any, ctx: JobContext) -> Any:
    """Report ``n`` fractions as fast as possible, then 1.0; return which were sent."""
    n = int(payload)
    sent = [(i / n, ctx.progress(i / n)) for i in range(n)]
    sent.append((1.0, ctx.progress(1, note="all done")))
    return [fraction for fraction, was_sent in sent if was_sent]


def progress_bad(payload: Any, ctx: JobContext) -> Any:
    ctx.progress(payload)
    return "unreachable"


def progress_then(payload: Any, ctx: JobContext) -> Any:
    """Report each ``[fraction, note]`` of ``reports`` at once, work (cancellable) for
    ``work`` seconds, then fail with ``fail`` (a JobError's fields) or return ``result``.

    Only the first report may be below 1.0: the rate limit never drops the first report
    nor a 1.0, so every report is sent and the frames are known in advance.
    """
    for fraction, note in payload.get("reports", ()):
        if not ctx.progress(fraction, note=note):
            raise JobError(f"report {fraction} was dropped", code="report_dropped")
    cooperative(payload.get("work", 0), ctx)
    if "fail" in payload:
        fail(payload["fail"], ctx)
    return payload.get("result")


def give_up(payload: Any, ctx: JobContext) -> Any:
    """Answer ``cancelled`` though the parent never asked (the handler gave up)."""
    raise CancelRequested("gave up on its own")


#: A grandchild that ignores SIGTERM and sleeps (it is killed by the tests' helpers).
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"

#: A process that leaves the helper's session, forks a SIGTERM-ignoring daemon, prints
#: its pid and exits at once: the daemon is orphaned (a double fork).
DAEMONIZE = (
    "import os, signal, time\n"
    "os.setsid()\n"
    "pid = os.fork()\n"
    "if pid:\n"
    "    print(pid, flush=True)\n"
    "    os._exit(0)\n"
    "os.dup2(os.open(os.devnull, os.O_RDWR), 1)\n"  # let the parent's read end
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "time.sleep(300)\n"
)


def spawn_setsid(payload: Any, ctx: JobContext) -> Any:
    """Start a grandchild in a session of its own that ignores SIGTERM; its pid."""
    child = subprocess.Popen(
        [sys.executable, "-c", STUBBORN], start_new_session=True, stdin=subprocess.DEVNULL
    )
    return child.pid


#: A process that appends a line to ``DIR/PID`` for each SIGTERM it handles, and lives on.
TERM_COUNTER = (
    "import os, signal, sys, time\n"
    "path = os.path.join(sys.argv[1], str(os.getpid()))\n"
    "def on_term(signum, frame):\n"
    "    with open(path, 'a') as file:\n"
    "        file.write('TERM\\n')\n"
    "signal.signal(signal.SIGTERM, on_term)\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    time.sleep(1)\n"
)


def spawn_term_counters(payload: Any, ctx: JobContext) -> Any:
    """Start two SIGTERM counters (``TERM_COUNTER``) writing into the directory
    ``payload``: one in the helper's process group, one in a session of its own. Their
    pids, once both handle SIGTERM."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", TERM_COUNTER, payload],
            start_new_session=alone,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        for alone in (False, True)
    ]
    for child in children:
        assert child.stdout is not None
        child.stdout.readline()
    return [child.pid for child in children]


def spawn_daemon(payload: Any, ctx: JobContext) -> Any:
    """Double-fork a daemon with an empty environment (no tag); the daemon's pid.

    With ``payload`` true, the daemon keeps the helper's environment instead.
    """
    out = subprocess.run(
        [sys.executable, "-c", DAEMONIZE],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=None if payload else {},
        check=True,
    )
    return int(out.stdout)


def on_startup(options: dict[str, Any]) -> Any:
    if options.get("fail_startup"):
        raise JobError("cannot open the database", code="source_unreadable")
    if "stderr_bytes" in options:  # say a lot on stderr, then die before ready
        line = "x" * 99 + "\n"
        sys.stderr.write(line * (int(options["stderr_bytes"]) // 100))
        sys.stderr.write("the last words\n")
        sys.stderr.flush()
        os._exit(int(options.get("exit_code", 3)))
    return {"opened": options.get("db", "nothing"), "pid": os.getpid()}


HANDLERS = {
    "echo": echo,
    "sleep": sleep,
    "cooperative": cooperative,
    "fail": fail,
    "boom": boom,
    "crash": crash,
    "kill_self": kill_self,
    "modules": modules,
    "module_files": module_files,
    "in_child": in_child,
    "noisy": noisy,
    "big": big,
    "unencodable": unencodable,
    "progress": progress,
    "blob": blob,
    "blob_progress": blob_progress,
    "blob_fail": blob_fail,
    "blob_lie": blob_lie,
    "progress_burst": progress_burst,
    "progress_stubborn": progress_stubborn,
    "stderr_ticks": stderr_ticks,
    "progress_bad": progress_bad,
    "progress_then": progress_then,
    "give_up": give_up,
    "spawn_setsid": spawn_setsid,
    "spawn_daemon": spawn_daemon,
    "spawn_term_counters": spawn_term_counters,
}


def main() -> None:
    serve(HANDLERS, on_startup=on_startup)
