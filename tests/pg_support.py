"""A throwaway PostgreSQL server for the tests: real, local, gone afterwards.

:class:`PostgresServer` runs the OS package's binaries (``/usr/lib/postgresql/*/bin``:
``initdb``, ``postgres``) on a data directory in a temporary directory, listening on a
Unix socket only (no TCP port), as an unprivileged user when the tests run as root
(``initdb`` refuses root): ``nobody``, through ``setpriv``, owning the temporary directory.
``pg_ctl`` starts it, so it is no child of the test process.
Durability is off (``fsync=off``): the tests check the ledger's logic, not the disk.

One server per test session (per xdist worker); each test gets a fresh, empty schema
(:meth:`PostgresServer.fresh_url`: ~10 ms, where a database from a template takes
~300 ms) in one database, named by the URL's ``search_path``. Teardown stops the
server with a fast shutdown (``pg_ctl stop -m fast``), kills it after a grace, waits until
its process is gone, and removes the directory.

Without PostgreSQL the tests that need it skip, except in CI (``CI=true``), where they
fail: CI installs it (``.ci/run``).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["PostgresServer", "committed", "find_binaries", "require_postgres", "running_server"]

_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 10.0
_USER = "nobody"
_DATABASE = "ledgers"


def find_binaries() -> str | None:
    """The newest ``/usr/lib/postgresql/N/bin`` holding ``initdb`` and ``postgres``."""
    found = [
        os.path.dirname(path)
        for path in glob.glob("/usr/lib/postgresql/*/bin/initdb")
        if os.access(os.path.join(os.path.dirname(path), "postgres"), os.X_OK)
    ]

    def version(path: str) -> tuple[int, ...]:
        number = path.split("/")[-2]
        return tuple(int(p) for p in number.split(".") if p.isdigit())

    return max(found, key=version) if found else None


def require_postgres() -> str:
    """The binaries' directory; skip the test without them, or fail it in CI."""
    binaries = find_binaries()
    if binaries is None:
        message = "PostgreSQL is not installed (apt-get install postgresql)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI must run these tests", pytrace=False)
        pytest.skip(message)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.fail("psycopg is not installed (the test extra installs it)", pytrace=False)
    return binaries


@contextlib.contextmanager
def running_server() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL server, started, and stopped (its files removed) at the end;
    the test is skipped without the binaries (failed in CI)."""
    server = PostgresServer(require_postgres())
    try:
        server.start()
        yield server
    finally:
        server.close()


def committed(where: str | os.PathLike[str], sql: str) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` in the ledger at ``where`` (a SQLite file or a PostgreSQL
    URL), read through a connection of its own."""
    where = os.fspath(where)
    if where.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(where, autocommit=True) as conn:
            return [tuple(row) for row in conn.execute(sql.encode()).fetchall()]
    import sqlite3

    conn = sqlite3.connect(f"file:{where}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _state(pid: int) -> str | None:
    """The state letter of ``pid`` (``Z`` for a zombie), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0]
    except OSError:
        return None


class PostgresServer:
    """One PostgreSQL server on a Unix socket in a temporary directory."""

    def __init__(self, binaries: str) -> None:
        self._binaries = binaries
        self.root = tempfile.mkdtemp(prefix="actors-pg-")
        self.data = os.path.join(self.root, "data")
        self.socket_dir = os.path.join(self.root, "run")
        self.pid: int | None = None
        self._names = itertools.count(1)
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            entry = pwd.getpwnam(_USER)
            self._as_user = [
                "setpriv",
                f"--reuid={entry.pw_uid}",
                f"--regid={entry.pw_gid}",
                "--clear-groups",
                "--",
            ]
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        os.mkdir(self.socket_dir)
        if os.geteuid() == 0:
            os.chown(self.socket_dir, entry.pw_uid, entry.pw_gid)

    def _run(self, *argv: str) -> None:
        result = subprocess.run(
            [*self._as_user, *argv],
            capture_output=True,
            timeout=_START_TIMEOUT,
            check=False,
            cwd=self.root,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {result.stderr.decode(errors='replace')}")

    def start(self) -> None:
        """initdb, then start ``postgres`` and wait until it accepts connections."""
        self._run(
            os.path.join(self._binaries, "initdb"),
            "-D",
            self.data,
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        self.launch()
        self.admin(f"CREATE DATABASE {_DATABASE} TEMPLATE template0")

    def launch(self) -> None:
        """Start the server on the data directory (again, after :meth:`stop`).

        Through ``pg_ctl``, so the server is not a child of the test process (whose
        tests assert that they leave no child); :meth:`stop` waits until it is gone.
        """
        options = " ".join(
            [
                f"-k {self.socket_dir}",
                "-c listen_addresses=''",
                "-c fsync=off",
                "-c full_page_writes=off",
                "-c max_connections=200",
                "-c shared_buffers=32MB",
            ]
        )
        log = os.path.join(self.root, "postgres.log")
        self._pg_ctl("start", "-w", "-t", str(int(_START_TIMEOUT)), "-l", log, "-o", options)
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            self.pid = int(f.readline())

    @property
    def running(self) -> bool:
        """True between :meth:`launch` and :meth:`stop`."""
        return self.pid is not None

    def _pg_ctl(self, *args: str) -> None:
        self._run(os.path.join(self._binaries, "pg_ctl"), "-D", self.data, *args)

    def log_tail(self) -> str:
        """The end of the server's log, for failure messages."""
        try:
            with open(os.path.join(self.root, "postgres.log"), "rb") as f:
                return f.read()[-2000:].decode(errors="replace")
        except OSError:
            return ""

    def url(self, database: str, schema: str | None = None) -> str:
        """The URL of ``database`` (and ``schema``) on this server, over its socket."""
        host = urllib.parse.quote(self.socket_dir, safe="")
        url = f"postgresql://postgres@/{database}?host={host}"
        if schema is not None:
            url += "&options=" + urllib.parse.quote(f"-c search_path={schema}", safe="")
        return url

    def admin(self, sql: str, *params: Any, database: str = "postgres") -> list[Any]:
        """Run one statement (autocommit) as the superuser; return its rows, if any."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cur = conn.execute(sql.encode(), params or None)
            return cur.fetchall() if cur.description is not None else []

    def fresh_url(self) -> str:
        """The URL of a fresh, empty schema (the ledger's tables go there)."""
        name = f"s{next(self._names)}"
        self.admin(f"CREATE SCHEMA {name}", database=_DATABASE)
        return self.url(_DATABASE, name)

    def stop(self) -> None:
        """Fast shutdown; SIGKILL if it hangs; returns once its process is gone."""
        pid, self.pid = self.pid, None
        if pid is None:
            return
        try:
            self._pg_ctl("stop", "-w", "-t", str(int(_STOP_TIMEOUT)), "-m", "fast")
        except (RuntimeError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + _STOP_TIMEOUT
        while _state(pid) not in ("Z", None):
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres (pid {pid}) did not stop")
            time.sleep(0.02)  # not our child (pg_ctl started it): no exit event to wait on

    def close(self) -> None:
        """Stop the server and remove its directory."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
