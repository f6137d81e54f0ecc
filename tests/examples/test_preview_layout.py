"""The preview's rooms by process: the helper child stays light, the others use façades.

``examples/preview/child/`` runs in a helper child: it never imports trio nor the
server's side (``app/``, ``cli/``, ``server.py``). Outside ``app/``, the server's side is
imported through its façade ``examples.preview.app`` only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PREVIEW = Path(__file__).resolve().parents[2] / "examples" / "preview"


def _module(path: Path) -> str:
    parts = path.relative_to(PREVIEW.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports (relative imports resolved), lazy ones included."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def _files(room: str) -> list[Path]:
    return sorted((PREVIEW / room).rglob("*.py"))


@pytest.mark.parametrize("path", _files("child"), ids=lambda p: p.name)
def test_the_helper_child_imports_neither_trio_nor_the_server_side(path: Path) -> None:
    forbidden = ("trio", "attrs", "cattrs", "examples.preview.app", "examples.preview.cli",
                 "examples.preview.server", "examples.web")  # fmt: skip
    bad = sorted(
        name
        for name in imports_of(path)
        if any(name == f or name.startswith(f"{f}.") for f in forbidden)
    )
    assert bad == []


@pytest.mark.parametrize(
    "path",
    [PREVIEW / "server.py", PREVIEW / "sample_db.py", *_files("cli")],
    ids=lambda p: p.name,
)
def test_the_server_side_is_imported_through_its_facade(path: Path) -> None:
    inside = sorted(name for name in imports_of(path) if name.startswith("examples.preview.app."))
    facade = {f"examples.preview.app.{name}" for name in _facade_names()}
    assert [name for name in inside if name not in facade] == []


def _facade_names() -> list[str]:
    tree = ast.parse((PREVIEW / "app" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "__all__":
            return list(ast.literal_eval(node.value))
    raise AssertionError("examples/preview/app/__init__.py has no __all__")


def test_the_checks_read_the_imports() -> None:
    assert "examples.preview.child.qcodes.source" in imports_of(PREVIEW / "child" / "helper.py")
    assert "examples.preview.app" in imports_of(PREVIEW / "server.py")
    assert "examples.preview.app.PreviewApp" in imports_of(PREVIEW / "server.py")
