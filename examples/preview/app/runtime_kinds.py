"""What the preview server asks of the runtime: its kinds of work and its payloads.

The scheduler's declaration (design §4.11): ``metadata`` reads a run in a helper
process (progressive while the run is still being written, fenced when a helper
restarts); ``thumbnail`` and ``preview`` draw it once its metadata is conclusive (in
the helper processes, design §5.4). Previews go to the payload cache; thumbnails do
not: the read of a finished run draws its thumbnail anyway (the read itself is never
cached), so a cached thumbnail would save nothing and cost two cache hops per run. The
renderer's settings of an embedding that draws in its renderer
(:mod:`examples.preview.cli.embed`) check that every payload it draws is a PNG (design
§5.1); the preview server draws nothing itself.
"""

from __future__ import annotations

from typing import Any, Final

from actors import Kind

from ..child.drawing.image_kinds import MIME
from ..child.drawing.png import MIN_PNG_BYTES, check_png

__all__ = ["PREVIEW_KINDS", "PNG_PAYLOADS"]

PREVIEW_KINDS: Final = (
    Kind(name="metadata", helper=True, progressive=True),
    Kind(name="thumbnail", needs=("metadata",)),
    Kind(name="preview", needs=("metadata",), cached=True),
)

#: ``RendererConfig`` fields of PNG payloads: ``RendererConfig(**PNG_PAYLOADS, ...)``.
PNG_PAYLOADS: Final[dict[str, Any]] = {
    "mime": MIME,
    "min_bytes": MIN_PNG_BYTES,
    "check_payload": check_png,
}
