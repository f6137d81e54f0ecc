"""Clients: the preview app's client requests and image pushes (design §7.1, §7.2).

Handlers for :class:`examples.web.frontdoor.FrontDoor`, each
``await handler(conn, request)`` (see :attr:`Clients.handlers`):

* ``list_runs`` → ``run_list`` (every run: name, experiment, sample, GUID, planned
  shape, ``completed`` (False while it is being written) and rows so far). After the
  answer, the connection gets a :class:`~examples.preview.app.images.ClientPusher`: an
  ``image_ready`` notice of every image already drawn, then of every new one (a late
  client catches up this way; asking again re-sends them all; the images themselves are
  fetched by URL, design §7.6). Pushes of a changed run list
  (``run_list`` with ``request_id`` null, :meth:`Clients.push_run_list`) go to these
  connections too.
* ``select`` {run_id|null} and ``visible`` {run_ids} → ``ok``: one atomic
  ``SetPriority`` of the scheduler (design §4.2,
  :class:`~examples.preview.app.selection.Selection`).
  A run id the database does not have is an ``unknown_run`` error and changes nothing.
* ``submit`` of ``preview`` {run_id} draws that run again at a new revision (a new
  event-log run reports it); other operations go to the built-in ``submit``.
* ``list_run_times``, ``run_details`` and ``draw`` look into one run (times, snapshot
  and metadata, a chosen slice or scale): :class:`~examples.preview.app.run_views.RunViews`.
* ``cancel`` {run_id} (an event-log run id) is the built-in ``cancel`` (design §6.7: the
  true state is answered); when it cancelled a measurement run's current event-log run,
  queued or running, that run's work stops too
  (:meth:`ClaimRunner.halt_job <examples.preview.app.claim_runner.ClaimRunner.halt_job>`).

Each ``run_list`` row carries the run's ``status`` and its current event-log run
(``job_run_id``), so a client that connects late needs no replay of old events.

Depends on the :class:`~examples.preview.app.runs.RunTable`, the
:class:`~examples.preview.app.selection.Selection`, the
:class:`~examples.preview.app.images.ImageStore`,
:class:`~examples.preview.app.revisions.Revisions` and the
:class:`~examples.preview.app.claim_runner.ClaimRunner`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors.errors import InvalidCommand
from protocol import messages

from ...web.api import BUILTIN_HANDLERS
from ...web.connection import wire_json
from .eventlog_runs import OPERATION
from .images import ClientPusher

if TYPE_CHECKING:
    from ...web.api import Handler
    from ...web.connection import Connection
    from .annotations import Annotations
    from .claim_runner import ClaimRunner
    from .images import ImageStore
    from .revisions import Revisions
    from .run_views import RunViews
    from .runs import RunTable
    from .selection import Selection

__all__ = ["Clients"]

#: ``conn.data`` keys of a connection's image pusher and of the cancel scope of its task.
_PUSHER = "preview_pusher"
_SCOPE = "preview_scope"


class Clients:
    """The client request handlers and the image pushes (see the module docstring).

    Args:
        table: The runs.
        selection: The selected and visible runs.
        images: The images pushed to clients.
        revisions: Redraws a run for a ``submit``.
        claims: Halts a run whose event-log run a client cancelled.
        push_timeout: Seconds (trio clock) an image push waits for room in a client's
            queue.
        views: The handlers that look into one run, or None (not served).
        notes: The runs' stars and notes, or None (``annotate`` not served).
    """

    def __init__(
        self,
        table: RunTable,
        selection: Selection,
        images: ImageStore,
        revisions: Revisions,
        claims: ClaimRunner,
        *,
        push_timeout: float,
        views: RunViews | None = None,
        notes: Annotations | None = None,
    ) -> None:
        self._table = table
        self._selection = selection
        self._images = images
        self._revisions = revisions
        self._claims = claims
        self._push_timeout = push_timeout
        self._views = views
        self._notes = notes
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the connections' image pushes until cancelled (a long-running service).

        Started with ``await nursery.start(clients.run)``: ``list_runs`` can start
        pushes once it has returned.
        """
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if self._notes is not None:
                    # Read now, so the first list_runs (and its first image) waits for
                    # no worker thread.
                    nursery.start_soon(self._notes.load)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None

    @property
    def handlers(self) -> dict[str, Handler]:
        """Front-door handlers: ``list_runs``, ``select``, ``visible``, ``submit``, ``cancel``,
        and those of the :class:`~examples.preview.app.run_views.RunViews`, if any."""
        handlers: dict[str, Handler] = {
            "list_runs": self.on_list_runs,
            "select": self.on_select,
            "visible": self.on_visible,
            "submit": self.on_submit,
            "cancel": self.on_cancel,
        }
        if self._views is not None:
            handlers.update(self._views.handlers)
        if self._notes is not None:
            handlers["annotate"] = self.on_annotate
        return handlers

    async def on_annotate(self, conn: Connection, request: messages.Annotate) -> messages.Message:
        """``annotate`` → ``ok``; the run list is pushed with the run's star and note.

        Raises:
            UnknownRun: (``unknown_run``) no such run.
            NotesUnwritable: (``notes_unwritable``) the notes file beside the database
                could not be written.
        """
        assert self._notes is not None
        self._table.check([request.run_id])
        await self._notes.set(
            self._table, request.run_id, starred=request.starred, note=request.note
        )
        if self._notes.apply(self._table):
            self.push_run_list()
        return messages.OkReply(request_id=request.request_id)

    def push_run_list(self) -> None:
        """Push the run list to every connection with image pushes (never waits)."""
        if not self._images.pushers:
            return  # nobody to tell: the rows are not even built
        if self._notes is not None:
            self._notes.apply(self._table)  # new runs get their stars too
        # Encoded once for every connection, from the rows kept unstructured: a run
        # list is pushed at each probe while runs change (design §7.2).
        fields = {"type": messages.TAGS[messages.RunList], "request_id": None,
                  "runs": self._table.row_fields()}  # fmt: skip
        text = wire_json(fields)
        for pusher in list(self._images.pushers):
            target: Any = pusher.target
            if hasattr(target, "push_text_nowait"):
                target.push_text_nowait(text)

    async def on_list_runs(self, conn: Connection, request: messages.ListRuns) -> messages.Message:
        """``list_runs`` → ``run_list``; then every image is announced (``image_ready``)."""
        pusher = conn.data.get(_PUSHER)
        if self._notes is not None:  # stars and notes: read once, for every row
            await self._notes.load()
            self._notes.apply(self._table)
        if pusher is not None and not pusher.ended:
            conn.after_reply(pusher.mark_all)  # send every image again
        else:  # the first list_runs, or the pusher ended (resync_required)
            pusher = conn.data[_PUSHER] = ClientPusher(
                self._images, conn, self._selection.priority, push_timeout=self._push_timeout
            )
            scope = conn.data[_SCOPE] = trio.CancelScope()
            conn.after_reply(lambda: self._start_pusher(pusher, scope))
        return messages.RunList(request_id=request.request_id, runs=self._table.summaries())

    def _start_pusher(self, pusher: ClientPusher, scope: trio.CancelScope) -> None:
        pusher.mark_all()
        if self._nursery is None:
            raise RuntimeError("the preview app is not running")

        async def push() -> None:
            with scope:
                await pusher.run()

        self._nursery.start_soon(push)

    def on_disconnect(self, conn: Connection) -> None:
        """Stop the image pushes of a closed connection (a front-door hook)."""
        scope = conn.data.pop(_SCOPE, None)
        if scope is not None:
            scope.cancel()
        # A later list_runs (e.g. after use_database, design §7.5) starts a fresh pusher.
        conn.data.pop(_PUSHER, None)

    async def on_select(self, conn: Connection, request: messages.Select) -> None:
        """``select`` → ``ok``: the selected run, atomically (design §4.2).

        Raises:
            UnknownRun: (``unknown_run``) no such run; nothing changed.
        """
        self._table.check([] if request.run_id is None else [request.run_id])
        await self._selection.select(request.run_id)

    async def on_visible(self, conn: Connection, request: messages.Visible) -> None:
        """``visible`` → ``ok``: the runs in the client's viewport (design §4.2).

        Raises:
            UnknownRun: (``unknown_run``) a run id is unknown; nothing changed.
        """
        self._table.check(request.run_ids)
        await self._selection.show(request.run_ids)

    async def on_submit(
        self, conn: Connection, request: messages.Submit
    ) -> messages.Message | None:
        """``submit``: ``preview`` of a known run draws it again at a new revision.

        Raises:
            InvalidCommand: (``invalid_command``) ``run_id`` is not an integer.
            UnknownRun: (``unknown_run``) no such run.
        """
        record = None
        if request.operation == OPERATION:
            run_id = request.arguments.get("run_id")
            if isinstance(run_id, bool) or not isinstance(run_id, int):
                raise InvalidCommand(
                    "preview: arguments.run_id must be an integer", fields=["run_id"]
                )
            db = request.arguments.get("db", self._images.db)
            if db != self._images.db:
                raise InvalidCommand(
                    f"preview: arguments.db {str(db)[:80]!r} is not the database in use "
                    f"({self._images.db!r}; see use_database)",
                    fields=["db"],
                )
            self._table.check([run_id])
            record = self._table.runs[run_id]
            # Its event-log run names the database, as every run of this app does.
            request = attrs.evolve(request, arguments={**request.arguments, "db": db})
        reply = await BUILTIN_HANDLERS["submit"](conn, request)
        if (
            record is not None
            and isinstance(reply, messages.Receipt)
            and reply.run_id is not None  # admitted (a refusal has no run)
            and reply.run_id != record.job
        ):
            self._table.track_job(record, reply.run_id)
            await self._revisions.redraw(record)
        return reply

    async def on_cancel(
        self, conn: Connection, request: messages.Cancel
    ) -> messages.Message | None:
        """``cancel`` → ``status_reply`` with the true state; stops the run's work (§6.7).

        Raises:
            UnknownRun: (``unknown_run``) no such event-log run.
        """
        reply = await BUILTIN_HANDLERS["cancel"](conn, request)
        if isinstance(reply, messages.StatusReply) and reply.state == "cancelled":
            self._claims.halt_job(request.run_id)
        return reply
