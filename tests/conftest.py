"""Test-suite root: its folder is on ``sys.path`` so ``process_support`` is importable.

Bytecode caching is turned back on for the run and for every process it starts: the
suite starts hundreds of Python processes (helpers, servers, clients, tutorial
programs), and with ``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__`` yet each one
compiles the project's modules from source again, and pytest rewrites every test module
again (the benchmarks clear it for their children likewise). ``__pycache__`` is ignored
by git, and a cache that cannot be written is skipped by Python.

The PostgreSQL fixtures (``postgres_server``, ``pg_url``, ``ledger_at``) start one
throwaway server per session (per xdist worker) only when a test asks for one
(``tests/pg_support.py``).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import pytest
from pg_support import PostgresServer, running_server

if TYPE_CHECKING:
    from collections.abc import Iterator

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server for the session (see ``tests/pg_support.py``)."""
    with running_server() as server:
        yield server


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """The URL of a fresh, empty schema on the session's PostgreSQL server."""
    return postgres_server.fresh_url()


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_at(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> str:
    """Where a test's ledger lives, once per engine: a SQLite file, a PostgreSQL URL."""
    if request.param == "sqlite":
        return os.path.join(tmp_path, "ledger.db")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.fresh_url()
