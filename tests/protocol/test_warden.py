"""The warden's control frames, parent side (design §3.16), and their agreement with the
warden program, which cannot import them (it runs on a host with only python3)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from protocol.errors import ProtocolError, ProtocolViolation
from protocol.framing import FrameDecoder, encode_frame
from protocol.warden import (
    WARDEN_CONTROL_LIMIT,
    WARDEN_EXIT_REFUSED,
    WARDEN_MAGIC,
    WARDEN_PREAMBLE,
    WARDEN_SIGNALS,
    WARDEN_STDERR,
    WARDEN_VERSION,
    StderrSplitter,
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
    assert constants["STDERR"] == WARDEN_STDERR
    assert constants["PREAMBLE"] == WARDEN_PREAMBLE
    assert constants["EXIT_REFUSED"] == WARDEN_EXIT_REFUSED
    assert constants["STDERR_CHUNK"] < WARDEN_CONTROL_LIMIT  # 1 byte of magic added
    assert 0xAE not in (WARDEN_MAGIC, WARDEN_STDERR)  # never an envelope's first byte (§2.3)


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
        "socket",
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
        (["x"], {"max_request": -1}, ValueError, "max_request"),
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


def stderr_frame(data: bytes) -> bytes:
    return encode_frame(bytes((WARDEN_STDERR,)) + data)


HEARTBEAT = control({"type": "heartbeat", "seq": 1})
HELLO = control(
    {"type": "hello", "version": WARDEN_VERSION, "pid": 9, "python": "3.11.2", "channel": True}
)
#: What ssh says when the server refuses the control channel's forwarding.
REFUSED = b"channel 2: open failed: administratively prohibited: open failed\r\n"
#: ssh's stderr: the login's text, the preamble and hello, ssh's words while the control
#: channel is opened, the preamble again, then the warden's frames.
STREAM = (
    b"Warning: Permanently added 'lab-pc' to the list of known hosts.\r\n"
    + WARDEN_PREAMBLE
    + encode_frame(HELLO)
    + REFUSED
    + WARDEN_PREAMBLE
    + encode_frame(HEARTBEAT)
    + stderr_frame(b"a line from the helper\n")
    + stderr_frame(b"")
)
PARTS = [
    ("text", b"Warning: Permanently added 'lab-pc' to the list of known hosts.\r\n"),
    ("control", HELLO),
    ("text", REFUSED),
    ("control", HEARTBEAT),
    ("stderr", b"a line from the helper\n"),
    ("stderr", b""),
]


def merged(parts: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """Adjacent text joined: how text is cut into pieces depends on the reads."""
    out: list[tuple[str, bytes]] = []
    for kind, data in parts:
        if kind == "text" and out and out[-1][0] == "text":
            out[-1] = ("text", out[-1][1] + data)
        elif kind != "text" or data:
            out.append((kind, data))
    return out


def test_the_stderr_splitter_takes_the_stream_whole_byte_by_byte_and_with_trailing_data():
    whole = StderrSplitter()
    assert merged(whole.feed(STREAM)) == PARTS
    assert whole.framed
    assert (whole.close(), whole.pending, whole.broken) == ([], 0, None)

    single = StderrSplitter()
    got: list[tuple[str, bytes]] = []
    for byte in STREAM:
        got += single.feed(bytes((byte,)))
    assert merged(got + single.close()) == PARTS

    trailing = StderrSplitter()
    assert merged(trailing.feed(STREAM + encode_frame(HEARTBEAT)[:5])) == PARTS
    assert trailing.pending == 5
    assert merged(trailing.feed(encode_frame(HEARTBEAT)[5:])) == [("control", HEARTBEAT)]


def test_without_a_preamble_everything_is_text():
    splitter = StderrSplitter()
    text = b"Permission denied (publickey).\r\n"
    assert merged(splitter.feed(text) + splitter.close()) == [("text", text)]
    assert not splitter.framed
    # A preamble's first bytes at the end are kept back, then given as text at the end.
    cut = StderrSplitter()
    assert merged(cut.feed(b"x" + WARDEN_PREAMBLE[:5]) + cut.close()) == [
        ("text", b"x" + WARDEN_PREAMBLE[:5])
    ]


@pytest.mark.parametrize(
    "bad", [(WARDEN_CONTROL_LIMIT + 1).to_bytes(4, "big"), bytes(4)], ids=["long", "empty"]
)
def test_a_stream_that_cannot_be_frames_is_broken_and_kept_as_text(bad: bytes) -> None:
    splitter = StderrSplitter()
    tail = b"Traceback (most recent call last):\n"
    parts = splitter.feed(STREAM + bad + tail)
    assert splitter.broken is not None
    assert "declares" in splitter.broken
    assert merged(parts) == [*PARTS, ("text", bad + tail)]
    assert merged(splitter.feed(b"more")) == [("text", b"more")]
    assert not splitter.framed
