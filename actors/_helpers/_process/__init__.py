"""One helper incarnation, parent side (design §3.2 to §3.11, §3.17): its spec and
deadlines, its start-up handshake (spawned, or forked from the pool's zygote), its
pipes, the cancel ladder, the reaper, its stderr, how its process tree is contained,
and what each outcome is called.

The façade other rooms (and the pool) import; everything else here is private.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._containment import CONTAINMENT_MODES as CONTAINMENT_MODES
from ._containment import available_mode as available_mode
from ._process import HelperProcess as HelperProcess
from ._spec import BOOTSTRAP as BOOTSTRAP
from ._spec import START_METHODS as START_METHODS
from ._spec import HelperSnapshot as HelperSnapshot
from ._spec import HelperSpec as HelperSpec
from ._spec import HelperTimeouts as HelperTimeouts
from ._zygote import Zygote as Zygote
from ._zygote import start_method as start_method

if TYPE_CHECKING:
    from ._process import ProgressCallback as ProgressCallback

__all__ = [
    "BOOTSTRAP",
    "CONTAINMENT_MODES",
    "HelperProcess",
    "HelperSnapshot",
    "HelperSpec",
    "HelperTimeouts",
    "START_METHODS",
    "Zygote",
    "available_mode",
    "start_method",
]
