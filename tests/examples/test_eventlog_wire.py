"""The event log's promises as the websocket clients see them (design §6.14-§6.16, §7.4).

Waiters and their cancels, retry hints, the snapshot and the documented way back
(snapshot, then subscribe from its cursor) at full emission rate, and close codes with
resume cursors, each over real websockets to a front door on an in-process event log
(real clock, short timeouts, contributing §F.3).
"""

from __future__ import annotations

import json
import socket
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio
from frontdoor_support import (
    TIMEOUT,
    assert_no_children,
    client_frame,
    open_client,
    raw_handshake,
)
from trio_websocket import ConnectionClosed

from actors import EventLogActor, EventLogClient, EventLogConfig, OperationSpec
from actors.errors import LedgerUnavailable
from examples.web.frontdoor import FrontDoor, FrontDoorConfig, open_front_door
from protocol import messages

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from actors import RunStatus


async def _flood(run: RunStatus, report: Any) -> None:
    """Emit progress events as fast as the event log takes them, until cancelled."""
    step = 0
    while True:
        step += 1
        report(min(1.0, step / 1e9))
        await trio.lowlevel.checkpoint()


OPERATIONS = [
    OperationSpec(name="manual", fields={"tag"}),  # no runner: stays queued
    OperationSpec(name="flood"),
]


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


@asynccontextmanager
async def serving(
    config: FrontDoorConfig | None = None, **log_fields: Any
) -> AsyncIterator[tuple[FrontDoor, EventLogClient]]:
    actor = EventLogActor(
        EventLogConfig(**log_fields), operations=OPERATIONS, runners={"flood": _flood}
    )
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(actor.run)
        log = EventLogClient(ref, timeout=5.0)
        async with open_front_door(log, config or FrontDoorConfig()) as front:
            yield front, log
        await ref.stop(1.0)


# -- waiters (design §6.14) -------------------------------------------------------------


async def test_each_connection_detaches_only_its_own_waiter():
    async with (
        serving() as (front, _),
        open_client(front.port, prefix="a") as first,
        open_client(front.port, prefix="b") as second,
        open_client(front.port, prefix="c") as third,
    ):
        mine = await first.request("submit", request_id="sub-a", operation="manual")
        joined = await second.request("submit", request_id="sub-b", operation="manual")
        also = await third.request("submit", request_id="sub-c", operation="manual")
        run_id = mine["run_id"]
        assert (joined["run_id"], joined["coalesced"], also["run_id"]) == (run_id, True, run_id)
        status = await first.request("status", run_id=run_id)
        assert (status["state"], status["detail"]["waiters"]) == ("queued", 3)
        # The second connection leaves: only its own request is detached.
        left = await second.request("cancel", run_id=run_id)
        assert (left["state"], left["detail"]["cancelled_by"]) == ("cancelled", second_name(front))
        assert left["detail"]["request_id"] == "sub-b"
        status = await first.request("status", run_id=run_id)
        assert (status["state"], status["detail"]["waiters"]) == ("queued", 2)
        # A waiter named by its request id, from another connection: that one only.
        named = await first.request("cancel", run_id=run_id, waiter="sub-c")
        assert (named["state"], named["detail"]["request_id"]) == ("cancelled", "sub-c")
        seen_by_c = await third.request("status", run_id=run_id, waiter="sub-c")
        assert seen_by_c["state"] == "cancelled"
        assert (await third.request("status", run_id=run_id))["state"] == "queued"
        unknown = await third.request("status", run_id=run_id, waiter="nobody")
        assert (unknown["type"], unknown["code"]) == ("error", "invalid_command")
        # The last waiter leaves: the run is cancelled.
        last = await first.request("cancel", run_id=run_id)
        assert last["state"] == "cancelled"
        final = await third.request("status", run_id=run_id)
        # Counted when it was decided: the one that left last (design §6.14).
    assert (final["state"], final["detail"]["waiters"]) == ("cancelled", 1)


def second_name(front: FrontDoor) -> str:
    """The name (actor) of the front door's second connection."""
    return next(conn.name for conn in front.connections if conn.id == 2)


async def test_a_cancel_from_a_connection_that_submitted_nothing_cancels_the_run():
    async with (
        serving() as (front, _),
        open_client(front.port, prefix="a") as first,
        open_client(front.port, prefix="b") as second,
        open_client(front.port, prefix="o") as operator,
    ):
        run = await first.request("submit", operation="manual", arguments={"tag": "x"})
        await second.request("submit", operation="manual", arguments={"tag": "x"})
        cancelled = await operator.request("cancel", run_id=run["run_id"])
        assert cancelled["state"] == "cancelled"
        assert (await first.request("status", run_id=run["run_id"]))["state"] == "cancelled"


# -- retry hints (design §6.16) ---------------------------------------------------------


async def test_an_admission_full_receipt_says_when_to_retry():
    async with serving(max_inflight=1, retry_after_max=0.75) as (front, _):
        async with open_client(front.port) as c:
            assert (await c.request("submit", operation="manual", arguments={"tag": "1"}))[
                "admitted"
            ]
            refused = await c.request("submit", operation="manual", arguments={"tag": "2"})
        assert refused["type"] == "receipt"
        assert (refused["admitted"], refused["code"], refused["retryable"]) == (
            False, "admission_full", True,
        )  # fmt: skip
        # No run has left the pool yet: the longest hint.
        assert refused["retry_after"] == 0.75
        assert (refused["depth"], refused["bound"]) == (1, 1)


class _FullDisk:
    """An event-log client whose ledger cannot commit (design §6.13): a fake."""

    async def submit(self, *args: object, **kwargs: object) -> object:
        raise LedgerUnavailable(
            "the ledger cannot commit: database or disk is full",
            retry_after=0.4, cause="SQLITE_FULL: database or disk is full",
        )  # fmt: skip


async def test_ledger_unavailable_carries_retry_after_and_its_cause():
    async with (
        open_front_door(_FullDisk(), FrontDoorConfig()) as front,  # type: ignore[arg-type]
        open_client(front.port) as c,
    ):
        error = await c.request("submit", operation="manual")
    assert (error["type"], error["code"], error["retryable"]) == (
        "error", "ledger_unavailable", True,
    )  # fmt: skip
    assert error["retry_after"] == 0.4
    assert error["details"]["cause"] == "SQLITE_FULL: database or disk is full"


# -- snapshot and resync (design §6.15) -------------------------------------------------


async def test_snapshot_answers_every_live_run_and_its_cursor():
    async with serving(window=8) as (front, _), open_client(front.port) as c:
        first = await c.request("submit", operation="manual", arguments={"tag": "1"})
        second = await c.request("submit", operation="manual", arguments={"tag": "2"})
        await c.request("cancel", run_id=first["run_id"])
        taken = await c.request("snapshot")
        assert taken["type"] == "snapshot_reply"
        assert [run["run_id"] for run in taken["runs"]] == [second["run_id"]]
        assert taken["runs"][0]["state"] == "queued"
        assert taken["runs"][0]["detail"]["waiters"] == 1
        page = await c.request("watch", cursor=taken["cursor"])
        assert page["events"] == []  # nothing after the cursor: it is the head
        for tag in range(3, 9):  # push the first events out of the 8-event window
            await c.request("submit", operation="manual", arguments={"tag": str(tag)})
        expired = await c.request("subscribe", cursor=0)
        assert expired["code"] == "cursor_expired"
        assert expired["details"]["resync"] == "snapshot"  # the way back is named
        assert expired["details"]["floor"] > 1
        beyond = await c.request("watch", cursor=10_000)
        assert beyond["details"]["resync"] == "snapshot"


async def test_snapshot_then_subscribe_catches_up_at_full_emission_rate():
    # The documented client path, 20 times over, while a runner emits events as fast as
    # the event log takes them through a 4096-event window that turns over
    # meanwhile (design §6.15). Each time the client follows 300 events past its
    # snapshot and past the head it subscribed at, without a gap and without being
    # dropped.
    config = FrontDoorConfig(subscriber_bound=4096, send_queue=256)
    async with serving(config, window=4096) as (front, log), open_client(front.port) as c:
        start = await c.request("submit", operation="flood")
        started = trio.current_time()
        first = await c.request("snapshot")
        for attempt in range(20):
            taken = await c.request("snapshot")
            assert [run["run_id"] for run in taken["runs"]] == [start["run_id"]], attempt
            answer = await c.request("subscribe", cursor=taken["cursor"])
            assert answer["type"] == "events", answer  # never cursor_expired
            seqs = [event["seq"] for event in answer["events"]]
            head = (await log.statistics()).head
            target = max(head, taken["cursor"] + 300)
            while not seqs or seqs[-1] < target:
                message = await c.next_push()
                assert message["type"] == "event", message  # never dropped
                seqs.append(message["seq"])
            assert seqs == list(range(taken["cursor"] + 1, seqs[-1] + 1)), attempt  # no gap
            await c.request("unsubscribe")
            c.pushed.clear()
        stats = await log.statistics()
        rate = (stats.head - first["cursor"]) / (trio.current_time() - started)
        # The window turned over: a cursor from the start is long gone ...
        assert stats.floor > first["cursor"], (stats.floor, f"{rate:.0f} events/s")
        expired = await c.request("watch", cursor=first["cursor"])
        assert (expired["code"], expired["details"]["resync"]) == ("cursor_expired", "snapshot")
        await c.request("cancel", run_id=start["run_id"])


# -- close codes (design §7.4) ----------------------------------------------------------


async def test_at_shutdown_every_client_gets_1001_and_its_cursor():
    async with (
        serving() as (front, log),
        open_client(front.port, prefix="s") as subscribed,
        open_client(front.port, prefix="i") as idle,
    ):
        await subscribed.request("subscribe", cursor=0)
        await idle.request("submit", operation="manual", arguments={"tag": "1"})
        await idle.request("submit", operation="manual", arguments={"tag": "2"})
        events = await subscribed.events_until(2, {"job_queued"})
        head = (await log.statistics()).head
        await front.shutdown(grace=0.0)
        reasons = []
        for client in (subscribed, idle):
            with pytest.raises(ConnectionClosed) as closed:
                await client.read_until_closed()
            reasons.append((closed.value.reason.code, closed.value.reason.reason))
    assert reasons == [
        (1001, f"server shutting down; cursor={events[-1]['seq']}"),  # the last it got
        (1001, f"server shutting down; cursor={head}"),  # sent no event: the head
    ]


async def test_a_close_frame_from_the_client_is_honoured_while_a_send_to_it_is_stuck():
    # The client stops reading in the middle of a 2 MB message and sends a close frame.
    # trio-websocket sees it but cannot answer while the send holds the stream; the
    # server must let go within close_timeout, not after send_timeout (30 s).
    big = messages.RunDetailsReply(
        request_id=None, run_id=1, name="n", experiment="e", status="ok",
        metadata={"blob": "A" * 2_000_000},
    )  # fmt: skip

    async def visible(conn: Any, request: messages.Visible) -> None:
        await conn.push(big)

    close_timeout = 0.3
    config = FrontDoorConfig(close_timeout=close_timeout, send_timeout=30.0)
    async with open_front_door(_FullDisk(), config, handlers={"visible": visible}) as front:  # type: ignore[arg-type]
        sock = trio.socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        await sock.connect(("127.0.0.1", front.port))
        stream = trio.SocketStream(sock)
        try:
            received = (await raw_handshake(stream)).split(b"\r\n\r\n", 1)[1]
            await stream.send_all(client_frame('{"type":"visible","request_id":"v","run_ids":[1]}'))
            with trio.fail_after(TIMEOUT):  # the push has started: its first 64 KiB are here
                while len(received) < 65536:
                    received += await stream.receive_some(4096)
            await stream.send_all(client_frame((1000).to_bytes(2, "big") + b"bye", opcode=0x8))
            closed_at = trio.current_time()
            with trio.fail_after(TIMEOUT):  # the client reads no more; the server lets go
                while front.statistics().connections:  # noqa: ASYNC110 (server state)
                    await trio.sleep(0.01)
            took = trio.current_time() - closed_at
        finally:
            await stream.aclose()
    assert took < close_timeout + 1.0, took  # close_timeout plus a poll, not 30 s


def test_close_reasons_carry_a_cursor_that_reads_back() -> None:
    from examples.web.closing import MAX_REASON_BYTES, cursor_of, with_cursor

    assert with_cursor("server shutting down", 42) == "server shutting down; cursor=42"
    assert cursor_of("resync required; cursor=7") == 7
    assert cursor_of("keepalive ping timeout") is None
    assert cursor_of(None) is None
    long = with_cursor("é" * 200, 2**53 - 1)
    assert len(long.encode()) <= MAX_REASON_BYTES
    assert cursor_of(long) == 2**53 - 1
    assert json.dumps(long)  # still text (no half character)
