"""The warden's control frames, parent side (design §3.16), and their agreement with the
warden program, which cannot import them (it runs on a host with only python3)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from protocol.errors import ProtocolError, ProtocolViolation
from protocol.framing import FrameDecoder
from protocol.warden import (
    WARDEN_EXIT_REFUSED,
    WARDEN_MAGIC,
    WARDEN_SIGNALS,
    WARDEN_VERSION,
    decode_control,
    encode_heartbeat,
    encode_signal,
    encode_start,
    is_control,
)

WARDEN = Path(__file__).resolve().parents[2] / "actors" / "_remote" / "_warden.py"


def warden_constants() -> dict[str, object]:
    """The warden's module-level constants, read from its source without running it."""
    found: dict[str, object] = {}
    for node in ast.parse(WARDEN.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def test_the_warden_speaks_the_codec_s_constants():
    constants = warden_constants()
    assert constants["VERSION"] == WARDEN_VERSION
    assert constants["MAGIC"] == WARDEN_MAGIC
    assert constants["EXIT_REFUSED"] == WARDEN_EXIT_REFUSED
    assert WARDEN_MAGIC != 0xAE  # never an envelope's first byte (§2.3)


def test_the_warden_imports_only_the_standard_library():
    tree = ast.parse(WARDEN.read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert imported <= {
        "__future__",
        "contextlib",
        "ctypes",
        "json",
        "os",
        "select",
        "signal",
        "sys",
        "time",
    }


def body_of(frame: bytes) -> bytes:
    (body,) = FrameDecoder(max_size=2**20).feed(frame)
    return body


def test_start_frame_carries_every_field():
    frame = encode_start(
        ["python3", "-m", "helper"],
        heartbeat_timeout=5,
        sweep_timeout=0.5,
        cwd="/srv",
        env={"A": "1"},
        containment="tree",
    )
    body = body_of(frame)
    assert is_control(body)
    assert json.loads(body[1:]) == {
        "type": "start",
        "version": WARDEN_VERSION,
        "argv": ["python3", "-m", "helper"],
        "cwd": "/srv",
        "env": {"A": "1"},
        "heartbeat_timeout": 5.0,
        "sweep_timeout": 0.5,
        "containment": "tree",
        "max_request": 65536,
        "max_reply": 1048576,
    }


@pytest.mark.parametrize(
    ("argv", "options", "error", "names"),
    [
        ([], {}, ValueError, "argv"),
        ("python3", {}, TypeError, "argv"),
        (["x"], {"heartbeat_timeout": 0}, ValueError, "heartbeat_timeout"),
        (["x"], {"heartbeat_timeout": float("nan")}, ValueError, "heartbeat_timeout"),
        (["x"], {"sweep_timeout": True}, TypeError, "sweep_timeout"),
        (["x"], {"containment": "jail"}, ValueError, "containment"),
        (["x"], {"max_reply": -1}, ValueError, "max_reply"),
        (["x"], {"max_request": 1.5}, TypeError, "max_request"),
    ],
)
def test_a_bad_start_is_refused_naming_the_field(argv, options, error, names):
    settings = {"heartbeat_timeout": 1.0, "sweep_timeout": 1.0, **options}
    with pytest.raises(error, match=names):
        encode_start(argv, **settings)


def test_signal_and_heartbeat_frames():
    assert json.loads(body_of(encode_signal("SIGKILL"))[1:]) == {
        "type": "signal",
        "signal": "SIGKILL",
    }
    assert WARDEN_SIGNALS == ("SIGTERM", "SIGKILL")
    with pytest.raises(ValueError, match="signal"):
        encode_signal("SIGSTOP")
    assert json.loads(body_of(encode_heartbeat(3))[1:]) == {"type": "heartbeat", "seq": 3}
    with pytest.raises(ValueError, match="seq"):
        encode_heartbeat(-1)
    with pytest.raises(TypeError, match="seq"):
        encode_heartbeat(True)


def control(message: dict[str, object]) -> bytes:
    return bytes((WARDEN_MAGIC,)) + json.dumps(message).encode()


def test_a_warden_message_is_decoded_and_checked():
    exit_message = {
        "type": "exit",
        "cause": "exited",
        "returncode": None,
        "signal": "SIGKILL",
        "empty": True,
        "left": [],
        "truncated": 0,
        "message": None,
    }
    assert decode_control(control(exit_message)) == exit_message
    assert not is_control(b"\xae" + bytes(40))
    assert not is_control(b"")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"\xae{}", "<frame>"),
        (bytes((WARDEN_MAGIC,)) + b"[1]", "control"),
        (bytes((WARDEN_MAGIC,)) + b"{not json", "control"),
        (control({"type": "gossip"}), "type"),
        (control({"type": "heartbeat"}), "seq"),
        (control({"type": "heartbeat", "seq": True}), "seq"),
        (control({"type": "started", "pid": 1, "containment": "tree", "cgroup": 3}), "cgroup"),
        (control({"type": "signalled", "signal": "SIGTERM", "pids": ["1"], "failed": []}), "pids"),
        (control({"type": "signalled", "signal": "SIGTERM", "pids": [1], "failed": [3]}), "failed"),
        (
            control(
                {
                    "type": "exit",
                    "cause": "exited",
                    "returncode": 0,
                    "signal": None,
                    "empty": False,
                    "left": ["a"],
                    "truncated": 0,
                    "message": None,
                }
            ),
            "left",
        ),
    ],
)
def test_a_bad_warden_message_is_a_protocol_error_naming_the_field(body, field):
    with pytest.raises(ProtocolError) as caught:
        decode_control(body)
    assert caught.value.details["field"] == field


def test_a_warden_of_another_version_is_refused():
    hello = control({"type": "hello", "version": WARDEN_VERSION + 1, "pid": 9, "python": "3"})
    with pytest.raises(ProtocolViolation, match="version") as caught:
        decode_control(hello)
    assert caught.value.details == {
        "field": "version",
        "expected": WARDEN_VERSION,
        "got": WARDEN_VERSION + 1,
    }
