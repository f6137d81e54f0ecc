"""The source tree's layers and import graph (the design overview, "Rooms of the source tree").

Every import counts, also one inside a function or under ``TYPE_CHECKING``: a cycle
that only a lazy import hides is still a cycle for the reader. So does one written in a
program text that a child runs (``"__import__('actors._child')"``, ``sys.modules[...]``):
it reaches the same modules. The rules:

* ``protocol`` imports nothing of ours but itself (it is sans-io);
* ``actors`` imports itself and ``protocol``, never ``examples``;
* ``examples`` import public names only: the packages ``actors`` and ``protocol``, and
  their public modules (``actors.errors``, ``actors.helper``, ``protocol.codec``, …),
  never a private ``_module``;
* rooms have façades (contributing §A.3): a room is a package of ``actors`` whose name
  starts with ``_`` (``actors._eventlog``, and its sub-room ``actors._eventlog._ledger``).
  A module inside a room may be imported only from inside that room; from outside, a
  room is reached through its façade, its ``__init__``, and from inside never (a
  sibling is imported directly). A sub-room is a part of its room, so its façade is
  for the rest of that room only;
* no module imports, directly or not, a module that imports it;
* a module of ``actors`` or ``protocol`` reads no private member (``obj._name``) that
  only another module defines: code that shares private state stays in one module
  (contributing §A.2), and parts talk through a narrow interface.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("actors", "protocol", "examples")
#: A module of ours named in a program text: ``__import__('m')``, ``import_module('m')``,
#: ``sys.modules['m']`` or ``sys.modules.pop('m')``. A bare package name is not one: the
#: helper child's bootstrap puts stub packages there, without their ``__init__``.
_NAMED_IN_TEXT = re.compile(
    r"(?:__import__\(|import_module\(|sys\.modules(?:\.pop\(|\[))\s*['\"]"
    rf"((?:{'|'.join(PACKAGES)})(?:\.\w+)+)['\"]"
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
    }


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if _is_package(path) else module.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ours that ``module`` imports (a package's ``__init__`` counts as it)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = _NAMED_IN_TEXT.findall(node.value)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, path, node)
            # ``from pkg import name``: the submodule when ``name`` is one, else pkg.
            names = [
                f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target
                for alias in node.names
            ]
        else:
            continue
        found.update(name for name in names if name.split(".")[0] in PACKAGES)
    found.discard(module)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def _private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split(".")[1:])


def _may_import(layer: str, target: str) -> bool:
    target_layer = target.split(".")[0]
    if layer == "protocol":
        return target_layer == "protocol"
    if layer == "actors":
        return target_layer != "examples"
    return target_layer == "examples" or not _private(target)


def _room_holding(target: str) -> str | None:
    """The innermost room that holds ``target`` (a module or a sub-room), if any."""
    parts = target.split(".")
    rooms = [
        ".".join(parts[:end])
        for end in range(2, len(parts))
        if parts[0] == "actors" and all(part.startswith("_") for part in parts[1:end])
    ]
    return rooms[-1] if rooms else None


def _is_room(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "actors" and len(parts) > 1 and all(p.startswith("_") for p in parts[1:])


def facade_violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a room's inside from outside the room, and of a room's façade from
    inside it (a sibling is imported directly), as ``"importer -> imported"``."""
    return [
        f"{importer} -> {target}"
        for importer, targets in sorted(graph.items())
        for target in sorted(targets)
        if (
            (room := _room_holding(target)) is not None
            and importer != room
            and not importer.startswith(room + ".")
        )
        or (_is_room(target) and importer.startswith(target + "."))
    ]


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import that breaks a layer rule, as ``"importer -> imported"``."""
    return [
        f"{importer} -> {target}"
        for importer, targets in sorted(graph.items())
        for target in sorted(targets)
        if not _may_import(importer.split(".")[0], target)
    ]


def test_no_import_cycles() -> None:
    assert find_cycles(_graph()) == []


def test_each_layer_imports_only_what_it_may() -> None:
    assert layer_violations(_graph()) == []


def test_rooms_are_entered_through_their_facades() -> None:
    assert facade_violations(_graph()) == []


def test_the_graph_is_really_read() -> None:
    graph = _graph()
    assert "protocol.envelope" in graph["actors._helpers._process._process"]
    assert "actors" in graph["examples.preview.app.preview_app"]
    # The zygote's bootstrap, a program text, enters the child's room by its façade.
    assert "actors._child" in graph["actors._helpers._process._spec"]
    assert all(name.startswith(("actors", "protocol", "examples")) for name in graph)


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
    ],
)
def test_find_cycles_finds_them(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert find_cycles(graph) == expected


def test_layer_rules_catch_upward_and_private_imports() -> None:
    graph = {
        "protocol.codec": {"actors.errors"},
        "actors._core._actor": {"examples.web.cli", "protocol.errors"},
        "examples.web.cli": {"actors._core._config", "actors", "protocol.codec"},
    }
    assert layer_violations(graph) == [
        "actors._core._actor -> examples.web.cli",
        "examples.web.cli -> actors._core._config",
        "protocol.codec -> actors.errors",
    ]


def test_facade_rule_catches_imports_past_a_facade() -> None:
    graph = {
        "actors._runtime._tree": {"actors._helpers", "actors._helpers._pool._handle"},
        "actors._eventlog._runs": {"actors._eventlog._admission._gate", "actors._eventlog._types"},
        "actors._eventlog": {"actors._eventlog._admission", "actors._eventlog._ledger._ledger"},
        "actors._eventlog._admission._intake": {"actors._eventlog._admission._gate"},
        "actors._scheduler._actor": {"actors._helpers._pool", "actors.errors", "actors._core"},
        "actors.helper": {"actors._child._serve", "actors._core_errors"},
        "actors._core._mailbox": {"actors._core", "actors._eventlog"},
    }
    assert facade_violations(graph) == [
        "actors._core._mailbox -> actors._core",
        "actors._eventlog -> actors._eventlog._ledger._ledger",
        "actors._eventlog._runs -> actors._eventlog._admission._gate",
        "actors._runtime._tree -> actors._helpers._pool._handle",
        "actors._scheduler._actor -> actors._helpers._pool",
        "actors.helper -> actors._child._serve",
    ]


#: Names with a leading underscore that are the standard library's public API
#: (namedtuple's methods, ``os._exit``).
_PUBLIC_PRIVATES = frozenset({"_asdict", "_exit", "_fields", "_make", "_replace"})
#: Known reaches into another module's private members, each to fold into its owner.
_KNOWN_REACHES = frozenset(
    {
        "actors._eventlog._actor -> _closing",  # EventLog's (set after a crash)
        "actors._eventlog._journal -> _active",  # PortHub's (hub.listening, inlined)
    }
)


def private_reaches(module: str, path: Path) -> set[str]:
    """The private members ``module`` reads of other modules' objects, as
    ``"module -> _name"``: ``obj._name`` where no def, class, assignment or
    ``self._name = ...`` of ``module`` itself defines ``_name``."""
    tree = ast.parse(path.read_text(), str(path))
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, ast.alias):
            own.add((node.asname or node.name).split(".")[0])
    return {
        f"{module} -> {node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and node.attr not in own | _PUBLIC_PRIVATES
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    }


def test_no_module_reaches_into_another_modules_privates() -> None:
    found = {
        reach
        for name, path in _modules().items()
        if name.split(".")[0] in ("actors", "protocol")
        for reach in private_reaches(name, path)
    }
    assert found - _KNOWN_REACHES == set()
    assert found >= _KNOWN_REACHES, "a known reach is gone: drop it from the list"
