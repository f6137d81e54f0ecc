"""DatabaseEntry: one database of a preview server of several (design §7.5).

An entry is found (``idle`` once checked readable, or ``error`` with the reason), then
started on first use (``starting``, then ``ready``): :meth:`DatabaseEntry.serve` runs
its app's runtime until the entry is stopped or the server stops. No I/O of its own
but in :meth:`serve`.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors import open_runtime
from protocol import messages

from .image_urls import database_id, listed_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from actors import EventLogClient

    from .app import PreviewApp

__all__ = ["DatabaseEntry", "display_name"]


def display_name(path: Path) -> str:
    """``path``'s name as text any client can show and any log can hold on one line:
    bytes that are not UTF-8 and control characters (a newline...) become U+FFFD."""
    name = os.fsencode(path.name).decode("utf-8", "replace")
    return "".join("\ufffd" if unicodedata.category(c) == "Cc" else c for c in name)


@attrs.define(kw_only=True, eq=False)
class DatabaseEntry:
    """One database: its id, state and, once started, its app."""

    path: Path
    """The file, as listed in its folder (never sent to clients; see
    :func:`~examples.preview.image_urls.listed_path`)."""
    db: str
    """Its id (:func:`~examples.preview.image_urls.database_id`)."""
    state: str = "idle"
    """``idle``, ``starting``, ``ready`` or ``error`` (design §7.5)."""
    error: str | None = None
    """Why it is in ``error``."""
    runs: int | None = None
    """Its run count when last checked."""
    identity: dict[str, Any] = attrs.field(factory=dict)
    """:func:`~examples.preview.app.open_database`'s answer, once checked."""
    stamp: tuple[int, int, int, int, bytes] | None = None
    """The file's device, inode, size, modification time and header when last checked
    (:func:`~examples.preview.databases.file_stamp`); None until checked readable."""
    app: PreviewApp | None = None
    """Its app, once started."""
    announced: bool = False
    """True once a ``database_added`` told the clients about it."""
    kept: bool = False
    """True while it stays listed, in error, after its file went away in use."""
    _settled: trio.Event = attrs.field(factory=trio.Event)
    _scope: trio.CancelScope | None = None
    """The scope of the :meth:`serve` of the latest :meth:`begin`."""

    @classmethod
    def found(cls, path: Path) -> DatabaseEntry:
        """A new entry of the file at ``path`` (not checked yet: ``error`` until it is)."""
        return cls(path=path, db=database_id(path), state="error", error="not checked yet")

    @classmethod
    def started(cls, app: PreviewApp) -> DatabaseEntry:
        """The entry of an app the server started itself (``ready``)."""
        entry = cls(
            path=listed_path(Path(app.config.db)),
            db=app.db_id,
            state="ready",
            runs=int(app.identity.get("run_count", 0)),
            identity=app.identity,
            app=app,
            announced=True,
        )
        entry._settled.set()
        return entry

    @property
    def name(self) -> str:
        """The file's name as clients and logs see it (:func:`display_name`)."""
        return display_name(self.path)

    def info(self) -> messages.DatabaseInfo:
        """The entry as clients see it."""
        return messages.DatabaseInfo(
            db=self.db,
            name=self.name[:255] or self.db,
            state=self.state,
            error=None if self.error is None else self.error[: messages.MAX_TEXT_LENGTH],
            runs=self.runs,
        )

    def fail(self, why: str) -> None:
        """Put the entry in ``error`` (its app, if any, is dropped)."""
        self.state = "error"
        self.error = why
        self.app = None
        self._settled.set()

    def begin(self, app: PreviewApp) -> None:
        """``idle`` → ``starting`` with ``app`` (then run :meth:`serve`)."""
        self.state = "starting"
        self.app = app
        # A fresh scope each time: a scope serves one ``with`` only, and a file gone
        # and back is served again.
        self._scope = trio.CancelScope()
        self._settled = trio.Event()

    async def wait_settled(self) -> None:
        """Wait until the entry is ``ready`` or in ``error`` (no timeout of its own)."""
        await self._settled.wait()

    async def serve(self, eventlog: EventLogClient, on_ready: Callable[[], object]) -> None:
        """Run the app's runtime, reporting to ``eventlog``, until :meth:`stop` or
        cancelled; the entry is ``ready`` meanwhile, and ``on_ready()`` is called once it
        is (a checkpoint).

        Raises:
            ActorError: the runtime could not start (e.g. ``helper_startup_failed``).
        """
        app = self.app
        scope = self._scope
        if app is None or scope is None:
            raise RuntimeError("serve() after begin() only")
        runtime_config = await trio.to_thread.run_sync(app.runtime_config)
        with scope:
            async with (
                open_runtime(runtime_config) as runtime,
                app.running(runtime, eventlog=eventlog),
            ):
                self.state = "ready"
                self._settled.set()
                on_ready()
                await trio.sleep_forever()

    def stop(self) -> None:
        """Stop serving (its helpers are reaped as :meth:`serve` unwinds); never waits."""
        if self._scope is not None:
            self._scope.cancel()
        self.app = None
