"""A client that subscribes from far behind catches up page by page (design §7.4, §6.9).

A real event-log actor and a real front door in-process, real websockets, real clock
with short timeouts (contributing §F.3), and tiny bounds (``watch_limit`` 4,
``subscriber_bound`` 2) so that a backlog of tens of events is many pages and many
times the port's bound. The event-log client is the real one, with hooks that run just
before a ``watch`` or the port's ``subscribe``: that is how a test appends events at
exactly the moment between the last page and the live port, moves the log's retention
past the cursor while paging, or holds a page until the client unsubscribes.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio
from frontdoor_support import TIMEOUT, Client, assert_no_children, open_client
from trio_websocket import ConnectionClosed

from actors import EventLogActor, EventLogClient, EventLogConfig, OperationSpec
from examples.web.closing import cursor_of
from examples.web.frontdoor import FrontDoor, FrontDoorConfig, open_front_door

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from actors import Port, WatchResult

LIMIT = 4
BOUND = 2
CONFIG = FrontDoorConfig(watch_limit=LIMIT, subscriber_bound=BOUND)


async def _echo(run, report):
    return run.arguments.get("value")


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


class HookedLog(EventLogClient):
    """The real event-log client; ``before_watch(n)`` runs before the n-th ``watch``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.watches = 0
        self.before_watch: Callable[[int], Awaitable[None]] | None = None
        self.before_subscribe: Callable[[], Awaitable[None]] | None = None

    async def watch(self, cursor: int, *, limit: int | None = None) -> WatchResult:
        self.watches += 1
        if self.before_watch is not None:
            await self.before_watch(self.watches)
        return await super().watch(cursor, limit=limit)

    async def subscribe(self, name: str | None = None, **options: Any) -> Port:
        if self.before_subscribe is not None:
            await self.before_subscribe()
        return await super().subscribe(name, **options)

    async def notes(self, n: int) -> int:
        """Append ``n`` events; return the last one's seq."""
        seq = 0
        for i in range(n):
            seq = await self.record("note", {"i": i})
        return seq


@asynccontextmanager
async def serving(
    config: FrontDoorConfig = CONFIG, *, window: int = 4096
) -> AsyncIterator[tuple[FrontDoor, HookedLog]]:
    actor = EventLogActor(
        EventLogConfig(window=window),
        operations=[OperationSpec(name="echo", fields={"value"})],
        runners={"echo": _echo},
    )
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(actor.run)
        log = HookedLog(ref, timeout=5.0)
        async with open_front_door(log, config) as front:
            yield front, log
        await ref.stop(1.0)


async def pushed_seqs(c: Client, n: int) -> list[int]:
    """The seqs of the next ``n`` pushes, which must be events."""
    seqs = []
    for _ in range(n):
        event = await c.next_push()
        assert event["type"] == "event", event
        seqs.append(event["seq"])
    return seqs


async def test_a_client_far_behind_gets_every_event_once_in_order_then_the_live_ones():
    async with serving() as (front, log), open_client(front.port) as c:
        assert await log.notes(50) == 50  # 12 pages behind, 25 times the port's bound

        async def appended_before_the_port_opens() -> None:
            log.before_subscribe = None
            assert await log.notes(BOUND) == 50 + BOUND  # in the port's own backlog

        log.before_subscribe = appended_before_the_port_opens
        answer = await c.request("subscribe", cursor=0)
        assert [e["seq"] for e in answer["events"]] == [1, 2, 3, 4]
        assert answer["cursor"] == 4
        seqs = await pushed_seqs(c, 50 + BOUND - 4)
        for _ in range(3):  # live: each read before the next, as the port is tiny
            seqs += await pushed_seqs(c, 1) if await log.notes(1) else []
        assert seqs == list(range(5, 50 + BOUND + 3 + 1))  # no gap, no duplicate
        # The answer's page, 11 full pages and a short one: then the live port.
        assert log.watches == 1 + 11 + 1
        assert log.before_subscribe is None
        (conn,) = front.connections
        stats = conn.statistics()
        assert (stats.subscribed, stats.resyncs, stats.cursor) == (True, 0, seqs[-1])


async def test_a_client_that_stops_reading_during_the_catch_up_is_dropped_with_its_cursor():
    config = FrontDoorConfig(
        watch_limit=LIMIT, subscriber_bound=BOUND, send_queue=2, push_timeout=0.2,
        socket_send_buffer=4096,
    )  # fmt: skip
    n = 2000
    stalled = {"receive_buffer": 4096, "message_queue_size": 1}
    async with serving(config) as (front, log):
        assert await log.notes(n) == n
        async with open_client(front.port, **stalled) as slow:
            assert (await slow.request("subscribe", cursor=0))["cursor"] == 4
            with trio.fail_after(TIMEOUT):  # it reads nothing until it is dropped
                while front.connections[0].statistics().resyncs == 0:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            paged = log.watches
            received = []
            while (notice := await slow.next_push())["type"] == "event":
                received.append(notice["seq"])
            with pytest.raises(ConnectionClosed) as closed:
                await slow.read_until_closed()
        assert received == list(range(5, 5 + len(received)))
        assert (notice["type"], notice["cursor"], notice["head"]) == (
            "resync_required", received[-1], n
        )  # fmt: skip
        reason = closed.value.reason
        assert (reason.code, cursor_of(reason.reason)) == (4000, received[-1])
        # Paged at the client's pace: it stopped soon after the client stopped reading.
        assert len(received) < n - 4
        assert paged < n // LIMIT
        assert log.watches == paged  # and no page after the drop


class Hold:
    """A ``before_watch`` hook that holds the ``n``-th ``watch`` until it is cancelled."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.held, self.cancelled = trio.Event(), trio.Event()

    async def __call__(self, n: int) -> None:
        if n == self.n:
            self.held.set()
            try:
                await trio.sleep_forever()
            finally:
                self.cancelled.set()


@pytest.mark.parametrize("stop", ["unsubscribe", "subscribe"])
async def test_unsubscribe_or_a_new_subscribe_during_the_catch_up_stops_it(stop):
    hold = Hold(3)
    async with serving() as (front, log), open_client(front.port) as c:
        await log.notes(50)
        log.before_watch = hold
        await c.request("subscribe", cursor=0)
        assert await pushed_seqs(c, LIMIT) == [5, 6, 7, 8]  # the first pushed page
        with trio.fail_after(TIMEOUT):
            await hold.held.wait()
        answer = await c.request(stop)
        with trio.fail_after(TIMEOUT):
            await hold.cancelled.wait()  # promptly: the held page is abandoned
        assert await log.notes(1) == 51
        if stop == "unsubscribe":
            assert answer["type"] == "ok"
            page = await c.request("watch", cursor=50)
            assert [e["seq"] for e in page["events"]] == [51]
            assert c.pushed == []  # nothing after the unsubscribe
            assert front.connections[0].statistics().subscribed is False
        else:
            assert (answer["type"], answer["events"]) == ("events", [])
            assert await pushed_seqs(c, 1) == [51]  # the new subscription's events only
            assert front.connections[0].statistics().subscribed is True
        assert log.watches == 3 + (stop == "unsubscribe")  # no page after the stop


async def test_a_client_that_closes_during_the_catch_up_ends_it():
    hold = Hold(2)
    async with serving() as (front, log):
        await log.notes(50)
        log.before_watch = hold
        async with open_client(front.port) as c:
            await c.request("subscribe", cursor=0)
            with trio.fail_after(TIMEOUT):
                await hold.held.wait()
        with trio.fail_after(TIMEOUT):
            await hold.cancelled.wait()
            while front.connections:  # noqa: ASYNC110 - the server's side of the close
                await trio.sleep(0.01)
        assert log.watches == 2


async def test_a_cursor_that_expires_during_the_catch_up_ends_in_resync_then_snapshot(caplog):
    caplog.set_level(logging.INFO, logger="examples.frontdoor")
    async with serving(window=16) as (front, log):
        await log.notes(12)

        async def retention_passes_the_cursor(n: int) -> None:
            if n == 2:  # the first page of the catch-up, after the answer's 1..4
                await log.notes(40)

        log.before_watch = retention_passes_the_cursor
        async with open_client(front.port) as c:
            assert (await c.request("subscribe", cursor=0))["cursor"] == 4
            notice = await c.next_push()
            with pytest.raises(ConnectionClosed) as closed:
                await c.read_until_closed()
        assert (notice["type"], notice["cursor"]) == ("resync_required", 4)
        reason = closed.value.reason
        assert (reason.code, cursor_of(reason.reason)) == (4000, 4)
        assert c.pushed == []  # no event of the expired backlog
        (failed,) = [r for r in caplog.records if getattr(r, "event", None) == "catchup_failed"]
        assert (failed.cursor, failed.code) == (4, "cursor_expired")
        # Coming back from its cursor, it is told to take a snapshot (design §6.15).
        log.before_watch = None
        async with open_client(front.port) as again:
            error = await again.request("subscribe", cursor=4)
            assert (error["type"], error["code"]) == ("error", "cursor_expired")
            assert error["details"]["resync"] == "snapshot"
            taken = await again.request("snapshot")
            assert taken["cursor"] == 52
            answer = await again.request("subscribe", cursor=taken["cursor"])
            assert (answer["events"], answer["cursor"]) == ([], 52)
