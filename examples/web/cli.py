"""Command-line plumbing shared by the example servers and clients (design §1.6, §7.1).

* :class:`OneLineParser`: an ``argparse`` parser whose errors are one line on stderr
  (``preview_server: argument --grace: must be >= 0 seconds, got -1``) and exit status 2.
* :func:`seconds`, :func:`count`: argparse ``type=`` functions that validate a duration
  (:func:`actors.validate_duration`) or a whole number (:func:`actors.validate_count`)
  when the command line is read, not when the value is first used.
* :func:`bind_sockets`: bind and listen before anything else is created, so a busy port
  is reported (:func:`cannot_listen`) before a sample database or a helper exists.
* :func:`setup_logging`: the one log format of both servers.
* :func:`leaf`, :func:`describe`: one line for an error, never a traceback or a repr.
* :func:`websocket_url`, :func:`client_target`, :func:`connection_problem`: the
  clients' address and token handling (design §7.3) and one line for a connection that
  failed (refused, wrong token, closed mid-stream).
* :func:`stdout_closed`: a quiet exit when the reader of a client's output went away
  (``... | head``), which is no connection problem.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import socket
import sys
import urllib.parse
from typing import TYPE_CHECKING, NoReturn, TypeVar

import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    ConnectionTimeout,
    HandshakeError,
)

from actors import MAX_DURATION, validate_count, validate_duration
from actors.errors import ActorError

from .serverinfo import ENV_TOKEN, find_token

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "OneLineParser",
    "bind_sockets",
    "cannot_listen",
    "client_target",
    "connection_problem",
    "count",
    "describe",
    "leaf",
    "seconds",
    "setup_logging",
    "stdout_closed",
    "websocket_url",
]

T = TypeVar("T")

#: The log line format of both servers: milliseconds since start, logger, message.
LOG_FORMAT = "%(relativeCreated)7.0f ms %(name)s: %(message)s"


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line and exit status 2.

    Args:
        label: The program's short name that starts the error line (default: ``prog``).
    """

    def __init__(self, *args: object, label: str | None = None, **kwargs: object) -> None:
        command = os.path.basename(sys.argv[0]) if sys.argv else ""
        if command.startswith("trio-actors-"):  # an installed console command: its name
            kwargs["prog"] = command
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.label = label or self.prog

    def error(self, message: str) -> NoReturn:
        """Print ``NAME: MESSAGE (see --help)`` on stderr and exit with status 2."""
        self.exit(2, f"{self.label}: {message} (see --help)\n")


def _argument_type(
    name: str, convert: Callable[[str], T], expected: str, validate: Callable[[T], T]
) -> Callable[[str], T]:
    """An argparse ``type``: ``convert`` the text, then ``validate`` the value.

    The error says what was expected and quotes the text as typed (``got -1``, not the
    converted ``got -1.0``), without the ``value`` prefix of the validator's message.
    """

    def parse(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {expected}, got {text!r}") from None
        try:
            return validate(value)
        except ValueError as exc:
            message = str(exc).removeprefix("value ")
            raise argparse.ArgumentTypeError(
                message.replace(f"got {value!r}", f"got {text}")
            ) from None

    parse.__name__ = name  # argparse names the type in some messages
    return parse


def seconds(*, allow_zero: bool = True, maximum: float = MAX_DURATION) -> Callable[[str], float]:
    """An argparse ``type``: a duration in seconds, validated like a config field (§1.6).

    Raises (when the command line is read):
        argparse.ArgumentTypeError: not a number, NaN, infinite, negative, zero when
            ``allow_zero`` is False, or above ``maximum`` seconds.
    """
    return _argument_type(
        "seconds",
        float,
        "a number of seconds",
        lambda value: validate_duration("value", value, allow_zero=allow_zero, maximum=maximum),
    )


def count(*, minimum: int = 0, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: a whole number in ``[minimum, maximum]``.

    Raises (when the command line is read):
        argparse.ArgumentTypeError: not an integer, or out of range.
    """
    return _argument_type(
        "count",
        int,
        "an integer",
        lambda value: validate_count("value", value, minimum=minimum, maximum=maximum),
    )


def bind_sockets(host: str, port: int, *, backlog: int = 128) -> list[socket.socket]:
    """Bind and listen on every address of ``host`` at ``port``, like
    :func:`trio.open_tcp_listeners` but synchronous, so it can run first of all.

    The sockets are handed to :class:`~examples.web.frontdoor.FrontDoor` (``sockets=``),
    which serves (and closes) them.

    Raises:
        OSError: the address cannot be bound (``errno.EADDRINUSE``: the port is in use),
            or ``host`` does not resolve (:class:`socket.gaierror`).
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    seen: set[object] = set()
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in infos:
            if address in seen:
                continue
            seen.add(address)
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def cannot_listen(host: str, port: int, exc: OSError) -> str:
    """One line for a failed :func:`bind_sockets`: the address, the reason, a way out."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if isinstance(exc, socket.gaierror):
        return f"cannot listen on {where}: unknown host ({exc.strerror or exc})"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {where}: the address is already in use (another server?); "
            "use --port 0 for any free port, or another --port"
        )
    return f"cannot listen on {where}: {(exc.strerror or str(exc)).lower()}"


def setup_logging(*, verbose: bool) -> None:
    """The servers' logging: ``LOG_FORMAT`` on stderr, INFO if ``verbose`` else WARNING."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format=LOG_FORMAT)


def leaf(exc: BaseException) -> BaseException:
    """The first innermost exception of (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """One line for an error: ``message (code)`` for an :class:`ActorError`, the OS
    reason for an :class:`OSError`, else ``Type: message``."""
    if isinstance(exc, ActorError):
        return f"{exc.message or type(exc).__name__} ({exc.code})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[0].lower() + exc.strerror[1:]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def websocket_url(url: str) -> str:
    """The ``ws://``/``wss://`` form of a server address a person typed.

    ``http://`` becomes ``ws://`` and ``https://`` becomes ``wss://`` (the servers answer
    both on one port); ``host:port`` without a scheme gets ``ws://``.

    Raises:
        ValueError: another scheme, or no host; the message says what is expected.
    """
    text = url.strip()
    if "://" not in text:
        text = "ws://" + text
    parts = urllib.parse.urlsplit(text)
    scheme = {"ws": "ws", "wss": "wss", "http": "ws", "https": "wss"}.get(parts.scheme.lower())
    if scheme is None or not parts.hostname:
        raise ValueError(f"not a server address: {url!r} (expected ws://HOST:PORT)")
    return urllib.parse.urlunsplit(parts._replace(scheme=scheme))


def client_target(url: str, token: str | None) -> tuple[str, str | None]:
    """The address to connect to (without a token) and the token to send (design §7.3).

    The token is the first of: ``token`` (``--token``), the ``?token=`` of ``url``, the
    environment variable ``TRIO_ACTORS_TOKEN``, the info file of the local server that
    ``url`` reaches (:func:`examples.web.serverinfo.find_token`). It is meant to be sent
    in an ``Authorization: Bearer`` header, so it stays out of printed addresses.

    Raises:
        ValueError: ``url`` is not a server address (see :func:`websocket_url`).
    """
    parts = urllib.parse.urlsplit(websocket_url(url))
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    in_url = next((value for name, value in query if name == "token"), None)
    rest = urllib.parse.urlencode([(name, value) for name, value in query if name != "token"])
    address = urllib.parse.urlunsplit(parts._replace(query=rest))
    if address.endswith("/") and parts.path == "/" and not rest:
        address = address[:-1]  # ws://host:port/ prints as ws://host:port
    chosen = token or in_url or os.environ.get(ENV_TOKEN) or find_token(address)
    return address, chosen


def _os_reason(exc: BaseException) -> str | None:
    """The OS reason (e.g. ``connection refused``) inside ``exc`` or what caused it."""
    pending: list[BaseException] = [exc]
    seen: set[int] = set()
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, socket.gaierror):  # its errno is no errno: strerror(-2) is no help
            return f"unknown host ({(current.strerror or str(current)).lower()})"
        if isinstance(current, OSError) and current.errno:
            return os.strerror(current.errno).lower()
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


def connection_problem(exc: BaseException) -> str | None:
    """One line for a failed websocket session, or None if ``exc`` is not one.

    Covers nothing listening (the OS reason, e.g. ``connection refused``), a refused
    handshake (``refused: HTTP 403, check --token``), a timeout, and the server going
    away mid-stream (``the server closed the connection (1001 ...)``).
    """
    if isinstance(exc, ConnectionRejected):
        body = (exc.body or b"").decode("utf-8", "replace").strip().splitlines()
        hint = ", check --token" if body and "token" in body[0] else ""
        detail = f" ({body[0][:200]})" if body else ""
        return f"refused: HTTP {exc.status_code}{hint}{detail}"
    if isinstance(exc, ConnectionClosed):
        reason = exc.reason
        if reason is None:
            return "the server closed the connection"
        said = f": {reason.reason}" if reason.reason else ""
        return f"the server closed the connection ({reason.code} {reason.name}{said})"
    if isinstance(exc, ConnectionTimeout | trio.TooSlowError):
        return "timed out"
    if isinstance(exc, HandshakeError | OSError):  # a HandshakeError's cause: the OSError
        return _os_reason(exc) or str(exc) or "the opening handshake failed"
    return None


def stdout_closed() -> int:
    """The exit status of a client whose stdout's reader went away (``... | head``).

    A :class:`BrokenPipeError` that reaches a client's ``main`` comes from its own
    output: trio and trio-websocket turn a broken socket into their own errors. So the
    client says nothing (the person chose to stop reading), points stdout at
    ``/dev/null`` so that Python's flush at exit does not fail a second time, and
    exits with status 1, as Python's documentation advises for ``SIGPIPE``.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return 1
