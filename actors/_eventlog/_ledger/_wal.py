"""The write-ahead-log check run before SQLite may replay a ledger's ``-wal`` (design §6.12).

SQLite replays a WAL up to the first frame whose salts or checksum do not match and
silently drops everything after it: one flipped bit in an old frame loses every commit
written after it, acknowledged or not. So before SQLite opens the ledger, this module
reads the log itself (the file format is documented at sqlite.org/fileformat2.html):

* a 32-byte header (magic, version, page size, checkpoint sequence, two salts and a
  cumulative checksum of its first 24 bytes), then
* frames of a 24-byte header (page number, database size in pages for a commit frame or
  0, the two salts, the cumulative checksum) and one page each.

Each frame's checksum continues the previous frame's, so a frame can be checked on its
own from the checksum its predecessor stored. The rule (:func:`check_wal`):

* the frames SQLite will replay (the valid prefix, up to its last commit frame) are fine;
* damage after the last intact commit is a **torn tail**: the frames of a transaction that
  was being written when the process stopped, never acknowledged (a commit is only
  acknowledged once its commit frame is written and synced). It is accepted: SQLite
  discards it;
* an intact commit frame of this log *after* a damaged frame means the damage is inside
  the committed part: replaying would silently drop that commit and all before it back to
  the damage. The ledger is refused, its files left untouched;
* a damaged header in front of frames that chain from it is the same: every commit behind
  it would be dropped;
* a log for another page size is foreign.
"""

from __future__ import annotations

import struct

import attrs

from ...errors import LedgerCorrupt

__all__ = ["WalReport", "check_wal"]

_MAGIC_LE = 0x377F0682
_MAGIC_BE = 0x377F0683
_VERSION = 3007000
_HEADER = 32
_FRAME_HEADER = 24
_MASK = 0xFFFFFFFF
_LEFT_UNTOUCHED = "the files were left untouched"


@attrs.frozen(kw_only=True)
class WalReport:
    """What :func:`check_wal` found in an accepted write-ahead log."""

    frames: int
    """Frames SQLite will replay (up to the last intact commit)."""
    commits: int
    """Committed transactions among them."""
    torn_frames: int
    """Frames of this log after its last intact commit, which SQLite will discard (a
    torn tail); frames left over from an older log generation are not counted."""


def _checksum(words: tuple[int, ...], s0: int, s1: int) -> tuple[int, int]:
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & _MASK
        s1 = (s1 + words[i + 1] + s0) & _MASK
    return s0, s1


class _Frames:
    """The complete frames of a log, with their checksums."""

    def __init__(self, data: bytes, page_size: int, big_endian: bool) -> None:
        self.data = data
        self.size = _FRAME_HEADER + page_size
        self.count = (len(data) - _HEADER) // self.size if len(data) > _HEADER else 0
        order = ">" if big_endian else "<"
        self._head_words = struct.Struct(f"{order}2I")
        self._page_words = struct.Struct(f"{order}{page_size // 4}I")

    def header(self, index: int) -> tuple[int, int, int, int, int, int]:
        """``(page, commit_size, salt1, salt2, checksum1, checksum2)`` of frame ``index``."""
        start = _HEADER + index * self.size
        values = struct.unpack_from(">6I", self.data, start)
        return values[0], values[1], values[2], values[3], values[4], values[5]

    def checksum(self, index: int, seed: tuple[int, int]) -> tuple[int, int]:
        """The cumulative checksum of frame ``index`` continued from ``seed``."""
        start = _HEADER + index * self.size
        s0, s1 = _checksum(self._head_words.unpack_from(self.data, start), *seed)
        return _checksum(self._page_words.unpack_from(self.data, start + _FRAME_HEADER), s0, s1)


def check_wal(path: str, wal_path: str, page_size: int) -> WalReport:
    """Check the write-ahead log ``wal_path`` of the ledger ``path`` without writing.

    Args:
        path: The ledger (named in messages).
        wal_path: Its ``-wal`` file.
        page_size: The database's page size, in bytes (from its header).

    Raises:
        LedgerCorrupt: (``ledger_corrupt``) a damaged frame or header inside the
            committed part, or a log for another page size; the message says which
            frame and how many commits would be lost. Nothing is written.
        OSError: the log could not be read.
    """
    with open(wal_path, "rb") as f:
        data = f.read()
    if len(data) < _HEADER:
        # No frame fits: at most a header torn while a new log was started.
        return WalReport(frames=0, commits=0, torn_frames=0)
    magic, version, wal_page_size, _, salt1, salt2, c1, c2 = struct.unpack_from(">8I", data)
    big_endian = bool(magic & 1)
    header_ok = (
        magic in (_MAGIC_LE, _MAGIC_BE)
        and version == _VERSION
        and _checksum(struct.unpack_from(f"{'>' if big_endian else '<'}6I", data), 0, 0) == (c1, c2)
    )
    if header_ok and wal_page_size != page_size:
        raise LedgerCorrupt(
            f"ledger {path!r}: its write-ahead log {wal_path!r} is for pages of"
            f" {wal_page_size} bytes, the database's are {page_size} bytes: a foreign log;"
            f" {_LEFT_UNTOUCHED}",
            frame=0,
        )
    if not header_ok:
        _check_damaged_header(path, wal_path, data, page_size, (salt1, salt2), (c1, c2))
        return WalReport(frames=0, commits=0, torn_frames=0)
    frames = _Frames(data, page_size, big_endian)
    salts = (salt1, salt2)
    seed = (c1, c2)
    replayed = commits = 0
    for index in range(frames.count):
        _, commit_size, s1, s2, f1, f2 = frames.header(index)
        if (s1, s2) != salts or frames.checksum(index, seed) != (f1, f2):
            _check_after_damage(path, wal_path, frames, index, salts, seed)
            break
        seed = (f1, f2)
        if commit_size:
            replayed, commits = index + 1, commits + 1
    torn = 0  # this log's frames after its last commit; older logs' frames are no tear
    while replayed + torn < frames.count and _ours(frames.header(replayed + torn)[2:4], salts):
        torn += 1
    return WalReport(frames=replayed, commits=commits, torn_frames=torn)


def _ours(frame_salts: tuple[int, int], salts: tuple[int, int]) -> bool:
    # A frame of an older log generation differs in both salts (SQLite increments the
    # first and draws the second anew); a flipped bit changes at most one.
    return frame_salts[0] == salts[0] or frame_salts[1] == salts[1]


def _check_after_damage(
    path: str,
    wal_path: str,
    frames: _Frames,
    damaged: int,
    salts: tuple[int, int],
    seed: tuple[int, int],
) -> None:
    """Refuse if an intact commit of this log follows the damaged frame ``damaged``.

    A later frame is intact if its checksum continues either the checksum its
    predecessor stored (damage in the predecessor's page) or the one its predecessor
    should have stored (damage in the stored checksum itself).
    """
    lost = _intact_commits(frames, damaged, salts, seed)
    if lost:
        page = frames.header(damaged)[0]
        raise LedgerCorrupt(
            f"ledger {path!r}: its write-ahead log {wal_path!r} is damaged at frame"
            f" {damaged + 1} (page {page}), inside its committed part: {lost} committed"
            f" transaction(s) after it would be lost; {_LEFT_UNTOUCHED}",
            frame=damaged + 1,
        )


def _intact_commits(
    frames: _Frames, start: int, salts: tuple[int, int], seed: tuple[int, int]
) -> int:
    """Count the intact commit frames of this log after frame ``start``."""
    count = 0
    stored = computed = seed
    for index in range(start, frames.count):
        _, commit_size, s1, s2, f1, f2 = frames.header(index)
        intact = (f1, f2) in (frames.checksum(index, stored), frames.checksum(index, computed))
        if index > start and commit_size and _ours((s1, s2), salts) and intact:
            count += 1
        computed = frames.checksum(index, stored)
        stored = (f1, f2)
    return count


def _check_damaged_header(
    path: str,
    wal_path: str,
    data: bytes,
    page_size: int,
    salts: tuple[int, int],
    seed: tuple[int, int],
) -> None:
    """Refuse a damaged header if commits behind it chain from it (a live log).

    A header torn while SQLite started a new log has frames of the previous log behind
    it (already checkpointed): their checksums do not continue this header's.
    """
    for big_endian in (False, True):
        frames = _Frames(data, page_size, big_endian)
        if frames.count == 0:
            return
        _, commit_size, s1, s2, f1, f2 = frames.header(0)
        if not _ours((s1, s2), salts) or frames.checksum(0, seed) != (f1, f2):
            continue
        lost = int(commit_size != 0) + _intact_commits(frames, 0, salts, seed)
        if lost:
            raise LedgerCorrupt(
                f"ledger {path!r}: the header of its write-ahead log {wal_path!r} is"
                f" damaged; SQLite would ignore the {lost} committed transaction(s) behind"
                f" it; {_LEFT_UNTOUCHED}",
                frame=0,
            )
