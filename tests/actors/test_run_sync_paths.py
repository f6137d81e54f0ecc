"""Helpers start where the parent runs: its ``sys.path`` and working directory (§3.14).

And a helper that cannot start says why in its error's message. Real helpers, real
clock, short timeouts.
"""

from __future__ import annotations

import os
import sys

import pytest
import run_sync_functions as fns
from helper_support import FAST, assert_no_children

from actors import (
    FunctionNotImportable,
    HelperExited,
    HelperSpec,
    HelperStartupFailed,
    open_helper_pool,
)

ENTRY_SOURCE = """\
from actors.helper import serve


def hello(payload, ctx):
    return f"hello {payload}"


def main():
    serve({"hello": hello})
"""


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


@pytest.fixture
def private_path(tmp_path, monkeypatch):
    """A folder only this process's ``sys.path`` has, holding ``private_rs_*`` modules."""
    folder = tmp_path / "lib"
    folder.mkdir()
    (folder / "private_rs_entry.py").write_text(ENTRY_SOURCE)
    (folder / "private_rs_fns.py").write_text("def triple(x):\n    return 3 * x\n")
    monkeypatch.syspath_prepend(str(folder))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    yield folder, elsewhere
    for name in ("private_rs_entry", "private_rs_fns"):
        sys.modules.pop(name, None)


async def test_a_helper_importable_only_from_the_parents_path_starts_from_another_cwd(
    private_path,
):
    folder, elsewhere = private_path
    import private_rs_fns  # type: ignore[import-not-found]

    assert "PYTHONPATH" not in os.environ or str(folder) not in os.environ["PYTHONPATH"]
    spec = HelperSpec(entry="private_rs_entry:main", cwd=str(elsewhere))
    async with open_helper_pool(spec, timeouts=FAST) as pool:
        assert await pool.run_job("hello", "there") == "hello there"
        assert await pool.run_sync(private_rs_fns.triple, 5) == 15
        cwd, path, trio_loaded = await pool.run_sync(fns.where)
    assert cwd == str(elsewhere)
    assert path[0] == str(folder)  # the parent's order, first
    assert not trio_loaded  # a call imports only what the function needs


async def test_a_helper_inherits_the_parents_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = HelperSpec(entry="actors.helper:serve_calls")
    async with open_helper_pool(spec, timeouts=FAST) as pool:
        cwd, _, _ = await pool.run_sync(fns.where)
    assert cwd == str(tmp_path)


async def test_without_inherit_path_the_helper_has_only_its_own_path(private_path):
    folder, elsewhere = private_path
    import private_rs_fns

    spec = HelperSpec(
        entry="actors.helper:serve_calls",
        cwd=str(elsewhere),
        inherit_path=False,
        env={"PYTHONPATH": os.path.dirname(fns.__file__)},  # for run_sync_functions
    )
    async with open_helper_pool(spec, timeouts=FAST) as pool:
        _, path, _ = await pool.run_sync(fns.where)
        with pytest.raises(FunctionNotImportable) as caught:
            await pool.run_sync(private_rs_fns.triple, 5)
    assert str(folder) not in path
    assert "No module named 'private_rs_fns'" in str(caught.value)


async def test_a_helper_that_fails_to_start_says_why_in_its_message(tmp_path):
    spec = HelperSpec(entry="no_such_module_rs:main", cwd=str(tmp_path))
    with pytest.raises((HelperExited, HelperStartupFailed)) as caught:
        async with open_helper_pool(spec, timeouts=FAST):
            pass
    message = str(caught.value)
    assert "ModuleNotFoundError: No module named 'no_such_module_rs'" in message
    assert "exit code 1" in message
    assert caught.value.details["stderr"].startswith("Traceback (most recent call last):")


def test_inherit_path_must_be_a_bool():
    with pytest.raises(TypeError, match="inherit_path"):
        HelperSpec(entry="a:b", inherit_path="yes")  # type: ignore[arg-type]


def test_the_command_carries_the_parents_path_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", "lib", str(tmp_path / "lib"), "/usr/lib/python3"])
    command = HelperSpec(entry="a:b").command()
    assert command[6:] == ["3", str(tmp_path), str(tmp_path / "lib"), "/usr/lib/python3"]
    assert HelperSpec(entry="a:b", inherit_path=False).command()[6:] == ["0"]
