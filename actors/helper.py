"""The helper side of helper processes: a serve loop for the child (design §3.9).

This module, the public face of ``actors._child``, runs **inside the helper child
process**. It imports only a few C-level
standard modules and :mod:`protocol.framing` / :mod:`protocol.envelope` /
:mod:`protocol.errors` (never trio, attrs, cattrs, nor even ``typing``), so a helper is
ready in little more than the time a bare interpreter takes to start.

A helper entry point registers handlers and calls :func:`serve`::

    from actors.helper import JobContext, JobError, serve

    def echo(payload, ctx: JobContext):
        return payload

    def count(payload, ctx: JobContext):
        total = 0
        for i in range(payload["n"]):
            ctx.check_cancel()          # raises CancelRequested once the parent cancels
            ctx.progress(i / payload["n"], note="counting")   # rate-limited
            total += i
        return total

    def main():
        serve({"echo": echo, "count": count}, on_startup=lambda options: {"db": "x.db"})

and the parent names it ``HelperSpec(entry="my_pkg.my_helper:main")``.

Bytes travel raw, without base64 (design §2.3): a handler that returns ``bytes`` (or a
``bytearray`` or ``memoryview``) sends them as the reply's binary part, and one that
returns ``Blob(head={"width": 64}, data=png)`` sends a JSON head beside them
(``Blob`` is :class:`protocol.envelope.Blob`, re-exported here). The parent's
``run_job`` returns a ``Blob`` for either, its ``data`` a read-only ``memoryview`` of
the frame it read (no copy). ``ctx.progress(f, note, data=...)`` and
``JobError(..., data=...)`` carry bytes the same way::

    def thumbnail(payload, ctx: JobContext):
        png = draw(payload["run_id"])
        return Blob(head={"run_id": payload["run_id"]}, data=png)

Every helper also serves the parent's ``run_sync``/``map`` calls of any importable
function (the operation ``actors.call``, design §3.14); :func:`serve_calls` is an entry
with no handlers of its own.

The wire protocol (frames of :mod:`protocol.framing`, envelopes of
:mod:`protocol.envelope`): the parent sends ``startup`` (payload ``options``, ``fault``,
``max_request``, ``max_reply``), the helper answers ``ready`` with its pid, its handler
names, what ``on_startup`` returned, and which heavy modules it has loaded. Then, one at a
time, ``job`` frames, each answered by zero or more ``progress`` frames and then one
``reply`` with status ``ok``, ``error`` or ``cancelled``. A ``cancel`` frame for the
running job's generation makes :meth:`JobContext.cancelled` true. ``shutdown`` or end of
input ends the loop (exit 0).

Handlers are plain functions ``fn(payload, ctx)``; they run in the main thread. There is
no reader thread: :meth:`JobContext.cancelled` polls the input pipe without blocking, so a
handler that checks it notices a cancel frame within one check. A handler that never
checks is stopped by the parent's escalation (SIGTERM, then SIGKILL, design §3.5).

``stdout`` belongs to the frame stream, so the loop moves it aside first: the frames use a
private duplicate of file descriptor 1, and fd 1 (and ``sys.stdout``) then point at
stderr, so a ``print`` in a handler, or a grandchild writing to its stdout, cannot corrupt
a frame. Likewise fd 0 is replaced by ``/dev/null`` so a grandchild cannot steal input.

Fault modes (design §3.9) for tests are chosen by the startup frame's ``fault`` (set by
``HelperSpec.fault``) or the ``ACTORS_HELPER_FAULT`` environment variable; see
:data:`FAULT_MODES`.
"""

from __future__ import annotations

from . import _child
from ._child import Blob as Blob
from ._child import CancelRequested as CancelRequested
from ._child import JobContext as JobContext
from ._child import JobError as JobError
from ._child import in_helper_child as in_helper_child
from ._child import serve as serve
from ._child import serve_calls as serve_calls

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the child ~3 ms
if TYPE_CHECKING:
    from typing import Final

#: Environment variable that selects a fault mode when the startup frame names none.
FAULT_ENV: Final = _child.FAULT_ENV
#: Exit status of a helper that crashes on purpose (fault ``crash_before_reply``).
FAULT_EXIT_CODE: Final = _child.FAULT_EXIT_CODE
#: Fault modes of design §3.9, for tests:
#:
#: * ``hang_startup``: never answer the startup frame;
#: * ``crash_before_reply``: exit with :data:`FAULT_EXIT_CODE` instead of replying;
#: * ``malformed_reply``: reply with a frame that is not JSON;
#: * ``oversized_reply``: declare a reply one byte over the limit, then hang;
#: * ``stale_generation`` / ``stale_session`` / ``wrong_version``: a reply whose
#:   generation is the previous one / whose session is another / whose version is wrong;
#: * ``stale_progress``: before the reply, a progress frame for the previous generation;
#: * ``partial_frame``: send half a reply frame, then hang;
#: * ``ignore_sigterm``: ignore SIGTERM (jobs run normally);
#: * ``grandchild_ignores_sigterm``: at startup, start a grandchild (in the helper's
#:   process group) that ignores SIGTERM; the ready info has its ``grandchild_pid``;
#: * ``exit_at_startup``: write a line to stderr, then exit with
#:   :data:`FAULT_EXIT_CODE` instead of answering the startup frame;
#: * ``bad_ready``: answer the startup frame with a ``reply`` frame, then hang.
FAULT_MODES: Final = _child.FAULT_MODES
#: Modules a helper child should not load; the ready frame reports those it has.
HEAVY_MODULES: Final = _child.HEAVY_MODULES
#: Least time between two progress frames of one job, in seconds (monotonic clock);
#: :meth:`JobContext.progress` drops a report that comes sooner, unless it is 1.0.
PROGRESS_INTERVAL: Final = _child.PROGRESS_INTERVAL

__all__ = [
    "FAULT_ENV",
    "FAULT_EXIT_CODE",
    "FAULT_MODES",
    "HEAVY_MODULES",
    "PROGRESS_INTERVAL",
    "Blob",
    "CancelRequested",
    "JobContext",
    "JobError",
    "in_helper_child",
    "serve",
    "serve_calls",
]
