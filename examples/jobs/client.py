"""A tiny command-line client of the job server (design §7; JSON over websocket).

Examples::

    python -m examples.jobs.client submit count_primes '{"limit": 3000000}'
    python -m examples.jobs.client submit hash_file '{"path": "/etc/hostname"}'
    python -m examples.jobs.client submit crash
    python -m examples.jobs.client status 3
    python -m examples.jobs.client cancel 3
    python -m examples.jobs.client boot_report
    python -m examples.jobs.client resume 3      # or: discard 3; resume --override 3
    python -m examples.jobs.client watch 0

``submit`` subscribes first, prints the receipt, then every event of the run until it
finishes or is cancelled (events that arrive before the receipt are printed after it);
Ctrl-C while it waits cancels the run. Every message is printed as one line of JSON.
``--url`` (default ``ws://127.0.0.1:8766``; ``http://`` is taken as ``ws://``) selects
the server. The token is ``--token``, else the ``?token=`` of the URL, else
``$TRIO_ACTORS_TOKEN``, else the one a local server wrote in its info file (design
§7.3); it is sent in an ``Authorization`` header and never printed.

Exit status: 0 when the answer is not an error and (``submit``) the run's verdict is
``ok``; 1 for an error answer, a run that failed or was cancelled, or the server going
away; 2 for a bad argument (e.g. ``arguments must be a JSON object: ...``) or a refused
connection (nothing listening, a wrong token). Failures are one line on stderr.
"""

from __future__ import annotations

import itertools
import json
import signal
import sys
import uuid
from typing import TYPE_CHECKING, Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from ..web.cli import OneLineParser, client_target, connection_problem, count, leaf

if TYPE_CHECKING:
    import argparse

__all__ = ["main"]

# Request ids are the server's idempotency keys (design §6.3): unique per invocation.
_ids = (f"cli-{uuid.uuid4().hex[:12]}-{n}" for n in itertools.count(1))
_TIMEOUT = 10.0
_TERMINAL = ("job_finished", "job_cancelled")


async def _request(
    ws: WebSocketConnection,
    type: str,
    *,
    pushed: list[dict[str, Any]] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """Send one request and return its answer.

    Messages pushed meanwhile are appended to ``pushed``, or printed if it is None.
    """
    request_id = next(_ids)
    await ws.send_message(json.dumps({"type": type, "request_id": request_id, **fields}))
    with trio.fail_after(_TIMEOUT):
        while True:
            message: dict[str, Any] = json.loads(await ws.get_message())  # always an object
            if message.get("request_id") == request_id:
                return message
            if pushed is None:
                print(json.dumps(message), flush=True)
            else:
                pushed.append(message)


def _verdict_status(message: dict[str, Any]) -> int:
    """0 for a ``job_finished`` with verdict ``ok``, else 1 (failed, cancelled)."""
    if message.get("kind") == "job_finished" and message.get("data", {}).get("verdict") == "ok":
        return 0
    return 1


async def _follow(ws: WebSocketConnection, operation: str, arguments: dict[str, Any]) -> int:
    early: list[dict[str, Any]] = []  # pushes that overtake the receipt
    await _request(ws, "subscribe", pushed=early)
    receipt = await _request(ws, "submit", operation=operation, arguments=arguments, pushed=early)
    print(json.dumps(receipt), flush=True)
    if receipt.get("type") != "receipt" or not receipt.get("admitted"):
        return 1
    run_id = receipt["run_id"]
    for message in early:
        print(json.dumps(message), flush=True)
        if message.get("run_id") == run_id and message.get("kind") in _TERMINAL:
            return _verdict_status(message)
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        async with trio.open_nursery() as nursery:

            async def cancel_on_interrupt() -> None:
                async for _ in interrupts:
                    await ws.send_message(
                        json.dumps({"type": "cancel", "request_id": next(_ids), "run_id": run_id})
                    )

            nursery.start_soon(cancel_on_interrupt)
            while True:
                message = json.loads(await ws.get_message())
                print(json.dumps(message), flush=True)
                if message.get("run_id") == run_id and message.get("kind") in _TERMINAL:
                    outcome = _verdict_status(message)
                    break
                if message.get("type") == "resync_required":
                    status = await _request(ws, "status", run_id=run_id)
                    print(json.dumps(status), flush=True)
                    outcome = 0 if status.get("verdict") == "ok" else 1
                    break
            nursery.cancel_scope.cancel()
    return outcome


def _arguments(text: str | None) -> dict[str, Any]:
    """The ``submit`` arguments: a JSON object (none: ``{}``).

    Raises:
        ValueError: not JSON, or not an object; the message says which.
    """
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object: got {type(value).__name__}")
    return value


async def _run(args: argparse.Namespace) -> int:
    headers = [(b"authorization", f"Bearer {args.token}".encode())] if args.token else None
    async with open_websocket_url(args.url, extra_headers=headers) as ws:
        if args.command == "submit":
            return await _follow(ws, args.operation, args.arguments)
        if args.command == "resume":
            answer = await _request(ws, "resume", run_id=args.run_id, override=args.override)
        elif args.command in ("status", "cancel", "discard"):
            answer = await _request(ws, args.command, run_id=args.run_id)
        elif args.command == "watch":
            answer = await _request(ws, "watch", cursor=args.cursor)
        else:
            answer = await _request(ws, "boot_report")
        print(json.dumps(answer), flush=True)
        return 1 if answer.get("type") == "error" else 0


def main(argv: list[str] | None = None) -> int:
    """The command line; see the module docstring. Returns the exit status."""
    parser = OneLineParser(prog="python -m examples.jobs.client", label="job_client")
    parser.add_argument("--url", default="ws://127.0.0.1:8766")
    parser.add_argument("--token", default=None, help="the server's token (default: found)")
    commands = parser.add_subparsers(dest="command", required=True)
    submit = commands.add_parser(
        "submit", help="submit a job and follow its events", label="job_client"
    )
    submit.add_argument("operation")
    submit.add_argument("arguments", nargs="?", help="a JSON object")
    for name in ("status", "cancel", "discard"):
        commands.add_parser(name, label="job_client").add_argument("run_id", type=count())
    resume = commands.add_parser("resume", label="job_client")
    resume.add_argument("run_id", type=count())
    resume.add_argument(
        "--override", action="store_true", help="resume a quarantined run (interrupted twice)"
    )
    commands.add_parser("watch", label="job_client").add_argument(
        "cursor", type=count(), nargs="?", default=0
    )
    commands.add_parser("boot_report", label="job_client")
    args = parser.parse_args(argv)
    try:
        args.url, args.token = client_target(args.url, args.token)
        if args.command == "submit":
            args.arguments = _arguments(args.arguments)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        return trio.run(_run, args)
    except BaseException as exc:  # one line for a failed connection; others re-raised
        error = leaf(exc)
        if isinstance(error, json.JSONDecodeError):
            print(
                f"job_client: the server sent a message that is not JSON: {error}", file=sys.stderr
            )
            return 1
        problem = connection_problem(error)
        if problem is None:
            raise
        if isinstance(error, ConnectionClosed | trio.TooSlowError):  # connected before
            print(f"job_client: {args.url}: {problem}", file=sys.stderr)
            return 1
        print(f"job_client: cannot connect to {args.url}: {problem}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
