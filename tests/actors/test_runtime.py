"""open_runtime: the four system actors in one nursery, wired over their mailboxes.

Real helper processes, so the real clock with short timeouts (STYLE rule 21); every
test checks that no child process or zombie is left once the runtime has closed.
"""

from __future__ import annotations

import io
import zlib
from typing import Any

import pytest
import trio
from helper_support import FAST, assert_no_children, spec

from actors import (
    ActorState,
    Kind,
    OperationSpec,
    PoolConfig,
    Published,
    Render,
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
