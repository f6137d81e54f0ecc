"""The rows the ledger stages for one transaction (design §6.10).

Event rows are the hot path (one per event): staging one appends to plain lists, no
object per row, and each transaction writes them with one ``executemany``.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from ._ticket import Ticket

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["Batch", "Segment"]


def _progress_texts(fractions: list[float]) -> list[str]:
    """The ``data`` JSON of ``job_progress`` events whose data is ``{"fraction": f}``.

    The JSON of a finite float is its repr, as ``json.dumps`` writes it.
    """
    return [f'{{"fraction":{fraction!r}}}' for fraction in fractions]


class Segment:
    """Consecutive event rows of a batch, in seq order: their data JSON texts, and
    their kinds and run ids, or (``progress_run`` set) all ``job_progress`` events of
    that run, the commonest case: one list append per row while staging."""

    __slots__ = ("kinds", "progress_run", "run_ids", "values")

    def __init__(self, progress_run: int | None) -> None:
        self.progress_run = progress_run
        self.kinds: list[str] = []
        self.run_ids: list[int | None] = []
        self.values: list[Any] = []  # JSON texts, or fractions (floats)


class Batch:
    """The rows staged for one transaction, and the ticket that reports it durable."""

    __slots__ = (
        "committed",
        "detached",
        "first_seq",
        "last_seq",
        "meta",
        "progress_run",
        "progress_values",
        "requests",
        "rows",
        "runs",
        "segments",
        "text_tail",
        "ticket",
    )

    def __init__(self, ticket: Ticket | None = None) -> None:
        self.committed = False
        #: ``(request_id, content, run_id, receipt_json, position, actor)`` rows.
        self.requests: list[tuple[str, str, int, str, int, str | None]] = []
        #: ``(cancelled_by, request_id)`` of requests detached from their run.
        self.detached: list[tuple[str, str]] = []
        self.runs: dict[int, tuple[Any, ...]] = {}
        self.meta: dict[str, str] = {}
        self.rows = 0  # rows staged other than events
        # Event rows: their seqs run from first_seq to last_seq without a gap (staging
        # checks), the other columns are kept in segments of plain lists. A batch of
        # 100 000 events then holds no per-row tuple: such tuples, alive until the
        # commit, set off the cyclic GC again and again (measured: ~0.25 us per event).
        # The writer chains the segments back into rows inside one executemany.
        self.first_seq = -1
        self.last_seq = -2
        self.segments: list[Segment] = []
        self.text_tail: Segment | None = None  # the last segment if it holds texts
        self.progress_run: int | None = None  # its run if it holds fractions
        self.progress_values: list[Any] = []  # ... and then its fractions
        self.ticket = Ticket() if ticket is None else ticket

    @property
    def events(self) -> int:
        """Event rows staged."""
        return self.last_seq - self.first_seq + 1 if self.segments else 0

    @property
    def size(self) -> int:
        """Rows staged in all."""
        return self.rows + self.events

    def event_rows(self) -> Iterator[tuple[int, str, int | None, str]]:
        """The ``(seq, kind, run_id, data)`` rows, in seq order, for ``executemany``.

        Runs in the writer thread: chained C iterators over the segments' lists, plus one
        list comprehension per progress segment that makes its JSON texts.
        """
        kinds: list[Iterable[str]] = []
        run_ids: list[Iterable[int | None]] = []
        texts: list[Iterable[str]] = []
        for segment in self.segments:
            if segment.progress_run is None:
                kinds.append(segment.kinds)
                run_ids.append(segment.run_ids)
                texts.append(segment.values)
            else:
                count = len(segment.values)
                kinds.append(itertools.repeat("job_progress", count))
                run_ids.append(itertools.repeat(segment.progress_run, count))
                texts.append(_progress_texts(segment.values))
        chain = itertools.chain.from_iterable
        seqs = range(self.first_seq, self.last_seq + 1)
        return zip(seqs, chain(kinds), chain(run_ids), chain(texts), strict=True)
