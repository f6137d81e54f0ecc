"""The messages of exploring a run: ``run_data`` and its answer (design §7.7).

Defined here and re-exported by :mod:`protocol.messages`, which adds them to its unions.
A run's data travels downsampled: each 1-D trace as the min and max sample of each
bucket (real samples, in acquisition order), each 2-D map as block means with the
blocks' minima and maxima. JSON has no NaN or infinity: a missing or non-finite value
is ``null``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

import attrs

from ._field_error import FieldError
from ._fields import MAX_JSON_INT, MAX_TEXT_LENGTH, _flag, _optional

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "MAX_DATA_BUCKETS",
    "MAX_DATA_SIDE",
    "DataAxis",
    "DataSeries",
    "RunData",
    "RunDataReply",
]

#: Most buckets per trace a ``run_data`` may ask for (a server allows fewer).
MAX_DATA_BUCKETS: Final = 65_536
#: Most cells per side of a map a ``run_data`` may ask for (a server allows fewer).
MAX_DATA_SIDE: Final = 2048
#: Most numbers in one list: a map of MAX_DATA_SIDE² cells.
_MAX_NUMBERS: Final = MAX_DATA_SIDE**2


def _int_in(low: int, high: int) -> Callable[..., None]:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise FieldError(
                attribute.name, f"must be an int in [{low}, {high}], got {value!r:.80}"
            )

    return check


def _text(min_length: int = 0, max_length: int = MAX_TEXT_LENGTH) -> Callable[..., None]:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, str) or not min_length <= len(value) <= max_length:
            raise FieldError(
                attribute.name, f"must be a string of {min_length}..{max_length} characters"
            )

    return check


_optional_text: Final = _optional(_text(1))


def _numbers(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or len(value) > _MAX_NUMBERS:
        raise FieldError(attribute.name, f"must be an array of at most {_MAX_NUMBERS} numbers")
    for index, item in enumerate(value):
        if item is None:
            continue
        if isinstance(item, bool) or not isinstance(item, float) or not math.isfinite(item):
            raise FieldError(
                attribute.name, f"[{index}] must be a finite number or null, got {item!r:.40}"
            )


def _texts(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or not all(
        isinstance(item, str) and len(item) <= MAX_TEXT_LENGTH for item in value
    ):
        raise FieldError(attribute.name, "must be an array of strings")


def _shape(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if (
        not isinstance(value, tuple)
        or len(value) not in (1, 2)
        or not all(type(n) is int and 0 <= n <= _MAX_NUMBERS for n in value)
    ):
        raise FieldError(attribute.name, "must be one or two sizes (ints)")


# --- client → server -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RunData:
    """Ask for a run's data, downsampled keeping extremes (design §7.7).

    Answered by ``run_data_reply``. A server caps ``buckets`` and ``side`` (the preview
    server at 2 000 and 256 by default) and refuses more with ``invalid_command``
    naming the field.
    """

    request_id: str = attrs.field(validator=_text(1, 128))
    """Client-chosen id, 1..128 characters."""
    run_id: int = attrs.field(validator=_int_in(0, MAX_JSON_INT))
    """The database's run id."""
    buckets: int | None = attrs.field(
        default=None, validator=_optional(_int_in(1, MAX_DATA_BUCKETS))
    )
    """Most buckets per 1-D trace (each gives its min and max sample); ``None``: the
    server's maximum."""
    side: int | None = attrs.field(default=None, validator=_optional(_int_in(1, MAX_DATA_SIDE)))
    """Most rows, and most columns, of a 2-D map; ``None``: the server's maximum."""
    slice: int | None = attrs.field(default=None, validator=_optional(_int_in(0, MAX_JSON_INT)))
    """For a run with more than two sweep dimensions, the 2-D slice of its maps (from 0,
    as ``draw``'s; past the last: the last); ``None``: the slice holding the newest point."""


# --- server → client -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DataAxis:
    """One axis of a :class:`DataSeries`: a setpoint, its name, unit and values."""

    name: str = attrs.field(validator=_text())
    """The setpoint's name (``index`` for a dependent without setpoints)."""
    label: str = attrs.field(default="", validator=_text())
    """Its label."""
    unit: str = attrs.field(default="", validator=_text())
    """Its unit."""
    levels: tuple[str, ...] = attrs.field(default=(), validator=_texts)
    """For a text setpoint: the level names its values (0, 1, ...) stand for."""
    values: tuple[float | None, ...] = attrs.field(validator=_numbers)
    """1-D: the setpoint of each point; 2-D: each row's (``axes[0]``) or column's
    (``axes[1]``) centre, ascending. ``null``: unknown."""


@attrs.frozen(kw_only=True)
class DataSeries:
    """One plottable series of a run, downsampled (design §7.7).

    1-D: ``values[k]`` is the value at ``axes[0].values[k]``, one real sample per point
    (each bucket's min and max, in acquisition order). 2-D: ``values`` holds the map
    row-major, ``shape[0]`` rows (``axes[0]``, the outer setpoint) by ``shape[1]``
    columns (``axes[1]``, the inner one); each cell is the mean of a block of source
    cells, and ``low``/``high`` their min and max (empty when no cells were merged:
    then they equal ``values``).
    """

    name: str = attrs.field(validator=_text(1))
    """The dependent's name."""
    label: str = attrs.field(default="", validator=_text())
    """Its label."""
    unit: str = attrs.field(default="", validator=_text())
    """Its unit (``deg`` for a phase)."""
    component: str | None = attrs.field(default=None, validator=_optional_text)
    """``magnitude`` or ``phase`` for complex data, else ``None``."""
    levels: tuple[str, ...] = attrs.field(default=(), validator=_texts)
    """For text data: the level names its values stand for."""
    nonfinite: int = attrs.field(default=0, validator=_int_in(0, MAX_JSON_INT))
    """Missing or non-finite values (NaN, ±Inf) in the source."""
    shape: tuple[int, ...] = attrs.field(validator=_shape)
    """As delivered: ``(points,)`` or ``(rows, columns)``."""
    source_shape: tuple[int, ...] = attrs.field(validator=_shape)
    """Before downsampling."""
    axes: tuple[DataAxis, ...] = attrs.field()
    """One axis per dimension."""
    values: tuple[float | None, ...] = attrs.field(validator=_numbers)
    """The values (``null``: missing or non-finite)."""
    low: tuple[float | None, ...] = attrs.field(default=(), validator=_numbers)
    """2-D, merged blocks only: each block's smallest value."""
    high: tuple[float | None, ...] = attrs.field(default=(), validator=_numbers)
    """2-D, merged blocks only: each block's largest value."""
    slice: int | None = attrs.field(default=None, validator=_optional(_int_in(0, MAX_JSON_INT)))
    """A map of a run with more than two sweep dimensions: which 2-D slice it is (from
    0); ``None`` otherwise."""
    slice_count: int = attrs.field(default=0, validator=_int_in(0, MAX_JSON_INT))
    """How many slices the run has (0: not sliced)."""
    slice_label: str = attrs.field(default="", validator=_text())
    """The slice's fixed setpoints, e.g. ``magnet_field = 0.8 T · slice 5 of 6``."""

    @axes.validator
    def _check_axes(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, tuple) or not all(type(a) is DataAxis for a in value):
            raise FieldError(attribute.name, "must be an array of data axes")
        if len(value) != len(self.shape):
            raise FieldError(attribute.name, f"must have {len(self.shape)} axes, one per dimension")
        sizes = (self.shape[0],) if len(value) == 1 else self.shape
        for axis, size in zip(value, sizes, strict=True):
            if len(axis.values) != size:
                raise FieldError(attribute.name, f"axis {axis.name!r:.40} must have {size} values")

    @high.validator
    def _check_sizes(self, attribute: attrs.Attribute[Any], value: object) -> None:
        cells = math.prod(self.shape)
        if len(self.values) != cells:
            raise FieldError(
                "values", f"must have {cells} values (the shape), got {len(self.values)}"
            )
        for name in ("low", "high"):
            extra = getattr(self, name)
            if extra and (len(self.shape) != 2 or len(extra) != cells):
                raise FieldError(name, f"must be empty or have {cells} values (a 2-D map's)")


@attrs.frozen(kw_only=True)
class RunDataReply:
    """Answer to ``run_data``: the run's series, downsampled, bounded in bytes (§7.7)."""

    request_id: str | None = attrs.field(validator=_optional_text)
    """The request's id."""
    run_id: int = attrs.field(validator=_int_in(0, MAX_JSON_INT))
    """The database's run id."""
    name: str = attrs.field(default="", validator=_text())
    """The measurement's name."""
    completed: bool = attrs.field(default=True, validator=_flag)
    """False while the run is still being written (ask again for newer data)."""
    buckets: int = attrs.field(validator=_int_in(1, MAX_DATA_BUCKETS))
    """Buckets per trace used: fewer than asked when the byte bound needed it."""
    side: int = attrs.field(validator=_int_in(1, MAX_DATA_SIDE))
    """Most rows and columns per map used, likewise."""
    bytes: int = attrs.field(validator=_int_in(0, MAX_JSON_INT))
    """Size of the series' data as the helper encoded it, in bytes of JSON."""
    series: tuple[DataSeries, ...] = attrs.field()
    """Every plottable series (complex data gives magnitude and phase)."""

    @series.validator
    def _check_series(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, tuple) or not all(type(s) is DataSeries for s in value):
            raise FieldError(attribute.name, "must be an array of data series")
