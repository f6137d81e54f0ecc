"""Shared pieces of the preview-server tests: an in-process server and a message sink.

The server runs real helper processes, so these tests use the real clock with short
configured intervals and generous deadlines (contributing §F.3); every test checks that no
child process is left.
"""

from __future__ import annotations

import io
import sqlite3
from collections import defaultdict
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio
from frontdoor_support import TIMEOUT, Client
from PIL import Image
from trio_websocket import open_websocket_url

from examples.preview.app.preview_app import PreviewConfig, open_database
from examples.preview.server import open_preview_server
from examples.web.fetch import Fetched, http_get
from examples.web.frontdoor import FrontDoorConfig

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from examples.preview.app.preview_app import PreviewApp
    from examples.web.frontdoor import FrontDoor

REPO = Path(__file__).resolve().parents[2]
#: Images of the preview server, by kind: (width, height) in pixels.
SIZES = {"thumbnail": (160, 120), "preview": (640, 480)}
#: Run 12 of the real sample: ``is_completed = 0``, 120 of 200 planned points.
LIVE_RUN = 12
LIVE_TABLE = "results-1-7"


def server_config(db: Path, tmp_path: Path, **overrides: Any) -> PreviewConfig:
    """A :class:`PreviewConfig` for tests: short polls, a private cache folder."""
    fields: dict[str, Any] = {
        "db": db,
        "helpers": 2,
        "cache_dir": tmp_path / "cache",
        "poll_interval": 0.1,
        "stall_after": 60.0,
        "stop_grace": 1.0,
    }
    fields.update(overrides)
    return PreviewConfig(**fields)


@attrs.define
class Seen:
    """Every message a test client received, sorted for assertions."""

    events: list[dict[str, Any]] = attrs.field(factory=list)
    jobs: dict[int, int] = attrs.field(factory=dict)
    """Event-log run → database run (from ``job_queued``)."""
    by_run: dict[int, list[dict[str, Any]]] = attrs.field(factory=lambda: defaultdict(list))
    """Database run → its events, in arrival order."""
    images: dict[tuple[int, str], list[dict[str, Any]]] = attrs.field(
        factory=lambda: defaultdict(list)
    )
    """``image_ready`` notices by (run, kind), in arrival order."""
    other: list[dict[str, Any]] = attrs.field(factory=list)

    def add(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "events":
            for event in message["events"]:
                self.add({"type": "event", **event})
        elif kind == "event":
            self.events.append(message)
            if message["kind"] == "job_queued":
                self.jobs[message["run_id"]] = message["data"]["arguments"]["run_id"]
            run = self.jobs.get(message["run_id"])
            if run is not None:
                self.by_run[run].append(message)
        elif kind == "image_ready":
            self.images[message["run_id"], message["kind"]].append(message)
        else:
            self.other.append(message)

    def finished(self, run: int) -> dict[str, Any] | None:
        """The data of the run's newest ``job_finished`` event, or None."""
        for event in reversed(self.by_run.get(run, [])):
            if event["kind"] == "job_finished":
                return event["data"]  # type: ignore[no-any-return]
        return None

    def jobs_of(self, run: int) -> list[int]:
        """The event-log runs of a database run, oldest first."""
        return [job for job, of in self.jobs.items() if of == run]

    def newest(self, run: int, kind: str) -> dict[str, Any] | None:
        found = self.images.get((run, kind))
        return found[-1] if found else None


async def pump(client: Client, seen: Seen, done: Callable[[], bool]) -> None:
    """Feed pushes into ``seen`` until ``done()``; run it under ``trio.fail_after``."""
    while not done():
        seen.add(await client.next_push())


def decode_png(data: bytes) -> Image.Image:
    """The PNG ``data``, fully decoded (Pillow raises if it is broken)."""
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


async def fetch(url: str, target: str, token: str | None = None, **headers: str) -> Fetched:
    """``GET target`` from the server at ``url`` (ws:// or http://), within ``TIMEOUT``."""
    with trio.fail_after(TIMEOUT):
        return await http_get(url, target, token=token, max_body=16 << 20, headers=headers)


async def fetch_png(url: str, notice: dict[str, Any], token: str | None = None) -> bytes:
    """The image an ``image_ready`` (or ``drawing``) notice names: its PNG bytes."""
    fetched = await fetch(url, notice["url"], token)
    assert fetched.status == 200, (notice["url"], fetched.status, fetched.body[:200])
    assert fetched.headers["content-type"] == "image/png"
    assert int(fetched.headers["content-length"]) == len(fetched.body) == notice["bytes"]
    return fetched.body


@asynccontextmanager
async def preview_server(
    config: PreviewConfig,
    *,
    token: str | None = None,
    paths: list[Path] | None = None,
    metrics: bool = True,
) -> AsyncIterator[tuple[FrontDoor, PreviewApp]]:
    """The preview server in this process, on an ephemeral loopback port."""
    identity = await trio.to_thread.run_sync(open_database, config.db)
    front_config = FrontDoorConfig(port=0, token=token)
    async with open_preview_server(
        config, front_config, identity, paths=paths, metrics=metrics
    ) as server:
        yield server


@asynccontextmanager
async def connect(
    front: FrontDoor, prefix: str = "t", *, token: str | None = None
) -> AsyncIterator[Client]:
    """A test client connected to ``front`` (with ``token`` in the address, if given)."""
    url = front.url if token is None else f"{front.url}/?token={token}"
    async with open_websocket_url(url, max_message_size=4 * 1024 * 1024) as ws:
        yield Client(ws, prefix)


def append_rows(db: Path, start: int, stop: int, *, complete: bool = False) -> None:
    """Be the measurement: add points ``start..stop-1`` of 200 to the live run (sqlite3)."""
    conn = sqlite3.connect(db, isolation_level=None, timeout=TIMEOUT)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            f'INSERT INTO "{LIVE_TABLE}" ("dac_gate1", "dmm_v1") VALUES (?, ?)',
            [(-1.0 + 2.0 * i / 199, 0.001 * i) for i in range(start, stop)],
        )
        if complete:
            conn.execute(
                "UPDATE runs SET is_completed = 1, completed_timestamp = 1796019999.0 "
                "WHERE run_id = ?",
                (LIVE_RUN,),
            )
        conn.execute("COMMIT")
    finally:
        conn.close()
