"""The small function ``benchmarks/run_sync.py`` runs every way (imported in the child).

``square`` for ``run_sync`` and trio-parallel, ``square_job`` as a named handler over
the same work; ``main`` is the helper entry serving both (and the built-in calls).
"""

from __future__ import annotations

from actors.helper import JobContext, serve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def square(x: int) -> int:
    return x * x


def square_job(payload: Any, ctx: JobContext) -> Any:
    return square(payload)


def main() -> None:
    serve({"square": square_job})
