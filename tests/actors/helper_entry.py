"""A helper entry point for the tests: runs in the helper child (no trio, no attrs).

Spec: ``HelperSpec(entry="tests.actors.helper_entry:main", cwd=<repo root>)``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from actors.helper import JobContext, JobError, serve


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


def noisy(payload: Any, ctx: JobContext) -> Any:
    print("this goes to stderr, not into the frame stream")
    os.write(1, b"raw bytes on fd 1 go to stderr too\n")
    return payload


def big(payload: Any, ctx: JobContext) -> Any:
    return "x" * int(payload)


def unencodable(payload: Any, ctx: JobContext) -> Any:
    return {1, 2, 3}


def on_startup(options: dict[str, Any]) -> Any:
    if options.get("fail_startup"):
        raise JobError("cannot open the database", code="source_unreadable")
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
    "noisy": noisy,
    "big": big,
    "unencodable": unencodable,
}


def main() -> None:
    serve(HANDLERS, on_startup=on_startup)
