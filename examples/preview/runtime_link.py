"""RuntimeLink: the runtime that the preview app's parts talk to (design §7.2).

The app is built before its runtime exists (the runtime's ``execute`` is one of the
app's methods), so every part that calls an actor holds this link rather than the
runtime itself; :meth:`PreviewApp.running <examples.preview.app.PreviewApp.running>`
attaches the runtime. It also asks the scheduler within the app's deadline, so that no
part repeats it. Depends on no other part of the app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors import EventLogClient, Runtime

__all__ = ["RuntimeLink"]


class RuntimeLink:
    """The running runtime, once attached.

    Args:
        ask_timeout: Seconds (trio clock) an ask of the scheduler may take.
    """

    def __init__(self, *, ask_timeout: float) -> None:
        self._ask_timeout = ask_timeout
        self._runtime: Runtime | None = None
        self._eventlog: EventLogClient | None = None

    def attach(self, runtime: Runtime, eventlog: EventLogClient | None = None) -> None:
        """Talk to ``runtime`` from now on, and report runs to ``eventlog`` (default the
        runtime's own; a server of several databases shares one, design §7.5)."""
        self._runtime = runtime
        self._eventlog = eventlog

    @property
    def eventlog(self) -> EventLogClient:
        """The event log this app's runs are reported to.

        Raises:
            RuntimeError: no runtime is attached (the app is not running).
        """
        return self._eventlog if self._eventlog is not None else self.runtime.eventlog

    @property
    def runtime(self) -> Runtime:
        """The attached runtime.

        Raises:
            RuntimeError: no runtime is attached (the app is not running).
        """
        if self._runtime is None:
            raise RuntimeError("the preview app is not running")
        return self._runtime

    async def ask_scheduler(self, message: object) -> Any:
        """Ask the scheduler ``message`` (within ``ask_timeout`` seconds); its answer.

        Raises:
            AskTimeout: (``ask_timeout``) no answer in time.
            ActorError: the scheduler refused the message (design §4).
        """
        return await self.runtime.scheduler.ask(message, timeout=self._ask_timeout)
