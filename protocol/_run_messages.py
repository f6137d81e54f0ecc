"""The preview server's run-view messages: selection, run lists, drawings (design §7.2).

Defined here and re-exported by :mod:`protocol.messages`, which adds them to its unions.
The run's data (``run_data``) has its own module, ``_run_data``.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from ._field_error import FieldError
from ._fields import (
    MAX_VISIBLE_RUNS,
    _code,
    _count,
    _counts,
    _finite,
    _flag,
    _items_of,
    _json_object,
    _one_of,
    _optional,
    _path_url,
    _reply_id,
    _request_id,
    _run_id,
    _text,
)

__all__ = [
    "SCALES",
    "XSCALES",
    "Select",
    "Visible",
    "ListRuns",
    "ListRunTimes",
    "RunDetails",
    "Annotate",
    "Draw",
    "DependentPoints",
    "RunSummary",
    "RunList",
    "ImageReady",
    "RunTime",
    "RunTimes",
    "RunLink",
    "RunDetailsReply",
    "Drawing",
]


# --------------------------------------------------------------------------------------
# Client → server requests
# --------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Select:
    """Set the selected run of the preview server (design §4.2, §7.2)."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    run_id: int | None = attrs.field(validator=_optional(_count))
    """The selected run, or ``None`` to clear the selection. Required (may be null)."""


@attrs.frozen(kw_only=True)
class Visible:
    """Set the runs shown in the client's viewport (design §4.2, §7.2)."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    run_ids: tuple[int, ...] = attrs.field(validator=_counts(MAX_VISIBLE_RUNS))
    """The visible runs, in display order; at most 1024 (a JSON array)."""


@attrs.frozen(kw_only=True)
class ListRuns:
    """Ask for the preview server's run list (design §7.2). Answered by ``run_list``."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""


@attrs.frozen(kw_only=True)
class ListRunTimes:
    """Ask for every run's start and end time (design §7.2). Answered by ``run_times``."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""


@attrs.frozen(kw_only=True)
class RunDetails:
    """Ask for one run's details (design §7.2). Answered by ``run_details_reply``."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    run_id: int = _run_id()
    """The database's run id."""


#: The longest note a run may carry, in characters.
MAX_NOTE: Final = 2000


@attrs.frozen(kw_only=True)
class Annotate:
    """Star a run, or write a short note on it (design §7.2). Answered by ``ok``; the
    run list is pushed again with the run's ``starred`` and ``note``.

    The preview server keeps them in a file beside the database
    (``<file>.preview-notes.json``), never in the QCoDeS file.
    """

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    run_id: int = _run_id()
    """The database's run id."""
    starred: bool | None = attrs.field(default=None, validator=_optional(_flag))
    """Star (true) or unstar (false) the run; ``None`` leaves it as it is."""
    note: str | None = attrs.field(default=None, validator=_optional(_text(MAX_NOTE, min_length=0)))
    """The run's note (``""`` removes it; at most 2000 characters); ``None`` leaves it."""


#: The value scales a ``draw`` may ask for (design §5.2).
SCALES: Final = ("auto", "linear", "log", "symlog")
#: The setpoint-axis scales a ``draw`` may ask for.
XSCALES: Final = ("auto", "linear", "log")


@attrs.frozen(kw_only=True)
class Draw:
    """Ask for one picture of a run: a chosen slice and scales (design §5.2, §7.2).

    Answered by ``drawing``. The picture is drawn from the run's newest data.
    """

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    run_id: int = _run_id()
    """The database's run id."""
    kind: str = attrs.field(default="preview", validator=_one_of("thumbnail", "preview"))
    """``thumbnail`` or ``preview``."""
    slice: int | None = attrs.field(default=None, validator=_optional(_count))
    """For a run with more than two sweep dimensions, the 2-D slice (from 0); ``None``
    for the slice holding the newest point."""
    scale: str = attrs.field(default="auto", validator=_one_of(*SCALES))
    """The value axis (or colour scale): ``auto``, ``linear``, ``log`` or ``symlog``."""
    xscale: str = attrs.field(default="auto", validator=_one_of(*XSCALES))
    """The setpoint axes: ``auto``, ``linear`` or ``log``."""


# --------------------------------------------------------------------------------------
# Server → client messages
# --------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DependentPoints:
    """How many points of one dependent a run holds, and how many were planned."""

    name: str = attrs.field(validator=_text())
    """The dependent parameter's name."""
    points: int = attrs.field(validator=_count)
    """Its values so far (an ``array`` result counts each of its elements), not the
    database's rows: a run with two setpoint groups of 200 and 20 holds 200 + 200 + 20
    points in 420 rows."""
    planned: int | None = attrs.field(default=None, validator=_optional(_count))
    """The size of its declared shape (QCoDeS ``set_shapes``); ``None`` if none."""


@attrs.frozen(kw_only=True)
class RunSummary:
    """One row of ``run_list``: a measurement run of the preview server (design §7.2)."""

    run_id: int = _run_id()
    """The database's run id."""
    name: str = attrs.field(validator=_text(min_length=0))
    """Measurement name."""
    experiment: str = attrs.field(validator=_text(min_length=0))
    """Experiment name."""
    sample: str | None = attrs.field(default=None, validator=_optional(_text(min_length=0)))
    """Sample name, if known."""
    guid: str | None = attrs.field(default=None, validator=_optional(_text()))
    """The run's GUID, if known."""
    shape: tuple[int, ...] = attrs.field(default=(), validator=_counts(8))
    """Declared data shape (one int per axis; ``()`` if unknown)."""
    completed: bool = attrs.field(validator=_flag)
    """False while the run is still being written (a progressive source, design §4.5)."""
    rows: int = attrs.field(validator=_count)
    """Number of rows of its results table so far (SQLite rows, not points: see
    ``points``)."""
    status: str | None = attrs.field(default=None, validator=_optional(_code))
    """What the newest read of the run found, as QCoDeS records it, so a late client
    needs no event replay: ``ok`` (completed), ``interrupted`` (completed: the measurement
    ended with an exception), ``empty`` (completed, no results), ``incomplete`` (not
    completed, and nothing was written for a while: the writer is gone), ``progressive``
    (not completed, still being written, design §4.5) or ``unreadable`` (its metadata
    failed); ``None`` while unknown (not read yet at its newest revision). Added after
    the first release: optional."""
    job_run_id: int | None = attrs.field(default=None, validator=_optional(_count))
    """The event-log run reporting this run's work now, or the last one that did (its
    events carry it as ``run_id``; ask ``status``/``cancel`` with it); ``None`` before
    one was admitted. Optional, like ``status``."""
    points: tuple[DependentPoints, ...] = attrs.field(
        default=(), validator=_items_of(DependentPoints)
    )
    """Points per dependent, as last read (at most 64 dependents). Optional."""
    starred: bool = attrs.field(default=False, validator=_flag)
    """Starred by a user (``annotate``). Optional."""
    note: str = attrs.field(default="", validator=_text(MAX_NOTE, min_length=0))
    """A user's short note on the run (``annotate``), or ``""``. Optional."""
    idle_since: float | None = attrs.field(default=None, validator=_optional(_finite))
    """For a run not completed: no new data was written after this time (seconds since
    the epoch, UTC; the latest the server can vouch for); ``None`` otherwise. Optional."""


@attrs.frozen(kw_only=True)
class RunList:
    """The run list: answer to ``list_runs``, or pushed when it changes (design §7.2)."""

    request_id: str | None = _reply_id()
    """The request's id; ``None`` when pushed."""
    runs: tuple[RunSummary, ...] = attrs.field(validator=_items_of(RunSummary))
    """The runs, in database order."""


@attrs.frozen(kw_only=True)
class ImageReady:
    """A rendered image of a run is ready at ``url``, pushed by the preview server.

    The image itself is fetched over HTTP from the same server (design §7.6): the URL
    names the revision and the version of the bytes, so it never changes and a browser
    caches it.
    """

    db: str = attrs.field(validator=_text(64))
    """The database's id (design §7.5)."""
    run_id: int = _run_id()
    """The run."""
    kind: str = attrs.field(validator=_code)
    """``thumbnail`` or ``preview``."""
    revision: int = attrs.field(validator=_count)
    """Source revision it was drawn from (design §4.8)."""
    url: str = attrs.field(validator=_path_url)
    """Where to ``GET`` it: a path and query on the server
    (``/db/.../preview.png?rev=N&v=<version>``), to which the client adds its token."""
    mime: str = attrs.field(validator=_text(255))
    """Media type, e.g. ``image/png``."""
    width: int = attrs.field(validator=_count)
    """Image width, in pixels."""
    height: int = attrs.field(validator=_count)
    """Image height, in pixels."""
    bytes: int = attrs.field(validator=_count)
    """The image's size, in bytes."""


@attrs.frozen(kw_only=True)
class RunTime:
    """One row of ``run_times``: when a run started and ended (epoch seconds)."""

    run_id: int = _run_id()
    """The database's run id."""
    started: float | None = attrs.field(default=None, validator=_optional(_finite))
    """Start, seconds since the epoch (UTC); ``None`` if unknown."""
    ended: float | None = attrs.field(default=None, validator=_optional(_finite))
    """End, seconds since the epoch; ``None`` while the run is unfinished."""


@attrs.frozen(kw_only=True)
class RunTimes:
    """Answer to ``list_run_times`` (design §7.2)."""

    request_id: str | None = _reply_id()
    """The request's id."""
    runs: tuple[RunTime, ...] = attrs.field(validator=_items_of(RunTime))
    """Every known run, in database order."""


@attrs.frozen(kw_only=True)
class RunLink:
    """A parent or child of a run (QCoDeS's dataset links)."""

    guid: str = attrs.field(validator=_text())
    """The other run's GUID."""
    run_id: int | None = attrs.field(default=None, validator=_optional(_count))
    """Its run id, or ``None`` when it is not in this database."""
    name: str | None = attrs.field(default=None, validator=_optional(_text(min_length=0)))
    """Its name, if known."""
    edge_type: str = attrs.field(default="", validator=_text(min_length=0))
    """The kind of link QCoDeS recorded, e.g. ``calibration``."""
    description: str = attrs.field(default="", validator=_text(min_length=0))
    """Free text recorded with the link."""


@attrs.frozen(kw_only=True)
class RunDetailsReply:
    """Answer to ``run_details``: what a physicist looks for in a run (design §7.2)."""

    request_id: str | None = _reply_id()
    """The request's id."""
    run_id: int = _run_id()
    """The database's run id."""
    name: str = attrs.field(validator=_text(min_length=0))
    """Measurement name."""
    experiment: str = attrs.field(validator=_text(min_length=0))
    """Experiment name."""
    sample: str | None = attrs.field(default=None, validator=_optional(_text(min_length=0)))
    """Sample name, if known."""
    guid: str | None = attrs.field(default=None, validator=_optional(_text()))
    """The run's GUID."""
    status: str = attrs.field(validator=_code)
    """As QCoDeS records the run: ``ok`` (completed), ``interrupted`` (completed: the
    measurement ended with an exception, see ``exception``), ``empty`` (completed, no
    results) or ``incomplete`` (not completed)."""
    status_reason: str = attrs.field(default="", validator=_text(min_length=0))
    """Why the status, in words."""
    started: float | None = attrs.field(default=None, validator=_optional(_finite))
    """Start, seconds since the epoch (UTC)."""
    ended: float | None = attrs.field(default=None, validator=_optional(_finite))
    """End, seconds since the epoch; ``None`` while unfinished."""
    duration: float | None = attrs.field(default=None, validator=_optional(_finite))
    """``ended - started``, seconds; ``None`` while unfinished."""
    metadata: dict[str, Any] = attrs.field(factory=dict, validator=_json_object)
    """Run metadata: QCoDeS's extra ``runs`` columns (``add_metadata``), name → value."""
    parameters: tuple[dict[str, Any], ...] = attrs.field(default=())
    """Each registered parameter: ``name``, ``label``, ``unit``, ``paramtype``,
    ``depends_on``, ``inferred_from`` (JSON objects)."""
    snapshot: dict[str, Any] | None = attrs.field(default=None, validator=_optional(_json_object))
    """The instrument snapshot (a JSON object), pruned when large; ``None`` if none."""
    snapshot_bytes: int = attrs.field(default=0, validator=_count)
    """The snapshot's size as stored, in bytes."""
    snapshot_pruned: bool = attrs.field(default=False, validator=_flag)
    """True if parts of a large snapshot were left out."""
    parents: tuple[RunLink, ...] = attrs.field(default=(), validator=_items_of(RunLink))
    """Runs this one was derived from."""
    children: tuple[RunLink, ...] = attrs.field(default=(), validator=_items_of(RunLink))
    """Runs derived from this one."""
    exception: str | None = attrs.field(default=None, validator=_optional(_text(min_length=0)))
    """The traceback QCoDeS stored when the measurement raised, or ``None``."""
    points: tuple[DependentPoints, ...] = attrs.field(
        default=(), validator=_items_of(DependentPoints)
    )
    """Points per dependent and the planned ones (at most 64). Optional."""
    results: int | None = attrs.field(default=None, validator=_optional(_count))
    """QCoDeS's ``number_of_results``: rows of the results table, ``None`` if unknown."""

    @parameters.validator
    def _check_parameters(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, tuple) or not all(
            isinstance(item, dict) and all(isinstance(k, str) for k in item) for item in value
        ):
            raise FieldError(attribute.name, "must be a tuple of JSON objects")


@attrs.frozen(kw_only=True)
class Drawing:
    """Answer to ``draw``: the picture and the decisions behind it (design §5.2, §7.2)."""

    request_id: str | None = _reply_id()
    """The request's id."""
    run_id: int = _run_id()
    """The run."""
    kind: str = attrs.field(validator=_code)
    """``thumbnail`` or ``preview``."""
    slice: int | None = attrs.field(default=None, validator=_optional(_count))
    """The slice drawn (from 0), or ``None`` for a run with at most two dimensions."""
    slice_count: int = attrs.field(default=0, validator=_count)
    """How many slices the run has (0 for at most two dimensions)."""
    slice_label: str | None = attrs.field(default=None, validator=_optional(_text()))
    """The slice in words, e.g. ``magnet_field = 1 T · slice 6 of 6``."""
    url: str = attrs.field(validator=_path_url)
    """Where to ``GET`` the picture: a path and query on the server (design §7.6), to
    which the client adds its token; held for a while (the newest drawings), never
    changed."""
    mime: str = attrs.field(validator=_text(255))
    """Media type, e.g. ``image/png``."""
    width: int = attrs.field(validator=_count)
    """Image width, in pixels."""
    height: int = attrs.field(validator=_count)
    """Image height, in pixels."""
    bytes: int = attrs.field(validator=_count)
    """The picture's size, in bytes."""
    report: dict[str, Any] = attrs.field(factory=dict, validator=_json_object)
    """The renderer's decisions: per panel each axis's scale, the reason, its range."""
