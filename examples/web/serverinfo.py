"""Server info files: how a command-line client finds a local server's token (design §7.3).

Like ``jupyter server list``: each example server started from the command line writes
one JSON file once it is ready and removes it when it exits:

* **where**: ``$TRIO_ACTORS_RUNTIME_DIR`` if set; else ``$XDG_RUNTIME_DIR/trio-actors/``
  (a per-user tmpfs on most Linux desktops); else ``~/.local/share/trio-actors/runtime/``.
  The folder is made with mode 0700, and one owned by someone else is not used.
* **what**: ``<kind>-<pid>.json``, mode 0600, written whole (a temporary file renamed):
  ``{"kind", "url", "pid", "token", "dashboard", "started"}`` (``url`` without the token,
  ``started`` in seconds since the epoch).

:func:`find_token` reads them for a client: the file of a live process, owned by this
user, whose server listens on the port of a loopback address the client was given.
Files whose process is gone (a server that was killed) are ignored and removed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .names import is_loopback

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "ENV_RUNTIME_DIR",
    "ENV_TOKEN",
    "InfoFile",
    "process_alive",
    "ServerInfo",
    "find_token",
    "info_file",
    "list_servers",
    "runtime_dir",
]

LOGGER = logging.getLogger("examples.serverinfo")
#: Environment variable naming the folder of the info files (tests, several setups).
ENV_RUNTIME_DIR = "TRIO_ACTORS_RUNTIME_DIR"
#: Environment variable holding a token: the clients send it, a server started without
#: ``--token`` uses it (so it need not appear on a command line, which ``ps`` shows).
ENV_TOKEN = "TRIO_ACTORS_TOKEN"
#: Largest info file read, in bytes.
_MAX_FILE = 64 * 1024


def runtime_dir() -> Path:
    """The folder of the info files (see the module docstring); not created here."""
    override = os.environ.get(ENV_RUNTIME_DIR)
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg) and os.path.isdir(xdg):
        return Path(xdg) / "trio-actors"
    return Path.home() / ".local" / "share" / "trio-actors" / "runtime"


@attrs.frozen(kw_only=True)
class ServerInfo:
    """What one info file says about a running server."""

    kind: str
    """``job_server`` or ``preview_server``."""
    url: str
    """The websocket address, without the token: ``ws://127.0.0.1:8766``."""
    pid: int
    """The server's process id."""
    token: str | None
    """The token every websocket handshake needs, or None (``--no-token``)."""
    dashboard: str | None = None
    """The dashboard's address (with the token), for a server that has one."""
    started: float = 0.0
    """When the server was ready, seconds since the epoch."""

    @property
    def port(self) -> int | None:
        """The port of :attr:`url`, or None if it has none."""
        try:
            return urllib.parse.urlsplit(self.url).port
        except ValueError:
            return None

    def serves(self, url: str) -> bool:
        """True if a client given ``url`` (a loopback address) reaches this server."""
        try:
            wanted = urllib.parse.urlsplit(url)
            wanted_port = wanted.port
        except ValueError:
            return False
        host = urllib.parse.urlsplit(self.url).hostname or ""
        listens_locally = is_loopback(host) or host in ("0.0.0.0", "::")
        return (
            is_loopback(wanted.hostname or "")
            and listens_locally
            and wanted_port is not None
            and wanted_port == self.port
        )


def _private_dir(path: Path) -> Path | None:
    """``path`` made (mode 0700) or checked: ours and closed to others; else None."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            LOGGER.warning(
                "not writing a server info file: %s is not a folder of this user", path,
                extra={"event": "info_dir_refused", "path": str(path)},
            )  # fmt: skip
            return None
        if stat.S_IMODE(info.st_mode) & 0o077:
            path.chmod(0o700)
    except OSError as exc:
        LOGGER.warning(
            "not writing a server info file in %s: %s", path, exc.strerror or exc,
            extra={"event": "info_dir_failed", "path": str(path)},
        )  # fmt: skip
        return None
    return path


class InfoFile:
    """The info file of this server process: :meth:`write` once ready, :meth:`remove`.

    Args:
        kind: The server's kind, the file name's prefix (``job_server``).

    Attributes:
        path: The file once written, else None.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.path: Path | None = None

    def write(self, *, url: str, token: str | None, dashboard: str | None = None) -> Path | None:
        """Write (or rewrite) the file; returns its path, or None if it could not be
        written (logged as a warning: the server runs on, clients then need ``--token``).
        """
        folder = _private_dir(runtime_dir())
        if folder is None:
            return None
        info = ServerInfo(
            kind=self.kind, url=url, pid=os.getpid(), token=token, dashboard=dashboard,
            started=time.time(),
        )  # fmt: skip
        target = folder / f"{self.kind}-{os.getpid()}.json"
        temporary = target.with_suffix(".tmp")
        try:
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            with open(fd, "w", encoding="utf-8") as file:
                json.dump(attrs.asdict(info), file)
            os.replace(temporary, target)
        except OSError as exc:
            LOGGER.warning(
                "could not write the server info file %s: %s", target, exc.strerror or exc,
                extra={"event": "info_file_failed", "path": str(target)},
            )  # fmt: skip
            return None
        self.path = target
        LOGGER.info(
            "server info file %s written", target,
            extra={"event": "info_file_written", "path": str(target)},
        )  # fmt: skip
        return target

    def remove(self) -> None:
        """Remove the file if it was written; idempotent."""
        path, self.path = self.path, None
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()


@contextlib.contextmanager
def info_file(kind: str) -> Iterator[InfoFile]:
    """An :class:`InfoFile` of ``kind``, removed when the block ends (however it ends)."""
    record = InfoFile(kind)
    try:
        yield record
    finally:
        record.remove()


def _read(path: Path) -> ServerInfo | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
        with open(fd, encoding="utf-8") as file:
            info = os.fstat(file.fileno())
            if info.st_uid != os.getuid() or not stat.S_ISREG(info.st_mode):
                return None  # not ours: never trust (or send) a token from it
            data: Any = json.loads(file.read(_MAX_FILE))
        return ServerInfo(
            kind=str(data["kind"]), url=str(data["url"]), pid=int(data["pid"]),
            token=None if data.get("token") is None else str(data["token"]),
            dashboard=data.get("dashboard"), started=float(data.get("started", 0.0)),
        )  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return None


def process_alive(pid: int) -> bool:
    """True if a process ``pid`` exists (another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive, but not one of ours
        return True
    return True


def list_servers() -> list[ServerInfo]:
    """The info of every running server of this user, newest first.

    Files of processes that are gone are removed on the way.
    """
    folder = runtime_dir()
    found: list[ServerInfo] = []
    try:
        paths = sorted(folder.glob("*.json"))
    except OSError:
        return found
    for path in paths:
        info = _read(path)
        if info is None:
            continue
        if not process_alive(info.pid):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        found.append(info)
    found.sort(key=lambda info: info.started, reverse=True)
    return found


def find_token(url: str) -> str | None:
    """The token of the running local server that ``url`` reaches, or None.

    Only for a loopback ``url``: a token is never sent to another machine from here.
    """
    for info in list_servers():
        if info.token is not None and info.serves(url):
            return info.token
    return None
