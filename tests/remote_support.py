"""A private ``sshd`` on loopback, for the tests of helpers on other hosts (design §3.16).

:func:`private_sshd` starts OpenSSH's ``sshd`` on a free port of 127.0.0.1 with a host
key, an authorized key and a config of its own in a temporary folder: no system sshd,
no password or keyboard-interactive login, only this user, only loopback. "Remote" is
then this machine over real SSH, so a test can look at the "remote" side with ``/proc``.

Without ``sshd`` installed the tests that need it skip with the reason, except in CI
(``CI=true``), where they fail: ``.ci/run`` installs ``openssh-server``.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import select
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from process_support import children

if TYPE_CHECKING:
    from collections.abc import Iterator

#: Where Debian's openssh-server puts the daemon (sshd must be run by absolute path).
SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")
#: Seconds ``sshd`` may take to listen, and ``ssh`` to connect.
START_TIMEOUT = 10.0
CONNECT_TIMEOUT = 5


def find_sshd() -> str | None:
    """The ``sshd`` program, or None."""
    found = shutil.which("sshd")
    if found:
        return found
    return next((path for path in SSHD_CANDIDATES if os.access(path, os.X_OK)), None)


def require_sshd() -> str:
    """The ``sshd`` program; skip the test without it — fail instead in CI."""
    sshd = find_sshd()
    if sshd is None or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        reason = "OpenSSH (sshd, ssh, ssh-keygen) is not installed: apt-get install openssh-server"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the SSH tests: {reason}")
        pytest.skip(reason)
    return sshd


@dataclass(frozen=True)
class SSHServer:
    """A running private sshd and what a client needs to reach it."""

    #: The loopback port it listens on.
    port: int
    #: The login user (the one running the tests).
    user: str
    #: The private key it accepts.
    key: Path
    #: A private key it does not accept.
    wrong_key: Path
    #: The known_hosts file holding its host key.
    known_hosts: Path
    #: Its log (``sshd -E``).
    log: Path
    #: The daemon's pid.
    pid: int

    @property
    def destination(self) -> str:
        return f"{self.user}@127.0.0.1"

    def ssh_options(self, *, key: Path | None = None) -> list[str]:
        """``ssh`` options (before the destination) for this server: port, key, host key."""
        return [
            "-F",
            "/dev/null",  # no user or system ssh_config: the test decides everything
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "LogLevel=ERROR",
            "-i",
            str(key or self.key),
            "-p",
            str(self.port),
        ]

    def ssh_argv(self, command: str, *, key: Path | None = None) -> list[str]:
        """A whole ``ssh -T`` command line running ``command`` on this server."""
        return [
            "ssh",
            "-T",
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={CONNECT_TIMEOUT}",
            *self.ssh_options(key=key),
            "--",
            self.destination,
            command,
        ]


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "trio-actors-test", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(folder: Path, port: int, user: str, *, forwarding: bool) -> str:
    return "\n".join(
        [
            f"Port {port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {folder / 'host_key'}",
            f"AuthorizedKeysFile {folder / 'authorized_keys'}",
            f"PidFile {folder / 'sshd.pid'}",
            f"AllowUsers {user}",
            "AuthenticationMethods publickey",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            # Root may log in here (the CI container runs as root), by key only and only
            # over loopback; no other user, no password.
            "PermitRootLogin prohibit-password",
            # The key files are in a temporary folder below a world-writable /tmp, which
            # StrictModes would refuse; the folder itself is ours and mode 0700.
            "StrictModes no",
            "UsePAM no",
            "UseDNS no",
            # The classic curve only: the post-quantum default costs a loaded machine
            # a third of a second per login, and the tests log in dozens of times.
            "KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org",
            "PrintMotd no",
            "PermitTTY no",
            "X11Forwarding no",
            # The warden's control channel (design §2.5) is a local stream-local
            # forwarding, which sshd refuses unless local forwarding is allowed (it
            # then checks the same permissions as TCP's); "no" makes the parent relay.
            "AllowTcpForwarding local",
            f"AllowStreamLocalForwarding {'local' if forwarding else 'no'}",
            "AllowAgentForwarding no",
            "PermitUserEnvironment no",
            # Tests connect many times at once (two xdist workers, several per test).
            "MaxStartups 64:30:128",
            "MaxSessions 64",
            "LogLevel VERBOSE",
            "",
        ]
    )


#: Run as ``python -c``: make this process a child subreaper, then become sshd (the flag
#: survives ``execve``). When a client goes away, OpenSSH's session process exits without
#: waiting for the command it ran; a subreaper sshd keeps such an orphan (a warden still
#: ending its helper) among its descendants, where the tests look for what is left, and
#: reaps it.
_SUBREAPER = (
    "import ctypes, os, sys; "
    "ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0 or sys.exit('no subreaper'); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


@contextlib.contextmanager
def private_sshd(folder: Path, *, forwarding: bool = True) -> Iterator[SSHServer]:
    """Start a private sshd on a free loopback port; stop it (and wait) on exit.

    Args:
        folder: An empty temporary folder for its keys, config, pid file and log.
        forwarding: False: the server refuses stream-local forwardings (a warden's
            control channel, design §2.5).

    Raises:
        pytest.fail.Exception / pytest.skip.Exception: no OpenSSH (see :func:`require_sshd`).
        RuntimeError: it did not listen within :data:`START_TIMEOUT` seconds (the
            message holds its log's tail).
    """
    sshd = require_sshd()
    folder.chmod(0o700)
    user = getpass.getuser()
    _keygen(folder / "host_key")
    _keygen(folder / "client_key")
    _keygen(folder / "wrong_key")
    (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
    if os.geteuid() == 0:
        # sshd running as root insists on its privilege separation directory.
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
    for _attempt in range(5):  # another process may take the free port first
        port = _free_port()
        config = folder / "sshd_config"
        config.write_text(_config(folder, port, user, forwarding=forwarding))
        log = folder / "sshd.log"
        log.write_text("")
        # An abstract socket: a pytest folder's path can exceed a socket path's 108 bytes.
        notify = f"trio-actors-sshd-{os.getpid()}-{port}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as ready:
            ready.bind(f"\0{notify}")
            process = subprocess.Popen(
                [sys.executable, "-c", _SUBREAPER, sshd, "-D", "-f", str(config), "-E", str(log)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "NOTIFY_SOCKET": f"@{notify}"},
            )
            try:
                if _wait_listening(process, ready):
                    break
            except BaseException:
                _stop(process)
                raise
        _stop(process)
    else:
        raise RuntimeError(f"sshd did not start; its log ends:\n{log.read_text()[-2000:]}")
    host_key = (folder / "host_key.pub").read_text().split()
    known_hosts = folder / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    try:
        yield SSHServer(
            port=port,
            user=user,
            key=folder / "client_key",
            wrong_key=folder / "wrong_key",
            known_hosts=known_hosts,
            log=log,
            pid=process.pid,
        )
    finally:
        _stop(process)


def _wait_listening(process: subprocess.Popen[bytes], ready: socket.socket) -> bool:
    """True once sshd says it listens; False if it exited first (its port was taken).

    Debian's sshd tells a service manager that it is ready by the ``sd_notify`` protocol
    (``READY=1`` on the datagram socket named by ``NOTIFY_SOCKET``), which it sends once
    its listening sockets are bound: an event to wait for, not a log to poll.
    """
    deadline = time.monotonic() + START_TIMEOUT
    while (left := deadline - time.monotonic()) > 0:
        # A short slice, so that an sshd that exited (its port taken) is seen at once.
        readable, _, _ = select.select([ready], [], [], min(left, 0.1))
        if readable and b"READY=1" in ready.recv(4096):
            return True
        if process.poll() is not None:
            return False
    raise RuntimeError(f"sshd did not say it was ready within {START_TIMEOUT} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def ps_lines(marker: str) -> list[str]:
    """Lines of ``ps`` (pid, state, command) whose command line contains ``marker``."""
    out = subprocess.run(
        ["ps", "-eo", "pid=,stat=,args="], check=True, capture_output=True, text=True
    ).stdout
    return [
        line.strip()
        for line in out.splitlines()
        if marker in line and "ps -eo" not in line and str(os.getpid()) != line.split()[0]
    ]


def assert_no_children_but(server: SSHServer) -> None:
    """No child process and no zombie of this process remains but the server itself."""
    assert [pid for pid in children() if pid != server.pid] == []
