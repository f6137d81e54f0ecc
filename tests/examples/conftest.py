"""Fixtures for the example tests: private copies of the real QCoDeS sample database, and
a private folder for the servers' info files.

Tests never open ``tests/data/qcodes_sample.db`` in place: even a read-only SQLite
connection leaves ``-wal``/``-shm`` files beside a WAL database.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from examples.web.serverinfo import ENV_RUNTIME_DIR, ENV_TOKEN

DATA = Path(__file__).resolve().parents[1] / "data" / "qcodes_sample.db"
PLOTS = DATA.with_name("qcodes_plots.db")


@pytest.fixture(scope="session")
def real_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session-wide copy of the real file; tests must not change it."""
    target = tmp_path_factory.mktemp("real") / "qcodes_sample.db"
    shutil.copyfile(DATA, target)
    return target


@pytest.fixture
def writable_db(tmp_path: Path) -> Path:
    """A copy of the real file that this test may change."""
    target = tmp_path / "qcodes_sample.db"
    shutil.copyfile(DATA, target)
    return target


@pytest.fixture(scope="session")
def plots_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session-wide copy of the plot-rules sample (``make_plot_samples.py``)."""
    target = tmp_path_factory.mktemp("plots") / "qcodes_plots.db"
    shutil.copyfile(PLOTS, target)
    return target


@pytest.fixture(scope="session")
def status_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database written by QCoDeS itself, one run per status (:mod:`qcodes_statuses`);
    skips the test when QCoDeS is not installed. Tests must not change it."""
    pytest.importorskip("qcodes")
    from qcodes_statuses import write_status_database

    return write_status_database(tmp_path_factory.mktemp("statuses") / "statuses.db")


@pytest.fixture(autouse=True)
def _private_runtime_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Servers started by a test (and their subprocesses) write their info files into a
    folder of the test, and no token from the environment reaches a client."""
    monkeypatch.setenv(ENV_RUNTIME_DIR, str(tmp_path_factory.mktemp("runtime") / "trio-actors"))
    monkeypatch.delenv(ENV_TOKEN, raising=False)
