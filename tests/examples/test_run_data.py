"""The ``run_data`` request of the preview server, end to end (design §7.7).

A real server in this process (real helper processes, real clock, contributing §F.3) on the
sample database plus runs with known values (:mod:`explore_support`): the answers go
through the strict codec, keep a 400 000-point trace's spike, carry a map's exact values,
stay within the byte bound, and bad requests get the API's error replies.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
import trio
from explore_support import (
    BIG_MAP_RUN,
    BIG_MAP_SHAPE,
    MAP_COLUMNS,
    MAP_ROWS,
    MAP_RUN,
    SPIKE_POINTS,
    SPIKE_RUN,
    SPIKE_VALUE,
    explore_database,
)
from frontdoor_support import assert_no_children
from preview_support import connect, preview_server, server_config

from protocol import RunDataReply, decode_server_message

if TYPE_CHECKING:
    from pathlib import Path

    from frontdoor_support import Client

#: Seconds a ``run_data`` answer may take: the helper reads 400 000 rows beside the
#: drawing of every run, on a shared machine.
ANSWER_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def explore_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return explore_database(tmp_path_factory.mktemp("explore") / "explore.db")


async def _ask(client: Client, **fields: object) -> tuple[dict[str, object], int]:
    """Send ``run_data`` and return the raw answer and its size in bytes."""
    request_id = f"d{id(fields)}"
    await client.send({"type": "run_data", "request_id": request_id, **fields})
    with trio.fail_after(ANSWER_TIMEOUT):
        while True:
            text = await client.ws.get_message()
            message = json.loads(text)
            if message.get("request_id") == request_id:
                size = len(text.encode() if isinstance(text, str) else text)
                return message, size


async def test_run_data_keeps_extremes_and_exact_values(explore_db: Path, tmp_path: Path) -> None:
    config = server_config(explore_db, tmp_path, helpers=1)
    async with preview_server(config) as (front, _), connect(front) as client:
        raw, size = await _ask(client, run_id=SPIKE_RUN)
        reply = decode_server_message(json.dumps(raw))  # the strict codec accepts it
        assert isinstance(reply, RunDataReply)
        (trace,) = reply.series
        assert trace.name == "signal"
        assert trace.unit == "V"
        assert trace.axes[0].name == "time"
        assert trace.axes[0].unit == "s"
        assert trace.source_shape == (SPIKE_POINTS,)
        assert trace.shape[0] <= 2 * config.data_buckets
        assert max(v for v in trace.values if v is not None) == SPIKE_VALUE
        xs = [x for x in trace.axes[0].values if x is not None]
        assert xs == sorted(xs)
        assert reply.buckets == config.data_buckets
        assert reply.bytes <= config.data_bytes
        assert size <= config.data_bytes + 1024

        raw, _ = await _ask(client, run_id=MAP_RUN, side=64)
        reply = decode_server_message(json.dumps(raw))
        assert isinstance(reply, RunDataReply)
        (grid,) = reply.series
        assert grid.shape == grid.source_shape == (MAP_ROWS, MAP_COLUMNS)
        assert grid.low == grid.high == ()  # nothing merged: sent once
        outer, inner = grid.axes
        assert (outer.name, outer.unit, inner.name, inner.unit) == ("bias", "V", "gate", "V")
        assert outer.values == tuple(r / 100 for r in range(MAP_ROWS))
        assert inner.values == tuple(c / 10 for c in range(MAP_COLUMNS))
        assert grid.values == tuple(
            float(1000 * r + c) for r in range(MAP_ROWS) for c in range(MAP_COLUMNS)
        )

        raw, _ = await _ask(client, run_id=MAP_RUN, side=5, buckets=16)
        reply = decode_server_message(json.dumps(raw))
        assert isinstance(reply, RunDataReply)
        (small,) = reply.series
        assert small.shape == (4, 5)  # 12 x 20 in blocks of 3 x 4
        assert small.low[0] == 0.0
        assert small.high[0] == 2003.0
        assert small.values[0] == 1001.5
        assert small.axes[1].values[0] == 0.15  # the block's mean setpoint
    assert_no_children()


async def test_run_data_refuses_bad_requests(explore_db: Path, tmp_path: Path) -> None:
    config = server_config(explore_db, tmp_path, helpers=1, data_buckets=500, data_side=64)
    async with preview_server(config) as (front, _), connect(front) as client:
        unknown, _ = await _ask(client, run_id=999)
        assert unknown["type"] == "error"
        assert unknown["code"] == "unknown_run"
        too_many, _ = await _ask(client, run_id=SPIKE_RUN, buckets=501)
        assert too_many["code"] == "invalid_command"
        assert too_many["details"]["fields"] == ["buckets"]
        too_wide, _ = await _ask(client, run_id=MAP_RUN, side=65)
        assert too_wide["code"] == "invalid_command"
        assert too_wide["details"]["fields"] == ["side"]
        for fields, path in [
            ({"run_id": "12"}, "$.run_id"),
            ({"run_id": -1}, "$.run_id"),
            ({"run_id": 12, "buckets": 0}, "$.buckets"),
            ({"run_id": 12, "side": 1.5}, "$.side"),
            ({"run_id": 12, "step": 2}, "$.step"),
        ]:
            refused, _ = await _ask(client, **fields)
            assert refused["code"] == "invalid_message", refused
            assert refused["details"]["fields"] == [path], refused
        answer, _ = await _ask(client, run_id=SPIKE_RUN)  # the connection still serves
        assert answer["type"] == "run_data_reply"
        assert answer["buckets"] == 500
    assert_no_children()


async def test_run_data_stays_within_its_byte_bound(explore_db: Path, tmp_path: Path) -> None:
    bound = 200 * 1024
    config = server_config(explore_db, tmp_path, helpers=1, data_bytes=bound)
    async with preview_server(config) as (front, _), connect(front) as client:
        raw, size = await _ask(client, run_id=BIG_MAP_RUN)
        reply = decode_server_message(json.dumps(raw))
        assert isinstance(reply, RunDataReply)
        assert reply.bytes <= bound
        assert size <= bound + 1024
        assert reply.side < config.data_side  # halved until it fit
        (grid,) = reply.series
        assert grid.source_shape == BIG_MAP_SHAPE
        assert max(grid.shape) <= reply.side
        assert len(grid.low) == len(grid.high) == len(grid.values)
        assert max(v for v in grid.high if v is not None) > 0.99  # the peak survives
    assert_no_children()
