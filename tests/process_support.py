"""Leak checks for tests that start real processes: children, zombies, gone pids.

Shared by ``tests/actors`` and ``tests/examples`` (``tests/conftest.py`` puts this folder
on ``sys.path``). Reads ``/proc``; never waits.
"""

from __future__ import annotations

import os
from pathlib import Path


def _stat(pid: int) -> tuple[str, int] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])  # state, ppid


def children(parent: int | None = None) -> list[int]:
    """Pids (zombies included) whose parent is ``parent`` (default: this process)."""
    parent = os.getpid() if parent is None else parent
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] == parent:
                found.append(int(entry))
    return found


def pid_gone(pid: int) -> bool:
    """True if ``pid`` no longer runs: absent, or a zombie someone else must reap."""
    stat = _stat(pid)
    return stat is None or (stat[0] == "Z" and stat[1] != os.getpid())


def assert_no_children() -> None:
    """No child process and no zombie of this process remains."""
    assert children() == []
    try:
        reaped = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return
    raise AssertionError(f"an unreaped child remained: {reaped}")
