"""The preview app's logic without a websocket or processes: fakes and the virtual clock.

The app's scheduler ``execute``, its bridge from scheduler notices to the event log, the
run bookkeeping and the image pushes are driven with fake actors (plain objects that
record calls) on ``MockClock(autojump_threshold=0)`` with exact virtual times
(contributing §F.2). The real wiring is covered by ``test_preview_server.py`` and
``test_progressive.py``.
"""

from __future__ import annotations

import io
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from PIL import Image

from actors import (
    POOL_EVENT_KINDS,
    Claim,
    Failed,
    Invalidated,
    Parked,
    PoolEvents,
    Produced,
    Progressive,
    Published,
    Receipt,
    Retrying,
    RunInfo,
    RunStarted,
    SchedulerConfig,
    SchedulerJob,
    Settled,
    SourceChanged,
)
from actors._scheduler._scheduler import Scheduler
from actors.errors import (
    AskTimeout,
    ErrorRecord,
    InvalidCommand,
    PayloadInvalid,
    PoolFailed,
    PoolRestarting,
    SourceUnreadable,
    UnknownRun,
    WorkCancelled,
)
from examples.preview.app.images import ClientPusher, ImageStore, StoredImage, png_size
from examples.preview.app.preview_app import PreviewApp, PreviewConfig
from examples.preview.app.run_views import RunViews
from examples.preview.app.runs import (
    RunRecord,
    RunTable,
    finish_result,
    run_status,
    summary_message,
    verdict_of,
)
from examples.preview.app.runtime_kinds import PREVIEW_KINDS
from examples.preview.child.draw import observation_of, with_images
from examples.web.connection import wire_json, wire_text
from protocol import Blob, messages

GUID = "d61e7d4e-0000-0000-0000-01a22b205d20"
TOKEN = "rows=120;completed=0;exc=0"


def png(width: int, height: int, shade: int = 128) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (shade, shade, shade)).save(out, format="PNG")
    return out.getvalue()


def observation(status: str = "ok", rows: int = 200, token: str = TOKEN) -> dict[str, Any]:
    return {
        "run_id": 12,
        "status": status,
        "status_reason": "" if status == "ok" else f"{status}: reason",
        "row_count": rows,
        "is_completed": status != "incomplete",
        "revision": token,
        "dependents": [
            {"name": "dmm_v1", "label": "Gate v1", "unit": "V", "source_shape": [rows],
             "points": rows, "planned_points": 200},
        ],
    }  # fmt: skip


class FakeLog:
    """Records the event-log calls; ``submit`` admits with run ids 1, 2, ..."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.next_run = 1

    async def submit(
        self, operation: str, arguments: dict[str, Any], request_id: Any = None
    ) -> Receipt:
        run_id, self.next_run = self.next_run, self.next_run + 1
        self.calls.append(("submit", arguments["run_id"], run_id))
        return Receipt(
            admitted=True, run_id=run_id, request_id=f"r{run_id}", snapshot_id="s",
            revision=0, event_cursor=0,
        )  # fmt: skip

    async def start(self, run_id: int, *, on_cancel: Any = None) -> None:
        self.calls.append(("start", run_id))
        self.on_cancel = on_cancel

    async def progress(self, run_id: int, fraction: float, note: str | None = None) -> None:
        self.calls.append(("progress", run_id, round(fraction, 3), note))

    async def finish(
        self, run_id: int, verdict: str, result: Any = None, *, error: Any = None
    ) -> None:
        self.calls.append(("finish", run_id, verdict, result, error))

    async def cancel(self, run_id: int, actor: str = "local") -> FakeStatus:
        self.calls.append(("cancel", run_id, actor))
        return FakeStatus(state="cancelled")

    async def status(self, run_id: int) -> FakeStatus:
        """``running`` once ``start`` was called for the run, else ``queued``."""
        return FakeStatus(state="running" if ("start", run_id) in self.calls else "queued")


@attrs.frozen
class FakeStatus:
    state: str


def drawn(answer: dict[str, Any], *kinds: str) -> Blob:
    """A helper's drawn answer: ``answer`` with a PNG of each kind's size beside it, in
    the reply's binary part (design §2.3)."""
    sizes = {"thumbnail": (160, 120), "preview": (640, 480)}
    return with_images(answer, {kind: png(*sizes[kind]) for kind in kinds})


class FakePool:
    """``read_run`` answers ``answer``; ``draw`` answers ``drawing``; each takes 0.25 s."""

    def __init__(self) -> None:
        self.reads: list[int] = []
        self.jobs: list[tuple[str, Any]] = []
        self.answer: Any = observation("incomplete")
        self.drawing: Any = drawn({"run_id": 12}, "thumbnail", "preview")
        self.error: Exception | None = None

    async def run_job(self, operation: str, payload: Any, *, timeout: float) -> Any:  # noqa: ASYNC109
        assert operation in ("read_run", "draw")
        self.jobs.append((operation, payload))
        if operation == "read_run":
            self.reads.append(payload["run_id"])
        await trio.sleep(0.25)  # a read takes a while (virtual time)
        if self.error is not None:
            raise self.error
        return self.answer if operation == "read_run" else self.drawing


class FakeScheduler:
    def __init__(self) -> None:
        self.asked: list[Any] = []
        self.error: Exception | None = None  # raised by the next asks, which are not taken

    async def ask(self, message: Any, *, timeout: float) -> None:  # noqa: ASYNC109
        await trio.lowlevel.checkpoint()
        if self.error is not None:
            raise self.error
        self.asked.append(message)


@attrs.define
class FakeRuntime:
    eventlog: FakeLog = attrs.field(factory=FakeLog)
    pool: FakePool = attrs.field(factory=FakePool)
    scheduler: FakeScheduler = attrs.field(factory=FakeScheduler)


def make_app(**config: Any) -> tuple[PreviewApp, FakeRuntime, RunRecord]:
    app = PreviewApp(PreviewConfig(db="unused.db", **config), {"source_id": "src"})
    runtime = FakeRuntime()
    app._build(runtime)  # type: ignore[arg-type]
    summary = {
        "run_id": 12, "guid": GUID, "name": "crashed_incomplete", "revision": TOKEN,
        "is_completed": False, "row_count": 120, "status": "incomplete",
        "exp_name": "transport", "sample_name": "S1", "shapes": {"dmm_v1": [200]},
    }  # fmt: skip
    record = app._table.register(summary, trio.current_time())
    return app, runtime, record


def claim(kind: str = "metadata", *, page: bool = False, revision: str = TOKEN) -> Claim:
    return Claim(
        claim_id=1, run_id=12, guid=GUID, kind=kind, revision=revision, source="src",
        generation=0, incarnation=0, attempt=1, deadline=trio.current_time() + 15, tier="selected",
        page=page, first=not page,
    )  # fmt: skip


def test_the_runtime_config_keeps_one_event_per_helper_job_out_of_the_event_log(tmp_path):
    app = PreviewApp(PreviewConfig(db="unused.db", cache_dir=tmp_path), {"source_id": "src"})
    config = app.runtime_config()
    assert config.pool_events == POOL_EVENT_KINDS - {"job_started"}
    assert {"spawned", "reaped", "pool_restarted"} <= config.pool_events  # the rest stay
    # Thumbnails are drawn by every read of a finished run: only previews are cached.
    assert [kind.name for kind in config.scheduler.kinds if kind.cached] == ["preview"]


# --- execute: progressive runs (design §4.5) ---------------------------------------------


async def test_execute_parks_a_run_being_written_until_it_stalls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app, runtime, record = make_app(stall_after=5.0)
    pool_fake = runtime.pool
    first = await app.execute(SchedulerJob(claim=claim()), runtime)  # type: ignore[arg-type]
    assert isinstance(first, Progressive)
    assert first.value == pool_fake.answer
    assert trio.current_time() == 0.25
    assert pool_fake.reads == [12]

    await trio.sleep(1.0)  # a page with nothing new: no I/O, no time
    page = await app.execute(SchedulerJob(claim=claim(page=True)), runtime)  # type: ignore[arg-type]
    assert page == Progressive(None)
    assert trio.current_time() == 1.25
    assert pool_fake.reads == [12]

    await trio.sleep(3.75)  # 5 s after the last change: the writer is gone
    final = await app.execute(SchedulerJob(claim=claim(page=True)), runtime)  # type: ignore[arg-type]
    assert final == pool_fake.answer  # conclusive: published with status incomplete
    assert trio.current_time() == 5.25
    assert pool_fake.reads == [12, 12]

    record.note_token("rows=150;completed=0;exc=0", trio.current_time())  # the probe saw rows
    again = await app.execute(SchedulerJob(claim=claim()), runtime)  # type: ignore[arg-type]
    assert isinstance(again, Progressive)

    pool_fake.answer = observation("ok")
    done = await app.execute(SchedulerJob(claim=claim()), runtime)  # type: ignore[arg-type]
    assert done == observation("ok")


async def test_execute_takes_the_thumbnail_of_the_read_and_draws_the_preview_in_a_helper(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app, runtime, _ = make_app()
    pool_fake = runtime.pool
    pool_fake.answer = drawn(observation("ok"), "thumbnail")
    read = await app.execute(SchedulerJob(claim=claim()), runtime)  # type: ignore[arg-type]
    assert read == observation_of(pool_fake.answer)
    # The PNG copied out of the reply once (a view would pin the whole reply).
    assert type(read["images"]["thumbnail"]) is bytes
    live = ["thumbnail", "preview"]  # drawn instead if the run is still being written
    assert pool_fake.jobs == [("read_run", {"run_id": 12, "draw": ["thumbnail"], "live": live})]
    assert trio.current_time() == 0.25

    # The thumbnail was drawn with the read: no job, no time.
    thumbnail = await app.execute(
        SchedulerJob(claim=claim("thumbnail"), observation=read),
        runtime,  # type: ignore[arg-type]
    )
    assert isinstance(thumbnail, Produced)
    assert thumbnail.value is read["images"]["thumbnail"]  # that copy, not another
    assert (thumbnail.at, trio.current_time(), len(pool_fake.jobs)) == (0.25, 0.25, 1)

    # The preview is a draw job, naming the revision of the read left for it.
    preview = await app.execute(
        SchedulerJob(claim=claim("preview"), observation=read),
        runtime,  # type: ignore[arg-type]
    )
    assert isinstance(preview, Produced)
    assert png_size(preview.value) == (640, 480)
    assert (preview.at, trio.current_time()) == (0.5, 0.5)
    assert pool_fake.jobs[-1] == ("draw", {"run_id": 12, "kinds": ["preview"], "revision": TOKEN})

    # An evicted observation: the helper draws (and reads) without a revision.
    await app.execute(SchedulerJob(claim=claim("thumbnail")), runtime)  # type: ignore[arg-type]
    assert pool_fake.jobs[-1] == ("draw", {"run_id": 12, "kinds": ["thumbnail"], "revision": None})

    pool_fake.drawing = Blob(head={"run_id": 12, "images": {"preview": [0, 99]}}, data=b"short")
    with pytest.raises(SourceUnreadable, match="run 12: the helper drew no preview"):
        await app.execute(SchedulerJob(claim=claim("preview")), runtime)  # type: ignore[arg-type]
    pool_fake.drawing = with_images({"run_id": 12}, {"preview": b"GIF89a"})
    with pytest.raises(PayloadInvalid, match="not a PNG"):  # as a renderer's drawing would
        await app.execute(SchedulerJob(claim=claim("preview")), runtime)  # type: ignore[arg-type]


async def test_a_thumbnail_drawn_with_the_read_is_pushed_when_the_read_is_published(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Not when its own claim comes, after every other run's read (design §5.4).
    app, _runtime, record = make_app()
    await app._running.jobs.submit(record)
    read = observation_of(drawn(observation("ok"), "thumbnail"))
    bridge = app._running.bridge
    await bridge.handle(Published(run_id=12, guid=GUID, revision=TOKEN, kind="metadata",
                                  result=read, generation=0))  # fmt: skip
    stored = app.images.get((12, "thumbnail"))
    assert stored is not None
    assert (stored.revision, png_size(stored.data)) == (1, (160, 120))
    # Its claim publishes the same bytes later: kept once, not pushed again.
    assert not app.images.put(attrs.evolve(stored))


# --- the bridge: scheduler notices → event log (design §6.6) --------------------------------


async def test_a_run_reports_its_lifecycle_and_images(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app, runtime, record = make_app()
    await app._running.jobs.submit(record)
    await app._running.bridge.handle(
        RunStarted(run_id=12, guid=GUID, revision=TOKEN, kind="metadata")
    )
    await app._running.bridge.handle(
        Published(run_id=12, guid=GUID, kind="metadata", revision=TOKEN,
                  result=observation("interrupted", 73), generation=0)
    )  # fmt: skip
    for kind, size in (("thumbnail", (160, 120)), ("preview", (640, 480))):
        await app._running.bridge.handle(
            Published(run_id=12, guid=GUID, kind=kind, revision=TOKEN, result=png(*size),
                      generation=0)
        )  # fmt: skip
    await app._running.bridge.handle(
        Settled(run_id=12, guid=GUID, revision=TOKEN,
                published=("metadata", "thumbnail", "preview"), failed=())
    )  # fmt: skip
    calls = runtime.eventlog.calls
    assert calls[:5] == [
        ("submit", 12, 1),
        ("start", 1),
        ("progress", 1, 0.333, "metadata"),
        ("progress", 1, 0.667, "thumbnail"),
        ("progress", 1, 1.0, "preview"),
    ]
    _, job, verdict, result, error = calls[5]
    assert (job, verdict, error) == (1, "interrupted", None)
    assert result["status"] == "interrupted"
    assert result["rows"] == 73
    assert result["revision"] == 1
    assert result["dependents"][0]["unit"] == "V"
    assert record.job_open is False
    image = app.images.get((12, "preview"))
    assert image is not None
    assert image.revision == 1
    assert png_size(image.data) == (640, 480)

    # The run changes after it finished: a new event-log run reports the new revision.
    await app._running.bridge.handle(
        Invalidated(run_id=12, guid=GUID, old_revision=TOKEN, revision="rows=130;completed=0;exc=0")
    )
    assert calls[-1] == ("submit", 12, 2)
    assert record.job == 2
    assert record.published == set()


async def test_a_failed_metadata_finishes_failed_with_its_record(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app, runtime, record = make_app()
    await app._running.jobs.submit(record)
    error = ErrorRecord(category="permanent", code="source_unreadable", message="bad table")
    await app._running.bridge.handle(
        Failed(run_id=12, guid=GUID, kind="metadata", revision=TOKEN, error=error)
    )
    await app._running.bridge.handle(
        Settled(run_id=12, guid=GUID, revision=TOKEN, published=(),
                failed=("metadata", "thumbnail", "preview"))
    )  # fmt: skip
    _, job, verdict, result, error_dict = runtime.eventlog.calls[-1]
    assert (job, verdict) == (1, "failed")
    assert error_dict == {
        "category": "permanent",
        "code": "source_unreadable",
        "message": "bad table",
    }
    assert result["status"] == "unreadable"


async def test_settled_at_an_older_revision_does_not_finish(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app, runtime, record = make_app()
    await app._running.jobs.submit(record)
    record.requested = "rows=150;completed=1;exc=0"  # the probe already asked for more
    await app._running.bridge.handle(
        Settled(run_id=12, guid=GUID, revision=TOKEN, published=("metadata",), failed=())
    )
    assert [c[0] for c in runtime.eventlog.calls] == ["submit"]
    assert record.job_open


async def test_parked_reads_keep_the_live_images_their_helper_drew_once_per_change(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The helper that read the run drew its live images (design §5.4): the server
    # keeps them at once, draws nothing and never holds the values.
    app, runtime, record = make_app()
    await app._running.jobs.submit(record)
    read = observation_of(drawn(observation("incomplete", 120), "thumbnail", "preview"))
    for _ in range(2):
        await app._running.bridge.handle(Parked(run_id=12, guid=GUID, revision=TOKEN, result=read))
    await app._running.bridge.handle(Parked(run_id=12, guid=GUID, revision=TOKEN, result=None))
    progress = [c for c in runtime.eventlog.calls if c[0] == "progress"]
    assert progress == [("progress", 1, 0.2, "being written: 120 of 200 points")]
    assert record.parked
    thumbnail = app.images.get((12, "thumbnail"))
    preview = app.images.get((12, "preview"))
    assert thumbnail is not None
    assert preview is not None
    assert (thumbnail.live, thumbnail.revision, png_size(thumbnail.data)) == (True, 1, (160, 120))
    assert (preview.live, preview.revision, png_size(preview.data)) == (True, 1, (640, 480))
    assert trio.current_time() == 0.0


async def test_a_live_image_the_helper_could_not_draw_is_logged_and_the_read_stands(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    app, runtime, record = make_app()
    await app._running.jobs.submit(record)
    answer = drawn(observation("incomplete", 120), "thumbnail")
    answer.head["image_errors"] = {"preview": "preview: malformed observation"}
    await app._running.bridge.handle(
        Parked(run_id=12, guid=GUID, revision=TOKEN, result=observation_of(answer))
    )
    assert app.images.get((12, "thumbnail")) is not None
    assert app.images.get((12, "preview")) is None
    assert "run 12: live preview not drawn: preview: malformed observation" in caplog.text
    progress = [c for c in runtime.eventlog.calls if c[0] == "progress"]
    assert progress == [("progress", 1, 0.2, "being written: 120 of 200 points")]


async def test_cancel_open_cancels_each_open_run_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app, runtime, record = make_app()
    await app._running.jobs.submit(record)
    record.parked = True
    await runtime.eventlog.start(1)
    assert await app.cancel_open(actor="server_shutdown", waiting_only=True) == 1
    assert await app.cancel_open(actor="server_shutdown") == 0
    assert runtime.eventlog.calls[-1] == ("cancel", 1, "server_shutdown")
    await app._running.jobs.submit(record)  # closing: nothing new is opened
    assert len([c for c in runtime.eventlog.calls if c[0] == "submit"]) == 1


@pytest.mark.parametrize(
    ("completed", "started", "cancelled"),
    [(True, True, False), (True, False, True), (False, True, True)],
    ids=["running_may_finish", "queued_is_cancelled", "being_written_is_cancelled"],
)
async def test_shutdown_cancels_at_once_what_cannot_finish_promptly(
    autojump_clock: trio.testing.MockClock, completed: bool, started: bool, cancelled: bool
) -> None:
    app, runtime, record = make_app()
    record.summary["is_completed"] = completed
    await app._running.jobs.submit(record)
    if started:
        await runtime.eventlog.start(1)
    assert await app.cancel_open(actor="server_shutdown", waiting_only=True) == int(cancelled)
    assert (("cancel", 1, "server_shutdown") in runtime.eventlog.calls) is cancelled
    assert record.job_open is not cancelled
    assert await app.cancel_open(actor="server_shutdown") == int(not cancelled)


async def test_unknown_runs_are_refused_and_change_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app, runtime, _ = make_app()
    with pytest.raises(UnknownRun, match="no run 99"):
        app._table.check([12, 99])
    assert runtime.scheduler.asked == []


# --- bookkeeping -----------------------------------------------------------------------


def test_revision_numbers_and_summaries() -> None:
    summary = {"name": "x", "shapes": {"y": [40, 60]}, "row_count": 7, "is_completed": True}
    record = RunRecord(run_id=3, guid="g", summary=summary, token="a", changed_at=0.0)
    assert [record.number(t) for t in ("a", "b", "a", "c")] == [1, 2, 1, 3]
    row = summary_message(record)
    assert (row.run_id, row.shape, row.rows, row.completed, row.experiment) == (
        3, (40, 60), 7, True, "",
    )  # fmt: skip
    record.observation_status = "empty"
    assert verdict_of(record, ()) == ("empty", None)
    assert verdict_of(record, ("preview",)) == ("failed", None)
    assert finish_result(record, ())["status"] == "empty"


def test_run_list_rows_are_built_again_only_when_they_change() -> None:
    table = RunTable()
    for run_id in (1, 2):
        table.register({"run_id": run_id, "name": f"r{run_id}", "row_count": 5,
                        "is_completed": True, "revision": "a"}, 0.0)  # fmt: skip
    first = table.summaries()
    assert table.summaries() == first
    assert all(a is b for a, b in zip(table.summaries(), first, strict=True))
    one, two = table.runs[1], table.runs[2]
    table.track_job(one, 41)
    one.note_probe(9, False)
    two.note_observation({"status": "ok", "shapes": {"y": [3, 3]}})
    two.published.add("metadata")
    rows = table.summaries()
    assert (rows[0].job_run_id, rows[0].rows, rows[0].completed) == (41, 9, False)
    assert (rows[1].status, rows[1].shape) == ("ok", (3, 3))
    assert rows == tuple(summary_message(r) for r in table.runs.values())


def test_a_pushed_run_list_is_the_text_of_its_message_and_converts_changed_rows_only() -> None:
    table = RunTable()
    for run_id in (1, 2):
        table.register({"run_id": run_id, "name": f"r\u00e9{run_id}", "row_count": 5,
                        "is_completed": True, "revision": "a"}, 0.0)  # fmt: skip

    def pushed() -> str:
        return wire_json({"type": "run_list", "request_id": None, "runs": table.row_fields()})

    def expected() -> str:
        return wire_text(messages.RunList(request_id=None, runs=table.summaries()))

    assert pushed() == expected()
    first = table.row_fields()
    table.runs[2].note_probe(9, False)
    again = table.row_fields()
    assert again[0] is first[0]  # unchanged: not converted again
    assert again[1] is not first[1]
    assert again[1]["rows"] == 9
    assert pushed() == expected()


@pytest.mark.parametrize(
    ("shape", "row"), [([40, 2**60], ()), ([2**53], ()), ([2**53 - 1, 3], (2**53 - 1, 3))]
)
def test_a_planned_shape_the_protocol_cannot_carry_is_left_out(shape, row) -> None:
    # RunSummary refuses ints above 2**53-1: one run planned with such a shape made
    # summary_message raise FieldError, so list_runs (and every run_list push) failed
    # for all clients.
    summary = {"name": "x", "shapes": {"y": shape}, "row_count": 7, "is_completed": True}
    record = RunRecord(run_id=3, guid="g", summary=summary, token="a", changed_at=0.0)
    assert summary_message(record).shape == row


def test_runs_sharing_a_guid_are_still_scheduled_apart() -> None:
    # The scheduler refuses two runs with one GUID (they would share cached images), so
    # a database with a copied row (or a GUID equal to another run's stand-in) made the
    # app's first Reconcile fail: the preview server did not start at all.
    table = RunTable()
    for run_id, guid in ((1, GUID), (3, GUID), (4, None), (5, "run-4"), (6, "")):
        table.register({"run_id": run_id, "guid": guid, "revision": "a"}, 0.0)
    infos = table.infos()
    Scheduler(infos, source="db", config=SchedulerConfig(kinds=PREVIEW_KINDS))
    guids = {info.run_id: info.guid for info in infos}
    assert guids == {1: GUID, 3: f"{GUID}#3", 4: "run-4", 5: "run-4#5", 6: "run-6"}


def reported(kind: str = "preview", *, chosen: Any = None, report: Any = None) -> Blob:
    """A helper's ``draw`` answer with ``report``: the PNG, its report and the slice."""
    head = {"run_id": 12, "revision": TOKEN, "status": "ok", "slice": chosen}
    if report is not None:
        head["reports"] = {kind: report}
    return drawn(head, kind) if report is not None else with_images(head, {})


async def test_draw_asks_a_helper_for_the_picture_and_its_report(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The server draws nothing (design §5.4): the helper reads the slice, draws it with
    # the options and sends the report beside the PNG.
    app, runtime, _record = make_app()
    report = {"panels": [{"slice": "field = 1 T · slice 2 of 3", "x": {"scale": "log"}}]}
    chosen = {"index": 1, "count": 3, "label": "field = 1 T"}
    runtime.pool.drawing = reported(chosen=chosen, report=report)
    views = RunViews(app._table, app._running.helpers, app.views, db="d-1")
    request = messages.Draw(request_id="d1", run_id=12, slice=1, xscale="log")
    drawing = await views.on_draw(None, request)  # type: ignore[arg-type]
    assert runtime.pool.jobs == [("draw", {"run_id": 12, "kinds": ["preview"], "slice": 1,
                                           "options": {"scale": "auto", "xscale": "log"},
                                           "report": True})]  # fmt: skip
    assert (drawing.slice, drawing.slice_count, drawing.slice_label) == (
        1, 3, "field = 1 T · slice 2 of 3",
    )  # fmt: skip
    assert drawing.report == report
    picture = app.views.get(1)
    assert picture is not None
    assert png_size(picture.data) == (640, 480)
    assert drawing.url.startswith("/db/d-1/views/1.png?v=")
    assert trio.current_time() == 0.25

    runtime.pool.drawing = reported(chosen=chosen)  # the helper drew nothing: no slice 5
    with pytest.raises(InvalidCommand, match="slice 5 is out of range: run 12 has 3 slices"):
        await views.on_draw(None, messages.Draw(request_id="d2", run_id=12, slice=5))  # type: ignore[arg-type]
    runtime.pool.drawing = reported()
    with pytest.raises(InvalidCommand, match="has at most two sweep dimensions"):
        await views.on_draw(None, messages.Draw(request_id="d3", run_id=12, slice=0))  # type: ignore[arg-type]
    with pytest.raises(SourceUnreadable, match="run 12: the helper drew no preview"):
        await views.on_draw(None, messages.Draw(request_id="d4", run_id=12))  # type: ignore[arg-type]


# --- images and pushes -------------------------------------------------------------------


def image(run: int, kind: str, revision: int, shade: int = 0) -> StoredImage:
    size = (160, 120) if kind == "thumbnail" else (640, 480)
    return StoredImage(run_id=run, kind=kind, revision=revision, data=png(*size, shade))


def test_store_keeps_the_newest_and_bounds_previews() -> None:
    one = image(1, "preview", 1)
    store = ImageStore(db="d-1", preview_bytes=2 * len(one.data) + 10)
    assert store.put(one)
    assert not store.put(image(1, "preview", 1))  # the same bytes
    assert not store.put(image(1, "preview", 0, shade=9))  # older
    assert store.put(image(2, "preview", 1))
    assert store.put(image(3, "preview", 1))  # over the bound: run 1's preview goes
    assert store.get((1, "preview")) is None
    assert store.keys() == [(2, "preview"), (3, "preview")]
    message = store.get((3, "preview")).message("d-1")  # type: ignore[union-attr]
    assert (message.width, message.height, message.mime) == (640, 480, "image/png")
    version = store.get((3, "preview")).version  # type: ignore[union-attr]
    assert message.url == f"/db/d-1/runs/3/preview.png?rev=1&v={version}"
    assert message.bytes == len(store.get((3, "preview")).data)  # type: ignore[union-attr]


class FakeTarget:
    def __init__(self, room: int = 100) -> None:
        self.sent: list[tuple[int, str, int]] = []
        self.batches: list[int] = []
        self.room = room

    async def push_all(self, batch: Any, *, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        await trio.lowlevel.checkpoint()
        self.batches.append(len(batch))
        for message in batch:
            if len(self.sent) >= self.room:
                return False
            self.sent.append((message.run_id, message.kind, message.revision))
        return True


async def test_pusher_sends_the_selected_run_first_and_only_newest_revisions(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = ImageStore(db="d-1")
    for run in (1, 2, 3):
        for kind in ("preview", "thumbnail"):
            store.put(image(run, kind, 1))
    target = FakeTarget()
    pusher = ClientPusher(store, target, lambda: (3, frozenset({2})), push_timeout=1.0)
    pusher.mark_all()
    store.put(image(1, "thumbnail", 2, shade=50))  # replaces revision 1 before it is sent
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pusher.run)
        await trio.testing.wait_all_tasks_blocked()
        assert target.sent == [
            (3, "thumbnail", 1), (3, "preview", 1), (2, "thumbnail", 1), (2, "preview", 1),
            (1, "thumbnail", 2), (1, "preview", 1),
        ]  # fmt: skip
        assert target.batches == [6]  # queued together: they leave in one write
        store.put(image(2, "preview", 2, shade=70))
        await trio.testing.wait_all_tasks_blocked()
        assert target.sent[-1] == (2, "preview", 2)
        assert len(store.pushers) == 1
        nursery.cancel_scope.cancel()
    assert store.pushers == set()


async def test_pusher_sends_an_image_stored_before_its_task_ran(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The connection starts the pusher after its list_runs reply (mark_all, start_soon);
    # a run's first image stored in between was never sent to that client.
    store = ImageStore(db="d-1")
    store.put(image(1, "thumbnail", 1))
    target = FakeTarget()
    pusher = ClientPusher(store, target, lambda: (None, frozenset()), push_timeout=1.0)
    pusher.mark_all()
    store.put(image(2, "thumbnail", 1))  # a new key, before the pusher registered
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pusher.run)
        await trio.testing.wait_all_tasks_blocked()
        assert target.sent == [(1, "thumbnail", 1), (2, "thumbnail", 1)]
        nursery.cancel_scope.cancel()


async def test_pusher_ends_when_the_client_stops_taking_messages(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = ImageStore(db="d-1")
    store.put(image(1, "thumbnail", 1))
    store.put(image(2, "thumbnail", 1))
    target = FakeTarget(room=1)
    pusher = ClientPusher(store, target, lambda: (None, frozenset()), push_timeout=1.0)
    pusher.mark_all()
    await pusher.run()  # returns: the client is closed or marked for resync
    assert target.sent == [(1, "thumbnail", 1)]
    assert store.pushers == set()


# --- cancellation (design §6.7) ----------------------------------------------------------------


async def test_a_cancel_stops_the_claim_in_flight_and_every_later_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app, runtime, record = make_app()
    await app._running.jobs.submit(record)
    await app._running.bridge.handle(
        RunStarted(run_id=12, guid=GUID, revision=TOKEN, kind="metadata")
    )
    on_cancel = runtime.eventlog.on_cancel
    assert on_cancel is not None  # the event log calls it when a client cancels (§6.7)
    failures: list[tuple[str, float]] = []

    async def claim_it(kind: str) -> None:
        with pytest.raises(WorkCancelled) as info:
            await app.execute(SchedulerJob(claim=claim(kind)), runtime)  # type: ignore[arg-type]
        failures.append((info.value.code, trio.current_time()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(claim_it, "metadata")  # a read of 0.25 s
        await trio.sleep(0.1)
        assert len(app._running.claims._inflight[12]) == 1  # its cancel scope
        on_cancel()
    assert failures == [("work_cancelled", 0.1)]  # at once, not after the read
    assert app._running.claims._inflight == {}
    assert record.job_open is False
    assert record.halted == {TOKEN}
    await claim_it("preview")  # the rest of the revision: no work at all
    assert failures[-1] == ("work_cancelled", 0.1)
    assert runtime.pool.reads == [12]

    # Nothing more is reported on the cancelled event-log run.
    calls = len(runtime.eventlog.calls)
    await app._running.bridge.handle(
        Settled(run_id=12, guid=GUID, revision=TOKEN, published=(),
                failed=("metadata", "thumbnail", "preview"))
    )  # fmt: skip
    assert len(runtime.eventlog.calls) == calls
    # A new revision (new rows, or a submit) is not halted: a new event-log run.
    await app._running.bridge.handle(
        Invalidated(run_id=12, guid=GUID, old_revision=TOKEN, revision="r2")
    )
    assert record.job == 2
    assert app.halt_job(1) is False  # the old event-log run: nothing to stop any more
    page = await app.execute(SchedulerJob(claim=claim(revision="r2")), runtime)  # type: ignore[arg-type]
    assert isinstance(page, Progressive)


async def test_a_run_cancelled_while_queued_is_not_started_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app, runtime, record = make_app()
    await app._running.jobs.submit(record)
    assert app.halt_job(1)  # the front door's cancel answered "cancelled" for job 1
    assert app.halt_job(99) is False  # not an event-log run of this app
    await app._running.bridge.handle(
        RunStarted(run_id=12, guid=GUID, revision=TOKEN, kind="metadata")
    )
    await app._running.bridge.handle(
        Settled(run_id=12, guid=GUID, revision=TOKEN, published=(),
                failed=("metadata", "thumbnail", "preview"))
    )  # fmt: skip
    assert runtime.eventlog.calls == [("submit", 12, 1)]  # no start, no new run, no finish


# --- helper and pool restarts: the runtime's (design §1.7, §3.7, §4.8) --------------------------


def test_the_preview_kinds_retry_work_that_failed_with_pool_restarting() -> None:
    # The runtime restarts a failed pool by itself; a read caught in between fails with
    # pool_restarting, which the scheduler retries after its backoff, then publishes.
    scheduler = Scheduler(
        [RunInfo(run_id=12, guid=GUID, revision=TOKEN)],
        source="src",
        config=SchedulerConfig(kinds=PREVIEW_KINDS),
    )
    first = scheduler.claim(0.0)
    assert first is not None
    assert (first.kind, first.attempt) == ("metadata", 1)
    events = scheduler.fail(first.claim_id, PoolRestarting("being restarted"), now=0.0)
    assert [(type(e), e.attempt, e.not_before) for e in events] == [(Retrying, 1, 0.025)]
    assert scheduler.claim(0.0) is None  # not before the backoff
    again = scheduler.claim(0.025)
    assert again is not None
    assert (again.kind, again.attempt) == ("metadata", 2)
    published = scheduler.complete(again.claim_id, observation(), now=0.3)
    assert [(type(e), e.kind, e.attempt) for e in published] == [(Published, "metadata", 2)]


async def test_a_pool_restart_redraws_the_runs_that_failed_with_pool_restarting(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    app, runtime, record = make_app()
    other = app._table.register(
        {"run_id": 13, "guid": f"{GUID}#13", "revision": "t13"}, trio.current_time()
    )
    record.errors["metadata"] = PoolRestarting("being restarted").to_record()
    other.errors["metadata"] = ErrorRecord(
        category="permanent", code="source_unreadable", message="bad"
    )
    hub = PoolEvents("preview-helper")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            app._running.helpers.redraw_after_restarts, hub.subscribe(kinds={"pool_restarted"})
        )
        await trio.testing.wait_all_tasks_blocked()
        hub.emit("reaped", "helper#0.1 exited")  # not a restart of the pool
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.scheduler.asked == []

        hub.emit("pool_restarted", "pool 'preview-helper' opened again", opened=2)
        await trio.testing.wait_all_tasks_blocked()
        # Only the run whose work failed with pool_restarting, at a new revision.
        assert runtime.scheduler.asked == [SourceChanged(run_id=12, revision=f"{TOKEN}~r1")]
        assert record.requested == f"{TOKEN}~r1"

        runtime.scheduler.error = AskTimeout("no answer")  # logged; the task goes on
        hub.emit("pool_restarted", "pool 'preview-helper' opened again", opened=3)
        await trio.testing.wait_all_tasks_blocked()
        runtime.scheduler.error = None
        hub.emit("pool_restarted", "pool 'preview-helper' opened again", opened=4)
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.scheduler.asked[1:] == [SourceChanged(run_id=12, revision=f"{TOKEN}~r3")]
        hub.close()  # the runtime closes: the task ends
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name == "examples.preview" and r.levelname == "WARNING"
    ]
    assert warnings == ["after the helper pool restart: no answer"]


# --- the run list ---------------------------------------------------------------------------


def test_run_list_rows_carry_status_and_event_log_run() -> None:
    summary = {"name": "x", "row_count": 7, "is_completed": True}
    record = RunRecord(run_id=3, guid="g", summary=summary, token="a", changed_at=0.0)
    assert (run_status(record), summary_message(record).job_run_id) == (None, None)
    assert record.relisted()  # the row changed since it was last pushed (never)
    assert not record.relisted()
    record.summary["row_count"] = 8
    assert not record.relisted()  # rows alone do not push the list again
    record.job = 9
    assert record.relisted()
    record.observation_status = "interrupted"
    assert summary_message(record).status is None  # not published at this revision yet
    record.published.add("metadata")
    assert (summary_message(record).status, summary_message(record).job_run_id) == (
        "interrupted", 9,
    )  # fmt: skip
    record.reset_revision("b")
    record.summary["is_completed"] = False
    assert run_status(record) == "progressive"
    record.errors["metadata"] = ErrorRecord(category="permanent", code="source_unreadable",
                                            message="bad")  # fmt: skip
    assert run_status(record) == "unreadable"
    record.errors["metadata"] = WorkCancelled("cancelled").to_record()
    assert run_status(record) == "progressive"


async def test_a_change_probe_that_keeps_failing_is_logged_once(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # A broken database (or a failed pool) fails every poll: one warning per distinct
    # failure, and one when the probe works again; not a line (or a traceback) per poll.
    app, _, _ = make_app(poll_interval=1.0)
    outcomes: list[Exception | None] = [PoolFailed("pool failed")] * 5 + [None] * 2
    outcomes += [UnknownRun("gone")] * 2

    async def helper_job(operation: str, payload: Any) -> Any:
        outcome = outcomes.pop(0) if outcomes else None
        if outcome is not None:
            raise outcome
        return {"probe": True}

    async def apply_probe(probe: dict[str, Any]) -> None:
        await trio.lowlevel.checkpoint()

    app._running.helpers.run_job = helper_job  # type: ignore[method-assign]
    app._running.probe.apply = apply_probe  # type: ignore[method-assign]
    app.runs.clear()
    with trio.move_on_after(10.5):
        await app._running.probe.run()
    warnings = [r.getMessage() for r in caplog.records if r.name == "examples.preview"]
    assert warnings == [
        "change probe failed: pool failed",
        "change probe works again",
        "change probe failed: gone",
        "change probe works again",
    ]


async def test_a_run_id_clients_cannot_address_is_left_out(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # Run ids travel as JSON ints of at most 2**53-1. A run with a larger id (SQLite
    # allows 2**63-1) was registered: every run_list (list_runs, pushes) then failed
    # with FieldError for all clients, and each probe asked for runs after it again.
    app, _runtime, _record = make_app()
    beyond = 2**53
    asked: list[Any] = []

    async def helper_job(operation: str, payload: Any) -> Any:
        await trio.lowlevel.checkpoint()
        asked.append(payload)
        after = payload["after"]
        runs = [{"run_id": r, "guid": f"g{r}", "revision": "t"} for r in (13, beyond)]
        return {"runs": [r for r in runs if r["run_id"] > after], "next_after": None}

    app._running.helpers.run_job = helper_job  # type: ignore[method-assign]
    probe = {"runs": [[12, 120, 0, 0], [13, 5, 1, 0], [beyond, 5, 1, 0]]}
    await app._running.probe.apply(probe)
    await app._running.probe.apply(probe)  # the run it left out is not "new" again
    assert sorted(app.runs) == [12, 13]
    assert asked == [{"after": 12, "limit": 500}]
    assert [row.run_id for row in app._table.summaries()] == [12, 13]
    left_out = [r for r in caplog.records if "cannot address" in r.getMessage()]
    assert len(left_out) == 1
    assert left_out[0].run_id == beyond  # type: ignore[attr-defined]


async def test_a_change_the_scheduler_did_not_take_is_asked_again_by_the_next_probe(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app, runtime, record = make_app()
    scheduler = runtime.scheduler
    probe = {"runs": [[12, 150, 0, 0]]}  # run 12 has rows up to id 150 now
    newer = "rows=150;completed=0;exc=0"
    scheduler.error = AskTimeout("no answer")
    with pytest.raises(AskTimeout):
        await app._running.probe.apply(probe)
    assert (record.token, record.requested, record.changed_at) == (TOKEN, TOKEN, 0.0)

    scheduler.error = None
    await trio.sleep(1.0)
    await app._running.probe.apply(probe)
    assert scheduler.asked == [SourceChanged(run_id=12, revision=newer)]
    assert (record.token, record.requested, record.changed_at) == (newer, newer, 1.0)
