"""The event-log system actor (design §6, on the §1 actor core).

:class:`EventLogActor` owns one :class:`~actors.EventLog` and serves it over its
mailbox: every request is one of the message classes declared in
:mod:`actors._eventlog._messages`, answered through ``ask`` as its declaration says.
Requests are decided in mailbox order; those declared ``waits`` (for durability or a
ledger read: ``Submit``, ``Start``, ``Cancel``, ``Status``, ``Watch``, ``Resume``,
``Discard``, ``CheckDrift``, ``QueryFinished``) are then awaited in a task of the
actor's nursery, so one slow commit never stalls the mailbox. Each such task works at
most ``request_timeout`` seconds, and at most ``max_pending`` exist at once; beyond
that a request is refused with ``mailbox_full`` instead of holding the mailbox (design §6.19).
``Start`` is answered once the run's ``running`` state is durable, so a crash caused by
the work it starts is always counted as an interruption (design §6.10). ``Progress`` and
``Finish`` are answered at once (their rows commit within one batch).

Its client, :class:`~actors.EventLogClient` (:mod:`actors._eventlog._client`), has
one async method per declared request, derived from the same declarations.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import trio

from protocol.errors import bound_message, describe_exception

from .._core import Actor, unwrap_sole_exception
from ..errors import ActorCrashed, ActorError, InvalidCommand, LedgerUnavailable, MailboxFull
from ._checks import check_kind, json_mapping
from ._eventlog import EventLog
from ._messages import REQUESTS, Finish, Record, Start, Submit, Subscribe

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Mapping

    from .._core import ActorRef, Reply
    from ._messages import EventLogRequest
    from ._operations import Runner
    from ._types import EventLogConfig, OperationSpec

__all__ = ["EventLogActor"]

_log = logging.getLogger("actors.eventlog")


class EventLogActor(Actor):
    """The event-log system actor (design §6); see the module docstring.

    Starting it (``await nursery.start(actor.run)``) opens the ledger and boots before
    the ref is handed out; a damaged ledger makes ``nursery.start`` raise
    :class:`~actors.errors.LedgerCorrupt` (or ``LedgerVersionUnsupported``). Stopping it
    (``ref.stop(grace)``) drains the mailbox, then flushes and closes the ledger; runners
    still running are cancelled and will be *held* at the next boot.

    No request holds the mailbox longer than ``writable_timeout`` seconds, and none that
    waits is worked on longer than ``request_timeout`` (design §6.19); an unexpected
    exception while answering one is logged and answered ``actor_crashed``, and the log
    goes on.

    Args:
        config: The event log's settings.
        operations: Accepted operations.
        runners: Built-in runners by operation (see :class:`EventLog`).
    """

    name = "event_log"
    mailbox_capacity = 64
    #: Waiting requests (durability, ledger reads) in flight at once.
    max_pending = 4096

    def __init__(
        self,
        config: EventLogConfig | None = None,
        *,
        operations: Iterable[OperationSpec] = (),
        runners: Mapping[str, Runner] | None = None,
    ) -> None:
        self.log = EventLog(config, operations=operations, runners=runners)
        self._pending = trio.Semaphore(self.max_pending)

    async def run(
        self, *, task_status: trio.TaskStatus[ActorRef] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the event log, then the actor on top of it, until stopped (design §1.3).

        The log's writer and drain run beside the actor's loop, so they outlive it: once
        the loop ended (drained or cancelled), the ledger is flushed and closed.

        Raises:
            LedgerCorrupt: (``ledger_corrupt``) the ledger file is damaged (untouched).
            LedgerVersionUnsupported: (``ledger_version_unsupported``) newer ledger schema.
            LedgerError: (``ledger_error``) SQLite failed.
            Exception: whatever crashed the actor (see :meth:`Actor.run`).
        """
        with unwrap_sole_exception():
            async with trio.open_nursery() as nursery:
                await nursery.start(self.log.run)
                try:
                    await super().run(task_status=task_status)
                finally:
                    self.log._closing.set()  # also when on_stop did not run (a crash)

    async def on_stop(self) -> None:
        """Close the log (commit what is staged, close the ledger) before ``stop`` returns.

        Runs after the mailbox drained and every waiting request was answered, so
        ``await ref.stop()`` returning means the ledger file is complete and closed.
        """
        await self.log.aclose()

    async def handle(self, message: Any, reply: Reply) -> None:
        """Serve one request, as its declaration in ``REQUESTS`` says (design §6).

        A request with a server of its own in ``_SERVERS`` is served by it; any
        other calls the :class:`EventLog` method its declaration names with the
        message's fields, at once or (a waiting request) from a task.

        Raises:
            MailboxFull: (``mailbox_full``) ``max_pending`` requests wait already
                (``details["retry_after"]``, seconds); nothing was decided (§6.19).
            InvalidCommand: (``invalid_command``) ``message`` is not a request.
        """
        spec = REQUESTS.get(type(message))
        if spec is None:
            raise InvalidCommand(f"the event log does not understand {message!r}"[:500])
        if spec.waits and not self._pending.value:
            raise self._busy()
        server = self._SERVERS.get(spec.message)
        if server is not None:
            await server(self, message, reply)
            return
        fn = getattr(self.log, spec.method)
        fields = attrs.asdict(message, recurse=False)
        if spec.waits:
            await self._later(reply, fn, decides=spec.decides, **fields)
        else:
            reply.send(fn(**fields))

    async def _submit(self, message: Submit, reply: Reply) -> None:
        log = self.log
        if not log.writable and not await self._wait_writable():
            retry_after = log.config.writable_timeout
            reply.send(
                log.refuse(
                    message.operation,
                    message.arguments,
                    message.request_id,
                    actor=message.actor,
                    retry_after=retry_after,
                )
            )
            return
        admission = log.admit(
            message.operation, message.arguments, message.request_id, actor=message.actor
        )
        await self._later(reply, admission.wait, decides=False)

    async def _start(self, message: Start, reply: Reply) -> None:
        # Answered once ``running`` is durable, so a crash it causes counts (§6.10).
        status = self.log.start(message.run_id, on_cancel=message.on_cancel)
        await self._later(reply, self._when_durable, status, decides=False)

    async def _finish(self, message: Finish, reply: Reply) -> None:
        log = self.log
        if not log.writable:
            await self._wait_writable()  # then decided anyway: never lost
        reply.send(log.finish(message.run_id, message.verdict, message.result, error=message.error))

    async def _subscribe(self, message: Subscribe, reply: Reply) -> None:
        if not reply.wanted:
            # The asker gave up: a port nobody holds would only fill up. No
            # checkpoint lies between here and the answer, which is delivered.
            _log.info(
                "subscribe skipped: its asker left",
                extra={"port": message.name, "reason": "asker_gone"},
            )
            return
        reply.send(self.log.subscribe(**attrs.asdict(message, recurse=False)))

    async def _record(self, message: Record, reply: Reply) -> None:
        reply.send(self.log.record(*_record_fields(message)))

    #: The requests served other than by a plain call of their ``EventLog`` method.
    _SERVERS: ClassVar[Mapping[type[EventLogRequest[Any]], Callable[..., Awaitable[None]]]] = {
        Submit: _submit,
        Start: _start,
        Finish: _finish,
        Subscribe: _subscribe,
        Record: _record,
    }

    async def _when_durable(self, value: Any) -> Any:
        await self.log.flush()
        return value

    async def _wait_writable(self) -> bool:
        # Back-pressure holds the mailbox, so for writable_timeout at most (§6.19).
        timeout = self.log.config.writable_timeout
        with trio.move_on_after(timeout) as scope:
            await self.log.wait_writable()
        if scope.cancelled_caught:
            _log.warning(
                "the ledger did not catch up within %g s; going on without waiting",
                timeout,
                extra={"writable_timeout": timeout, "reason": "ledger_backlog"},
            )
        return not scope.cancelled_caught

    def _busy(self) -> MailboxFull:
        retry_after = self.log.config.retry_after_max
        _log.warning(
            "the event log refuses a request: %d wait already",
            self.max_pending,
            extra={"pending": self.max_pending, "retry_after": retry_after},
        )
        return MailboxFull(
            f"the event log has {self.max_pending} requests waiting; retry later",
            pending=self.max_pending,
            retry_after=retry_after,
        )

    async def _later(
        self,
        reply: Reply,
        fn: Callable[..., Awaitable[Any]],
        *args: Any,
        decides: bool = True,
        **kwargs: Any,
    ) -> None:
        # ``decides``: ``fn`` makes a decision, so it runs even for an asker who left;
        # work that only waits or reads is skipped then (design §6.19).
        if not decides and not reply.wanted:
            what = getattr(fn, "__qualname__", type(fn).__name__)
            _log.debug(
                "skipped %s: its asker left", what, extra={"request": what, "reason": "asker_gone"}
            )
            return
        # Never waits for room: a full set of waiting requests must not hold the
        # mailbox (progress, finish), so the request is refused instead.
        try:
            self._pending.acquire_nowait()
        except trio.WouldBlock:
            reply.fail(self._busy())
            return
        self.nursery.start_soon(self._answer, reply, fn, args, kwargs)

    async def _answer(
        self,
        reply: Reply,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        timeout = self.log.config.request_timeout
        what = getattr(fn, "__qualname__", type(fn).__name__)
        try:
            with trio.move_on_after(timeout) as scope:
                value = await fn(*args, **kwargs)
                reply.send(value)
            if scope.cancelled_caught:
                reply.fail(self._timed_out(what, timeout))
        except ActorError as exc:
            reply.fail(exc)
        except Exception as exc:  # a bug must not take the whole log down
            _log.error(
                "the event log failed on %s",
                what,
                exc_info=True,
                extra={"request": what, "error_type": type(exc).__name__},
            )
            text = bound_message(f"the event log failed on {what}: {describe_exception(exc)}")
            reply.fail(ActorCrashed(text, actor=self.name, error_type=type(exc).__name__))
        finally:
            self._pending.release()

    def _timed_out(self, what: str, timeout: float) -> LedgerUnavailable:
        retry_after = self.log.config.retry_after_max
        _log.warning(
            "the event log gave up on %s after %g s: the ledger is slow",
            what,
            timeout,
            extra={"request": what, "request_timeout": timeout, "retry_after": retry_after},
        )
        return LedgerUnavailable(
            f"the event log did not answer within {timeout:g} s: the ledger is slow; a"
            " decision already made stands",
            cause="request_timeout",
            retry_after=retry_after,
        )


def _record_fields(message: Record) -> tuple[str, dict[str, Any]]:
    # EventLog.record raises ValueError (a programming error in process); from a client
    # it is bad input, answered with the field it names, never a crash of the actor.
    try:
        kind = check_kind(message.kind)
    except ValueError as exc:
        raise InvalidCommand(str(exc)[:500], fields=["kind"]) from None
    try:
        return kind, json_mapping(message.data)
    except ValueError as exc:
        raise InvalidCommand(str(exc)[:500], fields=["data"]) from None
