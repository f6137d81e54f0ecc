"""LiveImages: keeps the live images of the runs being written (design §4.5, §5.4).

A run whose ``is_completed`` is 0 is parked by the scheduler, which pages it; every
read of it with new rows is drawn in the helper that read it, as a thumbnail and a
preview with the status band (the ``read_run`` job's ``live`` kinds,
:mod:`examples.preview.child.helper`), and comes back without its values. Its parked
notice hands that read to :meth:`LiveImages.keep`, which keeps the PNGs in the
:class:`~examples.preview.app.images.ImageStore` at the read's client revision, so
clients get them pushed like any other image. The server process draws nothing and
never holds a run's values: the drawing runs on every core, beside the reads.

A kind the helper could not draw is logged (its read, and the run's progress, stand);
a PNG without a valid header is logged and not kept, as the renderer would refuse it.

Depends on the :class:`~examples.preview.app.runs.RunTable` (the runs' client
revisions) and the image store.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from actors.errors import ActorError

from ..child.draw import IMAGE_ERRORS_KEY, png_of
from ..child.drawing.png import check_png
from .images import StoredImage
from .runs import IMAGE_KINDS

if TYPE_CHECKING:
    from .images import ImageStore
    from .runs import RunRecord

__all__ = ["LIVE_KINDS", "LiveImages"]

LOGGER = logging.getLogger("examples.preview")
#: The kinds a read of a run being written is drawn as (the ``read_run`` job's ``live``).
LIVE_KINDS = IMAGE_KINDS


class LiveImages:
    """Keeps the live images a helper drew with each parked read (see the module docstring).

    Args:
        images: Where the images are kept (and pushed from).
    """

    def __init__(self, images: ImageStore) -> None:
        self._images = images

    def keep(self, record: RunRecord, observation: dict[str, Any]) -> int:
        """Keep the live images of ``observation``, a parked read of ``record`` (never
        waits); how many were kept (a kind already held with the same bytes is not)."""
        run_id = record.run_id
        number = record.number(str(observation.get("revision")))
        failed = observation.get(IMAGE_ERRORS_KEY)
        kept = 0
        for kind in LIVE_KINDS:
            png = png_of(observation, kind)
            if png is None:
                reason = failed.get(kind) if isinstance(failed, dict) else None
                LOGGER.warning(
                    "run %d: live %s not drawn: %s", run_id, kind, reason or "no image",
                    extra={"run_id": run_id, "kind": kind, "code": "render_failed"},
                )  # fmt: skip
                continue
            try:
                check_png(png)
            except ActorError as exc:
                LOGGER.warning(
                    "run %d: live %s refused: %s", run_id, kind, exc,
                    extra={"run_id": run_id, "kind": kind, "code": exc.code},
                )  # fmt: skip
                continue
            image = StoredImage(run_id=run_id, kind=kind, revision=number, data=png, live=True)
            kept += self._images.put(image)
        return kept
