"""The README's Python snippets run exactly as written (they are the first code a user tries)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SNIPPETS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def snippet(containing: str) -> str:
    (found,) = [text for text in SNIPPETS if containing in text]
    return found


def run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("marker", ["class Counter(Actor)", "async def execute(job, runtime)"])
def test_snippet_runs_as_written(marker: str, tmp_path: Path) -> None:
    # The embedding snippet reads tests/data/qcodes_sample.db relative to the current
    # folder and writes thumbs/ there: give it a copy, never the checked-in file.
    (tmp_path / "tests" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "data" / "qcodes_sample.db", tmp_path / "tests" / "data")
    result = run(snippet(marker), tmp_path)
    assert result.returncode == 0, result.stderr
    if "execute" in marker:
        pngs = sorted(p.name for p in (tmp_path / "thumbs").iterdir())
        assert len(pngs) == 24
        assert result.stdout.splitlines()[0] == "thumbs/run4-thumbnail.png"
