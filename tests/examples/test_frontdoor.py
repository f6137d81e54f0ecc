"""The websocket front door over a real event-log actor and real websockets (design §7.1).

In-process runners only (no helper process), on the real clock with short timeouts:
each test starts an :class:`~actors.EventLogActor` and a front door on port 0 in its own
nursery and talks to it with trio-websocket clients.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import socket
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing
from frontdoor_support import (
    TIMEOUT,
    Client,
    assert_no_children,
    client_frame,
    open_client,
    parse_frames,
    raw_handshake,
)
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    HandshakeError,
    wrap_client_stream,
)

from actors import EventLogActor, EventLogClient, EventLogConfig, OperationSpec
from examples.web.closing import cursor_of
from examples.web.connection import Connection
from examples.web.frontdoor import FrontDoor, FrontDoorConfig, open_front_door
from examples.web.signals import shutdown_on_signal
from protocol import messages

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from examples.web.connection import ConnectionStatistics


async def _echo(run, report):
    return run.arguments.get("value")


async def _slow(run, report):
    report(0.5, "half way")
    await trio.sleep(run.arguments["seconds"])
    return "slept"


async def _burst(run, report):
    n = run.arguments["n"]
    for i in range(n):
        report((i + 1) / n)
        if i % 4 == 3:
            # Paced by the readers, not by the clock: every task that can run (the fast
            # client's reader, the connections' senders) has run before the next four,
            # so a fast client keeps up on any machine and a stalled one cannot.
            await trio.testing.wait_all_tasks_blocked()
    return n


OPERATIONS = [
    OperationSpec(name="echo", fields={"value"}),
    OperationSpec(name="slow", fields={"seconds"}, required={"seconds"}),
    OperationSpec(name="burst", fields={"n"}, required={"n"}),
    OperationSpec(name="manual", fields={"tag"}),  # no runner: stays queued
]
RUNNERS = {"echo": _echo, "slow": _slow, "burst": _burst}


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


@asynccontextmanager
async def serving(
    config: FrontDoorConfig | None = None, *, ledger: str | None = None, **kwargs: Any
) -> AsyncIterator[FrontDoor]:
    actor = EventLogActor(
        EventLogConfig(ledger_path=ledger), operations=OPERATIONS, runners=RUNNERS
    )
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(actor.run)
        log = EventLogClient(ref, timeout=5.0)
        async with open_front_door(log, config or FrontDoorConfig(), **kwargs) as front:
            yield front
        await ref.stop(1.0)


@asynccontextmanager
async def client(front: FrontDoor, query: str = "", **kwargs: Any) -> AsyncIterator[Client]:
    async with open_client(front.port, f"/{query}", **kwargs) as c:
        yield c


async def test_submit_answers_a_receipt_and_subscribe_pushes_the_lifecycle():
    async with serving() as front, client(front) as c:
        backlog = await c.request("subscribe", cursor=0)
        assert backlog == {"type": "events", "request_id": "r1", "events": [], "cursor": 0}
        receipt = await c.request("submit", operation="echo", arguments={"value": [1, "a"]})
        assert receipt["type"] == "receipt"
        assert receipt["admitted"] is True
        assert receipt["run_id"] == 1
        assert receipt["event_cursor"] == 0
        assert receipt["coalesced"] is False
        events = await c.events_until(1, {"job_finished"})
        assert [e["kind"] for e in events] == [
            "job_queued",
            "job_started",
            "job_progress",
            "job_finished",
        ]
        assert [e["seq"] for e in events] == [1, 2, 3, 4]
        assert events[-1]["data"] == {"verdict": "ok", "result": [1, "a"]}
        # The same request id with the same content: the stored receipt (design §6.3).
        again = await c.request(
            "submit", request_id="r2", operation="echo", arguments={"value": [1, "a"]}
        )
        assert again == receipt
        conflict = await c.request(
            "submit", request_id="r2", operation="echo", arguments={"value": 2}
        )
        assert (conflict["type"], conflict["code"]) == ("error", "request_conflict")


async def test_watch_returns_events_after_a_cursor_and_cursor_expired_says_where():
    async with serving() as front, client(front) as c:
        receipt = await c.request("submit", operation="echo", arguments={})
        await c.wait_state(receipt["run_id"], "finished")
        page = await c.request("watch", cursor=1)
        assert page["type"] == "events"
        kinds = [e["kind"] for e in page["events"]]
        assert kinds == ["job_started", "job_progress", "job_finished"]
        assert page["cursor"] == 4
        assert (await c.request("watch", cursor=4))["events"] == []
        expired = await c.request("watch", cursor=99)
        assert expired["code"] == "cursor_expired"
        assert expired["retryable"] is False
        assert expired["details"]["resume_from"] == 4
        expired = await c.request("subscribe", cursor=99)
        assert expired["code"] == "cursor_expired"


async def test_cancel_returns_the_true_state_with_the_actor():
    async with serving() as front, client(front) as c:
        slow = await c.request("submit", operation="slow", arguments={"seconds": 30})
        await c.wait_state(slow["run_id"], "running")
        status = await c.request("status", run_id=slow["run_id"])
        assert status["progress"] == 0.5
        assert status["detail"]["operation"] == "slow"
        cancelled = await c.request("cancel", run_id=slow["run_id"])
        assert cancelled["type"] == "status_reply"
        assert cancelled["state"] == "cancelled"
        assert cancelled["detail"]["cancelled_by"].startswith("ws-1@127.0.0.1:")
        # Cancelling again, or cancelling a finished run: the true terminal state.
        assert (await c.request("cancel", run_id=slow["run_id"]))["state"] == "cancelled"
        echo = await c.request("submit", operation="echo", arguments={"value": 3})
        await c.wait_state(echo["run_id"], "finished")
        finished = await c.request("cancel", run_id=echo["run_id"])
        assert (finished["state"], finished["verdict"]) == ("finished", "ok")
        assert finished["detail"]["result"] == 3
        unknown = await c.request("status", run_id=77, request_id="u1")
        assert (unknown["code"], unknown["request_id"]) == ("unknown_run", "u1")


async def test_ack_and_unsubscribe_answer_ok_and_stop_the_pushes():
    async with serving() as front, client(front) as c:
        await c.request("subscribe")
        first = await c.request("submit", operation="echo", arguments={"value": 1})
        events = await c.events_until(first["run_id"], {"job_finished"})
        assert await c.request("ack", seq=events[-1]["seq"]) == {"type": "ok", "request_id": "r3"}
        assert (await c.request("unsubscribe"))["type"] == "ok"
        second = await c.request("submit", operation="echo", arguments={"value": 2})
        await c.wait_state(second["run_id"], "finished")
        assert c.pushed == []  # nothing pushed after unsubscribe
        assert front.connections[0].statistics().subscribed is False


@pytest.mark.parametrize(
    ("text", "code", "fields"),
    [
        ("{not json", "invalid_message", ["$"]),
        ("[1, 2]", "invalid_message", ["$"]),
        ('{"request_id": "x"}', "invalid_message", ["$.type"]),
        ('{"type": "launch", "request_id": "x"}', "unknown_type", ["$.type"]),
        ('{"type": "receipt", "request_id": "x"}', "unknown_type", ["$.type"]),
        ('{"type": "select", "request_id": "x", "run_id": 1}', "unknown_type", ["$.type"]),
        ('{"type": "status", "request_id": "x"}', "invalid_message", ["$.run_id"]),
        ('{"type": "status", "request_id": "x", "run_id": 1, "extra": 1}', "invalid_message",
         ["$.extra"]),
        ('{"type": "status", "request_id": "x", "run_id": "1"}', "invalid_message",
         ["$.run_id"]),
        ('{"type": "watch", "request_id": "x", "cursor": true}', "invalid_message",
         ["$.cursor"]),
        ('{"type": "submit", "request_id": "x", "operation": "nope", "arguments": {}}',
         "unsupported_operation", None),
        ('{"type": "submit", "request_id": "x", "operation": "echo", "arguments": {"v": 1}}',
         "invalid_command", ["v"]),
    ],
)  # fmt: skip
async def test_every_bad_message_gets_an_error_and_the_connection_stays_up(text, code, fields):
    async with serving() as front, client(front) as c:
        await c.send(text)
        error = await c.receive()
        assert error["type"] == "error"
        assert error["code"] == code
        assert isinstance(error["message"], str)
        assert error["message"]
        assert error["retryable"] is False
        if fields is not None:
            assert error["details"]["fields"] == fields
        # The id is echoed when the message had a readable one.
        assert error["request_id"] == ("x" if '"request_id"' in text else None)
        assert (await c.request("boot_report"))["type"] == "boot_report_reply"


async def test_an_oversized_message_is_refused_and_a_huge_frame_closes_only_that_client():
    config = FrontDoorConfig(max_message=2048, max_frame=8192)
    async with serving(config) as front:
        async with client(front) as c:
            await c.send({"type": "status", "request_id": "big", "run_id": 1, "x": "y" * 4096})
            error = await c.receive()
            assert (error["code"], error["request_id"]) == ("message_too_large", None)
            assert error["details"] == {"limit": 2048}
            assert (await c.request("status", run_id=1))["code"] == "unknown_run"
            await c.send("z" * 10_000)
            with pytest.raises(ConnectionClosed) as closed:
                await c.receive()
            assert closed.value.reason.code == 1009
        async with client(front) as again:
            assert (await again.request("boot_report"))["type"] == "boot_report_reply"


def test_a_non_loopback_bind_needs_a_token():
    with pytest.raises(ValueError, match="requires a token"):
        FrontDoorConfig(host="0.0.0.0")
    with pytest.raises(ValueError, match="token must be"):
        FrontDoorConfig(host="0.0.0.0", token="short")
    assert FrontDoorConfig(host="0.0.0.0", token="a-long-secret").token == "a-long-secret"
    assert FrontDoorConfig(host="::1").token is None


async def rejected_handshake(
    front: FrontDoor, resource: str, headers: list[tuple[bytes, bytes]] | None = None
) -> ConnectionRejected:
    """Attempt a handshake that must be refused; return the refusal.

    (trio-websocket's ``open_websocket_url`` leaks its socket when refused, which
    ``filterwarnings = error`` turns into a failure: here the test owns the stream.)
    """
    stream = await trio.open_tcp_stream("127.0.0.1", front.port)
    try:
        with pytest.RaisesGroup(ConnectionRejected, flatten_subgroups=True) as group:
            async with trio.open_nursery() as nursery:
                await wrap_client_stream(
                    nursery, stream, f"127.0.0.1:{front.port}", resource, extra_headers=headers
                )
    finally:
        await stream.aclose()
    return group.value.exceptions[0]


async def test_a_token_is_checked_on_every_handshake():
    token = "s3cret-token"
    async with serving(FrontDoorConfig(token=token)) as front:
        for resource, headers in [
            ("/", None),
            ("/?token=wrong-token", None),
            ("/", [(b"Authorization", b"Bearer nope")]),
        ]:
            rejected = await rejected_handshake(front, resource, headers)
            assert rejected.status_code == 403
            assert b"missing or wrong token" in rejected.body
        async with client(front, f"?token={token}") as c:
            assert (await c.request("boot_report"))["type"] == "boot_report_reply"
        bearer = [(b"Authorization", f"Bearer {token}".encode())]
        async with client(front, headers=bearer) as c:
            assert (await c.request("boot_report"))["type"] == "boot_report_reply"
        assert front.statistics().rejected == 3
        assert front.statistics().accepted == 2


async def test_a_stalled_client_is_dropped_with_its_cursor_while_a_fast_one_gets_every_event():
    config = FrontDoorConfig(send_queue=8, subscriber_bound=64, socket_send_buffer=4096)
    n = 600
    # The stalled client: a tiny receive buffer, and it stops reading after subscribing.
    stalled = {"receive_buffer": 4096, "message_queue_size": 1, "prefix": "s"}
    gone: list[ConnectionStatistics] = []
    async with serving(config) as front, client(front) as fast:
        front.on_disconnect(lambda conn: gone.append(conn.statistics()))
        async with open_client(front.port, **stalled) as slow:
            await slow.request("subscribe")
            await fast.request("subscribe")
            receipt = await fast.request("submit", operation="burst", arguments={"n": n})
            events = await fast.events_until(receipt["run_id"], {"job_finished"})
            # queued, started, a synthetic 0.0, n progress reports, finished: no gap
            # (and the stalled one's subscriber_left, if it was dropped by then).
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            assert len([e for e in events if e["kind"] != "subscriber_left"]) == n + 4
            assert fast.pushed == []
            # Now read the stalled client: contiguous events, the notice, the close.
            received = []
            while (notice := await slow.next_push())["type"] == "event":
                received.append(notice["seq"])
            with pytest.raises(ConnectionClosed) as closed:
                await slow.read_until_closed()
        assert notice["type"] == "resync_required"
        assert received == list(range(1, len(received) + 1))
        assert len(received) < n
        assert notice["cursor"] == received[-1]  # resume right after the last one it got
        assert notice["head"] > received[-1]
        assert slow.pushed == []  # nothing after the notice but the close
        reason = closed.value.reason
        assert (reason.code, reason.reason) == (4000, f"resync required; cursor={received[-1]}")
        assert cursor_of(reason.reason) == received[-1]
        with trio.fail_after(5):
            while not gone:  # noqa: ASYNC110 - the hook runs after the closing handshake
                await trio.sleep(0.01)
        (dropped,) = gone
        assert (dropped.resyncs, dropped.subscribed, dropped.cursor) == (1, False, received[-1])
        # The notice went ahead of what was still queued for it: those events never
        # came (none, if the writer's last batch had taken every queued event).
        assert dropped.pushed >= len(received)
        (kept,) = [conn.statistics() for conn in front.connections]
        assert (kept.resyncs, kept.subscribed) == (0, True)
        # It comes back and watches from its cursor: the next event, no gap.
        async with client(front) as again:
            page = await again.request("watch", cursor=received[-1])
            assert page["events"][0]["seq"] == received[-1] + 1
            assert (await again.request("subscribe", cursor=page["cursor"]))["type"] == "events"


async def test_extension_handlers_answer_push_and_see_disconnects():
    gone: list[str] = []

    async def select(conn, request: messages.Select) -> None:
        conn.data["selected"] = request.run_id

    async def list_runs(conn, request: messages.ListRuns) -> messages.Message:
        payload = messages.ImageReady(
            db="d-1", run_id=conn.data["selected"], kind="thumbnail", revision=0,
            url="/db/d-1/runs/7/thumbnail.png?rev=0", mime="image/png", width=1, height=1,
            bytes=8,
        )  # fmt: skip
        conn.after_reply(lambda: conn.push_nowait(payload))
        summary = messages.RunSummary(run_id=7, name="m", experiment="e", completed=True, rows=3)
        return messages.RunList(request_id=request.request_id, runs=(summary,))

    async def broken(conn, request: messages.Visible) -> None:
        raise RuntimeError("bug")

    handlers = {"select": select, "list_runs": list_runs, "visible": broken}
    async with serving(handlers=handlers) as front:
        front.on_disconnect(lambda conn: gone.append(conn.name))
        async with client(front) as c:
            assert await c.request("select", run_id=7) == {"type": "ok", "request_id": "r1"}
            run_list = await c.request("list_runs")
            assert run_list["runs"][0]["run_id"] == 7
            pushed = await c.next_push()
            assert (pushed["type"], pushed["run_id"], pushed["kind"]) == (
                "image_ready",
                7,
                "thumbnail",
            )
            error = await c.request("visible", run_ids=[1, 2])
            assert (error["code"], error["retryable"]) == ("internal_error", False)
            assert front.broadcast_nowait(messages.ResyncRequired(head=0)) == 1
            assert (await c.next_push())["type"] == "resync_required"
        with trio.fail_after(5):
            while not gone:  # noqa: ASYNC110 - the hook runs after the server's close handshake
                await trio.sleep(0.01)
        assert gone[0].startswith("ws-1@")
    with pytest.raises(ValueError, match="not a client request type"):
        FrontDoor(None, handlers={"image_ready": select})  # type: ignore[arg-type]


def _notice(run_id: int) -> messages.ImageReady:
    return messages.ImageReady(
        db="d-1", run_id=run_id, kind="thumbnail", revision=1,
        url=f"/db/d-1/runs/{run_id}/thumbnail.png?rev=1", mime="image/png", width=1,
        height=1, bytes=8,
    )  # fmt: skip


@pytest.mark.parametrize("way", ["push_nowait", "push_all"])
async def test_a_burst_of_pushes_arrives_in_order_in_fewer_writes_than_messages(way):
    n = 20

    async def list_runs(conn, request: messages.ListRuns) -> messages.Message:
        def burst() -> None:  # all queued at once: the writer finds them ready together
            for run_id in range(1, n + 1):
                assert conn.push_nowait(_notice(run_id))

        if way == "push_nowait":
            conn.after_reply(burst)
        else:  # ahead of the answer; more than the queue holds: the rest wait for room
            assert await conn.push_all([_notice(run_id) for run_id in range(1, n + 1)])
        return messages.RunList(request_id=request.request_id, runs=())

    config = FrontDoorConfig(send_queue=8 if way == "push_all" else 32)
    async with serving(config, handlers={"list_runs": list_runs}) as front, client(front) as c:
        assert (await c.request("list_runs"))["type"] == "run_list"
        pushed = [await c.next_push() for _ in range(n)]
        assert [p["run_id"] for p in pushed] == list(range(1, n + 1))  # order kept
        (conn,) = front.connections
        stats = conn.statistics()
        assert (stats.sent, stats.pushed) == (n + 1, n)
        # Each push is its own websocket message, but they shared a few writes.
        assert stats.writes <= (3 if way == "push_nowait" else n // 2)


async def test_shutdown_refuses_new_work_waits_for_runs_then_closes_with_1001():
    async with serving() as front, client(front) as c:
        await c.request("subscribe")
        run = await c.request("submit", operation="slow", arguments={"seconds": 0.3})
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(front.shutdown, grace=5.0))
            await trio.sleep(0.05)
            refused = await c.request("submit", operation="echo", arguments={})
            assert (refused["code"], refused["retryable"]) == ("server_shutting_down", True)
            assert (await c.request("status", run_id=run["run_id"]))["state"] == "running"
            with pytest.raises(ConnectionClosed) as closed:
                await c.read_until_closed()
        # It waited for the run to finish before closing, and says where to resume.
        events = [m for m in c.pushed if m["type"] == "event"]
        assert events[-1]["kind"] == "job_finished"
        assert closed.value.reason.code == 1001
        assert closed.value.reason.reason == f"server shutting down; cursor={events[-1]['seq']}"
        with pytest.raises((OSError, HandshakeError)):
            async with client(front):
                pass


async def test_shutdown_sends_the_finished_runs_events_before_closing(monkeypatch):
    # On a loaded machine a finished run's events may still wait in a client's port or
    # send queue when the event log falls idle; slowed pushes make that certain here.
    push_event = Connection.push_event

    async def slow_push_event(self: Connection, event: Any) -> bool:
        await trio.sleep(0.1)
        return await push_event(self, event)

    monkeypatch.setattr(Connection, "push_event", slow_push_event)
    async with serving() as front, client(front) as c:
        await c.request("subscribe")
        run = await c.request("submit", operation="echo", arguments={})
        await c.wait_state(run["run_id"], "finished")  # answers are not slowed
        with trio.fail_after(10):
            await front.shutdown(grace=5.0)
        with pytest.raises(ConnectionClosed) as closed:
            await c.read_until_closed()
    events = [m for m in c.pushed if m["type"] == "event"]
    assert [e["run_id"] for e in events] == [run["run_id"]] * len(events)
    assert events[-1]["kind"] == "job_finished"
    assert closed.value.reason.code == 1001
    assert closed.value.reason.reason == f"server shutting down; cursor={events[-1]['seq']}"


async def test_boot_report_resume_and_discard_after_a_restart(tmp_path):
    ledger = str(tmp_path / "ledger.db")
    async with serving(ledger=ledger) as front, client(front) as c:
        for tag in ("a", "b", "c"):
            assert (await c.request("submit", operation="manual", arguments={"tag": tag}))[
                "admitted"
            ]
        assert (await c.request("boot_report"))["survivors"] == []
    async with serving(ledger=ledger) as front, client(front) as c:
        report = await c.request("boot_report")
        assert report == {
            "type": "boot_report_reply",
            "request_id": "r1",
            "survivors": [1, 2, 3],
            "interrupted": [],
            "quarantined": [],
        }
        assert (await c.request("status", run_id=1))["state"] == "held"
        resumed = await c.request("resume", run_id=1)
        assert (resumed["type"], resumed["admitted"], resumed["run_id"]) == ("receipt", True, 1)
        page = await c.request("watch", cursor=resumed["event_cursor"])
        assert page["events"][0]["kind"] == "job_queued"
        assert page["events"][0]["data"]["resumed"] is True
        discarded = await c.request("discard", run_id=2)
        assert (discarded["type"], discarded["state"]) == ("status_reply", "cancelled")
        assert discarded["detail"]["cancelled_by"].startswith("ws-1@")
        assert (await c.request("resume", run_id=2))["code"] == "already_decided"
        assert (await c.request("discard", run_id=1))["code"] == "invalid_command"
        assert (await c.request("boot_report"))["survivors"] == [3]


async def test_binary_messages_are_decoded_as_utf8_json():
    async with serving() as front, client(front) as c:
        await c.ws.send_message(json.dumps({"type": "boot_report", "request_id": "b"}).encode())
        assert (await c.receive())["type"] == "boot_report_reply"
        await c.ws.send_message(b"\xff\xfe")
        assert (await c.receive())["code"] == "invalid_message"


async def test_a_silent_or_surplus_client_is_dropped():
    config = FrontDoorConfig(handshake_timeout=0.2, max_connections=1)
    async with serving(config) as front:
        stream = await trio.open_tcp_stream("127.0.0.1", front.port)
        async with stream:
            start = trio.current_time()
            with trio.fail_after(5):
                assert await stream.receive_some() == b""  # dropped without a handshake
            # The server's clock starts at accept, which may come before ``start``.
            assert trio.current_time() - start >= 0.15
        async with client(front) as c:
            rejected = await rejected_handshake(front, "/")
            assert rejected.status_code == 503
            assert b"too many connections" in rejected.body
            assert (await c.request("boot_report"))["type"] == "boot_report_reply"


async def test_a_lone_surrogate_request_id_is_echoed_not_fatal():
    # JSON may carry "\\ud800"; Python decodes it to a str UTF-8 cannot encode. The
    # decoder refuses the message, but the error answer echoes the request id, which
    # used to crash the connection's writer (UnicodeEncodeError) and drop the client.
    async with serving() as front, client(front) as c:
        await c.send('{"type":"status","request_id":"a\\ud800","run_id":1}')
        answer = await c.receive()
        assert (answer["request_id"], answer["code"]) == ("a\ud800", "invalid_message")
        assert (await c.request("boot_report"))["type"] == "boot_report_reply"


async def test_concurrent_handshakes_never_exceed_max_connections():
    # The slot must be taken before accept() waits: 12 handshakes sent at once used to
    # all pass the check (none was counted yet) and be accepted.
    config = FrontDoorConfig(max_connections=3)
    outcomes: list[int | None] = []  # None: accepted; else the refusal's HTTP status
    all_in = trio.Event()
    release = trio.Event()

    def settled(outcome: int | None) -> None:
        outcomes.append(outcome)
        if len(outcomes) == 12:
            all_in.set()

    async def one() -> None:
        try:
            async with client(front) as c:
                settled(None)
                await release.wait()
                assert (await c.request("boot_report"))["type"] == "boot_report_reply"
        except* ConnectionRejected as group:
            settled(group.exceptions[0].status_code)  # type: ignore[attr-defined]

    async with serving(config) as front, trio.open_nursery() as nursery:
        for _ in range(12):
            nursery.start_soon(one)
        with trio.fail_after(5):
            await all_in.wait()
        assert sorted(outcomes, key=str) == [503] * 9 + [None] * 3
        assert front.statistics().connections == 3
        release.set()


async def test_a_second_signal_cuts_the_grace_short():
    with trio.open_signal_receiver(signal.SIGUSR1) as signals:
        async with serving() as front, client(front) as c:
            await c.request("submit", operation="slow", arguments={"seconds": 30})
            start = trio.current_time()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(functools.partial(shutdown_on_signal, front, signals, grace=20))
                os.kill(os.getpid(), signal.SIGUSR1)
                await trio.sleep(0.2)
                assert not front.admitting
                assert front.statistics().connections == 1  # still inside the grace
                os.kill(os.getpid(), signal.SIGUSR1)
            assert trio.current_time() - start < 5
            with pytest.raises(ConnectionClosed) as closed:
                await c.read_until_closed()
            assert closed.value.reason.code == 1001


# -- keepalive ----------------------------------------------------------------------------


def _server_frames(data: bytes) -> list[tuple[int, bytes]]:
    """``(opcode, payload)`` of unmasked server frames with short payloads (< 126)."""
    frames = []
    while data:
        opcode, size = data[0] & 0x0F, data[1] & 0x7F
        assert size < 126, data[:2]
        assert not data[1] & 0x80, data[:2]  # unmasked
        frames.append((opcode, data[2 : 2 + size]))
        data = data[2 + size :]
    return frames


async def test_a_client_that_answers_pings_stays_and_a_silent_one_is_closed():
    # The live client (in this process) must answer within ping_timeout: generous, so a
    # loaded machine cannot make it miss one.
    config = FrontDoorConfig(ping_interval=0.05, ping_timeout=1.0)
    async with serving(config) as front, client(front) as live:
        stream = await trio.open_tcp_stream("127.0.0.1", front.port)
        try:
            received = await raw_handshake(stream)
            with trio.fail_after(5):
                while front.statistics().connections != 2:  # noqa: ASYNC110 (server state)
                    await trio.sleep(0.01)
            # Never read again nor answer a ping: the server closes with 1011 after
            # ping_interval + ping_timeout (1.05 s), then drops the TCP connection.
            with trio.fail_after(5):
                while chunk := await stream.receive_some(4096):
                    received += chunk
        finally:
            await stream.aclose()
        frames = _server_frames(received.split(b"\r\n\r\n", 1)[1])
        assert [opcode for opcode, _ in frames] == [0x9, 0x8]  # one ping, then close
        close = frames[1][1]
        assert int.from_bytes(close[:2], "big") == 1011
        assert close[2:] == b"keepalive ping timeout"
        with trio.fail_after(5):
            while front.statistics().connections != 1:  # noqa: ASYNC110 (server state)
                await trio.sleep(0.01)
        # The live client kept answering the pings (trio-websocket pongs by itself).
        assert (await live.request("boot_report"))["type"] == "boot_report_reply"
        (conn,) = front.connections
        assert conn.statistics().pongs >= 3


def test_keepalive_settings_are_validated():
    for name in ("ping_interval", "ping_timeout", "send_timeout"):
        with pytest.raises(ValueError, match=name):
            FrontDoorConfig(**{name: 0})


# -- closing while a message is being sent -----------------------------------------------


async def _big_push_then_close(*, read_during_close: bool, close_timeout: float) -> bytes:
    """A raw client with a small receive buffer asks for a ~2 MB push; the server closes
    (1001) while that message is half sent; return every byte the client then gets."""
    big = messages.RunDetailsReply(
        request_id=None, run_id=1, name="n", experiment="e", status="ok",
        metadata={"blob": "A" * 2_000_000},
    )  # fmt: skip

    async def visible(conn, request: messages.Visible) -> None:
        await conn.push(big)

    config = FrontDoorConfig(close_timeout=close_timeout)
    async with serving(config, handlers={"visible": visible}) as front:
        sock = trio.socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        await sock.connect(("127.0.0.1", front.port))
        stream = trio.SocketStream(sock)
        try:
            received = (await raw_handshake(stream)).split(b"\r\n\r\n", 1)[1]
            request = '{"type":"visible","request_id":"v","run_ids":[1]}'
            await stream.send_all(client_frame(request))
            with trio.fail_after(5):  # the push has started: its first 64 KiB are here
                while len(received) < 65536:
                    received += await stream.receive_some(4096)
            front.close()  # every client: 1001, with the big message half sent
            if not read_during_close:
                await trio.sleep(close_timeout + 0.3)  # past it: the message is cut off
            answered = False
            with trio.fail_after(10):
                while chunk := await stream.receive_some(65536):
                    received += chunk
                    if not answered and any(op == 0x8 for op, _ in parse_frames(received)[0]):
                        # Answer the close as a client does: the server then ends the
                        # connection at once, not after its close_timeout.
                        await stream.send_all(client_frame(b"\x03\xe9", opcode=0x8))
                        answered = True
        finally:
            await stream.aclose()
    return received


async def test_a_close_waits_for_the_message_being_sent_then_closes_cleanly():
    # close_timeout generous: the client reads the rest at once, however loaded.
    received = await _big_push_then_close(read_during_close=True, close_timeout=5.0)
    frames, rest = parse_frames(received)
    assert rest == b""
    assert [opcode for opcode, _ in frames] == [0x1, 0x8]  # the whole push, then the close
    assert json.loads(frames[0][1])["metadata"]["blob"] == "A" * 2_000_000
    assert int.from_bytes(frames[1][1][:2], "big") == 1001


async def test_a_message_cut_off_at_close_is_never_followed_by_a_close_frame():
    received = await _big_push_then_close(read_during_close=False, close_timeout=0.2)
    frames, rest = parse_frames(received)
    assert frames == []  # the push never completed ...
    assert rest[0] == 0x81  # ... its frame is cut off, and nothing came after it:
    assert len(rest) < 2_000_000
    assert b"server shutting down" not in rest  # no close frame (its reason) inside it


# -- a client too slow for one message; subscribers leaving -------------------------------


async def _raw_subscriber(front: FrontDoor) -> tuple[trio.SocketStream, bytes]:
    """A hand-written client (tiny receive buffer) that subscribed; what it has read."""
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await sock.connect(("127.0.0.1", front.port))
    stream = trio.SocketStream(sock)
    received = (await raw_handshake(stream)).split(b"\r\n\r\n", 1)[1]
    await stream.send_all(client_frame('{"type":"subscribe","request_id":"s"}'))
    with trio.fail_after(5):
        while not parse_frames(received)[0]:
            received += await stream.receive_some(4096)
    return stream, received


async def _wait_dropped(front: FrontDoor, conn: Connection) -> None:
    """Until ``conn`` was dropped for falling behind, or is gone."""
    with trio.fail_after(TIMEOUT):
        while conn.statistics().resyncs == 0 and conn in front.connections:  # noqa: ASYNC110
            await trio.sleep(0.01)


async def _read_to_the_end(stream: trio.SocketStream, received: bytes) -> bytes:
    """Read until the server closes the TCP connection, answering its close frame."""
    answered = False
    with trio.fail_after(TIMEOUT):
        while chunk := await stream.receive_some(65536):
            received += chunk
            if not answered and any(op == 0x8 for op, _ in parse_frames(received)[0]):
                await stream.send_all(client_frame(b"\x03\xe8", opcode=0x8))
                answered = True
    return received


async def test_a_client_too_slow_for_one_message_gets_it_then_resync_and_its_cursor():
    # One event larger than every buffer between the server and a client that stopped
    # reading: its send passes send_timeout. The client is dropped for falling behind,
    # but the message is not cut off: once the client reads again it gets the whole
    # event, then resync_required with its cursor, then a close 4000 with the cursor.
    config = FrontDoorConfig(send_timeout=0.3, drop_timeout=TIMEOUT, push_timeout=TIMEOUT,
                             socket_send_buffer=4096)  # fmt: skip
    async with serving(config) as front:
        stream, received = await _raw_subscriber(front)
        try:
            (conn,) = front.connections
            seq = await front.eventlog.record("blob", {"blob": "A" * 2_000_000})
            await _wait_dropped(front, conn)
            received = await _read_to_the_end(stream, received)
        finally:
            await stream.aclose()
    frames, rest = parse_frames(received)
    assert rest == b""
    assert [opcode for opcode, _ in frames] == [0x1, 0x1, 0x1, 0x8]
    answer, event, notice = (json.loads(payload) for _, payload in frames[:3])
    assert answer["type"] == "events"
    assert (event["seq"], event["kind"], len(event["data"]["blob"])) == (seq, "blob", 2_000_000)
    assert notice == {"type": "resync_required", "head": seq, "cursor": seq}
    close = frames[3][1]
    assert int.from_bytes(close[:2], "big") == 4000
    assert close[2:].decode() == f"resync required; cursor={seq}"


async def test_subscribers_leaving_are_events_with_their_reason_and_counted(caplog):
    # A watcher follows the log while three subscribers leave: one closes, one breaks
    # the websocket protocol (a frame with a reserved opcode), one is dropped for
    # falling behind (it cannot take one message within send_timeout + drop_timeout).
    # The watcher, which reads, gets that message too: the bounds leave room for a
    # loaded machine (at 0.2 s each, a CPU hog at load 14 dropped the watcher as well).
    caplog.set_level(logging.INFO, logger="actors.eventlog")
    config = FrontDoorConfig(send_timeout=1.0, drop_timeout=1.0, socket_send_buffer=4096)
    async with serving(config) as front, client(front, prefix="w") as watcher:
        await watcher.request("subscribe")
        async with client(front) as leaving:
            await leaving.request("subscribe")
            closed = (front.connections[-1]).name
        rude, _ = await _raw_subscriber(front)
        try:
            broken = front.connections[-1].name
            await rude.send_all(client_frame(b"x", opcode=0x3))
            await _read_to_the_end(rude, b"")
        finally:
            await rude.aclose()
        slow, _ = await _raw_subscriber(front)
        try:
            conn = front.connections[-1]
            await front.eventlog.record("blob", {"blob": "A" * 600_000})
            await _wait_dropped(front, conn)
        finally:
            await slow.aclose()
        left = []
        with trio.fail_after(TIMEOUT):
            while len(left) < 3:
                message = await watcher.next_push()
                if message["kind"] == "subscriber_left":
                    left.append(message["data"])
        stats = await front.eventlog.statistics()
    assert [(item["subscriber"], item["reason"]) for item in left] == [
        (f"{closed}#1", "closed"),
        (f"{broken}#1", "protocol_error"),
        (f"{conn.name}#1", "slow"),
    ]
    assert stats.subscribers_left == {"closed": 1, "protocol_error": 1, "slow": 1}
    records = [r for r in caplog.records if getattr(r, "event", None) == "subscriber_left"]
    assert [(r.subscriber, r.reason) for r in records[:3]] == [  # type: ignore[attr-defined]
        (item["subscriber"], item["reason"]) for item in left
    ]
