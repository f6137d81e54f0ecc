"""Every value read back from the ledger is checked here before the log uses it (§6.11).

A ledger row is data from disk: a flipped bit, a hand edit or another program can make
any cell of it something the log never wrote. The decoders below turn a row into what
the log works with, or raise :class:`~actors.errors.LedgerCorrupt` naming the table, the
row's key and the column, never a bare ``ValueError`` or ``KeyError``: the request that
read the row gets ``ledger_corrupt`` and everything else keeps working.

:func:`table_checks` are the same rules as SQL, run over whole tables at boot through
the read-only connection (``json_valid`` is SQLite's; where SQLite lacks it, the JSON
rules are left to the decoders at read time).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import attrs

from protocol.messages import FieldError

from ...errors import LedgerCorrupt
from .._types import RUN_STATES, Event, Receipt

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "DECODERS",
    "RowCheck",
    "decode_event",
    "decode_request",
    "decode_revision",
    "decode_run",
    "table_checks",
]

_RECEIPT_TYPES: dict[str, tuple[type, ...]] = {
    "admitted": (bool,),
    "run_id": (int, type(None)),
    "request_id": (str,),
    "snapshot_id": (str, type(None)),
    "revision": (int,),
    "event_cursor": (int,),
    "coalesced": (bool,),
    "code": (str, type(None)),
    "retryable": (bool, type(None)),
    "depth": (int, type(None)),
    "bound": (int, type(None)),
    "retry_after": (int, float, type(None)),
}
_RECEIPT_REQUIRED = frozenset(
    field.name for field in attrs.fields(Receipt) if field.default is attrs.NOTHING
)


class RowCheck:
    """Checks of one row's cells; each failure names ledger, table, key and column.

    Args:
        path: The ledger file.
        table: The table read.
        key_name: The name of its key column (``run_id``, ``seq``, ``request_id``).
        key: The row's key.
    """

    __slots__ = ("_key", "_key_name", "_path", "_table")

    def __init__(self, path: str, table: str, key_name: str, key: object) -> None:
        self._path = path
        self._table = table
        self._key_name = key_name
        self._key = key

    def corrupt(self, column: str | None, what: str) -> LedgerCorrupt:
        """The error for a bad cell (``column``) or a bad or missing row (None)."""
        where = f"table {self._table}, {self._key_name} {self._key!r}"
        if column is not None:
            where += f", column {column}"
        key = self._key if isinstance(self._key, int | str) else repr(self._key)[:100]
        return LedgerCorrupt(
            f"ledger {self._path!r}: {where}: {what}",
            table=self._table,
            key=key,
            column=column,
        )

    def integer(self, column: str, value: object, minimum: int = 0) -> int:
        """An int (never a bool) >= ``minimum``."""
        if type(value) is not int or value < minimum:
            raise self.corrupt(column, f"{_show(value)} is not an integer >= {minimum}")
        return value

    def text(self, column: str, value: object, *, nullable: bool = False) -> str | None:
        """A non-empty str (or None if ``nullable``)."""
        if value is None and nullable:
            return None
        if type(value) is not str or not value:
            raise self.corrupt(column, f"{_show(value)} is not a non-empty text")
        return value

    def json(self, column: str, value: object, *, nullable: bool = False) -> Any:
        """The JSON value of a text cell (or None if ``nullable`` and NULL)."""
        if value is None and nullable:
            return None
        if type(value) is not str:
            raise self.corrupt(column, f"{_show(value)} is not JSON text")
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            raise self.corrupt(column, f"{_show(value)} is not valid JSON") from None

    def json_object(self, column: str, value: object, *, nullable: bool = False) -> Any:
        """A JSON object (a dict), or None if ``nullable`` and NULL."""
        decoded = self.json(column, value, nullable=nullable)
        if decoded is not None and not isinstance(decoded, dict):
            raise self.corrupt(column, f"{_show(value)} is not a JSON object")
        if decoded is None and not nullable:
            raise self.corrupt(column, "is null")
        return decoded


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def decode_run(path: str, row: tuple[Any, ...]) -> dict[str, Any]:
    """The fields of a ``Run`` from a ``runs`` row (``RUN_COLUMNS`` order), checked.

    Raises:
        LedgerCorrupt: (``ledger_corrupt``) a cell is not what the log writes.
    """
    (run_id, request_id, operation, arguments, revision, snapshot_id, state) = row[:7]
    (verdict, result, error, cancelled_by, progress, interruptions, finished_at) = row[7:]
    check = RowCheck(path, "runs", "run_id", run_id)
    check.integer("run_id", run_id, 1)
    if state not in RUN_STATES:
        raise check.corrupt("state", f"{_show(state)} is not a run state")
    if progress is not None and (
        type(progress) not in (int, float) or not math.isfinite(progress) or not 0 <= progress <= 1
    ):
        raise check.corrupt("progress", f"{_show(progress)} is not a fraction in [0, 1]")
    if finished_at is not None and (
        type(finished_at) not in (int, float) or not math.isfinite(finished_at) or finished_at < 0
    ):
        raise check.corrupt("finished_at", f"{_show(finished_at)} is not a time >= 0")
    error_value = check.json_object("error", error, nullable=True)
    if error_value is not None and not (
        set(error_value) == {"category", "code", "message"}
        and all(isinstance(v, str) for v in error_value.values())
    ):
        raise check.corrupt("error", f"{_show(error)} is not an error record")
    return {
        "run_id": run_id,
        "request_id": check.text("request_id", request_id),
        "operation": check.text("operation", operation),
        "arguments": check.json_object("arguments", arguments),
        "arguments_json": arguments,
        "revision": check.integer("revision", revision),
        "snapshot_id": check.text("snapshot_id", snapshot_id),
        "state": state,
        "verdict": check.text("verdict", verdict, nullable=True),
        "result": check.json("result", result, nullable=True),
        "result_json": result,
        "error": error_value,
        "error_json": error,
        "cancelled_by": check.text("cancelled_by", cancelled_by, nullable=True),
        "progress": None if progress is None else float(progress),
        "interruptions": check.integer("interruptions", interruptions),
        "finished_at": None if finished_at is None else float(finished_at),
    }


def decode_event(path: str, row: tuple[Any, ...]) -> Event:
    """An :class:`Event` from an ``events`` row ``(seq, kind, run_id, data)``, checked.

    Raises:
        LedgerCorrupt: (``ledger_corrupt``) a cell is not what the log writes.
    """
    seq, kind, run_id, data = row
    check = RowCheck(path, "events", "seq", seq)
    check.integer("seq", seq, 1)
    if run_id is not None:
        check.integer("run_id", run_id, 1)
    text = check.text("kind", kind)
    assert text is not None
    return Event(seq=seq, kind=text, run_id=run_id, data=check.json_object("data", data))


def decode_request(path: str, row: tuple[Any, ...]) -> tuple[str, Receipt, str | None, str | None]:
    """``(content, receipt, actor, cancelled_by)`` from a ``requests`` row, checked.

    The row is ``(request_id, content, run_id, receipt, actor, cancelled_by)``; the
    stored receipt must be an admitted one for that request and run.

    Raises:
        LedgerCorrupt: (``ledger_corrupt``) a cell is not what the log writes.
    """
    request_id, content, run_id, receipt_json, actor, cancelled_by = row
    check = RowCheck(path, "requests", "request_id", request_id)
    check.text("request_id", request_id)
    text = check.text("content", content)
    assert text is not None
    check.integer("run_id", run_id, 1)
    fields = check.json_object("receipt", receipt_json)
    problem = _receipt_problem(fields, request_id, run_id)
    if problem:
        raise check.corrupt("receipt", problem)
    try:
        receipt = Receipt(**fields)
    except FieldError as exc:  # a value of the right type out of range, e.g. revision -1
        raise check.corrupt("receipt", str(exc)) from None
    return (
        text,
        receipt,
        check.text("actor", actor, nullable=True),
        check.text("cancelled_by", cancelled_by, nullable=True),
    )


def _receipt_problem(fields: dict[str, Any], request_id: object, run_id: object) -> str | None:
    unknown = sorted(set(fields) - set(_RECEIPT_TYPES))
    if unknown:
        return f"unknown receipt fields {unknown}"
    missing = sorted(_RECEIPT_REQUIRED - set(fields))
    if missing:
        return f"receipt fields {missing} are missing"
    for name, value in fields.items():
        types = _RECEIPT_TYPES[name]
        if type(value) not in types:
            return f"receipt field {name} is {_show(value)}"
    if fields["admitted"] is not True or fields["run_id"] != run_id:
        return f"the receipt is not the admission of run {run_id!r}"
    if fields["request_id"] != request_id:
        return f"the receipt is for request {_show(fields['request_id'])}"
    return None


def decode_revision(path: str, value: object) -> int:
    """The ``revision`` meta value: the text of an int >= 0.

    Raises:
        LedgerCorrupt: (``ledger_corrupt``) anything else.
    """
    check = RowCheck(path, "meta", "key", "revision")
    if type(value) is str and value.isascii() and value.isdigit() and len(value) < 20:
        return int(value)
    raise check.corrupt("value", f"{_show(value)} is not a revision number")


#: ``(table, key column, SQL yielding (key, bad column) of the first bad row)``.
_CHECKS: tuple[tuple[str, str, str], ...] = (
    (
        "runs",
        "run_id",
        """SELECT run_id, CASE
            WHEN typeof(run_id) != 'integer' OR run_id < 1 THEN 'run_id'
            WHEN typeof(request_id) != 'text' OR request_id = '' THEN 'request_id'
            WHEN typeof(operation) != 'text' OR operation = '' THEN 'operation'
            WHEN typeof(arguments) != 'text' THEN 'arguments'
            {json_arguments}
            WHEN typeof(revision) != 'integer' OR revision < 0 THEN 'revision'
            WHEN typeof(snapshot_id) != 'text' OR snapshot_id = '' THEN 'snapshot_id'
            WHEN state NOT IN ('queued', 'running', 'finished', 'cancelled', 'held')
                THEN 'state'
            WHEN verdict IS NOT NULL AND typeof(verdict) != 'text' THEN 'verdict'
            WHEN result IS NOT NULL AND typeof(result) != 'text' THEN 'result'
            {json_result}
            WHEN error IS NOT NULL AND typeof(error) != 'text' THEN 'error'
            {json_error}
            WHEN cancelled_by IS NOT NULL AND typeof(cancelled_by) != 'text'
                THEN 'cancelled_by'
            WHEN progress IS NOT NULL AND (typeof(progress) NOT IN ('real', 'integer')
                OR progress < 0 OR progress > 1) THEN 'progress'
            WHEN typeof(interruptions) != 'integer' OR interruptions < 0
                THEN 'interruptions'
            {finished_rule}
            END AS bad FROM runs WHERE bad IS NOT NULL LIMIT 1""",
    ),
    (
        "events",
        "seq",
        """SELECT seq, CASE
            WHEN typeof(seq) != 'integer' OR seq < 1 THEN 'seq'
            WHEN typeof(kind) != 'text' OR kind = '' THEN 'kind'
            WHEN run_id IS NOT NULL AND (typeof(run_id) != 'integer' OR run_id < 1)
                THEN 'run_id'
            WHEN typeof(data) != 'text' THEN 'data'
            {json_data}
            END AS bad FROM events WHERE bad IS NOT NULL LIMIT 1""",
    ),
    (
        "requests",
        "request_id",
        """SELECT request_id, CASE
            WHEN typeof(request_id) != 'text' OR request_id = '' THEN 'request_id'
            WHEN typeof(content) != 'text' OR content = '' THEN 'content'
            WHEN typeof(run_id) != 'integer' OR run_id < 1 THEN 'run_id'
            WHEN typeof(receipt) != 'text' THEN 'receipt'
            {json_receipt}
            WHEN typeof(position) != 'integer' THEN 'position'
            {waiter_rules}
            END AS bad FROM requests WHERE bad IS NOT NULL LIMIT 1""",
    ),
)


def _json_rule(column: str, *, nullable: bool = False, obj: bool = True) -> str:
    guard = f"{column} IS NOT NULL AND " if nullable else ""
    rule = f"WHEN {guard}json_valid({column}) = 0 THEN '{column}'"
    if obj:
        rule += f" WHEN {guard}substr(ltrim({column}), 1, 1) != '{{' THEN '{column}'"
    return rule


def table_checks(
    *, with_json: bool, waiters: bool, finished_at: bool = True
) -> list[tuple[str, str, str]]:
    """The boot checks as ``(table, key column, SQL)``; see the module docstring.

    Args:
        with_json: True where SQLite has ``json_valid``.
        waiters: True if ``requests`` has the ``actor`` and ``cancelled_by`` columns
            (schema version 2).
        finished_at: True if ``runs`` has the ``finished_at`` column (version 3).
    """
    rules = {
        "json_arguments": _json_rule("arguments"),
        "json_result": _json_rule("result", nullable=True, obj=False),
        "json_error": _json_rule("error", nullable=True),
        "json_data": _json_rule("data"),
        "json_receipt": _json_rule("receipt"),
    }
    if not with_json:
        rules = dict.fromkeys(rules, "")
    rules["waiter_rules"] = (
        """WHEN actor IS NOT NULL AND typeof(actor) != 'text' THEN 'actor'
            WHEN cancelled_by IS NOT NULL AND typeof(cancelled_by) != 'text'
                THEN 'cancelled_by'"""
        if waiters
        else ""
    )
    rules["finished_rule"] = (
        """WHEN finished_at IS NOT NULL AND (typeof(finished_at) NOT IN ('real', 'integer')
                OR finished_at < 0) THEN 'finished_at'"""
        if finished_at
        else ""
    )
    return [(table, key, sql.format(**rules)) for table, key, sql in _CHECKS]


#: Decoders by table, for callers that pick one by name.
DECODERS: dict[str, Callable[[str, tuple[Any, ...]], object]] = {
    "runs": decode_run,
    "events": decode_event,
    "requests": decode_request,
}
