"""Stars and notes on runs, kept beside the database, never in it (design §7.2).

A user stars a run or writes a short note on it (``annotate``); the preview server keeps
them in ``<file>.preview-notes.json`` beside the QCoDeS file, which it only ever opens
read-only. Each run is keyed by its GUID (the same run in a copy of the file keeps its
star), with its run id for a person reading the file::

    {"version": 1, "runs": {"<guid>": {"run_id": 4, "starred": true, "note": "best"}}}

The file is read once (as the app starts, or at the first ``list_runs`` if that
comes first) and written whole after each change,
through a temporary file and a rename, so a crash never leaves half a file. File I/O
runs in a worker thread (``trio.to_thread``).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from actors.errors import ActorError

if TYPE_CHECKING:
    from .runs import RunTable

__all__ = ["SUFFIX", "Annotations", "NotesUnwritable", "notes_path"]

LOGGER = logging.getLogger("examples.preview.annotations")

#: Appended to the database's file name to name the notes file beside it.
SUFFIX = ".preview-notes.json"


class NotesUnwritable(ActorError):
    """The notes file beside the database cannot be written (a read-only folder, a full
    disk). Raised by :meth:`Annotations.set`; the star or note is not kept. Unlike
    ``source_unreadable``, the database itself is fine."""

    code = "notes_unwritable"
    category = "transient"


def notes_path(db: Path) -> Path:
    """The notes file of the database ``db``: ``<db>.preview-notes.json`` beside it."""
    return db.with_name(db.name + SUFFIX)


class Annotations:
    """The stars and notes of one database's runs.

    Args:
        db: The database file's path; the notes file is :func:`notes_path` of it.
    """

    def __init__(self, db: str | Path) -> None:
        self.path = notes_path(Path(db))
        self._runs: dict[str, dict[str, Any]] | None = None  # None until read
        self._lock = trio.Lock()  # one write at a time: the newest state wins

    async def load(self) -> None:
        """Read the file once (a missing or unreadable file: no notes, logged)."""
        if self._runs is None:
            runs = await trio.to_thread.run_sync(self._read)
            if self._runs is None:  # a concurrent load kept, and maybe changed, its own
                self._runs = runs

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            found = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError) as exc:  # Recursion: nested too deep
            LOGGER.warning("notes file %s not read: %s", self.path, exc,
                           extra={"path": str(self.path)})  # fmt: skip
            return {}
        runs = found.get("runs") if isinstance(found, dict) else None
        if not isinstance(runs, dict):
            return {}
        # A hand-edited file may hold anything: only a bool star and a str note are kept.
        return {
            str(guid): {
                key: value
                for key, value in entry.items()
                if (key, type(value)) in (("starred", bool), ("note", str), ("run_id", int))
            }
            for guid, entry in runs.items()
            if isinstance(entry, dict)
        }

    def apply(self, table: RunTable) -> bool:
        """Set each run's ``starred`` and ``note`` from the file; True if any changed."""
        if self._runs is None:
            return False
        changed = False
        for record in table.runs.values():
            entry = self._runs.get(record.guid, {})
            starred = entry.get("starred") is True
            note = str(entry.get("note") or "")
            if (record.starred, record.note) != (starred, note):
                record.starred, record.note = starred, note
                changed = True
        return changed

    async def set(
        self, table: RunTable, run_id: int, *, starred: bool | None, note: str | None
    ) -> None:
        """Star or unstar run ``run_id`` and set its note (None: as it is), then write
        the file.

        Raises:
            NotesUnwritable: (``notes_unwritable``) the file could not be written; the
                change is not kept.
        """
        await self.load()
        assert self._runs is not None
        record = table.runs[run_id]
        async with self._lock:
            before = dict(self._runs)
            entry = dict(self._runs.get(record.guid, {}))
            entry["run_id"] = run_id
            if starred is not None:
                entry["starred"] = starred
            if note is not None:
                entry["note"] = note
            if entry.get("starred") or entry.get("note"):
                self._runs[record.guid] = entry
            else:
                self._runs.pop(record.guid, None)
            text = json.dumps({"version": 1, "runs": self._runs}, indent=1, ensure_ascii=False)
            try:
                await trio.to_thread.run_sync(self._write, text)
            except OSError as exc:
                self._runs = before
                raise NotesUnwritable(
                    f"cannot write {self.path.name}: {exc.strerror or exc}"
                ) from None
        starred_now = bool(entry.get("starred", False))
        LOGGER.info(
            "run %d: starred %s, note of %d characters", run_id, starred_now,
            len(entry.get("note", "")),
            extra={"run_id": run_id, "starred": starred_now, "path": str(self.path)},
        )  # fmt: skip

    def _write(self, text: str) -> None:
        partial = self.path.with_name(self.path.name + ".tmp")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, self.path)
