"""Payload and observation caches of the scheduler (design §4.10).

* :class:`LRUCache`: an in-memory LRU bounded by bytes and by entry count.
* :class:`ObservationCache`: the LRU of source observations (defaults 8 MiB, 512
  entries), so one source read serves every kind of a run.
* :class:`PayloadKey`: (source identity, run GUID, kind, revision, renderer version,
  options), the identity of a rendered payload.
* :class:`DiskCache`: a size-bounded directory of payload files. Writes are atomic
  (a temporary file in the same directory, then ``os.replace``); every file carries a
  length and a SHA-256 of its body, so a corrupt or truncated entry is detected, counted
  as a miss and removed. Past its byte bound the least recently used entries are
  evicted (file modification times keep that order across restarts).
* :class:`PayloadCache`: a memory LRU in front of an optional :class:`DiskCache`.

Nothing here is async and nothing imports trio: :class:`DiskCache` blocks on file
I/O, so the scheduler actor calls it through ``trio.to_thread.run_sync``. It is safe to
use from several worker threads at once (one lock guards its index and the renames).
Its reads and writes take an abort flag, checked between chunks, so a caller that is
stopping can end them and wait for its thread instead of leaving it running.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import sys
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Final, Generic, Protocol, TypeVar

import attrs

from .._core import validate_count

__all__ = [
    "OBSERVATION_MAX_BYTES",
    "WRITE_CHUNK",
    "AbortFlag",
    "OBSERVATION_MAX_ENTRIES",
    "SIZE_SAMPLE",
    "CacheStatistics",
    "DiskCache",
    "DiskCacheStatistics",
    "LRUCache",
    "ObservationCache",
    "PayloadCache",
    "PayloadKey",
    "approximate_size",
]

K = TypeVar("K")
V = TypeVar("V")

#: Byte bound of the observation LRU (design §4.10).
OBSERVATION_MAX_BYTES = 8 * 1024 * 1024
#: Entry bound of the observation LRU (design §4.10).
OBSERVATION_MAX_ENTRIES = 512

_MAGIC = b"TAPC"
_VERSION = 1
_HEADER_SIZE = len(_MAGIC) + 1 + 8 + 32  # magic, version, body length, sha256(body)
_SUFFIX = ".bin"
_TEMP_PREFIX = ".tmp-"

#: Bytes a :class:`DiskCache` reads or writes between two checks of its abort flag.
WRITE_CHUNK: Final = 256 * 1024


class AbortFlag(Protocol):
    """What :meth:`DiskCache.put` and :meth:`DiskCache.get` check between chunks: a
    ``threading.Event`` fits."""

    def is_set(self) -> bool:
        """True once the call should stop."""
        ...


@attrs.frozen(kw_only=True)
class CacheStatistics:
    """Snapshot of an :class:`LRUCache`."""

    entries: int
    bytes: int
    """Sum of the entries' sizes, in bytes."""
    max_entries: int
    max_bytes: int
    hits: int
    misses: int
    evictions: int


class LRUCache(Generic[K, V]):
    """An in-memory least-recently-used cache bounded by bytes and count (design §4.10).

    The caller states each value's size in bytes. A value larger than ``max_bytes`` is
    not stored. ``get`` counts hits and misses and makes the entry most recent.

    Args:
        max_bytes: Upper bound on the sum of sizes, in bytes (>= 0).
        max_entries: Upper bound on the number of entries (>= 0).

    Raises:
        ValueError: a bound is not a non-negative int (names the parameter).
    """

    def __init__(self, *, max_bytes: int, max_entries: int) -> None:
        self._max_bytes = validate_count("max_bytes", max_bytes)
        self._max_entries = validate_count("max_entries", max_entries)
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        """Membership without touching recency or the hit counters."""
        return key in self._data

    @property
    def total_bytes(self) -> int:
        """Sum of the stored sizes, in bytes."""
        return self._bytes

    def get(self, key: K) -> V | None:
        """Return the value for ``key`` (now most recent), or None on a miss."""
        entry = self._data.get(key)
        if entry is None:
            self._misses += 1
            return None
        self._data.move_to_end(key)
        self._hits += 1
        return entry[0]

    def put(self, key: K, value: V, size: int) -> bool:
        """Store ``value`` of ``size`` bytes under ``key``, evicting the oldest entries.

        Returns:
            False (and nothing stored, an older value for ``key`` removed) when
            ``size`` exceeds ``max_bytes`` or ``max_entries`` is 0.

        Raises:
            ValueError: ``size`` is not a non-negative int.
        """
        validate_count("size", size)
        self.discard(key)
        if size > self._max_bytes or self._max_entries == 0:
            return False
        self._data[key] = (value, size)
        self._bytes += size
        while self._bytes > self._max_bytes or len(self._data) > self._max_entries:
            _old, (_value, old_size) = self._data.popitem(last=False)
            self._bytes -= old_size
            self._evictions += 1
        return True

    def discard(self, key: K) -> None:
        """Remove ``key`` if present."""
        entry = self._data.pop(key, None)
        if entry is not None:
            self._bytes -= entry[1]

    def clear(self) -> None:
        """Remove every entry (counters are kept)."""
        self._data.clear()
        self._bytes = 0

    def statistics(self) -> CacheStatistics:
        """Return a snapshot of sizes and counters."""
        return CacheStatistics(
            entries=len(self._data),
            bytes=self._bytes,
            max_entries=self._max_entries,
            max_bytes=self._max_bytes,
            hits=self._hits,
            misses=self._misses,
            evictions=self._evictions,
        )


class ObservationCache(LRUCache[K, V]):
    """The LRU of source observations: 8 MiB and 512 entries by default (design §4.10).

    Holds only conclusive observations: a progressive (parked) one is never cached
    (design §4.5).
    """

    def __init__(
        self, *, max_bytes: int = OBSERVATION_MAX_BYTES, max_entries: int = OBSERVATION_MAX_ENTRIES
    ) -> None:
        super().__init__(max_bytes=max_bytes, max_entries=max_entries)


#: Items :func:`approximate_size` samples per container (first items first): a result
#: is sized on the event loop each time a kind that others need is published.
SIZE_SAMPLE = 32


def approximate_size(value: Any) -> int:
    """A rough size in bytes of a result, for the observation cache's byte bound.

    Exact for bytes-like values and ``str`` (UTF-8 length); ``nbytes`` for array-like
    values (numpy); ``None``, ``bool``, ``int`` and ``float`` count as their usual object
    size (16, 28, 28 and 24 bytes); containers are summed from their first
    :data:`SIZE_SAMPLE` items (keys and values), scaled to their length, at most 4
    levels deep; anything else is ``sys.getsizeof``. Always at least 1.
    """
    return max(1, _size(value, 0))


#: Sizes of the scalars JSON results are made of: a result is sized on the event loop,
#: and most of its items are these.
_SCALAR_SIZES: Final[dict[type, int]] = {type(None): 16, bool: 28, int: 28, float: 24}
_CONTAINERS: Final = (dict, list, tuple, set, frozenset)


def _size(value: Any, depth: int) -> int:
    kind = type(value)
    scalar = _SCALAR_SIZES.get(kind)
    if scalar is not None:
        return scalar
    if isinstance(value, str):  # isascii() is O(1): no copy of a long ASCII text
        return len(value) if value.isascii() else len(value.encode("utf-8", errors="replace"))
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if kind not in _CONTAINERS:
        nbytes = getattr(value, "nbytes", None)
        if isinstance(nbytes, int) and not isinstance(nbytes, bool):
            return nbytes
    size = sys.getsizeof(value, 64)
    if depth >= 4 or not isinstance(value, _CONTAINERS) or not value:
        return size
    sample = 0
    if isinstance(value, dict):
        for key, item in itertools.islice(value.items(), SIZE_SAMPLE):
            sample += _size(key, depth + 1) + _size(item, depth + 1)
    else:
        for item in itertools.islice(value, SIZE_SAMPLE):
            sample += _size(item, depth + 1)
    return size + sample * len(value) // min(len(value), SIZE_SAMPLE)


def _check_text(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{attribute.name} must be a str, got {value!r}")


@attrs.frozen(kw_only=True)
class PayloadKey:
    """Identity of one rendered payload (design §4.10)."""

    source: str = attrs.field(validator=_check_text)
    """Identity of the source (e.g. the database path)."""
    guid: str = attrs.field(validator=_check_text)
    """The run's GUID."""
    kind: str = attrs.field(validator=_check_text)
    """The kind of work, as declared (e.g. ``"summary"``)."""
    revision: str = attrs.field(validator=_check_text)
    """Source revision the payload was drawn from."""
    renderer_version: str = attrs.field(validator=_check_text)
    """Version of the renderer that drew it."""
    options: str = attrs.field(validator=_check_text)
    """Canonical text of the rendering options (e.g. sorted-key JSON)."""

    def digest(self) -> str:
        """SHA-256 hex digest of the key: the entry's file name in a :class:`DiskCache`."""
        text = json.dumps(
            [self.source, self.guid, self.kind, self.revision, self.renderer_version, self.options],
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@attrs.frozen(kw_only=True)
class DiskCacheStatistics:
    """Snapshot of a :class:`DiskCache`."""

    entries: int
    bytes: int
    """Sum of the entry files' sizes (header included), in bytes."""
    max_bytes: int
    hits: int
    misses: int
    corrupt: int
    """Entries found corrupt or truncated (each counted as a miss and removed)."""
    evictions: int


class DiskCache:
    """A size-bounded directory of payload files with atomic writes (design §4.10).

    Blocking: call it from a worker thread (``trio.to_thread.run_sync``). Thread-safe.
    Opening scans the directory: leftover temporary files are removed, entries are
    ordered by modification time (oldest first), and the byte bound is enforced.

    Args:
        directory: The cache directory; created if missing.
        max_bytes: Bound on the sum of entry file sizes, in bytes (>= 0).
        fsync: Flush each entry to stable storage before it becomes visible. Off by
            default: a file cut short by a power loss is detected by its checksum.

    Raises:
        ValueError: ``max_bytes`` is not a non-negative int.
        OSError: the directory cannot be created or listed.
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, max_bytes: int, fsync: bool = False
    ) -> None:
        self._max_bytes = validate_count("max_bytes", max_bytes)
        self._dir = Path(directory)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._lock = threading.Lock()
        self._index: OrderedDict[str, int] = OrderedDict()  # file name -> size, oldest first
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._absent = 0
        self._corrupt = 0
        self._evictions = 0
        found: list[tuple[int, str, int]] = []
        with os.scandir(self._dir) as entries:
            for entry in entries:
                if entry.name.startswith(_TEMP_PREFIX):
                    if not entry.is_dir(follow_symlinks=False):
                        _unlink(entry.path)  # a crashed writer's leftover
                elif entry.name.endswith(_SUFFIX) and entry.is_file():
                    stat = entry.stat()
                    found.append((stat.st_mtime_ns, entry.name, stat.st_size))
        for _mtime, name, size in sorted(found):
            self._index[name] = size
            self._bytes += size
        with self._lock:
            self._evict_locked()

    @property
    def directory(self) -> Path:
        """The cache directory."""
        return self._dir

    def absent(self, key: PayloadKey) -> bool:
        """Whether ``key`` has no entry in this cache's index: a miss known without file
        I/O (counted as one), so it may be asked on the event loop.

        The index holds the entries found when the cache was opened and those written
        through it since; an entry another process writes into the directory later is
        not known (as for the byte bound) and is overwritten by the next ``put``. Never
        takes the lock (a write in a worker thread may hold it); call it from one thread.
        """
        if key.digest() + _SUFFIX in self._index:  # one dict lookup: atomic under the GIL
            return False
        self._absent += 1  # its own counter: the lock-holding threads never touch it
        return True

    def get(self, key: PayloadKey, *, abort: AbortFlag | None = None) -> bytes | None:
        """Return the payload stored for ``key``, or None.

        A corrupt or truncated entry (bad magic, length or checksum; larger than
        ``max_bytes``, which no entry can be; or a directory in its place) is a miss and
        is removed (a directory only if empty). A hit makes the entry most recent.

        Args:
            key: The entry's identity.
            abort: A flag another thread may set to stop the read between chunks
                of ``WRITE_CHUNK`` bytes (256 KiB); the read is then a miss (not
                counted, the entry kept). None: never stopped.

        Raises:
            OSError: the entry exists but cannot be read (e.g. no permission).
        """
        name = key.digest() + _SUFFIX
        path = self._dir / name
        with self._lock:
            try:
                raw = _read_entry(path, self._max_bytes, abort)
            except _Aborted:
                return None
            except FileNotFoundError:
                self._forget_locked(name)
                self._misses += 1
                return None
            except IsADirectoryError:
                raw = None
                with contextlib.suppress(OSError):
                    os.rmdir(path)  # only if empty: its content is not ours to delete
            body = None if raw is None else _decode(raw)
            if raw is None or body is None:
                self._corrupt += 1
                self._misses += 1
                self._forget_locked(name)
                if raw is not None or path.is_file():
                    _unlink(path)
                return None
            self._hits += 1
            if name not in self._index:
                self._bytes += len(raw)
            self._index[name] = len(raw)
            self._index.move_to_end(name)
            with contextlib.suppress(OSError):
                os.utime(path)  # keep LRU order across restarts
            return body

    def put(self, key: PayloadKey, data: bytes, *, abort: AbortFlag | None = None) -> bool:
        """Store ``data`` for ``key`` atomically, then evict oldest entries past the bound.

        The temporary file is written in chunks of ``WRITE_CHUNK`` bytes (256 KiB),
        outside the lock (only the rename and the index take it). ``abort`` is checked before
        each chunk and before the rename: once it is set the write stops, its temporary
        file is removed and nothing is stored, so a caller that is stopping can wait
        for the thread instead of leaving it writing (design §4.10).

        Args:
            key: The entry's identity.
            data: The payload, bytes-like.
            abort: A flag (e.g. a ``threading.Event``) another thread may set to stop
                the write between chunks; None: never stopped.

        Returns:
            False (nothing stored) when the entry alone would exceed ``max_bytes``, or
            when ``abort`` was set before the entry became visible.

        Raises:
            TypeError: ``data`` is not bytes-like.
            OSError: the file could not be written (no partial entry is left).
        """
        blob = _encode(bytes(data))
        name = key.digest() + _SUFFIX
        if len(blob) > self._max_bytes or _raised(abort):
            return False
        fd, temp = tempfile.mkstemp(dir=self._dir, prefix=_TEMP_PREFIX, suffix=".part")
        try:
            with os.fdopen(fd, "wb") as handle:
                view = memoryview(blob)
                for start in range(0, len(blob), WRITE_CHUNK):
                    if _raised(abort):
                        break
                    handle.write(view[start : start + WRITE_CHUNK])
                else:
                    if self._fsync:
                        handle.flush()
                        os.fsync(handle.fileno())
        except BaseException:
            _unlink(temp)
            raise
        with self._lock:
            if _raised(abort):
                _unlink(temp)
                return False
            try:
                os.replace(temp, self._dir / name)
            except BaseException:
                _unlink(temp)
                raise
            self._forget_locked(name)
            self._index[name] = len(blob)
            self._bytes += len(blob)
            self._evict_locked()
            return True

    def discard(self, key: PayloadKey) -> None:
        """Remove the entry for ``key`` if present."""
        name = key.digest() + _SUFFIX
        with self._lock:
            self._forget_locked(name)
            _unlink(self._dir / name)

    def statistics(self) -> DiskCacheStatistics:
        """Return a snapshot of sizes and counters."""
        with self._lock:
            return DiskCacheStatistics(
                entries=len(self._index),
                bytes=self._bytes,
                max_bytes=self._max_bytes,
                hits=self._hits,
                misses=self._misses + self._absent,
                corrupt=self._corrupt,
                evictions=self._evictions,
            )

    def _forget_locked(self, name: str) -> None:
        size = self._index.pop(name, None)
        if size is not None:
            self._bytes -= size

    def _evict_locked(self) -> None:
        while self._bytes > self._max_bytes and self._index:
            name, size = self._index.popitem(last=False)
            self._bytes -= size
            self._evictions += 1
            _unlink(self._dir / name)


class PayloadCache:
    """A memory LRU of payloads in front of an optional :class:`DiskCache` (design §4.10).

    The scheduler actor consults :attr:`memory` on the event loop and :attr:`disk` in a
    worker thread; see :class:`~actors.SchedulerActor`.

    Args:
        memory_max_bytes: Byte bound of the memory LRU (default 64 MiB).
        memory_max_entries: Entry bound of the memory LRU (default 1024).
        directory: Disk cache directory, or None for memory only.
        disk_max_bytes: Byte bound of the disk cache (default 256 MiB).

    Raises:
        ValueError: a bound is not a non-negative int.
        OSError: the directory cannot be created or listed (blocking: construct it
            before the event loop runs, or in a worker thread).
    """

    def __init__(
        self,
        *,
        memory_max_bytes: int = 64 * 1024 * 1024,
        memory_max_entries: int = 1024,
        directory: str | os.PathLike[str] | None = None,
        disk_max_bytes: int = 256 * 1024 * 1024,
    ) -> None:
        self.memory: LRUCache[PayloadKey, bytes] = LRUCache(
            max_bytes=memory_max_bytes, max_entries=memory_max_entries
        )
        """The memory level: an LRU of payloads, consulted on the event loop."""
        self.disk = None if directory is None else DiskCache(directory, max_bytes=disk_max_bytes)
        """The disk level, or None; it blocks, so it is consulted in a worker thread."""


def _encode(body: bytes) -> bytes:
    digest = hashlib.sha256(body).digest()
    return b"".join((_MAGIC, bytes([_VERSION]), len(body).to_bytes(8, "big"), digest, body))


def _decode(raw: bytes) -> bytes | None:
    if len(raw) < _HEADER_SIZE or raw[:4] != _MAGIC or raw[4] != _VERSION:
        return None
    length = int.from_bytes(raw[5:13], "big")
    body = raw[_HEADER_SIZE:]
    if len(body) != length or hashlib.sha256(body).digest() != raw[13:_HEADER_SIZE]:
        return None
    return body


class _Aborted(Exception):
    """A read stopped at its abort flag."""


def _raised(abort: AbortFlag | None) -> bool:
    return abort is not None and abort.is_set()


def _read_entry(path: Path, limit: int, abort: AbortFlag | None = None) -> bytes | None:
    # The entry's bytes, or None when the file is larger than any entry can be (a
    # damaged or foreign file must not be read into memory whole). Read in chunks so
    # that a set abort flag stops it (raises _Aborted).
    with path.open("rb") as handle:
        if os.fstat(handle.fileno()).st_size > limit:
            return None
        parts: list[bytes] = []
        left = limit + 1
        while left > 0:
            if _raised(abort):
                raise _Aborted
            part = handle.read(min(WRITE_CHUNK, left))
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)


def _unlink(path: str | os.PathLike[str]) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
