"""The errors the QCoDeS reader raises, importable inside a helper child (design §3.9).

They are :class:`actors.errors.SourceUnreadable` and :class:`actors.errors.UnknownRun`
themselves: ``actors.errors`` imports only the standard library (``ErrorRecord``, which
needs attrs, loads on first use), so the helper child can raise them directly. The
helper's serve loop sends ``code``/``category`` as an error record, and the parent's
``error_from_record`` turns it back into the same class.
"""

from __future__ import annotations

from actors.errors import SourceUnreadable, UnknownRun

__all__ = ["SourceUnreadable", "UnknownRun"]
