"""The errors the QCoDeS reader raises, importable inside a helper child (SPEC §3.9).

In the parent process these are :class:`actors.errors.SourceError` and
:class:`actors.errors.UnknownRun` themselves. Inside a helper child, ``protocol.errors``
is the stdlib-only stand-in loaded by the child bootstrap (``actors/_helper_errors.py``),
and ``actors.errors`` cannot be imported (it needs attrs); there the same names are
subclasses of the stand-in ``ActorError`` with the same ``code`` and ``category``. The
helper's serve loop sends ``code``/``category`` as an error record, and the parent's
``error_from_record`` turns it back into the real class, so callers see one type.
"""

from __future__ import annotations

import protocol.errors as _protocol_errors

__all__ = ["SourceError", "UnknownRun"]

if getattr(_protocol_errors, "LIGHT_STAND_IN", False):  # inside a helper child

    class SourceError(_protocol_errors.ActorError):
        """A data source could not be read (child-side twin of the actors error)."""

        code = "source_unreadable"
        category = "permanent"

    class UnknownRun(_protocol_errors.ActorError):
        """No run has the given id (child-side twin of the actors error)."""

        code = "unknown_run"
        category = "permanent"

else:
    from actors.errors import SourceError, UnknownRun
