"""The compressed records of a produced RecordBatch, decompressed in bounded pieces.

``pieces(codec, payload, limit)`` yields the decompressed records region a piece at a time:
at most ``PIECE`` bytes each (zstd: one block, at most 128 KiB; xerial snappy: one block), so
that the validating walk (``RecordWalk``, in C or in ``record_walk.py``) holds one piece at a
time and a decompression bomb is stopped by the caller's running total as soon as it passes its
bound. The one exception is raw (unframed) snappy, which has no streaming form: its declared
length is checked against ``limit`` before it is decompressed whole.

A payload must decompress completely and exactly, as every client's reader expects: a stream
that is cut off, that does not decompress, or that is followed by other bytes raises
``CorruptPayload``. One that decompresses but that Kafka's Java reader refuses raises
``UnsupportedPayload`` (LZ4 frames with dependent blocks, which kafkajs writes; reserved FLG
bits). Concatenated gzip members and zstd frames are read on, as Java's streams read them.
"""
from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator

import cramjam
import lz4.frame
import zstandard

PIECE = 256 * 1024        # decompressed bytes per piece, at most
INPUT_SLICE = 64 * 1024   # compressed bytes given to a decompressor at a time


class CorruptPayload(ValueError):
    """The compressed records do not decompress exactly (the text is safe to send)."""


class UnsupportedPayload(ValueError):
    """The compressed records use a form Kafka's readers refuse (the text is safe to send)."""


class PayloadTooLarge(ValueError):
    """Raw snappy declaring more than the caller's limit."""


def pieces(codec: int, payload: memoryview, limit: int) -> Iterator[bytes | memoryview]:
    """The decompressed records region of a batch compressed with ``codec`` (1-4)."""
    try:
        yield from _READERS[codec](payload, limit)
    except _LIBRARY_ERRORS as exc:
        raise CorruptPayload(f"the {_NAMES[codec]} payload does not decompress: {exc}") from None


def _gzip(payload: memoryview, _limit: int) -> Iterator[bytes]:
    start = 0
    while start < len(payload):  # one gzip member at a time
        member = zlib.decompressobj(zlib.MAX_WBITS | 16)
        fed = start
        while not member.eof:
            if fed == len(payload):
                raise CorruptPayload("the gzip payload is cut off")
            data = payload[fed:fed + INPUT_SLICE]
            fed += len(data)
            while data and not member.eof:  # max_length keeps input it could not use yet
                out = member.decompress(data, PIECE)
                data = member.unconsumed_tail
                if out:
                    yield out
            while not member.eof and len(out) == PIECE:  # output the decompressor still holds
                out = member.decompress(b"", PIECE)
                if out:
                    yield out
        start = fed - len(member.unused_data) - len(member.unconsumed_tail)


LZ4_MAGIC = b"\x04\x22\x4d\x18"
LZ4_VERSION_MASK, LZ4_VERSION_1 = 0xC0, 0x40
LZ4_BLOCK_INDEPENDENCE = 0x20
LZ4_RESERVED_BITS = 0x03  # bit 0 is the dictionary id flag, which Kafka counts as reserved


def _lz4(payload: memoryview, _limit: int) -> Iterator[bytes]:
    _check_lz4_descriptor(payload)
    frame = lz4.frame.LZ4FrameDecompressor()
    fed = 0
    while not frame.eof:
        if frame.needs_input:
            if fed == len(payload):
                raise CorruptPayload("the lz4 frame is cut off")
            data = payload[fed:fed + INPUT_SLICE]
            fed += len(data)
        else:  # it still holds output
            data = b""
        out = frame.decompress(data, max_length=PIECE)
        if not (out or data or frame.eof):  # no progress without input: never loop
            raise CorruptPayload("the lz4 frame is cut off")
        if out:
            yield out
    trailing = len(frame.unused_data or b"") + len(payload) - fed
    if trailing:
        raise CorruptPayload(f"{trailing} bytes follow the end of the lz4 frame")


def _check_lz4_descriptor(payload: memoryview) -> None:
    if len(payload) < 7 or payload[:4] != LZ4_MAGIC:
        raise CorruptPayload("the lz4 payload is not an LZ4 frame")
    flags = payload[4]
    if flags & LZ4_VERSION_MASK != LZ4_VERSION_1:
        raise UnsupportedPayload(f"LZ4 frame version {flags >> 6} is unsupported")
    if flags & LZ4_RESERVED_BITS:
        raise UnsupportedPayload("the LZ4 frame sets reserved or dictionary-id flags, which "
                                 "Kafka's readers refuse")
    if not flags & LZ4_BLOCK_INDEPENDENCE:
        raise UnsupportedPayload("LZ4 frame with dependent blocks (the block independence flag "
                                 "is clear): Kafka's brokers and Java clients cannot read it; "
                                 "compress with independent blocks")


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZSTD_SKIPPABLE = 0x184D2A50  # the 16 magic numbers with the low 4 bits free
ZSTD_DICT_ID_BYTES = (0, 1, 2, 4)
ZSTD_CONTENT_SIZE_BYTES = (0, 2, 4, 8)
ZSTD_RLE_BLOCK = 1


def _zstd(payload: memoryview, _limit: int) -> Iterator[bytes]:
    """One frame at a time, given to the decompressor one block at a time: its output for one
    call is then at most a block (128 KiB), whatever the compression ratio."""
    decompressor = _zstd_decompressor()
    for frame in _zstd_frames(payload):
        stream = decompressor.decompressobj()
        for piece in frame:
            out = stream.decompress(piece)
            if out:
                yield out
        if not stream.eof:
            raise CorruptPayload("a zstd frame is cut off")


_per_thread = threading.local()


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    """One per thread (not thread-safe): making its context cost a third of validating a
    16 KiB batch."""
    decompressor = getattr(_per_thread, "zstd", None)
    if decompressor is None:
        decompressor = _per_thread.zstd = zstandard.ZstdDecompressor()
    return decompressor


def _zstd_frames(payload: memoryview) -> Iterator[Iterator[memoryview]]:
    position = 0
    while position < len(payload):
        head = bytes(payload[position:position + 8])
        if len(head) >= 8 and int.from_bytes(head[:4], "little") & ~0xF == ZSTD_SKIPPABLE:
            position += 8 + int.from_bytes(head[4:8], "little")
            continue
        if head[:4] != ZSTD_MAGIC or len(head) < 5:
            raise CorruptPayload(f"bytes at {position} of the zstd payload are not a zstd frame")
        end = _zstd_frame_end(payload, position, head[4])
        yield _zstd_blocks(payload[position:end], head[4])
        position = end


def _zstd_header_size(descriptor: int) -> int:
    single_segment = descriptor >> 5 & 1
    content_size = ZSTD_CONTENT_SIZE_BYTES[descriptor >> 6] or single_segment
    return 5 + (not single_segment) + ZSTD_DICT_ID_BYTES[descriptor & 3] + content_size


def _zstd_frame_end(payload: memoryview, start: int, descriptor: int) -> int:
    position = start + _zstd_header_size(descriptor)
    last = False
    while not last:
        if position + 3 > len(payload):
            raise CorruptPayload("a zstd frame is cut off")
        header = int.from_bytes(payload[position:position + 3], "little")
        last = bool(header & 1)
        size = 1 if (header >> 1) & 3 == ZSTD_RLE_BLOCK else header >> 3
        position += 3 + size
    position += 4 if descriptor & 0x04 else 0  # content checksum
    if position > len(payload):
        raise CorruptPayload("a zstd frame is cut off")
    return position


def _zstd_blocks(frame: memoryview, descriptor: int) -> Iterator[memoryview]:
    """The frame cut after each block (the header goes with the first, the checksum with the
    last)."""
    start, position = 0, _zstd_header_size(descriptor)
    while position < len(frame):
        header = int.from_bytes(frame[position:position + 3], "little")
        size = 1 if (header >> 1) & 3 == ZSTD_RLE_BLOCK else header >> 3
        position += 3 + size
        if header & 1:
            position = len(frame)
        yield frame[start:position]
        start = position


XERIAL_HEADER = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = 16  # marker, version, compatible version


def _snappy(payload: memoryview, limit: int) -> Iterator[bytes | memoryview]:
    if bytes(payload[:8]) != XERIAL_HEADER:  # raw snappy (librdkafka): no streaming form
        _check_snappy_length(payload, limit)
        yield memoryview(cramjam.snappy.decompress_raw(payload))
        return
    position = XERIAL_HEADER_SIZE
    while position < len(payload):  # blocks: 4-byte big-endian length, raw snappy
        if position + 4 > len(payload):
            raise CorruptPayload("the snappy payload is cut off")
        size = int.from_bytes(payload[position:position + 4], "big")
        block = payload[position + 4:position + 4 + size]
        if len(block) < size:
            raise CorruptPayload("the snappy payload is cut off")
        _check_snappy_length(block, limit)
        yield memoryview(cramjam.snappy.decompress_raw(block))
        position += 4 + size


def _check_snappy_length(block: memoryview, limit: int) -> None:
    length = cramjam.snappy.decompress_raw_len(block)
    if length > limit:
        raise PayloadTooLarge(f"the snappy payload declares {length} bytes of records")


_READERS = {1: _gzip, 2: _snappy, 3: _lz4, 4: _zstd}
_NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_LIBRARY_ERRORS = (zlib.error, RuntimeError, zstandard.ZstdError, cramjam.DecompressionError)
