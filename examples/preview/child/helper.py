"""Helper-process entry point of the measurement-preview server (design §3.9, §7.2).

Runs inside a helper child: it imports the standard library, numpy,
:mod:`actors.helper` and the QCoDeS reader, never trio (nor attrs or cattrs; the child
bootstrap of ``actors._helpers._process._spec`` loads ``actors.helper`` without the packages'
``__init__``). The parent names it::

    HelperSpec(entry="examples.preview.child.helper:main", options={"db": "/path/qcodes.db"},
               cwd=<the repository root, so that ``examples`` is importable>)

Startup opens the database read-only (:func:`examples.preview.child.qcodes.source.open_source`) and
answers *ready* with its identity: ``path``, ``size_bytes``, ``run_count``,
``user_version`` and ``source_id``. A missing, non-SQLite or non-QCoDeS file fails the
startup with code ``source_unreadable`` (the parent's spawn raises
``HelperStartupFailed`` carrying that record).

Operations (payload → result, all JSON):

* ``list_runs`` ``{"after": 0, "limit": 100}`` → ``{"runs": [summary...],
  "next_after": run_id or None}``: pages of run summaries;
* ``read_run`` ``{"run_id": 4, "slice": 2}`` → the observation (see
  :meth:`QcodesSource.read_run <examples.preview.child.qcodes.source.QcodesSource.read_run>`;
  ``slice``, optional, picks the 2-D slice of a run with more than two sweep
  dimensions); cancellable between read stages. With ``"draw": ["thumbnail"]`` a
  finished read (any status but ``incomplete``) is drawn here as those kinds
  (design §5.4): the reply is a :class:`~protocol.envelope.Blob` whose head is the summary
  the server keeps of the read (:func:`~examples.preview.child.draw.read_summary`) plus
  ``"images"``, kind → ``[offset, size]`` of its PNG in the binary part (the PNG bytes
  as they are, no base64; :func:`~examples.preview.child.draw.with_images`); a run
  still being written is returned whole and undrawn, unless ``"live": ["thumbnail",
  "preview"]`` asks for its live images (design §4.5): then it is drawn here as those
  kinds and returned as above, a kind that could not be drawn left out and named with
  its reason in ``"image_errors"`` (the read itself stands);
* ``draw`` ``{"run_id": 4, "kinds": ["preview"], "revision": "rows=..."}`` →
  ``{"run_id", "revision", "status", "images"}`` with the PNGs as above: draws the run
  as each kind, whatever its status, from the read a ``read_run`` with ``draw`` left at
  that ``revision`` (optional) in the ``handoff`` folder, else from a new read. With
  ``"slice": 2``, ``"options": {"scale": "log", ...}`` (as
  :func:`~examples.preview.child.drawing.render.render` takes them) and ``"report":
  true`` (the drawing a client asks for, design §7.7), the head adds ``"slice"`` (the
  slice drawn: ``index``, ``count``, its label; None for at most two sweep dimensions)
  and ``"reports"``, kind → the drawing's report; a ``slice`` beyond the run's count
  draws nothing (no ``reports``).

The startup option ``handoff`` (optional) names a folder private to the server where a
``read_run`` that drew only some kinds leaves its read for the ``draw`` job of the rest
(:class:`~examples.preview.child.draw.Handoff`; design §5.4).
* ``run_details`` ``{"run_id": 4}`` → the run's summary with its times, snapshot,
  metadata and links (:meth:`QcodesSource.run_details
  <examples.preview.child.qcodes.source.QcodesSource.run_details>`);
* ``probe`` ``{"run_ids": [..] or None}`` → the change probe
  (:meth:`QcodesSource.probe <examples.preview.child.qcodes.source.QcodesSource.probe>`);
* ``run_data`` ``{"run_id": 4, "buckets": 2000, "side": 256, "max_bytes": 983040}`` →
  the run's data downsampled for exploring it, keeping extremes, within ``max_bytes``
  bytes of JSON (:func:`examples.preview.child.run_data.run_data`).

A malformed payload fails the job with code ``invalid_command``; an unknown run id
with ``unknown_run``; an unreadable run with ``source_unreadable``; a run that cannot be
drawn with ``render_failed``.

For tests only (design §3.9), the startup option ``faults`` makes a read (``read_run``,
``draw``) of one run misbehave: ``{"crash_once": {"run_id": 4, "marker": "/tmp/x"}}``
kills the helper (exit status :data:`CRASH_EXIT_CODE`) the first time the run is read, by any
incarnation (the marker file, created just before, remembers it);
``{"stall": {"run_id": 5, "seconds": 30, "marker": "/tmp/y"}}`` makes each read of
the run wait that long, checking for a cancel frame every 10 ms (a slow read, to
cancel); it creates the (optional) marker file as it starts waiting.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from typing import TYPE_CHECKING, Any

from actors.helper import Blob, JobError, serve

from .draw import (
    IMAGE_ERRORS_KEY,
    Handoff,
    check_kinds,
    draw_kinds,
    draw_live,
    draw_with_report,
    read_summary,
    slice_of,
    with_images,
)
from .drawing.render import KINDS
from .qcodes.source import MAX_OBSERVATION_VALUES, QcodesSource, open_source
from .run_data import run_data

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from actors.helper import JobContext

__all__ = [
    "CRASH_EXIT_CODE",
    "DEFAULT_PAGE",
    "MAX_DATA_BUCKETS",
    "MAX_DATA_SIDE",
    "MAX_PAGE",
    "PreviewHandlers",
    "main",
]

#: Run summaries per ``list_runs`` page by default, and at most.
DEFAULT_PAGE = 100
MAX_PAGE = 500
#: Most buckets per trace and cells per map side a ``run_data`` job accepts.
MAX_DATA_BUCKETS = 65_536
MAX_DATA_SIDE = 2048
#: Exit status of a helper killed by the ``crash_once`` test fault.
CRASH_EXIT_CODE = 70


def _invalid(message: str) -> JobError:
    return JobError(message, code="invalid_command", category="permanent")


def _int_field(payload: dict[str, Any], key: str, default: int | None, low: int, high: int) -> int:
    value = payload.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _invalid(f"{key} must be an integer from {low} to {high}, got {value!r}")
    return value


def _fields(payload: Any, allowed: set[str]) -> dict[str, Any]:
    if payload is None:
        return {}
    if not isinstance(payload, dict):
        raise _invalid(f"payload must be an object, got {type(payload).__name__}")
    extra = sorted(set(payload) - allowed)
    if extra:
        raise _invalid(f"unknown fields: {', '.join(extra)}")
    return payload


@contextlib.contextmanager
def _database_errors() -> Iterator[None]:
    """Turn an SQLite error (the file was truncated, replaced, corrupted) into a job error.

    Raises:
        JobError: (code ``source_unreadable``, transient) instead of a raw
            ``sqlite3.Error``, which the helper would report as ``handler_failed`` with a
            traceback on stderr at every change probe.
    """
    try:
        yield
    except sqlite3.Error as exc:
        raise JobError(
            f"database unreadable: {type(exc).__name__}: {exc}",
            code="source_unreadable",
            category="transient",
        ) from None


class PreviewHandlers:
    """The helper's state (one open database) and its job handlers.

    Plain functions of ``(payload, ctx)``; usable without a helper process in tests.
    """

    def __init__(self) -> None:
        self.source: QcodesSource | None = None
        self.faults: dict[str, Any] = {}
        self.handoff: Handoff | None = None

    def startup(self, options: dict[str, Any]) -> dict[str, Any]:
        """Open ``options["db"]`` read-only; return its identity for the *ready* frame.

        Raises:
            SourceUnreadable: (code ``source_unreadable``) see :func:`open_source`.
            JobError: (code ``invalid_command``) ``db`` is missing or not a string;
                (code ``source_unreadable``) SQLite failed reading the file.
        """
        path = options.get("db")
        if not isinstance(path, str) or not path:
            raise _invalid("startup option 'db' (the database path) is required")
        faults = options.get("faults") or {}
        if not isinstance(faults, dict) or set(faults) - {"crash_once", "stall"}:
            raise _invalid("startup option 'faults' may hold only 'crash_once' and 'stall'")
        self.faults = faults
        handoff = options.get("handoff")
        if handoff is not None:
            if not isinstance(handoff, str) or not handoff:
                raise _invalid("startup option 'handoff' must be a folder path")
            try:
                self.handoff = Handoff(handoff)
            except OSError as exc:
                raise _invalid(f"startup option 'handoff': {exc}") from None
        with _database_errors():  # e.g. a file corrupted while the server was running
            self.source = open_source(path)
            return self.source.identity()

    def _open(self) -> QcodesSource:
        if self.source is None:
            raise JobError("no database is open", code="source_unreadable")
        return self.source

    def list_runs(self, payload: Any, ctx: JobContext) -> dict[str, Any]:
        """One page of run summaries after ``after``."""
        fields = _fields(payload, {"after", "limit"})
        after = _int_field(fields, "after", 0, 0, 2**53 - 1)
        limit = _int_field(fields, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
        ctx.check_cancel()
        with _database_errors():
            runs = self._open().list_runs(after=after, limit=limit)
        return {"runs": runs, "next_after": runs[-1]["run_id"] if len(runs) == limit else None}

    def read_run(self, payload: Any, ctx: JobContext) -> dict[str, Any] | Blob:
        """The observation of ``run_id``, read with cooperative cancellation; with
        ``draw``, a finished read drawn here and returned without its values; with
        ``live``, a read of a run still being written drawn here (its live images) and
        returned without its values."""
        fields = _fields(payload, {"run_id", "max_values", "slice", "draw", "live"})
        kinds = check_kinds(fields["draw"], "draw") if "draw" in fields else ()
        live = check_kinds(fields["live"], "live") if "live" in fields else ()
        observation = self._read(fields, ctx)
        if observation.get("status") == "incomplete":
            if not live:
                return observation
            images, errors = draw_live(observation, live, ctx.check_cancel)
            head = read_summary(observation)
            if errors:
                head[IMAGE_ERRORS_KEY] = errors
            return with_images(head, images)
        if not kinds:
            return observation
        images = draw_kinds(observation, kinds, ctx.check_cancel)
        if self.handoff is not None and set(KINDS) - set(kinds):
            self.handoff.leave(observation)
        return with_images(read_summary(observation), images)

    def draw(self, payload: Any, ctx: JobContext) -> Blob:
        """Draw ``run_id`` as each of ``kinds``, from the read left for it if any; with
        ``report``, the drawing a client asked for (a slice, options) and its report."""
        fields = _fields(payload, {"run_id", "kinds", "revision", "slice", "options", "report"})
        if "kinds" not in fields:
            raise _invalid("kinds is required")
        kinds = check_kinds(fields["kinds"], "kinds")
        revision = fields.get("revision")
        if revision is not None and not isinstance(revision, str):
            raise _invalid(f"revision must be a string or null, got {revision!r:.80}")
        options = fields.get("options")
        if options is not None and not isinstance(options, dict):
            raise _invalid(f"options must be an object or null, got {options!r:.80}")
        report = fields.get("report", False)
        if not isinstance(report, bool):
            raise _invalid(f"report must be true or false, got {report!r:.80}")
        if "run_id" not in fields:
            raise _invalid("run_id is required")
        run_id = _int_field(fields, "run_id", None, 0, 2**53 - 1)
        observation = None
        if self.handoff is not None and fields.get("slice") is None:  # left: the default slice
            observation = self.handoff.take(run_id, revision)
        if observation is None:
            observation = self._read(fields, ctx)
        answer: dict[str, Any] = {
            "run_id": observation.get("run_id"),
            "revision": observation.get("revision"),
            "status": observation.get("status"),
        }
        if not report:
            return with_images(answer, draw_kinds(observation, kinds, ctx.check_cancel, options))
        chosen = slice_of(observation)
        answer["slice"] = chosen
        asked = fields.get("slice")
        if asked is not None and asked >= (int(chosen["count"]) if chosen else 0):
            return with_images(answer, {})  # no such slice: the server names the field
        images = {}
        reports = {}
        for kind in kinds:
            images[kind], reports[kind] = draw_with_report(
                observation, kind, ctx.check_cancel, options
            )
        answer["reports"] = reports
        return with_images(answer, images)

    def _read(self, fields: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
        if "run_id" not in fields:
            raise _invalid("run_id is required")
        run_id = _int_field(fields, "run_id", None, 0, 2**53 - 1)
        max_values = _int_field(fields, "max_values", MAX_OBSERVATION_VALUES, 256, 65_536)
        slice_index = None
        if fields.get("slice") is not None:
            # The client protocol's bound: any slice a client may ask for is read (the
            # last one beyond the run's count), so the app can name the field.
            slice_index = _int_field(fields, "slice", None, 0, 2**53 - 1)
        if self.faults:
            self._fault(run_id, ctx)
        with _database_errors():
            return self._open().read_run(
                run_id, check_cancel=ctx.check_cancel, max_values=max_values,
                slice_index=slice_index,
            )  # fmt: skip

    def run_details(self, payload: Any, ctx: JobContext) -> dict[str, Any]:
        """The details of ``run_id``: times, snapshot, metadata, parent/child links."""
        fields = _fields(payload, {"run_id"})
        if "run_id" not in fields:
            raise _invalid("run_id is required")
        run_id = _int_field(fields, "run_id", None, 0, 2**53 - 1)
        ctx.check_cancel()
        with _database_errors():
            return self._open().run_details(run_id)

    def run_data(self, payload: Any, ctx: JobContext) -> dict[str, Any]:
        """The data of ``run_id``, downsampled keeping extremes, within ``max_bytes``."""
        fields = _fields(payload, {"run_id", "buckets", "side", "max_bytes", "slice"})
        if "run_id" not in fields:
            raise _invalid("run_id is required")
        run_id = _int_field(fields, "run_id", None, 0, 2**53 - 1)
        buckets = _int_field(fields, "buckets", 2000, 1, MAX_DATA_BUCKETS)
        side = _int_field(fields, "side", 256, 1, MAX_DATA_SIDE)
        max_bytes = _int_field(fields, "max_bytes", 960 * 1024, 1024, 2**31)
        slice_index = None
        if fields.get("slice") is not None:
            slice_index = _int_field(fields, "slice", None, 0, 2**53 - 1)
        with _database_errors():
            summary, series = self._open().read_series(run_id, check_cancel=ctx.check_cancel)
        return run_data(
            summary, series, buckets=buckets, side=side, max_bytes=max_bytes,
            check_cancel=ctx.check_cancel, slice_index=slice_index,
        )  # fmt: skip

    def _fault(self, run_id: int, ctx: JobContext) -> None:
        crash = self.faults.get("crash_once")
        if crash and crash.get("run_id") == run_id:
            try:
                with open(crash["marker"], "x"):
                    pass
            except FileExistsError:
                pass  # crashed once already
            else:
                os._exit(CRASH_EXIT_CODE)
        stall = self.faults.get("stall")
        if stall and stall.get("run_id") == run_id:
            if stall.get("marker"):
                open(stall["marker"], "w").close()
            end = time.monotonic() + float(stall.get("seconds", 30.0))
            while time.monotonic() < end:
                ctx.check_cancel()
                time.sleep(0.01)

    def probe(self, payload: Any, ctx: JobContext) -> dict[str, Any]:
        """The cheap change probe, for all runs or for ``run_ids``."""
        fields = _fields(payload, {"run_ids"})
        run_ids = fields.get("run_ids")
        if run_ids is not None and (
            not isinstance(run_ids, list)
            or not all(isinstance(r, int) and not isinstance(r, bool) for r in run_ids)
        ):
            raise _invalid("run_ids must be a list of integers or null")
        with _database_errors():
            return self._open().probe(run_ids)

    def table(self) -> dict[str, Callable[[Any, JobContext], Any]]:
        """Operation name → handler, for :func:`actors.helper.serve`."""
        return {
            "list_runs": self.list_runs,
            "read_run": self.read_run,
            "draw": self.draw,
            "run_details": self.run_details,
            "probe": self.probe,
            "run_data": self.run_data,
        }


def main() -> None:
    """Serve preview jobs on stdin/stdout until shutdown (the helper entry point)."""
    handlers = PreviewHandlers()
    try:
        serve(handlers.table(), on_startup=handlers.startup)
    finally:
        if handlers.source is not None:
            handlers.source.close()
