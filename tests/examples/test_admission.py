"""The front door's slots: kept plain HTTP connections lend theirs (design §7.3).

:class:`~examples.web.admission.Admission` alone, without sockets: which lent slot a
websocket handshake takes, and that it never takes one that would not let it in.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from typing import TYPE_CHECKING

import trio

from examples.web.admission import Admission, Slot
from examples.web.frontdoor import FrontDoorConfig
from examples.web.guard import Guard

if TYPE_CHECKING:
    import pytest

HEADERS = {b"host": b"127.0.0.1:8000"}


def admission(**fields: int) -> Admission:
    config = FrontDoorConfig(**fields)  # type: ignore[arg-type]
    return Admission(config, Guard(config, [8000]))


def handshake(slots: Admission, address: str) -> str | None:
    """The refusal's reason for a good handshake from ``address``, or None: let in."""
    refusal = slots.refusal("/", HEADERS, address, admitting=True)
    return None if refusal is None else refusal.reason


def lend(stack: ExitStack, slots: Admission, address: str) -> tuple[Slot, trio.CancelScope]:
    """Hold a slot for ``address`` and lend it, as a waiting kept connection does."""
    slot = stack.enter_context(slots.slot(address))
    scope = trio.CancelScope()
    stack.enter_context(slots.lend(slot, scope, f"{address}:5000"))
    return slot, scope


async def test_a_full_server_takes_the_longest_lent_slot_of_any_address(
    caplog: pytest.LogCaptureFixture,
):
    slots = admission(max_connections=2)
    caplog.set_level(logging.INFO, logger="examples.frontdoor")
    with ExitStack() as stack:
        (older, older_scope), (newer, newer_scope) = (
            lend(stack, slots, "10.0.0.2"), lend(stack, slots, "10.0.0.3"),
        )  # fmt: skip
        assert handshake(slots, "10.0.0.1") is None
        assert (older.reclaimed, older.held, older_scope.cancel_called) == (True, False, True)
        assert (newer.reclaimed, newer_scope.cancel_called) == (False, False)
        assert (slots.held, slots.reclaimed) == (1, 1)  # the handshake's is not taken yet
        (record,) = [r for r in caplog.records if r.msg.startswith("closing the kept")]
        assert (record.event, record.peer, record.address) == (  # type: ignore[attr-defined]
            "http_slot_reclaimed", "10.0.0.2:5000", "10.0.0.2",
        )  # fmt: skip
    assert slots.held == 0  # the reclaimed slot is not given back twice


async def test_an_address_at_its_limit_takes_only_its_own_lent_slot():
    slots = admission(max_connections=4, max_per_address=1)
    with ExitStack() as stack:
        other, _ = lend(stack, slots, "10.0.0.2")
        stack.enter_context(slots.slot("10.0.0.1"))  # a websocket: never lent
        assert handshake(slots, "10.0.0.1") == "address_limit"
        assert (other.reclaimed, slots.held, slots.reclaimed) == (False, 2, 0)
        own, _ = lend(stack, slots, "10.0.0.4")
        assert handshake(slots, "10.0.0.4") is None
        assert (own.reclaimed, other.reclaimed) == (True, False)


async def test_a_full_server_with_the_address_at_its_limit_frees_the_address_s_own():
    # Taking another address's slot would make room on the server, not for this address:
    # the connection would be closed for nothing.
    slots = admission(max_connections=2, max_per_address=1)
    with ExitStack() as stack:
        other, _ = lend(stack, slots, "10.0.0.2")
        stack.enter_context(slots.slot("10.0.0.1"))
        assert handshake(slots, "10.0.0.1") == "full"
        assert other.reclaimed is False
    with ExitStack() as stack:
        other, _ = lend(stack, slots, "10.0.0.2")
        own, _ = lend(stack, slots, "10.0.0.1")
        assert handshake(slots, "10.0.0.1") is None
        assert (own.reclaimed, other.reclaimed) == (True, False)


async def test_a_slot_is_lent_only_inside_the_block():
    slots = admission(max_connections=1)
    with slots.slot("10.0.0.2") as slot:
        with slots.lend(slot, trio.CancelScope(), "10.0.0.2:5000"):
            pass
        assert handshake(slots, "10.0.0.1") == "full"  # answering: not lent
        assert slot.held
    assert handshake(slots, "10.0.0.1") is None
