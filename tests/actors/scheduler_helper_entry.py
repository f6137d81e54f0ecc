"""A helper entry point for the scheduler's real-helper tests (no trio, no attrs).

Its ``time.sleep`` calls are the *workload* of the simulated jobs inside the child
process, not test timing. Each job appends ``"<event> <attempt> <time.monotonic()>"``
lines to the log file it is given, so the test can see, across processes, when every
execution really started and ended (``time.monotonic`` is one clock for the whole
machine).

Spec: ``HelperSpec(entry="scheduler_helper_entry:main", cwd="tests/actors")``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from actors.helper import JobContext, serve


def _log(path: str, event: str, attempt: int) -> None:
    with open(path, "a", encoding="utf-8") as log:
        log.write(f"{event} {attempt} {time.monotonic()!r}\n")


def stubborn(payload: dict[str, Any], ctx: JobContext) -> Any:
    """Attempt 1 ignores a cancel for ``ignore`` seconds, then honours it (within 10 s);
    later attempts return at once."""
    path, attempt = payload["log"], int(payload["attempt"])
    _log(path, "start", attempt)
    try:
        if attempt == 1:
            deaf_until = time.monotonic() + float(payload["ignore"])
            while time.monotonic() < deaf_until:
                time.sleep(0.005)  # busy, never looking at the cancel frame
            give_up = time.monotonic() + 10.0
            while time.monotonic() < give_up:
                ctx.check_cancel()  # raises CancelRequested once cancelled
                time.sleep(0.002)
        return f"attempt {attempt}"
    finally:
        _log(path, "end", attempt)


def job(payload: dict[str, Any], ctx: JobContext) -> Any:
    """Run ``payload["run"]``: the run named ``payload["crash"]`` kills its helper."""
    if payload["run"] == payload["crash"]:
        os._exit(70)
    return payload["run"]


def main() -> None:
    serve({"stubborn": stubborn, "job": job})
