"""A caller's cancel that comes after its helper died and was reaped (design §3.5).

The job's task may see the cancel before the pipe's end: the helper is then already
``exited``, and the ladder has nothing to cancel. It must not send a cancel frame or
move the lifecycle (``cancel_sent`` is no event of an exited helper), only wait for the
sweep of its tree, and report ``exited``.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from actors import HelperTimeouts
from actors._core._lifecycle import HelperEvent, HelperState
from actors._helpers._process._ladder import Ladder


class ExitedHelper:
    """A helper incarnation that was reaped, its tree swept."""

    last_escalation: str | None = None
    timeouts = HelperTimeouts()
    session = "s"
    pid = 4242
    state = HelperState.EXITED
    exited = True
    usable = False

    def cancel(self) -> bool:
        return False


class Reaper:
    def __init__(self, *, swept: bool) -> None:
        self.exited = trio.Event()
        if swept:
            self.exited.set()


class NoTree:
    def signal(self, *args: Any) -> list[Any]:
        raise AssertionError("a reaped helper's tree is not signalled by the ladder")


def _ladder(reaper: Reaper, advanced: list[HelperEvent], sent: list[bytes]) -> Ladder:
    class Pipe:
        send_broken = False

    def advance(event: HelperEvent) -> HelperState:
        advanced.append(event)
        raise AssertionError(f"{event} applied to an exited helper")

    async def receive_reply(generation: int, operation: str) -> Any:
        raise AssertionError("no reply is awaited from an exited helper")

    return Ladder(
        ExitedHelper(),
        tree=NoTree(),  # type: ignore[arg-type]
        reaper=reaper,  # type: ignore[arg-type]
        pipe=lambda: Pipe(),  # type: ignore[arg-type,return-value]
        receive_reply=receive_reply,
        advance=advance,
        emit=lambda kind, text, **details: sent.append(kind.encode()),
    )


async def test_a_cancel_after_the_helper_was_reaped_reports_exited() -> None:
    advanced: list[HelperEvent] = []
    emitted: list[bytes] = []
    ladder = _ladder(Reaper(swept=True), advanced, emitted)
    with trio.fail_after(1):
        escalation = await ladder.stop_job(7, "crash", reason="caller_cancelled")
    assert escalation == "exited"
    assert advanced == []  # no cancel_sent on an exited helper
    assert emitted == []  # no cancel_sent event either: nothing was sent


async def test_it_waits_for_the_sweep_of_the_tree(
    autojump_clock: trio.testing.MockClock,
) -> None:
    reaper = Reaper(swept=False)  # reaped, but its tree is still being swept
    ladder = _ladder(reaper, [], [])

    async def swept_later() -> None:
        await trio.sleep(0.1)
        reaper.exited.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(swept_later)
        escalation = await ladder.stop_job(7, "crash", reason="caller_cancelled")
        assert trio.current_time() == 0.1
    assert escalation == "exited"
