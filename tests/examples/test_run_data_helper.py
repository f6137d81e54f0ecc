"""The helper's ``run_data`` job, called in this process (design §7.7): no subprocess.

It reads with :meth:`QcodesSource.read_series` and reduces with
:mod:`examples.preview.child.run_data`; these tests check what reaches the wire for the
sample database's odd runs (NaN and ±Inf, complex, text, empty, more than two sweep
dimensions), the byte bound, and that every answer passes the strict protocol types.
"""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING, Any

import pytest

from actors.helper import JobError
from examples.preview.app.run_views import data_reply
from examples.preview.child.helper import PreviewHandlers
from examples.preview.child.qcodes.errors import UnknownRun
from examples.preview.sample_db import create_sample_database
from protocol import RunDataReply, decode_server_message, encode_message

if TYPE_CHECKING:
    from pathlib import Path


class Context:
    """A job context that is never cancelled."""

    def check_cancel(self) -> None:
        return None


@pytest.fixture(scope="module")
def handlers(tmp_path_factory: pytest.TempPathFactory) -> PreviewHandlers:
    path = create_sample_database(tmp_path_factory.mktemp("sample") / "sample.db")
    opened = PreviewHandlers()
    opened.startup({"db": str(path)})
    return opened


def _data(handlers: PreviewHandlers, **payload: Any) -> dict[str, Any]:
    found = handlers.run_data(payload, Context())  # type: ignore[arg-type]
    # Strict JSON, as the helper frame writes it; ``bytes`` is its size.
    text = json.dumps(found, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    assert len(text.encode()) == found["bytes"]
    reply = data_reply("r1", found)
    assert decode_server_message(encode_message(reply)) == reply
    return found


def test_nan_and_infinities_are_null_and_counted(handlers: PreviewHandlers) -> None:
    (series,) = _data(handlers, run_id=2)["series"]  # 250 points: NaN x3, +Inf, -Inf
    assert series["nonfinite"] == 5
    assert series["values"].count(None) == 5
    assert series["shape"] == series["source_shape"] == [250]
    assert (series["unit"], series["axes"][0]["unit"]) == ("Ω", "T")


def test_complex_data_gives_magnitude_and_phase_in_degrees(handlers: PreviewHandlers) -> None:
    magnitude, phase = _data(handlers, run_id=7)["series"]
    assert (magnitude["component"], phase["component"]) == ("magnitude", "phase")
    assert phase["unit"] == "deg"
    assert max(abs(v) for v in phase["values"] if v is not None) <= 180.0


def test_text_values_carry_their_levels(handlers: PreviewHandlers) -> None:
    state = _data(handlers, run_id=8)["series"][0]
    assert state["levels"] == ["ground", "excited"]
    assert set(state["values"]) <= {0.0, 1.0}


def test_an_empty_run_has_series_without_points(handlers: PreviewHandlers) -> None:
    (series,) = _data(handlers, run_id=9)["series"]
    assert series["shape"] == series["source_shape"] == [0]
    assert series["values"] == []


def test_the_byte_bound_halves_buckets_and_side(handlers: PreviewHandlers) -> None:
    whole = _data(handlers, run_id=4)  # a 40 x 100 map
    assert whole["series"][0]["shape"] == [40, 100]
    bounded = _data(handlers, run_id=4, max_bytes=8 * 1024)
    assert bounded["bytes"] <= 8 * 1024
    assert bounded["side"] < 256
    assert bounded["buckets"] < 2000
    (grid,) = bounded["series"]
    assert max(grid["shape"]) <= bounded["side"]
    assert len(grid["low"]) == len(grid["values"])
    source = [v for v in whole["series"][0]["values"] if v is not None]
    assert max(v for v in grid["high"] if v is not None) == max(source)  # extremes kept
    assert min(v for v in grid["low"] if v is not None) == min(source)


def test_bad_payloads_and_unknown_runs_are_job_errors(handlers: PreviewHandlers) -> None:
    for payload, word in [
        ({}, "run_id is required"),
        ({"run_id": 1, "buckets": 0}, "buckets"),
        ({"run_id": 1, "side": 10**6}, "side"),
        ({"run_id": 1, "max_bytes": "many"}, "max_bytes"),
        ({"run_id": 1, "colour": "red"}, "unknown fields: colour"),
    ]:
        with pytest.raises(JobError, match=word) as caught:
            handlers.run_data(payload, Context())  # type: ignore[arg-type]
        assert caught.value.code == "invalid_command"
    with pytest.raises(UnknownRun):
        handlers.run_data({"run_id": 999}, Context())  # type: ignore[arg-type]


def test_more_than_two_sweep_dimensions_give_the_newest_slice(
    plots_db: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "plots.db"
    shutil.copyfile(plots_db, copy)
    opened = PreviewHandlers()
    opened.startup({"db": str(copy)})
    try:
        found = _data(opened, run_id=4)  # magnet_gate_bias_3d
        observation = opened.read_run({"run_id": 4}, Context())  # type: ignore[arg-type]
    finally:
        assert opened.source is not None
        opened.source.close()
    (grid,) = found["series"]
    drawn = observation["dependents"][0]  # the preview's default: the newest slice too
    assert grid["shape"] == drawn["shape"]
    assert [a["name"] for a in grid["axes"]] == [a["name"] for a in drawn["axes"]]
    assert grid["values"] == [v for row in drawn["values"] for v in row]
    assert isinstance(data_reply("r", found), RunDataReply)
