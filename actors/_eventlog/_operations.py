"""The operations an event log accepts, and their built-in runners (design §6.2, §6.6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from ._types import OperationSpec, RunStatus

__all__ = ["Operations", "ProgressReporter", "Runner"]


class ProgressReporter(Protocol):
    """What a built-in runner is handed to report progress (design §6.6).

    ``report(fraction, note=None)``: sync and never blocks; ``fraction`` in [0, 1]
    (a bad one raises ``ValueError`` naming it), ``note`` a short text or None.
    """

    def __call__(self, fraction: float, note: str | None = None, /) -> None: ...


class Runner(Protocol):
    """A built-in runner of an operation (design §6.6).

    ``await runner(run_status, report)`` does one run and returns its JSON-compatible
    result; ``report`` is a :class:`ProgressReporter`. An exception fails the run
    (``runner_failed``); the event log's ``run_timeout`` bounds it.
    """

    def __call__(self, run: RunStatus, report: ProgressReporter, /) -> Awaitable[Any]: ...


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
