"""How a helper process starts: spawn, containment, startup frame, *ready* (design §3.3).

:class:`Startup` is the part of a :class:`~actors._helpers._process.HelperProcess` that
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
from typing import TYPE_CHECKING, Any

import trio
from trio.lowlevel import enable_ki_protection

from protocol.envelope import decode_fenced
from protocol.framing import DEFAULT_MAX_REQUEST

from .._core._lifecycle import HelperEvent
from ..errors import HelperStartupError, ProtocolError
from ._pipe import HelperPipe, PipeGone
from ._stderr import StderrTail

if TYPE_CHECKING:
    from ._process import HelperProcess

__all__ = ["Startup"]


class Startup:
    """The starting part of one helper incarnation (see the module docstring).

    Args:
        helper: The incarnation it starts.
    """

    def __init__(self, helper: HelperProcess) -> None:
        self._helper = helper

    @enable_ki_protection
    async def run(self, nursery: trio.Nursery) -> None:
        """Spawn the child and wait for *ready*; see :meth:`HelperProcess.start`."""
        helper = self._helper
        try:
            frame = helper._encode(
                "startup",
                0,
                "startup",
                DEFAULT_MAX_REQUEST,
                payload={
                    "options": helper.spec.options,
                    "fault": helper.spec.fault,
                    "max_request": helper.spec.max_request,
                    "max_reply": helper.spec.max_reply,
                    "subreaper": helper._tree.mode == "tree",
                },
            )
        except ProtocolError as exc:
            self._never_started()
            raise self._failed(
                f"startup options do not fit a frame: {exc.message}", reason=exc.code
            ) from None
        tree = helper._tree
        tree.prepare()
        env = {**os.environ, **(helper.spec.env or {}), **tree.environment()}
        try:
            helper._process = await trio.lowlevel.open_process(
                helper.spec.command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=helper.spec.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            tree.close()
            self._never_started()
            raise self._failed(f"could not start: {exc}", reason="exec_failed") from None
        tree.adopt(helper._process.pid)
        stdin, stdout, stderr = (
            helper._process.stdin,
            helper._process.stdout,
            helper._process.stderr,
        )
        assert isinstance(stdin, trio.lowlevel.FdStream)
        assert isinstance(stdout, trio.lowlevel.FdStream)
        assert isinstance(stderr, trio.lowlevel.FdStream)
        helper._pipe = HelperPipe(stdin, stdout, max_reply=helper.spec.max_reply)
        helper._stderr = StderrTail(
            stderr,
            {
                "pool": helper._events.name,
                "helper": helper.label,
                "slot": helper.slot,
                "incarnation": helper.incarnation,
                "pid": helper._process.pid,
            },
        )
        helper._emit(
            "spawned",
            f"spawned (incarnation {helper.incarnation}, containment {tree.mode})"
            + (", replacing an earlier incarnation" if helper._replaces else ""),
            level=logging.WARNING if helper._replaces else None,
            containment=tree.mode,
            replaces=helper._replaces,
        )
        nursery.start_soon(helper._reaper.run)
        nursery.start_soon(helper._stderr.run)
        done = False
        try:
            await self._handshake(frame)
            done = True
        finally:
            if not done and not helper.exited:
                with trio.CancelScope(shield=True):
                    await helper._ladder.escalate(sigterm_first=False)

    def _never_started(self) -> None:
        helper = self._helper
        helper._advance(HelperEvent.REAPED)
        helper._exited.set()

    def _failed(self, message: str, **details: Any) -> HelperStartupError:
        helper = self._helper
        error = HelperStartupError(f"{helper.label}: {message}", **details)
        helper._emit(
            "startup_failed", message, **{k: v for k, v in details.items() if k != "record"}
        )
        return error

    @enable_ki_protection
    async def _handshake(self, frame: bytes) -> None:
        helper = self._helper
        try:
            with trio.move_on_after(helper.timeouts.startup) as deadline:
                await helper._send(frame)
                ready = decode_fenced(
                    await helper._receive(),
                    session=helper.session,
                    kinds=("ready",),
                    generation=0,
                    operation="startup",
                )
        except PipeGone:
            await helper._ladder.wait_exit_after_eof()
            error = helper._exited_error("exited during startup", tail=True)
            helper._emit(
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
                f"no ready frame within {helper.timeouts.startup:g} s", reason="startup_timeout"
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
        helper._advance(HelperEvent.READY)
        helper._emit("ready", "ready", subreaper=payload.get("subreaper"))
