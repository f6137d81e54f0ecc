"""A run's metadata as a physicist looks for it (design §7.2): times, snapshot, links.

Stdlib only (runs inside a helper child). :meth:`QcodesSource.run_details
<examples.preview.child.qcodes.source.QcodesSource.run_details>` calls :func:`details`
inside one read transaction.

What QCoDeS stores and where (``shared/data/README.md``):

* start and end: ``runs.run_timestamp`` and ``runs.completed_timestamp`` (REAL epoch
  seconds; the end is NULL while a run is unfinished);
* the instrument snapshot: ``runs.snapshot`` (JSON text, with a Station: ``station``
  and ``parameters``);
* run metadata: one extra ``runs`` column per ``add_metadata`` key;
* parent links: ``runs.parent_datasets``, a JSON list of JSON strings, each a link
  ``{"head", "tail", "edge_type", "description"}`` whose ``tail`` is the parent's GUID.
  Children are the runs whose links name this run's GUID as tail.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from .cells import cell, float_or_none

__all__ = ["MAX_SNAPSHOT_BYTES", "MAX_LINKS", "details", "parse_links"]

#: Largest snapshot sent whole, in bytes of JSON; a larger one is pruned (see
#: :func:`_bounded_snapshot`) so a details reply stays under the helper reply frame.
MAX_SNAPSHOT_BYTES = 256 * 1024
#: Most parent or child links reported per run.
MAX_LINKS = 64
_MAX_TEXT = 4096


def parse_links(text: object) -> list[dict[str, Any]]:
    """The links of a ``parent_datasets`` cell; malformed entries are left out."""
    if not isinstance(text, str) or not text:
        return []
    try:
        outer = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply to parse
        return []
    links = []
    for item in outer if isinstance(outer, list) else []:
        try:
            link = json.loads(item) if isinstance(item, str) else item
        except (ValueError, RecursionError):
            continue
        if isinstance(link, dict) and isinstance(link.get("tail"), str):
            links.append(
                {
                    "head": str(link.get("head") or ""),
                    "tail": link["tail"],
                    "edge_type": str(link.get("edge_type") or ""),
                    "description": str(link.get("description") or "")[:_MAX_TEXT],
                }
            )
    return links


def details(
    conn: sqlite3.Connection,
    record: dict[str, Any],
    fixed_columns: frozenset[str],
) -> dict[str, Any]:
    """The details of one run (its ``runs`` row is ``record``).

    Returns:
        ``started`` / ``ended`` (epoch seconds or None), ``duration`` (seconds, or
        None while unfinished), ``snapshot`` (the parsed JSON object, NaN and ±Infinity
        as None, pruned when over :data:`MAX_SNAPSHOT_BYTES`, or None),
        ``snapshot_bytes`` (its size as stored), ``snapshot_pruned``, ``metadata``
        (the extra columns, name → value), ``parents`` and ``children`` (each
        ``guid``, ``run_id`` (None when the run is not in this database), ``name``,
        ``edge_type``, ``description``), ``captured_run_id``, ``captured_counter``
        and ``exception`` (the stored traceback text, or None).
    """
    started = float_or_none(record.get("run_timestamp"))
    ended = float_or_none(record.get("completed_timestamp"))
    snapshot, size, pruned = _bounded_snapshot(record.get("snapshot"))
    guid = record.get("guid")
    parents = []
    for link in parse_links(record.get("parent_datasets"))[:MAX_LINKS]:
        run_id, name = _run_of_guid(conn, link["tail"])
        parents.append(
            {"guid": link["tail"], "run_id": run_id, "name": name,
             "edge_type": link["edge_type"], "description": link["description"]}
        )  # fmt: skip
    children = _children(conn, guid) if isinstance(guid, str) and guid else []
    exception = record.get("measurement_exception")
    return {
        "started": started,
        "ended": ended,
        "duration": ended - started if started is not None and ended is not None else None,
        "snapshot": snapshot,
        "snapshot_bytes": size,
        "snapshot_pruned": pruned,
        "metadata": {
            k: _plain(v) for k, v in record.items() if k not in fixed_columns and v is not None
        },
        "parents": parents,
        "children": children,
        "captured_run_id": _plain(record.get("captured_run_id")),
        "captured_counter": _plain(record.get("captured_counter")),
        "exception": None if exception is None else str(exception)[: 4 * _MAX_TEXT],
    }


def _children(conn: sqlite3.Connection, guid: str) -> list[dict[str, Any]]:
    try:
        rows = conn.execute(
            "SELECT run_id, name, parent_datasets FROM runs "
            "WHERE parent_datasets LIKE ? ORDER BY run_id",
            (f"%{guid}%",),
        ).fetchall()
    except sqlite3.Error:
        return []
    found = []
    for run_id, name, text in rows:
        for link in parse_links(text):
            if link["tail"] == guid:
                found.append(
                    {"guid": _guid_of(conn, run_id), "run_id": int(run_id), "name": _plain(name),
                     "edge_type": link["edge_type"], "description": link["description"]}
                )  # fmt: skip
    return found[:MAX_LINKS]


def _guid_of(conn: sqlite3.Connection, run_id: int) -> str | None:
    row = conn.execute("SELECT guid FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return row[0] if row is not None and isinstance(row[0], str) else None


def _run_of_guid(conn: sqlite3.Connection, guid: str) -> tuple[int | None, str | None]:
    try:
        row = conn.execute("SELECT run_id, name FROM runs WHERE guid = ?", (guid,)).fetchone()
    except sqlite3.Error:
        return None, None
    return (None, None) if row is None else (int(row[0]), _plain(row[1]))


def _bounded_snapshot(text: object) -> tuple[dict[str, Any] | None, int, bool]:
    """The parsed snapshot, its stored size in bytes, and whether it was pruned.

    NaN and ±Infinity values become None. An oversized snapshot keeps its tree down to
    the parameters, but each parameter keeps only ``value``, ``unit`` and ``label``
    (what people search it for), and long strings are shortened; if that is still too
    large, only the top two levels stay.
    """
    if not isinstance(text, str) or not text:
        return None, 0, False
    size = len(text.encode())
    try:
        # QCoDeS writes NaN and ±Infinity as bare words (json.dumps' default); the
        # reply is strict JSON, so such a value is sent as null.
        snapshot = json.loads(text, parse_constant=_no_number)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply to parse
        return None, size, False
    if not isinstance(snapshot, dict):
        return None, size, False
    if size <= MAX_SNAPSHOT_BYTES:
        return snapshot, size, False
    slim = _slim(snapshot)
    if len(json.dumps(slim).encode()) <= MAX_SNAPSHOT_BYTES:
        return slim, size, True
    return _top_levels(snapshot, 2), size, True


def _no_number(word: str) -> None:
    return None


_PARAMETER_KEYS = ("value", "unit", "label")


def _slim(node: Any) -> Any:
    if isinstance(node, dict):
        if "__class__" in node and "value" in node:  # a parameter's snapshot
            return {k: _slim(node[k]) for k in _PARAMETER_KEYS if k in node}
        return {str(k): _slim(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_slim(v) for v in node[:64]]
    if isinstance(node, str) and len(node) > 256:
        return node[:256] + "…"
    return node


def _top_levels(node: Any, depth: int) -> Any:
    if isinstance(node, dict):
        if depth == 0:
            return f"<{len(node)} entries>"
        return {str(k): _top_levels(v, depth - 1) for k, v in node.items()}
    return _slim(node) if not isinstance(node, list) else f"<{len(node)} items>"


def _plain(value: object) -> Any:
    # Any column may hold any SQLite type; the reply is strict JSON.
    return cell(value, _MAX_TEXT)
