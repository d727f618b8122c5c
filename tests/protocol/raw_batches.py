"""Hand-built RecordBatch v2 bytes for validation tests: records with any field wrong, sealed
with a correct CRC so that only the record-level checks can refuse them."""
from __future__ import annotations

import gzip
import struct
from collections.abc import Sequence

import crc32c
import lz4.frame
import zstandard
from aiokafka.codec import snappy_encode

from commitgate.protocol.record_batch import CODECS, HEADER, HEADER_SIZE, LOG_OVERHEAD

HEADER_CRC = struct.Struct(">I")


def varint(value: int) -> bytes:
    """Kafka's zigzag varint (any length: tests also build over-long ones by hand)."""
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw > 0x7F:
        out.append(raw & 0x7F | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def field(data: bytes | None) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


def record(index: int, key: bytes | None = b"k", value: bytes | None = b"v",
           headers: Sequence[tuple[bytes | None, bytes | None]] = (), *, timestamp_delta: int = 0,
           offset_delta: int | None = None) -> bytes:
    body = (b"\x00" + varint(timestamp_delta)
            + varint(index if offset_delta is None else offset_delta) + field(key) + field(value)
            + varint(len(headers)) + b"".join(field(k) + field(v) for k, v in headers))
    return varint(len(body)) + body


def compress(codec: str, data: bytes) -> bytes:
    if codec == "gzip":
        return gzip.compress(data)
    if codec == "snappy":
        return snappy_encode(data, xerial_compatible=True)
    if codec == "lz4":
        return lz4.frame.compress(data, block_linked=False)
    if codec == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    return data


def seal(payload: bytes, count: int, *, codec: int = 0, last_offset_delta: int | None = None,
         base_timestamp: int = 1_000, max_timestamp: int | None = None) -> bytearray:
    """A batch around ``payload`` (the records region, already compressed if ``codec``)."""
    header = HEADER.pack(0, HEADER_SIZE - LOG_OVERHEAD + len(payload), 0, 2, 0, codec,
                         count - 1 if last_offset_delta is None else last_offset_delta,
                         base_timestamp,
                         base_timestamp if max_timestamp is None else max_timestamp,
                         -1, -1, -1, count)
    batch = bytearray(header + payload)
    HEADER_CRC.pack_into(batch, 17, crc32c.crc32c(batch[21:]))
    return batch


def batch_of(records: Sequence[bytes], compression: str = "none", *, count: int | None = None,
             **kwargs) -> bytearray:
    region = b"".join(records)
    return seal(compress(compression, region), len(records) if count is None else count,
                codec=CODECS[compression], **kwargs)
