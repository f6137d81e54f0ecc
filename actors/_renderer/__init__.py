"""The renderer's façade: what the other rooms (and :mod:`actors`) use of it (design §5).

Other rooms import these names from here, never from a ``_module`` of this room
(contributing §A.3).
"""

from __future__ import annotations

from ._config import CancelRender as CancelRender
from ._config import GetRendererStatistics as GetRendererStatistics
from ._config import PayloadCheck as PayloadCheck
from ._config import Render as Render
from ._config import Rendered as Rendered
from ._config import RendererConfig as RendererConfig
from ._config import RendererStatistics as RendererStatistics
from ._config import RenderFn as RenderFn
from ._job import validate_payload as validate_payload
from ._renderer import Renderer as Renderer

__all__ = [
    "CancelRender",
    "GetRendererStatistics",
    "PayloadCheck",
    "Render",
    "RenderFn",
    "Rendered",
    "Renderer",
    "RendererConfig",
    "RendererStatistics",
    "validate_payload",
]
