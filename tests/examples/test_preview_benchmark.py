"""Smoke run of ``benchmarks/preview.py``: it builds its database, measures the floor and
the real server, and prints every figure and ratio (real processes, real clock).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_preview_benchmark_runs_end_to_end() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "preview.py"), "--runs", "12",
         "--timeout", "60"],
        capture_output=True, text=True, timeout=120, check=True, cwd=ROOT,
    )  # fmt: skip
    text = out.stdout
    assert "database of 12 runs" in text
    assert "24 images" in text  # every run's thumbnail and preview came
    assert "missing" not in text
    ratios = re.findall(r"^  (.+?)\s+[\d.]+(?:x| ms)\s+\(<= [\d.]+ ?(?:x|ms)\) (OK|MISS)$",
                        text, flags=re.MULTILINE)  # fmt: skip
    assert [name for name, _ in ratios] == [
        "CPU server + helpers / floor",
        "server peak RSS / floor process",
        "all thumbnails / helpers alone",
        "first thumbnail after connect",
    ]
    # The helpers alone bound the ratios: measured, and below what the server reached.
    assert re.search(r"^helpers alone \(bare pool, 2 helpers\): thumbnails [\d.]+ s, "
                     r"all images [\d.]+ s, CPU [\d.]+ s$", text, flags=re.MULTILINE)  # fmt: skip
    bounds = dict(re.findall(r"^  (CPU helpers alone / floor|helpers' thumbnails / floor)"
                             r"\s+([\d.]+)x", text, flags=re.MULTILINE))  # fmt: skip
    assert len(bounds) == 2
    assert all(float(value) > 0 for value in bounds.values())
