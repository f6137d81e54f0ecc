"""The parent's half of a remote helper's start: the ``ssh`` command line, the remote
command that runs the warden, and what a failed ``ssh`` means (design §3.16).

Nothing here does I/O but reading the warden's source once; the helper spawn path runs
the command (phase two of §3.16).
"""

from __future__ import annotations

import functools
import secrets
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "SSH_FAILURE_REASONS",
    "channel_paths",
    "classify_ssh_failure",
    "remote_command",
    "ssh_argv",
    "warden_source",
]

_WARDEN: Final = Path(__file__).with_name("_warden.py")

#: The reasons :func:`classify_ssh_failure` gives, as ``startup_failed`` reasons (§3.3).
SSH_FAILURE_REASONS: Final = (
    "host_unreachable",
    "auth_refused",
    "host_key_rejected",
    "python_missing",
    "ssh_failed",
)
#: What ``ssh`` writes on its stderr for each way the connection fails, in its words.
_SSH_MESSAGES: Final = (
    ("auth_refused", ("Permission denied", "Too many authentication failures")),
    ("host_key_rejected", ("Host key verification failed", "REMOTE HOST IDENTIFICATION")),
    (
        "host_unreachable",
        (
            "Connection refused",
            "Connection timed out",
            "timed out",
            "No route to host",
            "Network is unreachable",
            "Could not resolve hostname",
            "Name or service not known",
            "Connection closed by",
            "Connection reset by",
            "kex_exchange_identification",
        ),
    ),
)
#: ``ssh``'s own exit status for a failure of its own (not the remote command's).
SSH_ERROR_STATUS: Final = 255
#: A POSIX shell's exit status for a command it cannot find.
_NOT_FOUND_STATUS: Final = 127


@functools.cache
def warden_source() -> str:
    """The warden program's text, sent to the remote host as ``python3 -c`` source."""
    return _WARDEN.read_text(encoding="utf-8")


def remote_command(*, python: str = "python3", channel: str | None = None) -> str:
    """The command ``ssh`` asks the remote login shell to run: the warden, inline.

    The shell ``exec``\\ s the interpreter, so no shell process stays between sshd and
    the warden; ``-I`` keeps the remote user's ``PYTHON*`` variables and site packages
    out of the warden (the helper's own command still sees them).

    Args:
        python: The remote interpreter, a name on the remote ``PATH`` or a path.
        channel: The remote Unix socket path the warden listens on for the control
            channel (design §2.5), in a directory the warden creates; None: the
            parent's control frames come on stdin (the warden relays).
    """
    command = f"exec {shlex.quote(python)} -I -c {shlex.quote(warden_source())}"
    return command if channel is None else f"{command} {shlex.quote(channel)}"


def channel_paths(local_folder: str) -> tuple[str, str]:
    """A fresh control channel's two ends: the local socket ``ssh -L`` listens on (in
    ``local_folder``, a private directory of the parent's) and the remote socket the
    warden listens on (in a new directory below ``/tmp`` with a random name, which the
    warden creates with mode 0700 and refuses to reuse).

    Returns:
        ``(local, remote)`` socket paths, each short enough for a socket address.
    """
    return f"{local_folder}/c", f"/tmp/trio-actors-{secrets.token_hex(12)}/c"


def ssh_argv(
    destination: str,
    command: str,
    *,
    connect_timeout: float,
    options: Sequence[str] = (),
    ssh: str = "ssh",
) -> list[str]:
    """The local ``ssh`` command line that runs ``command`` on ``destination``.

    Batch mode (never a password or passphrase prompt: a key or nothing), no pseudo
    terminal (``-T``: the channel carries bytes, not a terminal's line discipline), a
    connect timeout, so a host that does not answer fails the start instead of hanging it,
    and no connection sharing (``ControlMaster=no``, ``ControlPath=none``: each helper's
    link is its own, design §3.16).

    Args:
        destination: ``[user@]host`` as ``ssh`` takes it (``~/.ssh/config`` applies).
        command: The remote command (:func:`remote_command`).
        connect_timeout: Seconds ``ssh`` may take to connect (rounded up to whole
            seconds, at least 1, as ``ConnectTimeout`` takes them).
        options: More ``ssh`` arguments, before the destination (``-p``, ``-i``, ``-o``).
        ssh: The ``ssh`` program.

    Raises:
        ValueError: ``destination`` is empty or starts with ``-`` (it would be read as
            an option), or ``connect_timeout`` is not > 0.
    """
    if not destination or destination.startswith("-"):
        raise ValueError(f"destination must be [user@]host, got {destination!r}")
    if not connect_timeout > 0:
        raise ValueError(f"connect_timeout must be > 0 seconds, got {connect_timeout!r}")
    seconds = max(1, int(-(-connect_timeout // 1)))
    return [
        ssh,
        "-T",
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={seconds}",
        # A connection of its own per helper, whatever ~/.ssh/config says of sharing:
        # the end of the channel is then the end of the link (the warden's partition
        # rule), and the control channel's forwarding ends with the helper instead of
        # staying on a shared master.
        "-o",
        "ControlMaster=no",
        "-o",
        "ControlPath=none",
        *options,
        "--",
        destination,
        command,
    ]


def classify_ssh_failure(returncode: int, stderr: str) -> str:
    """Why a remote start failed before the warden said ``hello`` (design §3.16).

    Args:
        returncode: ``ssh``'s exit status (255: ``ssh`` itself failed; otherwise the
            remote command's).
        stderr: The tail of ``ssh``'s stderr.

    Returns:
        One of :data:`SSH_FAILURE_REASONS`: ``host_unreachable``, ``auth_refused``,
        ``host_key_rejected``, ``python_missing`` (the remote shell found no such
        interpreter), or ``ssh_failed`` for anything else.
    """
    if returncode == SSH_ERROR_STATUS:
        for reason, phrases in _SSH_MESSAGES:
            if any(phrase in stderr for phrase in phrases):
                return reason
    elif returncode == _NOT_FOUND_STATUS:
        return "python_missing"
    return "ssh_failed"
