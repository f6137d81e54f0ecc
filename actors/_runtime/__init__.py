"""The runtime's façade: the four system actors started and stopped as one (design §1.7).

Other rooms (and :mod:`actors`) import these names from here, never from a
``_module`` of this room (contributing §A.3).
"""

from __future__ import annotations

from ._runtime import Runtime as Runtime
from ._runtime import RuntimeConfig as RuntimeConfig
from ._runtime import open_runtime as open_runtime
from ._tree import LiveChild as LiveChild

__all__ = ["LiveChild", "Runtime", "RuntimeConfig", "open_runtime"]
