"""The renderer actor (design §5.1): worker threads, deadlines, cancellation, validation.

Render functions here run in real worker threads. Tests that assert deadlines use a
mock clock that jumps to the next deadline once trio has been idle for
``IDLE_BEFORE_JUMP`` real seconds (not 0: a worker thread needs a moment of real time
to notice its abort flag, and with threshold 0 the clock would already have jumped to
the ask's timeout). So the assertions can name exact virtual times. Tests where a render
must *succeed* use the real clock with generous deadlines.
"""

from __future__ import annotations

import io
import shutil
import struct
import threading
from pathlib import Path

import pytest
import trio
import trio.testing
from PIL import Image

from actors import (
    CancelRender,
    GetRendererStatistics,
    Render,
    Rendered,
    Renderer,
    RendererConfig,
    validate_payload,
)
from actors.errors import (
    ActorStopped,
    DeadlineExceeded,
    JobCancelled,
    PayloadInvalid,
    RenderFailed,
    SourceNotReady,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "qcodes_sample.db"
WAIT = 10.0  # real seconds for things that happen at once unless the code is broken
IDLE_BEFORE_JUMP = 0.3  # real seconds


@pytest.fixture
def jump_clock():
    return trio.testing.MockClock(autojump_threshold=IDLE_BEFORE_JUMP)


SIGNATURE = b"\x89PNG\r\n\x1a\n"


def check_png(data: bytes) -> tuple[int, int]:
    """The embedder's payload check, as an application would pass it."""
    if not data.startswith(SIGNATURE):
        raise PayloadInvalid("not a PNG", reason="not_png")
    if data[12:16] != b"IHDR":
        raise ValueError("no IHDR header")
    return struct.unpack(">II", data[16:24])


PNG = RendererConfig(mime="image/png", check_payload=check_png)


def tiny_png(width=3, height=2) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (255, 0, 0)).save(buffer, format="PNG")
    return buffer.getvalue()


def png_fn(observation, kind, options, check_cancel):
    check_cancel()
    return tiny_png(*observation)


class Blocker:
    """A render function that blocks until released or cancelled (polling check)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.entered = threading.Semaphore(0)  # released once per call that started
        self.release = threading.Event()
        self.exited = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.calls = 0

    def __call__(self, observation, kind, options, check_cancel):
        with self.lock:
            self.calls += 1
            self.running += 1
            self.most = max(self.most, self.running)
        self.started.set()
        self.entered.release()
        try:
            while not self.release.wait(0.001):
                check_cancel()
            return tiny_png()
        finally:
            with self.lock:
                self.running -= 1
            self.exited.set()


async def wait_for(event: threading.Event) -> None:
    assert await trio.to_thread.run_sync(event.wait, WAIT)


def request(deadline: float, **fields) -> Render:
    return Render(observation=(4, 3), kind="thumbnail", deadline=deadline, **fields)


async def test_renders_a_real_preview_off_the_event_loop(nursery, tmp_path):
    from examples.preview.child.drawing.render import render
    from examples.preview.child.qcodes.source import open_source

    db = tmp_path / "sample.db"
    shutil.copyfile(DATA, db)
    with open_source(db) as src:
        observation = src.read_run(4)
    config = RendererConfig(threads=2, mime="image/png", check_payload=check_png)
    ref = await nursery.start(Renderer(render, config).run)
    done = await ref.ask(
        Render(observation=observation, kind="preview", deadline=trio.current_time() + WAIT),
        timeout=WAIT,
    )
    assert isinstance(done, Rendered)
    assert (done.width, done.height, done.mime) == (640, 480, "image/png")
    assert done.size_bytes == len(done.data) > 10_000
    assert Image.open(io.BytesIO(done.data)).size == (640, 480)
    assert done.elapsed >= 0
    stats = await ref.ask(GetRendererStatistics(), timeout=WAIT)
    assert (stats.completed, stats.active, stats.failed) == (1, 0, 0)
    await ref.stop()


async def test_deadline_is_enforced_and_the_thread_stops(nursery, jump_clock):
    blocker = Blocker()
    ref = await nursery.start(Renderer(blocker).run)
    start = trio.current_time()
    with pytest.raises(DeadlineExceeded) as info:
        await ref.ask(request(start + 2.0), timeout=5.0)
    assert trio.current_time() == start + 2.0
    assert info.value.category == "transient"
    assert blocker.exited.is_set()  # the worker thread saw the flag and returned
    stats = await ref.ask(GetRendererStatistics(), timeout=1.0)
    assert stats.deadline_exceeded == 1
    assert stats.active == 0
    await ref.stop()


async def test_job_timeout_caps_a_far_deadline(nursery, jump_clock):
    ref = await nursery.start(Renderer(Blocker(), RendererConfig(job_timeout=1.5)).run)
    start = trio.current_time()
    with pytest.raises(DeadlineExceeded):
        await ref.ask(request(start + 100.0), timeout=200.0)
    assert trio.current_time() == start + 1.5
    await ref.stop()


async def test_waiting_for_a_job_slot_is_capped_by_job_timeout(nursery, jump_clock):
    """The one slot is busy with a job cut at ``job_timeout`` (1.5 s): a second request
    with a far deadline gives up waiting for the slot at 1.5 s too, with the slot
    wait's own error, instead of holding the mailbox until its deadline."""
    cfg = RendererConfig(job_timeout=1.5, max_jobs=1)
    ref = await nursery.start(Renderer(Blocker(), cfg).run)
    start = trio.current_time()
    async with trio.open_nursery() as inner:
        inner.start_soon(ask_and_fail, ref, start + 100.0)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(DeadlineExceeded, match="waiting for a job slot"):
            await ref.ask(request(start + 100.0), timeout=200.0)
        assert trio.current_time() == start + 1.5  # the slot wait's own cap
    await ref.stop()


async def ask_and_fail(ref, deadline: float) -> None:
    with pytest.raises(DeadlineExceeded):
        await ref.ask(request(deadline), timeout=200.0)


async def test_past_deadline_is_refused_without_drawing(nursery, jump_clock):
    blocker = Blocker()
    ref = await nursery.start(Renderer(blocker).run)
    with pytest.raises(DeadlineExceeded):
        await ref.ask(request(trio.current_time() - 1.0), timeout=1.0)
    assert blocker.calls == 0
    await ref.stop()


async def test_cancel_render_stops_the_job(nursery):
    blocker = Blocker()
    ref = await nursery.start(Renderer(blocker).run)
    outcome = {}

    async def asker():
        try:
            await ref.ask(request(trio.current_time() + WAIT, job_id="j1"), timeout=WAIT)
        except JobCancelled as exc:
            outcome["error"] = exc

    async with trio.open_nursery() as inner:
        inner.start_soon(asker)
        await wait_for(blocker.started)
        assert await ref.ask(CancelRender(job_id="j1"), timeout=WAIT) is True
    assert outcome["error"].category == "stale"
    assert outcome["error"].code == "job_cancelled"
    assert blocker.exited.is_set()
    assert await ref.ask(CancelRender(job_id="j1"), timeout=WAIT) is False  # gone now
    stats = await ref.ask(GetRendererStatistics(), timeout=WAIT)
    assert stats.cancelled == 1
    await ref.stop()


async def test_threads_are_bounded_and_waiting_jobs_queue(nursery):
    blocker = Blocker()
    ref = await nursery.start(Renderer(blocker, RendererConfig(threads=2)).run)
    results = []

    async def asker():
        results.append(await ref.ask(request(trio.current_time() + WAIT), timeout=WAIT))

    async with trio.open_nursery() as inner:
        for _ in range(4):
            inner.start_soon(asker)
        await trio.testing.wait_all_tasks_blocked()
        stats = await ref.ask(GetRendererStatistics(), timeout=WAIT)
        assert (stats.drawing, stats.waiting_for_thread) == (2, 2)
        for _ in range(2):  # both threads are inside render_fn at once
            assert await trio.to_thread.run_sync(blocker.entered.acquire, True, WAIT)
        blocker.release.set()
    assert len(results) == 4
    assert blocker.most == 2
    await ref.stop()


async def test_waiting_for_a_thread_counts_against_the_deadline(nursery, jump_clock):
    blocker = Blocker()
    ref = await nursery.start(Renderer(blocker, RendererConfig(threads=1)).run)
    start = trio.current_time()
    async with trio.open_nursery() as inner:

        async def first():
            with pytest.raises(JobCancelled):
                await ref.ask(request(start + 50.0, job_id="long"), timeout=60.0)

        inner.start_soon(first)
        await wait_for(blocker.started)
        with pytest.raises(DeadlineExceeded):
            await ref.ask(request(start + 3.0), timeout=10.0)
        assert trio.current_time() == start + 3.0
        assert blocker.calls == 1  # the second job never reached render_fn
        await ref.ask(CancelRender(job_id="long"), timeout=1.0)
    await ref.stop()


async def test_errors_from_render_fn_are_classified(nursery):
    def broken(observation, kind, options, check_cancel):
        if observation == "not ready":
            raise SourceNotReady("still being written")
        return 1 / 0

    ref = await nursery.start(Renderer(broken).run)
    deadline = trio.current_time() + WAIT
    with pytest.raises(RenderFailed) as info:
        await ref.ask(Render(observation=None, kind="preview", deadline=deadline), timeout=WAIT)
    assert info.value.code == "render_failed"
    assert info.value.category == "permanent"
    assert "ZeroDivisionError" in str(info.value)
    with pytest.raises(SourceNotReady):
        await ref.ask(Render(observation="not ready", kind="x", deadline=deadline), timeout=WAIT)
    stats = await ref.ask(GetRendererStatistics(), timeout=WAIT)
    assert stats.failed == 2  # and the actor is still running
    await ref.stop()


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


async def test_an_unprintable_render_error_is_still_a_render_error(nursery):
    # Its message used to be made with f"{exc}", which raised again inside the job's
    # task and crashed the renderer actor (every other ask then got ActorStopped).
    def broken(observation, kind, options, check_cancel):
        raise Unprintable

    ref = await nursery.start(Renderer(broken).run)
    with pytest.raises(RenderFailed, match="Unprintable") as info:
        await ref.ask(request(trio.current_time() + WAIT), timeout=WAIT)
    assert info.value.details["error_type"] == "Unprintable"
    stats = await ref.ask(GetRendererStatistics(), timeout=WAIT)
    assert (stats.failed, stats.active) == (1, 0)  # and the actor is still running
    await ref.stop()


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("a string", "type"),
        (bytearray(tiny_png()), "type"),
        (b"", "too_small"),
        (SIGNATURE + b"\0" * 200_000, "too_large"),
        (b"GIF89a" + b"\0" * 100, "not_png"),  # the check's own PayloadInvalid
        (SIGNATURE + b"\0" * 100, "invalid"),  # the check's ValueError
    ],
)
async def test_invalid_payloads_are_refused(nursery, payload, reason):
    config = RendererConfig(max_bytes=100_000, check_payload=check_png)
    ref = await nursery.start(Renderer(lambda *args: payload, config).run)
    with pytest.raises(PayloadInvalid) as info:
        await ref.ask(request(trio.current_time() + WAIT), timeout=WAIT)
    assert info.value.details["reason"] == reason
    assert info.value.code == "payload_invalid"
    await ref.stop()


def raises_type_error(data: bytes) -> tuple[int, int]:
    raise TypeError("the check itself is broken")


@pytest.mark.parametrize(
    ("check", "words"),
    [
        (raises_type_error, "TypeError: the check itself is broken"),
        (lambda data: (1, 2, 3), "(1, 2, 3)"),
        (lambda data: 5, "5"),
        (lambda data: ("3", 2), "('3', 2)"),
        (lambda data: (-1, 2), "(-1, 2)"),
    ],
)
async def test_a_misbehaving_payload_check_fails_the_job_not_the_renderer(nursery, check, words):
    # A check that raised anything but ValueError, or returned something other than a
    # (width, height) pair, used to crash the renderer actor from the job's task.
    ref = await nursery.start(Renderer(png_fn, RendererConfig(check_payload=check)).run)
    with pytest.raises(RenderFailed, match="payload check") as info:
        await ref.ask(request(trio.current_time() + WAIT), timeout=WAIT)
    assert words in str(info.value)
    stats = await ref.ask(GetRendererStatistics(), timeout=WAIT)
    assert (stats.failed, stats.active) == (1, 0)  # and the actor is still running
    await ref.stop()


def test_validate_payload():
    assert validate_payload(tiny_png(7, 5), min_bytes=1, max_bytes=10**6, check=check_png) == (
        7,
        5,
    )
    assert validate_payload(b"\0" * 100, min_bytes=1, max_bytes=200) == (None, None)
    with pytest.raises(PayloadInvalid, match="fewer than 2"):
        validate_payload(b"x", min_bytes=2, max_bytes=200)


class WorkerReadClock(trio.abc.Clock):
    """A clock moved by hand (a ``MockClock`` inside) that tells when a worker thread
    has read it."""

    def __init__(self) -> None:
        self.mock = trio.testing.MockClock()
        self.read_by_worker = threading.Event()

    def start_clock(self) -> None:
        self.mock.start_clock()

    def current_time(self) -> float:
        now = self.mock.current_time()
        if threading.current_thread() is not threading.main_thread():
            self.read_by_worker.set()
        return now

    def deadline_to_sleep_time(self, deadline: float) -> float:
        return self.mock.deadline_to_sleep_time(deadline)

    def jump(self, seconds: float) -> None:
        self.mock.jump(seconds)


@pytest.fixture
def worker_read_clock() -> WorkerReadClock:
    return WorkerReadClock()


async def test_a_payload_produced_in_time_is_a_success_though_noticed_late(
    nursery, worker_read_clock
):
    """The thread has the payload 0.25 s into a 0.5 s deadline, but the event loop is
    blocked until 0.75 s: the verdict follows the thread's own record (design §4.14).

    Virtual time, moved by hand (binary fractions, so the sums are exact): the clock
    reads 0.25 s past the request when the thread finishes, and the loop only runs
    again at 0.75 s.
    """
    clock = worker_read_clock
    started, release = threading.Event(), threading.Event()

    def draw(observation, kind, options, check_cancel):
        started.set()
        assert release.wait(WAIT)  # the drawing's workload ends when the test says so
        return tiny_png()

    ref = await nursery.start(Renderer(draw, PNG).run)
    start = trio.current_time()
    async with trio.open_nursery() as inner:
        answer = {}

        async def asker():
            answer["done"] = await ref.ask(request(start + 0.5), timeout=WAIT)
            answer["at"] = trio.current_time()

        inner.start_soon(asker)
        await wait_for(started)
        # From here the event loop is busy elsewhere (blocked on purpose): the thread
        # records its payload at 0.25 s, and the loop runs again only at 0.75 s.
        clock.jump(0.25)
        release.set()
        assert clock.read_by_worker.wait(WAIT)  # blocks the loop, on purpose
        clock.jump(0.5)
    done = answer["done"]
    assert isinstance(done, Rendered)
    assert (done.width, done.height) == (3, 2)
    assert done.produced_at == start + 0.25  # made before the deadline...
    assert answer["at"] == start + 0.75  # ...answered after it
    await ref.stop()


async def test_stopping_the_actor_aborts_running_jobs(nursery):
    blocker = Blocker()
    ref = await nursery.start(Renderer(blocker).run)
    outcome = {}

    async def asker():
        try:
            await ref.ask(request(trio.current_time() + WAIT), timeout=WAIT)
        except ActorStopped as exc:
            outcome["error"] = exc

    async with trio.open_nursery() as inner:
        inner.start_soon(asker)
        await wait_for(blocker.started)
        with trio.fail_after(WAIT):
            await ref.stop(grace=0.05)
    assert "error" in outcome
    await wait_for(blocker.exited)  # its abort flag went up: the thread ends on its own


async def test_unknown_message_and_duplicate_job_id(nursery):
    blocker = Blocker()
    ref = await nursery.start(Renderer(blocker).run)
    with pytest.raises(RenderFailed, match="cannot handle"):
        await ref.ask("draw something", timeout=WAIT)
    async with trio.open_nursery() as inner:
        inner.start_soon(
            lambda: ref.ask(request(trio.current_time() + WAIT, job_id=7), timeout=WAIT)
        )
        await wait_for(blocker.started)
        with pytest.raises(RenderFailed, match="already running"):
            await ref.ask(request(trio.current_time() + WAIT, job_id=7), timeout=WAIT)
        blocker.release.set()
    await ref.stop()


@pytest.mark.parametrize(
    "fields",
    [
        {"threads": 0},
        {"threads": True},
        {"max_jobs": 0},
        {"job_timeout": 0},
        {"job_timeout": float("nan")},
        {"job_timeout": 301},
        {"min_bytes": 10, "max_bytes": 5},
        {"abandon_after": -1},
        {"max_abandoned": 65},
        {"mime": ""},
        {"check_payload": 42},
    ],
)
def test_config_is_validated(fields):
    with pytest.raises(ValueError, match=next(iter(fields)).split("_")[0]):
        RendererConfig(**fields)


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "", "deadline": 1.0},
        {"kind": "preview", "deadline": float("nan")},
        {"kind": "preview", "deadline": True},
    ],
)
def test_render_message_is_validated(fields):
    with pytest.raises(ValueError, match=r"kind|deadline"):
        Render(observation=None, **fields)


@pytest.mark.parametrize("job_id", [[1], {"a": 1}, ("run", [1]), {1, 2}])
def test_an_unhashable_job_id_is_refused_by_name(job_id):
    # It used to reach the actor, whose job table lookup raised TypeError: the renderer
    # crashed on Render(job_id=[1]) and on CancelRender(job_id=[1]).
    with pytest.raises(ValueError, match="job_id"):
        Render(observation=None, kind="preview", deadline=1.0, job_id=job_id)
    with pytest.raises(ValueError, match="job_id"):
        CancelRender(job_id=job_id)


def test_renderer_needs_a_callable():
    with pytest.raises(TypeError):
        Renderer("render")
