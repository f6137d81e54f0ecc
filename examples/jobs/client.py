"""The job server's command-line client, for a person (design §7; JSON over websocket).

Examples::

    python -m examples.jobs.client submit count_primes '{"limit": 3000000}'
    python -m examples.jobs.client submit hash_file '{"path": "README.md"}'
    python -m examples.jobs.client status 3
    python -m examples.jobs.client cancel 3
    python -m examples.jobs.client boot_report
    python -m examples.jobs.client resume 3      # or: discard 3; resume --override 3
    python -m examples.jobs.client watch 0

``submit`` follows only its own run: a line when it is admitted, its progress on one
line, then its verdict (``ok``, ``failed``, ``cancelled``, ``held``: one lowercase word)
and, for ``ok``, its result as JSON. A refused submit (the server is busy,
``admission_full``; its disk is full, ``ledger_unavailable``) is retried with the same request
id, never before the server's ``retry_after`` and with full jitter
(:mod:`examples.jobs.retry`); each wait is shown on stderr. A read (``status``,
``watch``, ``boot_report``, and the status that ends a followed run) refused the same
way, e.g. by a ledger restarting, is asked again for up to 30 seconds. Ctrl-C while it follows
cancels this request (the run goes on if other requests joined it, design §6.14); a
second Ctrl-C stops waiting. ``resume`` follows the resumed run the same way. A client
dropped for falling behind (close 4000) reconnects and resumes after its cursor.

``--json`` prints every message instead, one JSON object a line. ``--url`` (default
``ws://127.0.0.1:8766``; ``http://`` is taken as ``ws://``) selects the server. The
token is ``--token``, else the ``?token=`` of the URL, else ``$TRIO_ACTORS_TOKEN``, else
the one a local server wrote in its info file (design §7.3); it is sent in an
``Authorization`` header and never printed.

Exit status: 0 when the answer is not an error and (``submit``, ``resume``) the run's
verdict is ``ok``; 1 for an error answer, a run that failed or was cancelled, a refusal
still standing after ``--give-up-after`` seconds, or the server going away; 2 for a bad
argument or a refused connection (nothing listening, a wrong token). Failures are one
line on stderr.
"""

from __future__ import annotations

from ..preview.cli import quiet_start

# Ctrl-C while the modules below load: no traceback (main() gives Ctrl-C back).
quiet_start.install(__name__, "trio-actors-jobs-client")

import argparse
import json
import random
import signal
import sys
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio
from trio_websocket import ConnectionClosed

from ..web.cli import (
    OneLineParser,
    client_target,
    connection_problem,
    count,
    leaf,
    seconds,
    stdout_closed,
)
from ..web.closing import GOING_AWAY, RESYNC_REQUIRED, cursor_of
from ..web.wsclient import open_websocket_client
from .follow import (
    Outcome,
    Output,
    Session,
    describe_end,
    finish,
    follow,
    read,
    verdict_name,
    waiting,
)
from .retry import SubmitRetryPolicy, retry_hint, submit_with_retry

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["main", "submit_and_follow"]

#: The job server's address unless ``--url`` says otherwise.
DEFAULT_URL = "ws://127.0.0.1:8766"
#: Times a client dropped for falling behind reconnects while following one run.
MAX_RECONNECTS = 5


@asynccontextmanager
async def _session(args: argparse.Namespace) -> AsyncIterator[Session]:
    headers = [(b"authorization", f"Bearer {args.token}".encode())] if args.token else None
    async with open_websocket_client(args.url, extra_headers=headers) as ws:
        yield Session(ws)


async def submit_and_follow(
    session: Session,
    operation: str,
    arguments: dict[str, Any],
    output: Output,
    *,
    policy: SubmitRetryPolicy,
    rng: random.Random,
) -> tuple[dict[str, Any], str]:
    """Subscribe, then submit (retrying refusals); return the answer and its request id.

    Subscribing before each attempt means no event of the run can be missed. Refusals
    are retried by :func:`examples.jobs.retry.submit_with_retry`, each wait shown by
    ``output``; while it waits the client is unsubscribed, since it reads nothing then
    and the server would drop it for falling behind (design §7.4).
    """
    request_id = session.new_id()

    async def attempt() -> dict[str, Any]:
        await session.request("subscribe")  # new events only: none of this run is missed
        answer = await session.request(
            "submit", request_id=request_id, operation=operation, arguments=arguments
        )
        if retry_hint(answer) is not None:
            await session.request("unsubscribe")
            session.pushed.clear()  # events from before the run: none is about it
        return answer

    answer = await submit_with_retry(attempt, policy=policy, rng=rng, on_wait=waiting(output))
    return answer, request_id


async def _follow_run(
    args: argparse.Namespace, session: Session, run_id: int, waiter: str | None, output: Output
) -> Outcome:
    """:func:`follow`, reconnecting after the close reason's cursor if dropped (4000)."""
    try:
        return await follow(session, run_id, waiter, output)
    except ConnectionClosed as exc:
        if exc.reason is None or exc.reason.code != RESYNC_REQUIRED:
            raise
        cursor = cursor_of(exc.reason.reason)
    for _ in range(MAX_RECONNECTS):
        output.note(f"fell behind the server's events; resuming after event {cursor}")
        async with _session(args) as fresh:
            answer = await fresh.request("subscribe", cursor=cursor)
            if answer.get("type") != "events":  # cursor_expired: the status tells the rest
                await fresh.request("subscribe")
                status = await fresh.request("status", run_id=run_id, **_waiter(waiter))
                if status.get("state") in ("finished", "cancelled"):
                    return await finish(fresh, run_id, waiter, output)
            else:
                fresh.pushed[:0] = answer.get("events", [])
            try:
                return await follow(fresh, run_id, waiter, output)
            except ConnectionClosed as exc:
                if exc.reason is None or exc.reason.code != RESYNC_REQUIRED:
                    raise
                cursor = cursor_of(exc.reason.reason)
    output.note(f"run {run_id}: still falling behind after {MAX_RECONNECTS} reconnects")
    return Outcome("unknown")


def _waiter(waiter: str | None) -> dict[str, str]:
    return {} if waiter is None else {"waiter": waiter}


async def _follow_until_decided(
    args: argparse.Namespace, session: Session, run_id: int, waiter: str | None, output: Output
) -> int:
    """Follow with Ctrl-C cancelling ``waiter`` (a second one stops waiting): exit status
    (130 when a second Ctrl-C stopped the wait, as for a shell's interrupted command)."""
    outcome: Outcome | None = None
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        async with trio.open_nursery() as nursery:

            async def cancel_on_interrupt() -> None:
                await anext(interrupts)
                output.note(f"cancelling run {run_id} (Ctrl-C again to stop waiting)")
                await session.send("cancel", session.new_id(), run_id=run_id, **_waiter(waiter))
                await anext(interrupts)
                nursery.cancel_scope.cancel()

            nursery.start_soon(cancel_on_interrupt)
            try:
                outcome = await _follow_run(args, session, run_id, waiter, output)
            except ConnectionClosed as exc:
                if exc.reason is not None and exc.reason.code == GOING_AWAY:
                    exc.add_note(  # main() prints it after the close: one line
                        f"run {run_id} did not finish: with a ledger the server holds it at "
                        "its next start (resume or discard it then)"
                    )
                raise
            nursery.cancel_scope.cancel()
    if outcome is None:  # a second Ctrl-C: the run's end is not known here
        output.note(f"stopped waiting for run {run_id}; `status {run_id}` tells how it ends")
        return 130
    return 0 if outcome.ok else 1


async def _submit(args: argparse.Namespace, output: Output) -> int:
    policy = SubmitRetryPolicy(give_up_after=args.give_up_after)
    async with _session(args) as session:
        answer, request_id = await submit_and_follow(
            session, args.operation, args.arguments, output, policy=policy, rng=random.Random()
        )
        output.message(answer)
        if answer.get("type") != "receipt" or not answer.get("admitted"):
            output.note(f"job_client: not admitted: {_refusal(answer)}")
            return 1
        run_id = answer["run_id"]
        joined = " (joined an equal run in flight)" if answer.get("coalesced") else ""
        output.line(f"run {run_id}: submitted {args.operation}{joined}")
        return await _follow_until_decided(args, session, run_id, request_id, output)


async def _resume(args: argparse.Namespace, output: Output) -> int:
    async with _session(args) as session:
        await session.request("subscribe")
        answer = await session.request("resume", run_id=args.run_id, override=args.override)
        output.message(answer)
        if answer.get("type") != "receipt":
            output.note(f"job_client: not resumed: {_refusal(answer)}")
            return 1
        output.line(f"run {args.run_id}: resumed")
        return await _follow_until_decided(args, session, args.run_id, None, output)


def _refusal(answer: dict[str, Any]) -> str:
    code = answer.get("code") or answer.get("type")
    message = answer.get("message")
    return f"{code}: {message}" if message else str(code)


def _print_status(output: Output, status: dict[str, Any]) -> None:
    detail = status.get("detail") or {}
    run_id = status["run_id"]
    state = status.get("state")
    if state in ("finished", "cancelled"):
        line, result = describe_end(run_id, status)
        output.line(line)
        if result is not None:
            output.line(result)
        return
    progress = status.get("progress")
    shown = f" {progress:.0%}" if isinstance(progress, int | float) else ""
    output.line(
        f"run {run_id}: {verdict_name(state, None)}{shown} ({detail.get('operation')} "
        f"{json.dumps(detail.get('arguments'))}; waiters {detail.get('waiters')})"
    )


async def _once(args: argparse.Namespace, output: Output) -> int:
    async with _session(args) as session:
        if args.command in ("cancel", "discard"):
            answer = await session.request(args.command, run_id=args.run_id)
        elif args.command == "status":
            answer = await read(session, "status", output, run_id=args.run_id)
        elif args.command == "watch":
            answer = await read(session, "watch", output, cursor=args.cursor)
        else:
            answer = await read(session, "boot_report", output)
    output.message(answer)
    if answer.get("type") == "error":
        output.note(f"job_client: {_refusal(answer)}")
        return 1
    if answer.get("type") == "status_reply":
        _print_status(output, answer)
    elif answer.get("type") == "events":
        for event in answer["events"]:
            output.line(json.dumps(event))
        output.line(f"cursor: {answer['cursor']}")
    else:
        for key in ("survivors", "interrupted", "quarantined"):
            output.line(f"{key}: {', '.join(map(str, answer[key])) or 'none'}")
    return 0


async def _run(args: argparse.Namespace) -> int:
    output = Output(json_lines=args.json)
    if args.command == "submit":
        return await _submit(args, output)
    if args.command == "resume":
        return await _resume(args, output)
    return await _once(args, output)


def _parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m examples.jobs.client",
        label="job_client",
        description="Submit jobs to the job server and follow them; ask about runs.",
    )
    parser.add_argument(
        "--url", default=DEFAULT_URL, help=f"the job server's address (default {DEFAULT_URL})"
    )
    parser.add_argument(
        "--token", default=None, help="the server's token (default: found, see the docs)"
    )
    parser.add_argument("--json", action="store_true", help="print every message as JSON")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=text, description=text, label="job_client")
        # SUPPRESS: a --json given before the command is not reset by the command's.
        sub.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                         help="print every message as JSON")  # fmt: skip
        return sub

    submit = command("submit", "submit a job and follow it to its verdict")
    submit.add_argument("operation", help="hash_file, count_primes, sleep or crash")
    submit.add_argument("arguments", nargs="?", help="a JSON object, e.g. '{\"limit\": 1000}'")
    submit.add_argument(
        "--give-up-after", type=seconds(), default=300.0, metavar="S",
        help="seconds to keep retrying while the server refuses (default 300)",
    )  # fmt: skip

    def run_command(name: str, text: str) -> argparse.ArgumentParser:
        sub = command(name, text)
        sub.add_argument("run_id", type=count(), help="the run's id (its receipt, boot_report)")
        return sub

    run_command("status", "show a run's state")
    run_command("cancel", "cancel a run (true final state)")
    run_command("discard", "give up a run held from before")
    resume = run_command("resume", "run a run held from before again and follow it")
    resume.add_argument(
        "--override", action="store_true", help="resume a quarantined run (interrupted twice)"
    )
    command("watch", "print the events after a cursor").add_argument(
        "cursor", type=count(), nargs="?", default=0, help="the last event seen (default 0)"
    )
    command("boot_report", "list the runs held from before a restart")
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command line; see the module docstring. Returns the exit status."""
    quiet_start.restore()  # Ctrl-C is a KeyboardInterrupt again
    parser = _parser()
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
        if isinstance(error, BrokenPipeError):  # e.g. `watch 0 | head`
            return stdout_closed()
        if isinstance(error, KeyboardInterrupt):  # Ctrl-C outside a followed run
            print("job_client: interrupted", file=sys.stderr)
            return 130
        if isinstance(error, json.JSONDecodeError):
            print(
                f"job_client: the server sent a message that is not JSON: {error}", file=sys.stderr
            )
            return 1
        problem = connection_problem(error)
        if problem is None:
            raise
        if isinstance(error, ConnectionClosed | trio.TooSlowError):  # connected before
            notes = "".join(f"; {note}" for note in getattr(error, "__notes__", ()))
            print(f"job_client: {args.url}: {problem}{notes}", file=sys.stderr)
            return 1
        print(f"job_client: cannot connect to {args.url}: {problem}", file=sys.stderr)
        return 2


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


if __name__ == "__main__":
    sys.exit(main())
