"""What a supervisor decides can be seen: events, log records, a supervisor as a child.

On the autojump clock with exact virtual times (design §1.4, §1.7).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio
import trio.testing
from test_supervisor import Log, spec

from actors import ChildSpec, RestartIntensityExceeded, Supervisor, SupervisorEvent

if TYPE_CHECKING:
    import pytest


async def test_every_decision_is_an_event_and_a_log_record(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="actors.supervisor")
    log: Log = []
    seen: list[SupervisorEvent] = []
    children = [spec("a", log), spec("b", log, crash_after={1: 1.0}, exit_after={2: 1.0})]
    sup = Supervisor(children, name="top", on_event=seen.append)
    ref = await nursery.start(sup.run)
    await trio.sleep(3)
    await ref.stop()
    # (times are sums of float backoff steps: rounded to the microsecond)
    rows = [(round(e.time, 6), e.kind, e.child, e.incarnation, e.reason, e.delay) for e in seen]
    assert rows == [
        (0.0, "child_started", "a", 1, None, None),
        (0.0, "child_started", "b", 1, None, None),
        (1.0, "child_exited", "b", 1, "ValueError", None),
        (1.0, "child_restarting", "b", 2, None, 0.025),
        (1.025, "child_started", "b", 2, None, None),
        (2.025, "child_exited", "b", 2, "normal", None),  # permanent: back even so
        (2.025, "child_restarting", "b", 3, None, 0.05),  # the backoff's second step
        (2.075, "child_started", "b", 3, None, None),
        (3.0, "shutdown", "", 0, None, None),  # asked to stop: it stops its children
        (3.0, "child_stopped", "b", 3, None, None),
        (3.0, "child_stopped", "a", 1, None, None),
    ]
    assert seen[2].message == "ValueError: b crashed"
    assert seen[0].to_dict()["supervisor"] == "top"
    assert "ref" not in seen[0].to_dict()
    records = {(r.event, r.child, r.incarnation): r.levelno for r in caplog.records}
    assert records["child_exited", "b", 1] == logging.WARNING  # abnormal
    assert records["child_exited", "b", 2] == logging.INFO  # normal
    assert records["child_restarting", "b", 2] == logging.WARNING
    assert records["child_started", "a", 1] == logging.DEBUG


async def test_a_failing_on_event_is_logged_and_ignored(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event: SupervisorEvent) -> None:
        raise RuntimeError("the observer broke")

    log: Log = []
    ref = await nursery.start(Supervisor([spec("a", log)], on_event=broken).run)
    await ref.stop()
    assert log[-1][1] == "stop"
    assert any("on_event raised" in r.getMessage() for r in caplog.records)


async def test_a_supervisor_is_a_child_of_a_supervisor(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    log: Log = []
    seen: list[Any] = []

    x = spec("x", log, crash_after={1: 1.0, 2: 1.0})  # its third incarnation lives on

    def inner() -> Supervisor:
        return Supervisor([x], max_restarts=1, name="inner", on_event=seen.append)

    outer = Supervisor(
        [spec("first", log), ChildSpec("inner", inner, shutdown=1.0)],
        strategy="rest_for_one",
        name="outer",
        on_event=seen.append,
    )
    ref = await nursery.start(outer.run)
    await trio.sleep(5)
    rows = [(e.time, e.supervisor, e.kind, e.child, e.incarnation) for e in seen]
    # x crashes twice: the inner supervisor gives up, the outer one restarts it whole.
    assert rows[:9] == [
        (0.0, "outer", "child_started", "first", 1),
        (0.0, "inner", "child_started", "x", 1),
        (0.0, "outer", "child_started", "inner", 1),
        (1.0, "inner", "child_exited", "x", 1),
        (1.0, "inner", "child_restarting", "x", 2),
        (1.025, "inner", "child_started", "x", 2),
        (2.025, "inner", "child_exited", "x", 2),
        (2.025, "inner", "intensity_exceeded", "x", 2),
        (2.025, "outer", "child_exited", "inner", 1),
    ]
    exited = seen[8]
    assert exited.reason == RestartIntensityExceeded.code
    assert [(c.id, c.incarnation) for c in ref.which_children()] == [("first", 1), ("inner", 2)]
    await ref.stop()
