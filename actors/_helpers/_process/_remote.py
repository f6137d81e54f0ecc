"""A helper on another host: the ``ssh`` link to its warden, parent side (design §3.16).

For a spec with a ``host``, the helper's "process" on this machine is the local ``ssh``
client; at the far end a warden (``actors/_remote/_warden.py``) runs the helper. A
:class:`RemoteLink` takes the place of the local :class:`ProcessTree` (its containment):

* it builds the ``ssh`` command line, with a stream-local forwarding (``-L``) from a
  socket in a private local directory to the socket the warden listens on: the
  **control channel**, over the same SSH connection (design §2.5);
* once the warden said ``hello`` it connects to the control channel and sends the
  warden's ``start`` frame there; the helper's startup frame follows on ``ssh``'s stdin
  once the warden said ``started`` (the helper's interpreter is still starting then:
  no round trip is added). Where the server refuses the forwarding (``sshd``'s
  ``AllowStreamLocalForwarding no``, ``DisableForwarding``, a ``restrict`` key), it
  falls back to version 2's relay: ``start`` and every control frame go on stdin, and
  the warden relays the requests (``control_channel_refused``, an event and a warning);
* ``ssh``'s stdin and stdout are the helper's own (design §2.5): its requests and reply
  frames pass straight between the parent and the helper, not through the warden, and
  its reader task (the pipe's, :meth:`~actors._helpers._process._pipe.HelperPipe.run`)
  hands the replies to the task waiting for them as a local helper's
  (:class:`RemotePipe`);
* ``ssh``'s stderr carries the login's text, then the warden's frames:
  :class:`WardenStderr` (the helper's stderr reader, in the place of a local helper's)
  logs the helper's stderr as a local helper's and hands the control frames here
  (``hello``, ``started``, ``refused``, ``signalled``, ``heartbeat``, ``exit``);
* it sends a heartbeat every third of ``timeouts.heartbeat`` and gives the link up as
  lost when nothing came from the warden for ``timeouts.heartbeat`` seconds: it then
  ends ``ssh`` itself (the warden, whose stdin ends, kills the tree by itself);
* the ladder's signals become ``signal`` frames on the control channel (relaying: on
  ``ssh``'s stdin), executed by the warden on the helper's whole remote tree; where no
  frame can be sent (the channel is full, closed or not yet open, a frame cut in two
  on stdin) the link itself is ended, which makes the warden kill the tree;
* the helper counts as reaped once ``ssh`` exited, both its stdout and its stderr were
  read to their end, and the warden's ``exit`` said its tree is empty; what the warden
  found left is reported as escaped; an ``ssh`` that ended without ``exit`` makes the
  helper *lost* (:class:`~actors.errors.HelperLost`).

A failed start says why (:meth:`RemoteLink.startup_failure`): ``ssh``'s own failures
(``host_unreachable``, ``auth_refused``, ``host_key_rejected``, ``python_missing``,
``ssh_failed``), the warden's refusal (``exec_failed``, ``version_mismatch``, ...), a
warden of another version, or a remote interpreter that cannot import the project
(``project_missing``), each with the tail of ``ssh``'s stderr.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import tempfile
from typing import TYPE_CHECKING, Any, Final

import trio

from protocol.errors import ProtocolError, ProtocolViolation
from protocol.warden import (
    WARDEN_EXIT_REFUSED,
    StderrSplitter,
    decode_control,
    encode_heartbeat,
    encode_signal,
    encode_start,
)

from ..._remote import channel_paths, classify_ssh_failure, remote_command, ssh_argv
from ._containment import ProcessTree
from ._pipe import HelperPipe
from ._spec import BOOTSTRAP
from ._stderr import StderrTail

if TYPE_CHECKING:
    from collections.abc import Callable

    from trio.lowlevel import FdStream

    from ._spec import HelperSpec, HelperTimeouts

__all__ = ["PROJECT_MISSING", "REMOTE_BOOTSTRAP", "RemoteLink", "RemotePipe", "WardenStderr"]

#: Exit status of a remote helper whose interpreter cannot import the project.
PROJECT_MISSING: Final = 78
#: Writes of at most this many bytes to a pipe are atomic (POSIX ``PIPE_BUF``).
_PIPE_BUF: Final = 512

#: The program a Python-entry helper runs on another host: it finds the project's
#: ``actors`` and ``protocol`` packages where the remote interpreter imports them from
#: (without running their ``__init__``), then goes on as :data:`BOOTSTRAP`.
REMOTE_BOOTSTRAP: Final = (
    f"""\
import sys
from importlib.util import find_spec
found = [find_spec(name) for name in ("actors", "protocol")]
if None in found:
    sys.stderr.write("trio-actors is not importable by " + sys.executable + " on this host\\n")
    raise SystemExit({PROJECT_MISSING})
sys.argv[2:4] = [spec.submodule_search_locations[0] for spec in found]
"""
    + BOOTSTRAP
)


class RemotePipe(HelperPipe):
    """The helper's frames over ``ssh``: its requests (and the warden's control frames)
    on ``ssh``'s stdin, its replies straight from its own stdout, which is ``ssh``'s
    (design §2.5): read as a local helper's, with its ``max_reply`` checked here."""

    __slots__ = ()

    def __init__(self, stdin: FdStream, stdout: FdStream, *, max_reply: int) -> None:
        super().__init__(stdin, stdout, max_reply=max_reply)
        # The link's task is the reader from the spawn on (RemoteLink.run).
        self._reading = True

    def try_control(self, frame: bytes) -> bool:
        """Write a small control frame now, whole or not at all; False if it cannot be
        (a helper frame is half written, or the channel is full or closed)."""
        if self.send_broken or len(frame) > _PIPE_BUF:
            return False
        try:
            return os.write(self._wfd, frame) == len(frame)
        except OSError:  # EAGAIN: full (nothing written, the write is atomic); EPIPE
            return False


class WardenStderr(StderrTail):
    """``ssh``'s stderr, read in the place of a local helper's stderr (design §2.5).

    The login's text (``ssh``'s own messages, the remote shell's) and the helper's
    stderr, relayed by the warden in stderr frames, are logged and kept as a local
    helper's stderr is; the warden's control frames go to its link. Framing that breaks
    (the warden crashed) gives the link up; what follows is kept as text.

    Args:
        stream: The parent's end of ``ssh``'s stderr pipe.
        fields: The helper's identity, added to every log record as ``extra``.
        link: The link that takes the control frames.
    """

    def __init__(self, stream: FdStream, fields: dict[str, Any], link: RemoteLink) -> None:
        super().__init__(stream, fields)
        self._link = link
        self._splitter = StderrSplitter()

    async def run(self) -> None:
        """Read until end of file or :meth:`close` (run it in a nursery)."""
        try:
            await super().run()
        finally:  # cancelled too: nothing more will be read
            self._link.end_of_stderr()

    def _feed(self, data: bytes) -> None:
        link = self._link
        link.heard = trio.current_time()
        for kind, chunk in self._splitter.feed(data):
            if kind == "control":
                link.take_control(chunk)
            else:
                StderrTail._feed(self, chunk)
        broken = self._splitter.broken
        if broken is not None:
            link.give_up("warden_protocol_error", broken)

    def _flush(self) -> None:
        # Called only at the stream's end (end of file, or close): what is left of it
        # is text, and the link hears nothing more.
        for _, chunk in self._splitter.close():
            StderrTail._feed(self, chunk)
        StderrTail._flush(self)
        self._link.end_of_stderr()


class RemoteLink(ProcessTree):
    """One remote helper's link to its warden, in the place of its local process tree.

    Args:
        spec: The helper's spec (``host`` set).
        timeouts: Its deadlines (``startup`` bounds the connection too, ``heartbeat``
            the link's silence), seconds on trio's clock.
        tag: The helper's session (for the base class).
        emit: Reports a step: ``emit(kind, text, *, level=None, **details)``, an event
            and a log record (design §3.10).
    """

    def __init__(
        self,
        spec: HelperSpec,
        timeouts: HelperTimeouts,
        tag: str,
        emit: Callable[..., None],
    ) -> None:
        super().__init__("remote", tag)
        assert spec.host is not None
        self._spec = spec
        self._timeouts = timeouts
        self._emit = emit
        self._process: trio.Process | None = None
        self._pipe: RemotePipe | None = None
        self.hello: dict[str, Any] | None = None
        self.started: dict[str, Any] | None = None
        self.refused: dict[str, Any] | None = None
        self.exit: dict[str, Any] | None = None
        #: Why the parent itself gave the link up (``heartbeat_lost``, ``version_mismatch``,
        #: ``link_broken``, ``warden_protocol_error``), or None.
        self.gave_up: str | None = None
        self._gave_up_message = ""
        #: When bytes last came from the warden (its stderr), seconds on trio's clock
        #: (from the spawn on: :meth:`open_pipe`).
        self.heard = 0.0
        self._exit_at: float | None = None
        self._stdout_ended = trio.Event()
        #: Set once ``ssh``'s stderr was read to its end (:class:`WardenStderr`).
        self.stderr_ended = trio.Event()
        #: Where the parent's control frames go: ``"socket"`` (the control channel),
        #: ``"relay"`` (ssh's stdin: the server refused the forwarding), or None until
        #: the warden answered ``start``.
        self.channel: str | None = None
        self._folder: str | None = None  # the local socket's private directory
        self._local = self._remote = ""
        self._socket: socket.socket | None = None
        self._socket_open = trio.Event()
        self._socket_closed = trio.Event()
        self._news = trio.Event()  # set (and renewed) on every step of the start

    # --- the command ----------------------------------------------------------------

    def command(self) -> list[str]:
        """The local ``ssh`` command line that runs the warden on the spec's host."""
        spec = self._spec
        assert spec.host is not None
        options: list[str] = []
        if spec.port is not None:
            options += ["-p", str(spec.port)]
        if spec.identity is not None:
            options += ["-i", spec.identity]
        options += spec.ssh_options
        if self._folder is None:
            self._folder = tempfile.mkdtemp(prefix="trio-actors-")  # mode 0700
            self._local, self._remote = channel_paths(self._folder)
        # The control channel (design §2.5); no ExitOnForwardFailure: a forwarding that
        # cannot be set up makes the parent relay, as a refused one does.
        options += ["-L", f"{self._local}:{self._remote}"]
        return ssh_argv(
            spec.host,
            remote_command(python=spec.python, channel=self._remote),
            connect_timeout=self._timeouts.startup,
            options=options,
        )

    def helper_command(self) -> list[str]:
        """The helper's command line on the remote host."""
        spec = self._spec
        if spec.argv is not None:
            return list(spec.argv)
        assert spec.entry is not None
        return [spec.python, "-c", REMOTE_BOOTSTRAP, spec.entry, "", "", "0"]

    def start_frame(self) -> bytes:
        """The warden's ``start`` frame for this helper."""
        spec, timeouts = self._spec, self._timeouts
        return encode_start(
            self.helper_command(),
            heartbeat_timeout=timeouts.heartbeat,
            sweep_timeout=timeouts.kill,
            cwd=spec.cwd,
            env=spec.env,
            containment=spec.containment,
            max_request=spec.max_request,
        )

    def open_pipe(self, process: trio.Process, stdin: FdStream, stdout: FdStream) -> RemotePipe:
        """The helper's pipe over the just-spawned ``ssh`` (its reader: :meth:`run`)."""
        self._process = process
        self.leader = process.pid
        self.heard = trio.current_time()
        self._pipe = RemotePipe(stdin, stdout, max_reply=self._spec.max_reply)
        return self._pipe

    def stderr_reader(self, stream: FdStream, fields: dict[str, Any]) -> WardenStderr:
        """The reader of ``ssh``'s stderr, in the place of a local helper's stderr tail."""
        return WardenStderr(stream, fields, self)

    # --- the link's tasks -----------------------------------------------------------

    async def run(self) -> None:
        """Read the helper's replies and send heartbeats until ``ssh``'s stdout ends (the
        pool's nursery runs it); a frame over ``max_reply`` ends the reading, and the
        job that waits for it fails as a local helper's does."""
        pipe = self._pipe
        assert pipe is not None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._heartbeats)
                nursery.start_soon(self._watch_socket)
                await pipe.run()
                # The heartbeats go on until the warden's stream ends too.
                await self.stderr_ended.wait()
                nursery.cancel_scope.cancel()
        finally:
            self._stdout_ended.set()
            self.close()

    async def begin(self, pipe: RemotePipe) -> None:
        """Start the helper: wait for the warden's ``hello``, open the control channel
        and send ``start`` there, and wait for ``started`` (or ``refused``); where the
        channel cannot be opened, send ``start`` on ``ssh``'s stdin instead (the warden
        relays, design §2.5). Returns at once when ``ssh`` ended or the link was given
        up (the startup's read then says why). The caller bounds it with the startup
        timeout (seconds, trio's clock)."""
        await self._until(lambda: self.hello is not None)
        if self.hello is None:
            return
        cause = "the warden could not listen for it"
        if self.hello["channel"]:
            cause = await self._open_channel()
            if not cause:
                return
        if self.gave_up is not None or self.stderr_ended.is_set():
            return
        self.channel = "relay"
        self._warn(
            "control_channel_refused",
            f"no control channel to {self._spec.host} ({cause}): the warden relays the requests",
            cause,
        )
        await pipe.send(self.start_frame())

    async def _open_channel(self) -> str:
        """Connect to the control channel and send ``start``; why it failed, or ""."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(self._local)
        except OSError as exc:  # ssh set up no forwarding (ClearAllForwardings)
            sock.close()
            return f"ssh does not forward it: {exc.strerror or exc}"
        self._socket = sock
        self._socket_open.set()
        if not self._write(sock, self.start_frame()):
            # ssh closes the local end as soon as the server refused the channel, which
            # may be before the start was written (the parent was descheduled).
            self._close_socket()
            return "the server refused the forwarding before the start was sent"
        await self._until(lambda: self._socket_closed.is_set() or self.started is not None)
        if self.started is not None or self.refused is not None:
            self.channel = "socket"
            return ""
        # ssh closes the local end when the server refuses to open the channel.
        return "the server refused the forwarding"

    async def _until(self, done: Callable[[], bool]) -> None:
        """Wait until ``done()``, a refusal, the link given up or ``ssh``'s stderr ended."""
        while not (
            done()
            or self.refused is not None
            or self.gave_up is not None
            or self.stderr_ended.is_set()
        ):
            await self._news.wait()

    def _notify(self) -> None:
        self._news.set()
        self._news = trio.Event()

    def end_of_stderr(self) -> None:
        """``ssh``'s stderr ended (:class:`WardenStderr`): the warden says nothing more."""
        self.stderr_ended.set()
        self._notify()

    async def _watch_socket(self) -> None:
        """Watch the control channel for its end (the warden never writes there), and
        close it then: ``ssh`` exits only once every channel is closed."""
        await self._socket_open.wait()
        sock = self._socket
        try:
            while sock is not None and sock.fileno() >= 0:
                try:
                    await trio.lowlevel.wait_readable(sock)
                except trio.ClosedResourceError:  # closed by this link meanwhile
                    break
                try:
                    data = sock.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    self.give_up("warden_protocol_error", "the warden wrote on the control channel")
                break
        finally:
            self._close_socket()

    def _close_socket(self) -> None:
        sock = self._socket
        if sock is not None and sock.fileno() >= 0:
            trio.lowlevel.notify_closing(sock)
            sock.close()
        if sock is not None and not self._socket_closed.is_set():
            self._socket_closed.set()
            self._notify()

    def _write(self, sock: socket.socket, frame: bytes) -> bool:
        """Write a small frame now, whole or not at all: a frame cut in two would be
        misread by the warden, so a partial write ends the link."""
        try:
            written = sock.send(frame)
        except OSError:  # EAGAIN: full; EPIPE: closed
            return False
        if 0 < written < len(frame):
            self.give_up("link_broken", "a control frame was cut in two")
        return written == len(frame)

    def _send_control(self, frame: bytes) -> bool:
        """A control frame to the warden now, on the channel the start took."""
        if self.channel == "socket":
            sock = self._socket
            return sock is not None and sock.fileno() >= 0 and self._write(sock, frame)
        if self.channel == "relay":
            pipe = self._pipe
            return pipe is not None and pipe.try_control(frame)
        return False

    def take_control(self, body: bytes) -> None:
        """One control frame from the warden (:class:`WardenStderr` read it)."""
        try:
            message = decode_control(body)
        except ProtocolViolation as exc:  # a hello of another version
            self.give_up("version_mismatch", exc.message)
            return
        except ProtocolError as exc:
            self.give_up("warden_protocol_error", exc.message)
            return
        self._control(message)
        if message["type"] != "heartbeat":
            self._notify()

    def _control(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "heartbeat":
            return
        if kind == "hello":
            self.hello = message
        elif kind == "started":
            self.started = message
            self.mode = message["containment"]
            self._emit(
                "warden_started",
                f"started on {self._spec.host} as pid {message['pid']}"
                f" (containment {message['containment']})",
                host=self._spec.host,
                remote_pid=message["pid"],
                containment=message["containment"],
            )
        elif kind == "refused":
            self.refused = message
        elif kind == "signalled":
            self._emit(
                "warden_signalled",
                f"{message['signal']} reached {len(message['pids'])} remote process(es)"
                + (f"; failed: {message['failed']}" if message["failed"] else ""),
                level=logging.WARNING if message["failed"] else None,
                signal=message["signal"],
                remote_pids=message["pids"],
                failed=message["failed"],
            )
        elif kind == "exit":
            self.exit = message
            self._exit_at = trio.current_time()

    async def _heartbeats(self) -> None:
        beat = self._timeouts.heartbeat
        seq = 0
        while True:
            await trio.sleep(beat / 3)
            if self._exit_at is not None:
                # The warden is done; only what escaped its sweep can still hold the
                # channel open (design §3.16): ssh is ended after ``kill`` seconds.
                if trio.current_time() - self._exit_at >= self._timeouts.kill:
                    self._kill_ssh()
                continue
            if self.started is None:
                continue
            if trio.current_time() - self.heard >= beat:
                self.give_up("heartbeat_lost", f"nothing came from the warden for {beat:g} s")
                return
            seq += 1
            self._send_control(encode_heartbeat(seq))  # a full channel: the next beat

    def give_up(self, cause: str, message: str) -> None:
        """End the link from this side: ``ssh`` is killed, the warden kills the tree."""
        if self.gave_up is None:
            self.gave_up = cause
            self._gave_up_message = message
            text = f"the link to {self._spec.host} is given up ({cause}): {message}"
            self._warn("link_lost", text, cause)
            self._notify()
        self._kill_ssh()

    def _warn(self, kind: str, text: str, cause: str) -> None:
        """An event and a WARNING record about the link to the spec's host."""
        self._emit(kind, text, level=logging.WARNING, host=self._spec.host, cause=cause)

    def _kill_ssh(self) -> None:
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # exited, not yet waited for
                os.kill(process.pid, signal.SIGKILL)

    # --- the ProcessTree face ---------------------------------------------------------

    def environment(self) -> dict[str, str]:
        return {}

    def prepare(self) -> None:
        pass

    def adopt(self, pid: int) -> None:
        self.leader = pid

    def remember(self) -> None:
        pass

    def members(self) -> list[int]:
        return []

    def signal(self, sig: int, members: list[int] | None = None) -> list[tuple[int, int]]:
        """``sig`` (SIGTERM or SIGKILL) to the helper's remote tree, by the warden.

        Where no ``signal`` frame can be sent now (the warden has not yet answered
        ``start``, or the channel is full or closed), the link is ended instead: the
        warden then SIGKILLs the whole tree by itself.
        """
        name = signal.Signals(sig).name
        if self.exit is None and not self._send_control(encode_signal(name)):
            self.give_up("link_broken", f"{name} could not be sent to the warden")
        return []

    async def sweep(self, grace: float) -> tuple[list[int], list[tuple[int, int]]]:
        """``ssh`` has exited: wait up to ``grace`` seconds for its stdout and stderr to be
        read to their end (the helper's last replies before the warden's ``exit``); the
        remote pids the warden found left (none if it said the tree is empty)."""
        with trio.move_on_after(grace):
            await self._stdout_ended.wait()
            await self.stderr_ended.wait()
        exit_frame = self.exit
        if exit_frame is None or exit_frame["empty"]:
            return [], []
        return [int(pid) for pid in exit_frame["left"]], []

    async def wait_gone(self, pid: int) -> None:
        """Remote pids cannot be watched from here once the link is gone."""
        await trio.lowlevel.checkpoint()

    def close(self) -> None:
        self._close_socket()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    # --- how it ended -----------------------------------------------------------------

    @property
    def lost(self) -> bool:
        """The link ended without the warden's ``exit`` (or the parent gave it up)."""
        return self.exit is None and self.refused is None and self.hello is not None

    def exit_status(self, returncode: int | None) -> int | None:
        """The helper's exit status as ``Popen.returncode`` says it (negative: killed
        by that signal), from the warden's ``exit``; ``ssh``'s own (``returncode``)
        when no warden answered; None when unknown (the link was lost)."""
        exit_frame = self.exit
        if exit_frame is None:
            # ssh's own status when no warden ever spoke (a failed login); else unknown.
            return returncode if self.hello is None else None
        if exit_frame["signal"] is not None:
            try:
                return -int(signal.Signals[exit_frame["signal"]])
            except KeyError:
                return None
        code = exit_frame["returncode"]
        return code if isinstance(code, int) else None

    def startup_failure(self, stderr: str) -> tuple[str, str] | None:
        """Why the start failed, once ``ssh`` exited: ``(reason, message)``, or None
        when the helper itself started and exited (an ordinary exit during startup)."""
        process = self._process
        returncode = None if process is None else process.returncode
        if self.gave_up in ("version_mismatch", "warden_protocol_error"):
            return self.gave_up, self._gave_up_message
        if self.refused is not None:
            return str(self.refused["reason"]), str(self.refused["message"])
        if self.hello is None:
            if returncode is None:
                return "ssh_failed", "ssh did not exit"
            reason = classify_ssh_failure(returncode, stderr)
            last = _last_line(stderr)
            return reason, f"ssh exited with {returncode}" + (f": {last}" if last else "")
        exit_frame = self.exit
        if exit_frame is not None and exit_frame["returncode"] == PROJECT_MISSING:
            return "project_missing", f"{self._spec.python} on {self._spec.host} cannot import it"
        if exit_frame is None:
            return "link_lost", "the link ended before the helper was ready"
        if returncode == WARDEN_EXIT_REFUSED:  # pragma: no cover - refused comes first
            return "refused", "the warden refused the start"
        return None


def _last_line(text: str) -> str:
    return next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")[:400]
