"""The Python examples of README.md and docs/ type-check under ``mypy --strict``.

Every ```` ```python ```` block of ``README.md`` and every ``.. code-block:: python``
of ``docs/**/*.rst`` is written to a module of its own and checked in one mypy run, so a
renamed parameter or a changed return type breaks the test, not the reader. New blocks
are picked up by themselves. A block that cannot stand alone (intentionally partial)
starts with the line ``# doc-example: skip (<why>)``; the reason is required.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
SKIP = re.compile(r"#\s*doc-example:\s*skip\b(?P<why>.*)")
_FENCE = re.compile(r"^```python[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
_DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)\.\. code-block::[ \t]*python3?[ \t]*$")


@attrs.frozen
class Example:
    """One Python block of the documentation."""

    source: str  # the file, relative to the repository
    line: int  # 1-based line of the block's first code line
    code: str

    @property
    def skip_reason(self) -> str | None:
        first = self.code.lstrip().splitlines()[0] if self.code.strip() else ""
        match = SKIP.match(first)
        return None if match is None else match["why"].strip(" ()")


def markdown_examples(path: Path, base: Path = ROOT) -> list[Example]:
    """The ```` ```python ```` blocks of a Markdown file."""
    text = path.read_text(encoding="utf-8")
    return [
        Example(str(path.relative_to(base)), text.count("\n", 0, m.start("body")) + 1, m["body"])
        for m in _FENCE.finditer(text)
    ]


def rst_examples(path: Path, base: Path = ROOT) -> list[Example]:
    """The ``.. code-block:: python`` blocks of a reST file, dedented."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for number, line in enumerate(lines):
        directive = _DIRECTIVE.match(line)
        if directive is None:
            continue
        outer = len(directive["indent"].expandtabs())
        body: list[str] = []
        start = None
        for index in range(number + 1, len(lines)):
            current = lines[index]
            if current.strip() and len(current) - len(current.lstrip()) <= outer:
                break
            if start is None:
                if not current.strip() or current.lstrip().startswith(":"):
                    continue  # the blank line and the directive's options
                start = index
            body.append(current)
        if start is not None:
            code = textwrap.dedent("\n".join(body)).strip("\n") + "\n"
            found.append(Example(str(path.relative_to(base)), start + 1, code))
    return found


def all_examples() -> list[Example]:
    examples = markdown_examples(ROOT / "README.md")
    for path in sorted((ROOT / "docs").rglob("*.rst")):
        examples += rst_examples(path)
    return examples


def test_the_extractors_find_fenced_and_directive_blocks(tmp_path: Path) -> None:
    doc = tmp_path / "x.rst"
    doc.write_text(
        "Title\n\n.. code-block:: python\n   :caption: c\n\n   import trio\n\n"
        "   def f() -> None:\n       pass\n\nAfter.\n\n"
        "  .. code-block:: python\n\n     x = 1\nEnd.\n\n.. code-block:: sh\n\n   ls\n",
        encoding="utf-8",
    )
    assert [(e.source, e.line, e.code) for e in rst_examples(doc, tmp_path)] == [
        ("x.rst", 6, "import trio\n\ndef f() -> None:\n    pass\n"),
        ("x.rst", 15, "x = 1\n"),
    ]
    md = tmp_path / "x.md"
    md.write_text("a\n```python\nx = 1\n```\n```sh\nls\n```\n", encoding="utf-8")
    assert [(e.line, e.code) for e in markdown_examples(md, tmp_path)] == [(3, "x = 1\n")]
    assert Example("x", 1, "# doc-example: skip (shell)\nls\n").skip_reason == "shell"
    assert Example("x", 1, "# doc-example: skip\nls\n").skip_reason == ""
    assert Example("x", 1, "import trio\n").skip_reason is None


def test_every_skipped_example_says_why() -> None:
    unexplained = [f"{e.source}:{e.line}" for e in all_examples() if e.skip_reason == ""]
    assert unexplained == [], "a '# doc-example: skip' needs a reason in parentheses"


def test_the_documentation_examples_type_check_under_mypy_strict(tmp_path: Path) -> None:
    examples = [e for e in all_examples() if e.skip_reason is None]
    assert len(examples) >= 5  # README.md's examples at least
    blocks = tmp_path / "blocks"
    blocks.mkdir()
    where = {}
    for number, example in enumerate(examples):
        stem = re.sub(r"\W", "_", example.source.lower().removesuffix(".md").removesuffix(".rst"))
        name = f"{stem}_{number}_l{example.line}.py"
        (blocks / name).write_text(example.code, encoding="utf-8")
        where[name] = example
    # The example applications are installed as ``trio_actors_examples`` through an
    # import hook mypy does not follow; a link under that name stands in for it.
    paths = tmp_path / "paths"
    paths.mkdir()
    (paths / "trio_actors_examples").symlink_to(ROOT / "examples", target_is_directory=True)
    env = {**os.environ, "MYPYPATH": str(paths)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--show-error-codes",
            "--no-color-output",
            # Its own cache (kept between runs): test_tutorial's mypy run may use the
            # checkout's default one at the same time (pytest -n).
            "--cache-dir",
            str(ROOT / ".mypy_cache" / "doc-examples"),
            *sorted(str(blocks / name) for name in where),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    problems = []
    for line in done.stdout.splitlines():
        match = re.match(r"(?P<file>[^:]+\.py):(?P<line>\d+): (?P<rest>.*)", line)
        if match is None:
            problems.append(line)
            continue
        example = where.get(Path(match["file"]).name)
        if example is None:
            problems.append(line)  # an error outside the blocks (a broken import)
            continue
        problems.append(
            f"{example.source}:{example.line + int(match['line']) - 1}: {match['rest']}"
        )
    assert not problems, "\n".join([*problems, done.stderr])
    assert done.returncode == 0, done.stderr
