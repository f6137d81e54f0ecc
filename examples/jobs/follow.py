"""The job client's session and how it follows one run for a person (design §6.6, §6.14).

:class:`Session` sends requests over one websocket and matches answers by
``request_id``, keeping pushes for later. :class:`Output` prints for a person (or, with
``--json``, every message as one line of JSON). :func:`follow` follows one run: its
progress on one line (rewritten in place on a terminal; at each tenth otherwise), then
its verdict and result, from the run as *this client's request* sees it (``status``
with ``waiter``: a coalesced run cancelled for another waiter goes on for this one).

Verdict names are one lowercase word: ``ok``, ``failed`` (the runner raised: the event
log's ``NOT_RUN``), ``cancelled``, ``held`` (the server stopped before the run
finished), or a server's own verdict (e.g. ``empty``) as it is, lowercased.
"""

from __future__ import annotations

import itertools
import json
import random
import sys
import uuid
from typing import TYPE_CHECKING, Any, TextIO

import attrs
import trio

from .retry import SubmitRetryPolicy, submit_with_retry

if TYPE_CHECKING:
    from trio_websocket import WebSocketConnection

__all__ = ["Outcome", "Output", "Session", "follow", "read", "verdict_name", "waiting"]

#: Seconds (trio clock) one answer may take.
ANSWER_TIMEOUT = 10.0
_TERMINAL = frozenset({"job_finished", "job_cancelled"})


def verdict_name(state: str | None, verdict: str | None) -> str:
    """The one-word, lowercase verdict of a run's ``state`` and ``verdict``."""
    if state == "finished":
        word = (verdict or "").lower()
        return "failed" if word in ("", "not_run") else word
    return (state or "unknown").lower()


class Session:
    """Requests over one websocket; answers matched by ``request_id``, pushes kept.

    Args:
        ws: The open websocket.
        prefix: Request ids are ``PREFIX-N``; default unique per process (they are the
            server's idempotency keys, design §6.3).
    """

    def __init__(self, ws: WebSocketConnection, prefix: str | None = None) -> None:
        self.ws = ws
        self.pushed: list[dict[str, Any]] = []
        base = prefix or f"cli-{uuid.uuid4().hex[:12]}"
        self._ids = (f"{base}-{n}" for n in itertools.count(1))

    def new_id(self) -> str:
        """A fresh request id."""
        return next(self._ids)

    async def send(self, type: str, request_id: str, **fields: Any) -> None:
        """Send one request without waiting for its answer."""
        await self.ws.send_message(json.dumps({"type": type, "request_id": request_id, **fields}))

    async def request(
        self, type: str, *, request_id: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        """Send one request and return its answer (pushes meanwhile are kept).

        Raises:
            trio.TooSlowError: no answer within ``ANSWER_TIMEOUT`` seconds.
            ConnectionClosed: the server closed the connection.
        """
        request_id = request_id or self.new_id()
        await self.send(type, request_id, **fields)
        with trio.fail_after(ANSWER_TIMEOUT):
            while True:
                message = await self.receive()
                if message.get("request_id") == request_id:
                    return message
                self.pushed.append(message)

    async def receive(self) -> dict[str, Any]:
        """The next message from the server, parsed (a JSON object)."""
        message: dict[str, Any] = json.loads(await self.ws.get_message())
        return message

    async def next_push(self) -> dict[str, Any]:
        """The oldest kept push, else the next message."""
        return self.pushed.pop(0) if self.pushed else await self.receive()


@attrs.define
class Output:
    """Where the client writes: for a person, or ``--json`` (one message a line).

    Waiting and failures go to ``err``, so ``out`` holds only what was asked for.
    """

    json_lines: bool = False
    out: TextIO = attrs.field(factory=lambda: sys.stdout)
    err: TextIO = attrs.field(factory=lambda: sys.stderr)
    _progress_shown: bool = False
    _tenth: int = -1

    @property
    def tty(self) -> bool:
        """True if ``out`` is a terminal (the progress line is rewritten in place)."""
        return bool(getattr(self.out, "isatty", lambda: False)())

    def message(self, message: dict[str, Any]) -> None:
        """With ``--json``: print ``message`` as one line."""
        if self.json_lines:
            self._end_progress()
            print(json.dumps(message), file=self.out, flush=True)

    def line(self, text: str) -> None:
        """For a person: print ``text`` (ending a progress line first)."""
        if not self.json_lines:
            self._end_progress()
            print(text, file=self.out, flush=True)

    def note(self, text: str) -> None:
        """On ``err``: waiting, and why something failed."""
        self._end_progress()
        print(text, file=self.err, flush=True)

    def progress(self, run_id: int, fraction: float, note: str | None) -> None:
        """The run's progress line: rewritten on a terminal, else at each new tenth."""
        if self.json_lines:
            return
        text = f"run {run_id}: running {fraction:4.0%}" + (f"  {note}" if note else "")
        if self.tty:
            print(f"\r{text[:100]:<100}", end="", file=self.out, flush=True)
            self._progress_shown = True
        elif int(fraction * 10) > self._tenth:
            self._tenth = int(fraction * 10)
            print(text, file=self.out, flush=True)

    def _end_progress(self) -> None:
        if self._progress_shown:
            print(file=self.out, flush=True)
            self._progress_shown = False


@attrs.frozen
class Outcome:
    """How following a run ended."""

    verdict: str
    """:func:`verdict_name` of the run as this client's request sees it."""
    status: dict[str, Any] | None = None
    """The final ``status_reply``, if one came."""

    @property
    def ok(self) -> bool:
        """True for the verdict ``ok`` only."""
        return self.verdict == "ok"


def describe_end(run_id: int, status: dict[str, Any]) -> tuple[str, str | None]:
    """The verdict line of a final ``status_reply`` and the result line (for ``ok``)."""
    detail = status.get("detail") or {}
    verdict = verdict_name(status.get("state"), status.get("verdict"))
    line = f"run {run_id}: {verdict}"
    if verdict == "cancelled" and detail.get("cancelled_by"):
        line += f" (by {detail['cancelled_by']})"
    error = detail.get("error")
    if isinstance(error, dict) and error.get("message"):
        line += f": {error.get('code', 'error')}: {error['message']}"
    result = None
    if verdict == "ok":
        result = f"result: {json.dumps(detail.get('result'))}"
    return line, result


async def follow(session: Session, run_id: int, waiter: str | None, output: Output) -> Outcome:
    """Follow run ``run_id`` until it is decided for ``waiter``; print as it goes.

    The session must be subscribed already (events of other runs are skipped). The end
    is read from ``status`` (with ``waiter``), so the verdict is this request's truth:
    ``cancelled`` if it was detached, the run's verdict otherwise.

    Raises:
        ConnectionClosed: the server closed the connection (e.g. it shut down, 1001; or
            dropped this client for falling behind, 4000: the caller resubscribes after
            the close reason's cursor).
    """
    while True:
        message = await session.next_push()
        if message.get("type") == "resync_required":
            output.message(message)
            continue  # the server closes next (4000, with the cursor): the caller resumes
        if message.get("type") != "event" or message.get("run_id") != run_id:
            continue
        output.message(message)
        kind, data = message.get("kind"), message.get("data") or {}
        if kind == "job_started":
            output.line(f"run {run_id}: running")
        elif kind == "job_progress":
            output.progress(run_id, float(data.get("fraction", 0.0)), data.get("note"))
        elif kind in _TERMINAL or (
            kind == "request_detached" and waiter is not None and data.get("request_id") == waiter
        ):
            break
    return await finish(session, run_id, waiter, output)


async def finish(session: Session, run_id: int, waiter: str | None, output: Output) -> Outcome:
    """Ask the run's final status (as ``waiter`` sees it) and print the verdict."""
    fields: dict[str, Any] = {"run_id": run_id}
    if waiter is not None:
        fields["waiter"] = waiter
    status = await read(session, "status", output, **fields)
    output.message(status)
    if status.get("type") != "status_reply":
        output.note(f"run {run_id}: {status.get('code')}: {status.get('message')}")
        return Outcome("unknown", None)
    line, result = describe_end(run_id, status)
    output.line(line)
    if result is not None:
        output.line(result)
    return Outcome(verdict_name(status.get("state"), status.get("verdict")), status)


#: How long a read (``status``, ``watch``, ``boot_report``) is retried while the server
#: refuses it retryably (a ledger restarting): shorter than a submit's patience, since
#: a person waits for the answer.
READ_RETRY = SubmitRetryPolicy(give_up_after=30.0)


def waiting(output: Output) -> Any:
    """An ``on_wait`` for :func:`~examples.jobs.retry.submit_with_retry` that shows each
    wait on ``output``'s stderr, with the refusal's reason."""

    def on_wait(retry: int, delay: float, refusal: dict[str, Any]) -> None:
        code = refusal.get("code")
        why = {
            "admission_full": "the server is busy",
            "ledger_unavailable": "the server cannot use its ledger",
        }.get(str(code), "refused")
        if refusal.get("depth") is not None:
            why += f" ({refusal['depth']} of {refusal.get('bound')} runs)"
        output.note(f"{code}: {why}; retrying in {delay:.1f} s (retry {retry})")

    return on_wait


async def read(session: Session, kind: str, output: Output, **fields: Any) -> dict[str, Any]:
    """The answer to the read-only request ``kind`` (``status``, ``watch``,
    ``boot_report``), asked again while the server refuses it retryably
    (``ledger_unavailable`` with ``retry_after``; :data:`READ_RETRY`): a read changes
    nothing, so asking twice is safe."""
    return await submit_with_retry(
        lambda: session.request(kind, **fields),
        policy=READ_RETRY,
        rng=random.Random(),
        on_wait=waiting(output),
    )
