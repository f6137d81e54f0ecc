"""The preview server end to end: a real process, real helpers, a real websocket (design §7.2).

The end-to-end test runs ``python -m examples.preview.server`` as a subprocess on a copy
of the real QCoDeS sample (so it also proves the exit status and the signal handling),
on the real clock with short intervals and generous deadlines (contributing §F.3).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import urllib.parse
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio
from frontdoor_support import (
    Client,
    assert_no_children,
    children,
    is_zygote,
    logged,
    pid_gone,
)
from preview_support import (
    REPO,
    SIZES,
    Seen,
    connect,
    decode_png,
    fetch_png,
    preview_server,
    pump,
    server_config,
)
from process_support import interruptible, unread_pipe_bytes
from trio_websocket import (
    ConnectionClosed,
    WebSocketConnection,
    open_websocket_url,
    wrap_client_stream,
)

from examples.preview.cli.client import collect, listing
from examples.preview.cli.client import main as client_main

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

#: Runs of the real sample with a clear non-ok status (shared/data/README.md).
EMPTY_RUN, INTERRUPTED_RUN, INCOMPLETE_RUN = 10, 11, 12
ALL_RUNS = set(range(1, 13))
LIFECYCLE = ["job_queued", "job_started"]


async def _start_server(db: Path, tmp_path: Path, *extra: str) -> tuple[trio.Process, str, Path]:
    """Start the server; return it, the websocket address it printed (with its token)
    and the file of its stderr."""
    stderr = tmp_path / "server.err"
    with stderr.open("wb") as sink:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "examples.preview.server", str(db), "--port", "0",
             "--cache-dir", str(tmp_path / "cache"), "--poll", "0.2", "--grace", "2", *extra],
            cwd=REPO, stdout=subprocess.PIPE, stderr=sink,
        )  # fmt: skip
    assert process.stdout is not None
    text = b""
    try:
        with trio.fail_after(30):
            while b"\ndashboard: " not in text or not text.endswith(b"\n"):
                chunk = await process.stdout.receive_some(4096)
                assert chunk, f"server exited early: {stderr.read_text()}"
                text += chunk
        # A fresh token each start, in every address printed (design §7.3).
        match = re.search(rb"listening on ws://127.0.0.1:(\d+)/\?token=([\w-]{32})\n", text)
        assert match, text
        port, token = match.group(1).decode(), match.group(2).decode()
        assert f"\ndashboard: http://127.0.0.1:{port}/?token={token}\n".encode() in text
        assert b"dashboard as a file" not in text  # file:// pages are refused by default
    except BaseException:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
        raise
    return process, f"ws://127.0.0.1:{port}/?token={token}", stderr


async def _http_get(url: str, path: str) -> bytes:
    """The whole answer to ``GET path`` on the server at ``url`` (a ws:// address)."""
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream(parts.hostname, parts.port)
        async with stream:
            head = f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n\r\n"
            await stream.send_all(head.encode())  # one-shot: the answer ends at the close
            answer = b""
            while chunk := await stream.receive_some(65536):
                answer += chunk
    return answer


async def test_end_to_end_on_the_real_database(writable_db: Path, tmp_path: Path) -> None:
    process, url, stderr = await _start_server(writable_db, tmp_path, "--stall-after", "1.5")
    token = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["token"][0]
    seen = Seen()
    pngs: dict[tuple[int, str], bytes] = {}
    try:
        async with open_websocket_url(url, max_message_size=4 * 1024 * 1024) as ws:
            client = Client(ws)
            seen.add(await client.request("subscribe", cursor=0))
            run_list = await client.request("list_runs")
            assert run_list["type"] == "run_list"
            assert [r["run_id"] for r in run_list["runs"]] == sorted(ALL_RUNS)
            live = {r["run_id"]: r for r in run_list["runs"]}[INCOMPLETE_RUN]
            assert live["completed"] is False
            assert live["rows"] == 120
            assert (await client.request("select", run_id=4))["type"] == "ok"

            # A malformed message is answered with an error; the connection stays up.
            await client.send("{not json")
            error = await client.answer(None)
            assert error["code"] == "invalid_message"
            unknown = await client.request("select", run_id=999)
            assert unknown["code"] == "unknown_run"
            assert unknown["retryable"] is False

            def done() -> bool:
                return all(seen.finished(r) for r in ALL_RUNS) and all(
                    seen.newest(r, k) for r in ALL_RUNS for k in SIZES
                )

            for message in client.pushed:
                seen.add(message)
            client.pushed.clear()
            with trio.fail_after(40):
                await pump(client, seen, done)
            started = children(process.pid)  # its helpers and their zygote (§3.17)
            helpers = [pid for pid in started if not is_zygote(pid)]
            for run in ALL_RUNS:  # every image by its URL, while the server runs
                for kind in SIZES:
                    notice = seen.newest(run, kind)
                    assert notice is not None
                    pngs[run, kind] = await fetch_png(url, notice, token)
            assert len(helpers) == 2, helpers
        page = await _http_get(url, "/?select=4")  # the dashboard, on the same port
        assert page.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"\r\nContent-Type: text/html; charset=utf-8\r\n" in page
        assert (
            page.split(b"\r\n\r\n", 1)[1]
            == (REPO / "examples" / "preview" / "dashboard.html").read_bytes()
        )
    finally:
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(15):
            status = await process.wait()
    assert status == 0, stderr.read_text()
    assert "Traceback" not in stderr.read_text()
    assert all(pid_gone(pid) for pid in started)
    assert_no_children()

    for run in ALL_RUNS:  # lifecycle order: queued < started < progress* < finished
        kinds = [e["kind"] for e in seen.by_run[run]]
        assert kinds[:2] == LIFECYCLE, (run, kinds)
        assert kinds[-1] == "job_finished", (run, kinds)
        assert set(kinds[2:-1]) == {"job_progress"}, (run, kinds)
        seqs = [e["seq"] for e in seen.by_run[run]]
        assert seqs == sorted(set(seqs))
        notes = {e["data"].get("note") for e in seen.by_run[run]}
        assert {"metadata", "thumbnail", "preview"} <= notes, (run, notes)
        for kind, size in SIZES.items():
            notice = seen.newest(run, kind)
            assert notice is not None
            assert notice["mime"] == "image/png"
            assert (notice["width"], notice["height"]) == size
            assert decode_png(pngs[run, kind]).size == size
    verdicts = {r: seen.finished(r)["verdict"] for r in ALL_RUNS}  # type: ignore[index]
    assert verdicts == {
        **{r: "ok" for r in ALL_RUNS},
        EMPTY_RUN: "empty",
        INTERRUPTED_RUN: "interrupted",
        INCOMPLETE_RUN: "incomplete",
    }
    for run in (EMPTY_RUN, INTERRUPTED_RUN, INCOMPLETE_RUN):
        result: dict[str, Any] = seen.finished(run)["result"]  # type: ignore[index]
        assert result["status"] == verdicts[run], result
        assert result["reason"], result
    metadata = seen.finished(4)["result"]  # type: ignore[index]
    assert metadata["dependents"][0]["shape"] == [40, 60]
    assert metadata["dependents"][0]["unit"] == "V"


@pytest.mark.parametrize("problem", ["missing", "not_sqlite", "no_runs_table"])
def test_bad_database_is_one_line_and_exit_status_2(tmp_path: Path, problem: str) -> None:
    path = tmp_path / "bad.db"
    if problem == "not_sqlite":
        path.write_text("these are not the droids\n" * 100)
    elif problem == "no_runs_table":
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE experiments (exp_id INTEGER PRIMARY KEY)")
        conn.commit()
        conn.close()
    done = subprocess.run(
        [sys.executable, "-m", "examples.preview.server", str(path), "--port", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("preview_server: "), done.stderr
    assert "Traceback" not in done.stderr
    assert str(path) in lines[0] or path.name in lines[0]
    assert_no_children()


async def test_malformed_and_rejected_requests_keep_the_connection(
    real_db: Path, tmp_path: Path
) -> None:
    config = server_config(real_db, tmp_path, helpers=1)
    async with preview_server(config) as (front, app), connect(front) as client:
        replies = []
        for text in (
            '{"type": "select", "request_id": "a"}',  # run_id is required (may be null)
            '{"type": "visible", "request_id": "b", "run_ids": [1, "2"]}',
            '{"type": "launch", "request_id": "c"}',
            "[1, 2, 3]",
            "x" * (70 * 1024),
        ):
            await client.send(text)
            replies.append(await client.receive())  # nothing else is pushed yet
        assert [r["code"] for r in replies] == [
            "invalid_message",
            "invalid_message",
            "unknown_type",
            "invalid_message",
            "message_too_large",
        ]
        assert "$.run_ids[1]" in replies[1]["message"]
        assert (await client.request("visible", run_ids=[1, 2]))["type"] == "ok"
        refused = await client.request("visible", run_ids=[3, 77])
        assert refused["code"] == "unknown_run"
        assert app.visible == {1, 2}  # nothing changed
        assert (await client.request("select", run_id=None))["type"] == "ok"
        assert app.selected is None
        bad = await client.request("submit", operation="preview", arguments={"run_id": "4"})
        assert bad["code"] == "invalid_command"
        assert (await client.request("list_runs"))["type"] == "run_list"
    assert_no_children()


def _finished_job(seen: Seen, job: int) -> dict[str, Any] | None:
    for event in seen.events:
        if event["run_id"] == job and event["kind"] == "job_finished":
            return event["data"]  # type: ignore[no-any-return]
    return None


async def test_submit_of_preview_draws_a_run_again(real_db: Path, tmp_path: Path) -> None:
    config = server_config(real_db, tmp_path, helpers=1)
    seen = Seen()
    async with preview_server(config) as (front, app), connect(front) as client:
        seen.add(await client.request("subscribe", cursor=0))
        await client.request("list_runs")
        with trio.fail_after(30):
            await pump(client, seen, lambda: seen.finished(2) is not None)
        first_job = app.runs[2].job
        receipt = await client.request("submit", operation="preview", arguments={"run_id": 2})
        assert receipt["admitted"] is True
        assert receipt["run_id"] != first_job
        with trio.fail_after(30):
            await pump(client, seen, lambda: _finished_job(seen, receipt["run_id"]) is not None)
        assert seen.jobs_of(2) == [first_job, receipt["run_id"]]
        assert _finished_job(seen, receipt["run_id"])["result"]["revision"] == 2  # type: ignore[index]
        assert seen.newest(2, "preview")["revision"] == 2  # type: ignore[index]
        unknown = await client.request("submit", operation="preview", arguments={"run_id": 42})
        assert unknown["code"] == "unknown_run"
    assert_no_children()


async def test_command_line_client_saves_every_image(real_db: Path, tmp_path: Path) -> None:
    config = server_config(real_db, tmp_path, stall_after=0.5)
    async with preview_server(config) as (front, _):
        seen = await collect(front.url, tmp_path / "out", select=4, timeout=30)
    assert seen.complete
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        f"run{r}-{k}.png" for r in ALL_RUNS for k in SIZES
    )
    lines = listing(seen)
    assert lines[0].split() == ["run", "kind", "rev", "size", "bytes", "job", "status"]
    assert len(lines) == 1 + 2 * len(ALL_RUNS)
    assert lines[7].split()[:4] == ["4", "preview", "1", "640x480"]
    assert seen.runs[4].job_run_id == seen.job(4) is not None
    statuses = {int(line.split()[0]): line.split()[-1] for line in lines[1:]}
    assert statuses[EMPTY_RUN] == "empty"
    assert statuses[INTERRUPTED_RUN] == "interrupted"
    assert statuses[4] == "ok"
    assert_no_children()


def test_command_line_client_reports_a_refused_connection(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    status = client_main([f"ws://127.0.0.1:{port}", "--out", str(tmp_path), "--timeout", "5"])
    assert status == 2


async def _start_sampler(cache: Path) -> tuple[trio.Process, bytes]:
    """``preview_server`` with no database; return it and its output up to the dashboard."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "examples.preview.server", "--port", "0",
         "--cache-dir", str(cache), "--poll", "0.2"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    text = b""
    try:
        with trio.fail_after(30):
            while b"\ndashboard: " not in text:
                chunk = await process.stdout.receive_some(4096)
                assert chunk, text
                text += chunk
    except BaseException:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
        raise
    return process, text


async def test_without_a_database_each_server_grows_a_private_sample(tmp_path: Path) -> None:
    first, text = await _start_sampler(tmp_path)
    processes = [first]
    try:
        second, other = await _start_sampler(tmp_path)  # a second one, on another port
        processes.append(second)
        samples = [
            re.search(rb"sample database: (\S+)", t).group(1).decode()  # type: ignore[union-attr]
            for t in (text, other)
        ]
        assert samples[0] != samples[1]
        for sample, process in zip(samples, processes, strict=True):
            folder = Path(sample).parent
            assert folder.parent == tmp_path
            assert folder.name.startswith(f"preview-{process.pid}-")
        url = re.search(rb"listening on (ws://\S+)", text).group(1).decode()  # type: ignore[union-attr]
        seen = Seen()
        async with open_websocket_url(url, max_message_size=4 * 1024 * 1024) as ws:
            client = Client(ws)
            runs = (await client.request("list_runs"))["runs"]
            assert len(runs) == 11
            assert [r["run_id"] for r in runs if not r["completed"]] == [11]
            await client.request("select", run_id=11)
            with trio.fail_after(30):  # the demo writer grows run 11: it is drawn again
                await pump(client, seen, lambda: len(seen.images[11, "thumbnail"]) >= 2)
        revisions = [p["revision"] for p in seen.images[11, "thumbnail"]]
        assert revisions == sorted(set(revisions))
    finally:
        statuses = []
        for process in processes:
            process.send_signal(signal.SIGINT)
        for process in processes:
            with trio.fail_after(15):
                statuses.append(await process.wait())
    assert statuses == [0] * len(processes)
    assert await trio.to_thread.run_sync(os.listdir, tmp_path) == []  # each removed its own
    assert_no_children()


async def test_a_signal_right_after_listening_stops_promptly(real_db: Path, tmp_path: Path) -> None:
    """Queued runs and the run being written are cancelled at once, not given the grace."""
    process, _, stderr = await _start_server(real_db, tmp_path, "--grace", "30")
    try:
        start = trio.current_time()
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(20):
            status = await process.wait()
        elapsed = trio.current_time() - start
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    errors = stderr.read_text()
    assert status == 0, errors
    assert elapsed < 10.0  # not the 30 s grace (the run being written never finishes)
    assert (
        "examples.frontdoor: SIGTERM: shutting down (grace 30 s; a second signal stops at once)"
        in errors
    )
    assert "Traceback" not in errors
    assert_no_children()


@asynccontextmanager
async def _owned_client(url: str) -> AsyncIterator[WebSocketConnection]:
    """A websocket client whose TCP stream the test closes: trio-websocket's own leaves
    its socket open when the *server* closed the connection (a ResourceWarning)."""
    address = urllib.parse.urlsplit(url)
    assert address.port is not None
    stream = await trio.open_tcp_stream("127.0.0.1", address.port)
    try:
        async with trio.open_nursery() as nursery:
            ws = await wrap_client_stream(
                nursery, stream, f"127.0.0.1:{address.port}", f"/?{address.query}"
            )
            try:
                yield ws
            finally:
                with trio.move_on_after(5, shield=True):
                    await ws.aclose()
                nursery.cancel_scope.cancel()
    finally:
        await stream.aclose()


async def _until_closed(ws: WebSocketConnection) -> ConnectionClosed:
    """Read (and drop) messages until the server closes; return how it closed."""
    while True:
        try:
            await ws.get_message()
        except ConnectionClosed as exc:
            return exc


async def test_hung_helpers_are_killed_within_grace_plus_one_second(
    real_db: Path, tmp_path: Path
) -> None:
    """SIGSTOPped helpers ignore the shutdown frame and SIGTERM: the ladders must be short.

    A stopped helper spends each ladder step in full (SIGTERM stays pending): a helper
    hung in a job costs cancel_grace + terminate (0.5 + 0.3 s) before its SIGKILL, an
    idle one shutdown + terminate (0.4 + 0.3 s). The server retires the idle helpers as
    its shutdown starts, so the ladders run side by side and the exit takes about 0.9 s;
    one after the other they took 1.7 s, over the grace + 1 s budget. A hung helper is
    most often hung in a job, so the test gives one a job, and signals only once its
    frame waits unread in a stopped helper's pipe: so every run has both ladders.
    """
    grace = 0.5
    process, url, stderr = await _start_server(real_db, tmp_path, "--grace", str(grace), "-v")
    helpers: list[int] = []
    try:
        async with open_websocket_url(url) as ws:
            client = Client(ws, "h")
            with trio.fail_after(30):
                while True:
                    runs = (await client.request("list_runs"))["runs"]
                    jobs = [r["job_run_id"] for r in runs if r["run_id"] != INCOMPLETE_RUN]
                    states = [
                        (await client.request("status", run_id=job))["state"]
                        for job in jobs
                        if job is not None
                    ]
                    if len(states) == len(ALL_RUNS) - 1 and set(states) == {"finished"}:
                        break
                    await trio.sleep(0.1)
        # Its helpers, not their zygote (design §3.17), which the close stops too.
        helpers = [pid for pid in children(process.pid) if not is_zygote(pid)]
        assert len(helpers) == 2
        for pid in helpers:
            os.kill(pid, signal.SIGSTOP)
        async with _owned_client(url) as ws:
            request = {"type": "run_data", "request_id": "hung", "run_id": 4}
            await ws.send_message(json.dumps(request))
            with trio.fail_after(10):
                # The frame sits in another process's pipe: only polling can see it.
                while not any(unread_pipe_bytes(pid) for pid in helpers):  # noqa: ASYNC110
                    await trio.sleep(0.01)
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(20):
                status = await process.wait()
            with trio.fail_after(5):
                closed = await _until_closed(ws)
            assert closed.reason.code == 1001
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
            for pid in helpers:  # stopped, in sessions of their own: nobody else reaps them
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    log = stderr.read_text()
    assert status == 0, log
    # Side by side: each ladder began (its first step logged: the cancel of the job, or
    # the idle one's SIGTERM after its shutdown frame) before the other ended in SIGKILL.
    # One after the other, the second would begin only after the first's SIGKILL.
    began = {}
    killed = {}
    for pid in helpers:
        helper = rf"\S+ \(pid {pid}\): "
        began[pid] = min(logged(log, "actors.helpers", helper + "(cancel|SIGTERM) sent"))
        (killed[pid],) = logged(log, "actors.helpers", helper + "SIGKILL sent")
    first, second = helpers
    assert began[first] < killed[second], log
    assert began[second] < killed[first], log
    # And short: every helper was killed within grace + 1 s of the signal, timed on the
    # server's own clock. From outside, the interpreter's exit and this process's
    # scheduling stretch it on a loaded machine (1.2 to 1.9 s seen with four busy
    # loops on two cores, where the server's own figure stayed under 0.9 s).
    (signalled,) = logged(log, "examples.frontdoor", "SIGTERM: shutting down ")
    assert max(killed.values()) - signalled < grace + 1.0, log
    assert_no_children()


@pytest.mark.parametrize("when", ["at_once", "while_starting"])
async def test_ctrl_c_before_the_server_is_ready_exits_quietly(
    real_db: Path, tmp_path: Path, when: str
) -> None:
    stderr = tmp_path / "server.err"
    # -X importtime: the import log on stderr tells how far the start has got. A SIGINT
    # before the server module's first lines (which install its quiet handler) meets
    # CPython's own start-up or runpy, not the server: the test waits for ``logging``,
    # the first module imported after that handler (and not by the interpreter's start).
    with stderr.open("wb") as sink:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-X", "importtime", "-m", "examples.preview.server",
             str(real_db), "--port", "0", "--cache-dir", str(tmp_path / "cache")],
            cwd=REPO, stdout=subprocess.PIPE, stderr=sink, preexec_fn=interruptible,
        )  # fmt: skip
    assert process.stdout is not None
    text = b""
    helpers: list[int] = []
    try:
        if when == "while_starting":  # the helpers are being started (or about to be)
            with trio.fail_after(30):
                while b"starting: " not in text:
                    chunk = await process.stdout.receive_some(4096)
                    assert chunk, stderr.read_text()
                    text += chunk
            helpers = children(process.pid)
        else:  # the server's module is importing its dependencies (trio, ...)
            with trio.fail_after(30):
                # A file another process writes: polling it is the test.
                while b"| logging\n" not in stderr.read_bytes():  # noqa: ASYNC110
                    await trio.sleep(0.001)
        process.send_signal(signal.SIGINT)
        with trio.fail_after(15):
            status = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    errors = stderr.read_text()
    assert "Traceback" not in errors
    assert "KeyboardInterrupt" not in errors
    assert status in (0, 130), errors  # 0 only if it became ready before the signal
    if when == "while_starting" and status == 130:
        assert "SIGINT before the server was ready: stopped" in errors
    assert all(pid_gone(pid) for pid in helpers)
    assert_no_children()


@pytest.mark.parametrize(
    "command",
    ["trio-actors-preview", "trio-actors-preview-client", "trio-actors-jobs",
     "trio-actors-jobs-client"],
)  # fmt: skip
async def test_ctrl_c_while_an_installed_command_imports_prints_no_traceback(
    real_db: Path, tmp_path: Path, command: str
) -> None:
    script = Path(sys.executable).parent / command
    if not script.exists():
        pytest.skip(f"{command} is not installed in this environment")
    stderr = tmp_path / "command.err"
    argv = [str(script), str(real_db), "--port", "0", "--cache-dir", str(tmp_path / "cache")]
    if command == "trio-actors-jobs":
        argv = [str(script), "--port", "0", "--token", "ctrl-c-token"]
    elif command.endswith("client"):
        argv = [str(script), "ws://127.0.0.1:9", "--out", str(tmp_path / "out")]
        if command == "trio-actors-jobs-client":
            argv = [str(script), "ws://127.0.0.1:9", "watch", "1"]
    # PYTHONPROFILEIMPORTTIME: the import log on stderr says the command is importing
    # trio, well after the console script's own lines, before main() runs.
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    with stderr.open("wb") as sink:
        process = await trio.lowlevel.open_process(
            argv,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=env,
            preexec_fn=interruptible,  # Ctrl-C acts, whatever this worker inherited
        )
    status, errors = await _interrupted_once(process, stderr, rb"\| +trio\._")
    assert status == 128 + signal.SIGINT, errors[-2000:]


async def _interrupted_once(process: trio.Process, stderr: Path, pattern: bytes) -> tuple[int, str]:
    """SIGINT ``process`` once its import log (``stderr``) matches ``pattern``; its exit
    status and stderr, which must hold no traceback."""
    try:
        with trio.fail_after(30):
            # A file another process writes: polling it is the test.
            while not re.search(pattern, await trio.Path(stderr).read_bytes()):  # noqa: ASYNC110
                await trio.sleep(0.001)
        process.send_signal(signal.SIGINT)
        with trio.fail_after(15):
            status = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    errors = await trio.Path(stderr).read_text()
    assert "Traceback" not in errors
    assert "KeyboardInterrupt" not in errors
    return status, errors


async def test_a_server_of_finished_runs_loads_neither_numpy_nor_pillow(tmp_path: Path) -> None:
    """The helpers read and draw (design §5.4): the server starts without the drawing
    code, which it loads only to draw something itself (a live image, a ``draw``)."""
    from examples.preview.sample_db import create_many_runs_database

    db = create_many_runs_database(tmp_path / "runs.db", 3)  # every run finished
    process, url, _stderr = await _start_server(db, tmp_path)
    try:
        async with open_websocket_url(url) as ws:
            run_list = await Client(ws).request("list_runs")
            assert [r["run_id"] for r in run_list["runs"]] == [1, 2, 3]
        maps = await trio.Path(f"/proc/{process.pid}/maps").read_text()
        assert "numpy" not in maps
        assert "PIL" not in maps
    finally:
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(15):
            assert await process.wait() == 0
