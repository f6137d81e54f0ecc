"""The client requests that look into one run: its views and its data (§5.2, §7.2, §7.7).

Handlers for :class:`examples.web.frontdoor.FrontDoor`, served with the other client
requests (:class:`~examples.preview.app.connected_clients.Clients` adds them to its handlers):

* ``list_run_times`` → ``run_times``: every run's start and end (epoch seconds), from
  the run summaries the app already holds (no I/O), so a client can sort and filter the
  run list by date;
* ``run_details`` {run_id} → ``run_details_reply``: start, end and duration, the
  instrument snapshot, run metadata (QCoDeS's extra columns), experiment and sample,
  parameters and parent/child links; a helper job ``run_details`` reads them;
* ``draw`` {run_id, kind, slice, scale, xscale} → ``drawing``: one picture drawn now
  from the run's newest data: a chosen 2-D slice of a run with more than two sweep
  dimensions, and chosen axis scales (the page's slice picker and log toggle). A
  helper job ``draw`` reads that slice and draws it (design §5.4: the server process
  draws nothing); the reply carries the picture's URL (held by
  :class:`~examples.preview.app.images.DrawnViews`, design §7.6) and the drawing's report
  of its axis decisions. A draw cancelled while it is drawn (the client went away)
  cancels its helper job (the pool's cancel ladder), which frees the helper.

A run id the database does not have is an ``unknown_run`` error; a slice the run
does not have is ``invalid_command`` naming ``slice``. Each answer is logged with the
run id and what was drawn or read as ``extra`` fields.

Depends on the :class:`~examples.preview.app.runs.RunTable` and the
:class:`~examples.preview.app.helper_jobs.HelperJobs`.

**Its data.** :class:`DataView`: the ``run_data`` request, a run's data to explore in
the browser (design §7.7).

``run_data`` {run_id, buckets, side} → ``run_data_reply``: every plottable series of the
run, downsampled keeping extremes (each trace's min and max per bucket, each map's block
mean, min and max) and bounded in bytes. A helper job ``run_data`` reads and reduces
the data (:mod:`examples.preview.child.run_data`), so neither the database nor the arrays
touch the event loop; the job runs within the app's ``job_timeout``.

Validated at the boundary: a run id the database does not have is ``unknown_run``;
``buckets`` or ``side`` above the configured maximum is ``invalid_command`` naming the
field. The helper's answer is checked again as it becomes the reply's attrs records (a
bad one is ``source_unreadable``, never a crash). Each answer is logged with the run id,
the bounds used and its size in bytes as ``extra`` fields.

Depends on the :class:`~examples.preview.app.runs.RunTable` and the
:class:`~examples.preview.app.helper_jobs.HelperJobs`.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from actors.errors import InvalidCommand, SourceUnreadable
from protocol import messages

from ..child.draw import observation_of, png_of
from ..child.drawing.image_kinds import KINDS, MIME
from ..child.drawing.png import check_png
from .image_urls import view_url
from .images import StoredImage
from .runs import points_message

if TYPE_CHECKING:
    from ...web.api import Handler
    from ...web.connection import Connection
    from .helper_jobs import HelperJobs
    from .images import DrawnViews
    from .runs import RunTable

__all__ = ["RunViews", "DataView", "data_reply"]

LOGGER = logging.getLogger(__name__)
_TEXT = messages.MAX_TEXT_LENGTH


class RunViews:
    """The ``list_run_times``, ``run_details`` and ``draw`` handlers (module docstring).

    Args:
        table: The runs.
        helpers: Runs the helper jobs (``run_details``, ``draw``).
        drawn: Holds each picture for its URL (design §7.6).
        db: The database id, in each picture's URL.
    """

    def __init__(
        self,
        table: RunTable,
        helpers: HelperJobs,
        drawn: DrawnViews,
        *,
        db: str,
    ) -> None:
        self._table = table
        self._helpers = helpers
        self._drawn = drawn
        self._db = db

    @property
    def handlers(self) -> dict[str, Handler]:
        """Front-door handlers: ``list_run_times``, ``run_details``, ``draw``."""
        return {
            "list_run_times": self.on_list_run_times,
            "run_details": self.on_run_details,
            "draw": self.on_draw,
        }

    async def on_list_run_times(
        self, conn: Connection, request: messages.ListRunTimes
    ) -> messages.RunTimes:
        """``list_run_times`` → ``run_times`` (no I/O)."""
        rows = tuple(
            messages.RunTime(
                run_id=record.run_id,
                started=_seconds(record.summary.get("run_timestamp")),
                ended=_seconds(record.summary.get("completed_timestamp")),
            )
            for record in self._table.runs.values()
        )
        return messages.RunTimes(request_id=request.request_id, runs=rows)

    async def on_run_details(
        self, conn: Connection, request: messages.RunDetails
    ) -> messages.RunDetailsReply:
        """``run_details`` → ``run_details_reply``.

        Raises:
            UnknownRun: (``unknown_run``) no such run.
            ActorError: the helper job failed (e.g. ``source_unreadable``).
        """
        self._table.check([request.run_id])
        found = await self._helpers.run_job("run_details", {"run_id": request.run_id})
        if not isinstance(found, dict):
            raise SourceUnreadable(f"run {request.run_id}: the helper returned no details")
        LOGGER.info(
            "run %d: details sent", request.run_id,
            extra={"run_id": request.run_id, "snapshot_bytes": found.get("snapshot_bytes")},
        )  # fmt: skip
        return _details_reply(request.request_id, request.run_id, found)

    async def on_draw(self, conn: Connection, request: messages.Draw) -> messages.Drawing:
        """``draw`` → ``drawing``: the picture asked for, drawn from the newest data.

        Raises:
            UnknownRun: (``unknown_run``) no such run.
            InvalidCommand: (``invalid_command``, ``fields=["slice"]``) the run has no
                such slice.
            SourceUnreadable: (``source_unreadable``) the helper's answer has no PNG of
                the kind or no report.
            ActorError: the helper job (the read or the drawing) failed.
        """
        self._table.check([request.run_id])
        payload: dict[str, Any] = {
            "run_id": request.run_id,
            "kinds": [request.kind],
            "options": {"scale": request.scale, "xscale": request.xscale},
            "report": True,
        }
        if request.slice is not None:
            payload["slice"] = request.slice
        # Read and drawn in a helper (design §5.4): a cancelled draw (the client went
        # away) gets the pool's cancel ladder, which frees the helper.
        answer = observation_of(await self._helpers.run_job("draw", payload))
        if not isinstance(answer, dict):
            raise SourceUnreadable(f"run {request.run_id}: the helper returned no drawing")
        chosen = answer.get("slice")
        chosen = chosen if isinstance(chosen, dict) else None
        if request.slice is not None:
            count = int(chosen["count"]) if chosen else 0
            if request.slice >= count:
                has = f"has {count} slices" if count else "has at most two sweep dimensions"
                raise InvalidCommand(
                    f"draw: slice {request.slice} is out of range: run {request.run_id} {has}",
                    fields=["slice"],
                )
        png = png_of(answer, request.kind)
        reports = answer.get("reports")
        report = reports.get(request.kind) if isinstance(reports, dict) else None
        if png is None or not isinstance(report, dict):
            raise SourceUnreadable(f"run {request.run_id}: the helper drew no {request.kind}")
        check_png(png)  # as the renderer checks its drawings
        picture = StoredImage(run_id=request.run_id, kind=request.kind, revision=0, data=png)
        number = self._drawn.add(picture)
        width, height = KINDS[request.kind]
        panels = report.get("panels")
        label = next(
            (p["slice"] for p in panels if isinstance(p, dict) and p.get("slice")), None
        ) if isinstance(panels, list) else None  # fmt: skip
        LOGGER.info(
            "run %d: drew %s (slice %s, scale %s, xscale %s)", request.run_id, request.kind,
            None if chosen is None else chosen["index"], request.scale, request.xscale,
            extra={"run_id": request.run_id, "kind": request.kind,
                   "slice": None if chosen is None else chosen["index"],
                   "scale": request.scale, "xscale": request.xscale},
        )  # fmt: skip
        return messages.Drawing(
            request_id=request.request_id,
            run_id=request.run_id,
            kind=request.kind,
            slice=None if chosen is None else int(chosen["index"]),
            slice_count=0 if chosen is None else int(chosen["count"]),
            slice_label=None if label is None else str(label)[:_TEXT],
            url=view_url(self._db, number, picture.version),
            mime=MIME,
            width=width,
            height=height,
            bytes=len(png),
            report=report,
        )


def _seconds(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value) if abs(value) <= messages.MAX_JSON_INT else None
    return None


def _json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as None (strict JSON) and long text cut."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value if len(value) <= _TEXT else value[:_TEXT] + "…"
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _text(value: object, limit: int = _TEXT) -> str:
    return "" if value is None else str(value)[:limit]


def _link(item: Any) -> messages.RunLink | None:
    if not isinstance(item, dict) or not isinstance(item.get("guid"), str) or not item["guid"]:
        return None
    run_id = item.get("run_id")
    return messages.RunLink(
        guid=item["guid"][:_TEXT],
        run_id=run_id if isinstance(run_id, int) and not isinstance(run_id, bool) else None,
        name=None if item.get("name") is None else _text(item["name"]),
        edge_type=_text(item.get("edge_type")),
        description=_text(item.get("description")),
    )


def _details_reply(request_id: str, run_id: int, found: dict[str, Any]) -> messages.RunDetailsReply:
    status = str(found.get("status") or "ok")
    snapshot = found.get("snapshot")
    parameters = tuple(_json_safe(p) for p in found.get("parameters") or [] if isinstance(p, dict))
    exception = found.get("exception")
    return messages.RunDetailsReply(
        request_id=request_id,
        run_id=run_id,
        name=_text(found.get("name")),
        experiment=_text(found.get("exp_name")),
        sample=None if found.get("sample_name") is None else _text(found["sample_name"]),
        guid=_text(found.get("guid")) or None,
        status=status if status in ("ok", "empty", "interrupted", "incomplete") else "ok",
        status_reason=_text(found.get("status_reason")),
        started=_seconds(found.get("started")),
        ended=_seconds(found.get("ended")),
        duration=_seconds(found.get("duration")),
        metadata=_json_safe(found.get("metadata") or {}),
        parameters=parameters,
        snapshot=_json_safe(snapshot) if isinstance(snapshot, dict) else None,
        snapshot_bytes=max(0, int(found.get("snapshot_bytes") or 0)),
        snapshot_pruned=bool(found.get("snapshot_pruned")),
        parents=tuple(link for item in found.get("parents") or [] if (link := _link(item))),
        children=tuple(link for item in found.get("children") or [] if (link := _link(item))),
        exception=None if exception is None else _text(exception),
        points=points_message(found.get("points"), found.get("planned_points")),
        results=_rows(found.get("row_count")),
    )


def _rows(value: object) -> int | None:
    if isinstance(value, int) and 0 <= value <= messages.MAX_JSON_INT:
        return value
    return None


class DataView:
    """The ``run_data`` handler (module docstring).

    Args:
        table: The runs.
        helpers: Runs the helper job ``run_data``.
        buckets: Most buckets per trace (each gives its min and max sample).
        side: Most rows, and most columns, per map.
        max_bytes: Most bytes of JSON of one answer's data.
    """

    def __init__(
        self, table: RunTable, helpers: HelperJobs, *, buckets: int, side: int, max_bytes: int
    ) -> None:
        self._table = table
        self._helpers = helpers
        self._buckets = buckets
        self._side = side
        self._max_bytes = max_bytes

    @property
    def handlers(self) -> dict[str, Handler]:
        """Front-door handlers: ``run_data``."""
        return {"run_data": self.on_run_data}

    async def on_run_data(
        self, conn: Connection, request: messages.RunData
    ) -> messages.RunDataReply:
        """``run_data`` → ``run_data_reply``.

        Raises:
            InvalidCommand: (``invalid_command``, ``fields=["buckets"]`` or
                ``["side"]``) above the server's maximum.
            UnknownRun: (``unknown_run``) no such run.
            ActorError: the helper job failed (e.g. ``source_unreadable``,
                ``job_timeout``); ``source_unreadable`` too for an answer that does not
                check.
        """
        buckets = self._bounded("buckets", request.buckets, self._buckets)
        side = self._bounded("side", request.side, self._side)
        self._table.check([request.run_id])
        payload = {"run_id": request.run_id, "buckets": buckets, "side": side,
                   "max_bytes": self._max_bytes, "slice": request.slice}  # fmt: skip
        found = await self._helpers.run_job("run_data", payload)
        try:
            reply = data_reply(request.request_id, found)
        except (KeyError, TypeError, ValueError) as exc:
            raise SourceUnreadable(
                f"run {request.run_id}: the helper's data does not check: {exc}"[:500]
            ) from None
        LOGGER.info(
            "run %d: data sent (%d series, %d bytes)", request.run_id, len(reply.series),
            reply.bytes,
            extra={"run_id": request.run_id, "buckets": reply.buckets, "side": reply.side,
                   "bytes": reply.bytes, "series": len(reply.series)},
        )  # fmt: skip
        return reply

    @staticmethod
    def _bounded(name: str, asked: int | None, maximum: int) -> int:
        if asked is None:
            return maximum
        if asked > maximum:
            raise InvalidCommand(
                f"run_data: {name} must be at most {maximum} on this server, got {asked}",
                fields=[name],
            )
        return asked


def _numbers(values: Any) -> tuple[float | None, ...]:
    return tuple(None if v is None else float(v) for v in values)


def _axis(found: dict[str, Any]) -> messages.DataAxis:
    return messages.DataAxis(
        name=str(found["name"]),
        label=str(found.get("label") or ""),
        unit=str(found.get("unit") or ""),
        levels=tuple(str(level) for level in found.get("levels") or ()),
        values=_numbers(found["values"]),
    )


def _series(found: dict[str, Any]) -> messages.DataSeries:
    return messages.DataSeries(
        name=str(found["name"]),
        label=str(found.get("label") or ""),
        unit=str(found.get("unit") or ""),
        component=found.get("component"),
        levels=tuple(str(level) for level in found.get("levels") or ()),
        nonfinite=int(found.get("nonfinite") or 0),
        shape=tuple(int(n) for n in found["shape"]),
        source_shape=tuple(int(n) for n in found["source_shape"]),
        axes=tuple(_axis(axis) for axis in found["axes"]),
        values=_numbers(found["values"]),
        low=_numbers(found.get("low") or ()),
        high=_numbers(found.get("high") or ()),
        slice=None if found.get("slice") is None else int(found["slice"]),
        slice_count=int(found.get("slice_count") or 0),
        slice_label=str(found.get("slice_label") or "")[:_TEXT],
    )


def data_reply(request_id: str, found: Any) -> messages.RunDataReply:
    """The ``run_data_reply`` of the helper's answer ``found``, checked field by field.

    Raises:
        KeyError, TypeError, ValueError: ``found`` misses a field or a field does not
            check (a :class:`~protocol.messages.FieldError` names it).
    """
    if not isinstance(found, dict):
        raise TypeError("the answer is not an object")
    return messages.RunDataReply(
        request_id=request_id,
        run_id=int(found["run_id"]),
        name=str(found.get("name") or ""),
        completed=bool(found.get("completed", True)),
        buckets=int(found["buckets"]),
        side=int(found["side"]),
        bytes=int(found["bytes"]),
        series=tuple(_series(item) for item in found["series"]),
    )
