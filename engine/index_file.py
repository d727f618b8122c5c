"""IndexFile / IndexService: RocketMQ's key index, a hash table with chaining laid out in a file.

File layout (big-endian), ``HEADER_SIZE + slots * SLOT_SIZE + max_entries * ENTRY_SIZE`` bytes:

    header (40 bytes)
    offset  size  field
    0       8     beginTimestamp  store timestamp (ms) of the first entry; 0 while empty
    8       8     endTimestamp    largest store timestamp (ms) indexed
    16      8     beginPhyOffset  smallest CommitLog offset indexed
    24      8     endPhyOffset    largest CommitLog offset indexed
    32      4     hashSlotCount   number of slots
    36      4     indexCount      next entry number; starts at 1 so that slot value 0 means empty

    slots: hashSlotCount x int32, the number of the newest entry whose key hashes to the slot

    entry (20 bytes), entry 0 is never used
    offset  size  field
    0       4     keyHash     see key_hash()
    4       8     phyOffset   where the CommitLog entry holding the key starts
    12      4     timeDiff    whole seconds from beginTimestamp to the entry's store timestamp
    16      4     preIndexNo  the previous entry of the same slot, 0 = end of chain

A file holds ``max_entries - 1`` entries. Lookups return phy offsets only: different keys share
hashes, so the caller reads the CommitLog entry and checks the key. Files are named by their
creation time, ``yyyyMMddHHmmssSSS`` in local time as RocketMQ does, so name order is age order.
"""
from __future__ import annotations

import logging
import mmap
import os
import struct
import threading
import time
import zlib
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

HEADER = struct.Struct(">qqqqii")  # begin ts, end ts, begin phy, end phy, slot count, index count
SLOT = struct.Struct(">i")  # newest entry number in the slot
ENTRY = struct.Struct(">iqii")  # keyHash, phyOffset, timeDiff, preIndexNo
HEADER_SIZE = HEADER.size
SLOT_SIZE = SLOT.size
ENTRY_SIZE = ENTRY.size
INVALID_INDEX = 0
INT32_MAX = 2**31 - 1
NAME_DIGITS = 17  # yyyyMMddHHmmssSSS


class IndexHeader(NamedTuple):
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 1


class IndexEntry(NamedTuple):
    key_hash: int
    phy_offset: int
    time_diff: int
    pre_index_no: int


def read_header(buf: mmap.mmap | bytes | bytearray) -> IndexHeader:
    return IndexHeader._make(HEADER.unpack_from(buf, 0))


def write_header(buf: mmap.mmap | bytearray, header: IndexHeader) -> None:
    HEADER.pack_into(buf, 0, *header)


def read_entry(buf: mmap.mmap | bytes | bytearray, pos: int) -> IndexEntry:
    return IndexEntry._make(ENTRY.unpack_from(buf, pos))


def write_entry(buf: mmap.mmap | bytearray, pos: int, entry: IndexEntry) -> None:
    ENTRY.pack_into(buf, pos, *entry)


def key_hash(key: bytes) -> int:
    """CRC-32 (zlib) of the key bytes, top bit cleared: stable, non-negative, fast in Python.

    RocketMQ uses abs(String.hashCode()); only this store reads these files, so any stable hash
    works, and a C-speed one keeps the per-key cost low.
    """
    return zlib.crc32(key) & INT32_MAX


def file_size(hash_slots: int, max_entries: int) -> int:
    return HEADER_SIZE + hash_slots * SLOT_SIZE + max_entries * ENTRY_SIZE


def file_name(now_ms: int, after: str | None = None) -> str:
    """``yyyyMMddHHmmssSSS`` for now_ms in local time, bumped by 1 ms steps past ``after``."""
    stamp = datetime.fromtimestamp(now_ms // 1000).replace(microsecond=now_ms % 1000 * 1000)
    if after is not None and _format_name(stamp) <= after:
        # same millisecond, or the clock went back: follow the newest name so order stays age order
        stamp = datetime.strptime(after + "000", "%Y%m%d%H%M%S%f") + timedelta(milliseconds=1)
    return _format_name(stamp)


def _format_name(stamp: datetime) -> str:
    return stamp.strftime("%Y%m%d%H%M%S") + f"{stamp.microsecond // 1000:03d}"


def is_index_file_name(name: str) -> bool:
    if len(name) != NAME_DIGITS or not name.isdigit():
        return False
    try:
        datetime.strptime(name + "000", "%Y%m%d%H%M%S%f")
    except ValueError:
        return False
    return True


class IndexFile:
    """One mapped IndexFile. put() comes from one thread; lookup() may run on another."""

    def __init__(self, path: Path, fd: int, mm: mmap.mmap, header: IndexHeader) -> None:
        self.path = path
        self.hash_slots = header.hash_slot_count
        self.max_entries = (len(mm) - HEADER_SIZE - self.hash_slots * SLOT_SIZE) // ENTRY_SIZE
        self.begin_timestamp = header.begin_timestamp
        self.end_timestamp = header.end_timestamp
        self.begin_phy_offset = header.begin_phy_offset
        self.end_phy_offset = header.end_phy_offset
        self.index_count = header.index_count
        self._entries_at = HEADER_SIZE + self.hash_slots * SLOT_SIZE
        self._fd = fd
        self._mm = mm
        self._dirty = False
        self._io_lock = threading.Lock()  # a flush must not race close() onto a reused fd
        self.closed = False

    def __repr__(self) -> str:
        return f"IndexFile({self.path.name}, {self.entry_count} entries)"

    @classmethod
    def create(cls, path: Path, hash_slots: int, max_entries: int) -> IndexFile:
        """A new zeroed file of full size, its blocks reserved (a full disk fails here, not later)."""
        if hash_slots <= 0 or max_entries <= 1:
            raise ValueError(f"{path}: need hash_slots > 0 and max_entries > 1")
        size = file_size(hash_slots, max_entries)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.ftruncate(fd, size)
            # Writing a hole of a mapping on a full disk is a SIGBUS; reserving makes it ENOSPC now.
            os.posix_fallocate(fd, 0, size)
            mm = mmap.mmap(fd, size)
        except OSError as exc:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise OSError(exc.errno, f"cannot create index file {path} ({size} bytes): "
                          f"{exc.strerror}", str(path)) from exc
        header = IndexHeader(hash_slot_count=hash_slots)
        write_header(mm, header)
        return cls(path, fd, mm, header)

    @classmethod
    def open(cls, path: Path) -> IndexFile:
        """Map an existing file; ValueError when its header does not fit its size."""
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if size < HEADER_SIZE:
                raise ValueError(f"{path}: {size} bytes is shorter than the header")
            mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        header = read_header(mm)
        max_entries = (size - HEADER_SIZE - header.hash_slot_count * SLOT_SIZE) // ENTRY_SIZE
        if header.hash_slot_count <= 0 or max_entries <= 1 \
                or not 1 <= header.index_count <= max_entries:
            mm.close()
            os.close(fd)
            raise ValueError(f"{path}: header {header} does not fit a {size}-byte file")
        return cls(path, fd, mm, header)

    @property
    def entry_count(self) -> int:
        return self.index_count - 1

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.max_entries

    def overlaps(self, begin_ms: int, end_ms: int) -> bool:
        """Whether any entry can have a store timestamp in [begin_ms, end_ms]."""
        return self.entry_count > 0 and self.begin_timestamp <= end_ms \
            and self.end_timestamp >= begin_ms

    def put(self, key: bytes, phy_offset: int, store_timestamp_ms: int) -> bool:
        """Index ``key`` at ``phy_offset``; False when the file is full."""
        if self.is_full:
            return False
        number = self.index_count
        if number == 1:
            self.begin_timestamp, self.begin_phy_offset = store_timestamp_ms, phy_offset
        khash = key_hash(key)
        slot_pos = HEADER_SIZE + (khash % self.hash_slots) * SLOT_SIZE
        (head,) = SLOT.unpack_from(self._mm, slot_pos)
        if not INVALID_INDEX < head < number:  # left over from a crash that lost the header
            head = INVALID_INDEX
        # Clock went back before the first entry: index it at the file's begin, as RocketMQ does.
        diff = min(max(store_timestamp_ms - self.begin_timestamp, 0) // 1000, INT32_MAX)
        write_entry(self._mm, self._entries_at + number * ENTRY_SIZE,
                    IndexEntry(khash, phy_offset, diff, head))
        # Count before slot: a concurrent lookup only follows slot values below index_count.
        self.index_count = number + 1
        SLOT.pack_into(self._mm, slot_pos, number)
        self.end_timestamp = max(self.end_timestamp, store_timestamp_ms)
        # Min / max, not first / last: re-indexing after a restart may repeat older offsets.
        self.begin_phy_offset = min(self.begin_phy_offset, phy_offset)
        self.end_phy_offset = max(self.end_phy_offset, phy_offset)
        write_header(self._mm, self.header())
        self._dirty = True
        return True

    def header(self) -> IndexHeader:
        return IndexHeader(self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                           self.end_phy_offset, self.hash_slots, self.index_count)

    def lookup(self, key: bytes, begin_ms: int, end_ms: int, max_count: int) -> list[int]:
        """Phy offsets of entries hashing like ``key`` in [begin_ms, end_ms], newest first.

        Entries keep whole seconds, so an entry matches when its second overlaps the range: no
        entry in range is missed, one up to 999 ms outside may be returned.
        """
        count = self.index_count
        if max_count <= 0 or count <= 1:
            return []
        khash = key_hash(key)
        mm, entries_at, base = self._mm, self._entries_at, self.begin_timestamp
        (number,) = SLOT.unpack_from(mm, HEADER_SIZE + (khash % self.hash_slots) * SLOT_SIZE)
        found: list[int] = []
        # Chains only point at older entries, so requiring a decrease also stops a damaged cycle.
        while INVALID_INDEX < number < count and len(found) < max_count:
            entry_hash, phy, diff, previous = ENTRY.unpack_from(mm, entries_at + number * ENTRY_SIZE)
            low = base + diff * 1000
            if entry_hash == khash and low <= end_ms and low + 999 >= begin_ms:
                found.append(phy)
            if previous >= number:
                break
            number = previous
        return found

    def flush(self) -> None:
        """fdatasync the file if it changed; safe from a worker thread, a no-op once closed."""
        with self._io_lock:
            if self.closed or not self._dirty:
                return
            self._dirty = False
            try:
                os.fdatasync(self._fd)  # a shared mapping's dirty pages are the file's pages
            except OSError:
                self._dirty = True
                raise

    def close(self) -> None:
        with self._io_lock:
            if self.closed:
                return
            self.closed = True
            self._mm.close()
            os.close(self._fd)

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class IndexService:
    """The directory of IndexFiles, oldest first; the last one takes new keys.

    put_keys / truncate_after / delete_files_below / flush may run on different threads and
    serialize on a lock; query reads a snapshot (the tuple is replaced, never changed in place)
    without it.
    """

    def __init__(self, directory: Path, hash_slots: int, max_entries: int) -> None:
        self.directory = directory
        self.hash_slots = hash_slots
        self.max_entries = max_entries
        self.files: tuple[IndexFile, ...] = ()
        self._lock = threading.Lock()
        self._reindex_from: int | None = None  # set when load dropped damaged files

    def load(self) -> None:
        """Open the existing files; a damaged one and every later one are deleted."""
        self.directory.mkdir(parents=True, exist_ok=True)
        names = sorted(p.name for p in self.directory.iterdir() if is_index_file_name(p.name))
        files: list[IndexFile] = []
        for i, name in enumerate(names):
            try:
                files.append(IndexFile.open(self.directory / name))
            except (OSError, ValueError) as exc:
                log.error("index: dropping %s and %d later files: %s", name, len(names) - i - 1,
                          exc)
                for later in names[i:]:
                    (self.directory / later).unlink(missing_ok=True)
                self._reindex_from = max((f.end_phy_offset for f in files), default=0)
                break
        with self._lock:
            self.files = tuple(files)

    @property
    def end_phy_offset(self) -> int:
        """The largest phy offset indexed (0 when nothing is)."""
        return max((f.end_phy_offset for f in self.files if f.entry_count), default=0)

    def put_keys(self, keys: Iterable[bytes], phy_offset: int, store_timestamp_ms: int) -> None:
        """Index every key at ``phy_offset``, rolling to a new file when the current one fills."""
        with self._lock:
            current = self.files[-1] if self.files else None
            for key in keys:
                if current is None or not current.put(key, phy_offset, store_timestamp_ms):
                    current = self._roll()
                    current.put(key, phy_offset, store_timestamp_ms)

    def _roll(self) -> IndexFile:
        """Create the next file (lock held); the full one is flushed by the next flush()."""
        last = self.files[-1].path.name if self.files else None
        now_ms = int(time.time() * 1000)
        created = IndexFile.create(self.directory / file_name(now_ms, last), self.hash_slots,
                                   self.max_entries)
        self.files = (*self.files, created)
        return created

    def query(self, key: bytes, begin_ms: int, end_ms: int, max_count: int) -> list[int]:
        """Phy offsets of entries hashing like ``key`` in the time range, newest file first."""
        found: list[int] = []
        for index_file in reversed(self.files):
            if len(found) >= max_count:
                break
            if not index_file.overlaps(begin_ms, end_ms):
                continue
            try:
                found += index_file.lookup(key, begin_ms, end_ms, max_count - len(found))
            except ValueError:  # closed by retention meanwhile: its entries are gone anyway
                continue
        return found

    def truncate_after(self, phy_offset: int) -> int:
        """Drop files holding entries at or past ``phy_offset``; return where to re-index from.

        A file is all-or-nothing: a file straddling ``phy_offset`` goes too and the result is its
        beginPhyOffset (``phy_offset`` itself when nothing below it was lost).
        """
        with self._lock:
            resume = phy_offset
            if self._reindex_from is not None:
                resume, self._reindex_from = min(resume, self._reindex_from), None
            kept: list[IndexFile] = []
            for index_file in self.files:
                if index_file.entry_count and index_file.end_phy_offset >= phy_offset:
                    if index_file.begin_phy_offset < phy_offset:
                        resume = min(resume, index_file.begin_phy_offset)
                    log.info("index: dropping %s, it indexes offsets at or past %d",
                             index_file.path.name, phy_offset)
                    index_file.destroy()
                else:
                    kept.append(index_file)
            self.files = tuple(kept)
        return resume

    def delete_files_below(self, phy_offset: int) -> int:
        """Delete files whose entries all lie below ``phy_offset``; the newest always stays."""
        with self._lock:
            doomed = [f for f in self.files[:-1] if f.end_phy_offset < phy_offset]
            self.files = tuple(f for f in self.files if f not in doomed)
        for index_file in doomed:
            log.info("index: deleting %s (entries below %d)", index_file.path.name, phy_offset)
            index_file.destroy()
        return len(doomed)

    def flush(self) -> None:
        """fdatasync every file changed since the last flush; call from a worker thread."""
        for index_file in self.files:
            index_file.flush()

    def close(self) -> None:
        with self._lock:
            files, self.files = self.files, ()
        for index_file in files:
            index_file.flush()
            index_file.close()
