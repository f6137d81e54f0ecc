"""The operations an event log accepts, and their built-in runners (design §6.2, §6.6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ._types import OperationSpec, RunStatus

    #: ``report_progress(fraction, note=None)``: sync; fraction in [0, 1].
    ProgressReporter = Callable[..., None]
    #: ``await runner(run_status, report_progress)`` returns a JSON-compatible result.
    Runner = Callable[[RunStatus, ProgressReporter], Awaitable[Any]]

__all__ = ["Operations"]


class Operations:
    """The registry shared by the event log's parts: specs and runners by name.

    ``specs`` and ``runners`` are read directly (plain dicts, looked up per event on the
    hot paths); only :meth:`register` changes them.
    """

    __slots__ = ("runners", "specs")

    def __init__(self) -> None:
        self.specs: dict[str, OperationSpec] = {}
        self.runners: dict[str, Runner] = {}

    def register(self, spec: OperationSpec, runner: Runner | None = None) -> None:
        """Add (or replace) an operation and its built-in runner, or drop its runner."""
        self.specs[spec.name] = spec
        if runner is not None:
            self.runners[spec.name] = runner
        else:
            self.runners.pop(spec.name, None)

    def coalescing(self, name: str) -> bool:
        """True when runs of ``name`` may be joined by equal requests (design §6.4)."""
        spec = self.specs.get(name)
        return spec is not None and not spec.mutating
