"""RecordBatch v2: building, validation, offset assignment and decoding, checked against
kafka-python's independent reader."""
from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch

from commitgate.protocol.record_batch import (
    HEADER_SIZE,
    KafkaBodyFormat,
    RecordSetStatus,
    build_batch,
    decode_records,
    iter_batch_headers,
    read_header,
    validate_record_set,
)

FORMAT = KafkaBodyFormat()
LIMIT = 1 << 20

optional_bytes = st.one_of(st.none(), st.binary(max_size=64))
header_lists = st.lists(st.tuples(st.text(max_size=8), optional_bytes), max_size=3)
record_specs = st.lists(
    st.tuples(optional_bytes, optional_bytes, header_lists, st.integers(0, 2 ** 50)),
    min_size=1, max_size=20)


@settings(max_examples=60, deadline=None)
@given(record_specs, st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]),
       st.integers(0, 2 ** 40))
def test_round_trip(specs, compression, base):
    check = validate_record_set(build_batch(specs, compression=compression), LIMIT)
    assert check.status is RecordSetStatus.OK  # as produced: baseOffset 0
    body = build_batch(specs, base_offset=base, compression=compression)
    header = read_header(body)
    assert (header.base_offset, header.record_count, header.offset_count) == (base, len(specs), len(specs))
    assert header.max_timestamp == max(ts for *_, ts in specs)
    got = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in decode_records(body)]
    assert got == [(base + i, k, v, list(h), ts) for i, (k, v, h, ts) in enumerate(specs)]


@settings(max_examples=40, deadline=None)
@given(record_specs, st.sampled_from(["none", "gzip"]))
def test_kafka_python_reads_what_we_build(specs, compression):
    body = build_batch(specs, base_offset=5, compression=compression)
    theirs = KafkaPythonBatch(body)
    assert theirs.validate_crc()
    got = [(r.offset, r.key, r.value, r.timestamp) for r in theirs]
    assert got == [(5 + i, k, v, ts) for i, (k, v, _, ts) in enumerate(specs)]


def test_assign_create_time_keeps_crc_and_moves_offsets():
    body = memoryview(bytearray(build_batch([(b"a", b"1", [], 10), (b"b", b"2", [], 20)])))
    crc = FORMAT.stored_checksum(body)
    FORMAT.assign(body, 1000, None)
    assert FORMAT.stored_checksum(body) == crc == FORMAT.computed_checksum(body)
    assert [r.offset for r in decode_records(body)] == [1000, 1001]
    assert [r.timestamp for r in decode_records(body)] == [10, 20]


def test_assign_log_append_time_rewrites_timestamps_and_crc():
    body = memoryview(bytearray(build_batch([(b"a", b"1", [], 10), (b"b", b"2", [], 20)],
                                            compression="lz4")))
    FORMAT.assign(body, 7, 5_000)
    assert FORMAT.stored_checksum(body) == FORMAT.computed_checksum(body)
    header = read_header(body)
    assert header.attributes & 0x08 and header.max_timestamp == 5_000
    assert [(r.offset, r.timestamp) for r in decode_records(body)] == [(7, 5_000), (8, 5_000)]
    assert KafkaPythonBatch(bytes(body)).validate_crc()


def test_timestamp_lookups():
    body = memoryview(bytearray(build_batch(
        [(None, b"a", [], 100), (None, b"b", [], 50), (None, b"c", [], 300), (None, b"d", [], 300)],
        base_offset=10, compression="gzip")))
    assert FORMAT.offset_for_timestamp(body, 0) == (10, 100)
    assert FORMAT.offset_for_timestamp(body, 101) == (12, 300)
    assert FORMAT.offset_for_timestamp(body, 301) is None
    assert FORMAT.max_timestamp_offset(body) == (12, 300)  # the first of the tied records


def test_keys_skip_null_keys_and_decompress(walker):
    body = memoryview(bytearray(build_batch(
        [(b"k1", b"v", [], 1), (None, b"v", [], 2), (b"", b"v", [], 3)], compression="snappy")))
    assert list(FORMAT.keys(body)) == [b"k1", b""]


@settings(max_examples=60, deadline=None)
@given(record_specs, st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]))
def test_key_scanner_agrees_with_the_record_decoder(walker, specs, compression):
    body = memoryview(bytearray(build_batch(specs, compression=compression)))
    want = [record.key for record in decode_records(body) if record.key is not None]
    assert FORMAT.keys(body) == want


def test_key_scanner_refuses_malformed_records_without_crashing(walker):
    record_keys = walker.record_keys
    records = bytes(build_batch([(b"key", b"value", [], 1)] * 3))[HEADER_SIZE:]
    assert record_keys(records, 3) == [b"key"] * 3
    for cut in range(len(records) - 1):  # every truncation fails cleanly
        with pytest.raises(ValueError, match="record"):
            record_keys(records[:cut], 3)
    bad_key_length = bytearray(records)
    bad_key_length[4] = 0x7E  # zigzag 63: a key longer than its record
    with pytest.raises(ValueError, match="record 0: key length 63 does not fit"):
        record_keys(bytes(bad_key_length), 1)
    with pytest.raises(ValueError, match="record 0: invalid record length 0"):
        record_keys(b"\x00", 1)


def test_batch_scanner_reads_the_header_itself_and_leaves_compressed_batches_to_the_caller(
        walker):
    batch_keys = walker.batch_keys
    specs = [(b"a", b"1", [], 1), (None, b"2", [], 2), (b"c" * 300, b"3", [], 3)]
    plain = build_batch(specs)
    assert batch_keys(plain) == [b"a", b"c" * 300]
    assert batch_keys(memoryview(bytearray(plain))[:]) == [b"a", b"c" * 300]
    assert batch_keys(build_batch(specs, compression="lz4")) is None
    with pytest.raises(ValueError, match="shorter than its header"):
        batch_keys(plain[:HEADER_SIZE - 1])
    with pytest.raises(ValueError, match="do not fit"):
        batch_keys(plain[:-1])  # batchLength claims one byte more than there is
    wrong_count = bytearray(plain)
    wrong_count[60] += 1  # recordCount one too many: the walk runs out of records
    with pytest.raises(ValueError, match="the records end after 3 of the 4 records"):
        batch_keys(bytes(wrong_count))


def test_several_batches_and_partial_tail():
    first = build_batch([(None, b"x", [], 1)], base_offset=0)
    second = build_batch([(None, b"y", [], 2), (None, b"z", [], 3)], base_offset=1)
    joined = first + second
    assert validate_record_set(first + build_batch([(None, b"y", [], 2)]), LIMIT).status is \
        RecordSetStatus.INVALID_RECORD  # produce takes one batch per partition, as Kafka
    assert [h.base_offset for h in iter_batch_headers(joined)] == [0, 1]
    # Readers stop quietly at a partial batch, the way fetch responses may end.
    assert [r.value for r in decode_records(joined + second[:HEADER_SIZE + 3])] == [b"x", b"y", b"z"]


def _resealed(body: bytes, at: int, fmt: str, value: int) -> bytes:
    """A field changed and the CRC made right again (baseOffset is outside the CRC anyway)."""
    out = bytearray(body)
    struct.pack_into(fmt, out, at, value)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def corrupt(body: bytes, at: int, value: int) -> bytes:
    out = bytearray(body)
    out[at] = value
    return bytes(out)


@pytest.mark.parametrize("mutate, status", [
    (lambda b: b[:-1], RecordSetStatus.CORRUPT_MESSAGE),             # truncated
    (lambda b: b[:10], RecordSetStatus.CORRUPT_MESSAGE),             # shorter than a header
    (lambda b: corrupt(b, len(b) - 1, b[-1] ^ 0xFF), RecordSetStatus.CORRUPT_MESSAGE),  # CRC
    (lambda b: corrupt(b, 16, 1), RecordSetStatus.UNSUPPORTED_MAGIC),
    (lambda b: b"", RecordSetStatus.EMPTY),
    (lambda b: _resealed(b, 0, ">q", 7), RecordSetStatus.INVALID_RECORD),  # baseOffset not 0
    (lambda b: _resealed(b, 23, ">i", 3), RecordSetStatus.INVALID_RECORD),  # lastOffsetDelta
])
def test_validation_rejects_bad_input(mutate, status):
    body = build_batch([(b"k", b"value", [], 1)])
    check = validate_record_set(mutate(body), LIMIT)
    assert check.status is status
    assert check.detail


def test_validation_size_limit_and_control_batches():
    body = build_batch([(None, b"v" * 1000, [], 1)])
    assert validate_record_set(body, len(body) - 1).status is RecordSetStatus.RECORD_TOO_LARGE
    assert validate_record_set(body, len(body)).status is RecordSetStatus.OK
    control = bytearray(body)
    attributes = struct.unpack_from(">h", control, 21)[0] | 0x20
    struct.pack_into(">h", control, 21, attributes)
    FORMAT.assign(memoryview(control), 0, 1)  # re-seal the CRC (also sets LogAppendTime)
    assert validate_record_set(bytes(control), LIMIT).status is RecordSetStatus.INVALID_RECORD


def test_header_fields_for_idempotent_producers():
    body = build_batch([(None, b"a", [], 1)] * 3, producer_id=9, producer_epoch=2,
                       base_sequence=2 ** 31 - 2, transactional=True)
    header = read_header(body)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 2, 2 ** 31 - 2)
    assert header.is_transactional and not header.is_control
    assert header.last_sequence == 0  # sequences wrap at 2^31


def test_build_refuses_empty_and_unknown_codec():
    with pytest.raises(ValueError):
        build_batch([])
    with pytest.raises(ValueError):
        build_batch([(None, b"a", [], 1)], compression="brotli")
