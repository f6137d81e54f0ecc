"""The warden: the remote half of one helper's life, on the far end of ``ssh -T`` (design §3.16).

The parent runs ``ssh -T -L LOCAL:CHANNEL host exec python3 -I -c SOURCE CHANNEL`` with
this file's text as SOURCE, so the remote host needs nothing but a Python 3.9+
interpreter for it: this module imports only the standard library and nothing of the
project (no trio, no attrs, no ``protocol``), and runs as a script (``__main__``). It is
a single-threaded loop over ``select.poll``:

* it listens on the Unix socket CHANNEL (in a new directory of mode 0700) for the
  parent's **control channel**, an SSH stream-local forwarding over the same
  connection; the parent's *control frames* come there: frames whose body starts with
  :data:`MAGIC` (never an envelope's first byte), strict JSON objects with a ``"type"``
  (``start``, ``signal``, ``heartbeat``);
* it starts the helper command in its own session, in a cgroup v2 of its own where one
  can be made, else as a descendant of the warden, which is a child subreaper;
* the helper's stdin and stdout **are** the warden's (the SSH channel's): requests and
  replies pass between the parent and the helper without the warden, which never reads
  or writes them (it only watches stdout for the link's end);
* where the server refused the forwarding, the parent sends ``start`` on stdin instead
  and the warden *relays* (version 2's way): it reads the parent's frames from its
  stdin, takes the control frames out and writes the rest, verbatim, to the helper's
  stdin, a pipe of its own;
* it speaks on its stderr (SSH's stderr channel): :data:`PREAMBLE`, then frames only —
  its control frames (``hello``, ``started``, ``refused``, ``signalled``, ``heartbeat``,
  ``exit``) and *stderr frames* (body :data:`STDERR` and bytes) carrying what the
  helper's tree writes to its stderr, a pipe the warden reads
  (``protocol/warden.py`` is the parent's codec of them, design §2.5);
* it kills the helper's whole tree by itself when the control channel (or, relaying,
  its stdin) ends or its stdout or stderr breaks (the SSH link died), when it is sent
  SIGHUP, SIGINT or SIGTERM, or when no frame came from the parent for
  ``heartbeat_timeout`` seconds;
* when the helper has exited it kills what is left of its tree, waits for the tree to be
  empty, relays the tree's last stderr, then reports the exit status and whether the
  tree is empty in a final ``exit`` frame, and exits.

Its wire constants are those of ``protocol/warden.py``; a test checks that they agree.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import time

#: Version of the warden's protocol (design §2.5); ``start`` must name it.
VERSION = 3
#: First byte of a control frame's body. An envelope's body starts with 0xAE (§2.3).
MAGIC = 0xAF
#: First byte of a stderr frame's body: the rest is what the helper's tree wrote.
STDERR = 0xAD
#: Written on stderr before ``hello``, and again before the frame after it: the login's
#: text (if any) ends here, and whatever ``ssh`` said while the parent opened the control
#: channel (a refused forwarding) is text between ``hello`` and the next frame.
PREAMBLE = b"\x00trio-actors-warden\x00"
#: The warden's exit status after a ``refused`` frame.
EXIT_REFUSED = 3
#: Seconds the warden waits for ``start`` before it gives up and exits.
START_TIMEOUT = 60.0
#: Seconds the warden gives the parent to read its last frames before it exits anyway.
FLUSH_TIMEOUT = 5.0
#: Largest control frame the parent may send before ``start`` sets the limits, in bytes.
CONTROL_LIMIT = 1024 * 1024
#: Bytes waiting to be written above which the warden stops reading the other side.
HIGH_WATER = 4 * 1024 * 1024
#: Largest stderr frame body, in bytes (the parent takes frames up to 1 MiB).
STDERR_CHUNK = 65536
_READ = 65536
_PREFIX = "trio-actors-warden."
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}
_CONTAINMENT = ("auto", "cgroup", "tree", "group")


class _OversizedFrame(Exception):
    """A length prefix declares more than the limit."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame declares {size} bytes, over the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class BadStart(Exception):
    """The ``start`` frame cannot be obeyed; ``reason`` is the refusal's reason."""

    def __init__(self, reason: str, message: str, **details: object) -> None:
        super().__init__(message)
        self.reason = reason
        self.details = details


class Splitter:
    """Cuts a byte stream into whole frames, each returned with its 4-byte prefix."""

    def __init__(self, limit: int) -> None:
        self.buffer = bytearray()
        self.limit = limit

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self.buffer
        if not buffer and len(data) >= 4:
            # The usual read: exactly one whole frame, taken as it is (no copy).
            size = int.from_bytes(data[:4], "big")
            if size == len(data) - 4:
                if size > self.limit:
                    raise _OversizedFrame(size, self.limit)
                return [data]
        buffer += data
        frames = []
        pos = 0
        size_all = len(buffer)
        while size_all - pos >= 4:
            size = int.from_bytes(buffer[pos : pos + 4], "big")
            if size > self.limit:
                raise _OversizedFrame(size, self.limit)
            end = pos + 4 + size
            if end > size_all:
                break
            frames.append(bytes(buffer[pos:end]))
            pos = end
        del buffer[:pos]
        return frames


def control_frame(message: dict[str, object]) -> bytes:
    """One control frame: prefix, :data:`MAGIC`, the message as compact JSON."""
    body = bytes((MAGIC,)) + json.dumps(message, separators=(",", ":")).encode()
    return len(body).to_bytes(4, "big") + body


def stderr_frame(data: bytes) -> bytes:
    """One stderr frame: prefix, :data:`STDERR`, ``data`` (at most :data:`STDERR_CHUNK`)."""
    return (len(data) + 1).to_bytes(4, "big") + bytes((STDERR,)) + data


def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (ImportError, OSError, AttributeError):
        return False


def _read_text(path: str) -> str | None:
    try:
        with open(path) as file:
            return file.read()
    except OSError:
        return None


def _make_cgroup() -> str | None:
    """A new cgroup v2 directory below the warden's own, or None where none can be made."""
    own = _read_text("/proc/self/cgroup")
    mounts = _read_text("/proc/self/mountinfo")
    if own is None or mounts is None:
        return None
    relative = next((line[3:] for line in own.splitlines() if line.startswith("0::")), None)
    if relative is None:
        return None
    for line in mounts.splitlines():
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] != "cgroup2":
            continue
        base = left.split()[4] + relative.rstrip("/")
        _remove_stale(base)
        path = f"{base}/{_PREFIX}{os.getpid()}"
        try:
            os.mkdir(path)
        except OSError:
            return None
        if os.path.exists(f"{path}/cgroup.procs"):
            return path
        _rmdir(path)
        return None
    return None


def _remove_stale(base: str) -> None:
    """Kill what is left in the cgroups of wardens that are gone (SIGKILLed before they
    could sweep: their helper's descendants), and remove the cgroups once empty."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        owner = name[len(_PREFIX) :]
        if name.startswith(_PREFIX) and owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            # Before Linux 5.14 there is no cgroup.kill: what is left stays.
            with contextlib.suppress(OSError), open(f"{base}/{name}/cgroup.kill", "w") as kill:
                kill.write("1")
            _rmdir(f"{base}/{name}")  # not yet empty: the next warden removes it


def _rmdir(path: str) -> None:
    with contextlib.suppress(OSError):  # not empty, or gone: a later warden removes it
        os.rmdir(path)


def _proc_table() -> dict[int, tuple[str, int, int, int]] | None:
    """pid → (state, ppid, pgid, sid) of every process, or None without ``/proc``."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    table = {}
    for name in names:
        if not name.isdigit():
            continue
        text = _read_text(f"/proc/{name}/stat")
        if text is None:
            continue  # gone meanwhile
        fields = text[text.rindex(")") + 2 :].split()
        table[int(name)] = (fields[0], int(fields[1]), int(fields[2]), int(fields[3]))
    return table


class Warden:
    """One helper's remote half: the relay, the control frames and the tree (§3.16)."""

    def __init__(self, channel: str | None = None) -> None:
        self.me = os.getpid()
        self.out = bytearray()  # frames for the parent (fd 2)
        self.reframe = False  # after hello: the next frame needs the preamble again
        self.channel = channel  # the control channel's socket path, while it listens
        self.listener: socket.socket | None = None
        self.control_in: socket.socket | None = None  # the parent's control channel
        self.relaying = False  # the parent's frames come on stdin (no control channel)
        self.to_helper = bytearray()  # bytes for the helper's stdin
        self.from_parent = Splitter(CONTROL_LIMIT)
        self.pid: int | None = None
        self.helper_in: int | None = None
        self.helper_err: int | None = None  # the tree's stderr pipe, read end
        self.stdout_watched = True  # until the channel's stdout reports its end
        self.status: int | None = None  # the helper's wait status, once reaped
        self.cgroup: str | None = None
        self.mode = "group"
        self.started = False
        self.cause: str | None = None  # why the warden is ending
        self.message: str | None = None
        self.parent_gone = False  # stdin ended or stdout broke: nobody reads us
        self.parent_eof = False
        self.heartbeat_timeout = START_TIMEOUT
        self.sweep_timeout = 1.0
        self.heard = time.monotonic()
        self.sweep_deadline: float | None = None
        self.pause = 0.005
        self.refused = False
        self.subreaper = False  # the warden is a child subreaper (made in run)
        self.wakeup_r, self.wakeup_w = os.pipe()
        # One poll object for the warden's life: a descriptor is (re)registered only
        # when what the warden waits for on it changes, not on every round.
        self.poller = select.poll()
        self.watched: dict[int, int] = {}
        self.child_exited = True  # look for exits until the first SIGCHLD says more

    # -- the loop -----------------------------------------------------------------

    def run(self) -> int:
        os.set_blocking(0, False)
        # fd 1 is the helper's stdout too (one open file description): it stays
        # blocking, as a program expects its stdout to be.
        os.set_blocking(1, True)
        os.set_blocking(2, False)
        os.set_blocking(self.wakeup_r, False)
        os.set_blocking(self.wakeup_w, False)
        signal.set_wakeup_fd(self.wakeup_w)
        for signum in (signal.SIGCHLD, signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: None)  # the wakeup fd carries the number
        if self.channel is not None:
            self.listener = _listen(self.channel)
        self.out += PREAMBLE
        self.send(
            {
                "type": "hello",
                "version": VERSION,
                "pid": self.me,
                "python": ".".join(map(str, sys.version_info[:3])),
                "channel": self.listener is not None,
            }
        )
        self.reframe = True  # silent until the parent chose the channel
        self.write_parent()
        # A subreaper in every mode: orphans of the tree come back to the warden, which
        # reaps them (no zombie is left to an init that may not reap). Made now, while
        # the parent opens the control channel, not on the start's path (ctypes).
        self.subreaper = _prctl(_PR_SET_CHILD_SUBREAPER, 1) and os.path.isdir("/proc/self")
        try:
            return self.loop()
        finally:
            self.stop_listening()

    def loop(self) -> int:
        while True:
            if self.cause is not None and self.finished():
                break
            wanted = {self.wakeup_r: select.POLLIN}
            control = self.control_in
            if control is not None and not self.parent_eof:
                wanted[control.fileno()] = select.POLLIN
            elif self.listener is not None and self.cause is None:
                wanted[self.listener.fileno()] = select.POLLIN
            if (
                control is None
                and not self.parent_eof
                and len(self.to_helper) < HIGH_WATER
                and (self.relaying or not self.started)
            ):
                wanted[0] = select.POLLIN
            if self.out and not self.parent_gone:
                wanted[2] = select.POLLOUT
            if self.stdout_watched:
                wanted[1] = 0  # never written here: only its POLLERR/POLLHUP, the link's end
            if self.helper_err is not None and len(self.out) < HIGH_WATER:
                wanted[self.helper_err] = select.POLLIN
            if self.helper_in is not None and self.to_helper:
                wanted[self.helper_in] = select.POLLOUT
            if wanted != self.watched:
                self.watch(wanted)
            timeout = self.timeout()
            events = self.poller.poll(None if timeout is None else max(0, int(timeout * 1000) + 1))
            for fd, event in events:
                if fd == 0:
                    self.read_parent(0)
                elif control is not None and fd == control.fileno():
                    self.read_parent(fd)
                elif self.listener is not None and fd == self.listener.fileno():
                    self.accept()
                elif fd == 1:
                    self.stdout_watched = False
                    self.end("link_lost", "the channel's stdout is closed")
                elif fd == 2:
                    self.write_parent()
                elif fd == self.wakeup_r:
                    self.read_wakeup()
                elif fd == self.helper_err:
                    self.read_helper()
                elif fd == self.helper_in:
                    self.write_helper(event)
            if self.child_exited:
                self.reap()
            self.check_time()
        return self.finish()

    def watch(self, wanted: dict[int, int]) -> None:
        """Make the poll object wait for exactly ``wanted`` (descriptor → events)."""
        watched = self.watched
        for fd in [fd for fd in watched if fd not in wanted]:
            with contextlib.suppress(KeyError, OSError):  # closed meanwhile
                self.poller.unregister(fd)
            del watched[fd]
        for fd, mask in wanted.items():
            if watched.get(fd) != mask:
                self.poller.register(fd, mask)  # registers or modifies
                watched[fd] = mask

    def timeout(self) -> float | None:
        now = time.monotonic()
        if self.cause is not None:
            if self.sweep_deadline is None:
                return 0.0
            return min(self.pause, max(0.0, self.sweep_deadline - now))
        return max(0.0, self.heard + self.heartbeat_timeout - now)

    def check_time(self) -> None:
        if self.cause is None and time.monotonic() >= self.heard + self.heartbeat_timeout:
            self.end("heartbeat_lost" if self.started else "start_timeout")

    # -- the parent's side --------------------------------------------------------

    def send(self, message: dict[str, object]) -> None:
        if not self.parent_gone:
            self.frame_out(control_frame(message))

    def frame_out(self, frame: bytes) -> None:
        """Queue one frame for the parent (after the preamble, where one is due)."""
        if self.reframe:
            self.out += PREAMBLE
            self.reframe = False
        self.out += frame
        self.write_parent()

    def accept(self) -> None:
        """The parent's control channel: take it, and listen no more."""
        assert self.listener is not None
        try:
            conn, _ = self.listener.accept()
        except OSError:  # BlockingIOError: the connection went away meanwhile
            return
        self.stop_listening()
        conn.setblocking(False)
        self.control_in = conn
        # The channel's stdin is the helper's from now on: blocking, as a program expects
        # its stdin to be (one open file description), and never read here.
        os.set_blocking(0, True)

    def stop_listening(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        if self.channel is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.channel)
            _rmdir(os.path.dirname(self.channel))
            self.channel = None

    def write_parent(self) -> None:
        while self.out and not self.parent_gone:
            try:
                written = os.write(2, self.out)
            except BlockingIOError:
                return
            except OSError:
                self.parent_gone = True
                self.out.clear()
                self.end("link_lost")
                return
            del self.out[:written]

    def read_parent(self, fd: int) -> None:
        try:
            data = os.read(fd, _READ)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.parent_eof = True
            self.end("link_lost")
            return
        if fd == 0 and not self.relaying:
            # The parent's frames come on stdin: it has no control channel.
            self.relaying = True
            self.stop_listening()
        self.heard = time.monotonic()
        try:
            frames = self.from_parent.feed(data)
        except _OversizedFrame as exc:
            self.parent_eof = True  # the stream cannot be resynchronised
            self.end("parent_protocol_error", f"a frame from the parent: {exc}")
            return
        for frame in frames:
            if self.cause is not None:
                return  # ending: nothing more is obeyed or relayed
            if len(frame) > 4 and frame[4] == MAGIC:
                self.control(frame[5:])
            elif self.started and self.relaying:
                if not self.to_helper and self.helper_in is not None:
                    self.write_now(frame)
                else:
                    self.to_helper += frame
            elif self.relaying:
                self.end("parent_protocol_error", "a relayed frame came before 'start'")
            else:
                self.end("parent_protocol_error", "a frame on the control channel is not one")
        if self.to_helper:
            self.write_helper(0)

    def control(self, body: bytes) -> None:
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nested too deep
            message = None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            self.end("parent_protocol_error", "a control frame that is not a JSON object")
            return
        kind = message["type"]
        if kind == "heartbeat" and self.started:
            self.send({"type": "heartbeat", "seq": message.get("seq")})
        elif kind == "signal" and self.started and _text(message.get("signal")) in _SIGNALS:
            name = str(message["signal"])
            pids, failed = self.signal_tree(_SIGNALS[name])
            self.send({"type": "signalled", "signal": name, "pids": pids, "failed": failed})
        elif kind == "start" and not self.started:
            try:
                self.start(message)
            except BadStart as exc:
                self.refuse(exc)
        else:
            self.end("parent_protocol_error", f"an unexpected control frame {kind!r}")

    def refuse(self, exc: BadStart) -> None:
        self.send({"type": "refused", "reason": exc.reason, "message": str(exc), **exc.details})
        self.refused = True
        self.end("refused", str(exc))

    # -- the helper -----------------------------------------------------------------

    def start(self, message: dict[str, object]) -> None:
        version = message.get("version")
        if version != VERSION:
            raise BadStart(
                "version_mismatch",
                f"the warden speaks version {VERSION}, the parent version {version!r}",
                version=VERSION,
                got=version,
            )
        argv = message.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise BadStart("bad_start", "'argv' must be a non-empty list of strings", field="argv")
        cwd = message.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise BadStart("bad_start", "'cwd' must be a string or null", field="cwd")
        env = message.get("env")
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise BadStart("bad_start", "'env' must map strings to strings", field="env")
        self.heartbeat_timeout = _seconds(message, "heartbeat_timeout")
        self.sweep_timeout = _seconds(message, "sweep_timeout")
        max_request = _size(message, "max_request")
        containment = message.get("containment", "auto")
        if containment not in _CONTAINMENT:
            raise BadStart(
                "bad_start", f"'containment' must be one of {_CONTAINMENT}", field="containment"
            )
        if containment in ("auto", "cgroup"):
            self.cgroup = _make_cgroup()
            if self.cgroup is None and containment == "cgroup":
                raise BadStart("containment_unavailable", "no writable cgroup v2 on this host")
        if self.cgroup is None and containment in ("auto", "tree"):
            if self.subreaper:
                self.mode = "tree"
            elif containment == "tree":
                raise BadStart("containment_unavailable", "this host has no child subreaper")
        self.from_parent.limit = max(max_request, CONTROL_LIMIT)
        self.spawn(argv, cwd, {**os.environ, **env})
        self.send(
            {
                "type": "started",
                "pid": self.pid,
                "containment": self.mode,
                "cgroup": self.cgroup,
            }
        )

    def spawn(self, argv: list[str], cwd: str | None, env: dict[str, str]) -> None:
        report_r, report_w = os.pipe()  # close-on-exec: EOF once the exec succeeded
        # Relaying, the helper's stdin is a pipe of the warden's; else the channel's own.
        in_r, in_w = os.pipe() if self.relaying else (0, -1)
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child, until its exec
            self.child(argv, cwd, env, report_w, in_r, err_w)
        os.close(report_w)
        if self.relaying:
            os.close(in_r)
        os.close(err_w)
        report = b""
        while True:
            chunk = os.read(report_r, 4096)
            if not chunk:
                break
            report += chunk
        os.close(report_r)
        self.pid = pid
        joined = report[:1] == b"C"
        if joined:
            self.mode = "cgroup"
        elif self.cgroup is not None:
            _rmdir(self.cgroup)  # the helper could not join it
            self.cgroup = None
        failure = report[1:] if report[:1] in (b"C", b"N") else report
        if failure.startswith(b"E"):
            if self.relaying:
                os.close(in_w)
            os.close(err_r)
            code, _, text = failure[1:].decode(errors="replace").partition(":")
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)  # it exits at once, with 127
            raise BadStart("exec_failed", text, errno=int(code or 0), argv=argv)
        os.set_blocking(err_r, False)
        self.helper_err = err_r
        if self.relaying:
            os.set_blocking(in_w, False)
            self.helper_in = in_w
        else:
            # The channel's stdin is the helper's alone: the warden lets go of it.
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        self.started = True

    def child(
        self, argv: list[str], cwd: str | None, env: dict[str, str], report: int, i: int, e: int
    ) -> None:  # pragma: no cover - runs in the forked child
        step = f"cannot start {argv[0]!r}"
        try:
            signal.set_wakeup_fd(-1)
            for signum in (signal.SIGCHLD, signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # Python ignores it; exec keeps that
            os.setsid()
            joined = b"N"
            if self.cgroup is not None:
                try:
                    with open(f"{self.cgroup}/cgroup.procs", "w") as procs:
                        procs.write("0")
                    joined = b"C"
                except OSError:
                    pass
            os.write(report, joined)
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # if the warden itself is killed
            if i:
                os.dup2(i, 0)  # relaying; else fd 0 stays the channel's stdin
            os.dup2(e, 2)  # fd 1 stays the channel's stdout: replies bypass the warden
            step = f"cannot enter the working directory {cwd!r}"
            if cwd is not None:
                os.chdir(cwd)
            step = f"cannot run {argv[0]!r}"
            os.execvpe(argv[0], argv, env)
        except BaseException as exc:
            code = exc.errno if isinstance(exc, OSError) and exc.errno else 0
            if isinstance(exc, FileNotFoundError) and step.startswith("cannot run"):
                where = "" if "/" in argv[0] else " on the PATH"  # execvpe names its last try
                text = f"{step}: no such program{where}"
            else:
                text = f"{step}: {exc.strerror if isinstance(exc, OSError) else exc}"
            try:
                os.write(report, f"E{code}:{text}".encode()[:4000])
            finally:
                os._exit(127)

    def write_now(self, frame: bytes) -> None:
        """Write a frame to the helper at once (nothing is queued before it); what the
        pipe does not take now is queued."""
        assert self.helper_in is not None
        try:
            written = os.write(self.helper_in, frame)
        except BlockingIOError:
            written = 0
        except OSError:
            self.close_helper_in()  # the helper closed its stdin: it hears nothing more
            return
        if written < len(frame):
            self.to_helper += frame[written:]

    def write_helper(self, event: int) -> None:
        if self.helper_in is None:
            self.to_helper.clear()
            return
        if event & (select.POLLERR | select.POLLHUP):
            self.close_helper_in()
            return
        while self.to_helper:
            try:
                written = os.write(self.helper_in, self.to_helper)
            except BlockingIOError:
                return
            except OSError:
                self.close_helper_in()  # the helper closed its stdin: it hears nothing more
                return
            del self.to_helper[:written]

    def close_helper_in(self) -> None:
        if self.helper_in is not None:
            os.close(self.helper_in)
            self.helper_in = None
        self.to_helper.clear()

    def read_helper(self) -> None:
        """Relay what the helper's tree wrote to its stderr, as stderr frames."""
        assert self.helper_err is not None
        try:
            data = os.read(self.helper_err, STDERR_CHUNK)
        except BlockingIOError:
            return
        if not data:
            os.close(self.helper_err)
            self.helper_err = None
            return
        if not self.parent_gone:
            self.frame_out(stderr_frame(data))

    # -- the tree -------------------------------------------------------------------

    def members(self) -> list[int]:
        """The pids of the helper's tree still there (zombies of others included)."""
        if self.pid is None:
            return []
        if self.cgroup is not None:
            text = _read_text(f"{self.cgroup}/cgroup.procs") or ""
            found = {int(line) for line in text.split()}
            if self.status is None:
                found.add(self.pid)
            return sorted(found)
        table = _proc_table()
        if table is None:
            try:
                os.killpg(self.pid, 0)
            except OSError:
                return []
            return [self.pid]
        children: dict[int, list[int]] = {}
        found = set()
        for pid, (_, ppid, pgid, sid) in table.items():
            children.setdefault(ppid, []).append(pid)
            if self.pid in (pgid, sid):
                found.add(pid)
        if self.mode == "tree":
            stack = list(children.get(self.me, ()))
            while stack:
                pid = stack.pop()
                found.add(pid)
                stack.extend(children.get(pid, ()))
        found.discard(self.me)
        return sorted(found)

    def signal_tree(self, signum: int) -> tuple[list[int], list[list[int]]]:
        """Send ``signum`` to the whole tree; the pids reached and ``[pid, errno]`` failures."""
        members = self.members()
        if self.cgroup is not None and signum == signal.SIGKILL:
            try:
                with open(f"{self.cgroup}/cgroup.kill", "w") as kill:
                    kill.write("1")
                return members, []  # all at once, and none can be missed or refuse it
            except OSError:
                pass  # before Linux 5.14: one by one, below
        if self.status is None and self.pid is not None:
            # The group may be gone while others of the tree are left.
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signum)
        reached, failed = [], []
        for pid in members:
            try:
                os.kill(pid, signum)
                reached.append(pid)
            except ProcessLookupError:
                if pid == self.pid or pid in reached:
                    reached.append(pid)  # killed by the group's signal just above
            except OSError as exc:
                failed.append([pid, exc.errno or 0])
        return reached, failed

    def reap(self) -> None:
        self.child_exited = False  # until the next SIGCHLD
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.pid and self.status is None:
                self.status = status
                if self.cause is None:
                    self.end("exited")

    def read_wakeup(self) -> None:
        try:
            data = os.read(self.wakeup_r, 256)
        except BlockingIOError:
            return
        for signum in data:
            if signum == signal.SIGCHLD:
                self.child_exited = True
            elif self.cause is None:
                self.end("link_lost", f"the warden got {signal.Signals(signum).name}")

    # -- the end --------------------------------------------------------------------

    def end(self, cause: str, message: str | None = None) -> None:
        """Begin the end: kill what is left of the tree and sweep it until it is empty."""
        if self.cause is not None:
            return
        self.cause = cause
        self.message = message
        self.pause = 0.005
        self.sweep_deadline = time.monotonic() + self.sweep_timeout
        # Kill before closing the helper's stdin: a helper that read EOF first could
        # exit by itself and report a clean status instead of the kill.
        self.signal_tree(signal.SIGKILL)
        self.close_helper_in()

    def finished(self) -> bool:
        """True once the tree is empty and drained, or the sweep's time is up."""
        self.reap()
        left = self.members()
        if left:
            self.signal_tree(signal.SIGKILL)  # also what was forked since the last round
            self.pause = min(self.pause * 2, 0.1)
        assert self.sweep_deadline is not None
        late = time.monotonic() >= self.sweep_deadline
        drained = self.helper_err is None or self.parent_gone
        return late or (not left and drained)

    def finish(self) -> int:
        left = self.members()
        status = self.status
        code = None if status is None else os.waitstatus_to_exitcode(status)
        if self.refused:
            self.flush()
            return EXIT_REFUSED
        self.send(
            {
                "type": "exit",
                "cause": self.cause,
                "returncode": code if code is None or code >= 0 else None,
                "signal": signal.Signals(-code).name if code is not None and code < 0 else None,
                "empty": not left,
                "left": left,
                "message": self.message,
            }
        )
        if self.cgroup is not None and not left:
            _rmdir(self.cgroup)
        self.flush()
        return 0

    def flush(self) -> None:
        """Give the parent up to :data:`FLUSH_TIMEOUT` seconds to read the last frames."""
        deadline = time.monotonic() + FLUSH_TIMEOUT
        while self.out and not self.parent_gone:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            poller = select.poll()
            poller.register(2, select.POLLOUT)
            poller.poll(int(remaining * 1000) + 1)
            self.write_parent()


def _text(value: object) -> str | None:
    """``value`` if it is a string (a JSON list or object cannot be looked up)."""
    return value if isinstance(value, str) else None


def _seconds(message: dict[str, object], name: str) -> float:
    value = message.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e9:
        raise BadStart("bad_start", f"{name!r} must be a positive number of seconds", field=name)
    return float(value)


def _size(message: dict[str, object], name: str) -> int:
    value = message.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**32:
        raise BadStart("bad_start", f"{name!r} must be a number of bytes below 2**32", field=name)
    return value


def _listen(path: str) -> socket.socket | None:
    """A Unix socket listening at ``path`` in a new directory of mode 0700 (only this
    user can connect: sshd, forwarding for the parent), or None where none can be made
    (the directory exists already: it is not ours)."""
    folder = os.path.dirname(path)
    if not os.path.isabs(path) or not folder:
        return None
    try:
        os.mkdir(folder, 0o700)
    except OSError:
        return None
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        listener.listen(1)
    except OSError:
        listener.close()
        _rmdir(folder)
        return None
    listener.setblocking(False)
    return listener


def main() -> None:
    """Run one warden on this process's stdin and stdout (its control channel's socket
    path, if any, is its first argument), and exit with its status."""
    sys.exit(Warden(sys.argv[1] if len(sys.argv) > 1 else None).run())


if __name__ == "__main__":
    main()
