"""The journal: the event log's one sequence of events, its window and ports (design §6.8).

Every event gets the next global ``seq``. The journal appends it to a bounded in-memory
window (plain ``(seq, kind, run_id, data)`` tuples; an :class:`Event` is made only when
someone reads one or a port listens), stages its row in the ledger (``data`` encoded to
JSON exactly once) and offers it to the subscriber ports (design §6.9). ``watch`` below
the window reads the older events back from the ledger, so with a ledger a cursor is only
expired beyond the head or below what the ledger kept (``ledger_retain_events``).
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import TYPE_CHECKING, Any

import trio

from ..errors import CursorExpired, InvalidCommand, LedgerUnavailable
from ._ledger import RowCheck
from ._ports import PortHub
from ._types import Event, WatchResult, encode_json, json_string

if TYPE_CHECKING:
    from ._ledger import Ledger
    from ._types import EventLogConfig

__all__ = ["Journal"]

_make_event = Event._make


def progress_data(
    fraction: float, note: str | None, synthetic: bool = False
) -> tuple[dict[str, Any], str]:
    """Return the ``job_progress`` data and its JSON text, built together once.

    The JSON of a finite float is its ``repr`` (what ``json.dumps`` writes).
    """
    data: dict[str, Any] = {"fraction": fraction}
    text = f'{{"fraction":{fraction!r}'
    if note is not None:
        data["note"] = note
        text += ',"note":' + json_string(note)
    if synthetic:
        data["synthetic"] = True
        text += ',"synthetic":true'
    return data, text + "}"


class Journal:
    """The global event sequence: window, ledger rows and port fan-out (design §6.8).

    Args:
        config: ``window`` (events kept in memory) and ``subscriber_bound``.
        ledger: Where each event's row is staged, or None in memory.
    """

    def __init__(self, config: EventLogConfig, ledger: Ledger | None) -> None:
        self._ledger = ledger
        # The hot path's bound method, looked up once (one call per progress event).
        self._stage_progress = None if ledger is None else ledger.stage_progress
        self._window: deque[tuple[int, str, int | None, dict[str, Any]]] = deque(
            maxlen=config.window
        )
        self._head = 0
        #: The lowest event seq the ledger holds (older ones were pruned at open).
        self._ledger_floor = 1
        self.hub = PortHub(
            self.replay,
            default_bound=config.subscriber_bound,
            head=lambda: self._head,
            on_leave=self._subscriber_left,
        )

    def _subscriber_left(self, data: dict[str, Any]) -> None:
        # A log-wide event (no run): whoever follows the log sees who left and why
        # (design §6.9).
        self.emit("subscriber_left", None, data)

    def boot(self, head: int, ledger_floor: int) -> None:
        """Continue the sequence after ``head``; the ledger holds events from its floor."""
        self._head = head
        self._ledger_floor = ledger_floor

    @property
    def head(self) -> int:
        """The newest event seq (0 before any event)."""
        return self._head

    def floor(self) -> int:
        """The oldest seq in the window (``head + 1`` when it is empty)."""
        return self._window[0][0] if self._window else self._head + 1

    def emit(
        self, kind: str, run_id: int | None, data: dict[str, Any], text: str | None = None
    ) -> int:
        """Append one event; return its seq. O(1), never waits (design §6.8).

        ``text`` is ``data``'s JSON when the caller built it alongside ``data``; otherwise
        it is encoded here, exactly once. :meth:`emit_progress` inlines this body on its
        fast path; keep the two in step.
        """
        ledger = self._ledger
        if ledger is not None and text is None:
            # Before any change, so that a failure (not expected: the log checked or
            # built this data) leaves the log as it was.
            text = encode_json(data)
        self._head = seq = self._head + 1
        self._window.append((seq, kind, run_id, data))
        if ledger is not None and text is not None:
            ledger.stage_event(seq, kind, run_id, text)
        if self.hub._active:  # hub.listening, inlined
            self.hub.publish(_make_event(seq, kind, run_id, data))
        return seq

    def emit_progress(
        self, run_id: int, fraction: float, note: str | None = None, *, synthetic: bool = False
    ) -> None:
        """Append a ``job_progress`` event; ``fraction`` is a checked float in [0, 1]."""
        if note is not None or synthetic:
            self.emit("job_progress", run_id, *progress_data(fraction, note, synthetic))
            return
        # The commonest event: emit's body inlined; the ledger stages a float (its hot
        # path), and the writer thread makes the row's JSON text, once.
        data = {"fraction": fraction}
        self._head = seq = self._head + 1
        self._window.append((seq, "job_progress", run_id, data))
        stage = self._stage_progress
        if stage is not None:
            stage(seq, run_id, fraction)
        if self.hub._active:  # hub.listening, inlined
            self.hub.publish(_make_event(seq, "job_progress", run_id, data))

    def replay(self, cursor: int, limit: int | None = None) -> list[Event]:
        """Return the windowed events after ``cursor`` (at most ``limit``).

        Raises:
            CursorExpired: (``cursor_expired``) beyond the head or below the window;
                ``details["resync"]`` is ``"snapshot"``: the way back (design §6.15).
            InvalidCommand: (``invalid_command``) ``cursor`` is not an int >= 0.
        """
        if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
            raise InvalidCommand(f"cursor must be an int >= 0, got {cursor!r}", fields=["cursor"])
        if cursor > self._head:
            raise CursorExpired(
                f"cursor {cursor} is beyond the head {self._head} (another log?);"
                " take a snapshot and subscribe from its cursor",
                resume_from=self._head,
                resync="snapshot",
            )
        floor = self.floor()
        if cursor < floor - 1:
            raise CursorExpired(
                f"cursor {cursor} is below the retained floor {floor};"
                " take a snapshot and subscribe from its cursor",
                resync="snapshot",
                floor=floor,
            )
        start = cursor - floor + 1
        stop = None if limit is None else start + limit
        make = _make_event
        return [make(*entry) for entry in itertools.islice(self._window, start, stop)]

    async def watch(self, cursor: int, limit: int) -> WatchResult:
        """The events after ``cursor``, from the window or the ledger (design §6.8).

        Raises:
            CursorExpired: (``cursor_expired``) see :meth:`EventLog.watch`.
            InvalidCommand: (``invalid_command``) ``cursor`` or ``limit`` is not an int.
            LedgerCorrupt: (``ledger_corrupt``) an event row read back is damaged or
                missing (design §6.11).
            LedgerUnavailable: (``ledger_unavailable``) the events after ``cursor`` are
                neither in the window nor durable yet (design §6.13).
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidCommand(f"limit must be an int >= 1, got {limit!r}", fields=["limit"])
        head = self._head
        try:
            events = self.replay(cursor, limit)
        except CursorExpired:
            if self._ledger is None or cursor > head:
                raise
            events = await self._from_ledger(self._ledger, cursor, limit)
        else:
            await trio.lowlevel.checkpoint()
        return WatchResult(
            events=tuple(events), cursor=events[-1].seq if events else cursor, head=head
        )

    async def _from_ledger(self, ledger: Ledger, cursor: int, limit: int) -> list[Event]:
        floor = self._ledger_floor
        if cursor < floor - 1:  # pruned at open (ledger_retain_events)
            raise CursorExpired(
                f"cursor {cursor} is below the ledger's retained floor {floor};"
                " take a snapshot and subscribe from its cursor",
                resync="snapshot",
                floor=floor,
            )
        await ledger.settle_for_read()
        events = await ledger.fetch_events(cursor, limit)
        reached = events[-1].seq if events else cursor
        if reached < min(cursor + limit, self.floor() - 1):
            # Neither in the window nor in the ledger: staged and not committed yet while
            # commits fail; otherwise the ledger lost the row.
            unavailable = ledger.unavailable
            if unavailable is None:
                raise RowCheck(ledger.path, "events", "seq", reached + 1).corrupt(
                    None, "row missing (seqs have no gaps)"
                )
            raise LedgerUnavailable(
                f"events after {reached} are not durable yet: {unavailable.message}",
                **unavailable.details,
            )
        return events
