"""Smoke runs of every benchmark script: ``python benchmarks/NAME.py --quick`` must exit 0.

A change that breaks a benchmark (an import, an API, a check of the benchmark's own)
fails here, not months later when someone wants a figure. Every ``*.py`` in
``benchmarks/`` is a script and is run, so a new benchmark is covered by adding it;
modules that scripts import and that do not run alone are named in
:data:`SUPPORT_MODULES` or end in ``_helper.py``. Each script's ``--quick`` mode is a
small run of every line it measures, a few seconds long; its figures are noise.

Each script runs in a session of its own with a marker in its environment: after it
exits, a process that still carries the marker (a helper, a zygote, a private sshd) is
one the benchmark left behind, and fails the test.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from remote_support import require_sshd

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
#: Modules of ``benchmarks/`` that scripts import and that are not scripts themselves.
SUPPORT_MODULES = frozenset({"measure.py"})
#: Seconds a ``--quick`` run may take: a hang detector, not a speed check (a few seconds
#: idle, but six busy processes on 2 cores stretch that tenfold).
QUICK_TIMEOUT = 300.0
#: Seconds allowed for the processes of a finished benchmark to be gone.
LEFTOVER_GRACE = 5.0
MARKER = "TRIO_ACTORS_BENCHMARK_SMOKE"


def is_support(path: Path) -> bool:
    """True for a module that scripts import (:data:`SUPPORT_MODULES`, ``*_helper.py``)."""
    return path.name in SUPPORT_MODULES or path.name.endswith("_helper.py")


SCRIPTS = sorted(path.name for path in BENCHMARKS.glob("*.py") if not is_support(path))


def marked(token: str) -> list[int]:
    """Pids of live processes whose environment carries ``MARKER=token``."""
    needle = f"{MARKER}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:  # gone, or not ours to read
                continue
            if needle in environ.split(b"\0"):
                found.append(int(entry))
    return found


def wait_gone(token: str) -> list[int]:
    """Pids still carrying ``token`` after at most :data:`LEFTOVER_GRACE` seconds.

    A helper killed just before its benchmark exited may take a moment to be reaped;
    this polls ``/proc`` for that condition, bounded by the grace.
    """
    deadline = time.monotonic() + LEFTOVER_GRACE
    left = marked(token)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)  # not our children (the script's): /proc is all there is to read
        left = marked(token)
    return left


def kill_all(pids: list[int]) -> None:
    """SIGKILL ``pids`` (a failed benchmark's leftovers: never leak them into the suite)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def check_preview(text: str) -> None:
    """The preview benchmark measured the floor, the bare helpers and the server."""
    runs = int(re.search(r"database of (\d+) runs", text)[1])  # type: ignore[index]
    assert f"{2 * runs} images" in text  # every run's thumbnail and preview came
    assert "missing" not in text
    ratios = re.findall(r"^  (.+?)\s+[\d.]+(?:x| ms)\s+\(<= [\d.]+ ?(?:x|ms)\) (OK|MISS)$",
                        text, flags=re.MULTILINE)  # fmt: skip
    assert [name for name, _ in ratios] == [
        "CPU server + helpers / floor",
        "server peak RSS / floor process",
        "all thumbnails / helpers alone",
        "first thumbnail after connect",
    ]
    # The helpers alone bound the ratios: measured in the same run.
    assert re.search(r"^helpers alone \(bare pool, 2 helpers\): thumbnails [\d.]+ s, "
                     r"all images [\d.]+ s, CPU [\d.]+ s$", text, flags=re.MULTILINE)  # fmt: skip
    bounds = dict(re.findall(r"^  (CPU helpers alone / floor|helpers' thumbnails / floor)"
                             r"\s+([\d.]+)x", text, flags=re.MULTILINE))  # fmt: skip
    assert len(bounds) == 2
    assert all(float(value) > 0 for value in bounds.values())


def check_remote(text: str) -> None:
    """The remote benchmark measured a remote helper and bare ``ssh -T`` (wall and CPU)."""
    require_sshd()  # without OpenSSH the script says it skipped (a failure in CI)
    ratios = re.findall(r"^  (.+?)\s+[\d.]+x \(<= 1.3x\) (OK|MISS)$", text, re.MULTILINE)
    assert [name for name, _ in ratios] == [
        "round trip / echo",
        "CPU of the path / echo",
        "spawn to ready / bare ssh",
    ]
    assert len(re.findall(r"^  .+\s[\d.]+ (?:us|ms)$", text, re.MULTILINE)) == 6


#: What a script's ``--quick`` run must print beyond a ratio, checked on the smoke run's
#: output (one run of each script serves both).
OUTPUT_CHECKS: dict[str, Callable[[str], None]] = {
    "preview.py": check_preview,
    "remote.py": check_remote,
}


def test_support_modules_exist() -> None:
    """The list of non-scripts names real files (a renamed module is not skipped silently)."""
    for name in SUPPORT_MODULES:
        assert (BENCHMARKS / name).is_file(), name
    assert SCRIPTS, "no benchmark script found"
    assert set(OUTPUT_CHECKS) <= set(SCRIPTS), "an output check names no script"


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_quick(script: str) -> None:
    token = uuid.uuid4().hex
    env = {**os.environ, MARKER: token}
    process = subprocess.Popen(
        [sys.executable, str(BENCHMARKS / script), "--quick"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=QUICK_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        kill_all(marked(token))
        pytest.fail(
            f"{script} --quick took over {QUICK_TIMEOUT} s\n{stdout[-2000:]}\n{stderr[-2000:]}"
        )
    leftovers = wait_gone(token)
    kill_all(leftovers)
    assert process.returncode == 0, (
        f"{script} --quick exited with {process.returncode}\n"
        f"--- stdout (tail)\n{stdout[-3000:]}\n--- stderr (tail)\n{stderr[-3000:]}"
    )
    assert not leftovers, f"{script} left processes behind: {leftovers}"
    # A script that cannot run here (no PostgreSQL, no baseline) says why and exits 0;
    # in CI, where everything is installed, it exits non-zero instead (failed above).
    skipped = re.search(r"^\w+ benchmark skipped: (.*)$", stdout, re.MULTILINE)
    if skipped:
        pytest.skip(f"{script}: {skipped.group(1)}")
    # Every benchmark states its figures as ratios against a baseline of the same run.
    assert re.search(r"\d\.\d\dx", stdout), f"{script} printed no ratio:\n{stdout[-2000:]}"
    check = OUTPUT_CHECKS.get(script)
    if check is not None:
        check(stdout)
