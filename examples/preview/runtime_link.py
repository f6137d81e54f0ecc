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
    from actors import Runtime

__all__ = ["RuntimeLink"]


class RuntimeLink:
    """The running runtime, once attached.

    Args:
        ask_timeout: Seconds (trio clock) an ask of the scheduler may take.
    """

    def __init__(self, *, ask_timeout: float) -> None:
        self._ask_timeout = ask_timeout
        self._runtime: Runtime | None = None

    def attach(self, runtime: Runtime) -> None:
        """Talk to ``runtime`` from now on."""
        self._runtime = runtime

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
