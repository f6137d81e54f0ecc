"""A Ctrl-C leaves the event log bare, whatever else failed meanwhile (design §3.13)."""

from __future__ import annotations

import pytest

from actors._eventlog._eventlog import open_event_log


def broken_close() -> None:
    raise RuntimeError("closing the ports failed")


async def interrupted_while_closing_fails() -> None:
    async with open_event_log() as log:
        # The log's own task fails too while it stops: two failures in one group.
        log._journal.hub.close = broken_close  # type: ignore[method-assign]
        raise KeyboardInterrupt


async def test_ctrl_c_leaves_open_event_log_as_a_bare_keyboard_interrupt() -> None:
    with pytest.raises(KeyboardInterrupt):
        await interrupted_while_closing_fails()
