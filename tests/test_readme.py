"""The README's Python snippets run exactly as written (they are the first code a user tries)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

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


def test_actor_snippet_runs_as_written(tmp_path: Path) -> None:
    result = run(snippet("class Counter(Actor)"), tmp_path)
    assert result.returncode == 0, result.stderr


def test_embed_snippet_saved_to_a_file_runs_from_another_folder(tmp_path: Path) -> None:
    """As a user would: the snippet in a file of its own, run from a folder outside the
    checkout, with the installed packages only (no PYTHONPATH pointing at the tree)."""
    program = tmp_path / "thumbnails.py"
    program.write_text(snippet("async def execute(job: SchedulerJob, runtime: Runtime)"))
    db = tmp_path / "lab.db"
    shutil.copy(ROOT / "tests" / "data" / "qcodes_sample.db", db)  # never the checked-in file
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, str(program), str(db)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    pngs = sorted(p.name for p in (tmp_path / "thumbs").iterdir())
    assert len(pngs) == 24
    assert result.stdout.splitlines()[0] == "thumbs/run4-thumbnail.png"


def test_embed_snippet_without_an_argument_draws_its_own_sample(tmp_path: Path) -> None:
    program = tmp_path / "thumbnails.py"
    program.write_text(snippet("async def execute(job: SchedulerJob, runtime: Runtime)"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, str(program)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "thumbs/run4-thumbnail.png"
    assert {p.suffix for p in (tmp_path / "thumbs").iterdir()} == {".png"}


def test_supervisor_snippet_restarts_the_crashed_child(tmp_path: Path) -> None:
    result = run(snippet('ChildSpec("db", Db'), tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "child_started cache 1 ",
        "child_started db 1 ",
        "cached get",
        "child_exited db 1 RuntimeError",
        "child_restarting db 2 ",
        "child_started db 2 ",
        "shutdown  0 ",
        "child_stopped db 2 ",
        "child_stopped cache 1 ",
    ]
    # The abnormal exit and the restart are WARNING records (logging's last resort).
    assert "child 'db' (incarnation 1) exited (RuntimeError)" in result.stderr


def test_helper_snippets_run_a_job_and_show_the_ladder(tmp_path: Path) -> None:
    """The helper saved as ``myapp/helper.py`` and the parent program run beside it."""
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "helper.py").write_text(snippet("# myapp/helper.py"))
    result = run(snippet("open_helper_pool(spec, config)"), tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "{'count': 9592}" in lines
    kinds = [line.split()[0] for line in lines[lines.index("{'count': 9592}") + 1 :]]
    # The first job, the second job, and the second one's cancel frame when its caller
    # gave up (the ladder's first rung: the helper checks and stops).
    assert kinds == ["job_started", "job_started", "cancel_sent"]


def test_run_sync_snippet_runs_any_function(tmp_path: Path) -> None:
    result = run(snippet("pool.run_sync(math.factorial, 20)"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["2432902008176640000", "[4, 9, 1000]", "120"]
