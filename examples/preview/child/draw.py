"""Drawing inside a helper process: the preview's PNGs on every core (design §5.4).

Child side, like :mod:`examples.preview.child.helper`: the standard library, numpy, Pillow and
:mod:`examples.preview.child.drawing.render`, never trio. A helper that has just read a run
draws its images there, so the drawing runs in as many processes as there are helpers
instead of in the server's GIL-bound worker threads, and the run's values never cross
the pipe: only the PNG bytes and the summary of the read the server keeps
(:func:`read_summary`: its status, rows, shapes and points, never its data). The PNGs
travel as the reply's binary part (design §2.3), as they are: no base64, and the server
reads them out of the frame it received without a copy until one is kept. A read holds
at most 32 768 values, so even a map of pure noise gives a preview of about 90 KB, far
within the helper's 1 MiB reply limit (design §2.2).

* :func:`draw_kinds` draws the kinds a job names (``thumbnail``, ``preview``);
  :func:`draw_with_report` one kind with its report (the ``draw`` a client asks for,
  design §7.7); :func:`draw_live` the live images of a read of a run still being written
  (design §4.5), where a kind that cannot be drawn does not fail the read;
* :func:`with_images` is the helper's reply: a :class:`~protocol.envelope.Blob` whose head is the
  answer with ``images``, kind → ``[offset, size]`` in its binary part, the PNGs one
  after the other;
* :func:`read_summary` is what the server keeps of a read, never its data (what it needs
  for a run's status, list row, verdict and progress);
* :func:`check_kinds` checks a job's ``draw`` / ``kinds`` field;
* :func:`observation_of` and :func:`png_of` are the server's side: the answer as a dict
  whose ``images`` are views of the PNGs, and the PNG bytes of one kind;
* :class:`Handoff` passes a read from the helper that drew its thumbnail to the one
  that draws its preview (any helper of the pool may get that job), through a folder
  private to the server, so the preview does not read the run again: a second read
  costs about a fifth of the run's whole work (measured, design §5.4).
"""

from __future__ import annotations

import marshal
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from actors.helper import Blob, JobError

from .drawing.image_kinds import KINDS

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "IMAGES_KEY",
    "IMAGE_ERRORS_KEY",
    "Handoff",
    "check_kinds",
    "draw_kinds",
    "draw_live",
    "draw_with_report",
    "observation_of",
    "png_of",
    "slice_of",
    "with_images",
    "read_summary",
]

#: The answer's key holding the images a helper drew: in the reply's head, kind →
#: ``[offset, size]`` in bytes in its binary part; in :func:`observation_of`, kind → the
#: PNG bytes (a view).
IMAGES_KEY = "images"
#: The answer's key naming the live images a helper could not draw: kind → why.
IMAGE_ERRORS_KEY = "image_errors"


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
    observation: dict[str, Any],
    kinds: Sequence[str],
    check_cancel: Callable[[], None],
    options: Mapping[str, Any] | None = None,
) -> dict[str, bytes]:
    """Draw ``observation`` as each of ``kinds``; kind → PNG bytes.

    Args:
        observation: A read of :class:`~examples.preview.child.qcodes.source.QcodesSource`.
        kinds: Image kinds, drawn in this order.
        check_cancel: Called between drawing stages (the helper's cancel check).
        options: The drawing options (:func:`~examples.preview.child.drawing.render.render`),
            for every kind; None for the defaults.

    Raises:
        JobError: (code ``render_failed``, permanent) the observation cannot be drawn,
            as the renderer classifies a failed drawing (design §1.5).
    """
    return {kind: draw_with_report(observation, kind, check_cancel, options)[0] for kind in kinds}


def draw_with_report(
    observation: dict[str, Any],
    kind: str,
    check_cancel: Callable[[], None],
    options: Mapping[str, Any] | None = None,
) -> tuple[bytes, dict[str, Any]]:
    """Draw ``observation`` as ``kind``; the PNG and the report it carries (the axis
    decisions, :func:`~examples.preview.child.drawing.render.report_of`).

    Raises:
        JobError: (code ``render_failed``, permanent) as :func:`draw_kinds`.
    """
    # Loaded at a helper's start already (by examples.preview.child.helper); the server,
    # which imports this module for png_of, never draws here.
    from .drawing.render import render_png_with_report

    try:
        return render_png_with_report(observation, kind, options, check_cancel)
    except ValueError as exc:
        raise JobError(f"{kind}: {exc}", code="render_failed") from None


def draw_live(
    observation: dict[str, Any], kinds: Sequence[str], check_cancel: Callable[[], None]
) -> tuple[dict[str, bytes], dict[str, str]]:
    """Draw a read of a run still being written as each of ``kinds`` (its live images,
    design §4.5), each kind on its own: one that cannot be drawn is left out.

    Returns:
        kind → PNG bytes, and kind → why that kind was not drawn (the ``render_failed``
        message): the read itself stands, the next one is drawn again.
    """
    images: dict[str, bytes] = {}
    errors: dict[str, str] = {}
    for kind in kinds:
        try:
            images[kind] = draw_with_report(observation, kind, check_cancel)[0]
        except JobError as exc:
            errors[kind] = str(exc)[:500]
    return images, errors


def slice_of(observation: dict[str, Any]) -> dict[str, Any] | None:
    """The 2-D slice a read holds (``index``, ``count`` and its label), or None for a run
    of at most two sweep dimensions."""
    for dep in observation.get("dependents") or []:
        chosen = dep.get("slice")
        if isinstance(chosen, dict):
            return chosen
    return None


def with_images(answer: dict[str, Any], images: dict[str, bytes]) -> Blob:
    """The helper's reply: ``answer`` with the PNGs of ``images`` in its binary part.

    The head is ``answer`` plus ``images``: kind → ``[offset, size]``, in bytes, of that
    kind's PNG in the binary part, where the PNGs lie one after the other (design §2.3).
    """
    spans = {}
    offset = 0
    for kind, png in images.items():
        spans[kind] = [offset, len(png)]
        offset += len(png)
    return Blob(head={**answer, IMAGES_KEY: spans}, data=b"".join(images.values()))


#: The keys of a read the server keeps (:func:`read_summary`), at the top level and of
#: each dependent: what its run-list row, its verdict and its live progress are made of.
SUMMARY_KEYS: Final = frozenset({
    "run_id", "revision", "status", "status_reason", "row_count", "is_completed", "shapes",
    "points", "planned_points",
})  # fmt: skip
DEPENDENT_SUMMARY_KEYS: Final = frozenset(
    {"name", "label", "unit", "source_shape", "points", "planned_points"}
)


def read_summary(observation: dict[str, Any]) -> dict[str, Any]:
    """What the server keeps of a read: :data:`SUMMARY_KEYS` of ``observation`` and
    :data:`DEPENDENT_SUMMARY_KEYS` of each dependent; never the data, the axes, the
    snapshot or the metadata (a helper reads those again when they are asked for).

    About a quarter of the read without its values, in JSON (measured on the sample
    runs: 0.4-0.7 KB against 1.3-2.6 KB): less to decode on the event loop and less to
    hold while the scheduler keeps the read for the run's other kinds. A copy; the
    observation itself is not changed.
    """
    summary = {key: value for key, value in observation.items() if key in SUMMARY_KEYS}
    summary["dependents"] = [
        {key: value for key, value in dep.items() if key in DEPENDENT_SUMMARY_KEYS}
        for dep in observation.get("dependents") or []
        if isinstance(dep, dict)
    ]
    return summary


def observation_of(answer: Any) -> Any:
    """A helper's answer as the server keeps it: a :func:`with_images` reply becomes its
    head with ``images`` as kind → a read-only view of that PNG in the reply (no copy);
    anything else is returned as it is.

    An image whose span is not a pair of ints within the binary part is left out (a
    helper never sends that; the server then draws the kind again).
    """
    if not isinstance(answer, Blob) or not isinstance(answer.head, dict):
        return answer
    data = memoryview(answer.data)
    spans = answer.head.get(IMAGES_KEY)
    images = {}
    if isinstance(spans, dict):
        for kind, span in spans.items():
            if (
                isinstance(span, list)
                and len(span) == 2
                and all(type(n) is int and n >= 0 for n in span)
                and span[0] + span[1] <= len(data)
            ):
                images[kind] = data[span[0] : span[0] + span[1]]
    return {**answer.head, IMAGES_KEY: images}


def png_of(answer: Any, kind: str) -> bytes | None:
    """The PNG bytes of ``kind`` in a helper's answer, or None.

    ``answer`` is a :func:`with_images` reply or its :func:`observation_of`. The bytes
    are copied out of the reply's frame once, here, unless they were already (an image
    that is ``bytes`` is returned as it is, shared): the image outlives the frame (the
    payload cache, the image store), and a view would pin the whole reply. None when
    the answer drew no such image (the server then draws the kind again).
    """
    images = observation_of(answer)
    images = images.get(IMAGES_KEY) if isinstance(images, dict) else None
    png = images.get(kind) if isinstance(images, dict) else None
    if isinstance(png, bytes):
        return png  # copied out of its reply already: shared, not copied again
    if not isinstance(png, memoryview):
        return None
    return bytes(png)


class Handoff:
    """Reads left by one helper for another, one file per run (design §5.4).

    A helper that drew a read's thumbnail leaves the read (:meth:`leave`); the helper
    that draws the run's preview takes it (:meth:`take`) if it is of the revision the
    server asks for, and removes it, so the folder holds only the runs whose preview
    is still to be drawn (each at most one read: about 25 KiB on average, under 1 MiB).
    A read that is missing, of another revision or unreadable is simply read again.

    Args:
        folder: A folder private to the server (it is the only writer besides its
            helpers); created if missing.
    """

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    # marshal, not JSON: 0.03 ms to write a read and 0.08 ms to load it, against 0.6 ms
    # and 0.2 ms (measured on the sample runs); the folder is private (mode 0700), so
    # only the server's own helpers write what is loaded.
    def _path(self, run_id: int) -> Path:
        return self.folder / f"run-{run_id}.marshal"

    def leave(self, observation: dict[str, Any]) -> None:
        """Keep ``observation`` for the helper that draws the rest of its run.

        Written under a temporary name and renamed, so a reader never sees half of it;
        a failure to write is ignored (the run is then read again).
        """
        run_id = observation.get("run_id")
        if not isinstance(run_id, int):
            return
        path = self._path(run_id)
        temp = path.with_name(f".{path.name}.{os.getpid()}")
        try:
            temp.write_bytes(marshal.dumps(observation))
            os.replace(temp, path)
        except (OSError, ValueError):  # ValueError: a value marshal cannot write
            temp.unlink(missing_ok=True)

    def take(self, run_id: int, revision: str | None) -> dict[str, Any] | None:
        """The read of ``run_id`` left at ``revision``, removed from the folder; or None.

        With ``revision`` None nothing is taken (the caller reads afresh); whatever is
        found is removed either way (a read of another revision is of no further use).
        """
        path = self._path(run_id)
        try:
            data = path.read_bytes()
            path.unlink()
        except OSError:
            return None  # not left, or taken by another helper meanwhile
        try:
            observation = marshal.loads(data)
        except (ValueError, EOFError, TypeError):
            return None
        if revision is None or not isinstance(observation, dict):
            return None
        if observation.get("revision") != revision or observation.get("run_id") != run_id:
            return None
        return observation
