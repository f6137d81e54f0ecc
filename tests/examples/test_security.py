"""Safe by default, over real sockets, for both servers (design §7.3).

Each attack of a web page (a foreign ``Origin``), a rebound DNS name (a foreign
``Host``), another local user (no token) or a greedy client (every slot) is made against
the job server and the preview server running in this process with real helpers, on a
loopback port with a token; the requests are written by hand, so each header is exactly
what the test says. Then the job server's file root: ``hash_file`` outside it is refused
with one message whether the path exists or not. Real clock, short timeouts (contributing §F.3).
"""

from __future__ import annotations

import logging
import os
import re
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio
from frontdoor_support import TIMEOUT, Client, assert_no_children, open_client
from preview_support import server_config

from examples.jobs.helper import OUTSIDE_ROOT, hash_file, resolve_inside
from examples.jobs.server import JobServerConfig, open_job_server
from examples.preview.app.preview_app import open_database
from examples.preview.server import open_preview_server
from examples.web.frontdoor import FrontDoor, FrontDoorConfig

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

TOKEN = "right-token-0123456789"
_KEY = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


@asynccontextmanager
async def serving(
    kind: str, tmp_path: Path, real_db: Path, **front: Any
) -> AsyncIterator[FrontDoor]:
    """The job or the preview server on a free loopback port, with :data:`TOKEN`."""
    config = FrontDoorConfig(port=0, token=TOKEN, **front)
    if kind == "jobs":
        jobs = JobServerConfig(front_door=config, helpers=1, grace=1.0, files_root=tmp_path)
        async with open_job_server(jobs) as server:
            yield server.front
    else:
        preview = server_config(real_db, tmp_path)
        identity = await trio.to_thread.run_sync(open_database, preview.db)
        async with open_preview_server(preview, config, identity) as (front_door, _):
            yield front_door


async def request(
    port: int,
    target: str = f"/?token={TOKEN}",
    *,
    websocket: bool = True,
    source: str | None = None,
    **headers: str | None,
) -> tuple[int, bytes]:
    """Send one request head by hand; return the answer's status and body.

    ``headers`` default to ``Host: 127.0.0.1:PORT`` (None leaves one out); a websocket
    upgrade is added unless ``websocket`` is False. A ``101`` answer is closed at once.
    """
    fields = {"Host": f"127.0.0.1:{port}", **{k.replace("_", "-"): v for k, v in headers.items()}}
    head = f"GET {target} HTTP/1.1\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in fields.items() if value is not None
    )
    if websocket:
        head += f"Upgrade: websocket\r\nConnection: Upgrade\r\n{_KEY}"
    sock = trio.socket.socket()
    with sock, trio.fail_after(TIMEOUT):
        if source is not None:
            await sock.bind((source, 0))
        await sock.connect(("127.0.0.1", port))
        await sock.send(f"{head}\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.startswith(b"HTTP/1.1 101"):
            chunk = await sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def refusal_reasons(caplog: pytest.LogCaptureFixture) -> list[tuple[str, int]]:
    """(reason, status) of every refusal logged, in order."""
    return [
        (r.reason, r.status)  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "event", None) == "request_refused"
    ]


@pytest.mark.parametrize("kind", ["jobs", "preview"])
async def test_every_attack_is_refused_and_the_owner_gets_in(
    kind: str, tmp_path: Path, real_db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="examples.frontdoor")
    async with serving(kind, tmp_path, real_db) as front:
        port = front.port
        assert port is not None
        # A web page the user has open: its Origin is refused (HTTP 403, one line).
        status, body = await request(port, Origin="http://evil.example")
        assert status == 403
        assert body == (
            b"403 Forbidden: origin 'http://evil.example' is not allowed (see --allow-origin)\n"
        )
        assert (await request(port, Origin="null"))[0] == 403  # a file:// page, a sandbox
        assert (await request(port, Origin=f"http://127.0.0.1:{port + 1}"))[0] == 403
        # The server's own origins, and no Origin at all (scripts, the CLI clients).
        for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", None):
            assert (await request(port, Origin=origin))[0] == 101, origin
        # A rebound DNS name: the websocket and the dashboard page alike.
        status, body = await request(port, Host=f"evil.example:{port}")
        assert status == 403
        assert body.startswith(f"403 Forbidden: Host 'evil.example:{port}' is not".encode())
        status, _ = await request(port, "/", websocket=False, Host=f"evil.example:{port}")
        assert status == 403
        assert (await request(port, Host="127.0.0.1"))[0] == 403  # port 80: not ours
        for host in (f"localhost:{port}", f"[::1]:{port}"):
            assert (await request(port, Host=host))[0] == 101, host
        # Another local user: no token, a wrong one; then the right one, two ways.
        status, body = await request(port, "/")
        assert status == 403
        assert b"missing or wrong token" in body
        assert (await request(port, "/?token=wrong-token-0000"))[0] == 403
        assert (await request(port, "/", Authorization=f"Bearer {TOKEN}"))[0] == 101
        async with open_client(port, f"/?token={TOKEN}") as client:
            assert (await client.request("boot_report"))["type"] == "boot_report_reply"
        page, _ = await request(port, "/", websocket=False)
        assert page == (200 if kind == "preview" else 404)  # public, but only by its name
    assert refusal_reasons(caplog) == [
        ("foreign_origin", 403), ("foreign_origin", 403), ("foreign_origin", 403),
        ("foreign_host", 403), ("foreign_host", 403), ("foreign_host", 403),
        ("missing_token", 403), ("wrong_token", 403),
    ]  # fmt: skip
    logged = [r.getMessage() for r in caplog.records if getattr(r, "reason", None)]
    assert logged[0].startswith("refused a websocket handshake from 127.0.0.1:")
    assert logged[0].endswith("origin 'http://evil.example' is not allowed (see --allow-origin) "
                              "(foreign_origin)")  # fmt: skip
    assert TOKEN not in "\n".join(logged)


@pytest.mark.parametrize("kind", ["jobs", "preview"])
async def test_allowed_origins_and_hosts_get_in(kind: str, tmp_path: Path, real_db: Path) -> None:
    extra = {"allowed_origins": ["https://lab.example"], "allowed_hosts": ["lab.example"]}
    async with serving(kind, tmp_path, real_db, **extra) as front:
        port = front.port
        assert port is not None
        assert (await request(port, Origin="https://lab.example"))[0] == 101
        assert (await request(port, Host="lab.example:443", Origin="https://lab.example"))[0] == 101
        assert (await request(port, Host="lab.example", Origin="http://lab.example"))[0] == 101
        assert (await request(port, Host="other.example", Origin="http://lab.example"))[0] == 403


@pytest.mark.parametrize("kind", ["jobs", "preview"])
async def test_one_address_cannot_take_every_slot(kind: str, tmp_path: Path, real_db: Path) -> None:
    async with serving(kind, tmp_path, real_db, max_connections=4, max_per_address=2) as front:
        port = front.port
        assert port is not None
        resource = f"/?token={TOKEN}"
        async with open_client(port, resource) as first, open_client(port, resource, prefix="s"):
            status, body = await request(port)
            assert status == 429
            assert (
                body == b"429 Too Many Requests: too many connections from 127.0.0.1 (at most 2)\n"
            )
            # Another address still gets in (all of 127.0.0.0/8 is this machine).
            assert (await request(port, source="127.0.0.2"))[0] == 101
            assert (await first.request("boot_report"))["type"] == "boot_report_reply"
        assert front.statistics().refusals == {"address_limit": 1}
        async with open_client(port, resource) as again:  # the slots came back
            assert (await again.request("boot_report"))["type"] == "boot_report_reply"


# -- the job server's file root --------------------------------------------------------------


async def _hash(client: Client, path: str) -> dict[str, Any]:
    """Submit ``hash_file``; return the error answer, or the run's final event data."""
    answer = await client.request("submit", operation="hash_file", arguments={"path": path})
    if answer["type"] == "error":
        return answer
    events = await client.events_until(answer["run_id"], {"job_finished"})
    return events[-1]["data"]  # type: ignore[no-any-return]


async def test_hash_file_stays_inside_the_root_and_never_says_what_exists_outside(
    tmp_path: Path, real_db: Path
) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "data.bin").write_bytes(b"inside")
    (tmp_path / "secret.txt").write_text("outside")
    (root / "link-in").symlink_to(root / "sub" / "data.bin")
    (root / "link-out").symlink_to(tmp_path / "secret.txt")
    (root / "link-dangling-out").symlink_to(tmp_path / "missing.txt")
    (root / "dir-out").symlink_to(tmp_path)
    os.mkfifo(root / "fifo")
    config = JobServerConfig(
        front_door=FrontDoorConfig(port=0), helpers=1, grace=1.0, files_root=root
    )
    async with open_job_server(config) as server, open_client(server.front.port) as client:
        await client.request("subscribe", cursor=0)
        outside = [
            "/etc/passwd", "/proc/self/environ", "/no/such/file",  # absolute
            "../secret.txt", "../missing.txt", "sub/../../secret.txt",  # ..
            str(tmp_path / "secret.txt"), "link-out", "link-dangling-out",  # symlinks out
            "dir-out/secret.txt", "dir-out/missing.txt",
        ]  # fmt: skip
        answers = [await _hash(client, path) for path in outside]
        assert {(a["code"], a["message"], tuple(a["details"]["fields"])) for a in answers} == {
            ("invalid_command", f"hash_file: arguments.{OUTSIDE_ROOT}", ("path",))
        }
        for path in ("sub/data.bin", str(root / "sub" / "data.bin"), "link-in", "./sub//data.bin"):
            done = await _hash(client, path)
            assert done["verdict"] == "ok", (path, done)
            assert done["result"]["size"] == 6
        missing = await _hash(client, "sub/missing.bin")  # inside: may say it is missing
        assert missing["error"]["code"] == "source_unreadable"
        assert "No such file" in missing["error"]["message"]
        fifo = await _hash(client, "fifo")  # refused at once, not a helper hung on open
        assert fifo["error"]["code"] == "source_unreadable"
        assert "not a regular file" in fifo["error"]["message"]


class _Context:
    def progress(self, fraction: float, note: str | None = None) -> None:
        pass

    def check_cancel(self) -> None:
        pass


def test_the_helper_checks_the_opened_file_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A symlink swapped in after the check: the file actually opened is outside."""
    (tmp_path / "inside.txt").write_text("x")
    assert resolve_inside(str(tmp_path), "inside.txt") == str(tmp_path / "inside.txt")
    assert resolve_inside(str(tmp_path), "/etc/hostname") is None
    checks: list[str] = []

    def racy(root: str, path: str) -> str | None:
        checks.append(path)
        if len(checks) == 1:  # the check before opening saw something harmless
            return os.path.realpath(os.path.join(root, path))
        return resolve_inside(root, path)

    monkeypatch.setattr("examples.jobs.helper.resolve_inside", racy)
    with pytest.raises(Exception, match=re.escape(OUTSIDE_ROOT)) as refused:
        hash_file({"path": "/etc/hostname", "root": str(tmp_path)}, _Context())  # type: ignore[arg-type]
    assert refused.value.code == "invalid_command"  # type: ignore[attr-defined]
    assert checks[1] == "/etc/hostname"  # what /proc/self/fd said was opened
    with pytest.raises(Exception, match="root must be a non-empty string"):
        hash_file({"path": "inside.txt"}, _Context())  # type: ignore[arg-type]


def test_the_files_root_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="files_root must be an existing directory"):
        JobServerConfig(files_root=tmp_path / "file")
    assert JobServerConfig(files_root=str(tmp_path / ".")).files_root == tmp_path.resolve()
    assert JobServerConfig().files_root == type(tmp_path).cwd().resolve()
