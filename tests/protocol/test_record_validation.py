"""Record-level validation of produced batches (protocol.record_batch.validate_record_set and
the walk in protocol/_record_keys.c, or protocol/record_walk.py: every test runs with each):
what Kafka's LogValidator refuses is refused, with the status the gateway maps to Kafka's error,
and whatever passes is readable by a record reader."""
from __future__ import annotations

import struct
import tracemalloc

import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from commitgate.protocol.record_batch import (
    CODECS,
    HEADER_SIZE,
    MAX_DECOMPRESSION_RATIO,
    KafkaBodyFormat,
    RecordProblem,
    RecordRules,
    RecordSetStatus,
    build_batch,
    decode_records,
    validate_record_set,
)
from tests.protocol.raw_batches import batch_of, compress, field, record, seal, varint

LIMIT = 1 << 20
COMPRESSED = ["gzip", "snappy", "lz4", "zstd"]
pytestmark = pytest.mark.usefixtures("walker")  # every test in C and in Python


ANY = RecordRules()


def _status(batch, limit: int = LIMIT, rules: RecordRules = ANY):
    check = validate_record_set(bytes(batch), limit, rules)
    return check.status, check.detail


def test_valid_records_with_headers_and_null_fields_pass():
    records = [record(i, key=None if i % 2 else b"k", value=None if i == 3 else b"v" * i,
                      headers=[(b"h", b"x"), (b"n", None)], timestamp_delta=i * 10)
               for i in range(6)]
    check = validate_record_set(bytes(batch_of(records)), LIMIT)
    assert check.status is RecordSetStatus.OK
    assert check.newest == [1_000 + 50]


@pytest.mark.parametrize("compression", ["none", *COMPRESSED])
def test_batches_of_every_codec_from_the_builder_pass(compression):
    specs = [(b"k%d" % i, b"value" * i, [("h", b"1")], 5_000 + i) for i in range(200)]
    check = validate_record_set(build_batch(specs, compression=compression), LIMIT)
    assert check.status is RecordSetStatus.OK
    assert check.newest == [5_199]


def test_a_tiny_batch_claiming_2_31_records_is_refused_without_allocating():
    batch = seal(record(0, key=b"k", value=None), 2 ** 31 - 1)  # count = lastOffsetDelta + 1, CRC right
    assert len(batch) == 69
    status, detail = _status(batch)
    assert status is RecordSetStatus.INVALID_RECORD
    assert "end after 1 of the 2147483647 records" in detail


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_ids_are_invalid_record(codec):
    status, detail = _status(seal(record(0), 1, codec=codec))
    assert status is RecordSetStatus.INVALID_RECORD
    assert f"unknown compression codec id {codec}" in detail


def _payload(compression: str) -> bytes:
    return compress(compression, b"".join(record(i, value=b"v" * 50) for i in range(20)))


@pytest.mark.parametrize("compression", COMPRESSED)
@pytest.mark.parametrize("damage", ["cut in half", "not a stream", "trailing bytes"])
def test_corrupt_compressed_payloads_are_corrupt_message(compression, damage):
    payload = _payload(compression)
    bad = {"cut in half": payload[:len(payload) // 2], "not a stream": b"\x00" * 50,
           "trailing bytes": payload + b"\x01\x02"}[damage]
    status, detail = _status(seal(bad, 20, codec=CODECS[compression]))
    assert status is RecordSetStatus.CORRUPT_MESSAGE
    assert compression in detail or "cut off" in detail


@pytest.mark.parametrize("compression", ["gzip", "lz4", "zstd"])  # checksummed streams
def test_a_flipped_byte_inside_a_checksummed_stream_is_corrupt_message(compression):
    payload = bytearray(_payload(compression) if compression != "zstd" else
                        zstandard.ZstdCompressor(write_checksum=True).compress(
                            b"".join(record(i, value=b"v" * 50) for i in range(20))))
    payload[len(payload) // 2] ^= 0xFF
    assert _status(seal(bytes(payload), 20, codec=CODECS[compression]))[0] is \
        RecordSetStatus.CORRUPT_MESSAGE


def test_lz4_frames_with_dependent_blocks_are_refused_like_kafka():
    region = b"".join(record(i, value=bytes(range(256)) * 2) for i in range(200))
    linked = lz4.frame.compress(region, block_linked=True)  # blocks of 64 KiB, as kafkajs's
    assert linked[4] & 0x20 == 0  # the frame descriptor's block independence flag is clear
    status, detail = _status(seal(linked, 200, codec=CODECS["lz4"]))
    assert status is RecordSetStatus.INVALID_RECORD
    assert "dependent blocks" in detail


def _framing_cases() -> dict[str, tuple[bytes, int, str]]:
    """records region, count, what the refusal says."""
    good = record(0)
    over_long = b"\x80" * 5 + b"\x01"
    return {
        "record length 0": (varint(0), 1, "invalid record length 0"),
        "record length past the end": (varint(40) + good[1:], 1, "expected to read 40 bytes"),
        "varint running off the end": (b"\x80\x80", 1, "cut off"),
        "over-long varint": (over_long, 1, "longer than 5 bytes"),
        "key longer than its record": (
            varint(7) + b"\x00\x00\x00" + varint(60) + b"k" + b"\x00\x00", 1, "key length 60"),
        "key length below -1": (
            varint(6) + b"\x00\x00\x00" + varint(-2) + b"\x00\x00", 1, "key length -2"),
        "offset deltas out of order": (good + record(1, offset_delta=5), 2, "offset delta 5"),
        "trailing bytes": (good + b"\x00", 1, "bytes follow the last of the 1 records"),
        "count above the records": (good + record(1), 3, "end after 2 of the 3 records"),
        "fields shorter than the length": (
            varint(len(good)) + good[1:] + b"\x00", 1, "expected to read 9 bytes"),
        "fields longer than the length": (varint(7) + good[1:], 1, "run past its length 7"),
        "header key not UTF-8": (record(0, headers=[(b"\xed\xa0\x80", b"v")]), 1, "UTF-8"),
        "negative header count": (
            varint(6) + b"\x00\x00\x00" + field(b"") + field(b"") + varint(-1), 1,
            "invalid number of record headers -1"),
        "null header key": (record(0, headers=[(None, b"v")]), 1, "negative header key size -1"),
        "header count above the bytes": (
            varint(6) + b"\x00\x00\x00" + field(b"") + field(b"") + varint(50), 1,
            "invalid number of record headers 50"),
    }


@pytest.mark.parametrize("compression", ["none", "zstd", "gzip"])
@pytest.mark.parametrize("case", sorted(_framing_cases()))
def test_record_framing_errors_are_invalid_record(case, compression):
    region, count, says = _framing_cases()[case]
    status, detail = _status(seal(compress(compression, region), count,
                                  codec=CODECS[compression]))
    assert status is RecordSetStatus.INVALID_RECORD
    assert says in detail


def test_compacted_topics_get_one_record_error_per_record_without_a_key():
    records = [record(i, key=None if i in (1, 3) else b"k") for i in range(5)]
    check = validate_record_set(bytes(batch_of(records)), LIMIT, RecordRules(need_keys=True))
    assert check.status is RecordSetStatus.INVALID_RECORD
    assert [(e.index, e.problem) for e in check.record_errors] == \
        [(1, RecordProblem.KEY_MISSING), (3, RecordProblem.KEY_MISSING)]
    assert check.record_error_count == 2


def test_timestamps_out_of_range_are_invalid_timestamp_and_the_key_error_comes_first():
    deltas = [-600, 500, 1_600, 1_700]  # base 1000: 400, 1500, 2600, 2700
    records = [record(i, key=None if i == 3 else b"k", timestamp_delta=d)
               for i, d in enumerate(deltas)]
    rules = RecordRules(need_keys=True, timestamps=(1_000, 2_000))
    check = validate_record_set(bytes(batch_of(records)), LIMIT, rules)
    assert check.status is RecordSetStatus.INVALID_TIMESTAMP
    assert [(e.index, e.problem, e.timestamp) for e in check.record_errors] == [
        (0, RecordProblem.TIMESTAMP_OUT_OF_RANGE, 400),
        (2, RecordProblem.TIMESTAMP_OUT_OF_RANGE, 2_600),
        (3, RecordProblem.KEY_MISSING, 2_700)]


def test_records_without_timestamps_are_never_out_of_range():
    batch = batch_of([record(0)], base_timestamp=-1)
    check = validate_record_set(bytes(batch), LIMIT, RecordRules(timestamps=(10, 20)))
    assert check.status is RecordSetStatus.OK


def test_record_errors_are_all_counted_and_the_first_thousand_kept():
    batch = batch_of([record(i, key=None) for i in range(1_500)], "lz4")
    check = validate_record_set(bytes(batch), LIMIT, RecordRules(need_keys=True))
    assert (len(check.record_errors), check.record_error_count) == (1_000, 1_500)


def test_log_append_time_from_a_producer_is_invalid_timestamp():
    log_append_time = 0x08  # attributes bit 3
    status, detail = _status(seal(record(0), 1, codec=log_append_time))
    assert status is RecordSetStatus.INVALID_TIMESTAMP
    assert "should not set timestamp type to LogAppendTime" in detail


def _bomb(record_bytes: int) -> bytes:
    """One record whose value is ``record_bytes`` of zeros, zstd-compressed as a stream (never
    held whole here either)."""
    value_length = record_bytes
    head = b"\x00" + varint(0) + varint(0) + field(b"k") + varint(value_length)
    body_length = len(head) + value_length + 1
    compressor = zstandard.ZstdCompressor().compressobj()
    out = [compressor.compress(varint(body_length) + head)]
    zeros = b"\x00" * (1 << 20)
    for start in range(0, value_length, len(zeros)):
        out.append(compressor.compress(zeros[:min(len(zeros), value_length - start)]))
    out.append(compressor.compress(varint(0)))  # no headers
    out.append(compressor.flush())
    return b"".join(out)


def test_records_decompressing_past_the_bound_are_too_large():
    limit = 4096
    payload = _bomb(MAX_DECOMPRESSION_RATIO * limit)
    assert len(payload) < limit
    status, detail = _status(seal(payload, 1, codec=CODECS["zstd"]), limit)
    assert status is RecordSetStatus.RECORD_TOO_LARGE
    assert f"at most {MAX_DECOMPRESSION_RATIO} times max.message.bytes" in detail


def test_a_large_record_is_validated_in_bounded_memory():
    payload = _bomb(64 << 20)  # 64 MiB of records from a few KB
    batch = bytes(seal(payload, 1, codec=CODECS["zstd"]))
    tracemalloc.start()
    try:
        check = validate_record_set(batch, 4 << 20)  # bound: 128 MiB of records
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert check.status is RecordSetStatus.OK
    assert peak < 2 << 20  # pieces of one zstd block, not the 64 MiB


def test_a_gzip_batch_gives_its_newest_timestamp_and_a_wrong_count_or_record_is_refused():
    good = [record(i, timestamp_delta=i) for i in range(3)]
    assert validate_record_set(bytes(batch_of(good, "gzip")), LIMIT).newest == [1_002]
    assert _status(batch_of(good, count=4))[0] is RecordSetStatus.INVALID_RECORD
    assert _status(batch_of(good[:2] + [b"\x0e\x00"]))[0] is RecordSetStatus.INVALID_RECORD


# ---- properties --------------------------------------------------------------------------

record_specs = st.lists(st.tuples(
    st.one_of(st.none(), st.binary(max_size=40)), st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))),
             max_size=3),
    st.integers(min_value=0, max_value=2 ** 40)), min_size=1, max_size=30)


@settings(max_examples=80, deadline=None)
@given(record_specs, st.sampled_from(["none", *COMPRESSED]), st.integers(1, 97))
def test_the_walk_gives_the_same_answer_for_any_piece_size(walker, specs, compression, piece):
    batch = build_batch(specs, compression=compression)
    header_count = len(specs)
    region = build_batch(specs)[HEADER_SIZE:]
    walk = walker.RecordWalk(header_count, struct.unpack_from(">q", batch, 27)[0])
    assert all(walk.feed(region[i:i + piece]) for i in range(0, len(region), piece))
    assert walk.finish() and walk.records == header_count
    check = validate_record_set(batch, LIMIT)
    assert check.status is RecordSetStatus.OK
    assert check.newest == [max(spec[3] for spec in specs)]


@settings(max_examples=300, deadline=None)
@given(record_specs, st.data())
def test_whatever_passes_is_readable_by_a_record_reader(specs, data):
    """Any byte of the records region changed (CRC resealed): refused, or readable with the
    claimed count."""
    batch = bytearray(build_batch(specs))
    at = data.draw(st.integers(HEADER_SIZE, len(batch) - 1))
    batch[at] = data.draw(st.integers(0, 255))
    resealed = seal(bytes(batch[HEADER_SIZE:]), len(specs),
                    base_timestamp=struct.unpack_from(">q", batch, 27)[0])
    check = validate_record_set(bytes(resealed), LIMIT)
    if check.status is RecordSetStatus.OK:
        assert len(decode_records(bytes(resealed))) == len(specs)


# ---- keys for the IndexBuilder -----------------------------------------------------------

def _index_keys(batch: bytes) -> list[bytes]:
    """What the IndexBuilder reads itself (decompressing the batch)."""
    return KafkaBodyFormat().keys(memoryview(batch))


@pytest.mark.parametrize("compression", COMPRESSED)
def test_a_compressed_batch_gives_the_index_keys_within_the_budget(compression):
    """Null keys left out, empty and repeated ones kept, in order; a key longer than a
    decompressed piece (a zstd block is 128 KiB) is copied whole."""
    keys = [b"a", None, b"", b"a", b"long" * 50_000, None, b"z"]
    batch = build_batch([(key, b"v" * 100, [], 1_000) for key in keys], compression=compression)
    check = validate_record_set(batch, LIMIT, ANY, key_budget=LIMIT)
    assert check.status is RecordSetStatus.OK
    assert check.keys == _index_keys(batch) == [key for key in keys if key is not None]


def test_keys_come_back_only_for_compressed_batches_within_the_budget():
    keys = [b"key-%d" % i for i in range(100)]
    spans = 16 * len(keys)  # the walk counts 16 bytes a key beside the key's own
    needed = sum(map(len, keys)) + spans
    plain = build_batch([(key, b"v", [], 1_000) for key in keys])
    zstd = build_batch([(key, b"v", [], 1_000) for key in keys], compression="zstd")
    assert validate_record_set(plain, LIMIT, ANY, key_budget=LIMIT).keys is None
    assert validate_record_set(zstd, LIMIT, ANY).keys is None  # not asked for
    assert validate_record_set(zstd, LIMIT, ANY, key_budget=needed).keys == keys
    over = validate_record_set(zstd, LIMIT, ANY, key_budget=needed - 1)
    assert over.status is RecordSetStatus.OK and over.keys is None


def test_a_refused_batch_gives_no_keys():
    batch = batch_of([record(0), record(5)], "lz4")  # offset delta 5 for record 1
    check = validate_record_set(bytes(batch), LIMIT, ANY, key_budget=LIMIT)
    assert check.status is RecordSetStatus.INVALID_RECORD and check.keys is None


@settings(max_examples=80, deadline=None)
@given(record_specs, st.integers(1, 97))
def test_copied_keys_are_the_index_keys_for_any_piece_size(walker, specs, piece):
    batch = build_batch(specs, compression="gzip")
    region = build_batch(specs)[HEADER_SIZE:]
    walk = walker.RecordWalk(len(specs), struct.unpack_from(">q", batch, 27)[0],
                             key_budget=LIMIT)
    assert all(walk.feed(region[i:i + piece]) for i in range(0, len(region), piece))
    assert walk.finish()
    assert walk.keys == _index_keys(batch)
