"""The preview server's requests that look into one run: times, details, drawings.

Real helper processes (contributing §F.3): the real clock, generous deadlines, and no child
process left afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frontdoor_support import assert_no_children
from preview_support import connect, decode_png, fetch_png, preview_server, server_config

from examples.preview.child.drawing.render import report_of

if TYPE_CHECKING:
    from pathlib import Path


async def test_times_details_and_drawings(plots_db: Path, tmp_path: Path) -> None:
    config = server_config(plots_db, tmp_path, helpers=1)
    async with preview_server(config) as (front, _app), connect(front) as client:
        times = await client.request("list_run_times")
        assert times["type"] == "run_times"
        rows = {row["run_id"]: row for row in times["runs"]}
        assert sorted(rows) == list(range(1, 9))
        assert all(row["started"] > 1.7e9 for row in rows.values())
        assert rows[1]["ended"] >= rows[1]["started"]
        assert rows[8]["ended"] is None  # the crashed sweep never finished

        details = await client.request("run_details", run_id=4)
        assert details["type"] == "run_details_reply"
        assert (details["name"], details["experiment"], details["sample"]) == (
            "magnet_gate_bias_3d", "magnet_transport", "S4_nanowire_D",
        )  # fmt: skip
        assert details["duration"] == details["ended"] - details["started"]
        assert [p["run_id"] for p in details["parents"]] == [2]
        assert details["parents"][0]["edge_type"] == "calibration"
        assert "dac" in details["snapshot"]["station"]["instruments"]
        assert {p["name"] for p in details["parameters"]} >= {"conductance", "magnet_field"}
        first = await client.request("run_details", run_id=1)
        assert first["metadata"]["operator"] == "Ada"

        drawing = await client.request("draw", run_id=4, slice=2)
        assert drawing["type"] == "drawing"
        assert (drawing["slice"], drawing["slice_count"]) == (2, 6)
        assert drawing["slice_label"] == "magnet_field = 0.4 T · slice 3 of 6"
        png = await fetch_png(front.url, drawing)
        assert decode_png(png).size == (640, 480)
        assert report_of(png) == drawing["report"]
        newest = await client.request("draw", run_id=4, kind="thumbnail")
        assert (newest["slice"], newest["slice_label"]) == (5, "6/6 magnet_field = 1 T")

        linear = await client.request("draw", run_id=1, scale="linear", xscale="linear")
        panel = linear["report"]["panels"][0]
        assert (panel["x"]["scale"], panel["y"]["scale"]) == ("linear", "linear")
        assert (linear["slice"], linear["slice_count"]) == (None, 0)
        automatic = await client.request("draw", run_id=1)
        assert automatic["report"]["panels"][0]["x"]["scale"] == "log"

        beyond = await client.request("draw", run_id=4, slice=6)
        assert beyond["code"] == "invalid_command"
        assert beyond["details"]["fields"] == ["slice"]
        assert "has 6 slices" in beyond["message"]
        # Any slice the protocol allows gets that answer; one past 2**31-1 used to reach
        # the helper's own bound instead (no fields, the helper job's details).
        farthest = await client.request("draw", run_id=4, slice=2**53 - 1)
        assert (farthest["code"], farthest["details"]) == ("invalid_command", {"fields": ["slice"]})
        assert "has 6 slices" in farthest["message"]
        flat = await client.request("draw", run_id=1, slice=0)
        assert flat["code"] == "invalid_command"
        assert "at most two sweep dimensions" in flat["message"]
        bad_scale = await client.request("draw", run_id=1, scale="cubic")
        assert bad_scale["code"] == "invalid_message"
        assert bad_scale["details"]["fields"] == ["$.scale"]
        unknown = await client.request("run_details", run_id=99)
        assert unknown["code"] == "unknown_run"
        assert (await client.request("draw", run_id=99))["code"] == "unknown_run"
    assert_no_children()
