"""The bounded mailbox (design §1.1, §1.2; contributing §D.4, §D.7)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors import ActorStopped, MailboxFull, MailboxStatistics
from actors._core._mailbox import MAX_MAILBOX_CAPACITY, Mailbox


@pytest.mark.parametrize("capacity", [-1, True, 1.5, "3", MAX_MAILBOX_CAPACITY + 1])
def test_capacity_is_validated(capacity: object) -> None:
    with pytest.raises(ValueError, match=r"^mailbox_capacity must"):
        Mailbox(capacity, owner="x")  # type: ignore[arg-type]


def test_capacity_zero_is_a_rendezvous() -> None:
    box: Mailbox[int] = Mailbox(0, owner="x")
    with pytest.raises(MailboxFull):
        box.try_send(1)


def test_try_send_full_is_retryable() -> None:
    box: Mailbox[int] = Mailbox(2, owner="cache")
    box.try_send(1)
    box.try_send(2)
    with pytest.raises(MailboxFull) as info:
        box.try_send(3)
    assert info.value.code == "mailbox_full"
    assert info.value.retryable
    assert info.value.details == {"actor": "cache", "capacity": 2}
    assert box.receive_channel.receive_nowait() == 1
    box.try_send(3)  # space again


async def test_send_waits_for_space(autojump_clock: trio.testing.MockClock) -> None:
    box: Mailbox[str] = Mailbox(1, owner="x")
    await box.send("a")
    done_at: list[float] = []

    async def sender() -> None:
        await box.send("b")
        done_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        assert box.statistics().senders_waiting == 1
        await trio.sleep(3)
        assert done_at == []
        assert box.receive_channel.receive_nowait() == "a"
    assert done_at == [3.0]
    assert box.receive_channel.receive_nowait() == "b"


async def test_close_wakes_blocked_senders_and_keeps_queue() -> None:
    box: Mailbox[str] = Mailbox(1, owner="x")
    await box.send("queued")
    errors: list[BaseException] = []

    async def sender() -> None:
        try:
            await box.send("blocked")
        except ActorStopped as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        box.close()
        box.close()  # idempotent
    assert [e.code for e in errors] == ["actor_stopped"]
    assert box.closed
    assert await box.receive_channel.receive() == "queued"
    with pytest.raises(trio.EndOfChannel):
        await box.receive_channel.receive()


async def test_send_to_closed_mailbox_is_an_immediate_checkpoint() -> None:
    box: Mailbox[int] = Mailbox(4, owner="x")
    box.close()
    with trio.testing.assert_checkpoints(), pytest.raises(ActorStopped):
        await box.send(1)
    with pytest.raises(ActorStopped):
        box.try_send(1)


def test_close_all_returns_leftovers_and_closes_both_ends() -> None:
    box: Mailbox[int] = Mailbox(4, owner="x")
    for i in range(3):
        box.try_send(i)
    assert box.close_all() == [0, 1, 2]
    assert box.close_all() == []
    with pytest.raises(trio.ClosedResourceError):
        box.receive_channel.receive_nowait()


async def test_statistics_snapshot() -> None:
    box: Mailbox[int] = Mailbox(3, owner="x")
    assert box.statistics() == MailboxStatistics(
        capacity=3, queued=0, senders_waiting=0, receiver_waiting=False, closed=False
    )
    box.try_send(1)
    box.try_send(2)
    stats = box.statistics()
    assert (stats.queued, stats.closed) == (2, False)
    box.close()
    assert box.statistics().closed
    with pytest.raises(AttributeError):
        stats.queued = 5  # type: ignore[misc]  # frozen
    assert "capacity=3 closed" in repr(box)


async def test_receiver_waiting_flag() -> None:
    box: Mailbox[int] = Mailbox(1, owner="x")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(box.receive_channel.receive)
        await trio.testing.wait_all_tasks_blocked()
        assert box.statistics().receiver_waiting
        box.try_send(1)


def test_offer_never_raises() -> None:
    box: Mailbox[int] = Mailbox(1, owner="x")
    assert box.offer(1)
    assert not box.offer(2)  # full: no MailboxFull, just False
    assert box.statistics().queued == 1
    box.close()
    assert not box.offer(3)  # closed: no ActorStopped, just False
    assert box.close_all() == [1]
    assert not box.offer(4)


async def test_offer_hands_over_to_a_waiting_receiver_even_at_capacity_zero() -> None:
    box: Mailbox[str] = Mailbox(0, owner="x")
    assert not box.offer("nobody waits")
    got: list[str] = []

    async def receiver() -> None:
        got.append(await box.receive_channel.receive())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        await trio.testing.wait_all_tasks_blocked()
        assert box.offer("handed over")
    assert got == ["handed over"]
