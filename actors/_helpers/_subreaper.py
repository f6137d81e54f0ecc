"""Keep a helper's orphans in its tree: ``prctl(PR_SET_CHILD_SUBREAPER)`` (design §3.11).

Runs in the helper child, and only when the parent finds the helper's tree through
``/proc`` (``tree`` containment): an orphaned descendant then becomes the helper's child
instead of init's, so it stays findable while the helper lives. Stdlib only, like the
helper library; it costs about 1 ms (ctypes), which is why it is a module of its own.
"""

from __future__ import annotations

import sys

__all__ = ["become_subreaper"]

_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux); True if it worked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False
