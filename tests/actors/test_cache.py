"""Tests of the payload and observation caches (design §4.10)."""

from __future__ import annotations

import os
import sys

import pytest
import trio

from actors._scheduler._cache import (
    OBSERVATION_MAX_BYTES,
    OBSERVATION_MAX_ENTRIES,
    WRITE_CHUNK,
    DiskCache,
    LRUCache,
    ObservationCache,
    PayloadCache,
    PayloadKey,
    approximate_size,
)


def key(n: int = 1, **changes: str) -> PayloadKey:
    fields = {
        "source": "/data/db.sqlite",
        "guid": f"guid-{n}",
        "kind": "thumbnail",
        "revision": "rev-1",
        "renderer_version": "1",
        "options": '{"size":[160,120]}',
    }
    fields.update(changes)
    return PayloadKey(**fields)


# --- memory LRU ---------------------------------------------------------------------------


def test_lru_evicts_least_recently_used_past_the_count_bound():
    cache = LRUCache(max_bytes=1000, max_entries=3)
    for name in "abc":
        assert cache.put(name, name.upper(), 1)
    assert cache.get("a") == "A"  # a is now the most recent
    cache.put("d", "D", 1)
    assert "b" not in cache
    assert [n for n in "abcd" if n in cache] == ["a", "c", "d"]
    stats = cache.statistics()
    assert (stats.entries, stats.bytes, stats.evictions, stats.hits) == (3, 3, 1, 1)


def test_lru_evicts_oldest_past_the_byte_bound():
    cache = LRUCache(max_bytes=100, max_entries=100)
    cache.put("a", b"a", 40)
    cache.put("b", b"b", 40)
    cache.put("c", b"c", 30)  # 110 bytes > 100: a goes
    assert "a" not in cache
    assert cache.total_bytes == 70
    assert cache.get("missing") is None
    assert cache.statistics().misses == 1


def test_lru_refuses_an_entry_larger_than_the_bound_and_drops_the_old_value():
    cache = LRUCache(max_bytes=10, max_entries=5)
    cache.put("k", "small", 5)
    assert not cache.put("k", "huge", 11)
    assert "k" not in cache
    assert cache.total_bytes == 0


def test_lru_replacing_a_key_updates_its_size():
    cache = LRUCache(max_bytes=10, max_entries=5)
    cache.put("k", "v1", 4)
    cache.put("k", "v2", 6)
    assert (len(cache), cache.total_bytes, cache.get("k")) == (1, 6, "v2")
    cache.discard("k")
    cache.discard("k")
    assert cache.total_bytes == 0


@pytest.mark.parametrize("bad", [-1, True, 1.5, None])
def test_lru_validates_bounds_and_sizes(bad):
    with pytest.raises(ValueError, match="max_bytes"):
        LRUCache(max_bytes=bad, max_entries=1)
    with pytest.raises(ValueError, match="size"):
        LRUCache(max_bytes=1, max_entries=1).put("k", "v", bad)


def test_observation_cache_defaults_are_8_mib_and_512_entries():
    cache = ObservationCache()
    stats = cache.statistics()
    assert (stats.max_bytes, stats.max_entries) == (8 * 1024 * 1024, 512)
    assert (OBSERVATION_MAX_BYTES, OBSERVATION_MAX_ENTRIES) == (8 * 1024 * 1024, 512)
    for i in range(513):
        cache.put(i, {"rows": i}, 100)
    assert len(cache) == 512
    assert 0 not in cache
    cache.put("big", "x", 8 * 1024 * 1024 - 100)  # pushes out most entries by bytes
    assert cache.total_bytes <= 8 * 1024 * 1024


# --- payload keys ---------------------------------------------------------------------------


def test_payload_key_digest_depends_on_every_field():
    base = key()
    digests = {base.digest()}
    for field in ("source", "guid", "kind", "revision", "renderer_version", "options"):
        digests.add(key(**{field: "other"}).digest())
    assert len(digests) == 7
    assert key().digest() == base.digest()  # stable


def test_payload_key_validates_fields():
    with pytest.raises(ValueError, match="revision"):
        key(revision=3)  # type: ignore[arg-type]


# --- disk cache ----------------------------------------------------------------------------


def entry_path(cache: DiskCache, k: PayloadKey):
    return cache.directory / (k.digest() + ".bin")


def test_disk_cache_round_trip_and_persistence(tmp_path):
    cache = DiskCache(tmp_path / "c", max_bytes=10_000)
    assert cache.get(key()) is None
    assert cache.put(key(), b"\x89PNG payload")
    assert cache.get(key()) == b"\x89PNG payload"
    reopened = DiskCache(tmp_path / "c", max_bytes=10_000)
    assert reopened.get(key()) == b"\x89PNG payload"
    stats = reopened.statistics()
    assert (stats.entries, stats.hits, stats.misses) == (1, 1, 0)
    assert stats.bytes == entry_path(reopened, key()).stat().st_size


def test_absent_knows_a_miss_from_the_index_without_reading(tmp_path):
    cache = DiskCache(tmp_path, max_bytes=10_000)
    assert cache.absent(key(1))  # never written: no file is opened
    cache.put(key(1), b"png")
    assert not cache.absent(key(1))
    reopened = DiskCache(tmp_path, max_bytes=10_000)
    assert not reopened.absent(key(1))  # found by the scan at open
    assert reopened.absent(key(2))
    (tmp_path / (key(1).digest() + ".bin")).write_bytes(b"damaged")
    assert not reopened.absent(key(1))  # still known: the read finds it corrupt
    assert reopened.get(key(1)) is None
    assert reopened.absent(key(1))  # removed from the index with the file
    stats = reopened.statistics()
    assert (stats.misses, stats.corrupt, stats.entries) == (3, 1, 0)


def test_disk_writes_are_atomic_no_temp_file_left(tmp_path, monkeypatch):
    cache = DiskCache(tmp_path, max_bytes=10_000)
    cache.put(key(), b"old")
    assert sorted(p.name for p in tmp_path.iterdir()) == [key().digest() + ".bin"]

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        cache.put(key(), b"new")
    monkeypatch.undo()
    # The old entry is intact and no partial file is left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == [key().digest() + ".bin"]
    assert cache.get(key()) == b"old"


def test_leftover_temp_files_are_removed_at_open(tmp_path):
    (tmp_path / ".tmp-abc.part").write_bytes(b"half a payl")
    DiskCache(tmp_path, max_bytes=100)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda raw: raw[:-1], id="truncated-body"),
        pytest.param(lambda raw: raw[:20], id="truncated-header"),
        pytest.param(lambda raw: b"", id="empty"),
        pytest.param(lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]), id="flipped-bit"),
        pytest.param(lambda raw: raw + b"extra", id="trailing-bytes"),
        pytest.param(lambda raw: b"JUNK" + raw[4:], id="bad-magic"),
    ],
)
def test_corrupt_or_truncated_entry_is_a_miss_and_removed(tmp_path, damage):
    cache = DiskCache(tmp_path, max_bytes=10_000)
    cache.put(key(), b"a payload of some length")
    path = entry_path(cache, key())
    path.write_bytes(damage(path.read_bytes()))
    assert cache.get(key()) is None
    assert not path.exists()
    stats = cache.statistics()
    assert (stats.corrupt, stats.misses, stats.entries, stats.bytes) == (1, 1, 0, 0)
    cache.put(key(), b"fresh")  # the slot is usable again
    assert cache.get(key()) == b"fresh"


def test_disk_cache_evicts_oldest_past_its_byte_bound(tmp_path):
    blob = b"x" * 100
    size = 45 + len(blob)  # header + body
    cache = DiskCache(tmp_path, max_bytes=3 * size)
    for n in (1, 2, 3):
        cache.put(key(n), blob)
    assert cache.get(key(1)) == blob  # 1 becomes the most recent
    cache.put(key(4), blob)
    assert not entry_path(cache, key(2)).exists()
    assert [cache.get(key(n)) is not None for n in (1, 2, 3, 4)] == [True, False, True, True]
    stats = cache.statistics()
    assert (stats.entries, stats.bytes, stats.evictions) == (3, 3 * size, 1)


def test_disk_cache_refuses_an_entry_larger_than_its_bound(tmp_path):
    cache = DiskCache(tmp_path, max_bytes=50)
    assert not cache.put(key(), b"x" * 10)
    assert list(tmp_path.iterdir()) == []


def test_disk_cache_open_enforces_the_bound_oldest_first(tmp_path):
    big = DiskCache(tmp_path, max_bytes=10_000)
    for n in (1, 2, 3):
        big.put(key(n), b"y" * 100)
        os.utime(entry_path(big, key(n)), ns=(n * 10**9, n * 10**9))
    small = DiskCache(tmp_path, max_bytes=2 * 145)
    assert small.get(key(1)) is None
    assert small.get(key(2)) == small.get(key(3)) == b"y" * 100


def test_disk_cache_discard(tmp_path):
    cache = DiskCache(tmp_path, max_bytes=1000)
    cache.put(key(), b"z")
    cache.discard(key())
    cache.discard(key())
    assert cache.get(key()) is None
    assert cache.statistics().bytes == 0


async def test_disk_cache_is_safe_from_several_worker_threads(tmp_path):
    cache = DiskCache(tmp_path, max_bytes=20 * 1000)

    async def writer(n: int) -> None:
        for i in range(10):
            await trio.to_thread.run_sync(cache.put, key(n * 100 + i), bytes([n]) * 500)

    async with trio.open_nursery() as nursery:
        for n in range(4):
            nursery.start_soon(writer, n)
    stats = cache.statistics()
    files = [p for p in tmp_path.iterdir()]
    assert stats.bytes <= 20 * 1000
    assert stats.entries == len(files)
    assert stats.bytes == sum(p.stat().st_size for p in files)


def test_payload_cache_memory_only_and_with_disk(tmp_path):
    memory_only = PayloadCache()
    assert memory_only.disk is None
    both = PayloadCache(directory=tmp_path / "payloads", disk_max_bytes=1000)
    assert both.disk is not None
    assert both.disk.directory == tmp_path / "payloads"
    both.memory.put(key(), b"png", 3)
    assert both.memory.get(key()) == b"png"


def test_approximate_size_of_common_results():
    assert approximate_size(b"12345") == 5
    assert approximate_size("é") == 2
    assert approximate_size(b"") == 1

    class Array:
        nbytes = 8000

    assert approximate_size(Array()) == 8000
    small = approximate_size({"x": [1.0] * 10})
    large = approximate_size({"x": [1.0] * 10_000})
    assert large > 100 * small / 2  # long lists are estimated, not ignored
    assert approximate_size([[[[[b"deep"]]]]]) > 0
    text = "x" * 10_000  # a long ASCII text (base64) counts in full, wherever it is
    result = {**{f"k{n}": n for n in range(30)}, "images": {"thumbnail": text}}
    assert 10_000 < approximate_size(result) < 12_000
    one = {"é": "é" * 3}  # UTF-8 lengths, key and value
    assert approximate_size(one) == sys.getsizeof(one) + 2 + 6


class FlagAfter:
    """An abort flag that goes up at its ``n``-th check (the checks are between chunks)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.checks = 0

    def is_set(self) -> bool:
        self.checks += 1
        return self.checks >= self.n


def test_an_aborted_write_stops_between_chunks_and_leaves_nothing(tmp_path):
    cache = DiskCache(tmp_path, max_bytes=10 * WRITE_CHUNK)
    flag = FlagAfter(3)  # up after the check before the write and one chunk
    assert cache.put(key(), b"x" * (4 * WRITE_CHUNK), abort=flag) is False
    assert flag.checks == 4  # stopped after one chunk of four (then: no rename)
    assert list(tmp_path.iterdir()) == []  # no temporary file, no entry
    assert cache.statistics().entries == 0
    assert cache.get(key()) is None
    assert cache.put(key(), b"x" * (4 * WRITE_CHUNK), abort=FlagAfter(10**6)) is True


def test_an_aborted_read_is_a_miss_that_keeps_the_entry(tmp_path):
    cache = DiskCache(tmp_path, max_bytes=10 * WRITE_CHUNK)
    blob = os.urandom(3 * WRITE_CHUNK)
    cache.put(key(), blob)
    assert cache.get(key(), abort=FlagAfter(2)) is None
    stats = cache.statistics()
    assert (stats.entries, stats.corrupt) == (1, 0)
    assert cache.get(key()) == blob
