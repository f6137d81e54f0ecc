"""The preview app's client requests: ``list_runs``, ``select``, ``visible``, ``submit``.

Handlers for :class:`examples.web.frontdoor.FrontDoor` (design §7.1, §7.2), each
``await handler(conn, request)``:

* ``list_runs`` → ``run_list`` (every run: name, experiment, sample, GUID, planned
  shape, ``completed`` (False while it is being written) and rows so far). After the
  answer, the connection gets a :class:`~examples.preview.push.ClientPusher`: a
  ``payload`` push of every image already drawn, then of every new one (a late client
  catches up this way; asking again re-sends them all). Pushes of a changed run list
  (``run_list`` with ``request_id`` null) go to these connections too.
* ``select`` {run_id|null} and ``visible`` {run_ids} → ``ok``: one atomic
  ``SetPriority`` of the scheduler (design §4.2). A run id the database does not have is
  an ``unknown_run`` error and changes nothing.
* ``submit`` of ``preview`` {run_id} draws that run again at a new revision (a new
  event-log run reports it); other operations go to the built-in ``submit``.
* ``cancel`` {run_id} (an event-log run id) is the built-in ``cancel`` (design §6.7: the
  true state is answered); when it cancelled a measurement run's current event-log run,
  queued or running, that run's work stops too (:meth:`WorkMixin.halt
  <examples.preview.work.WorkMixin.halt>`).

Each ``run_list`` row carries the run's ``status`` and its current event-log run
(``job_run_id``), so a client that connects late needs no replay of old events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from actors import SetPriority, SourceChanged
from actors.errors import InvalidCommand, UnknownRun
from examples.preview.push import ClientPusher, ImageStore
from examples.preview.runs import RunRecord, summary_message
from examples.web.api import BUILTIN_HANDLERS
from protocol import messages

if TYPE_CHECKING:
    from examples.web.api import Handler
    from examples.web.connection import Connection

__all__ = ["ClientsMixin", "OPERATION"]

#: The event-log operation of one measurement run.
OPERATION = "preview"


class ClientsMixin:
    """The client request handlers of :class:`examples.preview.app.PreviewApp`."""

    runs: dict[int, RunRecord]
    images: ImageStore
    selected: int | None
    visible: frozenset[int]
    _nursery: trio.Nursery | None
    _refreshes: int
    _priority_lock: trio.Lock
    push_timeout: float

    async def _ask(self, message: object) -> Any:  # provided by PreviewApp
        raise NotImplementedError

    def track_job(self, record: RunRecord, job: int) -> None:  # provided by WorkMixin
        raise NotImplementedError

    def halt_job(self, job: int) -> bool:  # provided by WorkMixin
        raise NotImplementedError

    @property
    def handlers(self) -> dict[str, Handler]:
        """Front-door handlers: ``list_runs``, ``select``, ``visible``, ``submit``, ``cancel``."""
        return {
            "list_runs": self.on_list_runs,
            "select": self.on_select,
            "visible": self.on_visible,
            "submit": self.on_submit,
            "cancel": self.on_cancel,
        }

    def _summaries(self) -> tuple[messages.RunSummary, ...]:
        return tuple(summary_message(r) for r in self.runs.values())

    def _priority(self) -> tuple[int | None, frozenset[int]]:
        return self.selected, self.visible

    def _broadcast(self, message: messages.Message) -> None:
        for pusher in list(self.images.pushers):
            target: Any = pusher.target
            if hasattr(target, "push_nowait"):
                target.push_nowait(message)

    async def on_list_runs(self, conn: Connection, request: messages.ListRuns) -> messages.Message:
        """``list_runs`` → ``run_list``; then every image is pushed (``payload``)."""
        pusher = conn.data.get("preview_pusher")
        if pusher is not None and not pusher.ended:
            conn.after_reply(pusher.mark_all)  # send every image again
        else:  # the first list_runs, or the pusher ended (resync_required)
            pusher = conn.data["preview_pusher"] = ClientPusher(
                self.images, conn, self._priority, push_timeout=self.push_timeout
            )
            scope = conn.data["preview_scope"] = trio.CancelScope()
            conn.after_reply(lambda: self._start_pusher(pusher, scope))
        return messages.RunList(request_id=request.request_id, runs=self._summaries())

    def _start_pusher(self, pusher: ClientPusher, scope: trio.CancelScope) -> None:
        pusher.mark_all()
        assert self._nursery is not None

        async def push() -> None:
            with scope:
                await pusher.run()

        self._nursery.start_soon(push)

    def on_disconnect(self, conn: Connection) -> None:
        """Stop the image pushes of a closed connection (a front-door hook)."""
        scope = conn.data.get("preview_scope")
        if scope is not None:
            scope.cancel()

    def _check_runs(self, run_ids: list[int]) -> None:
        unknown = [r for r in run_ids if r not in self.runs]
        if unknown:
            raise UnknownRun(
                f"no run {', '.join(map(str, unknown[:10]))} in this database",
                run_ids=unknown[:10],
            )

    async def on_select(self, conn: Connection, request: messages.Select) -> None:
        """``select`` → ``ok``: the selected run, atomically (design §4.2).

        Raises:
            UnknownRun: (``unknown_run``) no such run; nothing changed.
        """
        self._check_runs([] if request.run_id is None else [request.run_id])
        async with self._priority_lock:  # one SetPriority at a time: state == scheduler's
            visible = tuple(sorted(self.visible))
            priority = SetPriority(selected=request.run_id, visible=visible)
            await self._ask(priority)
            self.selected = request.run_id

    async def on_visible(self, conn: Connection, request: messages.Visible) -> None:
        """``visible`` → ``ok``: the runs in the client's viewport (design §4.2).

        Raises:
            UnknownRun: (``unknown_run``) a run id is unknown; nothing changed.
        """
        self._check_runs(list(request.run_ids))
        async with self._priority_lock:
            priority = SetPriority(selected=self.selected, visible=request.run_ids)
            await self._ask(priority)
            self.visible = frozenset(request.run_ids)

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
            self._check_runs([run_id])
            record = self.runs[run_id]
        reply = await BUILTIN_HANDLERS["submit"](conn, request)
        if (
            record is not None
            and isinstance(reply, messages.Receipt)
            and reply.run_id is not None  # admitted (a refusal has no run)
            and reply.run_id != record.job
        ):
            self.track_job(record, reply.run_id)
            self._refreshes += 1
            record.requested = f"{record.token}~r{self._refreshes}"
            await self._ask(SourceChanged(run_id=record.run_id, revision=record.requested))
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
            self.halt_job(request.run_id)
        return reply
