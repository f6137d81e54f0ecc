"""The front door's plain HTTP requests, kept alive between answers (design §7.1, §7.3, §7.6).

A browser fetches the dashboard's images over a few persistent connections (HTTP/1.1
keep-alive, six per server); so does the command-line client (:mod:`examples.web.fetch`).
:class:`PlainHttp` answers a connection's first plain request (its head read by the
front door) and then each next request on the same connection, in order, through one
:class:`~examples.web.httpconn.HttpConnection` (h11's state machine), until one of these
ends it:

* the client closes, or asks to (``Connection: close``; HTTP/1.0 always does);
* the client sends no next request within ``keepalive_timeout`` seconds of an answer
  (the server closes without a word);
* a request's head and answer take more than ``handshake_timeout`` seconds, counted from
  the accept for the first request and from its first byte for a later one (cut
  without an answer: a client that writes or reads slowly pins nothing longer);
* the answer is the ``keepalive_requests``-th of the connection, the server is shutting
  down, the request has a body (never read; any ``Transfer-Encoding`` counts, even an
  empty chunked body: RFC 9112 §6.3), or the answer is a refusal (a foreign ``Host``,
  a protected route without the token: 403), a 405, a bad head (400, 431, 501) or a
  websocket upgrade after a plain request (400: a websocket opens its own connection,
  as browsers do). Then the answer says ``Connection: close``, and the
  server half-closes and drains what the client still sends (:func:`~examples.web.http.
  linger`) within the same deadline.

Every request is checked on its own, as a first one is: the ``Host`` (the DNS-rebinding
defence), then the token for a protected route (:mod:`examples.web.guard`). A connection
holds one of the front door's admission slots while it is kept alive
(:mod:`examples.web.admission`), so ``max_connections`` and ``max_per_address`` bound
these too; when no slot is free, or the server is shutting down, its first request is
answered with ``Connection: close``, as a one-shot request, and never refused. While it
waits for its client (idle, reading a request head, writing an answer the client does
not take, lingering) it only lends its slot: a websocket handshake that finds none free
takes it, and the connection is closed without a word (reason ``reclaimed``). Each
connection's end is one ``DEBUG`` record of ``examples.frontdoor`` with
``event=http_connection_closed``, its ``peer``, ``requests`` and ``reason``
(``client_closed``, ``client_asked``, ``idle_timeout``, ``request_timeout``,
``max_requests``, ``no_slot``, ``shutting_down``, ``body``, ``refused``,
``bad_request``, ``method``, ``reclaimed``) as ``extra``.
"""

from __future__ import annotations

import functools
import logging
from contextlib import nullcontext
from typing import TYPE_CHECKING

import trio

from .guard import Refusal
from .http import error_answer, linger, page_answer, peer_address, plain_answer

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from contextlib import AbstractContextManager

    from .admission import Admission, Slot
    from .config import FrontDoorConfig
    from .http import Page
    from .httpconn import Head, HttpAnswer, HttpConnection
    from .routes import Router

__all__ = ["PlainHttp"]

LOGGER = logging.getLogger("examples.frontdoor")
#: The answer to a websocket upgrade on a connection that already carried a request.
_LATE_UPGRADE = Refusal(
    status=400,
    reason="late_upgrade",
    message="a websocket upgrade must be the first request of its connection",
)


class PlainHttp:
    """The plain HTTP requests of one front door's connections; see the module doc.

    Args:
        config: The front door's settings (``handshake_timeout``, ``keepalive_timeout``,
            ``keepalive_requests``).
        admission: The slots and the Host and token checks (its ``guard``).
        router: The dynamic routes.
        pages: The static pages by path.
        bounded: ``with bounded(deadline) as scope:`` runs a step until ``deadline``
            (trio clock) and lets the front door's ``close()`` cut it short.
        admitting: ``admitting()`` is False once the front door is shutting down.

    Attributes:
        answered: Requests answered so far.
        reused: Requests answered on a connection that had answered one before.
        open: Connections served now that hold a slot.
    """

    def __init__(
        self,
        config: FrontDoorConfig,
        admission: Admission,
        router: Router,
        pages: Mapping[str, Page],
        *,
        bounded: Callable[[float], AbstractContextManager[trio.CancelScope]],
        admitting: Callable[[], bool],
    ) -> None:
        self.config = config
        self.admission = admission
        self.router = router
        self.pages = pages
        self._bounded = bounded
        self._admitting = admitting
        self.answered = self.reused = self.open = 0

    async def serve(self, conn: HttpConnection, head: Head, peer: str, deadline: float) -> None:
        """Answer ``head``, then every next request of ``conn`` until it must close.

        A checkpoint. Returns when the connection is done; the caller closes it.

        Args:
            conn: The connection; ``head`` is the last request head it read.
            head: The first request's head (not a websocket upgrade).
            peer: ``address:port`` of the client.
            deadline: When the first request's answer must be out (trio clock).
        """
        address = peer_address(peer)
        if not self._admitting():
            reason = await self._serve(conn, head, peer, deadline, last="shutting_down")
        elif not self.admission.has_room(address):
            reason = await self._serve(conn, head, peer, deadline, last="no_slot")
        else:
            with self.admission.slot(address) as slot:  # no checkpoint since has_room()
                self.open += 1
                try:
                    reason = await self._serve(conn, head, peer, deadline, slot=slot)
                finally:
                    self.open -= 1
        if LOGGER.isEnabledFor(logging.DEBUG):
            LOGGER.debug(
                "HTTP connection from %s closed after %d requests (%s)",
                peer, conn.requests, reason,
                extra={"event": "http_connection_closed", "peer": peer,
                       "requests": conn.requests, "reason": reason},
            )  # fmt: skip

    async def _serve(
        self, conn: HttpConnection, first: Head, peer: str, deadline: float, *,
        last: str | None = None, slot: Slot | None = None,
    ) -> str:  # fmt: skip
        # Returns why the connection ends. ``last`` names why its first answer closes it;
        # ``slot`` is lent whenever the connection waits for its client.
        admission = self.admission
        head: Head | None = first
        while True:
            reason: str | None = None
            with self._bounded(deadline) as scope:
                waiting = functools.partial(_lent, admission, slot, scope, peer)
                if head is None:
                    with waiting():
                        head = await conn.receive_head()
                reason = await self._cycle(conn, head, peer, last, waiting)
            # Taken as the wait ended, the cancel may have met no checkpoint: the slot is
            # gone all the same, and the connection with it.
            if slot is not None and slot.reclaimed:
                return "reclaimed"
            if scope.cancelled_caught:
                return "shutting_down" if not self._admitting() else "request_timeout"
            if reason is not None:
                return reason
            head = None
            if not self._admitting():  # close() came after the answer: no idle wait
                return "shutting_down"
            config = self.config
            # No checkpoint since the check: a close() from now on cancels this scope.
            with (
                self._bounded(trio.current_time() + config.keepalive_timeout) as idle,
                _lent(admission, slot, idle, peer),
            ):
                more = await conn.wait_request()
            if slot is not None and slot.reclaimed:
                return "reclaimed"
            if idle.cancelled_caught:
                return "idle_timeout" if self._admitting() else "shutting_down"
            if not more:
                return "client_closed"
            deadline = trio.current_time() + config.handshake_timeout

    async def _cycle(
        self, conn: HttpConnection, head: Head, peer: str, last: str | None,
        waiting: Callable[[], AbstractContextManager[None]],
    ) -> str | None:  # fmt: skip
        # One request and its answer. Returns why the connection ends, or None: it goes on.
        # Writing and lingering wait for the client (``waiting``): a client that does not
        # take its answers lends its slot as an idle one does; a route's work does not.

        async def send(answer: HttpAnswer, *, close: bool) -> None:
            with waiting():
                await conn.send(answer, close=close)

        async def drain() -> None:
            with waiting():
                await linger(conn.stream)

        if head.request is None:
            if head.error is None:
                return "client_closed"
            await send(error_answer(*head.error), close=True)
            self._count(conn)
            await drain()
            return "bad_request"
        close = last
        if close is None:
            if conn.requests >= self.config.keepalive_requests:
                close = "max_requests"
            elif not self._admitting():
                close = "shutting_down"
            elif head.has_body:
                close = "body"
        request = head.request
        target, headers = request.target, request.headers
        guard = self.admission.guard
        refusal = guard.check(target, headers, websocket=False)
        if refusal is None and head.websocket:  # a first one never comes here
            refusal = _LATE_UPGRADE
        route = self.router.match(request, pages=self.pages)
        if refusal is None and route is not None and route.protected:
            refusal = guard.check_token(target, headers, also=route.tokens)
        if refusal is not None:
            self.admission.refused(refusal, peer, "http", headers)
            await send(plain_answer(refusal.status, refusal.text), close=True)
            close = "refused"
        elif route is not None:
            answer_route = functools.partial(send, close=close is not None)
            await self.router.answer(answer_route, route, request, peer)
        else:
            answer = page_answer(request, self.pages)
            if answer.status == 405:
                close = "method"  # a body of an unknown method is never read
            await send(answer, close=close is not None)
        self._count(conn)
        if close is None and conn.next_cycle():
            return None
        await drain()
        return close or "client_asked"

    def _count(self, conn: HttpConnection) -> None:
        self.answered += 1
        if conn.requests > 1:
            self.reused += 1


def _lent(
    admission: Admission, slot: Slot | None, scope: trio.CancelScope, peer: str
) -> AbstractContextManager[None]:
    # A connection without a slot (answered once) has nothing to lend.
    return nullcontext() if slot is None else admission.lend(slot, scope, peer)
