"""Leak checks for tests that start real processes: children, zombies, gone pids, and
what a child has not read yet; and a child that hears Ctrl-C as a person's would.

Shared by ``tests/actors`` and ``tests/examples`` (``tests/conftest.py`` puts this folder
on ``sys.path``). Reads ``/proc``; never waits.
"""

from __future__ import annotations

import array
import fcntl
import os
import signal
import termios
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


def is_zygote(pid: int) -> bool:
    """True if ``pid`` is a helper pool's fork server (design §3.17): it alone keeps the
    tree tag's placeholder, which each helper it forks overwrites with its own tag."""
    from actors._helpers._process._containment import TAG_ENV

    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return f"{TAG_ENV}={'-' * 32}".encode() in environ.split(b"\0")


def pid_gone(pid: int) -> bool:
    """True if ``pid`` no longer runs: absent, or a zombie someone else must reap."""
    stat = _stat(pid)
    return stat is None or (stat[0] == "Z" and stat[1] != os.getpid())


def unread_pipe_bytes(pid: int) -> int:
    """Bytes waiting unread in the pipes that ``pid`` reads from (0 if it is gone).

    For a helper: a job frame it has not taken yet, e.g. because it is stopped. (A
    helper reads its frames from a private copy of its stdin, not from fd 0.)
    """
    total = 0
    try:
        entries = os.listdir(f"/proc/{pid}/fd")
    except (FileNotFoundError, ProcessLookupError):
        return 0
    for entry in entries:
        path = f"/proc/{pid}/fd/{entry}"
        try:
            if not os.readlink(path).startswith("pipe:"):
                continue
            info = Path(f"/proc/{pid}/fdinfo/{entry}").read_text()
            flags = int(info.split("flags:", 1)[1].split()[0], 8)
            if flags & os.O_ACCMODE != os.O_RDONLY:
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except (FileNotFoundError, ProcessLookupError):
            continue  # closed meanwhile, or the process is gone
        try:
            count = array.array("i", [0])
            fcntl.ioctl(fd, termios.FIONREAD, count)
            total += count[0]
        finally:
            os.close(fd)
    return total


def assert_no_children() -> None:
    """No child process and no zombie of this process remains."""
    assert children() == []
    try:
        reaped = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return
    raise AssertionError(f"an unreaped child remained: {reaped}")


def interruptible() -> None:
    """``preexec_fn`` of a child that must hear SIGINT (Ctrl-C) as a person's program does.

    A pytest-xdist worker started in the background by a non-interactive shell (as a CI
    job may be) inherits SIGINT ignored, and so would its children: an ignored SIGINT
    stays ignored across ``exec``, and Python then installs no ``KeyboardInterrupt``
    handler. In the child, before ``exec``, this puts SIGINT back to its default.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
