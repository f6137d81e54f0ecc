"""The change probe stops at once at shutdown, its job in flight with it (design §3.8)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from examples.preview.app.change_probe import ChangeProbe

POLL = 0.2


class HungHelpers:
    """A helper pool whose ``probe`` job never answers: it waits until cancelled."""

    def __init__(self) -> None:
        self.started = trio.Event()
        self.cancelled_at: float | None = None

    async def run_job(self, operation: str, payload: Any) -> Any:
        assert operation == "probe"
        self.started.set()
        try:
            await trio.sleep_forever()
        finally:
            self.cancelled_at = trio.current_time()


async def test_stop_cancels_the_probe_in_flight_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    helpers = HungHelpers()
    probe = ChangeProbe(None, helpers, None, None, None, poll_interval=POLL)  # type: ignore[arg-type]
    ended_at: list[float] = []

    async def run() -> None:
        await probe.run()
        ended_at.append(trio.current_time())

    with trio.fail_after(60):  # virtual: a probe that does not stop fails, never hangs
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await helpers.started.wait()
            assert trio.current_time() == POLL  # the first probe, one interval in
            await trio.sleep(5.0)  # the job hangs: nothing ends it but stop()
            assert helpers.cancelled_at is None
            probe.stop()
    assert helpers.cancelled_at == POLL + 5.0
    assert ended_at == [POLL + 5.0]  # run() returned, without waiting for the app's end


async def test_a_probe_stopped_before_it_runs_never_probes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    helpers = HungHelpers()
    probe = ChangeProbe(None, helpers, None, None, None, poll_interval=POLL)  # type: ignore[arg-type]
    probe.stop()
    with trio.fail_after(1):
        await probe.run()
    assert not helpers.started.is_set()
