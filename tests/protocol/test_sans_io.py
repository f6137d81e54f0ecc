"""The protocol package is sans-io: it never imports trio (design §2, contributing §A.1).

Each check runs in a fresh interpreter, where a module set to ``None`` in
``sys.modules`` cannot be imported, so an import of it anywhere fails loudly.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import protocol

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_whole_package_works_without_trio() -> None:
    result = run_python(
        """
        import sys
        sys.modules["trio"] = None
        sys.modules["trio_websocket"] = None
        import protocol
        from protocol import codec, envelope, errors, framing, messages
        for name in protocol.__all__:
            getattr(protocol, name)
        msg = protocol.Cancel(request_id="r", run_id=1)
        assert protocol.decode_client_message(protocol.encode_message(msg)) == msg
        env = protocol.Envelope(version=protocol.PROTOCOL_VERSION, kind="job",
                                session=protocol.new_session(), generation=1, operation="x")
        frame = protocol.encode_envelope(env)
        (payload,) = protocol.FrameDecoder(max_size=1024).feed(frame)
        assert protocol.decode_envelope(payload) == env
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


def test_framing_and_envelope_work_with_stdlib_only() -> None:
    # The helper child loads protocol's submodules without running the package
    # __init__ (the bootstrap registers a bare package, see actors/_helper_spec.py);
    # framing, envelope and errors must then need nothing beyond the stdlib.
    result = run_python(
        """
        import sys, types
        for name in ("trio", "attrs", "attr", "cattrs"):
            sys.modules[name] = None
        package = types.ModuleType("protocol")
        package.__path__ = ["protocol"]
        sys.modules["protocol"] = package
        from protocol.envelope import (
            PROTOCOL_VERSION, Envelope, decode_envelope, encode_envelope, new_session
        )
        from protocol.framing import FrameDecoder, encode_frame
        env = Envelope(version=PROTOCOL_VERSION, kind="reply", session=new_session(),
                       generation=2, operation="x", status="ok", payload=[1])
        (payload,) = FrameDecoder(max_size=1024).feed(encode_envelope(env))
        assert decode_envelope(payload) == env
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


@pytest.mark.parametrize(
    "module",
    [
        "framing",
        "envelope",
        "_strict_json",
        "_envelope_wire",
        "_envelope_checks",
        "_envelope_value",
        "_field_error",
        "_blob",
    ],
)
def test_stdlib_only_sources(module: str) -> None:
    # framing.py and envelope.py (with its strict JSON, _strict_json.py, its binary
    # layout, _envelope_wire.py, its field checks, _envelope_checks.py, and its value
    # class, _envelope_value.py, the binary part's value, _blob.py, and the validators'
    # error, _field_error.py) import
    # nothing but the standard library and each other.
    source = (REPO / "protocol" / f"{module}.py").read_text()
    imports = [
        line.split()[1]
        for line in source.splitlines()
        if line.startswith(("import ", "from ")) and not line.startswith("from __future__")
    ]
    allowed = set(sys.stdlib_module_names) | {
        ".errors",
        ".framing",
        "._strict_json",
        "._envelope_wire",
        "._envelope_checks",
        "._envelope_value",
        "._field_error",
        "._blob",
    }
    assert set(imports) <= allowed, imports


def test_public_names_resolve() -> None:
    for name in protocol.__all__:
        assert getattr(protocol, name) is not None
    assert set(protocol.__all__) <= set(dir(protocol))
    with pytest.raises(AttributeError):
        protocol.NoSuchName  # noqa: B018
