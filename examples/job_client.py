"""A tiny command-line client of the job server (SPEC §7; JSON over websocket).

Examples::

    python -m examples.job_client submit count_primes '{"limit": 3000000}'
    python -m examples.job_client submit hash_file '{"path": "/etc/hostname"}'
    python -m examples.job_client submit crash
    python -m examples.job_client status 3
    python -m examples.job_client cancel 3
    python -m examples.job_client boot_report
    python -m examples.job_client resume 3      # or: discard 3
    python -m examples.job_client watch 0

``submit`` subscribes first, prints the receipt, then every event of the run until it
finishes or is cancelled; Ctrl-C while it waits cancels the run. Every message is
printed as one line of JSON. ``--url`` (default ``ws://127.0.0.1:8766``) and ``--token``
select the server.
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import sys
import urllib.parse
import uuid
from typing import Any

import trio
from trio_websocket import HandshakeError, WebSocketConnection, open_websocket_url

__all__ = ["main"]

# Request ids are the server's idempotency keys (SPEC §6.3): unique per invocation.
_ids = (f"cli-{uuid.uuid4().hex[:12]}-{n}" for n in itertools.count(1))
_TIMEOUT = 10.0
_TERMINAL = ("job_finished", "job_cancelled")


async def _request(ws: WebSocketConnection, type: str, **fields: Any) -> dict[str, Any]:
    """Send one request and return its answer (pushed messages meanwhile are printed)."""
    request_id = next(_ids)
    await ws.send_message(json.dumps({"type": type, "request_id": request_id, **fields}))
    with trio.fail_after(_TIMEOUT):
        while True:
            message = json.loads(await ws.get_message())
            if message.get("request_id") == request_id:
                return message
            print(json.dumps(message), flush=True)


async def _follow(ws: WebSocketConnection, operation: str, arguments: dict[str, Any]) -> int:
    await _request(ws, "subscribe")
    receipt = await _request(ws, "submit", operation=operation, arguments=arguments)
    print(json.dumps(receipt), flush=True)
    if receipt.get("type") != "receipt" or not receipt.get("admitted"):
        return 1
    run_id = receipt["run_id"]
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
                    break
                if message.get("type") == "resync_required":
                    status = await _request(ws, "status", run_id=run_id)
                    print(json.dumps(status), flush=True)
                    break
            nursery.cancel_scope.cancel()
    return 0


async def _run(args: argparse.Namespace) -> int:
    url = args.url
    if args.token:
        url += ("&" if "?" in url else "/?") + urllib.parse.urlencode({"token": args.token})
    async with open_websocket_url(url) as ws:
        if args.command == "submit":
            arguments = json.loads(args.arguments) if args.arguments else {}
            return await _follow(ws, args.operation, arguments)
        if args.command in ("status", "cancel", "discard", "resume"):
            answer = await _request(ws, args.command, run_id=args.run_id)
        elif args.command == "watch":
            answer = await _request(ws, "watch", cursor=args.cursor)
        else:
            answer = await _request(ws, "boot_report")
        print(json.dumps(answer), flush=True)
        return 1 if answer.get("type") == "error" else 0


def main(argv: list[str] | None = None) -> int:
    """The command line; see the module docstring. Returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m examples.job_client")
    parser.add_argument("--url", default="ws://127.0.0.1:8766")
    parser.add_argument("--token", default=None)
    commands = parser.add_subparsers(dest="command", required=True)
    submit = commands.add_parser("submit", help="submit a job and follow its events")
    submit.add_argument("operation")
    submit.add_argument("arguments", nargs="?", help="a JSON object")
    for name in ("status", "cancel", "discard", "resume"):
        commands.add_parser(name).add_argument("run_id", type=int)
    commands.add_parser("watch").add_argument("cursor", type=int, nargs="?", default=0)
    commands.add_parser("boot_report")
    args = parser.parse_args(argv)
    try:
        return trio.run(_run, args)
    except (OSError, HandshakeError, trio.TooSlowError, json.JSONDecodeError) as exc:
        print(f"job_client: {exc!r}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
