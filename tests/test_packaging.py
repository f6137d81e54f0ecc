"""The distribution: what it installs, the console commands from a fresh venv, and an
editable install that a type checker can follow (design §1.8).

The example applications live in ``examples/`` of a checkout (``python -m examples...``)
and are installed as ``trio_actors_examples``, so no top-level package named
``examples`` lands in site-packages (see the design overview, "Rooms of the source tree").
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
import trio
from process_support import assert_no_children

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
INSTALLED_AS = {"examples": "trio_actors_examples"}
COMMANDS = {
    "trio-actors-preview": "trio_actors_examples.preview.server:main",
    "trio-actors-preview-client": "trio_actors_examples.preview.cli.client:main",
    "trio-actors-jobs": "trio_actors_examples.jobs.server:main",
    "trio-actors-jobs-client": "trio_actors_examples.jobs.client:main",
}


def _tree_packages() -> set[str]:
    found = set()
    for top in ("actors", "protocol", "examples"):
        for init in (ROOT / top).rglob("__init__.py"):
            parts = list(init.parent.relative_to(ROOT).parts)
            parts[0] = INSTALLED_AS.get(parts[0], parts[0])
            found.add(".".join(parts))
    return found


def test_the_package_list_names_every_package_of_the_tree() -> None:
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert set(setuptools["packages"]) == _tree_packages()
    assert setuptools["package-dir"] == {"trio_actors_examples": "examples"}


def test_console_commands_point_at_real_functions() -> None:
    assert PYPROJECT["project"]["scripts"] == COMMANDS


def _bare_venv(where: Path) -> Path:
    """A new venv whose dependencies come from the test's own through a ``.pth`` line."""
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    (Path(purelib) / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


#: What a build never reads: its own outputs, caches and environments.
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", "_build"
)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of this checkout's sources, for pip to build from.

    Never the checkout itself: a build writes ``build/`` there, and an editable install
    rebuilds ``build/__editable__...``, the link tree the test environment (and a
    concurrent test's subprocess) imports the examples through.
    """
    copy = tmp_path_factory.mktemp("checkout") / "trio-actors"
    shutil.copytree(ROOT, copy, ignore=_NOT_SOURCE, symlinks=True)
    return copy


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory, checkout: Path) -> Path:
    """A new venv with trio-actors installed from this checkout, not editable.

    Its dependencies come from the test's own environment through a ``.pth`` line (a few
    seconds instead of a minute); the project itself is built (in pip's isolated build
    environment) and installed into the new venv by pip, as a user's ``pip install``
    would.
    """
    venv = _bare_venv(tmp_path_factory.mktemp("venv"))
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "-q", "--no-deps", str(checkout)],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return venv


def _run(venv: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_no_top_level_examples_package_is_installed(fresh_venv: Path, tmp_path: Path) -> None:
    python = str(fresh_venv / "bin" / "python")
    probe = _run(fresh_venv, [python, "-c", "import examples"], tmp_path)
    assert "No module named 'examples'" in probe.stderr
    where = _run(
        fresh_venv,
        [python, "-c", "import actors, trio_actors_examples as e; print(e.__file__)"],
        tmp_path,
    )
    assert where.returncode == 0, where.stderr
    assert str(fresh_venv) in where.stdout  # the installed copy, not the checkout


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_answers_help_from_any_folder(
    fresh_venv: Path, tmp_path: Path, command: str
) -> None:
    result = _run(fresh_venv, [str(fresh_venv / "bin" / command), "--help"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {command}")


@pytest.mark.parametrize("command", ["trio-actors-preview", "trio-actors-jobs"])
async def test_each_server_command_starts_and_stops_from_any_folder(
    fresh_venv: Path, tmp_path: Path, command: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TRIO_ACTORS_RUNTIME_DIR"] = str(tmp_path / "runtime")
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    process = await trio.lowlevel.open_process(
        [str(fresh_venv / "bin" / command), "--port", "0"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    output = b""
    try:
        with trio.fail_after(30):
            while b"listening on ws://127.0.0.1:" not in output:
                chunk = await process.stdout.receive_some(4096)
                assert chunk, output
                output += chunk
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert_no_children()


TYPED_USE = """\
from __future__ import annotations

from actors import Actor, ActorRef, LiveRef, Reply, SupervisorRef


class Doubler(Actor[int, int]):
    async def handle(self, message: int, reply: Reply[int]) -> None:
        reply.send(message * 2)


async def ask(ref: ActorRef[int, int], sup: SupervisorRef) -> int:
    live: LiveRef[int, int] = sup.child("doubler")
    return await ref.ask(21, timeout=1.0) + await live.ask(1, timeout=1.0)


async def wrong(ref: ActorRef[int, int]) -> str:
    return await ref.ask("21", timeout=1.0)
"""


def test_an_editable_install_is_followed_by_mypy(tmp_path: Path, checkout: Path) -> None:
    """The README's ``pip install -e .``, then ``mypy --strict`` on a file elsewhere.

    mypy must find ``actors`` (a path entry, not an import hook) with its types
    (``py.typed``): the typed code checks, and the wrong call is caught.
    """
    venv = _bare_venv(tmp_path)
    python = str(venv / "bin" / "python")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
         "-e", str(checkout)],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "use.py").write_text(TYPED_USE)
    result = _run(
        venv,
        [sys.executable, "-m", "mypy", "--strict", "--python-executable", python,
         "--cache-dir", str(tmp_path / "cache"), "use.py"],
        work,
    )  # fmt: skip
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert errors == [
        'use.py:17: error: Incompatible return value type (got "int", expected "str")  '
        "[return-value]",
        'use.py:17: error: Argument 1 to "ask" of "ActorRef" has incompatible type "str"; '
        'expected "int"  [arg-type]',
    ], result.stdout + result.stderr
