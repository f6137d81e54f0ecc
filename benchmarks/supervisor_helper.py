"""The helper entry point used by ``benchmarks/supervisor.py`` (runs in the child).

Like any helper entry it should import little: no ``typing`` at run time.
"""

from __future__ import annotations

import time

from actors.helper import JobContext, serve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def echo(payload: Any, ctx: JobContext) -> Any:
    return payload


def cooperative(payload: Any, ctx: JobContext) -> Any:
    """Work for up to ``payload`` seconds, checking for cancellation every millisecond."""
    deadline = time.monotonic() + float(payload)
    while time.monotonic() < deadline:
        ctx.check_cancel()
        time.sleep(0.001)
    return "finished"


def main() -> None:
    serve({"echo": echo, "cooperative": cooperative})
