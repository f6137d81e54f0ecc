"""The preview command-line client against a scripted server (design §7.2).

Each test plays one fixed sequence of server messages to :func:`collect` over a real
loopback websocket (the same port answers the image URLs over HTTP, as the preview
server does: each image's bytes name it), so the order the client sees is exact and the
tests need no helpers, no renderer and no timing: a client that stops too early closes the
connection before the script ends (``played`` says where), one that waits for
something that never comes runs into its ``timeout``, which only a failing test
reaches.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
import trio.testing
from trio_websocket import ConnectionClosed, WebSocketRequest, wrap_server_stream

from examples.preview.cli.client import Collection, _Wanted, collect, listing
from examples.web.http import HttpAnswer, ReplayStream, read_head
from protocol import messages
from protocol.codec import encode_message

if TYPE_CHECKING:
    from types import ModuleType

#: Seconds (trio clock) a client may take; only a failing test waits this long.
TIMEOUT = 10.0
BOTH = ["metadata", "thumbnail", "preview"]


@attrs.frozen
class Expect:
    """A script step: the client's next message has this ``type`` and these fields."""

    type: str
    fields: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Close:
    """A script step: the server closes the connection with this code and reason."""

    code: int
    reason: str


Step = Expect | Close | messages.Message


@attrs.define
class ScriptedServer:
    """A websocket peer that plays ``script``, then holds the connection open.

    A :class:`Close` step ends a connection; the steps after it are played on the
    client's next connection.
    """

    script: list[Step]
    played: int = 0
    """Steps done; less than ``len(script)`` if the client closed early."""
    connections: int = 0
    """Websocket connections accepted."""
    requests: list[dict[str, Any]] = attrs.field(factory=list)
    fetched: list[str] = attrs.field(factory=list)
    """The image paths the client fetched over HTTP."""

    async def serve(self, stream: trio.SocketStream) -> None:
        """One connection: the websocket, or a ``GET`` of an image (its name as bytes)."""
        async with stream:
            head = await read_head(stream, max_head=16384)
            if head.websocket:
                async with trio.open_nursery() as nursery:
                    request = await wrap_server_stream(nursery, ReplayStream(stream, head.raw))
                    await self.handle(request)
                    nursery.cancel_scope.cancel()
            elif head.request is not None:
                path = urllib.parse.urlsplit(head.request.target).path
                self.fetched.append(path)
                run, kind = path.removesuffix(".png").rsplit("/", 2)[1:]
                query = urllib.parse.urlsplit(head.request.target).query
                body = f"{run}-{kind}-r{query.removeprefix('rev=')}".encode()
                await stream.send_all(
                    HttpAnswer(status=200, body=body, content_type="image/png").encode()
                )

    async def handle(self, request: WebSocketRequest) -> None:
        ws = await request.accept()
        self.connections += 1
        try:
            for step in self.script[self.played :]:
                if isinstance(step, Close):
                    self.played += 1
                    await ws.aclose(step.code, step.reason)
                    return
                if isinstance(step, Expect):
                    message = json.loads(await ws.get_message())
                    self.requests.append(message)
                    assert message["type"] == step.type, message
                    for name, value in step.fields.items():
                        assert message[name] == value, (name, message)
                else:
                    await ws.send_message(encode_message(step))
                self.played += 1
            while True:  # requests after the script are only recorded
                self.requests.append(json.loads(await ws.get_message()))
        except ConnectionClosed:
            return


async def play(
    nursery: trio.Nursery, tmp_path: Path, script: list[Step]
) -> tuple[Collection, ScriptedServer]:
    """Run :func:`collect` against ``script``; check that it settled and played it all."""
    server = ScriptedServer(script)
    listeners = await nursery.start(
        functools.partial(
            trio.serve_tcp, server.serve, 0, host="127.0.0.1", handler_nursery=nursery
        )
    )
    port = listeners[0].socket.getsockname()[1]
    seen = await collect(f"ws://127.0.0.1:{port}", tmp_path, timeout=TIMEOUT)
    assert seen.complete, seen.missing()
    assert seen.missing() == []
    assert server.played == len(script), "the client stopped before the script ended"
    return seen, server


def summary(run_id: int, *, rows: int, completed: bool = True, job: int | None = None,
            status: str | None = None) -> messages.RunSummary:  # fmt: skip
    return messages.RunSummary(
        run_id=run_id, name=f"run {run_id}", experiment="e", completed=completed,
        rows=rows, status=status, job_run_id=job,
    )  # fmt: skip


def run_list(*runs: messages.RunSummary) -> messages.RunList:
    return messages.RunList(request_id=None, runs=runs)


def queued(seq: int, job: int, run_id: int) -> messages.Event:
    data = {"operation": "preview", "arguments": {"run_id": run_id}}
    return messages.Event(seq=seq, kind="job_queued", run_id=job, data=data)


def finished(seq: int, job: int, verdict: str, **result: Any) -> messages.Event:
    data = {"verdict": verdict, "result": result}
    return messages.Event(seq=seq, kind="job_finished", run_id=job, data=data)


def events(*items: messages.Event) -> messages.Events:
    return messages.Events(request_id=None, events=items, cursor=max(e.seq for e in items))


def image(run_id: int, kind: str, revision: int) -> messages.ImageReady:
    """The notice of an image whose bytes name it (the client saves bytes, draws nothing)."""
    width, height = (160, 120) if kind == "thumbnail" else (640, 480)
    return messages.ImageReady(
        db="t-1", run_id=run_id, kind=kind, revision=revision,
        url=f"/db/t-1/runs/{run_id}/{kind}.png?rev={revision}", mime="image/png",
        width=width, height=height, bytes=len(f"{run_id}-{kind}-r{revision}"),
    )  # fmt: skip


def saved(tmp_path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir())}


def statuses(seen: Collection) -> dict[int, str]:
    return {int(line.split()[0]): line.split()[-1] for line in listing(seen)[1:]}


OPENING: list[Step] = [
    Expect("list_databases"),
    messages.DatabaseList(
        request_id="c1",
        databases=(messages.DatabaseInfo(db="t-1", name="t.db", state="ready"),),
        current="t-1",
    ),
    Expect("watch", {"cursor": 0}),
    Expect("list_runs"),
]


def caught_up(*items: messages.Event) -> list[Step]:
    """The backlog a connection pages through with ``watch`` (its requests ``c2`` and
    ``c4``): ``items``, then an empty page, after which the client subscribes."""
    cursor = max((event.seq for event in items), default=0)
    return [
        messages.Events(request_id="c2", events=items, cursor=cursor),
        Expect("watch", {"cursor": cursor}),
        messages.Events(request_id="c4", events=(), cursor=cursor),
        Expect("subscribe", {"cursor": cursor}),
    ]


async def test_an_empty_run_and_every_status_are_waited_for(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    # A run without rows still gets images, and each status comes with its finish: the
    # images of run 1 came first, and the client must not stop there.
    seen, _ = await play(nursery, tmp_path, [
        *OPENING,
        *caught_up(queued(1, 101, 1), queued(2, 102, 2)),
        run_list(summary(1, rows=5, job=101), summary(2, rows=0, job=102)),
        image(1, "thumbnail", 1), image(1, "preview", 1),
        finished(3, 101, "ok", status="ok", revision=1, published=BOTH),
        image(2, "thumbnail", 1), image(2, "preview", 1),
        finished(4, 102, "empty", status="empty", revision=1, published=BOTH),
    ])  # fmt: skip
    assert list(saved(tmp_path)) == [
        "run1-preview.png", "run1-thumbnail.png", "run2-preview.png", "run2-thumbnail.png",
    ]  # fmt: skip
    assert statuses(seen) == {1: "ok", 2: "empty"}


async def test_a_finish_ahead_of_its_images_waits_for_their_revision(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    # The event pump and the image pusher are separate tasks: the finish of revision 2
    # can come while the client holds revision 1.
    seen, _ = await play(nursery, tmp_path, [
        *OPENING,
        *caught_up(queued(1, 101, 1)),
        run_list(summary(1, rows=5, job=101)),
        image(1, "thumbnail", 1), image(1, "preview", 1),
        finished(2, 101, "ok", status="ok", revision=2, published=BOTH),
        image(1, "thumbnail", 2), image(1, "preview", 2),
    ])  # fmt: skip
    assert saved(tmp_path) == {
        "run1-preview.png": b"1-preview-r2",
        "run1-thumbnail.png": b"1-thumbnail-r2",
    }
    assert [image.revision for image in seen.images.values()] == [2, 2]


async def test_runs_that_will_send_nothing_more_are_not_waited_for(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    # Run 1's thumbnail failed (only its preview was published); run 2 was cancelled;
    # run 3 is being written (its newest live images do); run 4 is being written and has
    # no rows yet. Nothing else will come, and the client stops without its timeout.
    start = trio.current_time()
    seen, _ = await play(nursery, tmp_path, [
        *OPENING,
        *caught_up(
            queued(1, 101, 1), queued(2, 102, 2), queued(3, 103, 3), queued(4, 104, 4),
            finished(5, 101, "failed", status="ok", revision=1,
                     published=["metadata", "preview"], failed=["thumbnail"]),
            messages.Event(seq=6, kind="job_cancelled", run_id=102, data={"by": "t"}),
        ),
        run_list(
            summary(1, rows=5, job=101), summary(2, rows=5, job=102),
            summary(3, rows=5, completed=False, job=103, status="progressive"),
            summary(4, rows=0, completed=False, job=104, status="progressive"),
        ),
        image(1, "preview", 1),
        image(3, "thumbnail", 1), image(3, "preview", 1),
    ])  # fmt: skip
    assert trio.current_time() - start < TIMEOUT
    assert list(saved(tmp_path)) == ["run1-preview.png", "run3-preview.png", "run3-thumbnail.png"]
    assert statuses(seen) == {1: "ok", 3: "progressive"}
    assert seen.status(2) == "cancelled"


def reopening(cursor: int) -> list[Step]:
    """The requests of a connection again: the client resumes after ``cursor``."""
    return [
        Expect("list_databases"),
        OPENING[1],
        Expect("watch", {"cursor": cursor}),
        Expect("list_runs"),
    ]


async def test_a_client_dropped_for_falling_behind_reconnects_after_its_cursor(
    nursery: trio.Nursery, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The server drops the client (resync_required, then close 4000): it connects again,
    # subscribes after the last event it has, asks list_runs again, and counts an image
    # announced again at the same revision once (fetched once).
    seen, server = await play(nursery, tmp_path, [
        *OPENING,
        *caught_up(queued(1, 101, 1)),
        run_list(summary(1, rows=5, job=101)),
        image(1, "thumbnail", 1),
        messages.ResyncRequired(head=3, cursor=1),
        Close(4000, "resync required; cursor=1"),
        *reopening(1),
        *caught_up(queued(2, 102, 2), finished(3, 101, "ok", status="ok", revision=1,
                                           published=BOTH)),
        run_list(summary(1, rows=5, job=101), summary(2, rows=5, completed=False, job=102)),
        image(1, "thumbnail", 1), image(1, "preview", 1),
        image(2, "thumbnail", 1), image(2, "preview", 1),
    ])  # fmt: skip
    assert server.connections == 2
    assert [event.seq for event in seen.events] == [1, 2, 3]
    assert seen.jobs == {101: 1, 102: 2}
    assert statuses(seen)[1] == "ok"
    assert sorted(server.fetched) == sorted(
        f"/db/t-1/runs/{run}/{kind}.png" for run in (1, 2) for kind in ("thumbnail", "preview")
    )
    assert [r["type"] for r in server.requests] == [
        "list_databases", "watch", "list_runs", "watch", "subscribe",
        "list_databases", "watch", "list_runs", "watch", "subscribe",
    ]  # fmt: skip
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert "resync required; cursor=1" in lines[0]
    assert "reconnecting" in lines[0]
    assert "after event 1" in lines[0]


async def test_a_cursor_expired_after_a_drop_resumes_from_a_snapshot(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    # The log no longer holds the events after the cursor (design §6.15): the client
    # takes a snapshot and subscribes after its cursor. Run 1's finish was among the
    # lost events (its event-log run is not live in the snapshot): any revision of each
    # image settles it. Run 2 is still drawing and its finish comes.
    expired = messages.ErrorReply(
        request_id="c2", code="cursor_expired", message="below the window",
        retryable=False, details={"resync": "snapshot", "floor": 5},
    )  # fmt: skip
    live = messages.StatusReply(request_id=None, run_id=102, state="running")
    seen, server = await play(nursery, tmp_path, [
        *OPENING,
        *caught_up(queued(1, 101, 1), queued(2, 102, 2)),
        run_list(summary(1, rows=5, job=101), summary(2, rows=5, job=102)),
        Close(4000, "resync required; cursor=2"),
        *reopening(2),
        expired,
        Expect("snapshot"),
        messages.SnapshotReply(request_id="c4", cursor=9, revision=1, runs=(live,)),
        Expect("subscribe", {"cursor": 9}),
        events(finished(10, 102, "ok", status="ok", revision=2, published=BOTH)),
        run_list(summary(1, rows=5, job=101, status="ok"), summary(2, rows=5, job=102)),
        image(1, "thumbnail", 3), image(1, "preview", 3),
        image(2, "thumbnail", 2), image(2, "preview", 2),
    ])  # fmt: skip
    assert (seen.decided, seen.resumed, seen.cursor) == ({1}, 9, 10)
    assert [event.seq for event in seen.events] == [1, 2, 10]
    assert statuses(seen) == {1: "ok", 2: "ok"}
    assert seen.errors == []
    assert [r["type"] for r in server.requests][-2:] == ["snapshot", "subscribe"]


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"revision": 3, "published": ["preview"]}, [(1, "preview")]),
        ({"revision": True, "published": "thumbnail"}, [(1, "thumbnail"), (1, "preview")]),
        (["not", "an", "object"], [(1, "thumbnail"), (1, "preview")]),
    ],
)
def test_the_finish_result_names_the_images_to_wait_for(
    result: Any, expected: list[tuple[int, str]]
) -> None:
    seen = Collection(runs={1: summary(1, rows=5, job=101)})
    seen._note_event(queued(1, 101, 1))
    assert seen.missing() == [(1, "job_finished")]
    seen._note_event(
        messages.Event(seq=2, kind="job_finished", run_id=101,
                       data={"verdict": "ok", "result": result})
    )  # fmt: skip
    assert seen.missing() == expected


async def test_runs_and_images_of_another_database_are_skipped(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    # One event log reports every database's runs (design §7.5): run 1 of "other-2" has
    # the same run id as ours, and its finish must not settle ours.
    other = messages.Event(
        seq=2, kind="job_queued", run_id=201,
        data={"operation": "preview", "arguments": {"run_id": 1, "db": "other-2"}},
    )  # fmt: skip
    foreign = attrs.evolve(image(1, "preview", 9), db="other-2", url="/db/other-2/x.png")
    seen, server = await play(nursery, tmp_path, [
        *OPENING,
        *caught_up(queued(1, 101, 1), other, finished(3, 201, "ok", status="ok", revision=9,
                                                   published=BOTH)),
        run_list(summary(1, rows=5, job=101)),
        foreign,
        image(1, "thumbnail", 1), image(1, "preview", 1),
        finished(4, 101, "ok", status="ok", revision=1, published=BOTH),
    ])  # fmt: skip
    assert seen.db == "t-1"
    assert seen.jobs == {101: 1}
    assert saved(tmp_path)["run1-preview.png"] == b"1-preview-r1"
    assert server.fetched == ["/db/t-1/runs/1/thumbnail.png", "/db/t-1/runs/1/preview.png"]


def load_benchmark() -> ModuleType:
    """``benchmarks/preview.py`` as a module (the benchmarks are scripts, not a package)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "preview.py"
    spec = importlib.util.spec_from_file_location("preview_benchmark", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_benchmark_client_reconnects_when_dropped(nursery: trio.Nursery) -> None:
    # A loaded machine may not read for push_timeout: the benchmark's client connects
    # again, asks list_runs again, and its times still count from the first connection.
    server = ScriptedServer([
        Expect("list_runs"),
        image(1, "thumbnail", 1),
        messages.ResyncRequired(head=0, cursor=0),
        Close(4000, "resync required; cursor=0"),
        Expect("list_runs"),
        image(1, "thumbnail", 1), image(1, "preview", 1),
    ])  # fmt: skip
    listeners = await nursery.start(
        functools.partial(
            trio.serve_tcp, server.serve, 0, host="127.0.0.1", handler_nursery=nursery
        )
    )
    port = listeners[0].socket.getsockname()[1]
    figures = await load_benchmark().collect(f"ws://127.0.0.1:{port}", 1, TIMEOUT)
    assert (server.connections, figures["reconnects"]) == (2, 1)
    assert figures["found"] == {"thumbnail": {1}, "preview": {1}}
    assert 0 <= figures["first_thumbnail"] <= figures["previews"] < TIMEOUT


async def test_the_fetch_table_holds_the_newest_revision_and_no_image_twice_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The reader puts without waiting; an image being fetched is not handed out again
    # until its fetch is done (so an older revision never overwrites a newer file).
    wanted = _Wanted()
    for notice in (image(1, "thumbnail", 1), image(1, "thumbnail", 3),
                   image(1, "thumbnail", 2), image(2, "preview", 1)):  # fmt: skip
        wanted.put(notice)
    assert await wanted.get() == image(1, "thumbnail", 3)
    wanted.put(image(1, "thumbnail", 4))
    assert await wanted.get() == image(2, "preview", 1)
    start = trio.current_time()
    with trio.move_on_after(5) as waited:
        await wanted.get()  # only the busy thumbnail is held
    assert (waited.cancelled_caught, trio.current_time() - start) == (True, 5)
    async with trio.open_nursery() as nursery:
        got: list[messages.ImageReady] = []

        async def take() -> None:
            got.append(await wanted.get())

        nursery.start_soon(take)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        wanted.done((1, "thumbnail"))
    assert got == [image(1, "thumbnail", 4)]
