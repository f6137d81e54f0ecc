"""The fault modes of the helper library, for tests (design §3.9); runs in the child.

:mod:`actors.helper` imports this module only when a fault mode is set, so a normal
helper never pays for it. Stdlib only, like the helper library. The modes are listed
in :data:`actors.helper.FAULT_MODES`.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from protocol.envelope import PROTOCOL_VERSION, encode_fields, new_session

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    from protocol.envelope import Envelope

    class _Stdio(Protocol):
        """What the helper library's frame output offers a fault mode."""

        max_reply: int
        session: str | None

        def write(self, data: bytes) -> None: ...


__all__ = ["at_startup", "faulty_reply", "hang"]

_HANG_STEP = 3600.0


def at_startup(fault: str, stdio: _Stdio, exit_code: int) -> dict[str, Any]:
    """Apply the startup part of ``fault``; return what to add to the ready info."""
    if fault == "hang_startup":
        hang()
    if fault == "exit_at_startup":
        print("fault exit_at_startup: giving up before ready", file=sys.stderr, flush=True)
        os._exit(exit_code)
    if fault == "bad_ready":
        assert stdio.session is not None
        stdio.write(
            encode_fields(
                kind="reply",
                session=stdio.session,
                generation=0,
                operation="startup",
                status="ok",
                max_size=stdio.max_reply,
            )
        )
        hang()
    if fault == "ignore_sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if fault == "grandchild_ignores_sigterm":
        return {"grandchild_pid": _start_sigterm_ignoring_grandchild()}
    return {}


def hang() -> None:
    while True:
        time.sleep(_HANG_STEP)


def _start_sigterm_ignoring_grandchild() -> int:
    import shutil
    import subprocess

    # SIG_IGN survives exec, so set it around the spawn and restore ours afterwards.
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        sleep = shutil.which("sleep")
        argv = [sleep, "300"] if sleep else [sys.executable, "-c", "import time; time.sleep(300)"]
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return child.pid


def faulty_reply(
    stdio: _Stdio, fault: str, job: Envelope, answer: dict[str, Any], exit_code: int
) -> bool:
    """Send the broken reply of ``fault`` instead of ``answer``; False if not a reply fault."""
    fields: dict[str, Any] = {
        "kind": "reply",
        "session": job.session,
        "generation": job.generation,
        "operation": job.operation,
        **answer,
    }
    if fault == "crash_before_reply":
        os._exit(exit_code)
    if fault == "malformed_reply":
        stdio.write(len(b"not json").to_bytes(4, "big") + b"not json")
    elif fault == "oversized_reply":
        stdio.write((stdio.max_reply + 1).to_bytes(4, "big") + b"{")
        hang()
    elif fault == "partial_frame":
        frame = encode_fields(**fields, max_size=stdio.max_reply)
        stdio.write(frame[: len(frame) // 2])
        hang()
    elif fault in ("stale_generation", "stale_session", "wrong_version", "stale_progress"):
        if fault == "stale_generation":
            fields["generation"] = job.generation - 1
        elif fault == "stale_session":
            fields["session"] = new_session()
        elif fault == "wrong_version":
            fields["version"] = PROTOCOL_VERSION + 1
        else:
            fields.update(
                kind="progress",
                generation=job.generation - 1,
                status=None,
                payload={"fraction": 0.5, "note": "stale"},
                error=None,
            )
        stdio.write(encode_fields(**fields, max_size=stdio.max_reply))
    else:
        return False
    return True
