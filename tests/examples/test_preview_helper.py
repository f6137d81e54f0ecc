"""The preview helper: its handlers in-process, and the entry point in a real child.

The real-child tests run on the real clock with short timeouts (STYLE rule 21).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from actors import HelperSpec, HelperTimeouts
from actors._helpers._process import HelperProcess
from actors.errors import HelperJobFailed, HelperStartupError, SourceError
from actors.helper import CancelRequested, JobError
from examples.preview.helper import PreviewHandlers

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
    import examples.preview.helper as module

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


def test_startup_needs_a_readable_database(tmp_path):
    with pytest.raises(JobError):
        PreviewHandlers().startup({})
    with pytest.raises(SourceError):
        PreviewHandlers().startup({"db": str(tmp_path / "missing.db")})


async def test_the_entry_point_in_a_real_helper_process(real_db):
    spec = HelperSpec(
        entry="examples.preview.helper:main", options={"db": str(real_db)}, cwd=str(REPO)
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
            with pytest.raises(HelperJobFailed) as info:
                await helper.run_job("read_run", {"run_id": 99})
            assert (info.value.code, info.value.category) == ("unknown_run", "permanent")
            probe = await helper.run_job("probe", None)
            assert len(probe["runs"]) == 12
        finally:
            assert await helper.shutdown() is not None


async def test_a_bad_database_fails_the_helper_startup(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("not a database")
    spec = HelperSpec(entry="examples.preview.helper:main", options={"db": str(bad)}, cwd=str(REPO))
    async with trio.open_nursery() as nursery:
        helper = HelperProcess(spec, TIMEOUTS)
        with pytest.raises(HelperStartupError) as info:
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
