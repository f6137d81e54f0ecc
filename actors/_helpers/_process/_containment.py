"""Finding and killing everything a helper started, wherever it went (design §3.11).

A helper runs in its own session and process group, but its descendants can leave both
(``setsid()``, a double fork) or be orphaned when the helper dies. A
:class:`ProcessTree` keeps track of one helper's whole tree, by the strongest means the
platform offers:

``cgroup`` (Linux, where a cgroup v2 directory can be made under the parent's own
    cgroup): the helper is moved into a cgroup of its own right after the spawn (before
    its interpreter has run any code); every descendant is born there and cannot leave
    it without privileges. SIGKILL goes to all at once (``cgroup.kill``) and
    ``cgroup.procs`` says exactly what is left.
``tree`` (Linux without a writable cgroup): ``/proc`` is searched for the helper's
    descendants: processes started after it that are in its session or process group,
    that carry its tag in their environment (inherited, so ``setsid()`` does not lose
    it), or whose parent is one of those. The helper also makes itself a *child
    subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so an orphaned grandchild stays its
    child while it lives. After the helper's exit, a process that may be an orphan of
    the tree but cannot be read yet (inside its exec) is read again each sweep round;
    one never read is reported, not signalled. The parent process never becomes a
    subreaper: it would then inherit orphans of every process tree of its embedding
    program and would have to reap them, stealing exit statuses from code it does not
    own.
``group`` (other POSIX systems): the process group only. A descendant that left the
    group is not found, so it can be neither killed nor reported.

A helper counts as exited only when its leader is reaped **and** nothing of its tree is
left (:meth:`ProcessTree.sweep`); what cannot be killed within the kill timeout is
reported as *escaped* (an event and an error detail), never left silently.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import time
from pathlib import Path
from typing import Final

import trio
from trio.lowlevel import enable_ki_protection

from ..._child import is_subreaper

__all__ = ["CONTAINMENT_MODES", "TAG_ENV", "ProcessTree", "available_mode"]

#: Values of ``HelperSpec.containment``.
CONTAINMENT_MODES: Final = ("auto", "cgroup", "tree", "group")
#: Environment variable that marks every process of one helper's tree (``tree`` mode).
TAG_ENV: Final = "ACTORS_HELPER_TREE"

_LINUX: Final = sys.platform.startswith("linux")
_PROC: Final = Path("/proc")
_TICKS: Final = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: Pause between two looks at a process that cannot be waited on (no pidfd), seconds.
_POLL: Final = 0.005
#: Longest pause between two sweep rounds that wait for an unreadable process, seconds.
_POLL_MAX: Final = 0.1
_NONE: Final = ("", 0, 0, 0, -1)
_PREFIX: Final = "trio-actors."


def _kill(pid: int, sig: int) -> None:
    """``os.kill``; the one place signals leave (tests patch it to simulate EPERM)."""
    os.kill(pid, sig)


def _killpg(pgid: int, sig: int) -> None:
    os.killpg(pgid, sig)


def _pgid(pid: int) -> int | None:
    """The process group of ``pid``, or None if it is gone."""
    try:
        return os.getpgid(pid)
    except OSError:
        return None


class _CgroupRoot:
    """Where this process may make cgroups: a directory of its own cgroup v2, if any."""

    def __init__(self) -> None:
        self.checked = False
        self.path: Path | None = None
        self.users = 0

    def available(self) -> bool:
        if not self.checked:
            self.checked = True
            self.path = _find_cgroup_root()
        return self.path is not None

    def get(self) -> Path | None:
        if not self.available():
            return None
        assert self.path is not None
        if not self.path.exists():
            try:
                self.path.mkdir()
            except OSError:
                self.path = None
        return self.path

    def release(self) -> None:
        self.users -= 1
        if self.users == 0 and self.path is not None:
            with contextlib.suppress(OSError):
                self.path.rmdir()  # recreated on demand; left alone while not empty


def _find_cgroup_root() -> Path | None:
    if not _LINUX:
        return None
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        own = next(
            line[3:].strip()
            for line in Path("/proc/self/cgroup").read_text().splitlines()
            if line.startswith("0::")
        )
    except (OSError, StopIteration):
        return None
    for line in mounts:
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            mount = Path(left.split()[4])
            base = mount / own.lstrip("/")
            _remove_stale(base)
            root = base / f"{_PREFIX}{os.getpid()}"
            try:
                root.mkdir(exist_ok=True)
                probe = root / "probe"
                probe.mkdir()
                has_procs = (probe / "cgroup.procs").exists()
                probe.rmdir()
            except OSError:
                has_procs = False
            with contextlib.suppress(OSError):
                root.rmdir()  # made again when a helper needs it
            return root if has_procs else None
    return None


def _remove_stale(base: Path) -> None:
    """Remove the empty cgroups left by processes of ours that no longer exist (one
    killed before it could clean up); a cgroup that still holds a process stays."""
    try:
        entries = list(base.glob(f"{_PREFIX}*"))
    except OSError:
        return
    for root in entries:
        owner = root.name.removeprefix(_PREFIX)
        if not owner.isdigit() or Path(f"/proc/{owner}").exists():
            continue
        with contextlib.suppress(OSError):
            for helper in root.iterdir():
                if helper.is_dir():
                    helper.rmdir()
            root.rmdir()


_cgroups = _CgroupRoot()


def available_mode(requested: str) -> str:
    """The containment mode to use for ``requested`` (``auto`` picks the strongest).

    Raises:
        ValueError: ``requested`` is not one of :data:`CONTAINMENT_MODES`, or names a
            mode this platform does not have (``cgroup`` without a writable cgroup v2,
            ``tree`` off Linux).
    """
    if requested not in CONTAINMENT_MODES:
        raise ValueError(f"containment must be one of {CONTAINMENT_MODES}, got {requested!r}")
    if requested == "auto":
        if _cgroups.available():
            return "cgroup"
        return "tree" if _LINUX else "group"
    if requested == "cgroup" and not _cgroups.available():
        raise ValueError("containment 'cgroup': no writable cgroup v2 here")
    if requested == "tree" and not _LINUX:
        raise ValueError("containment 'tree' needs Linux (/proc)")
    return requested


def _boot_ticks() -> int:
    """Now, in the clock ticks since boot that ``/proc/PID/stat`` start times use."""
    clock = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
    return int(time.clock_gettime(clock) * _TICKS)


def _stat(pid: int) -> tuple[str, int, int, int, int] | None:
    """(state, ppid, pgrp, session, start ticks) of ``pid``, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read()
    except OSError:
        return None
    fields = text[text.rindex(b")") + 2 :].split()
    return (
        fields[0].decode(),
        int(fields[1]),
        int(fields[2]),
        int(fields[3]),
        int(fields[19]),
    )


def _read_environ(pid: int) -> bytes | None:
    """``/proc/PID/environ``, or None if it cannot be read (gone, or no permission).

    Empty (``b""``) while the process is inside an exec, before its new program has its
    stack; a started program whose environment is empty has a command line, one inside
    an exec has none yet.
    """
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            environ = file.read()
        if environ.strip(b"\0"):
            return environ
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return b"\0" if file.read(1) else b""  # no tag either way
    except OSError:
        return None


def _real_uid(pid: int) -> int | None:
    """The real user id of ``pid`` (kept across a set-user-id exec), None if gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as file:
            for line in file:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _orphan_reapers() -> set[int]:
    """Who may adopt an orphan of a dead helper: the nearest child subreaper above it, or
    init (pid 0 stands for a parent outside this pid namespace). Above the helper are
    this process, counted only if it is a subreaper (its own children are not orphans),
    and this process's ancestors, whose flag cannot be read from here."""
    me = os.getpid()
    reapers = {0, 1}
    if is_subreaper():
        reapers.add(me)
    stat = _stat(me)
    pid = stat[1] if stat is not None else 1
    while pid > 1 and pid not in reapers:
        reapers.add(pid)
        stat = _stat(pid)
        if stat is None:
            break
        pid = stat[1]
    return reapers


class ProcessTree:
    """One helper's process tree: signal it, list it, sweep it (design §3.11).

    Args:
        mode: ``cgroup``, ``tree`` or ``group`` (see :func:`available_mode`).
        tag: A value unique to this helper (its session id), for :data:`TAG_ENV`.
    """

    def __init__(self, mode: str, tag: str) -> None:
        self.mode = mode
        self.tag = tag
        self.leader: int | None = None
        #: The leader has been reaped: its pid may be reused (see :meth:`mark_reaped`).
        self.reaped = False
        self._reaped_at = 0
        self._known: dict[int, int] = {}  # pid -> start ticks, seen while the leader lived
        self._marker = f"\0{TAG_ENV}={tag}\0".encode()
        self._since = 0
        self._cgroup: Path | None = None
        #: Processes that may belong to the tree but could not be told apart at the last
        #: look (their environment was empty or unreadable; see :meth:`sweep`).
        self.unidentified: list[int] = []

    @property
    def kills_by_cgroup(self) -> bool:
        """SIGKILL goes through ``cgroup.kill``, which needs no permission to signal."""
        return self._cgroup is not None

    def environment(self) -> dict[str, str]:
        """Variables the helper must be started with (its tree's tag)."""
        return {TAG_ENV: self.tag}

    def prepare(self) -> None:
        """Make what the spawn needs (the cgroup); call right before spawning.

        Falls back to ``tree`` mode if the cgroup cannot be made.
        """
        self._since = _boot_ticks() - 1
        if self.mode != "cgroup":
            return
        root = _cgroups.get()
        if root is not None:
            path = root / f"helper.{self.tag[:16]}"
            try:
                path.mkdir()
            except OSError:
                pass
            else:
                _cgroups.users += 1
                self._cgroup = path
                return
        self.mode = "tree"

    @property
    def cgroup(self) -> Path | None:
        """The helper's own cgroup directory (``cgroup`` mode, once prepared), or None."""
        return self._cgroup

    def adopt_born_inside(self, pid: int) -> None:
        """Take in the helper ``pid`` that was created in its cgroup already (a fork of
        the zygote, ``CLONE_INTO_CGROUP``), which a move would only slow down (§3.17)."""
        self.leader = pid

    def adopt(self, pid: int) -> None:
        """Take the just-spawned helper ``pid`` in (into its cgroup, if any)."""
        self.leader = pid
        if self._cgroup is not None:
            # An OSError: e.g. it already exited, so there is nothing to contain.
            with contextlib.suppress(OSError):
                (self._cgroup / "cgroup.procs").write_text(str(pid))

    def mark_reaped(self) -> None:
        """The leader was just reaped: from now on its pid is not proof of membership."""
        self.reaped = True
        self._reaped_at = _boot_ticks()

    def members(self) -> list[int]:
        """Live processes of the tree (the leader too while it lives); never waits."""
        if self.leader is None:
            return []
        if self._cgroup is not None:
            try:
                text = (self._cgroup / "cgroup.procs").read_text()
            except OSError:
                return []
            return [int(line) for line in text.split()]
        if self.mode == "tree":
            return self._scan()
        return []

    def _scan(self) -> list[int]:
        leader = self.leader
        assert leader is not None
        me = os.getpid()
        table: dict[int, tuple[str, int, int, int, int]] = {}
        for entry in os.listdir(_PROC):
            if entry.isdigit():
                pid = int(entry)
                stat = _stat(pid)
                # Only processes started since the helper can belong to its tree.
                if stat is not None and pid != me and (pid == leader or stat[4] >= self._since):
                    table[pid] = stat
        # After the reap the leader's pid may be reused: a process (or group, or
        # session) with that id counts only if it started before the reap.
        before = self._reaped_at if self.reaped else None
        found = {
            pid
            for pid, (_, _, pgrp, session, start) in table.items()
            if (pid == leader or pgrp == leader or session == leader)
            and (before is None or start < before)
        }
        unread: list[int] = []
        for pid in table:
            if pid not in found:
                environ = _read_environ(pid)
                if not environ:
                    unread.append(pid)  # inside an exec, say: no environment yet
                elif self._marker in b"\0" + environ:
                    found.add(pid)
        if self.reaped:
            # Seen in the tree while the leader lived (the same process: same start).
            found |= {
                pid for pid, start in self._known.items() if table.get(pid, _NONE)[4] == start
            }
        grew = True
        while grew:  # and everything below what was found
            more = {pid for pid, stat in table.items() if pid not in found and stat[1] in found}
            found |= more
            grew = bool(more)
        alive = sorted(pid for pid in found if table[pid][0] != "Z")
        if not self.reaped:
            self._known.update((pid, table[pid][4]) for pid in alive if pid != leader)
        else:
            self.unidentified = self._suspects(table, unread, found)
        return alive

    def _suspects(
        self, table: dict[int, tuple[str, int, int, int, int]], unread: list[int], found: set[int]
    ) -> list[int]:
        """The unread processes that may be orphans of this tree: alive, started while
        the helper lived, adopted by the reaper its orphans go to, and (unless we are
        root, who can read any environment) of our real user id."""
        if not unread:
            return []
        reapers = _orphan_reapers()
        uid = os.getuid()
        return sorted(
            pid
            for pid in unread
            if pid not in found
            and table[pid][0] not in ("Z", "X")
            and table[pid][1] in reapers
            and table[pid][4] <= self._reaped_at
            and (uid == 0 or _real_uid(pid) == uid)
        )

    def remember(self) -> None:
        """Look at the tree now, while the leader lives (``tree`` mode; never waits).

        An orphan is the helper's child only while the helper lives (it is their
        subreaper); once the helper exits they go to init, and only this look still
        knows them. The ladder and the shutdown call it before they stop the helper.
        """
        if self.mode == "tree" and not self.reaped and self.leader is not None:
            self._scan()

    def signal(self, sig: int, members: list[int] | None = None) -> list[tuple[int, int]]:
        """Send ``sig`` once to every live process of the tree; never waits.

        ``members``: the tree just read by the caller (:meth:`members`), so it is not
        read twice. The process group gets it in one call, then each member outside
        the group; a member inside it is only checked (signal 0) for permission, since
        a group signal succeeds if it reached any one of them. So each process gets
        each rung's signal once (design §3.5): a program that takes a second SIGTERM
        for "abort now" keeps its graceful shutdown.

        Returns:
            ``(pid, errno)`` of each process the signal could not reach (e.g.
            ``EPERM``); a process that is already gone is not a failure.
        """
        failures: list[tuple[int, int]] = []
        leader = self.leader
        if leader is None:
            return failures
        if self._cgroup is not None and sig == signal.SIGKILL:
            try:
                (self._cgroup / "cgroup.kill").write_text("1")
            except OSError:  # a kernel before 5.14: one process at a time below
                pass
            else:
                return failures
        listed = self.members() if members is None else members
        grouped = False
        if not self.reaped:
            # The group first: one call that covers the helper's own children, even one
            # forked after the listing. Not once the leader is reaped: its pid (the
            # group's id) may then be reused.
            try:
                _killpg(leader, sig)
            except ProcessLookupError:
                pass
            except OSError as exc:
                if self.mode == "group":
                    failures.append((leader, exc.errno or errno.EPERM))
            else:
                grouped = True
        elif self.mode == "group":
            # Nothing better here: a member left in the group keeps its id in use.
            with contextlib.suppress(OSError):
                _killpg(leader, sig)
        for pid in listed:
            try:
                # In the group that was just signalled: only whether it could be.
                _kill(pid, 0 if grouped and _pgid(pid) == leader else sig)
            except ProcessLookupError:
                continue
            except OSError as exc:
                failures.append((pid, exc.errno or errno.EPERM))
        return failures

    @enable_ki_protection
    async def sweep(self, grace: float) -> tuple[list[int], list[tuple[int, int]]]:
        """The leader is reaped: kill what is left and wait up to ``grace`` seconds.

        A process that may be an orphan of the tree but whose environment cannot be read
        now (empty while it is inside an exec, unreadable once it changed credentials)
        is never skipped: the next round reads it again (rounds back off from 5 ms to
        100 ms, one ``/proc`` walk each). If it still cannot be told apart when the time
        runs out, it is not signalled (nothing proves it ours) but is counted among the
        survivors and listed in :attr:`unidentified`.

        Returns:
            ``(survivors, failures)``: pids still alive when the time ran out (escaped),
            and ``(pid, errno)`` of each SIGKILL that could not be delivered.
        """
        failures: dict[int, int] = {}
        pause = _POLL
        with trio.move_on_after(grace):
            while True:
                left = self.members()
                if left:
                    for pid, code in self.signal(signal.SIGKILL, left):
                        failures[pid] = code
                    for pid in left:
                        await _wait_gone(pid)
                elif not self.unidentified:
                    return [], sorted(failures.items())
                else:  # another process's exec has no event to wait on: look again
                    await trio.sleep(pause)
                    pause = min(pause * 2, _POLL_MAX)
        left = self.members()
        return sorted({*left, *self.unidentified}), sorted(failures.items())

    @property
    def lost(self) -> bool:
        """True if the helper's fate is unknown (a remote link died, design §3.16)."""
        return False

    def exit_status(self, returncode: int | None) -> int | None:
        """The helper's exit status, given its leader's (the same for a local tree)."""
        return returncode

    async def wait_gone(self, pid: int) -> None:
        """Wait until ``pid`` of the tree, which outlived the sweep, is gone."""
        await _wait_gone(pid)

    def close(self) -> None:
        """Remove the cgroup (once empty; a populated one is left in place)."""
        if self._cgroup is not None:
            try:
                self._cgroup.rmdir()
            except OSError:
                return
            self._cgroup = None
            _cgroups.release()


@enable_ki_protection
async def _wait_gone(pid: int) -> None:
    """Wait until ``pid`` has exited (it is not our child: no ``waitpid``)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        await trio.lowlevel.checkpoint()
        return
    except (AttributeError, OSError):  # no pidfd here: look again now and then
        while True:
            stat = _stat(pid)
            if stat is None or stat[0] == "Z":
                return
            await trio.sleep(_POLL)
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)
