"""The tutorial's programs run as the tutorial says, and print what it shows.

``docs/tutorial.rst`` includes each program of ``docs/tutorial_code/`` whole
(``literalinclude``) and shows its output in a ``code-block:: text`` captioned with the
command (``python step1_run_sync.py``). Each program runs here as a reader runs it: a
fresh interpreter in that folder, with the real clock and real helper processes; its
standard output must equal the block, and none of the processes it started may be left.
The captioned ``mypy --strict wrong.py`` block is checked the same way against mypy.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "tutorial.rst"
CODE = ROOT / "docs" / "tutorial_code"
_BLOCK = re.compile(
    r"^\.\. code-block:: (?P<language>\w+)\n"
    r"(?P<options>(?:   :\w+:.*\n)*)\n"  # the directive's options, then a blank line
    r"(?P<body>(?:   .*\n|\n)+)",  # indented lines (and blank ones)
    re.MULTILINE,
)
_INCLUDE = re.compile(r"^\.\. literalinclude:: tutorial_code/(?P<file>\S+)$", re.MULTILINE)


def blocks() -> list[tuple[str, str | None, str]]:
    """Each code block of the tutorial: language, caption, body (dedented)."""
    found = []
    for match in _BLOCK.finditer(DOC.read_text(encoding="utf-8")):
        caption = re.search(r":caption: (.*)", match["options"])
        body = textwrap.dedent(match["body"]).strip("\n") + "\n"
        found.append((match["language"], caption[1] if caption else None, body))
    return found


def shown_output(command: str) -> str:
    (body,) = [body for lang, caption, body in blocks() if lang == "text" and caption == command]
    return body


STEPS = sorted(path.name for path in CODE.glob("step*.py"))


def test_the_tutorial_shows_every_program_and_what_it_prints() -> None:
    included = _INCLUDE.findall(DOC.read_text(encoding="utf-8"))
    assert included == ["work.py", *STEPS]
    assert len(STEPS) == 6
    for step in STEPS:
        assert shown_output(f"python {step}").strip()


def _left_behind(marker: str) -> list[int]:
    """Pids of live processes whose environment carries ``marker`` (helpers inherit it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if marker.encode() in environ:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("step", STEPS)
def test_each_program_prints_what_the_tutorial_shows(step: str) -> None:
    marker = f"TUTORIAL_RUN={uuid.uuid4().hex}"
    name, value = marker.split("=")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {name: value}
    done = subprocess.run(
        [sys.executable, step],
        cwd=CODE,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown_output(f"python {step}"), done.stderr
    if sys.platform == "linux":  # the pool reaped every helper before the program ended
        assert _left_behind(marker) == []


def test_mypy_sees_what_the_tutorial_says(tmp_path: Path) -> None:
    """The programs type-check under ``mypy --strict``; the wrong example fails as shown."""
    (wrong,) = [body for lang, _, body in blocks() if lang == "python" and "def wrong" in body]
    (tmp_path / "wrong.py").write_text(wrong, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--no-color-output",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            *sorted(str(path) for path in CODE.glob("*.py")),
            "wrong.py",
        ],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(CODE)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.stdout == shown_output("mypy --strict wrong.py"), done.stderr
