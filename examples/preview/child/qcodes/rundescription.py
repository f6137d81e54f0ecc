"""Parse a QCoDeS run's parameter structure (``run_description`` JSON or ``layouts``).

Stdlib only. The JSON layouts handled (``shared/data/README.md``):

* ``interdependencies_`` (run_description version 2 and 3): ``parameters``,
  ``dependencies`` (dependent → setpoints, outer axis first), ``standalones``;
* ``interdependencies.paramspecs`` (all versions): a list with ``depends_on``, used when
  the newer layout is missing;
* ``shapes`` (version 3): planned shape per dependent, or null.

When a run has no usable JSON, the older ``layouts``/``dependencies`` tables give the
same structure (without paramtype and shapes; the results table's declared column types
give the paramtype).
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PARAMTYPES = ("numeric", "text", "array", "complex")


@dataclass(frozen=True, kw_only=True)
class ParamInfo:
    """One registered parameter of a run."""

    name: str
    label: str = ""
    unit: str = ""
    paramtype: str = "numeric"
    depends_on: tuple[str, ...] = ()
    inferred_from: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON-compatible form used in run summaries."""
        return {
            "name": self.name,
            "label": self.label,
            "unit": self.unit,
            "paramtype": self.paramtype,
            "depends_on": list(self.depends_on),
            "inferred_from": list(self.inferred_from),
        }


@dataclass(frozen=True, kw_only=True)
class RunDescription:
    """The parameters of one run and how they depend on each other."""

    params: dict[str, ParamInfo]
    """Every parameter, in registration order."""
    dependencies: dict[str, tuple[str, ...]]
    """Dependent → its setpoints, outer (slow) axis first."""
    standalones: tuple[str, ...] = ()
    """Parameters with neither setpoints nor dependents."""
    shapes: dict[str, list[int]] | None = field(default=None)
    """Planned shape per dependent (``Measurement.set_shapes``), or None."""

    def paramtype(self, name: str) -> str:
        """The parameter's paramtype (``numeric`` when unknown)."""
        info = self.params.get(name)
        return info.paramtype if info else "numeric"

    def info(self, name: str) -> ParamInfo:
        """The parameter's info (a bare one when unknown)."""
        return self.params.get(name) or ParamInfo(name=name)

    def planned_points(self) -> dict[str, int]:
        """Planned number of points per dependent, from ``shapes``."""
        if not self.shapes:
            return {}
        return {name: math.prod(shape) for name, shape in self.shapes.items()}

    def plot_dependents(self) -> list[str]:
        """The parameters to plot: dependents then standalones, in registration order."""
        order = list(self.params)
        wanted = set(self.dependencies) | set(self.standalones)
        ordered = [name for name in order if name in wanted]
        return ordered + sorted(wanted.difference(ordered))


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _names(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return ()


def _param(spec: Mapping[str, Any]) -> ParamInfo:
    paramtype = _text(spec.get("paramtype")) or "numeric"
    return ParamInfo(
        name=str(spec["name"]),
        label=_text(spec.get("label")),
        unit=_text(spec.get("unit")),
        paramtype=paramtype if paramtype in PARAMTYPES else "numeric",
        depends_on=_names(spec.get("depends_on")),
        inferred_from=_names(spec.get("inferred_from")),
    )


def parse_run_description(data: Mapping[str, Any]) -> RunDescription:
    """Build a :class:`RunDescription` from the decoded ``run_description`` JSON.

    Raises:
        KeyError, TypeError, ValueError, AttributeError: the JSON has neither known
            layout (the caller reports the run as unreadable).
    """
    specs: dict[str, ParamInfo] = {}
    old = data.get("interdependencies")
    if isinstance(old, Mapping):
        for spec in old.get("paramspecs") or []:
            info = _param(spec)
            specs[info.name] = info
    new = data.get("interdependencies_")
    if isinstance(new, Mapping):
        for name, spec in (new.get("parameters") or {}).items():
            info = _param({"name": name, **spec})
            previous = specs.get(name)
            specs[name] = ParamInfo(
                name=name,
                label=info.label,
                unit=info.unit,
                paramtype=info.paramtype,
                depends_on=previous.depends_on if previous else (),
                inferred_from=previous.inferred_from if previous else (),
            )
        dependencies = {str(k): _names(v) for k, v in (new.get("dependencies") or {}).items()}
        standalones = _names(new.get("standalones"))
    elif specs:
        dependencies = {n: p.depends_on for n, p in specs.items() if p.depends_on}
        used = {s for sp in dependencies.values() for s in sp}
        used |= {s for p in specs.values() for s in p.inferred_from}
        inferred = {n for n, p in specs.items() if p.inferred_from}
        standalones = tuple(n for n in specs if n not in dependencies and n not in used | inferred)
    else:
        raise KeyError("no interdependencies")
    for dep, setpoints in dependencies.items():
        specs[dep] = _replace_depends(specs.get(dep) or ParamInfo(name=dep), setpoints)
    return RunDescription(
        params=specs,
        dependencies=dependencies,
        standalones=standalones,
        shapes=_shapes(data.get("shapes")),
    )


def _replace_depends(info: ParamInfo, setpoints: tuple[str, ...]) -> ParamInfo:
    return ParamInfo(
        name=info.name,
        label=info.label,
        unit=info.unit,
        paramtype=info.paramtype,
        depends_on=setpoints,
        inferred_from=info.inferred_from,
    )


def _shapes(value: object) -> dict[str, list[int]] | None:
    if not isinstance(value, Mapping):
        return None
    shapes: dict[str, list[int]] = {}
    for name, shape in value.items():
        if isinstance(shape, list | tuple) and all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
        ):
            shapes[str(name)] = [int(n) for n in shape]
    return shapes or None


def description_from_layouts(conn: sqlite3.Connection, run_id: int) -> RunDescription | None:
    """Rebuild a run's structure from the older ``layouts``/``dependencies`` tables.

    Returns:
        The description, or None when the run has no layouts.
    """
    try:
        layouts = conn.execute(
            "SELECT layout_id, parameter, label, unit, inferred_from FROM layouts "
            "WHERE run_id = ? ORDER BY layout_id",
            (run_id,),
        ).fetchall()
        if not layouts:
            return None
        ids = {row[0]: row[1] for row in layouts}
        marks = ",".join("?" * len(ids))
        links = conn.execute(
            f"SELECT dependent, independent, axis_num FROM dependencies "
            f"WHERE dependent IN ({marks}) ORDER BY dependent, axis_num",
            tuple(ids),
        ).fetchall()
        table = conn.execute(
            "SELECT result_table_name FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        declared: dict[str, str] = {}
        if table and table[0]:
            quoted = '"' + str(table[0]).replace('"', '""') + '"'
            declared = {
                r[1]: str(r[2]).lower() for r in conn.execute(f"PRAGMA table_info({quoted})")
            }
    except sqlite3.Error:
        return None
    dependencies: dict[str, tuple[str, ...]] = {}
    for dependent, independent, _axis in links:
        if dependent in ids and independent in ids:
            name = ids[dependent]
            dependencies[name] = (*dependencies.get(name, ()), ids[independent])
    params = {
        name: ParamInfo(
            name=name,
            label=_text(label),
            unit=_text(unit),
            paramtype=declared.get(name, "numeric")
            if declared.get(name) in PARAMTYPES
            else "numeric",
            depends_on=dependencies.get(name, ()),
            inferred_from=_names(inferred),
        )
        for _lid, name, label, unit, inferred in layouts
    }
    used = {s for sp in dependencies.values() for s in sp}
    standalones = tuple(n for n in params if n not in dependencies and n not in used)
    return RunDescription(params=params, dependencies=dependencies, standalones=standalones)
