"""Helpers on other hosts: the warden and the ``ssh`` command that runs it (design §3.16).

The warden (``_warden.py``) is a stdlib-only program that runs on the remote host and owns
the remote half of one helper's life; the parent speaks to it in the control frames of
:mod:`protocol.warden`. ``_ssh.py`` builds the command lines and reads ``ssh``'s failures.
"""

from __future__ import annotations

from ._ssh import SSH_FAILURE_REASONS as SSH_FAILURE_REASONS
from ._ssh import channel_paths as channel_paths
from ._ssh import classify_ssh_failure as classify_ssh_failure
from ._ssh import remote_command as remote_command
from ._ssh import ssh_argv as ssh_argv
from ._ssh import warden_source as warden_source

__all__ = [
    "SSH_FAILURE_REASONS",
    "channel_paths",
    "classify_ssh_failure",
    "remote_command",
    "ssh_argv",
    "warden_source",
]
