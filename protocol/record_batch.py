"""Kafka RecordBatch v2 (magic 2): header parsing, validation, building and decoding.

Layout of one batch (big-endian; offsets are from the start of the batch):

    offset size field
    0      8    baseOffset             written by the broker on append
    8      4    batchLength            bytes after this field
    12     4    partitionLeaderEpoch
    16     1    magic                  must be 2
    17     4    crc                    CRC-32C over bytes 21..end
    21     2    attributes             bits 0-2 codec, 3 LogAppendTime, 4 transactional, 5 control
    23     4    lastOffsetDelta
    27     8    baseTimestamp
    35     8    maxTimestamp
    43     8    producerId
    51     2    producerEpoch
    53     4    baseSequence
    57     4    recordCount
    61     ...  records (compressed as a whole when codec != 0)

Validation on produce reads the header with one ``struct.unpack_from`` per batch, then walks
every record in C (``_record_keys.c``; without it, the same walk in Python, ``record_walk.py``),
decompressing compressed batches in bounded pieces (``decompress.py``), so that a stored batch
is one every client can read. The same walker gives the IndexFile its keys, and for a
compressed batch it can copy them on produce (a bounded amount) so that the IndexBuilder need
not decompress the batch again; other record-level work (timestamp lookups, compaction, tests)
goes through aiokafka's compiled reader.
"""
from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c
from aiokafka.codec import gzip_decode, lz4_decode, snappy_decode, zstd_decode
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from commitgate.native import c_helpers
from commitgate.protocol import decompress, record_walk
from commitgate.protocol.record_walk import KEY_SCAN_FIELDS

# The record walk: RecordWalk, batch_keys and record_keys, in C, or the same in Python
# (record_walk.py) where the C helper is not in use (native/c_helpers.py).
walker = c_helpers.load("protocol._record_keys") or record_walk

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
CRC_START = 21
CRC_AT = 17
ATTRIBUTES_AT = 21
MAX_TIMESTAMP_AT = 35
MAGIC_V2 = 2
BASE_OFFSET = struct.Struct(">q")  # at 0; compiled once: assign() runs for every produced batch
STORED_CRC = struct.Struct(">I")  # at CRC_AT

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_CODEC_NAMES = {codec: name for name, codec in CODECS.items()}
NO_SEQUENCE = -1


class BatchHeader(NamedTuple):
    """A NamedTuple, not a frozen dataclass: it is built for every produced batch and a frozen
    dataclass's __init__ cost five times as much."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    position: int  # where the batch starts in the buffer it was read from

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def offset_count(self) -> int:
        """Offsets the batch takes in the partition log (lastOffsetDelta + 1)."""
        return self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf: memoryview | bytes, position: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``position`` (the caller checks there are 61 bytes)."""
    return BatchHeader(*HEADER.unpack_from(buf, position), position)


def iter_batch_headers(buf: memoryview | bytes) -> Iterator[BatchHeader]:
    """Headers of the whole batches in ``buf``; a trailing partial batch is left out.

    Fetch responses may end in a partial batch (clients ignore it), so readers of stored
    data stop quietly there; ``validate_record_set`` is the strict check for produce."""
    position, end = 0, len(buf)
    while end - position >= HEADER_SIZE:
        header = read_header(buf, position)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + header.size > end:
            return
        yield header
        position += header.size


class RecordSetStatus(enum.Enum):
    """Outcome of checking a produced record set; the gateway maps it to a Kafka error."""

    OK = "ok"
    EMPTY = "empty"                       # no batch at all
    CORRUPT_MESSAGE = "corrupt_message"   # truncated, bad length, CRC mismatch, undecompressable
    UNSUPPORTED_MAGIC = "unsupported_magic"  # magic 0/1 (message sets before Kafka 0.11)
    RECORD_TOO_LARGE = "record_too_large"  # a batch, or its decompressed records, too large
    INVALID_RECORD = "invalid_record"     # malformed records, or well-formed but not allowed
    INVALID_TIMESTAMP = "invalid_timestamp"  # a record's timestamp, or LogAppendTime from a client


class RecordProblem(enum.IntEnum):
    """Why one record of an otherwise readable batch is refused (KIP-467 record errors)."""

    KEY_MISSING = 1             # compacted topics
    TIMESTAMP_OUT_OF_RANGE = 2  # message.timestamp.before.max.ms / after.max.ms


@dataclass(frozen=True, slots=True)
class RecordError:
    index: int  # in its batch
    problem: RecordProblem
    timestamp: int


INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


@dataclass(frozen=True, slots=True)
class RecordRules:
    """What a topic asks of each produced record, beyond a well-formed batch."""

    need_keys: bool = False  # compacted topics
    timestamps: tuple[int, int] = (INT64_MIN, INT64_MAX)  # CreateTime bounds, inclusive


ANY_RECORD = RecordRules()

# Each offset costs the ConsumeQueue a 20-byte unit and a record takes at least 7 bytes, so the
# offsets one batch may take are bounded by bounding its decompressed records: at most this
# many times the topic's max.message.bytes (Kafka has no such bound). A producer that splits
# batches refused with MESSAGE_TOO_LARGE (the Java client does) then sends smaller ones.
MAX_DECOMPRESSION_RATIO = 32


@dataclass(frozen=True, slots=True)
class RecordSetCheck:
    status: RecordSetStatus
    headers: list[BatchHeader]
    detail: str = ""
    newest: list[int] = field(default_factory=list)  # the batch's newest record timestamp
    record_errors: list[RecordError] = field(default_factory=list)  # the first ones
    record_error_count: int = 0  # all of them
    keys: list[bytes] | None = None  # a compressed batch's non-null keys, when asked for


class _Refused(Exception):
    def __init__(self, status: RecordSetStatus, detail: str,
                 walk: record_walk.RecordWalk | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.walk = status, detail, walk


def validate_record_set(buf: memoryview | bytes, max_batch_bytes: int,
                        rules: RecordRules = ANY_RECORD, key_budget: int = 0) -> RecordSetCheck:
    """Check a produced record set as Kafka's LogValidator does: every batch's header and CRC,
    exactly one batch (as Kafka requires of magic 2, and before any record is read, so that a
    request of many batches costs no decompression), then each of its records, decompressing
    in bounded pieces (see ``_record_keys.c``).

    With ``key_budget`` a compressed batch's keys come back too (``keys``) when they take at
    most that many bytes (with 16 bytes a key), for the IndexBuilder: the batch is then
    decompressed once. An uncompressed batch's keys are cheap to read where it is stored."""
    headers: list[BatchHeader] = []
    position, end = 0, len(buf)
    if end == 0:
        return RecordSetCheck(RecordSetStatus.EMPTY, headers, "the record set is empty")
    view = memoryview(buf)
    try:
        while position < end:
            headers.append(_check_batch(view, position, end, max_batch_bytes))
            position += headers[-1].size
        position = headers[-1].position
        if len(headers) > 1:
            raise _Refused(RecordSetStatus.INVALID_RECORD, f"the record set holds "
                           f"{len(headers)} batches; produce takes one per partition")
        newest, keys = _check_records(view, headers[0], max_batch_bytes, rules, key_budget)
    except _Refused as refused:  # position: the batch at fault
        return _refusal(refused, position, headers)
    return RecordSetCheck(RecordSetStatus.OK, headers, newest=[newest], keys=keys)


def _refusal(refused: _Refused, position: int, headers: list[BatchHeader]) -> RecordSetCheck:
    walk = refused.walk
    if walk is None:
        return RecordSetCheck(refused.status, headers, f"batch at byte {position}: "
                              f"{refused.detail}")
    errors = [RecordError(index, RecordProblem(kind), timestamp)
              for index, kind, timestamp in walk.record_errors]
    return RecordSetCheck(refused.status, headers, refused.detail, [], errors, walk.error_count)


def _check_batch(buf: memoryview, position: int, end: int, max_batch_bytes: int) -> BatchHeader:
    if end - position < 17:
        raise _Refused(RecordSetStatus.CORRUPT_MESSAGE,
                       f"{end - position} bytes left, too few for a header")
    length, magic = struct.unpack_from(">i4xb", buf, position + 8)
    if magic != MAGIC_V2:
        raise _Refused(RecordSetStatus.UNSUPPORTED_MAGIC, f"magic {magic}, only 2 is supported")
    if length < HEADER_SIZE - LOG_OVERHEAD or position + LOG_OVERHEAD + length > end:
        raise _Refused(RecordSetStatus.CORRUPT_MESSAGE,
                       f"batchLength {length} does not fit the buffer")
    if LOG_OVERHEAD + length > max_batch_bytes:
        raise _Refused(RecordSetStatus.RECORD_TOO_LARGE,
                       f"{LOG_OVERHEAD + length} bytes exceed the limit of {max_batch_bytes}")
    header = read_header(buf, position)
    if crc32c.crc32c(buf[position + CRC_START:position + header.size]) != header.crc:
        raise _Refused(RecordSetStatus.CORRUPT_MESSAGE, "CRC-32C mismatch")
    if header.base_offset != 0:  # producers send 0; the broker assigns the real one
        raise _Refused(RecordSetStatus.INVALID_RECORD, f"the baseOffset of the record batch "
                       f"should be 0, but it is {header.base_offset}")
    if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
        raise _Refused(RecordSetStatus.INVALID_RECORD, f"inconsistent batch offset range "
                       f"[0, {header.last_offset_delta}] and count of records "
                       f"{header.record_count}")
    if header.is_control:
        raise _Refused(RecordSetStatus.INVALID_RECORD, "clients may not produce control batches")
    if header.attributes & TIMESTAMP_TYPE_MASK:
        raise _Refused(RecordSetStatus.INVALID_TIMESTAMP,
                       "Producer should not set timestamp type to LogAppendTime.")
    if header.codec not in _CODEC_NAMES:
        raise _Refused(RecordSetStatus.INVALID_RECORD,
                       f"unknown compression codec id {header.codec}")
    return header


def _check_records(buf: memoryview, header: BatchHeader, max_batch_bytes: int,
                   rules: RecordRules, key_budget: int) -> tuple[int, list[bytes] | None]:
    """Walk the batch's records; the newest record timestamp and, for a compressed batch
    within ``key_budget``, the keys; or raise _Refused."""
    low, high = rules.timestamps
    records = buf[header.position + HEADER_SIZE:header.position + header.size]
    walk = walker.RecordWalk(header.record_count, header.base_timestamp, rules.need_keys, low,
                             high, key_budget if header.codec else 0)
    if header.codec == 0:
        walk.feed(records)
    else:
        _walk_compressed(walk, header.codec, records, MAX_DECOMPRESSION_RATIO * max_batch_bytes)
    if not walk.finish():
        raise _Refused(RecordSetStatus.INVALID_RECORD, walk.failure or "")
    if walk.error_count:
        status = (RecordSetStatus.INVALID_TIMESTAMP if walk.timestamp_errors
                  else RecordSetStatus.INVALID_RECORD)
        raise _Refused(status, "", walk)
    return walk.max_timestamp, walk.keys


def _walk_compressed(walk: record_walk.RecordWalk, codec: int, payload: memoryview,
                     limit: int) -> None:
    name, total = _CODEC_NAMES[codec], 0
    try:
        for piece in decompress.pieces(codec, payload, limit):
            total += len(piece)
            if total > limit:
                raise decompress.PayloadTooLarge(f"the {name} payload decompresses to more "
                                                 f"than {limit} bytes")
            if not walk.feed(piece):
                return  # malformed records: no need to decompress the rest
    except decompress.PayloadTooLarge as exc:
        raise _Refused(RecordSetStatus.RECORD_TOO_LARGE,
                       f"{exc}: a batch's records may take at most {MAX_DECOMPRESSION_RATIO} "
                       f"times max.message.bytes") from None
    except decompress.CorruptPayload as exc:
        raise _Refused(RecordSetStatus.CORRUPT_MESSAGE, str(exc)) from None
    except decompress.UnsupportedPayload as exc:
        raise _Refused(RecordSetStatus.INVALID_RECORD, str(exc)) from None


def set_max_timestamp(body: memoryview, timestamp: int) -> None:
    """Store the batch's newest record timestamp as its maxTimestamp, as Kafka does whatever
    the producer sent (CreateTime batches)."""
    struct.pack_into(">q", body, MAX_TIMESTAMP_AT, timestamp)
    _reseal(body)


def _batch_end(body: memoryview) -> int:
    return LOG_OVERHEAD + struct.unpack_from(">i", body, 8)[0]


def _reseal(body: memoryview) -> None:
    """Recompute the CRC after the broker changed covered fields."""
    struct.pack_into(">I", body, CRC_AT, crc32c.crc32c(body[CRC_START:_batch_end(body)]))


class KafkaBodyFormat:
    """``engine.body_format.BodyFormat`` for bodies holding exactly one RecordBatch v2."""

    scanner = getattr(walker, "BODY_SCANNER", None)  # keys() in C, for the CommitLog walk

    def assign(self, body: memoryview, base_offset: int, log_append_time: int | None) -> None:
        # baseOffset sits outside the CRC, so CreateTime batches need no re-checksum.
        BASE_OFFSET.pack_into(body, 0, base_offset)
        if log_append_time is None:
            return
        attributes = struct.unpack_from(">h", body, ATTRIBUTES_AT)[0] | TIMESTAMP_TYPE_MASK
        struct.pack_into(">h", body, ATTRIBUTES_AT, attributes)
        struct.pack_into(">q", body, MAX_TIMESTAMP_AT, log_append_time)
        _reseal(body)

    def stored_checksum(self, body: memoryview) -> int:
        return STORED_CRC.unpack_from(body, CRC_AT)[0]

    def computed_checksum(self, body: memoryview) -> int:
        if len(body) < HEADER_SIZE:
            return -1  # never equal to a stored unsigned CRC
        return crc32c.crc32c(body[CRC_START:min(_batch_end(body), len(body))])

    def keys(self, body: memoryview) -> list[bytes]:
        keys = walker.batch_keys(body)  # in C: without the GIL
        if keys is not None:
            return keys
        batch_length, attributes, record_count = KEY_SCAN_FIELDS.unpack_from(body)
        records = _DECOMPRESS[attributes & CODEC_MASK](bytes(body[HEADER_SIZE:LOG_OVERHEAD +
                                                                  batch_length]))
        return walker.record_keys(records, record_count)

    def offset_for_timestamp(self, body: memoryview, timestamp: int, min_offset: int = 0
                             ) -> tuple[int, int] | None:
        header = read_header(body)
        if header.max_timestamp < timestamp or \
                header.base_offset + header.last_offset_delta < min_offset:
            return None
        if header.attributes & TIMESTAMP_TYPE_MASK:
            return max(header.base_offset, min_offset), header.max_timestamp
        for record in _records(body):
            if record.timestamp >= timestamp and record.offset >= min_offset:
                return record.offset, record.timestamp
        return None

    def max_timestamp_offset(self, body: memoryview) -> tuple[int, int] | None:
        header = read_header(body)
        if header.record_count <= 0:
            return None
        if header.attributes & TIMESTAMP_TYPE_MASK:
            return header.base_offset, header.max_timestamp
        best: tuple[int, int] | None = None
        for record in _records(body):
            if best is None or record.timestamp > best[1]:
                best = (record.offset, record.timestamp)
        return best


    def record_keys(self, body: memoryview) -> Iterator[tuple[int, bytes | None, bool, int]]:
        """(offset, key, is tombstone, timestamp) of each record; nothing for control
        batches (the log cleaner's view; decompresses)."""
        if read_header(body).is_control:
            return iter(())
        return ((r.offset, r.key, r.value is None, r.timestamp) for r in _records(body))

    def compact(self, body: memoryview, keep: Callable[[int, bytes | None, bool, int], bool]
                ) -> bytes | memoryview | None:
        """The batch with only the records ``keep(offset, key, is tombstone, timestamp)``
        accepts: ``body`` itself when all are kept, None when none is, else a new batch with
        the same base offset, last offset delta, producer id, epoch, base sequence,
        attributes and leader epoch, so offsets and idempotent producer state survive (as
        Kafka's cleaner writes it). Control batches are always kept whole."""
        header = read_header(body)
        if header.is_control:
            return body
        records = list(_records(body))
        kept = [r for r in records if keep(r.offset, r.key, r.value is None, r.timestamp)]
        if len(kept) == len(records):
            return body
        if not kept:
            return None
        builder = DefaultRecordBatchBuilder(MAGIC_V2, header.attributes & CODEC_MASK,
                                            int(header.is_transactional), header.producer_id,
                                            header.producer_epoch, header.base_sequence,
                                            2 ** 31 - 1)
        for r in kept:
            builder.append(r.offset - header.base_offset, r.timestamp, r.key, r.value,
                           list(r.headers))
        out = memoryview(builder.build())
        BASE_OFFSET.pack_into(out, 0, header.base_offset)
        struct.pack_into(">i", out, 12, header.partition_leader_epoch)
        struct.pack_into(">hi", out, ATTRIBUTES_AT, header.attributes, header.last_offset_delta)
        if header.attributes & TIMESTAMP_TYPE_MASK:
            struct.pack_into(">q", out, MAX_TIMESTAMP_AT, header.max_timestamp)
        _reseal(out)
        return bytes(out)


_DECOMPRESS = {CODECS["gzip"]: gzip_decode, CODECS["snappy"]: snappy_decode,
               CODECS["lz4"]: lz4_decode, CODECS["zstd"]: zstd_decode}


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _records(body: memoryview | bytes) -> Iterator:
    """aiokafka's compiled reader over one batch (decompresses as needed)."""
    return iter(DefaultRecordBatch(bytes(body[:_batch_end(memoryview(body))])))


def decode_records(buf: memoryview | bytes) -> list[Record]:
    """Every record of every whole batch in ``buf``, control batches left out."""
    view = memoryview(buf)
    records: list[Record] = []
    for header in iter_batch_headers(view):
        if header.is_control:
            continue
        batch = view[header.position:header.position + header.size]
        records.extend(Record(r.offset, r.timestamp, r.key, r.value, list(r.headers))
                       for r in _records(batch))
    return records


RecordSpec = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]], int]


def build_batch(records: Sequence[RecordSpec], *, base_offset: int = 0,
                compression: str = "none", producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1, transactional: bool = False) -> bytes:
    """One RecordBatch v2 holding ``records`` as (key, value, headers, timestamp) tuples,
    as a producer would send it (tests, benchmarks and the self-check use it)."""
    if not records:
        raise ValueError("a batch holds at least one record")
    if compression not in CODECS:
        raise ValueError(f"unknown compression {compression!r}; one of {sorted(CODECS)}")
    builder = DefaultRecordBatchBuilder(MAGIC_V2, CODECS[compression], int(transactional),
                                        producer_id, producer_epoch, base_sequence,
                                        2 ** 31 - 1)
    for delta, (key, value, headers, timestamp) in enumerate(records):
        if builder.append(delta, timestamp, key, value, list(headers)) is None:
            raise ValueError(f"record {delta} does not fit in one batch")
    body = builder.build()
    struct.pack_into(">q", body, 0, base_offset)
    return bytes(body)


# control records (Kafka's ControlRecordType): key = version int16 | type int16,
# value (EndTransactionMarker) = version int16 | coordinator epoch int32
CONTROL_ABORT, CONTROL_COMMIT = 0, 1
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


def build_control_batch(commit: bool, producer_id: int, producer_epoch: int, timestamp: int,
                        coordinator_epoch: int = 0) -> bytes:
    """A transaction marker: a transactional control batch with one COMMIT or ABORT record,
    as Kafka's transaction coordinator has partition leaders write them."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    body = bytearray(build_batch([(key, value, (), timestamp)], producer_id=producer_id,
                                 producer_epoch=producer_epoch, transactional=True))
    attributes = struct.unpack_from(">h", body, ATTRIBUTES_AT)[0] | CONTROL_MASK
    struct.pack_into(">h", body, ATTRIBUTES_AT, attributes)
    _reseal(memoryview(body))
    return bytes(body)


def control_type(body: memoryview | bytes) -> int | None:
    """CONTROL_COMMIT or CONTROL_ABORT for a control batch's marker, None for another kind of
    control record (Kafka skips those) or a key too short to hold one."""
    record = next(_records(body), None)
    key = record.key if record is not None else None
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    kind = _CONTROL_KEY.unpack_from(key)[1]
    return kind if kind in (CONTROL_ABORT, CONTROL_COMMIT) else None
