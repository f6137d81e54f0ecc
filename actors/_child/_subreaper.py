"""Keep a helper's orphans in its tree: ``prctl(PR_SET_CHILD_SUBREAPER)`` (design §3.11).

Runs in the helper child, and only when the parent finds the helper's tree through
``/proc`` (``tree`` containment): an orphaned descendant then becomes the helper's child
instead of init's, so it stays findable while the helper lives. Stdlib only, like the
helper library; it costs about 1 ms (ctypes), which is why it is a module of its own.
"""

from __future__ import annotations

import sys

__all__ = ["become_subreaper", "is_subreaper"]

_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_PR_GET_CHILD_SUBREAPER = 37


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


def is_subreaper() -> bool:
    """True if this process is a child subreaper (Linux): orphans of its descendants
    become its children. The parent asks it when it looks for a dead helper's orphans."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        flag = ctypes.c_int(0)
        ok = libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    return ok and flag.value != 0
