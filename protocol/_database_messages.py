"""The preview server's database messages: listing and switching databases (design §7.5).

Defined here and re-exported by :mod:`protocol.messages`, which adds them to its unions.
"""

from __future__ import annotations

from typing import Final

import attrs

from ._fields import (
    _count,
    _items_of,
    _one_of,
    _optional,
    _reply_id,
    _request_id,
    _text,
)

__all__ = [
    "DATABASE_STATES",
    "ListDatabases",
    "UseDatabase",
    "DatabaseInfo",
    "DatabaseList",
    "DatabaseAdded",
    "DatabaseRemoved",
]


# --------------------------------------------------------------------------------------
# Client → server requests
# --------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ListDatabases:
    """Ask for the preview server's databases (design §7.5). Answered by ``database_list``."""

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""


@attrs.frozen(kw_only=True)
class UseDatabase:
    """Switch this connection to another database (design §7.5). Answered by ``ok``.

    The run requests (``list_runs``, ``select``, ``draw``, ...) then concern that
    database, and the image notices of the one used before stop; ask ``list_runs``
    next. A database not started yet is started first (its helpers open it).
    """

    request_id: str = _request_id()
    """Client-chosen id, 1..128 characters."""
    db: str = attrs.field(validator=_text(64))
    """The database's id, from ``database_list``."""


# --------------------------------------------------------------------------------------
# Server → client messages
# --------------------------------------------------------------------------------------


#: The states of a database of the preview server (design §7.5).
DATABASE_STATES: Final = ("ready", "idle", "starting", "error")


@attrs.frozen(kw_only=True)
class DatabaseInfo:
    """One database of the preview server (design §7.5)."""

    db: str = attrs.field(validator=_text(64))
    """Its id: stable across restarts and safe in URLs (never the file's path)."""
    name: str = attrs.field(validator=_text(255))
    """The file's name, for people."""
    state: str = attrs.field(validator=_one_of(*DATABASE_STATES))
    """``ready`` (its helpers run), ``idle`` (readable, started on first use),
    ``starting``, or ``error`` (unreadable, gone, or its helpers failed: see ``error``)."""
    error: str | None = attrs.field(default=None, validator=_optional(_text()))
    """Why it is in ``error``, in words; ``None`` otherwise."""
    runs: int | None = attrs.field(default=None, validator=_optional(_count))
    """Its run count when it was last checked; ``None`` if unknown."""


@attrs.frozen(kw_only=True)
class DatabaseList:
    """Answer to ``list_databases`` (design §7.5)."""

    request_id: str | None = _reply_id()
    """The request's id."""
    databases: tuple[DatabaseInfo, ...] = attrs.field(validator=_items_of(DatabaseInfo))
    """Every database, in the order they were found."""
    current: str | None = attrs.field(default=None, validator=_optional(_text(64)))
    """The database this connection uses, or ``None`` if there is none."""


@attrs.frozen(kw_only=True)
class DatabaseAdded:
    """Pushed when a database is found or its entry changes (design §7.5).

    It replaces any earlier entry with the same ``db``.
    """

    database: DatabaseInfo = attrs.field(validator=attrs.validators.instance_of(DatabaseInfo))
    """The database's entry."""


@attrs.frozen(kw_only=True)
class DatabaseRemoved:
    """Pushed when a database's file is gone from a watched folder (design §7.5)."""

    db: str = attrs.field(validator=_text(64))
    """The id of the database no longer served."""
