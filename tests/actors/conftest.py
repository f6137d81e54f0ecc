"""Fixtures shared by the tests of helper processes."""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

import pytest
from process_support import pid_gone

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def strays() -> Iterator[list[int]]:
    """Pids a test created outside its helpers' reach; killed whatever happens."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if not pid_gone(pid):
            os.kill(pid, signal.SIGKILL)
