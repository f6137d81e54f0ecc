"""Dynamic GET routes on the front door's port, beside its static pages (design §7.6).

A :class:`Route` serves every path under its ``prefix`` with an async function that
gets an :class:`HttpRequest` and returns an :class:`HttpAnswer` (the HTTP layer's one
request and one answer type, :mod:`examples.web.httpconn`, re-exported here). The front door
(:mod:`examples.web.frontdoor`) decides who may ask before a route runs: the ``Host``
check of every plain HTTP request and, for a ``protected`` route (the default), the
token exactly as a websocket handshake carries it (``?token=`` or ``Authorization:
Bearer``, design §7.3): a missing or wrong one is a 403 and the route never runs; when
both are given, both must be right. Only
``GET`` and ``HEAD`` reach a route (``HEAD`` gets the headers of ``GET``, no body);
other methods are 405 as for the pages.

:class:`Router` matches a request to the route with the longest prefix, runs it under
the request's deadline (``handshake_timeout``, the caller's cancel scope), and writes the
answer through the caller (on a kept-alive connection, :mod:`examples.web.plainhttp`):

* a query parameter given twice (``?rev=1&rev=2``) is a 400 naming it, and a path with
  an encoded ``/`` (``%2F``) a 404: the route never runs (decoded, such a path would
  split one segment into several, and name what no address names);
* a body over ``max_body`` bytes is never sent: the client gets a 500 and the log says
  why (routes answer from bounded stores, so it is a bug, not a load);
* an :class:`~actors.errors.ActorError` or any other exception of a route is a 500 with
  one plain line, logged with its traceback; the server goes on;
* ``304 Not Modified`` is sent without ``Content-Type``, ``Content-Length`` or body
  (RFC 9110 §15.4.5: a cache copies a 304's headers onto the answer it holds, so a
  ``text/plain`` there would relabel a cached image);
* every answer is one INFO record of ``examples.frontdoor`` with ``event=http_route``
  and its ``path`` as sent, percent-encoded (never decoded: a ``%0A`` would start a
  forged log line; never the query, which may hold the token), ``status``, ``bytes``
  and ``route`` as ``extra``, and is counted by status (:meth:`Router.statistics`).

Helpers for routes: :func:`etag_matches` reads ``If-None-Match``.
"""

from __future__ import annotations

import logging
import urllib.parse
from typing import TYPE_CHECKING

import attrs

from .httpconn import HttpAnswer as HttpAnswer
from .httpconn import HttpRequest as HttpRequest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

__all__ = ["HttpAnswer", "HttpRequest", "Route", "Router", "etag_matches"]

LOGGER = logging.getLogger("examples.frontdoor")


@attrs.frozen(kw_only=True)
class Route:
    """Every ``GET``/``HEAD`` of a path under ``prefix`` answered by ``handler``."""

    prefix: str = attrs.field()
    """The path prefix, starting and ending with ``/`` (e.g. ``/db/``); a path not
    ending with ``/`` (e.g. ``/metrics``) is served alone, exactly."""
    handler: Callable[[HttpRequest], Awaitable[HttpAnswer]]
    """``await handler(request)`` returns the answer (a checkpoint)."""
    protected: bool = True
    """True: the request must carry the front door's token, if it has one (design §7.3)."""
    tokens: tuple[str, ...] = ()
    """Other tokens this route accepts instead of the front door's (e.g. a scraper's)."""
    name: str = ""
    """A name for the logs; default the prefix."""

    @prefix.validator
    def _check_prefix(self, attribute: attrs.Attribute[str], value: object) -> None:
        if not isinstance(value, str) or not value.startswith("/"):
            raise ValueError(f"prefix must be a path starting with '/', got {value!r}")


def etag_matches(headers: Mapping[bytes, bytes], etag: str) -> bool:
    """True if ``If-None-Match`` names ``etag`` (or is ``*``): the client has it.

    Weak comparison, as RFC 9110 §13.1.2 asks for ``If-None-Match``: ``W/"x"`` matches
    ``"x"``.
    """
    value = headers.get(b"if-none-match")
    if value is None:
        return False
    wanted = etag.removeprefix("W/")
    for item in value.decode("latin-1").split(","):
        item = item.strip()
        if item == "*" or item.removeprefix("W/") == wanted:
            return True
    return False


class Router:
    """The routes of one front door; see the module docstring.

    Args:
        routes: The routes; two with the same prefix are refused.
        max_body: Largest body sent, in bytes.

    Raises:
        ValueError: two routes have the same prefix.
    """

    def __init__(self, routes: Sequence[Route], *, max_body: int) -> None:
        prefixes = [route.prefix for route in routes]
        if len(set(prefixes)) != len(prefixes):
            raise ValueError(f"two routes have the same prefix: {sorted(prefixes)}")
        # Longest first, so /db/x/ wins over /db/.
        self.routes = sorted(routes, key=lambda route: len(route.prefix), reverse=True)
        self.max_body = max_body
        self.answered: dict[str, int] = {}
        """Answers sent, by status (``"200"``, ``"304"``, ...)."""

    def match(
        self, request: HttpRequest, *, pages: Mapping[str, object] | None = None
    ) -> Route | None:
        """The route serving ``request`` (a ``GET``/``HEAD``), or None (also for the
        path of one of ``pages``, which are served as they are)."""
        if request.method not in ("GET", "HEAD") or request.target.split("?", 1)[0] in (
            pages or {}
        ):
            return None
        for route in self.routes:
            prefix = route.prefix
            exact = not prefix.endswith("/")
            if request.path == prefix if exact else request.path.startswith(prefix):
                return route
        return None

    async def answer(
        self,
        send: Callable[[HttpAnswer], Awaitable[object]],
        route: Route,
        request: HttpRequest,
        peer: str,
    ) -> None:
        """Run ``route`` for ``request`` and send its answer (no timeout of its own).

        Args:
            send: ``await send(answer)`` writes the answer (on a kept-alive connection,
                :meth:`HttpConnection.send <examples.web.httpconn.HttpConnection.send>`).
            route: The route :meth:`match` found.
            request: The request.
            peer: ``address:port`` of the client, for the log.
        """
        split = urllib.parse.urlsplit(request.target)
        pairs = urllib.parse.parse_qsl(split.query, keep_blank_values=True)
        repeated = _repeated(name for name, _ in pairs)
        name = route.name or route.prefix
        logged = split.path[:200]  # h11 let in visible ASCII only: one line, as sent
        try:
            if repeated is not None:  # which one would count is a guess: refused
                result = HttpAnswer.text(400, f"query parameter {repeated[:40]!r} is repeated")
            elif "%2f" in split.path.lower():
                result = HttpAnswer.text(404, "no such address: an encoded '/' in the path")
            else:
                result = await route.handler(request)
        except Exception:  # contained: one bad request never stops the server
            LOGGER.exception("route %s failed for %s", name, logged)
            result = HttpAnswer.text(500, "the server failed to answer this request")
        if len(result.body) > self.max_body:
            LOGGER.error(
                "route %s answered %d bytes, over max_body (%d): not sent",
                name, len(result.body), self.max_body,
                extra={"event": "http_route_too_large", "route": name, "bytes": len(result.body)},
            )  # fmt: skip
            result = HttpAnswer.text(500, "the answer is too large")
        await send(result)
        key = str(result.status)
        self.answered[key] = self.answered.get(key, 0) + 1
        LOGGER.info(
            "%s %s -> %d (%d bytes)",
            request.method, logged, result.status, len(result.body),
            extra={"event": "http_route", "route": name, "peer": peer,
                   "method": request.method, "path": logged,
                   "status": result.status, "bytes": len(result.body)},
        )  # fmt: skip

    def statistics(self) -> dict[str, int]:
        """Answers sent so far, by status (``"200"``, ``"304"``, ``"404"``, ...)."""
        return dict(self.answered)


def _repeated(names: Iterable[str]) -> str | None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None
