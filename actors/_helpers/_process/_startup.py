"""How a helper process starts: spawn, containment, startup frame, *ready* (design §3.3).

:class:`Startup` is the part of a :class:`~actors._helpers._process._process.HelperProcess` that
brings it up: it prepares the helper's containment (design §3.11), spawns the child in a
new session with pipes for its frames and its stderr, starts the reaper and the stderr
reader in the pool's nursery, sends the startup frame and waits up to
``timeouts.startup`` seconds for *ready*. Every way it can fail is a
``startup_failed`` event that says how (``reason``: ``exec_failed``,
``startup_timeout``, ``bad_ready``, ``on_startup_failed``, ``exited`` with the exit code
and the tail of stderr) and the child is killed.
"""

from __future__ import annotations

import logging
import os
import subprocess
from typing import TYPE_CHECKING, Any, Protocol

import trio
from trio.lowlevel import enable_ki_protection

from protocol.envelope import decode_fenced, encode_fields
from protocol.framing import DEFAULT_MAX_REQUEST

from ..._core import HelperEvent
from ...errors import HelperStartupFailed, ProtocolError
from ._pipe import HelperPipe, PipeGone
from ._remote import RemoteLink, RemotePipe
from ._stderr import StderrTail
from ._zygote import ForkedProcess, ForkFailed

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..._core import HelperState
    from ._containment import ProcessTree
    from ._ladder import Ladder
    from ._reaper import Reaper
    from ._spec import HelperSpec, HelperTimeouts
    from ._zygote import ChildProcess, Zygote

__all__ = ["StartingHelper", "Startup"]


class StartingHelper(Protocol):
    """What the startup reads of the helper it starts (its public face), and ``ready``,
    which it sets to the *ready* frame's payload."""

    ready: Any

    @property
    def spec(self) -> HelperSpec: ...

    @property
    def timeouts(self) -> HelperTimeouts: ...

    @property
    def label(self) -> str: ...

    @property
    def slot(self) -> int | None: ...

    @property
    def incarnation(self) -> int: ...

    @property
    def session(self) -> str: ...

    @property
    def exited(self) -> bool: ...


class Startup:
    """The starting part of one helper incarnation (see the module docstring).

    Args:
        helper: The incarnation it starts.
        pool: The pool's name (for its stderr records).
        replaces: True if it replaces an earlier incarnation of its slot.
        tree: Its process tree (its containment), prepared here.
        reaper: Its reaper, started here in the nursery (told if it never started).
        ladder: Its ladder, which kills it if the start fails.
        on_spawn: ``on_spawn(process, pipe, stderr)``: hands the spawned child over.
        advance: Applies an event to its lifecycle (design §3).
        emit: Reports a step: ``emit(kind, text, *, level=None, **details)``, an event
            and a log record (design §3.10).
        zygote: The pool's fork server, or None: the helper is forked from it if it
            is available, else spawned (design §3.17).
    """

    def __init__(
        self,
        helper: StartingHelper,
        *,
        pool: str,
        replaces: bool,
        tree: ProcessTree,
        reaper: Reaper,
        ladder: Ladder,
        on_spawn: Callable[[ChildProcess, HelperPipe, StderrTail], None],
        advance: Callable[[HelperEvent], HelperState],
        emit: Callable[..., None],
        zygote: Zygote | None = None,
    ) -> None:
        self._helper = helper
        self._zygote = zygote
        self._pool = pool
        self._replaces = replaces
        self._startup = helper.timeouts.startup
        self._tree = tree
        self._reaper = reaper
        self._ladder = ladder
        self._on_spawn = on_spawn
        self._advance = advance
        self._emit = emit
        self._pipe: HelperPipe | None = None
        self._tail: StderrTail | None = None

    @enable_ki_protection
    async def run(self, nursery: trio.Nursery) -> None:
        """Spawn (or fork) the child and wait for *ready*; see :meth:`HelperProcess.start`."""
        helper = self._helper
        try:
            frame = encode_fields(
                kind="startup",
                session=helper.session,
                generation=0,
                operation="startup",
                max_size=DEFAULT_MAX_REQUEST,
                payload={
                    "options": helper.spec.options,
                    "fault": helper.spec.fault,
                    "max_request": helper.spec.max_request,
                    "max_reply": helper.spec.max_reply,
                    "subreaper": self._tree.mode == "tree",
                },
            )
        except ProtocolError as exc:
            self._reaper.never_started()
            raise self._failed(
                f"startup options do not fit a frame: {exc.message}", reason=exc.code
            ) from None
        tree = self._tree
        tree.prepare()
        # A helper on another host (design §3.16): the local process is ssh, its env
        # and cwd apply at the far end (in the warden's start frame).
        remote = tree if isinstance(tree, RemoteLink) else None
        if remote is None:
            argv = helper.spec.command()
            env: dict[str, str] | None = {
                **os.environ,
                **(helper.spec.env or {}),
                **tree.environment(),
            }
            cwd = helper.spec.cwd
        else:
            argv, env, cwd = remote.command(), None, None
        process: ChildProcess | None = None
        zygote = self._zygote if remote is None else None
        if zygote is not None:
            try:
                # design §3.17: a fork of the pool's zygote, or None (it is unavailable).
                process = await zygote.fork(tree.environment(), cwd or os.getcwd(), tree.cgroup)
            except ForkFailed as exc:
                tree.close()
                self._reaper.never_started()
                raise self._failed(f"could not fork: {exc}", reason="fork_failed") from None
            except trio.Cancelled:  # nothing was forked: nothing to reap
                tree.close()
                self._reaper.never_started()
                raise
        if process is None:
            try:
                process = await trio.lowlevel.open_process(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                    cwd=cwd,
                    start_new_session=True,
                )
            except OSError as exc:
                tree.close()
                self._reaper.never_started()
                raise self._failed(f"could not start: {exc}", reason="exec_failed") from None
        if isinstance(process, ForkedProcess):
            if process.born_inside:
                tree.adopt_born_inside(process.pid)
            else:
                tree.adopt(process.pid)
            process.go()  # contained: it may run the entry now
        else:
            tree.adopt(process.pid)
        stdin, stdout, stderr = process.stdin, process.stdout, process.stderr
        assert isinstance(stdin, trio.lowlevel.FdStream)
        assert isinstance(stdout, trio.lowlevel.FdStream)
        assert isinstance(stderr, trio.lowlevel.FdStream)
        if remote is None:
            pipe = HelperPipe(stdin, stdout, max_reply=helper.spec.max_reply)
        else:
            assert isinstance(process, trio.Process)  # spawned: ssh
            pipe = remote.open_pipe(process, stdin, stdout)
        self._pipe = pipe
        # A remote helper's stderr reader also takes the warden's frames (design §2.5).
        tail = self._tail = (StderrTail if remote is None else remote.stderr_reader)(
            stderr,
            {
                "pool": self._pool,
                "helper": helper.label,
                "slot": helper.slot,
                "incarnation": helper.incarnation,
                "pid": process.pid,
            },
        )
        self._on_spawn(process, pipe, tail)
        replaces = self._replaces
        method = "zygote" if isinstance(process, ForkedProcess) else "spawn"
        self._emit(
            "spawned",
            f"{'forked' if method == 'zygote' else 'spawned'} (incarnation "
            f"{helper.incarnation}, containment {tree.mode})"
            + (", replacing an earlier incarnation" if replaces else ""),
            level=logging.WARNING if replaces else None,
            containment=tree.mode,
            replaces=replaces,
            start_method=method,
        )
        nursery.start_soon(self._reaper.run, process, tail)
        nursery.start_soon(tail.run)
        if remote is not None:
            nursery.start_soon(remote.run)
        done = False
        try:
            await self._handshake(frame)
            done = True
        finally:
            if not done and not helper.exited:
                with trio.CancelScope(shield=True):
                    await self._ladder.escalate(sigterm_first=False)

    def _failed(self, message: str, **details: Any) -> HelperStartupFailed:
        error = HelperStartupFailed(f"{self._helper.label}: {message}", **details)
        self._emit("startup_failed", message, **{k: v for k, v in details.items() if k != "record"})
        return error

    @enable_ki_protection
    async def _handshake(self, frame: bytes) -> None:
        helper = self._helper
        pipe, tail = self._pipe, self._tail
        assert pipe is not None  # spawned
        assert tail is not None
        try:
            with trio.move_on_after(self._startup) as deadline:
                if isinstance(self._tree, RemoteLink):
                    # The warden's start first (design §2.5); then the startup frame.
                    assert isinstance(pipe, RemotePipe)
                    await self._tree.begin(pipe)
                await pipe.send(frame)
                ready = decode_fenced(
                    await pipe.receive(),
                    session=helper.session,
                    kinds=("ready",),
                    generation=0,
                    operation="startup",
                )
        except PipeGone:
            await self._ladder.wait_exit_after_eof()
            failure = (
                self._tree.startup_failure(tail.tail())
                if isinstance(self._tree, RemoteLink)
                else None
            )
            if failure is not None:
                reason, message = failure
                raise self._failed(message, reason=reason, stderr=tail.tail()) from None
            # With the last 4 KiB of its stderr: it died before ready (design §3.3).
            error = self._reaper.exited_error("exited during startup", tail.tail())
            self._emit(
                "startup_failed",
                f"exited during startup ({error.message})",
                reason="exited",
                **error.details,
            )
            raise error from None
        except ProtocolError as exc:  # malformed, or a ProtocolViolation of the fence
            raise self._failed(
                f"bad ready frame: {exc.message}", reason="bad_ready", detail=exc.code
            ) from None
        if deadline.cancelled_caught:
            raise self._failed(
                f"no ready frame within {self._startup:g} s", reason="startup_timeout"
            )
        payload = ready.payload if isinstance(ready.payload, dict) else {}
        if ready.status != "ok":
            assert ready.error is not None
            raise self._failed(
                f"on_startup failed: {ready.error['message']}",
                reason="on_startup_failed",
                record=ready.error,
            )
        helper.ready = payload
        self._advance(HelperEvent.READY)
        self._emit("ready", "ready", subreaper=payload.get("subreaper"))
