"""Read a QCoDeS measurement database, read-only (design §7.2).

The schema is described in ``shared/data/README.md``; this module needs only the
standard library's :mod:`sqlite3` and numpy, and never imports trio, so it runs inside
a helper process (:mod:`examples.preview.child.helper`). numpy and the shaping of values
(:mod:`~examples.preview.child.qcodes.shaping`) are loaded by the first read of values: the
server process opens a database only to check it (:meth:`QcodesSource.identity`), and
starts faster and smaller without them.

Usage::

    with open_source("qcodes.db") as source:
        runs = source.list_runs()
        observation = source.read_run(runs[0]["run_id"])
        probe = source.probe()

* :meth:`QcodesSource.list_runs` gives cheap run summaries (no result data).
* :meth:`QcodesSource.read_run` gives an **observation**: a JSON-compatible dict with
  each dependent and its setpoint axes, downsampled so that it stays well under the
  1 MiB helper reply frame (at most :data:`MAX_OBSERVATION_VALUES` numbers), with the
  real sizes reported.
* :meth:`QcodesSource.probe` is a cheap change probe (highest row id, completion flag
  and exception flag per run, ``PRAGMA data_version``) so a server can detect
  ``source_changed`` without reading data.

Read-only access and WAL: QCoDeS databases are in WAL mode. The file is opened with
``mode=ro``, which lets a QCoDeS process keep writing a run while we read (WAL readers
run beside the single writer). ``immutable=1`` is **not** used, because it would hide a
run that is still being written. A side effect: SQLite creates ``-wal`` and ``-shm``
files beside the database when the folder is writable, and a read-only connection
leaves them there. When the folder is not writable and there is no ``-wal`` file (so
nothing is writing), the file is opened with ``immutable=1`` instead.

Run status (``status`` in summaries and observations):

* ``"incomplete"``: ``is_completed`` is 0: still being written, or the writer crashed.
  Callers treat it as a progressive source (design §4.5) and poll again.
* ``"interrupted"``: ``measurement_exception`` is set, or a completed run has fewer
  points than its planned shape.
* ``"empty"``: completed with no result rows.
* ``"ok"``: everything else.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cells import (
    cell,
    float_or_none,
    last_line,
    npy_size,
    probe_answer,
    revision,
    row_id,
    status,
    str_or_none,
)
from .db import ReadTransaction, connect, validate_schema
from .db import quote_name as _q
from .details import details as _details
from .errors import SourceUnreadable, UnknownRun
from .rundescription import (
    ParamInfo,
    RunDescription,
    description_from_layouts,
    parse_run_description,
)

if TYPE_CHECKING:
    import os
    from types import TracebackType

__all__ = [
    "OBSERVATION_SCHEMA",
    "MAX_OBSERVATION_VALUES",
    "ParamInfo",
    "QcodesSource",
    "open_source",
    "revision",
]

#: Version tag of the observation dict layout.
OBSERVATION_SCHEMA = "qcodes-observation/1"
#: Bound on the numbers (values plus axis values) in one observation. At most about
#: 16 bytes each once JSON-encoded, so an observation stays near 0.5 MiB at worst.
MAX_OBSERVATION_VALUES = 32_768
#: Rows read per dependent before reading every k-th row instead.
MAX_ROWS_READ = 1_000_000
#: Rows fetched between two cancellation checks.
FETCH_CHUNK = 4096

_FIXED_RUN_COLUMNS = frozenset(
    {
        "run_id", "exp_id", "name", "result_table_name", "result_counter", "run_timestamp",
        "completed_timestamp", "is_completed", "parameters", "guid", "run_description",
        "snapshot", "captured_run_id", "captured_counter", "parent_datasets",
        "measurement_exception",
    }
)  # fmt: skip

CheckCancel = Callable[[], None]


def _never_cancel() -> None:
    return None


def open_source(path: str | os.PathLike[str]) -> QcodesSource:
    """Open and validate a QCoDeS database read-only.

    Args:
        path: The ``.db`` file.

    Returns:
        An open :class:`QcodesSource`; close it (or use it as a context manager).

    Raises:
        SourceUnreadable: (code ``source_unreadable``) the file does not exist, is a folder,
            is not an SQLite database, or has no QCoDeS ``runs`` table. ``details`` has
            ``path`` and ``reason`` (``missing``, ``not_a_file``, ``not_sqlite``,
            ``not_qcodes``, ``unreadable``).
    """
    return QcodesSource(path)


class QcodesSource:
    """One read-only connection to a QCoDeS database (see the module docstring).

    Not thread-safe: use it from one thread (the helper process's main thread).

    Raises:
        SourceUnreadable: from the constructor, as :func:`open_source`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser().resolve()
        self._conn = connect(self.path)
        try:
            self._run_columns = validate_schema(self._conn, self.path)
            tables = {
                row[0]
                for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except BaseException:
            self._conn.close()
            raise
        self._has_experiments = "experiments" in tables
        self._has_layouts = {"layouts", "dependencies"} <= tables
        #: (data_version, [(run_id, max_row_id, is_completed, has_exception)]) of the last probe.
        self._probed: tuple[int, list[tuple[int, int, int, int]]] | None = None

    # -- lifetime ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> QcodesSource:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- identity and probe -----------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        """What was opened: for a helper's *ready* reply and for cache keys (design §4.10).

        Returns:
            ``path``, ``size_bytes`` (the main file, bytes), ``run_count``,
            ``user_version`` (QCoDeS schema version) and ``source_id``: a short hash of
            the path, inode and first run GUID, which changes when the file is replaced.
        """
        stat = self.path.stat()
        with self._read():
            run_count = self._conn.execute("SELECT count(*) FROM runs").fetchone()[0]
            first = (
                self._conn.execute("SELECT guid FROM runs ORDER BY run_id LIMIT 1").fetchone()
                if "guid" in self._run_columns
                else None
            )
            user_version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        token = f"{self.path}|{stat.st_dev}|{stat.st_ino}|{first[0] if first else ''}"
        return {
            "path": str(self.path),
            "size_bytes": stat.st_size,
            "run_count": int(run_count),
            "user_version": int(user_version),
            "source_id": hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()[:16],
        }

    def probe(self, run_ids: Iterable[int] | None = None) -> dict[str, Any]:
        """A cheap change probe: no result data is read.

        Args:
            run_ids: Only these runs (unknown ids are left out); all runs when None.

        Returns:
            ``data_version`` (``PRAGMA data_version``: it changes when another connection
            commits; compare values from the same source object only), ``max_run_id``,
            ``run_count`` and ``runs``: a list of ``[run_id, max_row_id, is_completed,
            has_exception]``; :func:`revision` of one entry is a per-run change token.
        """
        wanted = None if run_ids is None else {int(r) for r in run_ids}
        with self._read():
            data_version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
            # Polled often: an unchanged data_version means no other connection
            # committed since the last full probe, whose answer is still exact (one
            # table query per run saved).
            if self._probed is None or self._probed[0] != data_version:
                rows = self._conn.execute(
                    f"SELECT run_id, result_table_name, is_completed, {self._exception_expr()} "
                    "FROM runs ORDER BY run_id"
                ).fetchall()
                entries = [(r, self._max_row_id(t), int(bool(c)), int(e))
                           for r, t, c, e in rows if wanted is None or r in wanted]  # fmt: skip
                if wanted is not None:
                    return probe_answer(data_version, [row[0] for row in rows], entries)
                self._probed = (data_version, entries)
        everything = self._probed[1]
        chosen = everything if wanted is None else [e for e in everything if e[0] in wanted]
        return probe_answer(data_version, [e[0] for e in everything], chosen)

    # -- listing ----------------------------------------------------------------------

    def list_runs(self, *, after: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Summaries of the runs with ``run_id > after``, in run order (no result data).

        Args:
            after: Start after this run id (for paging).
            limit: At most this many runs; all when None.

        Returns:
            One dict per run: ``run_id``, ``guid``, ``name``, ``exp_id``, ``exp_name``,
            ``sample_name``, ``result_table_name``, ``result_counter``,
            ``run_timestamp`` / ``completed_timestamp`` (epoch seconds or None),
            ``is_completed``, ``row_count``, ``shapes`` (planned, or None),
            ``parameters`` (name, label, unit, paramtype, depends_on, inferred_from),
            ``dependencies`` (dependent → setpoints, outer axis first),
            ``measurement_exception`` (bool), ``exception_summary`` (last traceback
            line or None), ``metadata`` (extra ``runs`` columns QCoDeS added),
            ``points`` (dependent → points so far, see :meth:`_points`),
            ``file_modified`` (when the file last changed, epoch seconds, or None),
            ``planned_points`` (dependent → the declared shape's size),
            ``status``, ``status_reason``, ``revision`` and ``problem`` (why the run's
            description could not be read, or None).
        """
        sql = f"SELECT * FROM runs WHERE run_id > ? ORDER BY run_id{' LIMIT ?' if limit else ''}"
        params: tuple[int, ...] = (after, limit) if limit else (after,)
        modified = self._file_modified()
        with self._read():
            cursor = self._conn.execute(sql, params)
            names = [d[0] for d in cursor.description]
            records = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            return [{**self._summary(record), "file_modified": modified} for record in records]

    def _file_modified(self) -> float | None:
        """When the database (or its WAL, where a writer's commits land first) last
        changed: epoch seconds, None if neither can be read.

        An empty WAL is left out: a reader opening the file creates one (and so
        touches it) without writing anything.
        """
        times = []
        for path in (self.path, self.path.with_name(self.path.name + "-wal")):
            try:
                found = path.stat()
            except OSError:
                continue
            if found.st_size or path == self.path:
                times.append(found.st_mtime)
        return max(times, default=None)

    def _summary(self, record: dict[str, Any]) -> dict[str, Any]:
        run_id = int(record["run_id"])
        table = str(record["result_table_name"])
        description, problem = self._description(record)
        count, max_id = self._row_stats(table)
        exception = record.get("measurement_exception")
        summary: dict[str, Any] = {
            "run_id": run_id,
            "guid": str_or_none(record.get("guid")),
            "name": cell(record.get("name")) or f"run {run_id}",
            "exp_id": cell(record.get("exp_id")),
            **self._experiment(record.get("exp_id")),
            "result_table_name": table,
            "result_counter": cell(record.get("result_counter")),
            "run_timestamp": float_or_none(record.get("run_timestamp")),
            "completed_timestamp": float_or_none(record.get("completed_timestamp")),
            "is_completed": bool(record["is_completed"]),
            "row_count": count,
            "shapes": description.shapes if description else None,
            "parameters": [p.to_json() for p in description.params.values()] if description else [],
            "dependencies": {k: list(v) for k, v in description.dependencies.items()}
            if description
            else {},
            "measurement_exception": exception is not None,
            "exception_summary": last_line(exception),
            "metadata": {k: cell(v) for k, v in record.items() if k not in _FIXED_RUN_COLUMNS},
            "revision": revision([run_id, max_id, record["is_completed"], exception is not None]),
            "problem": problem,
        }
        points: dict[str, int] = {}
        if description:
            points = (
                self._points(table, description)
                if count
                else dict.fromkeys(description.dependencies, 0)
            )
        summary["points"] = points
        summary["planned_points"] = description.planned_points() if description else {}
        summary["status"], summary["status_reason"] = status(
            completed=bool(record["is_completed"]),
            exception=exception,
            rows=count,
            points=points,
            planned=summary["planned_points"],
        )
        return summary

    def _points(self, table: str, description: RunDescription) -> dict[str, int]:
        """Points per dependent, without decoding values: its non-null cells, times the
        length of the first array stored (from its ``.npy`` header) for ``array`` data.

        A dependent whose count cannot be read is left out.
        """
        points: dict[str, int] = {}
        for dep, setpoints in description.dependencies.items():
            kinds = [description.paramtype(name) for name in (dep, *setpoints)]
            try:
                row = self._conn.execute(f"SELECT count({_q(dep)}) FROM {_q(table)}").fetchone()
                cells = int(row[0])
                if "array" in kinds and cells:
                    # Each row holds arrays: the widest column's first one says how many.
                    sizes = [
                        npy_size(self._conn.execute(
                            f"SELECT {_q(name)} FROM {_q(table)} WHERE {_q(name)} IS NOT NULL "
                            "LIMIT 1"
                        ).fetchone())
                        for name, kind in zip((dep, *setpoints), kinds, strict=True)
                        if kind == "array"
                    ]  # fmt: skip
                    if any(size is None for size in sizes):
                        continue
                    cells *= max(size for size in sizes if size is not None)
            except sqlite3.Error:
                continue
            points[dep] = cells
        return points

    # -- reading one run --------------------------------------------------------------

    def read_run(
        self,
        run_id: int,
        *,
        check_cancel: CheckCancel | None = None,
        max_values: int = MAX_OBSERVATION_VALUES,
        slice_index: int | None = None,
    ) -> dict[str, Any]:
        """Read one run into an observation (see :mod:`examples.preview.child.qcodes.observation`).

        The whole read is one SQLite read transaction, so a run being written is seen
        at one consistent moment.

        Args:
            run_id: The run.
            check_cancel: Called between reading stages and every
                :data:`FETCH_CHUNK` rows; it raises to abandon the read.
            max_values: Bound on the numbers in the observation (values and axes).
            slice_index: For data with more than two setpoints, which 2-D slice to
                deliver (from 0, slices in ascending order of the outer setpoints);
                None for the slice of the newest point.

        Returns:
            The run summary (as :meth:`list_runs`, minus ``parameters``) plus
            ``schema``, ``dependents`` and ``sizes``. Each dependent has ``name``,
            ``label``, ``unit``, ``paramtype``, ``component`` (``magnitude``/``phase``
            for complex data, else None), ``ndim`` (1 or 2), ``axes`` (one per
            dimension; for 2-D, ``axes[0]`` indexes rows: the outer/slow setpoint, and
            ``axes[1]`` columns: the inner/fast one; both ascending), ``values`` (a list,
            or a list of rows; None for a missing or non-finite value), ``levels``
            (category names for text data), ``points`` (points read), ``planned_points``,
            ``source_shape`` (before downsampling), ``shape`` (as delivered),
            ``gridding`` (``trace``, ``exact`` or ``binned``), ``nonfinite``,
            ``skipped_rows``, ``sliced`` (for data with more than two setpoints:
            which outer setpoints were fixed, name → value) and ``slice`` (then:
            ``index``, ``count`` and ``fixed``: each outer setpoint's ``name``,
            ``label``, ``unit`` and ``value``). Each axis also has ``spacing``
            (``linear``, ``log`` or ``irregular``: how the setpoint was swept) and
            ``planned_range`` (``[low, high]`` the sweep covers once it has all its
            planned points, extrapolated from its even steps; None when it has them all
            or its steps are uneven).

        Raises:
            UnknownRun: (code ``unknown_run``) no run has this id.
            SourceUnreadable: (code ``source_unreadable``) the run's description or results
                table cannot be read.
        """
        from .shaping import shape_dependents  # numpy: loaded by the first read

        check = check_cancel or _never_cancel
        record, summary, description, raw = self._read_raw(run_id, check)
        dependents, sizes = shape_dependents(
            raw, description, max_values=max_values, slice_index=slice_index
        )
        check()
        points = {d["name"]: d["points"] for d in dependents if d["component"] != "phase"}
        summary["status"], summary["status_reason"] = status(
            completed=summary["is_completed"],
            exception=record.get("measurement_exception"),
            rows=summary["row_count"],
            points=points,
            planned=description.planned_points(),
        )
        summary.pop("parameters")
        summary["schema"] = OBSERVATION_SCHEMA
        summary["dependents"] = dependents
        summary["sizes"] = sizes
        return summary

    def read_series(
        self, run_id: int, *, check_cancel: CheckCancel | None = None
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """A run's summary and its plottable series at full size (as :meth:`read_run` reads
        them, before any downsampling): see
        :func:`~examples.preview.child.qcodes.shaping.plot_series`.

        Raises:
            UnknownRun: (code ``unknown_run``) no run has this id.
            SourceUnreadable: (code ``source_unreadable``) as :meth:`read_run`.
        """
        from .shaping import plot_series  # numpy: loaded by the first read

        _, summary, description, raw = self._read_raw(run_id, check_cancel or _never_cancel)
        return summary, [s for item in raw for s in plot_series(item, description)]

    def _read_raw(
        self, run_id: int, check: CheckCancel
    ) -> tuple[dict[str, Any], dict[str, Any], RunDescription, list[dict[str, Any]]]:
        with self._read():  # one read transaction: a run being written, at one moment
            record = self._run_record(run_id)
            summary = self._summary(record)
            description, problem = self._description(record)
            if description is None:
                raise SourceUnreadable(
                    f"run {run_id}: {problem}", path=str(self.path), reason="unreadable"
                )
            check()
            raw = [
                self._read_dependent(summary["result_table_name"], description, dep, check)
                for dep in description.plot_dependents()
            ]
        return record, summary, description, raw

    def run_details(self, run_id: int) -> dict[str, Any]:
        """A run's summary (as :meth:`list_runs`) and its details: times, snapshot, links.

        See :func:`examples.preview.child.qcodes.details.details` for the added fields.

        Raises:
            UnknownRun: (code ``unknown_run``) no run has this id.
        """
        with self._read():
            record = self._run_record(run_id)
            summary = self._summary(record)
            summary.update(_details(self._conn, record, _FIXED_RUN_COLUMNS))
        return summary

    def _run_record(self, run_id: int) -> dict[str, Any]:
        """The ``runs`` row of ``run_id`` by column name; the caller holds the read."""
        cursor = self._conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        row = cursor.fetchone()
        if row is None:
            raise UnknownRun(f"no run {run_id} in {self.path.name}", run_id=run_id)
        return dict(zip([d[0] for d in cursor.description], row, strict=True))

    def _read_dependent(
        self, table: str, description: RunDescription, dep: str, check: CheckCancel
    ) -> dict[str, Any]:
        setpoints = list(description.dependencies.get(dep, ()))
        names = [*setpoints, dep]
        kinds = [description.paramtype(name) for name in names]
        max_id = self._max_row_id(table)
        stride = max(1, math.ceil(max_id / MAX_ROWS_READ))
        where = f"{_q(dep)} IS NOT NULL" + (f" AND id % {stride} = 0" if stride > 1 else "")
        sql = f"SELECT {', '.join(_q(n) for n in names)} FROM {_q(table)} WHERE {where} ORDER BY id"
        try:
            cursor = self._conn.execute(sql)
        except sqlite3.Error as exc:
            raise SourceUnreadable(
                f"cannot read {table!r} for {dep!r}: {exc}",
                path=str(self.path),
                reason="unreadable",
            ) from exc
        raw: list[tuple[Any, ...]] = []
        while chunk := cursor.fetchmany(FETCH_CHUNK):
            check()
            raw.extend(chunk)
        import numpy as np  # loaded by the first read (see the module docstring)

        from . import observation as obs

        if all(kind in ("numeric", "text") for kind in kinds):
            # Scalar cells only (the usual case): decode column by column, no broadcasting.
            cells = list(zip(*raw, strict=True)) if raw else [() for _ in kinds]
            columns = [obs.scalar_column(cells[k], kind) for k, kind in enumerate(kinds)]
            skipped = 0
        else:
            rows = [
                [obs.cell_array(v, kind) for v, kind in zip(row, kinds, strict=True)] for row in raw
            ]
            columns, skipped = obs.expand_rows(rows)
            if not columns:
                columns = [np.array([], dtype=object if k == "text" else float) for k in kinds]
        return {
            "name": dep,
            "setpoints": setpoints,
            "columns": columns,
            "kinds": kinds,
            "rows": len(raw),
            "skipped_rows": skipped,
            "stride": stride,
        }

    # -- helpers ----------------------------------------------------------------------

    def _read(self) -> ReadTransaction:
        return ReadTransaction(self._conn)

    def _exception_expr(self) -> str:
        if "measurement_exception" in self._run_columns:
            return "measurement_exception IS NOT NULL"
        return "0"

    def _max_row_id(self, table: str) -> int:
        try:
            row = self._conn.execute(f"SELECT max(id) FROM {_q(table)}").fetchone()
            if row_id(row[0]) is None:  # ids that are not numbers: rows stand in
                row = self._conn.execute(f"SELECT count(*) FROM {_q(table)}").fetchone()
        except sqlite3.Error:
            return 0
        return row_id(row[0]) or 0

    def _row_stats(self, table: str) -> tuple[int, int]:
        try:
            row = self._conn.execute(f"SELECT count(*), max(id) FROM {_q(table)}").fetchone()
        except sqlite3.Error:
            return 0, 0
        count = int(row[0])
        max_id = row_id(row[1])
        return count, count if max_id is None else max_id

    def _experiment(self, exp_id: object) -> dict[str, Any]:
        if not self._has_experiments or exp_id is None:
            return {"exp_name": None, "sample_name": None}
        row = self._conn.execute(
            "SELECT name, sample_name FROM experiments WHERE exp_id = ?", (exp_id,)
        ).fetchone()
        if row is None:
            return {"exp_name": None, "sample_name": None}
        return {"exp_name": cell(row[0]), "sample_name": cell(row[1])}

    def _description(self, record: dict[str, Any]) -> tuple[RunDescription | None, str | None]:
        text = record.get("run_description")
        problem = None
        if isinstance(text, str) and text:
            try:
                return parse_run_description(json.loads(text)), None
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                problem = f"run_description is not valid QCoDeS JSON ({exc})"
        else:
            problem = "run has no run_description"
        if self._has_layouts:
            fallback = description_from_layouts(self._conn, int(record["run_id"]))
            if fallback is not None:
                return fallback, None
        return None, problem
