"""Sphinx configuration of the trio-actors design document and API reference.

``docs/build`` builds it with warnings as errors and ``nitpicky`` on, so a reference to
one of our names that does not resolve fails the build. Besides the settings, a few
small pieces of the build live here:

* ``error-table``: a directive that writes the table of every error class, its code
  and its category from :mod:`actors.errors` itself, so ``errors.rst`` cannot drift
  from the code;
* citations ``design §N.M`` (in docstrings and in these pages) become links to the
  section's label ``design-N.M``, so citing a section that does not exist fails;
* every public name (the ``__all__`` of :data:`PUBLIC_MODULES`) must be documented
  somewhere in the API reference, or the build fails;
* a reference to one of our objects by another path than the documented one — a
  private module (``actors._core._actor.ActorRef``, which is how autodoc writes type
  hints) or a re-export (``protocol.FrameTooLarge``) — resolves to where the same
  object is documented. Type variables, type aliases and ``TypedDict`` keyword sets
  (``**options: Unpack[...]``) of our modules are written as plain text, as Sphinx
  does for :mod:`typing`'s; so is an alias that exists only for type checkers (assigned
  under ``if TYPE_CHECKING:``). A name imported under ``if TYPE_CHECKING:`` is looked up
  in the module it comes from.
  Anything else of ours that is documented nowhere still fails the build;
* napoleon reads Google-style sections in modules, classes, functions and
  properties, but not in attribute docstrings, whose first line is prose
  ("Close has begun: no new job is accepted."), not ``type: description``.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import inspect
import re
import sys
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx import addnodes
from sphinx.ext import napoleon
from sphinx.util import logging

if TYPE_CHECKING:
    from docutils.nodes import Element, Node
    from sphinx.application import Sphinx
    from sphinx.environment import BuildEnvironment

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

project = "trio-actors"
copyright = "the trio-actors authors"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
exclude_patterns = ["_build", "pending"]
nitpicky = True
html_theme = "alabaster"

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Without intersphinx (the build uses no network) references to other projects'
# objects cannot resolve. Only those packages are ignored, by name; never ours.
_FOREIGN = ("trio", "cattrs", "prometheus_client", "collections", "json", "os", "pathlib", "random")
nitpick_ignore_regex = [(r"py:.*", rf"({'|'.join(_FOREIGN)})(\..+)?")]

#: The modules whose ``__all__`` is the public API; each name must be documented.
PUBLIC_MODULES = (
    "actors",
    "actors.helper",
    "actors.errors",
    "actors.metrics",
    "protocol",
    "protocol.messages",
    "protocol.codec",
    "protocol.framing",
    "protocol.envelope",
    "protocol.errors",
    "protocol.records",
)
_OURS = ("actors", "protocol")
_log = logging.getLogger(__name__)


# --- the error table ------------------------------------------------------------------


def error_rows() -> list[tuple[str, str, str, str, str]]:
    """``(class, parent, code, category, summary)`` of every public error class.

    In the order of ``actors.errors.__all__``; the summary is the docstring's first
    paragraph.
    """
    import actors.errors

    rows = []
    for name in actors.errors.__all__:
        cls = getattr(actors.errors, name)
        if not (isinstance(cls, type) and issubclass(cls, actors.errors.ActorError)):
            continue
        parent = "" if cls is actors.errors.ActorError else cls.__mro__[1].__name__
        summary = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        rows.append((name, parent, cls.code, cls.category, summary))
    return rows


def _table(header: tuple[str, ...], widths: tuple[int, ...]) -> tuple[nodes.table, nodes.tbody]:
    """A table with ``header`` and column ``widths``, and its body to add rows to."""
    table = nodes.table()
    group = nodes.tgroup(cols=len(header))
    table += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    head += ErrorTable._row([[nodes.Text(text)] for text in header])
    body = nodes.tbody()
    group += head
    group += body
    return table, body


class ErrorTable(Directive):
    """``.. error-table::``: the table of :func:`error_rows`, each class linked."""

    has_content = False

    def run(self) -> list[Node]:
        header = ("Error", "Parent", "code", "category", "Meaning")
        table, body = _table(header, (18, 14, 22, 10, 40))
        context = self.state.document.settings.env.ref_context
        saved = context.get("py:module")
        context["py:module"] = "actors.errors"  # the summaries' references are relative
        try:
            for name, parent, code, category, summary in error_rows():
                lines = [summary]
                link_lines(lines)
                meaning, messages = self.state.inline_text(lines[0], self.lineno)
                body += self._row(
                    [
                        [self._xref(name)],
                        [self._xref(parent)] if parent else [],
                        [nodes.literal(code, code)],
                        [nodes.Text(category)],
                        [*meaning, *messages],
                    ]
                )
        finally:
            if saved is None:
                context.pop("py:module", None)
            else:
                context["py:module"] = saved
        return [table]

    @staticmethod
    def _row(cells: list[list[Node]]) -> nodes.row:
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            entry += nodes.paragraph("", "", *cell)
            row += entry
        return row

    @staticmethod
    def _xref(name: str) -> Node:
        ref = addnodes.pending_xref(
            "", refdomain="py", reftype="exc", reftarget=f"actors.errors.{name}"
        )
        ref += nodes.literal(name, name)
        return ref


# --- the metric table -----------------------------------------------------------------


class MetricTable(Directive):
    """``.. metric-table::``: every metric of :data:`actors.metrics.METRICS`."""

    has_content = False

    def run(self) -> list[Node]:
        from actors._metrics import METRICS

        header = ("Metric", "Type", "Labels", "Meaning", "Measured from")
        table, body = _table(header, (30, 9, 14, 40, 24))
        for spec in METRICS:
            labels = ", ".join(spec.labels)
            body += ErrorTable._row(
                [
                    [nodes.literal(spec.exported, spec.exported)],
                    [nodes.Text(spec.type)],
                    [nodes.literal(labels, labels)] if labels else [],
                    [nodes.Text(spec.help)],
                    [nodes.Text(spec.source)],
                ]
            )
        return [table]


# --- design citations become links ---------------------------------------------------

_CITATION = re.compile(r"(design )?§(\d+(?:\.\d+)?)")
_INLINE_LITERAL = re.compile(r"(``.+?``|:\w+:`[^`]*`)")


def link_lines(lines: list[str]) -> None:
    """Turn ``design §N.M`` (or a bare ``§N.M``) into a link to label ``design-N.M``.

    Left alone: literal blocks, inline literals, existing roles, and table rows (a
    longer text would break their columns).
    """
    literal_indent: int | None = None
    for index, line in enumerate(lines):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None:
            if stripped and indent <= literal_indent:
                literal_indent = None
            else:
                continue
        if stripped.endswith("::"):
            literal_indent = indent
        if "§" not in line or stripped.startswith(("|", "+", "=")) or "  " in stripped:
            continue
        pieces = _INLINE_LITERAL.split(line)
        pieces[::2] = [_CITATION.sub(_link, piece) for piece in pieces[::2]]
        lines[index] = "".join(pieces)


def _link(match: re.Match[str]) -> str:
    if re.search(r"RFC \d+ $", match.string[max(0, match.start() - 16) : match.start()]):
        return match.group(0)  # a section of that RFC, not of the design document
    return f":ref:`{match.group(0)} <design-{match.group(2)}>`"


def link_source(app: Sphinx, docname: str, source: list[str]) -> None:
    """``source-read``: citations in this document's own pages become links."""
    lines = source[0].split("\n")
    link_lines(lines)
    source[0] = "\n".join(lines)


# --- docstrings: Google sections, then citation links -------------------------------


def process_docstring(
    app: Sphinx, what: str, name: str, obj: object, options: Any, lines: list[str]
) -> None:
    """``autodoc-process-docstring``: napoleon (not for attributes), then the links."""
    if what in ("attribute", "data") and _is_type_doc(lines, obj):
        lines.clear()  # a constant without a doc comment is not its type (``float``)
        return
    if what == "property":
        what = "method"  # its sections (Raises:) are read; its first line is prose
    if what not in ("attribute", "data"):
        napoleon._process_docstring(app, what, name, obj, options, lines)  # type: ignore[arg-type]
    link_lines(lines)


def _is_type_doc(lines: list[str], obj: object) -> bool:
    """True if ``lines`` are only the docstring of ``obj``'s type (autodoc's fallback)."""
    doc = inspect.getdoc(type(obj))
    return bool(doc) and "\n".join(lines).strip() == (doc or "").strip()


# --- references by another path resolve to the documented one -------------------------


def _lookup(path: str) -> tuple[object, str] | None:
    """The object a dotted path of ours names, and the rest of the path below it.

    The longest importable module prefix, then at most one attribute of it; the rest
    (a method, an attribute of a class) is returned as text.
    """
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        if cut < len(parts) and hasattr(module, parts[cut]):
            return getattr(module, parts[cut]), ".".join(parts[cut + 1 :])
        return module, ".".join(parts[cut:])
    return None


def _documented(env: BuildEnvironment) -> dict[str, list[tuple[str, object]]]:
    """Short name → ``(documented full name, object)`` for our documented objects."""
    cached: dict[str, list[tuple[str, object]]] | None = getattr(env, "_ours_documented", None)
    if cached is not None:
        return cached
    table: dict[str, list[tuple[str, object]]] = {}
    for fullname, entry in env.get_domain("py").objects.items():  # type: ignore[attr-defined]
        if entry.objtype == "module" or not fullname.startswith(_OURS):
            continue
        found = _lookup(fullname)
        if found is not None and not found[1]:
            table.setdefault(fullname.rpartition(".")[2], []).append((fullname, found[0]))
    env._ours_documented = table  # type: ignore[attr-defined]
    return table


def _public_name(env: BuildEnvironment, short: str, obj: object) -> str | None:
    for fullname, candidate in _documented(env).get(short, ()):
        if candidate is obj:
            return fullname
    return None


def _is_alias(obj: object) -> bool:
    """A type variable, a type alias (``Literal[...]``, a union, a callable type) or a
    ``TypedDict`` (the keywords of a ``**options`` parameter)."""
    if isinstance(obj, typing.TypeVar) or typing.is_typeddict(obj):
        return True
    return typing.get_origin(obj) is not None or type(obj).__module__ in ("typing", "types")


#: What :func:`_checker_only` answers for an alias assigned under ``TYPE_CHECKING``.
_CHECKER_ALIAS = object()


def _checker_only(module_name: str, name: str, depth: int = 0) -> object | None:
    """What ``name`` is in ``module_name`` if it is there only for type checkers.

    Returns :data:`_CHECKER_ALIAS` for an alias assigned in an ``if TYPE_CHECKING:``
    block; for a name imported in such a block, the object it is at run time in the
    module it comes from (followed through that module's own such imports); otherwise
    None.
    """
    if depth > 4:
        return None
    try:
        module = importlib.import_module(module_name)
        tree = ast.parse(inspect.getsource(module))
    except (ImportError, OSError, TypeError):
        return None
    for block in tree.body:
        if not isinstance(block, ast.If):
            continue
        test = block.test
        if not (
            (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
        ):
            continue
        for statement in block.body:
            targets: list[ast.expr] = []
            if isinstance(statement, ast.Assign):
                targets = statement.targets
            elif isinstance(statement, ast.AnnAssign):
                targets = [statement.target]
            if any(isinstance(target, ast.Name) and target.id == name for target in targets):
                return _CHECKER_ALIAS
            if isinstance(statement, ast.ImportFrom):
                for alias in statement.names:
                    if (alias.asname or alias.name) != name:
                        continue
                    source = importlib.util.resolve_name(
                        "." * statement.level + (statement.module or ""), module.__package__
                    )
                    try:
                        found = importlib.import_module(source)
                    except ImportError:
                        return None
                    if hasattr(found, alias.name):
                        return getattr(found, alias.name)
                    return _checker_only(source, alias.name, depth + 1)
    return None


def _signature_of(node: Element) -> str | None:
    """The documented object whose signature holds ``node`` (a type hint), if any."""
    parent = node.parent
    while parent is not None and not isinstance(parent, addnodes.desc_signature):
        parent = parent.parent
    if parent is None or not parent.get("module") or not parent.get("fullname"):
        return None
    return f"{parent['module']}.{parent['fullname']}"


def _candidates(node: Element) -> list[str]:
    """Where a reference's target may live: as written, and in its context's modules."""
    target: str = node.get("reftarget", "")
    found = [target]
    module, cls = node.get("py:module"), node.get("py:class")
    for context in (_signature_of(node), f"{module}.{cls}" if module and cls else None, module):
        if not context:
            continue
        found.append(f"{context}.{target}")
        owner = _lookup(context)
        obj = owner[0] if owner else None
        for part in owner[1].split(".") if owner and owner[1] else ():
            obj = getattr(obj, part, None)
        defined = getattr(obj, "__module__", None)
        if isinstance(defined, str) and defined != context:
            found.append(f"{defined}.{target}")  # the module the context object comes from
    return [path for path in found if path.startswith(_OURS)]


def resolve_alias(
    app: Sphinx, env: BuildEnvironment, node: Element, contnode: Element
) -> Element | None:
    """``missing-reference``: resolve our objects written under another path."""
    if node.get("refdomain") != "py":
        return None
    for path in _candidates(node):
        found = _lookup(path)
        if found is None:
            continue
        obj, rest = found
        if not rest and _is_alias(obj):
            return contnode
        if inspect.ismodule(obj) and rest.isidentifier():
            checker = _checker_only(obj.__name__, rest)  # imported for type checkers only?
            if checker is _CHECKER_ALIAS or (checker is not None and _is_alias(checker)):
                return contnode
            if checker is not None:
                obj, rest = checker, ""
        head = path[: len(path) - len(rest) - 1] if rest else path
        public = _public_name(env, head.rpartition(".")[2], obj)
        if public is None:
            continue
        name = f"{public}.{rest}" if rest else public
        domain: Any = env.get_domain("py")
        resolved: Element | None = domain.resolve_xref(
            env, node["refdoc"], app.builder, node["reftype"], name, node, contnode
        )
        if resolved is not None:
            return resolved
    return None


def builtin_types_exactly(app: Sphinx, doctree: nodes.document) -> None:
    """``doctree-read``: a type hint ``bytes`` means the builtin, not some ``X.bytes``.

    Sphinx looks type hints up fuzzily; an attribute of ours named like a builtin
    (``CacheStatistics.bytes``) would capture every ``bytes`` in a signature.
    """
    for node in doctree.findall(addnodes.pending_xref):
        target = node.get("reftarget", "")
        if node.get("refdomain") == "py" and isinstance(getattr(builtins, target, None), type):
            node.attributes.pop("refspecific", None)  # present at all: a fuzzy search


# --- every public name is documented --------------------------------------------------


def check_public_names(app: Sphinx, env: BuildEnvironment) -> None:
    """``env-check-consistency``: warn about a public name documented nowhere."""
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None)
        if names is None:  # then autodoc documents what the module itself defines
            names = [
                name
                for name, obj in vars(module).items()
                if not name.startswith("_")
                and (inspect.isclass(obj) or inspect.isfunction(obj))
                and obj.__module__ == module_name
            ]
        for name in names:
            obj = getattr(module, name)
            if _public_name(env, name, obj) is None:
                _log.warning(
                    "public name %s.%s is not documented in the API reference",
                    module_name,
                    name,
                    type="trio_actors",
                    subtype="undocumented",
                )


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the pieces described in the module docstring."""
    app.add_directive("error-table", ErrorTable)
    app.add_directive("metric-table", MetricTable)
    for listener in app.events.listeners["autodoc-process-docstring"]:
        if listener.handler is napoleon._process_docstring:
            app.disconnect(listener.id)
    app.connect("autodoc-process-docstring", process_docstring)
    app.connect("source-read", link_source)
    app.connect("doctree-read", builtin_types_exactly)
    app.connect("missing-reference", resolve_alias)
    app.connect("env-check-consistency", check_public_names)
    return {"parallel_read_safe": True}
