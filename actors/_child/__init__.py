"""Everything that runs in the helper child (design §3.9): the serve loop, the frame
stream, ``run_sync`` calls, the fault modes and the subreaper.

Stdlib-only, like every module of this room: the child bootstrap loads ``actors`` as a
bare package, so importing this façade never pulls in trio, attrs or cattrs. It names
what the room offers the others: the public helper library (re-exported by
:mod:`actors.helper`) and what the parent side reads of the child's (the ``run_sync``
operation name, the fault modes, :func:`is_subreaper`) and the fork server's loop,
``serve_forks``, that a pool's zygote bootstrap runs. The call machinery (``_call``,
pickle), the fault modes (``_faults``) and the fork server (``_zygote``) load only when
a job or a zygote needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.envelope import Blob as Blob

from ._serve import CALL_OPERATION as CALL_OPERATION
from ._serve import FAULT_ENV as FAULT_ENV
from ._serve import FAULT_EXIT_CODE as FAULT_EXIT_CODE
from ._serve import FAULT_MODES as FAULT_MODES
from ._serve import HEAVY_MODULES as HEAVY_MODULES
from ._serve import PROGRESS_INTERVAL as PROGRESS_INTERVAL
from ._serve import CancelRequested as CancelRequested
from ._serve import JobContext as JobContext
from ._serve import JobError as JobError
from ._serve import in_helper_child as in_helper_child
from ._serve import serve as serve
from ._serve import serve_calls as serve_calls
from ._subreaper import is_subreaper as is_subreaper

if TYPE_CHECKING:
    from ._zygote import serve_forks as serve_forks


def __getattr__(name: str) -> object:
    # The fork server loads only in a zygote: a spawned helper never pays its import.
    if name == "serve_forks":
        from ._zygote import serve_forks

        return serve_forks
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CALL_OPERATION",
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
    "is_subreaper",
    "serve",
    "serve_calls",
    "serve_forks",
]
