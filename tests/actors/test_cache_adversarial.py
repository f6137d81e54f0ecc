"""Adversarial tests of the payload caches (design §4.10): damaged and odd disk entries.

Corrupt, truncated, zero-length and oversized entry files, a directory where an entry
file should be, leftovers of a crashed writer, concurrent writers of one key from many
threads, and byte bounds of 0.
"""

from __future__ import annotations

import os
import threading
import tracemalloc
from typing import TYPE_CHECKING

import pytest

from actors._scheduler._cache import DiskCache, LRUCache, PayloadKey

if TYPE_CHECKING:
    from pathlib import Path


def key(n: int = 1) -> PayloadKey:
    return PayloadKey(
        source="db",
        guid=f"g{n}",
        kind="thumbnail",
        revision="r1",
        renderer_version="1",
        options="{}",
    )


def entry_path(cache: DiskCache, k: PayloadKey) -> Path:
    return cache.directory / (k.digest() + ".bin")


@pytest.mark.parametrize(
    "damage",
    ["zero_length", "truncated", "flipped_body", "flipped_header", "extra_bytes", "garbage"],
)
def test_damaged_entries_are_misses_and_are_removed(tmp_path: Path, damage: str) -> None:
    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    assert cache.put(key(), b"payload" * 100)
    path = entry_path(cache, key())
    raw = path.read_bytes()
    if damage == "zero_length":
        raw = b""
    elif damage == "truncated":
        raw = raw[: len(raw) - 1]
    elif damage == "flipped_body":
        raw = raw[:-1] + bytes([raw[-1] ^ 1])
    elif damage == "flipped_header":
        raw = raw[:6] + bytes([raw[6] ^ 1]) + raw[7:]
    elif damage == "extra_bytes":
        raw += b"x"
    else:
        raw = b"\x00" * 10
    path.write_bytes(raw)
    assert cache.get(key()) is None
    assert not path.exists()
    stats = cache.statistics()
    assert (stats.corrupt, stats.misses, stats.entries, stats.bytes) == (1, 1, 0, 0)
    assert cache.put(key(), b"fresh")
    assert cache.get(key()) == b"fresh"


def test_an_oversized_entry_file_is_not_read_into_memory(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=4096)
    path = entry_path(cache, key())
    with path.open("wb") as handle:  # a sparse 1 GiB file where a small entry belongs
        handle.truncate(1 << 30)
    tracemalloc.start()
    try:
        assert cache.get(key()) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # it used to read the whole GiB before finding it corrupt
    assert not path.exists()
    assert cache.statistics().corrupt == 1


def test_a_directory_where_an_entry_file_should_be(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    path = entry_path(cache, key())
    path.mkdir()
    assert cache.get(key()) is None  # a miss, not an IsADirectoryError
    assert cache.statistics().corrupt == 1
    assert not path.exists()  # an empty directory is junk: removed
    assert cache.put(key(), b"data")
    assert cache.get(key()) == b"data"
    # a non-empty directory is not ours to delete: a miss every time, never an error
    other = entry_path(cache, key(2))
    other.mkdir()
    (other / "something").write_bytes(b"keep me")
    assert cache.get(key(2)) is None
    assert (other / "something").read_bytes() == b"keep me"
    with pytest.raises(OSError):  # noqa: PT011 - documented: put raises OSError
        cache.put(key(2), b"data")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")) == []


def test_leftovers_of_a_crashed_writer_are_cleaned_at_open(tmp_path: Path) -> None:
    (tmp_path / ".tmp-abc.part").write_bytes(b"half")
    (tmp_path / ".tmp-dir").mkdir()  # odd, but must not stop the cache from opening
    (tmp_path / "unrelated.txt").write_bytes(b"not ours")
    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert ".tmp-abc.part" not in names
    assert "unrelated.txt" in names
    assert cache.statistics().entries == 0


def test_concurrent_writers_of_one_key(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    bodies = [bytes([n]) * (1000 + n) for n in range(16)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(bodies))

    def writer(body: bytes) -> None:
        try:
            barrier.wait()
            for _ in range(20):
                cache.put(key(), body)
                got = cache.get(key())
                assert got in bodies
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stats = cache.statistics()
    assert stats.entries == 1
    assert stats.bytes == entry_path(cache, key()).stat().st_size
    assert stats.corrupt == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []
    # a second cache opened on the same directory sees exactly that one entry
    again = DiskCache(tmp_path, max_bytes=1 << 20)
    assert again.get(key()) in bodies


def test_byte_bounds_of_zero(tmp_path: Path) -> None:
    full = DiskCache(tmp_path, max_bytes=1 << 20)
    for n in range(3):
        full.put(key(n), b"x" * 100)
    empty = DiskCache(tmp_path, max_bytes=0)  # opening enforces the bound: all evicted
    assert empty.statistics().entries == 0
    assert [p for p in tmp_path.iterdir() if p.suffix == ".bin"] == []
    assert not empty.put(key(), b"")  # even an empty payload has a header
    assert empty.get(key()) is None
    memory: LRUCache[str, bytes] = LRUCache(max_bytes=0, max_entries=10)
    assert not memory.put("a", b"x", 1)
    assert memory.get("a") is None
    counted: LRUCache[str, bytes] = LRUCache(max_bytes=100, max_entries=0)
    assert not counted.put("a", b"x", 1)
    assert len(counted) == 0


@pytest.mark.parametrize("bad", [-1, True, 1.5, None, "10"])
def test_bounds_are_validated(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        DiskCache(tmp_path, max_bytes=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_bytes"):
        LRUCache(max_bytes=bad, max_entries=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="size"):
        LRUCache(max_bytes=10, max_entries=1).put("k", b"", bad)  # type: ignore[arg-type]


def test_entries_survive_reopen_in_lru_order(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=3 * (45 + 100))
    for n in range(3):
        cache.put(key(n), bytes([n]) * 100)
        os.utime(entry_path(cache, key(n)), ns=(n * 10**9, n * 10**9))
    assert cache.get(key(0)) is not None  # most recent now (mtime updated)
    reopened = DiskCache(tmp_path, max_bytes=3 * (45 + 100))
    reopened.put(key(3), b"\x03" * 100)  # evicts the least recent: key 1
    assert reopened.get(key(1)) is None
    assert reopened.get(key(0)) == b"\x00" * 100
