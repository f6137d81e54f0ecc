"""What the example servers' ``main`` functions share (design §7.1, §7.3).

Both servers take the same core options (:func:`add_server_options`), build their
front door's config from them (:func:`front_door_config`: safe by default, with a fresh
random token), bind their port first of all (:func:`listening`), so a port in use is one
line on stderr and exit status 2 before a sample database is written or a helper
started, and once ready print their addresses with the token and write their info file
(:func:`announce`, :mod:`examples.web.serverinfo`)::

    parser = OneLineParser(prog="python -m examples.jobs.server", label="job_server")
    add_server_options(parser, port=8766)
    args = parser.parse_args(argv)
    front = front_door_config(parser, args)
    with listening(parser, args) as sockets, info_file("job_server") as record:
        ...  # serve on ``sockets``; once ready: announce(record, url, front.token)
"""

from __future__ import annotations

import contextlib
import os
import secrets
import urllib.parse
from typing import TYPE_CHECKING, Any

from .cli import bind_sockets, cannot_listen, count, seconds, setup_logging
from .config import FrontDoorConfig
from .names import is_loopback
from .serverinfo import ENV_TOKEN

if TYPE_CHECKING:
    import argparse
    import socket
    from collections.abc import Iterator

    from .cli import OneLineParser
    from .serverinfo import InfoFile

__all__ = [
    "add_server_options",
    "announce",
    "front_door_config",
    "listening",
    "server_token",
    "with_token",
]

#: Random bytes of a generated token (32 URL-safe characters).
TOKEN_BYTES = 24


def add_server_options(parser: OneLineParser, *, port: int) -> None:
    """Add the options every example server has.

    ``--host``, ``--port`` (default ``port``), ``--token``/``--no-token``,
    ``--allow-origin``/``--allow-host`` (repeatable), ``--max-per-address``,
    ``--max-pending``,
    ``--ledger``, ``--grace`` (seconds, default 5) and ``-v``/``--verbose``.
    """
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    add("--port", type=count(maximum=65535), default=port,
        help=f"TCP port (default {port}; 0: any free port)")  # fmt: skip
    add("--token", default=None, help=f"shared secret clients must send (default: ${ENV_TOKEN}, "
        "else a random one each start)")  # fmt: skip
    add("--no-token", action="store_true", help="no token (loopback only): any local user "
        "and program can use the server")  # fmt: skip
    add("--metrics-token", default=None, metavar="T",
        help="a second token that only /metrics accepts (for a Prometheus scraper)")  # fmt: skip
    add("--metrics-no-token", action="store_true",
        help="/metrics needs no token (loopback only): for a scraper on this machine")  # fmt: skip
    add("--allow-origin", action="append", default=[], metavar="ORIGIN",
        help="also accept websockets from pages of ORIGIN (scheme://host[:port]; 'null' for "
        "file:// pages); repeatable")  # fmt: skip
    add("--allow-host", action="append", default=[], metavar="HOST",
        help="also answer requests for HOST (name or name:port), e.g. behind a proxy or a "
        "tunnel; repeatable")  # fmt: skip
    add("--max-per-address", type=count(minimum=1, maximum=10_000), default=16,
        help="websocket connections at once from one address (16)")  # fmt: skip
    add("--max-pending", type=count(minimum=1, maximum=10_000), default=128,
        help="connections at once that have not sent their first request; one more "
        "closes the oldest of them (128)")  # fmt: skip
    add("--ledger", default=None, help="SQLite file or postgresql:// URL of the event log: "
        "runs survive restarts (default: in memory)")  # fmt: skip
    add("--grace", type=seconds(), default=5.0, help="seconds to finish work after SIGTERM (5)")
    add("-v", "--verbose", action="store_true", help="log what the server does")


def server_token(parser: OneLineParser, args: argparse.Namespace) -> str | None:
    """The token of this start: ``--token``, else ``$TRIO_ACTORS_TOKEN``, else a fresh
    random one; None with ``--no-token`` (loopback only). A conflict is a usage error
    (exit status 2).
    """
    if args.no_token:
        if args.token is not None:
            parser.error("--token and --no-token exclude each other")
        if not is_loopback(args.host):
            parser.error(f"--no-token: binding {args.host!r} (not loopback) requires a token")
        return None
    if args.token is not None:
        return str(args.token)
    return os.environ.get(ENV_TOKEN) or secrets.token_urlsafe(TOKEN_BYTES)


def front_door_config(
    parser: OneLineParser, args: argparse.Namespace, **fields: Any
) -> FrontDoorConfig:
    """The front door's config from the options of :func:`add_server_options`.

    ``fields`` set the other :class:`FrontDoorConfig` fields. A bad value or combination
    (e.g. ``--allow-origin`` that is not an origin) is a usage error: one line, exit
    status 2.
    """
    try:
        return FrontDoorConfig(
            host=args.host,
            port=args.port,
            token=server_token(parser, args),
            allowed_origins=args.allow_origin,
            allowed_hosts=args.allow_host,
            max_per_address=args.max_per_address,
            max_pending=args.max_pending,
            metrics_token=args.metrics_token,
            metrics_open=args.metrics_no_token,
            **fields,
        )
    except ValueError as exc:
        parser.error(str(exc))


@contextlib.contextmanager
def listening(parser: OneLineParser, args: argparse.Namespace) -> Iterator[list[socket.socket]]:
    """Set up logging, then bind ``--host``/``--port``; the sockets close when the block ends.

    A port that cannot be bound is one line on stderr (``LABEL: cannot listen on ...``)
    and exit status 2 (:class:`SystemExit`), before the block runs.
    """
    setup_logging(verbose=args.verbose)
    try:
        sockets = bind_sockets(args.host, args.port)
    except OSError as exc:
        parser.exit(2, f"{parser.label}: {cannot_listen(args.host, args.port, exc)}\n")
    try:
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def with_token(url: str, token: str | None) -> str:
    """``url`` with ``?token=`` (a path ``/`` added if it has none), or as is without one."""
    if token is None:
        return url
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.urlencode({"token": token})
    return urllib.parse.urlunsplit(
        parts._replace(path=parts.path or "/", query=f"{parts.query}&{query}".lstrip("&"))
    )


def announce(
    record: InfoFile,
    url: str,
    token: str | None,
    *,
    dashboard: str | None = None,
    extra: tuple[str, ...] = (),
) -> None:
    """Write the server's info file (for the CLI clients), then print ``listening on URL``
    (with the token), the ``dashboard:`` line if any and ``extra`` lines.

    Args:
        record: The server's info file (:func:`examples.web.serverinfo.info_file`).
        url: The websocket address, without the token.
        token: The server's token, or None.
        dashboard: The dashboard's address, with the token if there is one.
        extra: More lines to print, as they are.
    """
    record.write(url=url, token=token, dashboard=dashboard)  # first: found once printed
    print(f"listening on {with_token(url, token)}", flush=True)
    if dashboard is not None:
        print(f"dashboard: {dashboard}", flush=True)
    for line in extra:
        print(line, flush=True)
