"""The preview helper: its handlers in-process, and the entry point in a real child.

The real-child tests run on the real clock with short timeouts (contributing §F.3).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from actors import HelperSpec, HelperTimeouts
from actors._helpers._process import HelperProcess
from actors.errors import HelperStartupFailed, JobFailed, SourceUnreadable
from actors.helper import CancelRequested, JobError
from examples.preview.app.images import png_size
from examples.preview.child.draw import (
    DEPENDENT_SUMMARY_KEYS,
    SUMMARY_KEYS,
    draw_kinds,
    draw_live,
    observation_of,
    png_of,
)
from examples.preview.child.drawing.render import render, report_of
from examples.preview.child.helper import PreviewHandlers
from protocol import Blob

REPO = Path(__file__).resolve().parents[2]
TIMEOUTS = HelperTimeouts(startup=20.0, reply=20.0, cancel_grace=1.0, shutdown=2.0)


class FakeContext:
    def __init__(self, cancel_after: int | None = None) -> None:
        self.checks = 0
        self.cancel_after = cancel_after

    def check_cancel(self) -> None:
        self.checks += 1
        if self.cancel_after is not None and self.checks > self.cancel_after:
            raise CancelRequested("cancelled")


@pytest.fixture
def handlers(real_db):
    h = PreviewHandlers()
    ident = h.startup({"db": str(real_db)})
    assert ident["run_count"] == 12
    yield h
    h.source.close()


def test_list_runs_pages(handlers):
    page = handlers.list_runs({"limit": 5}, FakeContext())
    assert [r["run_id"] for r in page["runs"]] == [1, 2, 3, 4, 5]
    assert page["next_after"] == 5
    rest = handlers.list_runs({"after": 5, "limit": 100}, FakeContext())
    assert rest["runs"][-1]["run_id"] == 12
    assert rest["next_after"] is None
    assert len(handlers.list_runs(None, FakeContext())["runs"]) == 12


def test_read_run_and_probe(handlers):
    observation = handlers.read_run({"run_id": 6}, FakeContext())
    assert observation["dependents"][0]["shape"] == [40, 60]
    probe = handlers.probe({"run_ids": [10, 11]}, FakeContext())
    assert probe["runs"] == [[10, 0, 1, 0], [11, 73, 1, 1]]


def test_read_run_is_cancellable(handlers):
    with pytest.raises(CancelRequested):
        handlers.read_run({"run_id": 4}, FakeContext(cancel_after=0))


@pytest.mark.parametrize(
    ("operation", "payload", "words"),
    [
        ("read_run", {}, "run_id is required"),
        ("read_run", {"run_id": "4"}, "run_id must be an integer"),
        ("read_run", {"run_id": 4, "colour": 1}, "unknown fields: colour"),
        ("list_runs", {"limit": 0}, "limit must be"),
        ("list_runs", [1], "payload must be an object"),
        ("probe", {"run_ids": [True]}, "run_ids must be"),
    ],
)
def test_malformed_payloads(handlers, operation, payload, words):
    with pytest.raises(JobError, match=words) as info:
        getattr(handlers, operation)(payload, FakeContext())
    assert info.value.code == "invalid_command"


def test_test_faults_crash_once_and_stall(real_db, tmp_path, monkeypatch):
    import examples.preview.child.helper as module

    marker = tmp_path / "crashed"
    h = PreviewHandlers()
    h.startup({"db": str(real_db), "faults": {
        "crash_once": {"run_id": 4, "marker": str(marker)},
        "stall": {"run_id": 5, "seconds": 30, "marker": str(tmp_path / "stalled")},
    }})  # fmt: skip
    exits: list[int] = []

    def fake_exit(code: int) -> None:
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(module.os, "_exit", fake_exit)
    try:
        with pytest.raises(SystemExit):
            h.read_run({"run_id": 4}, FakeContext())
        assert exits == [module.CRASH_EXIT_CODE]
        assert marker.exists()
        assert h.read_run({"run_id": 4}, FakeContext())["run_id"] == 4  # once only
        with pytest.raises(CancelRequested):  # the stall checks for a cancel as it waits
            h.read_run({"run_id": 5}, FakeContext(cancel_after=3))
        assert (tmp_path / "stalled").exists()
        assert h.read_run({"run_id": 6}, FakeContext())["run_id"] == 6
    finally:
        h.source.close()
    with pytest.raises(JobError, match="faults"):
        PreviewHandlers().startup({"db": str(real_db), "faults": {"explode": {}}})


# --- drawing in the helper (design §5.4) ----------------------------------------------------


def _size(png: bytes | memoryview) -> tuple[int, int]:
    return png_size(bytes(png))


def _has_values(observation: dict) -> bool:
    return any(
        "values" in dep or any("values" in axis for axis in dep.get("axes") or ())
        for dep in observation["dependents"]
    )


def _is_summary(observation: dict, full: dict) -> bool:
    """``observation`` is what the server keeps of ``full``: its summary keys only."""
    dependents = [
        {k: v for k, v in dep.items() if k in DEPENDENT_SUMMARY_KEYS} for dep in full["dependents"]
    ]
    top = {k: v for k, v in full.items() if k in SUMMARY_KEYS}
    kept = {k: v for k, v in observation.items() if k not in ("images", "image_errors")}
    return kept == {**top, "dependents": dependents}


def test_a_drawn_read_leaves_its_values_for_the_preview(real_db, tmp_path):
    h = PreviewHandlers()
    h.startup({"db": str(real_db), "handoff": str(tmp_path / "handoff")})
    try:
        full = h.read_run({"run_id": 6}, FakeContext())
        reply = h.read_run({"run_id": 6, "draw": ["thumbnail"]}, FakeContext())
        # The PNG as it is, in the binary part beside the read (design §2.3).
        assert type(reply) is Blob
        assert reply.head["images"] == {"thumbnail": [0, len(reply.data)]}
        drawn = observation_of(reply)
        # The same picture as the renderer would draw, and the summary of the read.
        assert drawn["images"]["thumbnail"] == render(full, "thumbnail")
        assert png_of(reply, "thumbnail") == render(full, "thumbnail")
        assert not _has_values(drawn)
        assert _is_summary(drawn, full)
        assert drawn["status"] == full["status"] == "ok"
        assert drawn["dependents"][0]["source_shape"] == [40, 60]
        assert (tmp_path / "handoff" / "run-6.marshal").exists()

        source, h.source = h.source, None  # a read now fails: the preview must not read
        preview = observation_of(
            h.draw({"run_id": 6, "kinds": ["preview"], "revision": full["revision"]},
                   FakeContext())
        )  # fmt: skip
        assert preview["images"]["preview"] == render(full, "preview")
        assert (preview["run_id"], preview["status"]) == (6, "ok")
        assert list((tmp_path / "handoff").iterdir()) == []  # taken
        with pytest.raises(JobError, match="no database is open"):  # nothing left: a read
            h.draw({"run_id": 6, "kinds": ["preview"], "revision": full["revision"]},
                   FakeContext())  # fmt: skip
        h.source = source

        h.read_run({"run_id": 5, "draw": ["thumbnail"]}, FakeContext())
        other = observation_of(
            h.draw({"run_id": 5, "kinds": ["thumbnail", "preview"], "revision": "rows=1"},
                   FakeContext())
        )  # fmt: skip
        assert [_size(other["images"][k]) for k in ("thumbnail", "preview")] == [
            (160, 120), (640, 480)
        ]  # fmt: skip
        assert list((tmp_path / "handoff").iterdir()) == []  # another revision: read again

        (tmp_path / "handoff" / "run-5.marshal").write_bytes(b"\xff not marshal")
        damaged = observation_of(
            h.draw({"run_id": 5, "kinds": ["thumbnail"], "revision": "rows=1"}, FakeContext())
        )
        assert _size(damaged["images"]["thumbnail"]) == (160, 120)
        assert list((tmp_path / "handoff").iterdir()) == []
    finally:
        h.source.close()


def test_a_read_of_a_run_being_written_is_drawn_only_as_its_live_images(handlers):
    # Without ``live`` it comes back whole and undrawn, as before.
    read = handlers.read_run({"run_id": 12, "draw": ["thumbnail"]}, FakeContext())
    assert read["status"] == "incomplete"
    assert "images" not in read
    assert _has_values(read)
    # With ``live`` the helper draws it (the server draws nothing, design §5.4).
    answer = handlers.read_run(
        {"run_id": 12, "draw": ["thumbnail"], "live": ["thumbnail", "preview"]}, FakeContext()
    )
    live = observation_of(answer)
    assert live["status"] == "incomplete"
    assert not _has_values(live)
    assert _is_summary(live, read)
    assert "image_errors" not in live
    assert [_size(live["images"][kind]) for kind in ("thumbnail", "preview")] == [
        (160, 120), (640, 480)
    ]  # fmt: skip
    assert png_of(answer, "preview") == render(read, "preview")  # the same picture
    # A finished read ignores ``live``.
    finished = observation_of(handlers.read_run({"run_id": 6, "live": ["preview"]}, FakeContext()))
    assert _has_values(finished)
    # Asked explicitly (a run the server published as it is), it is drawn.
    drawn = handlers.draw({"run_id": 12, "kinds": ["thumbnail"]}, FakeContext())
    assert _size(png_of(drawn, "thumbnail") or b"") == (160, 120)


def test_a_live_image_that_cannot_be_drawn_is_named_and_the_read_stands():
    images, errors = draw_live({"dependents": [{"points": 3}]}, ["thumbnail"], lambda: None)
    assert images == {}
    assert errors == {"thumbnail": "thumbnail: malformed observation: KeyError: 'ndim'"}


def test_a_drawing_with_its_report_of_a_slice_and_options(plots_db):
    h = PreviewHandlers()
    h.startup({"db": str(plots_db)})
    try:
        answer = h.draw(
            {"run_id": 4, "kinds": ["preview"], "slice": 2, "options": {"scale": "linear"},
             "report": True},
            FakeContext(),
        )  # fmt: skip
        head = observation_of(answer)
        assert (head["slice"]["index"], head["slice"]["count"]) == (2, 6)
        png = png_of(answer, "preview")
        assert png is not None
        assert head["reports"]["preview"] == report_of(png)
        assert head["reports"]["preview"]["panels"][0]["colour"]["scale"] == "linear"
        beyond = observation_of(
            h.draw({"run_id": 4, "kinds": ["preview"], "slice": 6, "report": True}, FakeContext())
        )
        assert (beyond["slice"]["count"], beyond["images"], "reports" in beyond) == (6, {}, False)
        with pytest.raises(JobError, match="scale must be one of") as info:
            h.draw({"run_id": 1, "kinds": ["preview"], "options": {"scale": "cubic"},
                    "report": True}, FakeContext())  # fmt: skip
        assert info.value.code == "render_failed"
    finally:
        assert h.source is not None
        h.source.close()


def test_drawing_is_cancellable(handlers):
    with pytest.raises(CancelRequested):
        handlers.draw({"run_id": 4, "kinds": ["preview"]}, FakeContext(cancel_after=3))


@pytest.mark.parametrize(
    "spans",
    [
        {"preview": [0, 4]},  # no thumbnail drawn
        {"thumbnail": [2, 9]},  # past the end of the binary part
        {"thumbnail": [-1, 2]},
        {"thumbnail": [0]},
        {"thumbnail": "0-4"},
        None,
    ],
)
def test_an_image_the_reply_does_not_hold_is_none(spans):
    # The server then draws that kind again.
    reply = Blob(head={"run_id": 3, "images": spans}, data=b"\x89PNG\x00\x01")
    assert png_of(reply, "thumbnail") is None
    assert png_of(observation_of(reply), "thumbnail") is None
    assert png_of({"images": {"thumbnail": "iVBORw0KGgo="}}, "thumbnail") is None  # base64: no
    assert png_of(Blob(head={"images": {"thumbnail": [2, 3]}}, data=b"ab\x89PN"), "thumbnail") == (
        b"\x89PN"
    )


def test_a_run_that_cannot_be_drawn_fails_with_render_failed():
    with pytest.raises(JobError, match="thumbnail: malformed observation") as info:
        draw_kinds({"dependents": [{"points": 3}]}, ["thumbnail"], lambda: None)
    assert (info.value.code, info.value.category) == ("render_failed", "permanent")


@pytest.mark.parametrize(
    ("operation", "payload", "words"),
    [
        ("read_run", {"run_id": 4, "draw": "thumbnail"}, "draw must be a list of distinct"),
        ("read_run", {"run_id": 4, "draw": ["poster"]}, "draw must be a list"),
        ("draw", {"run_id": 4}, "kinds is required"),
        ("draw", {"kinds": ["preview"]}, "run_id is required"),
        ("draw", {"run_id": 4, "kinds": ["preview", "preview"]}, "kinds must be a list of"),
        ("draw", {"run_id": 4, "kinds": ["preview"], "revision": 5}, "revision must be"),
        ("draw", {"run_id": 4, "kinds": [], "colour": 1}, "unknown fields: colour"),
        ("draw", {"run_id": 4, "kinds": [], "options": 5}, "options must be an object"),
        ("draw", {"run_id": 4, "kinds": [], "report": "yes"}, "report must be true or false"),
        ("read_run", {"run_id": 4, "live": ["poster"]}, "live must be a list"),
    ],
)
def test_malformed_drawing_payloads(handlers, operation, payload, words):
    with pytest.raises(JobError, match=words) as info:
        getattr(handlers, operation)(payload, FakeContext())
    assert info.value.code == "invalid_command"


def test_a_bad_handoff_option_fails_the_startup(real_db, tmp_path):
    with pytest.raises(JobError, match="'handoff' must be a folder path"):
        PreviewHandlers().startup({"db": str(real_db), "handoff": 5})
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(JobError, match="'handoff'"):
        PreviewHandlers().startup({"db": str(real_db), "handoff": str(blocker / "sub")})


def test_startup_needs_a_readable_database(tmp_path):
    with pytest.raises(JobError):
        PreviewHandlers().startup({})
    with pytest.raises(SourceUnreadable):
        PreviewHandlers().startup({"db": str(tmp_path / "missing.db")})


async def test_the_entry_point_in_a_real_helper_process(real_db):
    spec = HelperSpec(
        entry="examples.preview.child.helper:main", options={"db": str(real_db)}, cwd=str(REPO)
    )
    async with trio.open_nursery() as nursery:
        helper = HelperProcess(spec, TIMEOUTS)
        await helper.start(nursery)
        try:
            assert helper.ready["info"]["run_count"] == 12
            assert helper.ready["info"]["path"] == str(real_db.resolve())
            assert helper.ready["heavy_modules"] == []  # no trio, attrs or cattrs
            page = await helper.run_job("list_runs", {"limit": 3})
            assert [r["name"] for r in page["runs"]] == [
                "sine_sweep",
                "lorentzian_sweep",
                "lockin_multi",
            ]
            observation = await helper.run_job("read_run", {"run_id": 7})
            assert observation["dependents"][0]["shape"] == [25, 128]
            with pytest.raises(JobFailed) as info:
                await helper.run_job("read_run", {"run_id": 99})
            assert (info.value.code, info.value.category) == ("unknown_run", "permanent")
            probe = await helper.run_job("probe", None)
            assert len(probe["runs"]) == 12
            drawn = await helper.run_job("draw", {"run_id": 7, "kinds": ["thumbnail", "preview"]})
            assert type(drawn) is Blob  # the PNGs beside the JSON: no base64 (design §2.3)
            assert type(drawn.data) is memoryview
            images = observation_of(drawn)["images"]
            assert [_size(images[kind]) for kind in ("thumbnail", "preview")] == [
                (160, 120), (640, 480)
            ]  # fmt: skip
        finally:
            assert await helper.shutdown() is not None


async def test_a_bad_database_fails_the_helper_startup(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("not a database")
    spec = HelperSpec(
        entry="examples.preview.child.helper:main", options={"db": str(bad)}, cwd=str(REPO)
    )
    async with trio.open_nursery() as nursery:
        helper = HelperProcess(spec, TIMEOUTS)
        with pytest.raises(HelperStartupFailed) as info:
            await helper.start(nursery)
    record = info.value.details["record"]
    assert record["code"] == "source_unreadable"
    assert "not an SQLite database" in record["message"]


def test_a_database_corrupted_while_open_is_a_source_error(real_db, tmp_path):
    # Truncated or overwritten under a running helper: every handler answers the
    # classified source_unreadable (transient), not a raw sqlite3 error (handler_failed,
    # with a traceback on stderr at every change probe).
    db = tmp_path / "doomed.db"
    db.write_bytes(real_db.read_bytes())
    h = PreviewHandlers()
    h.startup({"db": str(db)})
    try:
        assert h.probe(None, FakeContext())["run_count"] == 12
        with db.open("r+b") as handle:  # keeps page 1 (the header) intact
            handle.seek(4096)
            handle.write(b"\xa5" * 200_000)
        # (A WAL reader keeps serving the pages it cached, so the probe may still see
        # the old runs; these read pages it never cached.)
        for operation, payload in (("list_runs", None), ("read_run", {"run_id": 6})):
            with pytest.raises(JobError) as caught:
                h.table()[operation](payload, FakeContext())
            assert (caught.value.code, caught.value.category) == ("source_unreadable", "transient")
    finally:
        h.source.close()
    with pytest.raises(JobError) as caught:  # a helper started now fails the same way
        PreviewHandlers().startup({"db": str(db)})
    assert caught.value.code == "source_unreadable"
