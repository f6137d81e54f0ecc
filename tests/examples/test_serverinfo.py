"""Server info files and the command-line clients' token (design §7.3).

A default command-line start makes a fresh token, prints it in every address and writes
it to a file only its user can read; the clients find it there (as ``jupyter server
list`` does), or take it from ``--token``, the URL or ``$TRIO_ACTORS_TOKEN``. The folder
of the files is the test's own (``conftest.py``). Real subprocesses, real clock.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from frontdoor_support import TIMEOUT, assert_no_children, first_line

from examples.web.cli import client_target
from examples.web.serverinfo import (
    ENV_RUNTIME_DIR,
    ENV_TOKEN,
    InfoFile,
    ServerInfo,
    find_token,
    info_file,
    list_servers,
    runtime_dir,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


def test_the_runtime_folder_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENV_RUNTIME_DIR, str(tmp_path / "mine"))
    assert runtime_dir() == tmp_path / "mine"
    monkeypatch.delenv(ENV_RUNTIME_DIR)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert runtime_dir() == tmp_path / "trio-actors"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert runtime_dir() == tmp_path / "home" / ".local" / "share" / "trio-actors" / "runtime"


def test_a_file_is_private_found_by_port_and_removed() -> None:
    folder = runtime_dir()
    with info_file("job_server") as record:
        path = record.write(url="ws://127.0.0.1:8766", token="t0ken-t0ken")
        assert path == folder / f"job_server-{os.getpid()}.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert json.loads(path.read_text()) == {
            "kind": "job_server", "url": "ws://127.0.0.1:8766", "pid": os.getpid(),
            "token": "t0ken-t0ken", "dashboard": None,
            "started": pytest.approx(json.loads(path.read_text())["started"]),
        }  # fmt: skip
        assert [info.url for info in list_servers()] == ["ws://127.0.0.1:8766"]
        for url in ("ws://127.0.0.1:8766", "ws://localhost:8766/", "ws://[::1]:8766"):
            assert find_token(url) == "t0ken-t0ken", url
        for url in ("ws://127.0.0.1:8765", "ws://lab.example:8766", "ws://127.0.0.1"):
            assert find_token(url) is None, url
    assert not path.exists()
    assert list_servers() == []


def test_files_of_dead_servers_and_of_other_users_are_not_used(tmp_path: Path) -> None:
    folder = runtime_dir()
    folder.mkdir(parents=True, mode=0o755)
    folder.chmod(0o755)
    process = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                             capture_output=True, text=True, check=True)  # fmt: skip
    dead = ServerInfo(kind="job_server", url="ws://127.0.0.1:9", pid=int(process.stdout), token="x")
    stale = folder / f"job_server-{dead.pid}.json"
    stale.write_text(
        json.dumps({"kind": dead.kind, "url": dead.url, "pid": dead.pid, "token": "x"})
    )
    (folder / "garbage.json").write_text("{not json")
    record = InfoFile("preview_server")
    assert record.write(url="ws://127.0.0.1:9", token=None, dashboard="http://127.0.0.1:9/")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700  # tightened when written
    assert [(i.kind, i.token, i.dashboard) for i in list_servers()] == [
        ("preview_server", None, "http://127.0.0.1:9/")
    ]
    assert not stale.exists()  # the dead server's file is gone
    assert find_token("ws://127.0.0.1:9") is None  # --no-token: nothing to send
    if os.getuid() == 0:  # only root can give a file away
        assert record.path is not None
        os.chown(record.path, 12345, 12345)
        assert list_servers() == []  # someone else's file: never trusted
    record.remove()
    record.remove()  # idempotent


def test_a_folder_of_someone_else_is_not_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(ENV_RUNTIME_DIR, str(tmp_path / "file"))
    (tmp_path / "file").write_text("not a folder")
    assert InfoFile("job_server").write(url="ws://127.0.0.1:1", token="t") is None
    assert "not writing a server info file" in caplog.text


def test_clients_take_the_token_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    with info_file("job_server") as record:
        record.write(url="ws://127.0.0.1:8766", token="from-file")
        assert client_target("127.0.0.1:8766", None) == ("ws://127.0.0.1:8766", "from-file")
        monkeypatch.setenv(ENV_TOKEN, "from-env")
        assert client_target("ws://127.0.0.1:8766", None) == ("ws://127.0.0.1:8766", "from-env")
        url = "http://127.0.0.1:8766/?token=from-url&select=4"
        assert client_target(url, None) == ("ws://127.0.0.1:8766/?select=4", "from-url")
        assert client_target(url, "flag") == ("ws://127.0.0.1:8766/?select=4", "flag")
        monkeypatch.delenv(ENV_TOKEN)
        assert client_target("ws://lab.example:8766", None) == ("ws://lab.example:8766", None)


async def _run(*argv: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(2 * TIMEOUT):
        return await trio.run_process(
            [sys.executable, "-m", *argv], cwd=ROOT, capture_stdout=True, capture_stderr=True,
            check=False,
        )  # fmt: skip


async def test_a_default_start_writes_its_token_and_the_clients_find_it(tmp_path: Path) -> None:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "examples.jobs.server", "--port", "0", "--helpers", "1"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        line = await first_line(process.stdout)
        match = re.fullmatch(rb"listening on (ws://127.0.0.1:\d+)/\?token=([\w-]{32})\n", line)
        assert match, line
        url, token = match.group(1).decode(), match.group(2).decode()
        path = runtime_dir() / f"job_server-{process.pid}.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        info = json.loads(path.read_text())
        assert (info["url"], info["pid"], info["token"]) == (url, process.pid, token)

        done = await _run("examples.jobs.client", "--url", url, "--json", "boot_report")  # found
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["type"] == "boot_report_reply"
        localhost = url.replace("127.0.0.1", "localhost")
        done = await _run("examples.jobs.client", "--url", localhost, "--json", "status", "1")
        assert json.loads(done.stdout)["code"] == "unknown_run"  # connected, then answered
        done = await _run("examples.jobs.client", "--url", url, "--token", "wrong-token", "watch")
        assert done.returncode == 2
        line = done.stderr.decode().strip()
        assert line == (
            f"job_client: cannot connect to {url}: refused: HTTP 403, check --token "
            "(403 Forbidden: missing or wrong token; pass it as ?token=... or an "
            "'Authorization: Bearer ...' header)"
        )
        assert "wrong-token" not in line
        done = await _run(
            "examples.preview.cli.client", url, "--out", str(tmp_path), "--timeout", "1"
        )
        assert b"refused" not in done.stderr  # the token was found (the job server has no
        assert b"list_runs" in done.stderr  # list_runs: the preview client says so)
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(TIMEOUT):
            assert await process.wait() == 0
        assert not path.exists()  # removed at exit
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.stdout.aclose()
