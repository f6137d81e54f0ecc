"""Answering one client message: decode it, find its handler, bound it (design §7.1).

:class:`Dispatcher` holds the request handlers of a front door by type tag (the
built-in ones of :mod:`examples.web.api` and the extensions) and turns every failure
into an ``error`` answer: a message that does not decode, a type nobody serves, an
:class:`~actors.errors.ActorError` a handler raises (its code), a handler that takes
longer than ``request_timeout`` seconds (``request_timeout``, retryable) and a bug in
a handler (``internal_error``, logged with its traceback). The connection stays up.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, get_args

import trio

from actors.errors import ActorError, UnknownType
from protocol import messages
from protocol.codec import decode_client_message

from .api import BUILTIN_HANDLERS
from .connection import peek_request_id

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .api import Handler
    from .config import FrontDoorConfig
    from .connection import Connection

__all__ = ["Dispatcher"]

LOGGER = logging.getLogger("examples.frontdoor")
_REQUEST_TAGS = frozenset(messages.TAGS[cls] for cls in get_args(messages.ClientRequest))


class Dispatcher:
    """The request handlers of one front door, and the answer to one message.

    Args:
        config: The front door's settings (``max_message`` bytes, ``request_timeout``
            seconds).
        handlers: Extra or replacing handlers by type tag (see :meth:`register`).

    Raises:
        ValueError: a handler's tag is not a client request type.
    """

    def __init__(
        self, config: FrontDoorConfig, handlers: Mapping[str, Handler] | None = None
    ) -> None:
        self.config = config
        self._handlers: dict[str, Handler] = dict(BUILTIN_HANDLERS)
        for tag, handler in (handlers or {}).items():
            self.register(tag, handler)

    def register(self, tag: str, handler: Handler) -> None:
        """Serve request type ``tag`` with ``handler`` (replacing a built-in one).

        Raises:
            ValueError: ``tag`` is not a client request type (see
                :data:`protocol.messages.ClientRequest`).
        """
        if tag not in _REQUEST_TAGS:
            raise ValueError(f"{tag!r} is not a client request type: {sorted(_REQUEST_TAGS)}")
        self._handlers[tag] = handler

    async def dispatch(self, conn: Connection, text: str | bytes) -> messages.Message:
        """Answer one client message of ``conn``; every failure becomes an ``error`` answer.

        A handler gets ``request_timeout`` seconds (trio clock): past them it is
        cancelled and the client is answered ``request_timeout`` (retryable).
        """
        config = self.config
        try:
            request = decode_client_message(text, max_size=config.max_message)
        except ActorError as exc:  # InvalidMessage, UnknownType, MessageTooLarge
            request_id = peek_request_id(text, config.max_message)
            return messages.ErrorReply.from_error(exc, request_id=request_id)
        tag = messages.TAGS[type(request)]
        handler = self._handlers.get(tag)
        if handler is None:
            error = UnknownType(
                f"this server does not serve {tag!r} requests", fields=["$.type"], type=tag
            )
            return messages.ErrorReply.from_error(error, request_id=request.request_id)
        timeout = config.request_timeout
        try:
            with trio.fail_after(timeout):
                reply = await handler(conn, request)
        except ActorError as exc:
            return messages.ErrorReply.from_error(exc, request_id=request.request_id)
        except trio.TooSlowError:
            LOGGER.warning(
                "handler for %r took over %g s: cancelled", tag, timeout,
                extra={"event": "request_timeout", "connection": conn.name, "type": tag,
                       "timeout": timeout},
            )  # fmt: skip
            return messages.ErrorReply(
                request_id=request.request_id,
                code="request_timeout",
                message=f"{tag!r} was not answered within {timeout:g} s"[:200],
                retryable=True,
            )
        except Exception as exc:  # a handler bug: answer it, log it, keep serving
            LOGGER.exception(
                "handler for %r failed", tag,
                extra={"event": "handler_failed", "connection": conn.name, "type": tag},
            )  # fmt: skip
            return messages.ErrorReply(
                request_id=request.request_id,
                code="internal_error",
                message=f"{type(exc).__name__} while serving {tag!r}"[:200],
                retryable=False,
            )
        return messages.OkReply(request_id=request.request_id) if reply is None else reply
