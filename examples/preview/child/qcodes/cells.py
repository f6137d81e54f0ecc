"""Small pure helpers of the QCoDeS reader: probe answers, change tokens, run status and
the conversion of SQLite cells (design §7.2). No I/O here."""

from __future__ import annotations

import ast
import math
from typing import Any

__all__ = [
    "cell",
    "float_or_none",
    "last_line",
    "npy_size",
    "probe_answer",
    "revision",
    "row_id",
    "shortfall",
    "status",
    "str_or_none",
]

_MAX_TEXT = 2048


def probe_answer(
    data_version: int, run_ids: list[int], entries: list[tuple[int, int, int, int]]
) -> dict[str, Any]:
    # Fresh lists: a caller may change its answer without changing the next one.
    return {
        "data_version": data_version,
        "run_count": len(run_ids),
        "max_run_id": run_ids[-1] if run_ids else 0,
        "runs": [list(entry) for entry in entries],
    }


def revision(entry: list[Any]) -> str:
    """A per-run change token from a probe entry ``[run_id, max_row_id, completed, exc]``."""
    _, max_id, completed, has_exc = entry
    return f"rows={int(max_id)};completed={int(bool(completed))};exc={int(bool(has_exc))}"


def status(
    *,
    completed: bool,
    exception: object,
    rows: int,
    points: dict[str, int] | None,
    planned: dict[str, int],
) -> tuple[str, str]:
    """A run's status as QCoDeS records it, and why, in words (design §7.2).

    QCoDeS's ``is_completed`` decides: a completed run is never "interrupted" for having
    fewer points than its declared shape (a shape may be over-declared, and a writer may
    ``mark_completed()`` a partial sweep); the shortfall is only mentioned in the reason.

    Returns:
        ``("incomplete", ...)`` while ``is_completed`` is 0 (still being written, or its
        writer stopped); ``("interrupted", ...)`` for a completed run whose measurement
        ended with an exception (``measurement_exception`` set); ``("empty", ...)`` for a
        completed run with no results; ``("ok", ...)`` otherwise.
    """
    short = shortfall(points or {}, planned)
    if not completed:
        detail = f"; {short}" if short else (f"; {rows} rows so far" if rows else "")
        return "incomplete", f"not completed: still being written, or the writer stopped{detail}"
    if exception is not None:
        detail = f" ({short})" if short else ""
        return "interrupted", f"ended with an exception: {last_line(exception)}{detail}"
    if rows == 0:
        return "empty", "completed, no results were recorded"
    if short:
        return "ok", f"completed with {short}"
    return "ok", ""


def shortfall(points: dict[str, int], planned: dict[str, int]) -> str:
    for name, want in planned.items():
        have = points.get(name)
        if have is not None and have < want:
            return f"{have} of {want} planned points of {name}"
    return ""


def last_line(text: object) -> str | None:
    if text is None:
        return None
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "exception")[:_MAX_TEXT]


def npy_size(row: tuple[Any, ...] | None) -> int | None:
    """The number of values of the ``.npy`` BLOB in ``row[0]``, read from its header.

    None when the cell is not a ``.npy`` file QCoDeS writes (``\\x93NUMPY``, version
    1 to 3, a literal header dict with a ``shape`` tuple).
    """
    blob = row[0] if row else None
    if not isinstance(blob, bytes) or not blob.startswith(b"\x93NUMPY") or len(blob) < 10:
        return None
    major = blob[6]
    width = 2 if major == 1 else 4
    length = int.from_bytes(blob[8 : 8 + width], "little")
    try:
        header = ast.literal_eval(blob[8 + width : 8 + width + length].decode("latin-1"))
        shape = header["shape"]
    except (ValueError, SyntaxError, KeyError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape):
        return None
    return math.prod(shape)


def row_id(value: object) -> int | None:
    """A results table's ``max(id)`` as an int; None when it is not a number.

    QCoDeS declares ``id INTEGER PRIMARY KEY``, but a table rebuilt by another tool may
    hold text or BLOB ids; NULL (an empty table) is 0.
    """
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return None


def cell(value: object, max_text: int = _MAX_TEXT) -> Any:
    """A cell of the ``runs`` table as strict JSON: any column may hold any SQLite type.

    A BLOB becomes ``"<n bytes>"``, a non-finite REAL None, text longer than
    ``max_text`` is cut.
    """
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str) and len(value) > max_text:
        return value[:max_text] + "…"
    return value


def str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def float_or_none(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
