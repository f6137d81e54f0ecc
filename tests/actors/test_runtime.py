"""open_runtime: the four system actors under their supervision tree (design §1.7).

Real helper processes, so the real clock with short timeouts (contributing §F.3); every
test checks that no child process or zombie is left once the runtime has closed.
"""

from __future__ import annotations

import contextlib
import io
import zlib
from typing import Any

import pytest
import trio
import trio.testing
from helper_support import FAST, assert_no_children, spec

from actors import (
    ActorError,
    ActorState,
    Backoff,
    Failed,
    HelperExited,
    HelperTimeouts,
    Kind,
    OperationSpec,
    PoolConfig,
    PoolRestarting,
    Published,
    Render,
    RenderFailed,
    RunInfo,
    RuntimeConfig,
    SchedulerConfig,
    SchedulerJob,
    Settled,
    open_runtime,
)


def tiny_png(width: int, height: int) -> bytes:
    """A valid grey PNG, built with zlib so the test needs no Pillow."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\x08\x00\x00\x00\x00"
    out = io.BytesIO()
    out.write(b"\x89PNG\r\n\x1a\n")
    out.write(chunk(b"IHDR", header))
    out.write(chunk(b"IDAT", zlib.compress(raw)))
    out.write(chunk(b"IEND", b""))
    return out.getvalue()


def render(observation: Any, kind: str, options: Any, check_cancel: Any) -> bytes:
    check_cancel()
    size = 16 if kind == "thumbnail" else 64
    return tiny_png(size + observation["run"], size)


async def execute(job: SchedulerJob, runtime: Any) -> Any:
    claim = job.claim
    if claim.kind == "metadata":
        # A real helper-process job: the echo handler returns its payload.
        return await runtime.pool.run_job("echo", {"run": claim.run_id}, timeout=5)
    observation = job.observation
    assert observation is not None  # metadata is conclusive before images (design §4.1)
    rendered = await runtime.renderer.ask(
        Render(observation=observation, kind=claim.kind, deadline=claim.deadline), timeout=5
    )
    return rendered.data


#: The embedder's kinds of work: a helper read, then two drawings that need it.
KINDS = (
    Kind(name="metadata", helper=True),
    Kind(name="thumbnail", needs=("metadata",)),
    Kind(name="preview", needs=("metadata",)),
)


def config(**overrides: Any) -> RuntimeConfig:
    fields: dict[str, Any] = {
        "helper": spec(),
        "pool": PoolConfig(size=2, timeouts=FAST),
        "render_fn": render,
        "execute": execute,
        "scheduler": SchedulerConfig(kinds=KINDS),
        "runs": [RunInfo(run_id=i, guid=f"guid-{i}", revision="r1") for i in (1, 2, 3)],
        "operations": [OperationSpec(name="preview", fields={"run_id"})],
        "shutdown_grace": 2.0,
    }
    fields.update(overrides)
    return RuntimeConfig(**fields)


async def test_four_actors_run_every_kind_and_leave_nothing() -> None:
    published: dict[tuple[int, str], Any] = {}
    settled: set[int] = set()
    with trio.fail_after(30):
        async with open_runtime(config()) as runtime:
            assert [ref.state for ref in runtime.refs()] == [ActorState.RUNNING] * 4
            receipt = await runtime.eventlog.submit("preview", {"run_id": 1}, request_id="r1")
            assert receipt.admitted
            async for notice in runtime.scheduler_events:
                if isinstance(notice, Published):
                    published[notice.run_id, notice.kind] = notice.result
                elif isinstance(notice, Settled):
                    settled.add(notice.run_id)
                if settled == {1, 2, 3}:
                    break
            pids = [h.pid for h in (await runtime.pool.snapshot()).helpers]
            assert len(pids) == 2
        assert [ref.state for ref in runtime.refs()] == [ActorState.STOPPED] * 4
    assert set(published) == {
        (r, k) for r in (1, 2, 3) for k in ("metadata", "thumbnail", "preview")
    }
    assert published[2, "metadata"] == {"run": 2}
    assert published[3, "thumbnail"][:8] == b"\x89PNG\r\n\x1a\n"
    assert_no_children()


async def test_leaving_by_cancellation_still_stops_everything() -> None:
    with trio.CancelScope() as outer:
        async with open_runtime(config()) as runtime:
            outer.cancel()
            await trio.sleep_forever()
    assert outer.cancelled_caught
    assert [ref.state for ref in runtime.refs()] == [ActorState.STOPPED] * 4
    assert_no_children()


async def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="shutdown_grace"):
        config(shutdown_grace=float("nan"))
    with pytest.raises(ValueError, match="execute"):
        config(execute=42)


async def test_a_failed_pool_is_restarted_by_the_tree_and_the_scheduler_is_told():
    cfg = config(
        pool=PoolConfig(size=1, timeouts=FAST, max_restarts=0),
        runs=[],
        restart=Backoff(base=0.05, cap=0.1, reset_after=60.0),
    )
    with trio.fail_after(30):
        async with open_runtime(cfg) as runtime:
            first = runtime.pool_ref
            with pytest.raises(HelperExited):
                await runtime.pool.run_job("crash", 3, timeout=10)
            with pytest.raises(PoolRestarting) as caught:  # the replacement is one too many
                await runtime.pool.run_job("echo", 1, timeout=10)
            assert await runtime.pool.run_job("echo", 2, timeout=10) == 2  # after the restart
            assert runtime.pool_ref is not first
            assert runtime.scheduler_actor.scheduler.incarnation >= 1  # HelperRestarted
            watched = await runtime.eventlog.watch(0)
    assert (caught.value.code, caught.value.category) == ("pool_restarting", "transient")
    kinds = [e.kind for e in watched.events]
    tail = kinds[kinds.index("helper_intensity_exceeded") :]
    assert [k for k in tail if k.startswith("actor_")][:3] == [
        "actor_exited",
        "actor_restarting",
        "actor_started",
    ]
    assert "helper_pool_restarted" in tail
    exited = next(e for e in watched.events if e.kind == "actor_exited")
    assert (exited.data["child"], exited.data["reason"]) == ("pool", "pool_failed")
    assert_no_children()


async def test_every_helper_step_is_an_event_in_the_event_log():
    with trio.fail_after(30):
        async with open_runtime(config(runs=[])) as runtime:
            assert await runtime.pool.run_job("echo", 1, timeout=10) == 1
            watched = await runtime.eventlog.watch(0)
    # The zygote's own events (design §3.17) come and go with the start method.
    helper = [
        e
        for e in watched.events
        if e.kind.startswith("helper_") and not e.kind.startswith("helper_zygote_")
    ]
    assert [e.kind for e in helper][:4] == [
        "helper_spawned",
        "helper_spawned",
        "helper_ready",
        "helper_ready",
    ] or [e.kind for e in helper][:2] == ["helper_spawned", "helper_ready"]
    started = [e for e in helper if e.kind == "helper_job_started"]
    assert len(started) == 1
    assert {"helper", "incarnation", "pid", "generation", "time"} <= set(started[0].data)
    assert started[0].run_id is None
    assert_no_children()


async def test_a_keyboard_interrupt_leaves_the_runtime_bare():
    with pytest.raises(KeyboardInterrupt):
        async with open_runtime(config(runs=[])):
            raise KeyboardInterrupt
    assert_no_children()


async def test_the_close_takes_at_most_the_shutdown_bound():
    timeouts = HelperTimeouts(cancel_grace=0.2, shutdown=0.2, terminate=0.2, kill=0.5)
    cfg = config(
        helper=spec(fault="ignore_sigterm"),
        pool=PoolConfig(size=1, timeouts=timeouts),
        runs=[],
        shutdown_grace=0.3,
    )
    assert cfg.shutdown_bound == pytest.approx(0.3 + 0.2 + 0.2 + 0.2 + 0.5)
    with trio.fail_after(30):
        async with open_runtime(cfg) as runtime:
            # A job that answers no cancel, on a helper that ignores SIGTERM.
            runtime.nursery.start_soon(_ignore_errors, runtime.pool.run_job, "sleep", 30)
            await trio.testing.wait_all_tasks_blocked()
            start = trio.current_time()
        elapsed = trio.current_time() - start
    # Its ladder (grace, SIGTERM ignored, SIGKILL) ran, within the bound.
    assert 0.2 + 0.2 <= elapsed <= cfg.shutdown_bound + 0.2
    assert_no_children()


async def _ignore_errors(fn, *args) -> None:
    with contextlib.suppress(ActorError):
        await fn(*args, timeout=60)


async def test_without_render_fn_and_execute_each_says_what_is_missing() -> None:
    fields = {"runs": [RunInfo(run_id=1, guid="guid-1", revision="r1")]}
    failed: list[Any] = []
    with trio.fail_after(30):
        async with open_runtime(
            RuntimeConfig(
                helper=spec(),
                pool=PoolConfig(size=1, timeouts=FAST),
                scheduler=SchedulerConfig(kinds=(Kind(name="work"),)),
                shutdown_grace=2.0,
                **fields,
            )
        ) as runtime:
            with pytest.raises(RenderFailed, match=r"no render_fn .*RuntimeConfig\(render_fn="):
                await runtime.renderer.ask(
                    Render(observation=1, kind="thumbnail", deadline=trio.current_time() + 5),
                    timeout=5,
                )
            async for notice in runtime.scheduler_events:
                if isinstance(notice, Failed):
                    failed.append(notice)
                    break
            assert runtime.refs()[0].state == ActorState.RUNNING
    assert failed[0].error.code == "unsupported_operation"
    assert "RuntimeConfig(execute=" in failed[0].error.message
    assert_no_children()
