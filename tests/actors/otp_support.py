"""Children for the ports of OTP's supervisor_SUITE (design §1.4, §1.10).

OTP's suite drives its children (``supervisor_1``) from outside: ``exit(Pid, Reason)``
makes one end with a reason. Ours are actors told what to do by message: ``"crash"``
raises in the handler (an abnormal exit), ``"exit"`` stops the actor itself (a normal
exit), ``"busy"`` keeps the handler busy (so a graceful stop must kill it), ``"slow"``
keeps it busy for 5 s (a graceful stop waits for it, or kills it at its grace). A
:class:`Plan` says which incarnations of a child fail to start. Every start, stop and
failed start is written to a :class:`Board` with its trio time.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from actors import Actor, ChildSpec, Reply

Entry = tuple[float, str, str, int]


@attrs.define
class Board:
    """The shared log: ``(time, what, child id, incarnation)``."""

    entries: list[Entry] = attrs.field(factory=list)

    def note(self, what: str, cid: str, k: int) -> None:
        # Rounded to the nanosecond: sums of backoffs (0.025 + 0.05) are not exact floats.
        self.entries.append((round(trio.current_time(), 9), what, cid, k))

    def since(self, t: float) -> list[Entry]:
        return [entry for entry in self.entries if entry[0] >= t]

    def kinds(self, what: str) -> list[tuple[str, int]]:
        return [(cid, k) for _, w, cid, k in self.entries if w == what]


class Worker(Actor):
    """An OTP ``supervisor_1`` child; answers ``"ping"`` with its incarnation."""

    def __init__(self, cid: str, board: Board, k: int, *, fail: bool) -> None:
        self.cid = cid
        self.board = board
        self.k = k
        self.fail = fail
        self.name = f"{cid}#{k}"

    async def on_start(self) -> None:
        if self.fail:
            self.board.note("fail_start", self.cid, self.k)
            raise OSError(f"{self.cid} cannot start")
        self.board.note("start", self.cid, self.k)

    async def handle(self, message: Any, reply: Reply[Any]) -> None:
        if message == "crash":
            raise ValueError(f"{self.cid} crashed")
        if message == "exit":
            self.ref.stop_nowait(0)
            reply.send("exiting")
        elif message == "busy":
            await trio.sleep(1000)
        elif message == "slow":
            await trio.sleep(5)
            self.board.note("slow_done", self.cid, self.k)
        else:
            reply.send((message, self.k))

    async def on_stop(self) -> None:
        self.board.note("stop", self.cid, self.k)


@attrs.define
class Plan:
    """``ChildSpec.start``: makes incarnation k; those in ``fail`` fail to start."""

    cid: str
    board: Board
    fail: set[int] = attrs.field(factory=set)
    made: int = 0

    def __call__(self, *args: Any) -> Worker:
        self.made += 1
        k = self.made
        fails = k in self.fail or "error" in args  # OTP's start_child(Sup, [error])
        return Worker(self.cid, self.board, k, fail=fails)


def child(
    cid: str,
    board: Board,
    restart: str = "permanent",
    *,
    fail: set[int] | None = None,
    shutdown: float | str = 1.0,
    significant: bool = False,
) -> ChildSpec:
    plan = Plan(cid, board, fail if fail is not None else set())
    return ChildSpec(
        cid,
        plan,
        restart=restart,  # type: ignore[arg-type]
        shutdown=shutdown,  # type: ignore[arg-type]
        significant=significant,
    )


async def settle() -> None:
    """Let every restart (25 ms backoff and more) happen: one virtual second."""
    await trio.sleep(1)
