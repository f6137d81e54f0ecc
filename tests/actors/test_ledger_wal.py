"""Acknowledged means durable, provably: the write-ahead-log check at open (design §6.12).

Each test takes a crash image of a live ledger (its file and ``-wal`` copied while the
log runs, as SIGKILL or a power cut leaves them), damages it the way disks and people
do, and opens it: damage inside the committed part, a missing or a foreign log is
refused with every byte left as it was; a torn tail (an unacknowledged commit cut
short) is accepted with every acknowledged request still there.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sqlite3
import struct
from typing import TYPE_CHECKING

import pytest

from actors._eventlog._eventlog import open_event_log
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import LedgerCorrupt

if TYPE_CHECKING:
    from pathlib import Path

    from actors import Receipt

OPS = [OperationSpec(name="job", fields={"n"})]
HEADER = 32
FRAME_HEADER = 24


def cfg(path: Path) -> EventLogConfig:
    return EventLogConfig(ledger_path=path, synchronous="NORMAL")


def fingerprint(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


async def crash_image(tmp_path: Path, name: str, submits: int = 6) -> tuple[Path, list[Receipt]]:
    """A ledger's files as a crash leaves them, and the receipts acknowledged before."""
    live = tmp_path / f"{name}-live"
    live.mkdir()
    image = tmp_path / name
    image.mkdir()
    receipts = []
    async with open_event_log(cfg(live / "ledger.db"), operations=OPS) as log:
        for k in range(submits):
            receipts.append(await log.submit("job", {"n": k}, request_id=f"{name}-{k}"))
        for suffix in ("", "-wal"):
            shutil.copy(live / f"ledger.db{suffix}", image / f"ledger.db{suffix}")
    return image / "ledger.db", receipts


class Wal:
    """The frames of a ``-wal`` file, to damage them precisely."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data = bytearray(path.read_bytes())
        self.page_size = struct.unpack_from(">I", self.data, 8)[0]
        self.frame_size = FRAME_HEADER + self.page_size
        self.count = (len(self.data) - HEADER) // self.frame_size

    def offset(self, frame: int) -> int:
        """Byte offset of 1-based ``frame``."""
        return HEADER + (frame - 1) * self.frame_size

    def commits(self) -> list[int]:
        """The 1-based numbers of the commit frames."""
        return [
            frame
            for frame in range(1, self.count + 1)
            if struct.unpack_from(">I", self.data, self.offset(frame) + 4)[0]
        ]

    def flip(self, position: int) -> None:
        self.data[position] ^= 0x10
        self.path.write_bytes(self.data)


async def refused(path: Path, *needles: str) -> LedgerCorrupt:
    before = fingerprint(path.parent)
    with pytest.raises(LedgerCorrupt) as info:
        async with open_event_log(cfg(path), operations=OPS):
            pass  # pragma: no cover
    assert fingerprint(path.parent) == before  # every byte, and no -shm left behind
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message
    return info.value


async def opens_with(path: Path, receipts: list[Receipt]) -> None:
    async with open_event_log(cfg(path), operations=OPS) as log:
        held = {status.run_id for status in log.boot_report().survivors}
        assert held == {r.run_id for r in receipts}
        for receipt in receipts:  # the stored receipts, not new runs
            again = await log.submit("job", {"n": receipt.run_id - 1}, receipt.request_id)
            assert again == receipt


async def test_a_crash_image_has_its_commits_in_the_log_and_opens_whole(tmp_path: Path) -> None:
    path, receipts = await crash_image(tmp_path, "a")
    assert len(Wal(path.with_name("ledger.db-wal")).commits()) >= len(receipts)
    await opens_with(path, receipts)


@pytest.mark.parametrize("where", ["page", "stored_checksum", "page_number", "salt"])
async def test_a_flipped_bit_inside_the_committed_part_is_refused(
    tmp_path: Path, where: str
) -> None:
    # The first report: 5 of 60 acknowledged runs were left, without a word.
    path, _ = await crash_image(tmp_path, "a")
    wal = Wal(path.with_name("ledger.db-wal"))
    frame = wal.commits()[1]  # the commit frame of the second transaction
    start = wal.offset(frame)
    wal.flip(
        {
            "page": start + FRAME_HEADER + wal.page_size // 2,
            "stored_checksum": start + 17,
            "page_number": start + 3,
            "salt": start + 9,
        }[where]
    )
    error = await refused(path, f"damaged at frame {frame}", "committed transaction(s) after")
    assert error.details == {"frame": frame}


async def test_a_damaged_log_header_in_front_of_commits_is_refused(tmp_path: Path) -> None:
    path, _ = await crash_image(tmp_path, "a")
    Wal(path.with_name("ledger.db-wal")).flip(13)  # the checkpoint sequence number
    await refused(path, "header of its write-ahead log", "is damaged")


async def test_a_missing_log_is_refused_when_the_session_did_not_close(tmp_path: Path) -> None:
    # The first report: a missing -wal left 0 of the acknowledged runs, and no word.
    path, _ = await crash_image(tmp_path, "a")
    path.with_name("ledger.db-wal").unlink()
    error = await refused(path, "did not close", "is missing", "design §6.12")
    assert error.details == {"table": "meta", "key": "session", "column": "value"}


async def test_accepting_the_loss_of_a_missing_log_is_one_documented_step(
    tmp_path: Path,
) -> None:
    path, _ = await crash_image(tmp_path, "a")
    path.with_name("ledger.db-wal").unlink()
    await refused(path)
    # design §6.12, the operator's step once the log is known to be lost for good:
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = 'closed operator' WHERE key = 'session'")
    conn.commit()
    conn.close()
    async with open_event_log(cfg(path), operations=OPS) as log:
        assert log.boot_report().survivors == ()  # what only the log held is gone


async def test_a_log_from_another_ledger_is_refused(tmp_path: Path) -> None:
    path, _ = await crash_image(tmp_path, "a")
    other, _ = await crash_image(tmp_path, "b")
    shutil.copy(other.with_name("ledger.db-wal"), path.with_name("ledger.db-wal"))
    await refused(path, "belongs to another ledger or session")


async def test_a_log_of_an_earlier_session_is_refused(tmp_path: Path) -> None:
    path, _ = await crash_image(tmp_path, "a", submits=3)
    stale = path.with_name("ledger.db-wal").read_bytes()
    async with open_event_log(cfg(path), operations=OPS):
        pass  # a new session, closed cleanly: the log is folded in and removed
    path.with_name("ledger.db-wal").write_bytes(stale)
    await refused(path, "belongs to another ledger or session")


async def test_a_torn_tail_of_an_unacknowledged_commit_is_accepted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, receipts = await crash_image(tmp_path, "a")
    wal_path = path.with_name("ledger.db-wal")
    wal = Wal(wal_path)
    last = wal.data[wal.offset(wal.count) : wal.offset(wal.count) + wal.frame_size]
    torn = bytearray(last)
    struct.pack_into(">I", torn, 4, 7)  # a commit frame ...
    torn[FRAME_HEADER + 5] ^= 0xFF  # ... whose page was not fully written
    wal_path.write_bytes(bytes(wal.data) + bytes(torn) + last[: wal.frame_size // 3])
    with caplog.at_level(logging.WARNING, logger="actors.eventlog"):
        await opens_with(path, receipts)
    records = [r for r in caplog.records if "torn" in r.getMessage()]
    assert [r.torn_frames for r in records] == [1]  # type: ignore[attr-defined]


async def test_a_clean_close_folds_the_log_in_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    async with open_event_log(cfg(path), operations=OPS) as log:
        await log.submit("job", {"n": 1})
    assert sorted(os.listdir(tmp_path)) == ["ledger.db"]
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    session = conn.execute("SELECT value FROM meta WHERE key = 'session'").fetchone()[0]
    conn.close()
    assert session.startswith("closed ")
