"""The image kinds and the names of the drawings, without the drawing code (design §5.4).

The server process needs only these (sizes, the renderer version in every cache key,
the MIME type and the PNG text chunk of the report); the drawing code, numpy and Pillow
are loaded where the drawing is done: in the helpers, and in the server only when it
first draws something itself (a live image, a ``draw`` request).
:mod:`examples.preview.child.drawing.render` re-exports each of them.
"""

from __future__ import annotations

from typing import Final

__all__ = ["KINDS", "MIME", "RENDERER_VERSION", "REPORT_KEY"]

#: Default size (width, height) in pixels of each kind.
KINDS: Final[dict[str, tuple[int, int]]] = {"thumbnail": (160, 120), "preview": (640, 480)}
#: Part of every cache key (design §4.10): bump when the pictures change.
RENDERER_VERSION: Final = "2"
MIME: Final = "image/png"
#: The PNG text chunk holding the drawing's report (JSON).
REPORT_KEY: Final = "preview-report"
