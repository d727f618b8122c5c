"""CommitLog: one append-only log of every partition's batches, in fixed-size segments.

Entry layout (big-endian; RocketMQ's, with a 2-byte TOPIC length for 249-character names):

    offset  size  field
    0       4     TOTALSIZE           whole entry, these 4 bytes included
    4       4     MAGICCODE           MESSAGE_MAGIC, or BLANK_MAGIC for a segment's end filler
    8       4     BODYCRC             the body's own checksum (a Kafka batch's CRC-32C)
    12      4     QUEUEID             partition
    16      4     FLAG                offsets the batch takes in its ConsumeQueue (record count)
    20      8     QUEUEOFFSET         base offset assigned by the store
    28      8     PHYSICALOFFSET      where this entry starts in the CommitLog
    36      4     SYSFLAG             caller flags (compression, transactional, control), opaque
    40      8     BORNTIMESTAMP       the batch's max timestamp (ConsumeQueue tagsCode source)
    48      8     BORNHOST            client IPv4 + port
    56      8     STORETIMESTAMP      when the store appended it (ms)
    64      8     STOREHOST           broker IPv4 + port
    72      4     RECONSUMETIMES      0
    76      8     PREPARED_TX_OFFSET  0; a cleaner's copy (SYSFLAG RELOCATED): the entry it copies
    84      4+n   BODY                length, then the batch
    ..      2+n   TOPIC               length, then UTF-8 name
    ..      2+n   PROPERTIES          length, then bytes
A segment that cannot hold the next entry plus 8 bytes ends with a BLANK_MAGIC filler whose
TOTALSIZE covers the rest of the segment; the entry goes to the next segment.
"""
from __future__ import annotations

import contextlib
import errno
import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from commitgate.engine.body_format import BodyFormat
from commitgate.engine.mapped_file import MappedFile
from commitgate.engine.mapped_file_queue import MappedFileQueue
from commitgate.engine.segment_ledger import SegmentLedger
from commitgate.native import c_helpers

# None without the C helper: the prefix is then packed in Python
_write_entry = c_helpers.pick("engine._commit_log", "write_entry", None)

log = logging.getLogger(__name__)

MESSAGE_MAGIC = 0x43474D31  # "CGM1"
BLANK_MAGIC = 0x43474231  # "CGB1"
ENTRY_PREFIX = struct.Struct(">iIIiiqqiqqqqiqi")  # TOTALSIZE .. BODY length
PREFIX_SIZE = ENTRY_PREFIX.size  # 88: the body starts here
SHORT = struct.Struct(">H")
BLANK = struct.Struct(">iI")
COUNT_AND_BASE = struct.Struct(">iq")  # FLAG, QUEUEOFFSET at entry offset 16
SOURCE_PHY = struct.Struct(">q")  # PREPARED_TX_OFFSET, which a copy fills with its source
SOURCE_PHY_AT = 76
END_FILE_MIN_BLANK_LENGTH = BLANK.size
# SYSFLAG bit of a copy the CommitLog cleaner made of a live entry (callers' flags stay below)
RELOCATED = 1 << 30
# Free space a client append must leave when it rolls to a new segment, in segments: the
# pre-allocation of the next one, and one for the cleaner, whose relocation frees space.
RESERVED_SEGMENTS = 2


@dataclass(slots=True)
class DispatchRequest:
    """What one CommitLog entry tells the ConsumeQueue and the IndexFile."""

    topic: str
    partition: int
    queue_offset: int
    offset_count: int
    phy_offset: int
    size: int
    max_timestamp: int
    store_timestamp: int
    sys_flag: int
    source_phy: int = 0  # a RELOCATED copy: the entry it was made from (PREPARED_TX_OFFSET)


class CommitLog:
    def __init__(self, queue: MappedFileQueue, body_format: BodyFormat) -> None:
        self.queue = queue
        self.body_format = body_format
        self.max_entry_size = queue.file_size - END_FILE_MIN_BLANK_LENGTH
        self.reserve_bytes = RESERVED_SEGMENTS * queue.file_size
        self.refusing = False  # the last client roll was refused for space
        self.refusal_spells = 0  # how often refusing began
        self.ledger = SegmentLedger(queue.file_size)  # dead bytes per segment (the cleaner's)

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    def append(self, req: DispatchRequest, body: memoryview, trailer: bytes, born_host: int,
               store_host: int, *, reserved: bool = False) -> None:
        """Append one entry; fills in ``req.phy_offset`` and ``req.size``. One pwritev, no joins.
        A new segment is only taken while ``reserve_bytes`` stay free, unless ``reserved``
        (the cleaner's copies, which free space). A full disk raises OSError(ENOSPC)."""
        size = PREFIX_SIZE + len(body) + len(trailer)
        files = self.queue.files  # the last segment has room: the usual case, tested inline
        mapped = files[-1] if files else None
        if mapped is None or size + END_FILE_MIN_BLANK_LENGTH > mapped.size - mapped.wrote_position:
            mapped = self._segment_for(size, reserved)
        pos = mapped.wrote_position
        phy = mapped.start_offset + pos
        crc = self.body_format.stored_checksum(body)
        if _write_entry is None:
            prefix = ENTRY_PREFIX.pack(
                size, MESSAGE_MAGIC, crc, req.partition, req.offset_count, req.queue_offset, phy,
                req.sys_flag, req.max_timestamp, born_host, req.store_timestamp, store_host, 0, 0,
                len(body))
            mapped.append((prefix, body, trailer), size)
        else:
            try:
                _write_entry(body, trailer, mapped.fileno(), pos, mapped.size, phy, crc,
                             req.partition, req.offset_count, req.queue_offset, req.sys_flag,
                             req.max_timestamp, born_host, req.store_timestamp, store_host)
            except OSError as exc:
                raise OSError(exc.errno, f"{mapped.path}: {exc.strerror} writing the entry at "
                                         f"{pos}") from None
            mapped.wrote_position = pos + size
        req.phy_offset = phy
        req.size = size

    def append_copy(self, req: DispatchRequest, body: memoryview, trailer: bytes,
                    born_host: int, store_host: int) -> None:
        """Append a copy the cleaner or the compactor made of the entry at
        ``req.source_phy``, which it names in PREPARED_TX_OFFSET (outside the body's CRC):
        replay then redoes a repoint a crash cut short, and only that. May use the reserve."""
        self.append(req, body, trailer, born_host, store_host, reserved=True)
        mapped = self.queue.find(req.phy_offset)
        mapped.write_at(req.phy_offset - mapped.start_offset + SOURCE_PHY_AT,
                        (SOURCE_PHY.pack(req.source_phy),), SOURCE_PHY.size)

    def _segment_for(self, size: int, reserved: bool) -> MappedFile:
        """The segment an entry of ``size`` goes to: a new one when the last cannot hold it
        (closed with a BLANK filler) or there is none."""
        files = self.queue.files
        if not reserved and (not files or size + END_FILE_MIN_BLANK_LENGTH > files[-1].free_bytes):
            self._check_reserve()
        mapped = self.queue.last_for_append()
        if size + END_FILE_MIN_BLANK_LENGTH > mapped.free_bytes:
            self._close_segment(mapped)
            mapped = self.queue.last_for_append()
        return mapped

    def _check_reserve(self) -> None:
        """Refuse a client's roll to a new segment that would eat the cleaner's reserve."""
        free = self.free_bytes()
        refusing = free < self.reserve_bytes
        if refusing != self.refusing:
            self.refusing = refusing
            if refusing:
                self.refusal_spells += 1
            else:
                log.info("CommitLog: %d bytes free again; accepting writes", free)
        if refusing:
            raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)}: {self.queue.directory} has "
                                        f"{free} bytes free, below the {self.reserve_bytes} kept "
                                        f"for a new segment and the CommitLog cleaner")

    def recheck_space(self) -> None:
        """After the cleaner ran: end a refusal spell once the reserve is free again."""
        if self.refusing:
            with contextlib.suppress(OSError):
                self._check_reserve()

    def free_bytes(self) -> int:
        """Free space of the filesystem the CommitLog lives on, as an unprivileged user has it."""
        stat = os.statvfs(self.queue.directory)
        return stat.f_bavail * stat.f_frsize

    def _close_segment(self, mapped: MappedFile) -> None:
        rest = mapped.free_bytes
        self.ledger.died(mapped.start_offset + mapped.wrote_position, rest)
        mapped.append((BLANK.pack(rest, BLANK_MAGIC),), BLANK.size)
        mapped.wrote_position = mapped.size  # the filler's TOTALSIZE covers the rest

    def entry(self, phy: int, size: int) -> memoryview | None:
        """The whole entry at ``phy`` (a ConsumeQueue unit gives both numbers)."""
        mapped = self.queue.find(phy)
        if mapped is None:
            return None
        return mapped.read(phy - mapped.start_offset, size)

    def body(self, phy: int, size: int) -> memoryview | None:
        """The batch stored at ``phy``: a zero-copy slice for the fetch path."""
        entry = self.entry(phy, size)
        return None if entry is None else body_of(entry)

    def decode(self, phy: int, *, check_crc: bool) -> tuple[DispatchRequest | None, int]:
        """Parse and validate the entry at ``phy``: (request, size); a blank gives (None, size);
        an invalid or absent entry gives (None, 0)."""
        mapped = self.queue.find(phy)
        if mapped is None:
            return None, 0
        pos = phy - mapped.start_offset
        return self.decode_in(mapped.view(), pos, mapped.size - pos, phy, check_crc)

    def decode_in(self, view: memoryview, pos: int, room: int, phy: int, check_crc: bool
                  ) -> tuple[DispatchRequest | None, int]:
        """``decode`` of the entry at ``pos`` in ``view`` (the segment's mapping, or a copy
        holding the entry whole), which is ``phy`` in the CommitLog and ``room`` bytes before
        the end of its segment."""
        if room < END_FILE_MIN_BLANK_LENGTH:
            return None, 0
        total, magic = BLANK.unpack_from(view, pos)
        if magic == BLANK_MAGIC:
            return (None, total) if total == room else (None, 0)
        if magic != MESSAGE_MAGIC or not PREFIX_SIZE < total <= room:
            return None, 0
        return self._decode_message(view[pos : pos + total], phy, check_crc)

    def _decode_message(self, entry: memoryview, phy: int, check_crc: bool
                        ) -> tuple[DispatchRequest | None, int]:
        (total, _m, crc, partition, count, queue_offset, stored_phy, sys_flag, max_ts, _bh,
         store_ts, _sh, _rt, _tx, body_len) = ENTRY_PREFIX.unpack_from(entry)
        topic_at = PREFIX_SIZE + body_len
        if stored_phy != phy or body_len < 0 or topic_at + 2 > total:
            return None, 0
        (topic_len,) = SHORT.unpack_from(entry, topic_at)
        props_at = topic_at + 2 + topic_len
        if props_at + 2 > total or props_at + 2 + SHORT.unpack_from(entry, props_at)[0] != total:
            return None, 0
        if check_crc:
            body = entry[PREFIX_SIZE:topic_at]
            if self.body_format.computed_checksum(body) != crc:
                return None, 0
        try:
            topic = bytes(entry[topic_at + 2 : props_at]).decode()
        except UnicodeDecodeError:
            return None, 0
        req = DispatchRequest(topic, partition, queue_offset, count, phy, total, max_ts, store_ts,
                              sys_flag, _tx)
        return req, total

    def iter_entries(self, start: int, *, check_crc: bool) -> Iterator[DispatchRequest]:
        """Valid entries from ``start`` on, stopping at the first invalid one or the end."""
        phy = start
        while phy < self.max_offset:
            req, size = self.decode(phy, check_crc=check_crc)
            if size == 0:
                return
            if req is not None:
                yield req
            phy += size

    def valid_end(self, start: int) -> int:
        """Where the valid entries from ``start`` stop: the recovery point of a dirty tail."""
        phy = start
        while True:
            _, size = self.decode(phy, check_crc=True)
            if size == 0:
                return phy
            phy += size

    def rollback(self, phy: int) -> None:
        """Forget the last entry, which starts at ``phy`` (its dispatch failed). Its first
        bytes are zeroed so that no recovery scan takes it for a valid entry."""
        last = self.queue.files[-1]
        if last.start_offset <= phy < last.start_offset + last.wrote_position:
            pos = phy - last.start_offset
            last.wrote_position = pos  # first: even if zeroing fails, the next append overwrites
            last.write_at(pos, (bytes(BLANK.size),), BLANK.size)

    def unwritten_at(self, phy: int) -> bool:
        """True when ``phy`` starts never-written space (zeros), not a damaged entry."""
        mapped = self.queue.find(phy)
        if mapped is None:
            return True
        pos = phy - mapped.start_offset
        return pos + BLANK.size > mapped.size or BLANK.unpack_from(mapped.view(), pos) == (0, 0)

    def truncate(self, phy: int) -> None:
        self.queue.truncate(phy)

    def flush(self) -> int:
        return self.queue.flush()


BODY_LEN = struct.Struct(">i")
BODY_LEN_AT = PREFIX_SIZE - 4


def body_of(entry: memoryview) -> memoryview:
    """The batch inside a whole entry."""
    (body_len,) = BODY_LEN.unpack_from(entry, BODY_LEN_AT)
    return entry[PREFIX_SIZE : PREFIX_SIZE + body_len]


def topic_trailer(topic: str, properties: bytes = b"") -> bytes:
    """The TOPIC and PROPERTIES fields that follow a body; cached per topic by the caller."""
    name = topic.encode()
    return SHORT.pack(len(name)) + name + SHORT.pack(len(properties)) + properties
