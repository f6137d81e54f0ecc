"""A subscriber far behind the event log's head catches up page by page (design §7.4).

A ``subscribe`` answers with one ``watch`` page; if the client is further behind, the
rest of the backlog must not go into its bounded port at once (that would overflow it
and drop the client, design §6.9). :func:`catch_up` instead pages with ``watch`` and
pushes each event through the connection's bounded send queue, so it goes at the
client's pace: a client that does not read is still dropped after ``push_timeout``
seconds. When a page comes back short (the head is reached) it returns the last cursor,
and the connection opens its live port from there: events appended meanwhile are in
that port's backlog, so none is missed or sent twice.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from actors.errors import ActorError

if TYPE_CHECKING:
    from actors import Event, EventLogClient, Port

    from .config import FrontDoorConfig

__all__ = ["Subscriber", "catch_up"]

LOGGER = logging.getLogger("examples.frontdoor")


class Subscriber(Protocol):
    """What :func:`catch_up` needs of a connection (a front-door ``Connection``)."""

    @property
    def name(self) -> str:
        """The connection's name, for the log records."""
        ...

    async def push_event(self, event: Event) -> bool:
        """Queue ``event`` for the client; False if the client was dropped meanwhile."""
        ...

    @property
    def front(self) -> Front:
        """The front door (its event log and settings)."""
        ...

    def port_name(self) -> str:
        """A fresh name for the connection's next event-log port."""
        ...

    def mark_resync(self, head: int | None = None) -> None:
        """Drop the client: ``resync_required`` with its cursor, then close 4000."""
        ...


class Front(Protocol):
    """What :func:`catch_up` needs of the front door."""

    @property
    def eventlog(self) -> EventLogClient:
        """The event log to page and subscribe to."""
        ...

    @property
    def config(self) -> FrontDoorConfig:
        """``watch_limit`` (events per page) and ``subscriber_bound`` (the port's bound)."""
        ...

    def saw(self, seq: int) -> None:
        """Note that event ``seq`` exists."""
        ...


async def catch_up(subscriber: Subscriber, cursor: int) -> Port | None:
    """Push every event after ``cursor``, then open the live port after the last one.

    Pages with ``watch`` (``watch_limit`` events a page) until a page comes back short:
    the head. Each ``watch`` and the port's opening wait at most the event-log client's
    timeout, each push at most the front door's ``push_timeout`` (then the client is
    dropped for falling behind, design §7.1).

    Args:
        subscriber: The connection to push to.
        cursor: The seq of the last event the client has.

    Returns:
        The live port (``subscriber_bound``), from the last event pushed (``cursor`` if
        none); None if the client was dropped. A failed call (``cursor_expired``: the
        log's retention passed the cursor while paging; ``ledger_unavailable``; a
        timeout) drops it too, through the resync path: ``resync_required`` with the
        last event it was sent, then close 4000 (design §7.4). Coming back from that
        cursor, its ``subscribe`` is answered ``cursor_expired``, whose
        ``details.resync`` says to take a snapshot (design §6.15).
    """
    front = subscriber.front
    log, limit = front.eventlog, front.config.watch_limit
    try:
        while True:
            page = await log.watch(cursor, limit=limit)
            front.saw(page.head)
            for event in page.events:
                if not await subscriber.push_event(event):
                    return None
            cursor = page.cursor
            if len(page.events) < limit:
                bound = front.config.subscriber_bound
                return await log.subscribe(
                    subscriber.port_name(), cursor=cursor, bound=bound, local=False
                )
    except ActorError as exc:
        LOGGER.info(
            "%s: catching up after %d failed (%s): resync", subscriber.name, cursor, exc.code,
            extra={"event": "catchup_failed", "connection": subscriber.name, "cursor": cursor,
                   "code": exc.code},
        )  # fmt: skip
        subscriber.mark_resync()
        return None
