"""The example servers' and clients' command lines: one clear line per failure (design §7).

Options are validated when the command line is read; a busy port is reported before
anything is written; clients say why a connection failed (refused, wrong token, the
server gone) and exit non-zero; user-facing messages never cite the design document. Servers run
in this process or as real subprocesses, on the real clock with short deadlines
(contributing §F.3).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio
from frontdoor_support import TIMEOUT, assert_no_children, first_line
from preview_support import preview_server, server_config
from process_support import interruptible
from trio_websocket import ConnectionClosed, serve_websocket

from actors import EventLogActor, EventLogClient, EventLogConfig, OperationSpec
from examples.jobs.server import JobServerConfig, open_job_server
from examples.jobs.server import main as job_server_main
from examples.preview.cli.client import main as preview_client_main
from examples.preview.server import distinct_paths, reachable_urls
from examples.preview.server import main as preview_server_main
from examples.web.cli import OneLineParser, connection_problem, websocket_url
from examples.web.frontdoor import FrontDoorConfig
from examples.web.launch import add_server_options, server_token, with_token
from examples.web.names import is_loopback
from examples.web.serverinfo import ENV_TOKEN

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from trio_websocket import WebSocketRequest

    from actors import RunStatus

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token"


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    assert "§" not in text
    return lines[0]


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


# -- options -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("main", "argv", "words"),
    [
        (preview_server_main, ["--grace", "-1"], "argument --grace: must be >= 0 seconds"),
        (preview_server_main, ["--poll", "0"], "argument --poll: must be > 0 seconds"),
        (preview_server_main, ["--stall-after", "nan"], "argument --stall-after: must be finite"),
        (preview_server_main, ["--port", "70000"], "argument --port: must be >= 0 and <= 65535"),
        (preview_server_main, ["--helpers", "0"], "argument --helpers: must be >= 1"),
        (preview_server_main, ["--host", "0.0.0.0", "--no-token"], "(not loopback) requires"),
        (preview_server_main, ["--allow-origin", "evil"], "'evil' is not an origin"),
        (job_server_main, ["--grace", "-1"], "argument --grace: must be >= 0 seconds"),
        (job_server_main, ["--grace", "x"], "argument --grace: must be a number of seconds"),
        (job_server_main, ["--port", "-5"], "argument --port: must be >= 0"),
        (job_server_main, ["--helpers", "65"], "argument --helpers: must be >= 1 and <= 64"),
        (job_server_main, ["--host", "0.0.0.0", "--no-token"], "(not loopback) requires a token"),
        (job_server_main, ["--token", "long-enough", "--no-token"], "exclude each other"),
        (job_server_main, ["--allow-host", "a/b"], "'a/b' is not a host name"),
        (job_server_main, ["--max-per-address", "0"], "argument --max-per-address: must be >= 1"),
        (preview_server_main, ["--max-pending", "0"], "argument --max-pending: must be >= 1"),
        (job_server_main, ["--files-root", "/no/such/dir"], "files_root must be an existing"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_status_2(
    capsys: pytest.CaptureFixture[str],
    main: Callable[[list[str]], int],
    argv: list[str],
    words: str,
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = _one_line(captured.err)
    assert words in line, line
    assert line.startswith(("preview_server: ", "job_server: ")), line


# -- a busy port -----------------------------------------------------------------------


@pytest.fixture
def busy_port():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.mark.parametrize("module", ["examples.preview.server", "examples.jobs.server"])
def test_a_port_in_use_is_one_line_and_nothing_is_written(
    tmp_path: Path, busy_port: int, module: str
) -> None:
    cache = tmp_path / "cache"
    extra = ["--cache-dir", str(cache)] if module == "examples.preview.server" else []
    done = _run(module, "--port", str(busy_port), *extra)
    assert done.returncode == 2
    assert done.stdout == ""
    line = _one_line(done.stderr)
    assert f"127.0.0.1:{busy_port}" in line
    assert "already in use" in line
    assert "--port 0" in line
    assert not cache.exists()  # no sample database was written


def test_a_corrupt_ledger_is_one_line_with_its_code(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    ledger.write_bytes(b"not a database at all\n" * 64)
    before = _checksums(tmp_path)
    done = _run("examples.jobs.server", "--port", "0", "--helpers", "1", "--ledger", str(ledger))
    assert done.returncode == 2
    assert done.stdout == ""
    line = _one_line(done.stderr)
    assert line == (
        f"job_server: ledger {str(ledger)!r} is not a SQLite database (bad header); the file "
        "was left untouched"
    )
    assert _checksums(tmp_path) == before


def _checksums(folder: Path) -> dict[str, str]:
    """Every file in ``folder`` (``-wal``/``-shm`` included) by name: its SHA-256."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


async def _finish(run: RunStatus, report: object) -> str:
    return "done"


async def _written_ledger(path: Path) -> None:
    """A real ledger: one run submitted and finished, closed cleanly."""
    actor = EventLogActor(
        EventLogConfig(ledger_path=str(path)),
        operations=[OperationSpec(name="sleep", fields={"seconds"})],
        runners={"sleep": _finish},
    )
    async with trio.open_nursery() as nursery:
        log = EventLogClient(await nursery.start(actor.run), timeout=TIMEOUT)
        receipt = await log.submit("sleep", {"seconds": 0}, request_id="first")
        with trio.fail_after(TIMEOUT):
            while (await log.status(receipt.run_id)).state != "finished":  # noqa: ASYNC110
                await trio.sleep(0.01)
        await log.ref.stop(TIMEOUT)


@pytest.mark.parametrize("module", ["examples.jobs.server", "examples.preview.server"])
async def test_a_damaged_ledger_refuses_the_start_and_stays_byte_identical(
    tmp_path: Path, real_db: Path, module: str
) -> None:
    folder = tmp_path / "ledger"
    folder.mkdir()
    ledger = folder / "ledger.db"
    await _written_ledger(ledger)
    with contextlib.closing(sqlite3.connect(ledger)) as db, db:
        db.execute("UPDATE events SET data = '{not json' WHERE seq = 2")
    before = _checksums(folder)
    assert list(before) == ["ledger.db"]  # closed cleanly: no -wal, no -shm
    options = ["--port", "0", "--helpers", "1", "--ledger", str(ledger)]
    if module == "examples.preview.server":
        options += [str(real_db), "--cache-dir", str(tmp_path / "cache")]
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", module, *options], cwd=ROOT, capture_stdout=True,
            capture_stderr=True, check=False,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    label = {"examples.jobs.server": "job_server", "examples.preview.server": "preview_server"}
    assert _one_line(done.stderr.decode()) == (
        f"{label[module]}: ledger {str(ledger)!r}: table events, seq 2, column data: "
        "'{not json' is not valid JSON; the file was left untouched"
    )
    assert b"listening on" not in done.stdout
    assert _checksums(folder) == before


# -- clients ---------------------------------------------------------------------------


def test_websocket_url_takes_http_and_bare_addresses() -> None:
    assert websocket_url("http://127.0.0.1:8765/") == "ws://127.0.0.1:8765/"
    assert websocket_url("https://example.org") == "wss://example.org"
    assert websocket_url("127.0.0.1:8766") == "ws://127.0.0.1:8766"
    assert websocket_url("ws://[::1]:1") == "ws://[::1]:1"
    with pytest.raises(ValueError, match="not a server address"):
        websocket_url("ftp://127.0.0.1:1")


def test_clients_report_nothing_listening(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    status = preview_client_main([f"http://127.0.0.1:{port}", "--out", str(tmp_path)])
    assert status == 2
    line = _one_line(capsys.readouterr().err)
    assert line == f"preview_client: cannot connect to ws://127.0.0.1:{port}: connection refused"
    done = _run("examples.jobs.client", "--url", f"ws://127.0.0.1:{port}", "status", "1")
    assert done.returncode == 2
    assert _one_line(done.stderr).endswith(": connection refused")


def test_clients_name_an_unknown_host_and_a_folder_they_cannot_make(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A name that does not resolve: not "unknown error -2" (a resolver's code as errno).
    problem = connection_problem(socket.gaierror(socket.EAI_NONAME, "Name or service not known"))
    assert problem == "unknown host (name or service not known)"
    # An --out that cannot be a folder is bad input, said before connecting anywhere.
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exited:
        preview_client_main(["ws://127.0.0.1:1", "--out", str(blocker / "previews")])
    assert exited.value.code == 2
    line = _one_line(capsys.readouterr().err)
    assert line == (
        f"preview_client: argument --out: cannot make the folder '{blocker / 'previews'}': "
        "not a directory (see --help)"
    )


async def test_an_image_the_client_cannot_save_is_no_connection_problem(
    real_db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    for run in range(1, 13):  # every image's file name is taken by a folder
        for kind in ("thumbnail", "preview"):
            (out / f"run{run}-{kind}.png").mkdir(parents=True)
    config = server_config(real_db, tmp_path, helpers=1)
    async with preview_server(config, token=TOKEN) as (front, _app):
        done = await _client(
            "examples.preview.cli.client", front.url, "--token", TOKEN, "--out", str(out)
        )
    assert done.returncode == 1
    line = _one_line(done.stderr.decode())
    assert re.fullmatch(
        rf"preview_client: cannot save {re.escape(str(out))}/run\d+-(thumbnail|preview)\.png: "
        "is a directory",
        line,
    ), line


async def test_selecting_a_run_the_database_lacks_exits_2(real_db: Path, tmp_path: Path) -> None:
    config = server_config(real_db, tmp_path, helpers=1)
    async with preview_server(config, token=TOKEN) as (front, _app):
        done = await _client(
            "examples.preview.cli.client", front.url, "--token", TOKEN, "--select", "99",
            "--out", str(tmp_path / "out"),
        )  # fmt: skip
    assert done.returncode == 2
    line = _one_line(done.stderr.decode())
    assert line == "preview_client: --select 99: unknown_run: no run 99 in this database", line


@contextlib.asynccontextmanager
async def _started(argv: list[str]) -> AsyncIterator[trio.Process]:
    """A client as a person starts it (Ctrl-C acts); killed if the test leaves it running."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", *argv], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, preexec_fn=interruptible,
    )  # fmt: skip
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()


async def _ended(process: trio.Process) -> tuple[int, str]:
    """Wait for ``process``; its exit status and the whole of its stderr."""
    assert process.stderr is not None
    errors = b""
    with trio.fail_after(2 * TIMEOUT):
        while chunk := await process.stderr.receive_some():
            errors += chunk
        return await process.wait(), errors.decode()


async def test_ctrl_c_while_a_client_waits_is_one_line(nursery: trio.Nursery) -> None:
    asked = trio.Semaphore(0)

    async def server(request: WebSocketRequest) -> None:  # hears each request, answers none
        ws = await request.accept()
        with contextlib.suppress(ConnectionClosed):
            while True:
                await ws.get_message()
                asked.release()

    listening = await nursery.start(serve_websocket, server, "127.0.0.1", 0, None)
    url = f"ws://127.0.0.1:{listening.port}"
    for argv, name in (
        (["examples.preview.cli.client", url, "--token", TOKEN, "--databases"], "preview_client"),
        (["examples.jobs.client", "--url", url, "--token", TOKEN, "status", "1"], "job_client"),
    ):
        async with _started(argv) as process:
            with trio.fail_after(2 * TIMEOUT):
                await asked.acquire()  # the client waits for its answer, inside trio.run
            process.send_signal(signal.SIGINT)
            status, errors = await _ended(process)
        assert status == 130
        assert _one_line(errors) == f"{name}: interrupted"


async def test_a_second_ctrl_c_stops_waiting_for_a_run(nursery: trio.Nursery) -> None:
    cancel_asked = trio.Event()

    async def server(request: WebSocketRequest) -> None:  # admits, starts, never ends
        ws = await request.accept()
        with contextlib.suppress(ConnectionClosed):
            while True:
                message = json.loads(await ws.get_message())
                answers: list[dict[str, object]] = []
                if message["type"] == "subscribe":
                    answers = [{"type": "events", "events": [], "cursor": 0}]
                elif message["type"] == "submit":
                    answers = [
                        {"type": "receipt", "admitted": True, "run_id": 7, "snapshot_id": "s",
                         "revision": 0, "event_cursor": 0, "coalesced": False},
                        {"type": "event", "seq": 1, "kind": "job_started", "run_id": 7,
                         "data": {}},
                    ]  # fmt: skip
                elif message["type"] == "cancel":
                    cancel_asked.set()  # never answered: a server too busy to say
                for answer in answers:
                    await ws.send_message(json.dumps({"request_id": message["request_id"],
                                                      **answer}))  # fmt: skip

    listening = await nursery.start(serve_websocket, server, "127.0.0.1", 0, None)
    argv = ["examples.jobs.client", "--url", f"ws://127.0.0.1:{listening.port}", "--token",
            TOKEN, "submit", "sleep", '{"seconds": 60}']  # fmt: skip
    async with _started(argv) as process:
        assert process.stdout is not None
        shown = b""
        with trio.fail_after(2 * TIMEOUT):
            while b"run 7: running" not in shown:  # following: Ctrl-C now cancels the run
                shown += await process.stdout.receive_some()
        process.send_signal(signal.SIGINT)
        with trio.fail_after(2 * TIMEOUT):
            await cancel_asked.wait()
        process.send_signal(signal.SIGINT)
        status, errors = await _ended(process)
    assert status == 130
    assert errors.splitlines() == [
        "cancelling run 7 (Ctrl-C again to stop waiting)",
        "stopped waiting for run 7; `status 7` tells how it ends",
    ]


@pytest.mark.parametrize(
    ("arguments", "words"),
    [("{x", "arguments must be a JSON object: Expecting"), ("[1]", "got list")],
)
def test_job_client_refuses_bad_json_arguments(arguments: str, words: str) -> None:
    done = _run("examples.jobs.client", "submit", "sleep", arguments)
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert line.startswith("job_client: arguments must be a JSON object: "), line
    assert words in line


async def _client(module: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(2 * TIMEOUT):
        return await trio.run_process(
            [sys.executable, "-m", module, *args], cwd=ROOT, capture_stdout=True,
            capture_stderr=True, check=False,
        )  # fmt: skip


async def test_clients_against_a_job_server(tmp_path: Path) -> None:
    config = JobServerConfig(front_door=FrontDoorConfig(port=0, token=TOKEN), helpers=1)
    async with open_job_server(config) as server:
        url = server.front.url.replace("ws://", "http://")  # taken as ws://
        # A wrong or missing token: one line naming the refusal.
        for argv in (["--token", "wrong-token!"], []):
            done = await _client("examples.jobs.client", "--url", url, *argv, "boot_report")
            assert done.returncode == 2
            line = _one_line(done.stderr.decode())
            assert line.endswith("refused: HTTP 403, check --token (403 Forbidden: missing "
                                 "or wrong token; pass it as ?token=... or an 'Authorization: "
                                 "Bearer ...' header)"), line  # fmt: skip
        done = await _client(  # a subprocess: trio-websocket leaks the refused socket
            "examples.preview.cli.client", url, "--out", str(tmp_path), "--token", "nope-nope"
        )
        assert done.returncode == 2
        assert "refused: HTTP 403, check --token" in _one_line(done.stderr.decode())
        # A job that fails, for a person: admitted, then the verdict; exit status 1.
        done = await _client("examples.jobs.client", "--url", url, "--token", TOKEN,
                             "submit", "crash")  # fmt: skip
        assert done.returncode == 1, done.stderr
        lines = done.stdout.decode().splitlines()
        run_id = int(lines[0].split()[1].rstrip(":"))
        assert lines[0] == f"run {run_id}: submitted crash"
        assert lines[-1].startswith(f"run {run_id}: failed: helper_exited: "), lines
        assert done.stderr == b""
        # --json: the receipt, the run's own events, its final status; exit status 0.
        done = await _client("examples.jobs.client", "--url", url, "--token", TOKEN, "--json",
                             "submit", "sleep", '{"seconds": 0}')  # fmt: skip
        assert done.returncode == 0, done.stderr
        messages = [json.loads(line) for line in done.stdout.decode().splitlines()]
        receipt, *events, final = messages
        assert (receipt["type"], receipt["admitted"]) == ("receipt", True)
        assert {m["run_id"] for m in events} == {receipt["run_id"]}  # only its own run
        assert [m["kind"] for m in events][-1] == "job_finished"
        assert (final["type"], final["state"]) == ("status_reply", "finished")
        assert final["verdict"] == "ok"
        # The same for a person: the result on its own line.
        done = await _client("examples.jobs.client", "--url", url, "--token", TOKEN,
                             "submit", "sleep", '{"seconds": 0.2}')  # fmt: skip
        assert done.returncode == 0, done.stderr
        lines = done.stdout.decode().splitlines()
        assert lines[-2].endswith(": ok"), lines
        assert lines[-1].startswith("result: {"), lines
        # resume --override reaches the server (a finished run is already decided).
        done = await _client("examples.jobs.client", "--url", url, "--token", TOKEN, "--json",
                             "resume", "--override", str(receipt["run_id"]))  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert json.loads(done.stdout.decode())["code"] == "already_decided"
        assert _one_line(done.stderr.decode()).startswith("job_client: not resumed: already_")
        # status, for a person: the verdict word.
        done = await _client("examples.jobs.client", "--url", url, "--token", TOKEN,
                             "status", str(run_id))  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode().startswith(f"run {run_id}: failed: helper_exited")

        # The server goes away mid-stream: one line, exit status 1.
        async with trio.open_nursery() as nursery:
            results: list[subprocess.CompletedProcess[bytes]] = []

            async def follow() -> None:
                argv = ["--url", url, "--token", TOKEN, "submit", "sleep", '{"seconds": 60}']
                results.append(await _client("examples.jobs.client", *argv))

            nursery.start_soon(follow)
            with trio.fail_after(TIMEOUT):
                while not server.front.connections:  # noqa: ASYNC110 - another process
                    await trio.sleep(0.05)
            await trio.sleep(0.3)  # the submit is on its way or answered
            server.front.close()
    (done,) = results
    assert done.returncode == 1, done.stderr
    line = _one_line(done.stderr.decode())
    assert (
        "the server closed the connection (1001 GOING_AWAY: server shutting down; cursor=" in line
    )
    assert line.endswith(
        " did not finish: with a ledger the server holds it at its next start (resume or "
        "discard it then)"
    ), line


async def _client_unread(module: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run a client whose stdout is a pipe nobody reads any more (``... | head -0``)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        with trio.fail_after(2 * TIMEOUT):
            return await trio.run_process(
                [sys.executable, "-m", module, *args], cwd=ROOT, stdout=write_end,
                capture_stderr=True, check=False,
            )  # fmt: skip
    finally:
        os.close(write_end)


async def test_a_reader_that_stops_reading_is_no_connection_problem(
    real_db: Path, tmp_path: Path
) -> None:
    # Each client's output goes to a closed pipe: it stops quietly with status 1, and
    # never says "cannot connect ...: broken pipe" about a server that answered.
    config = JobServerConfig(front_door=FrontDoorConfig(port=0, token=TOKEN), helpers=1)
    async with open_job_server(config) as server:
        url, token = server.front.url, ["--token", TOKEN]
        done = await _client("examples.jobs.client", "--url", url, *token, "submit", "sleep",
                             '{"seconds": 0}')  # fmt: skip
        assert done.returncode == 0, done.stderr
        done = await _client_unread("examples.jobs.client", "--url", url, *token, "watch", "0")
        assert (done.returncode, done.stderr) == (1, b"")
    preview = server_config(real_db, tmp_path, helpers=1)
    async with preview_server(preview, token=TOKEN) as (front, _app):
        for argv in (["--databases"], ["--out", str(tmp_path / "out")]):
            done = await _client_unread("examples.preview.cli.client", front.url, *token, *argv)
            assert (done.returncode, done.stderr) == (1, b""), argv
        assert len(list((tmp_path / "out").glob("*.png"))) == 24  # it did its work


# -- messages ----------------------------------------------------------------------------


def test_no_user_facing_message_cites_the_design_doc() -> None:
    """Only docstrings and comments may say "design §"; strings shown to people may not."""
    with pytest.raises(ValueError, match="requires a token") as refused:
        FrontDoorConfig(host="0.0.0.0")
    assert "§" not in str(refused.value)
    found = []
    for path in sorted((ROOT / "examples").rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        found += [
            f"{path.name}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "design §" in node.value
            and id(node) not in docstrings
        ]
    assert found == []


def test_the_server_token_comes_from_the_flag_the_environment_or_chance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parser = OneLineParser(prog="server")
    add_server_options(parser, port=1)
    assert server_token(parser, parser.parse_args(["--token", "flag-token"])) == "flag-token"
    assert server_token(parser, parser.parse_args(["--no-token"])) is None
    monkeypatch.setenv(ENV_TOKEN, "env-token-123")
    assert server_token(parser, parser.parse_args([])) == "env-token-123"
    monkeypatch.delenv(ENV_TOKEN)
    first, second = (server_token(parser, parser.parse_args([])) for _ in range(2))
    assert first != second
    assert re.fullmatch(r"[\w-]{32}", first or "")
    assert with_token("ws://127.0.0.1:1", "a b/c") == "ws://127.0.0.1:1/?token=a+b%2Fc"
    assert with_token("http://h:1/?select=4", "t") == "http://h:1/?select=4&token=t"
    assert with_token("ws://127.0.0.1:1", None) == "ws://127.0.0.1:1"


async def test_the_preview_server_says_what_its_ledger_holds_from_before(
    tmp_path: Path, real_db: Path
) -> None:
    ledger = tmp_path / "ledger.db"
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "examples.preview.server", str(real_db), "--port", "0",
         "--helpers", "1", "--ledger", str(ledger), "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        lines = [(await first_line(process.stdout)).decode() for _ in range(4)]
        assert lines[0].startswith("starting: ")
        assert lines[1].startswith("listening on ws://127.0.0.1:")
        assert lines[2].startswith("dashboard: http://127.0.0.1:")
        assert lines[3] == "held from before: none\n"
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(2 * TIMEOUT):
            rest = b""
            while chunk := await process.stdout.receive_some():
                rest += chunk
            assert await process.wait() == 0
        assert rest == b""  # every run was decided at shutdown: none is left held
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.stdout.aclose()


def test_a_wildcard_bind_is_announced_under_names_a_browser_opens() -> None:
    urls = reachable_urls("ws://0.0.0.0:8765")
    assert urls
    assert not any("0.0.0.0" in url for url in urls)
    assert urls[-1] == "ws://127.0.0.1:8765"
    host = socket.gethostname()
    if not is_loopback(host):
        assert any(url.startswith(f"ws://{host}") for url in urls), urls
    assert all(url.endswith(":8765") for url in urls)
    assert reachable_urls("ws://127.0.0.1:8765") == ["ws://127.0.0.1:8765"]
    assert reachable_urls("ws://[::]:1") != ["ws://[::]:1"]


def test_a_path_given_twice_is_served_once(tmp_path: Path, real_db: Path) -> None:
    db = tmp_path / "a.db"
    shutil.copyfile(real_db, db)
    (tmp_path / "link.db").symlink_to(db)
    named = [db, tmp_path / "." / "a.db", tmp_path / "link.db", tmp_path]
    assert distinct_paths(named) == [db, tmp_path]
    assert distinct_paths([db, db]) == [db]


async def test_the_server_on_every_interface_prints_reachable_addresses(
    tmp_path: Path, real_db: Path
) -> None:
    db = tmp_path / "a.db"
    shutil.copyfile(real_db, db)
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "examples.preview.server", str(db), str(db),
         str(tmp_path / "." / "a.db"), "--host", "0.0.0.0", "--port", "0", "--helpers", "1",
         "--token", "wide-token", "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        lines = [(await first_line(process.stdout)).decode().strip() for _ in range(3)]
        assert lines[0].startswith("starting: ")  # one database: no "watching:" of three
        port = re.fullmatch(r"listening on ws://0\.0\.0\.0:(\d+)/\?token=wide-token", lines[1])
        assert port is not None, lines
        assert lines[2].startswith("dashboard: http://"), lines
        assert "0.0.0.0" not in lines[2]
        assert lines[2].endswith(f":{port[1]}/?token=wide-token")
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(2 * TIMEOUT):
            rest = b""
            while chunk := await process.stdout.receive_some():
                rest += chunk
            assert await process.wait() == 0
        also = rest.decode().splitlines()
        assert f"also reachable as: http://127.0.0.1:{port[1]}/?token=wide-token" in also
        assert not any("0.0.0.0" in line for line in also)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.stdout.aclose()
