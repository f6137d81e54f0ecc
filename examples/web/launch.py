"""What the example servers' ``main`` functions share (design §7.1).

Both servers take the same core options (:func:`add_server_options`), build their
front door's config from them (:func:`front_door_config`), and bind their port first of
all (:func:`listening`), so a port in use is one line on stderr and exit status 2
before a sample database is written or a helper started::

    parser = OneLineParser(prog="python -m examples.jobs.server", label="job_server")
    add_server_options(parser, port=8766)
    args = parser.parse_args(argv)
    front = front_door_config(parser, args)
    with listening(parser, args) as sockets:
        ...  # serve on ``sockets``; they are closed when the block ends
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from examples.web.cli import bind_sockets, cannot_listen, count, seconds, setup_logging
from examples.web.config import FrontDoorConfig

if TYPE_CHECKING:
    import argparse
    import socket
    from collections.abc import Iterator

    from examples.web.cli import OneLineParser

__all__ = ["add_server_options", "front_door_config", "listening"]


def add_server_options(parser: OneLineParser, *, port: int) -> None:
    """Add the options every example server has.

    ``--host``, ``--port`` (default ``port``), ``--token``, ``--ledger``, ``--grace``
    (seconds, default 5) and ``-v``/``--verbose``.
    """
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    add("--port", type=count(maximum=65535), default=port,
        help=f"TCP port (default {port}; 0: any free port)")  # fmt: skip
    add("--token", default=None, help="shared secret clients must send (required off loopback)")
    add("--ledger", default=None, help="SQLite file of the event log: runs survive restarts "
        "(default: in memory)")  # fmt: skip
    add("--grace", type=seconds(), default=5.0, help="seconds to finish work after SIGTERM (5)")
    add("-v", "--verbose", action="store_true", help="log what the server does")


def front_door_config(
    parser: OneLineParser, args: argparse.Namespace, **fields: Any
) -> FrontDoorConfig:
    """The front door's config from the options of :func:`add_server_options`.

    ``fields`` set the other :class:`FrontDoorConfig` fields. A bad combination (e.g. a
    non-loopback ``--host`` without ``--token``) is a usage error: one line, exit status 2.
    """
    try:
        return FrontDoorConfig(host=args.host, port=args.port, token=args.token, **fields)
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
