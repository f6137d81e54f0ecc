"""The fork server (zygote) of a pool's helpers, parent side (design §3.17).

A :class:`Zygote` is a process the pool starts with the helper's entry module already
imported (stdlib and that module only, never trio); each helper incarnation is then a
fork of it instead of a fresh interpreter, a crash's restart too. The pool hands it the
helper's pipes over a Unix socket (``SCM_RIGHTS``); the zygote clones itself with
``CLONE_PARENT`` (see :mod:`actors._child._zygote`), so the forked helper is the
**pool's** child, in its own session: the pool signals, waits for and reaps it exactly
as a spawned one (:class:`ForkedProcess`), and its containment (design §3.11) is
prepared and entered before it runs any code of the entry.

A zygote that exits while the pool is open is reported (``zygote_exited``, an event and
a WARNING record) and started again at once (``zygote_started``, ``restarts``); helpers
it forked live on, untouched. One that cannot start or refuses (its entry module started
threads at import, no fork-like clone on this machine) is reported
(``zygote_unavailable``) and the pool spawns its helpers from then on. A fork that fails
fails that start (``HelperStartupFailed``, reason ``fork_failed``).
"""

from __future__ import annotations

import array
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio
from trio.lowlevel import FdStream, enable_ki_protection

from ._containment import TAG_ENV
from ._outcomes import exit_details
from ._spec import ZYGOTE_BOOTSTRAP
from ._stderr import StderrTail

if TYPE_CHECKING:
    from pathlib import Path

    from trio.abc import ReceiveStream, SendStream

    from .._events import PoolEvents
    from ._spec import HelperSpec, HelperTimeouts

__all__ = ["ChildProcess", "ForkFailed", "ForkedProcess", "Zygote", "start_method"]

#: Length of a helper's tree tag (its session id: 32 hex characters).
_TAG_LENGTH: Final = 32
_ANSWER: Final = 4096


def start_method(spec: HelperSpec) -> str:
    """``zygote`` or ``spawn``: how ``spec``'s helpers start here (design §3.17).

    A machine whose ``clone`` the zygote does not know makes it refuse at its start:
    the pool then spawns (``zygote_unavailable``).
    """
    if (
        spec.start_method == "spawn"
        or spec.entry is None
        or spec.host is not None
        or not sys.platform.startswith("linux")
        or not hasattr(os, "pidfd_open")
        or not hasattr(socket, "send_fds")
    ):
        return "spawn"
    return "zygote"


class ChildProcess(Protocol):
    """What the pool reads of a helper's leader process: a ``trio.Process`` (spawned)
    or a :class:`ForkedProcess`."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def stdin(self) -> SendStream | None: ...

    @property
    def stdout(self) -> ReceiveStream | None: ...

    @property
    def stderr(self) -> ReceiveStream | None: ...

    async def wait(self) -> int: ...


class ForkFailed(Exception):
    """The zygote could not fork a helper (internal: the start fails, ``fork_failed``)."""


class ForkedProcess:
    """A helper the zygote forked: the pool's own child, waited for through a pidfd.

    Args:
        pid: Its process id (a child of this process: taken until reaped here).
        stdin: The pool's end of its stdin.
        stdout: The pool's end of its stdout.
        stderr: The pool's end of its stderr.
        go: The pool's end of its *go* pipe (see :meth:`go`).
    """

    def __init__(
        self, pid: int, stdin: FdStream, stdout: FdStream, stderr: FdStream, go: int
    ) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        #: It was created inside its cgroup (``CLONE_INTO_CGROUP``): no move needed.
        self.born_inside = False
        self._go: int | None = go
        self._pidfd = os.pidfd_open(pid)
        self._wait_lock = trio.Lock()

    def go(self) -> None:
        """Let it run the entry: call once it is in its containment (design §3.11)."""
        if self._go is not None:
            with contextlib.suppress(OSError):  # it is gone already: nothing to let go
                os.write(self._go, b"g")
            os.close(self._go)
            self._go = None

    def send_signal(self, sig: int) -> None:
        """Send it ``sig``, as ``trio.Process.send_signal`` does: nothing once it is
        reaped (until then its pid cannot be reused: it is this process's child)."""
        if self.returncode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        """Send it SIGTERM."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """Send it SIGKILL."""
        self.send_signal(signal.SIGKILL)

    @enable_ki_protection
    async def wait(self) -> int:
        """Wait until it exits, reap it, and return its exit status (negative: the
        signal that killed it), as ``trio.Process.wait`` does. A checkpoint; several
        tasks may wait, and a cancelled wait leaves it to the next one."""
        async with self._wait_lock:
            if self.returncode is None:
                await trio.lowlevel.wait_readable(self._pidfd)
                # Readable: it has exited, so this does not block.
                _, status = os.waitpid(self.pid, 0)  # noqa: ASYNC222
                self.returncode = os.waitstatus_to_exitcode(status)
                os.close(self._pidfd)
                if self._go is not None:
                    os.close(self._go)
                    self._go = None
        return self.returncode


class Zygote:
    """A pool's fork server (see the module docstring).

    Args:
        spec: What the helpers run (an ``entry`` helper on this host).
        timeouts: ``startup`` bounds the zygote's own start and each fork request;
            ``kill`` its exit at the close (seconds, trio clock).
        events: Where its events go (the pool's).
        nursery: The pool's nursery: the zygote's watcher and stderr reader run there.
    """

    def __init__(
        self,
        spec: HelperSpec,
        timeouts: HelperTimeouts,
        events: PoolEvents,
        nursery: trio.Nursery,
    ) -> None:
        self._spec = spec
        self._timeouts = timeouts
        self._events = events
        self._nursery = nursery
        self._lock = trio.Lock()
        self._process: trio.Process | None = None
        self._control: trio.socket.SocketType | None = None
        self._closing = False
        self._stopped = trio.Event()
        self.unavailable: str | None = None
        """Why the pool spawns instead (the zygote could not start), or None."""
        self.starts = 0
        """Zygote processes started."""
        self.forks = 0
        """Helpers forked."""

    @property
    def pid(self) -> int | None:
        """The running zygote's process id, or None."""
        return None if self._process is None else self._process.pid

    def _emit(self, kind: str, text: str, *, level: int | None = None, **details: Any) -> None:
        self._events.emit(kind, f"pool {self._spec.name!r}: zygote: {text}", level=level, **details)

    @enable_ki_protection
    async def fork(
        self, environment: dict[str, str], cwd: str, cgroup: Path | None = None
    ) -> ForkedProcess | None:
        """Fork one helper; None if the zygote is unavailable (then spawn it).

        Args:
            environment: Variables the helper gets on top of the zygote's (its tree tag).
            cwd: Its working directory.
            cgroup: The directory of its own cgroup (``cgroup`` containment), which it
                is created in where the kernel can (``CLONE_INTO_CGROUP``), or None.

        Returns:
            The forked helper, waiting for :meth:`ForkedProcess.go`, or None.

        Raises:
            ForkFailed: the zygote answered that it could not fork, or did not answer
                within ``timeouts.startup`` seconds (then it is killed and restarted).
        """
        async with self._lock:
            retried = False
            while self.unavailable is None:
                if self._control is None:
                    await self._start()
                    continue
                try:
                    return await self._request(environment, cwd, cgroup)
                except (OSError, EOFError) as exc:
                    # Its exit is reported by the watcher; a fresh one takes the retry.
                    await self._wait_exit()
                    if retried:
                        raise ForkFailed(f"the zygote died during a fork request: {exc}") from None
                    retried = True
            return None

    async def _request(
        self, environment: dict[str, str], cwd: str, cgroup: Path | None
    ) -> ForkedProcess:
        control = self._control
        assert control is not None
        fields = [b"fork", os.fsencode(cwd)]
        fields += [os.fsencode(f"{name}={value}") for name, value in environment.items()]
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        go_r, go_w = os.pipe()
        theirs = [stdin_r, stdout_w, stderr_w, go_r]
        if cgroup is not None:
            with contextlib.suppress(OSError):  # gone: the pool moves it (adopt)
                theirs.append(os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY))
        ours = [stdin_w, stdout_r, stderr_r, go_w]
        answer = b""
        try:
            # Shielded, bounded: a request cut in two would leave a forked helper
            # nobody knows the pid of.
            with trio.CancelScope(shield=True), trio.move_on_after(self._timeouts.startup):
                await control.sendmsg(
                    [b"\0".join(fields)],
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", theirs))],
                )
                for fd in theirs:
                    os.close(fd)
                theirs = []
                answer = await control.recv(_ANSWER)
            if not answer and self._process is not None and self._process.returncode is None:
                # No answer in time: it hangs; kill it (the watcher reports and restarts).
                with contextlib.suppress(OSError):
                    os.kill(self._process.pid, signal.SIGKILL)
                raise ForkFailed(f"no answer within {self._timeouts.startup:g} s")
            if not answer:
                raise EOFError("end of input")
            kind, _, rest = answer.partition(b" ")
            if kind == b"forked":
                pid, _, inside = rest.partition(b" ")
                process = ForkedProcess(
                    int(pid), FdStream(stdin_w), FdStream(stdout_r), FdStream(stderr_r), go_w
                )
                process.born_inside = inside == b"1"
                ours = []
                self.forks += 1
                return process
            raise ForkFailed(rest.partition(b" ")[2].decode(errors="replace"))
        finally:
            for fd in (*theirs, *ours):
                os.close(fd)

    async def _start(self) -> None:
        """Start a zygote and wait for its ``ready`` (bounded by ``timeouts.startup``)."""
        spec = self._spec
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**os.environ, **(spec.env or {})}
        env[TAG_ENV] = "-" * _TAG_LENGTH  # each helper writes its tag over it
        try:
            process = await trio.lowlevel.open_process(
                spec.command(ZYGOTE_BOOTSTRAP),
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
                cwd=spec.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            self._give_up(f"could not start: {exc}")
            return
        finally:
            theirs.close()
        self.starts += 1
        control = trio.socket.from_stdlib_socket(ours)
        stderr = process.stderr
        assert isinstance(stderr, FdStream)
        tail = StderrTail(
            stderr, {"pool": self._events.name, "helper": "zygote", "pid": process.pid}
        )
        self._process = process
        stopped = self._stopped = trio.Event()
        self._nursery.start_soon(tail.run)
        self._nursery.start_soon(self._watch, process, control, tail, stopped)
        answer = b""
        with trio.move_on_after(self._timeouts.startup):
            try:
                answer = await control.recv(_ANSWER)
            except OSError:  # it is gone: as an end of input
                answer = b""
            except trio.Cancelled:  # the pool closes: this one is not wanted (its
                os.kill(process.pid, signal.SIGKILL)  # watcher reaps it)
                control.close()
                raise
        kind, _, rest = answer.partition(b" ")
        if kind == b"ready":
            self._control = control
            restarted = self.starts > 1
            self._emit(
                "zygote_started",
                f"started (pid {process.pid})"
                + (", replacing one that exited" if restarted else ""),
                level=logging.WARNING if restarted else None,
                zygote_pid=process.pid,
                restarts=self.starts - 1,
            )
            return
        with contextlib.suppress(OSError):
            os.kill(process.pid, signal.SIGKILL)
        control.close()
        await stopped.wait()
        why = (
            rest.decode(errors="replace")
            if kind == b"refused"
            else (
                f"no ready within {self._timeouts.startup:g} s"
                if not answer and process.returncode is None
                else f"exited before ready; stderr: {tail.tail()!r}"
            )
        )
        self._give_up(why)

    def _give_up(self, reason: str) -> None:
        self.unavailable = reason
        self._emit(
            "zygote_unavailable", f"unavailable, helpers are spawned: {reason}", reason=reason
        )

    async def _watch(
        self,
        process: trio.Process,
        control: trio.socket.SocketType,
        tail: StderrTail,
        stopped: trio.Event,
    ) -> None:
        """Wait for the zygote's exit; report it and start another if it was serving
        and the pool did not ask for it."""
        with trio.CancelScope(shield=True):
            await process.wait()
        # Until it is ready, the socket is _start's to close (it may still read the
        # zygote's last words from it).
        serving = self._control is control
        if serving:
            control.close()
            self._control = None
        self._process = None
        tail.drain_nowait()
        stopped.set()
        if not serving or self._closing:
            return
        details = exit_details(process.returncode)
        how = (
            f"killed by {details['signal']}"
            if details["signal"]
            else (f"exit code {process.returncode}")
        )
        self._emit(
            "zygote_exited",
            f"pid {process.pid} exited ({how}); starting another",
            zygote_pid=process.pid,
            **details,
        )
        with trio.CancelScope(shield=True), trio.move_on_after(self._timeouts.startup):
            async with self._lock:
                if self._control is None and not self._closing and self.unavailable is None:
                    await self._start()

    async def _wait_exit(self) -> None:
        process = self._process
        if process is not None:
            with contextlib.suppress(OSError):
                os.kill(process.pid, signal.SIGKILL)
            await self._stopped.wait()
        self._control = None

    @enable_ki_protection
    async def aclose(self) -> None:
        """Stop the zygote: end its input, wait up to ``timeouts.kill`` seconds, then
        SIGKILL it; returns once it is reaped. Shielded; forked helpers are not touched."""
        self._closing = True
        with trio.CancelScope(shield=True):
            process = self._process
            if self._control is not None:
                self._control.close()
                self._control = None
            if process is None:
                return
            with trio.move_on_after(self._timeouts.kill):
                await self._stopped.wait()
                return
            with contextlib.suppress(OSError):
                os.kill(process.pid, signal.SIGKILL)
            await self._stopped.wait()
