"""DataView: the ``run_data`` request, a run's data to explore in the browser (design §7.7).

``run_data`` {run_id, buckets, side} → ``run_data_reply``: every plottable series of the
run, downsampled keeping extremes (each trace's min and max per bucket, each map's block
mean, min and max) and bounded in bytes. A helper job ``run_data`` reads and reduces
the data (:mod:`examples.preview.run_data`), so neither the database nor the arrays
touch the event loop; the job runs within the app's ``job_timeout``.

Validated at the boundary: a run id the database does not have is ``unknown_run``;
``buckets`` or ``side`` above the configured maximum is ``invalid_command`` naming the
field. The helper's answer is checked again as it becomes the reply's attrs records (a
bad one is ``source_unreadable``, never a crash). Each answer is logged with the run id,
the bounds used and its size in bytes as ``extra`` fields.

Depends on the :class:`~examples.preview.run_table.RunTable` and the
:class:`~examples.preview.helper_jobs.HelperJobs`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from actors.errors import InvalidCommand, SourceError
from protocol import messages

if TYPE_CHECKING:
    from ..web.api import Handler
    from ..web.connection import Connection
    from .helper_jobs import HelperJobs
    from .run_table import RunTable

__all__ = ["DataView", "data_reply"]

LOGGER = logging.getLogger(__name__)


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
                   "max_bytes": self._max_bytes}  # fmt: skip
        found = await self._helpers.run_job("run_data", payload)
        try:
            reply = data_reply(request.request_id, found)
        except (KeyError, TypeError, ValueError) as exc:
            raise SourceError(
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
