"""Drawing inside a helper process: the preview's PNGs on every core (design §5.4).

Child side, like :mod:`examples.preview.helper`: the standard library, numpy, Pillow and
:mod:`examples.preview.drawing.render`, never trio. A helper that has just read a run
draws its images there, so the drawing runs in as many processes as there are helpers
instead of in the server's GIL-bound worker threads, and the run's values never cross
the pipe: only the PNG bytes (base64 in the JSON reply) and the observation without its
values (:func:`without_values`), which is what the server keeps.

* :func:`draw_kinds` draws the kinds a job names (``thumbnail``, ``preview``);
* :func:`without_values` is the observation without the data arrays (what the server
  needs for a run's status, list row and verdict);
* :func:`check_kinds` checks a job's ``draw`` / ``kinds`` field;
* :func:`png_of` is the server's side: the PNG bytes of one kind in an answer.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

from actors.helper import JobError

from .drawing.render import KINDS, render

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["IMAGES_KEY", "check_kinds", "draw_kinds", "png_of", "without_values"]

#: The observation key holding the images a helper drew: kind → base64 PNG.
IMAGES_KEY = "images"


def check_kinds(value: Any, field: str) -> tuple[str, ...]:
    """``value`` as a tuple of distinct image kinds (``thumbnail``, ``preview``).

    Raises:
        JobError: (code ``invalid_command``) not a list of distinct known kinds; the
            message names ``field``.
    """
    if (
        not isinstance(value, list)
        or not all(isinstance(kind, str) and kind in KINDS for kind in value)
        or len(set(value)) != len(value)
    ):
        raise JobError(
            f"{field} must be a list of distinct kinds from {sorted(KINDS)}, got {value!r:.80}",
            code="invalid_command",
        )
    return tuple(value)


def draw_kinds(
    observation: dict[str, Any], kinds: Sequence[str], check_cancel: Callable[[], None]
) -> dict[str, str]:
    """Draw ``observation`` as each of ``kinds``; kind → base64 PNG.

    Args:
        observation: A read of :class:`~examples.preview.qcodes.source.QcodesSource`.
        kinds: Image kinds, drawn in this order.
        check_cancel: Called between drawing stages (the helper's cancel check).

    Raises:
        JobError: (code ``render_failed``, permanent) the observation cannot be drawn,
            as the renderer classifies a failed drawing (design §1.5).
    """
    images = {}
    for kind in kinds:
        try:
            png = render(observation, kind, None, check_cancel)
        except ValueError as exc:
            raise JobError(f"{kind}: {exc}", code="render_failed") from None
        images[kind] = base64.b64encode(png).decode("ascii")
    return images


def without_values(observation: dict[str, Any]) -> dict[str, Any]:
    """``observation`` without its data: each dependent's and each axis's ``values``.

    Everything else (names, units, points, shapes, status) is kept; a copy, the
    observation itself is not changed.
    """
    dependents = []
    for dep in observation.get("dependents") or []:
        axes = [{k: v for k, v in axis.items() if k != "values"} for axis in dep.get("axes") or []]
        dependents.append({**{k: v for k, v in dep.items() if k != "values"}, "axes": axes})
    return {**observation, "dependents": dependents}


def png_of(answer: Any, kind: str) -> bytes | None:
    """The PNG bytes of ``kind`` in a helper's answer (its ``images``), or None.

    None when the answer drew no such image, or holds something that is not base64
    there (a helper never sends that; the server then draws the kind again).
    """
    images = answer.get(IMAGES_KEY) if isinstance(answer, dict) else None
    text = images.get(kind) if isinstance(images, dict) else None
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        return None
