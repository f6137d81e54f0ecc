"""Smoke run of ``benchmarks/remote.py --quick``: it starts its private sshd, measures a
remote helper and bare ``ssh -T`` in the same run (wall and the path's CPU time), and
prints every figure and ratio."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from remote_support import require_sshd

ROOT = Path(__file__).resolve().parents[2]


def test_the_remote_benchmark_runs_end_to_end() -> None:
    require_sshd()
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "remote.py"), "--quick"],
        capture_output=True, text=True, timeout=120, check=True, cwd=ROOT,
    )  # fmt: skip
    ratios = re.findall(r"^  (.+?)\s+[\d.]+x \(<= 1.3x\) (OK|MISS)$", out.stdout, re.MULTILINE)
    assert [name for name, _ in ratios] == [
        "round trip / echo",
        "CPU of the path / echo",
        "spawn to ready / bare ssh",
    ]
    assert len(re.findall(r"^  .+\s[\d.]+ (?:us|ms)$", out.stdout, re.MULTILINE)) == 6
