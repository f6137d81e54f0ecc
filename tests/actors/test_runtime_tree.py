"""The runtime as a supervision tree: restarts of each system actor (design §1.7).

On the autojump clock with exact virtual times: the pool is lazy (no helper process is
spawned), the event log is in memory, so nothing real happens in the background. The
tree's decisions are read from the ``actors.supervisor`` log records (their ``time`` is
trio's clock) and from the event log.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing
from helper_support import spec

from actors import (
    Backoff,
    HelperPool,
    PoolConfig,
    Renderer,
    RestartIntensityExceeded,
    RuntimeConfig,
    open_runtime,
)

RESTART = Backoff(base=1.0, cap=8.0, reset_after=60.0)


def render(observation: Any, kind: str, options: Any, check_cancel: Any) -> bytes:
    return b""


async def execute(job: Any, runtime: Any) -> Any:
    return None


def config(**fields: Any) -> RuntimeConfig:
    values: dict[str, Any] = {
        "helper": spec(),
        "pool": PoolConfig(size=1, eager=False),
        "render_fn": render,
        "execute": execute,
        "shutdown_grace": 1.0,
        "restart": RESTART,
    }
    values.update(fields)
    return RuntimeConfig(**values)


def decisions(caplog: pytest.LogCaptureFixture) -> list[tuple[float, str, str, str, int]]:
    """(time, supervisor, event, child, incarnation) of each decision, in order."""
    return [
        (r.time, r.supervisor, r.event, r.child, r.incarnation)
        for r in caplog.records
        if r.name == "actors.supervisor"
    ]


@pytest.fixture(autouse=True)
def _log_decisions(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="actors.supervisor")


async def test_the_tree_starts_in_dependency_order(autojump_clock, caplog):
    async with open_runtime(config()) as runtime:
        start = trio.current_time()
        rows = runtime.supervisor.which_children()
        assert [(row.id, row.incarnation) for row in rows] == [("event_log", 1), ("services", 1)]
    started = [(s, c) for _, s, e, c, _ in decisions(caplog) if e == "child_started"]
    assert started == [
        ("runtime", "event_log"),
        ("services", "pool"),
        ("services", "renderer"),
        ("services", "scheduler"),
        ("runtime", "services"),
    ]
    stopped = [(s, c) for _, s, e, c, _ in decisions(caplog) if e == "child_stopped"]
    assert stopped == [
        ("runtime", "services"),
        ("services", "scheduler"),
        ("services", "renderer"),
        ("services", "pool"),
        ("runtime", "event_log"),
    ]
    assert start == 0.0


@pytest.mark.parametrize("name", ["pool_ref", "renderer", "scheduler"])
async def test_a_service_is_restarted_alone_after_the_backoff(autojump_clock, caplog, name):
    async with open_runtime(config()) as runtime:
        before = runtime.refs()
        victim = getattr(runtime, name)
        await trio.sleep(5.0)
        await victim.stop(0)  # a permanent child: restarted even after a normal exit
        await trio.sleep(1.0)
        await trio.testing.wait_all_tasks_blocked()
        after = runtime.refs()
        watched = await runtime.eventlog.watch(0)
    changed = [old is not new for old, new in zip(before, after, strict=True)]
    index = ["eventlog_ref", "pool_ref", "renderer", "scheduler"].index(name)
    assert changed == [i == index for i in range(4)]
    child = {"pool_ref": "pool", "renderer": "renderer", "scheduler": "scheduler"}[name]
    mine = [(t, e, i) for t, s, e, c, i in decisions(caplog) if c == child and t > 0]
    assert mine[:3] == [
        (5.0, "child_exited", 1),
        (5.0, "child_restarting", 2),
        (6.0, "child_started", 2),
    ]
    kinds = [(e.kind, e.data.get("child")) for e in watched.events if e.kind.startswith("actor")]
    assert ("actor_exited", child) in kinds
    assert ("actor_started", child) in kinds


async def test_a_crash_is_restarted_with_a_growing_backoff(autojump_clock, caplog, monkeypatch):
    async def crashing(self: Renderer, message: Any, reply: Any) -> None:
        raise RuntimeError("the renderer broke")

    monkeypatch.setattr(Renderer, "handle", crashing)
    async with open_runtime(config()) as runtime:
        for _ in range(3):
            runtime.renderer.try_send("anything")
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(10.0)
    rows = [
        (t, e, i) for t, s, e, c, i in decisions(caplog) if c == "renderer" and e != "child_stopped"
    ]
    assert rows[1:] == [
        (0.0, "child_exited", 1),
        (0.0, "child_restarting", 2),
        (1.0, "child_started", 2),
        (10.0, "child_exited", 2),
        (10.0, "child_restarting", 3),
        (12.0, "child_started", 3),  # 2 s: the second attempt of the backoff
        (20.0, "child_exited", 3),
        (20.0, "child_restarting", 4),
        (24.0, "child_started", 4),
    ]
    exited = [r for r in caplog.records if getattr(r, "event", None) == "child_exited"]
    assert {(r.levelno, r.child_reason) for r in exited} == {(logging.WARNING, "RuntimeError")}


async def test_a_restarted_event_log_restarts_the_services_after_it(autojump_clock, caplog):
    async with open_runtime(config()) as runtime:
        before = runtime.refs()
        await trio.sleep(3.0)
        await runtime.eventlog_ref.stop(0)
        await trio.sleep(1.0)
        await trio.testing.wait_all_tasks_blocked()
        after = runtime.refs()
        rows = runtime.supervisor.which_children()
    assert [old is not new for old, new in zip(before, after, strict=True)] == [True] * 4
    assert [(row.id, row.incarnation) for row in rows] == [("event_log", 2), ("services", 2)]
    late = [(t, s, e, c) for t, s, e, c, _ in decisions(caplog) if t >= 3.0]
    assert late[:8] == [
        (3.0, "runtime", "child_exited", "event_log"),
        (3.0, "runtime", "child_stopped", "services"),
        (3.0, "services", "shutdown", ""),
        (3.0, "services", "child_stopped", "scheduler"),
        (3.0, "services", "child_stopped", "renderer"),
        (3.0, "services", "child_stopped", "pool"),
        (3.0, "runtime", "child_restarting", "event_log"),
        (4.0, "runtime", "child_started", "event_log"),
    ]


async def test_a_restarted_pool_tells_the_scheduler(autojump_clock):
    async with open_runtime(config()) as runtime:
        assert runtime.scheduler_actor.scheduler.incarnation == 0
        await runtime.pool_ref.stop(0)
        await trio.sleep(1.0)
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.scheduler_actor.scheduler.incarnation == 1  # HelperRestarted
        watched = await runtime.eventlog.watch(0)
    kinds = [e.kind for e in watched.events]
    assert "helper_pool_restarted" in kinds


async def test_a_job_that_comes_while_the_pool_restarts_waits_for_it(autojump_clock, monkeypatch):
    async def run_job(self: HelperPool, operation: str, payload: Any = None, **options: Any) -> Any:
        await trio.lowlevel.checkpoint()  # no helper process under the mock clock
        return payload

    monkeypatch.setattr(HelperPool, "run_job", run_job)
    async with open_runtime(config()) as runtime:
        assert await runtime.pool.run_job("echo", 6, timeout=30) == 6
        await trio.sleep(2.0)
        await runtime.pool_ref.stop(0)
        assert await runtime.pool.run_job("echo", 7, timeout=30) == 7
        assert trio.current_time() == 3.0  # it waited for the restart, 1 s of backoff


async def test_past_the_intensity_the_runtime_fails(autojump_clock, caplog):
    async def stop_the_renderer_again_and_again() -> None:
        async with open_runtime(config(max_restarts=1)) as runtime:
            for _ in range(5):
                await runtime.renderer.stop(0)
                await trio.sleep(10.0)

    with pytest.raises(RestartIntensityExceeded) as caught:
        await stop_the_renderer_again_and_again()
    assert caught.value.details["supervisor"] == "runtime"
    assert caught.value.details["child"] == "services"
    assert trio.current_time() == 30.0
    gave_up = [(t, s, c) for t, s, e, c, _ in decisions(caplog) if e == "intensity_exceeded"]
    # Each services supervisor allows one restart; the second stop is one too many,
    # and the runtime allows one restart of the services.
    assert gave_up == [
        (10.0, "services", "renderer"),
        (30.0, "services", "renderer"),
        (30.0, "runtime", "services"),
    ]
