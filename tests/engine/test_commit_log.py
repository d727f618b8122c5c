"""CommitLog: entry layout, segment roll with BLANK filler, decode and validation."""
from __future__ import annotations

import errno
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commitgate.engine import commit_log
from commitgate.engine.commit_log import (
    BLANK_MAGIC,
    ENTRY_PREFIX,
    MESSAGE_MAGIC,
    PREFIX_SIZE,
    CommitLog,
    DispatchRequest,
    topic_trailer,
)
from commitgate.engine.mapped_file_queue import MappedFileQueue
from commitgate.protocol.record_batch import KafkaBodyFormat
from tests.c_and_python import IMPLEMENTATIONS, c_helper
from tests.engine.conftest import batch


def _log(tmp_path, size=4096) -> CommitLog:
    return CommitLog(MappedFileQueue(tmp_path, size), KafkaBodyFormat())


def _append(log: CommitLog, body: memoryview, topic="t", partition=0, offset=0) -> DispatchRequest:
    req = DispatchRequest(topic, partition, offset, 1, 0, 0, 1234, 5678, 0)
    log.append(req, body, topic_trailer(topic), born_host=1, store_host=2)
    return req


@pytest.fixture(params=IMPLEMENTATIONS)
def writer(request, monkeypatch):
    """Entries are written by the C helper, or packed in Python when it is not in use."""
    if request.param == "c":
        c_helper("engine._commit_log")
    else:
        monkeypatch.setattr(commit_log, "_write_entry", None)
    return request.param


def test_entry_layout_matches_the_documented_fields(tmp_path, writer):
    log = _log(tmp_path)
    body = batch([b"hello"])
    req = _append(log, body, partition=3, offset=42)
    entry = log.entry(req.phy_offset, req.size)
    fields = ENTRY_PREFIX.unpack_from(entry)
    assert fields[0] == req.size == PREFIX_SIZE + len(body) + 2 + 1 + 2
    assert fields[1] == MESSAGE_MAGIC
    assert fields[2] == KafkaBodyFormat().stored_checksum(body)
    assert fields[3:8] == (3, 1, 42, 0, 0)  # queue id, flag=count, queue offset, phy, sysflag
    assert fields[8] == 1234 and fields[10] == 5678  # born (max ts) and store timestamps
    assert bytes(log.body(req.phy_offset, req.size)) == bytes(body)
    assert bytes(entry[-5:]) == b"\x00\x01t\x00\x00"


def test_full_segment_gets_a_blank_filler_and_the_entry_rolls(tmp_path):
    log = _log(tmp_path, size=4096)
    body = batch([b"x" * 1500])
    first = _append(log, body)
    second = _append(log, body)
    third = _append(log, body)  # does not fit after two: goes to the next segment
    assert third.phy_offset == 4096
    blank_at = second.phy_offset + second.size
    raw = log.queue.find(blank_at).read(blank_at, 8)
    assert struct.unpack(">iI", raw) == (4096 - blank_at, BLANK_MAGIC)
    assert [r.phy_offset for r in log.iter_entries(0, check_crc=True)] == [
        first.phy_offset, second.phy_offset, third.phy_offset]


def test_reads_across_segments_return_each_body(tmp_path):
    log = _log(tmp_path, size=4096)
    reqs = [_append(log, batch([bytes([i]) * 700]), offset=i) for i in range(12)]
    assert len(log.queue.files) >= 3
    for i, req in enumerate(reqs):
        assert bytes(log.body(req.phy_offset, req.size))[-700:] != b""
        decoded, size = log.decode(req.phy_offset, check_crc=True)
        assert (decoded.queue_offset, size) == (i, req.size)


def test_corrupt_body_fails_the_crc_check_and_ends_the_valid_range(tmp_path):
    log = _log(tmp_path, size=1 << 16)
    reqs = [_append(log, batch([b"v" * 100]), offset=i) for i in range(5)]
    victim = reqs[3]
    mapped = log.queue.find(victim.phy_offset)
    mapped.write_at(victim.phy_offset + PREFIX_SIZE + 70, (b"\xff\xff",), 2)
    assert log.decode(victim.phy_offset, check_crc=False)[0] is not None
    assert log.decode(victim.phy_offset, check_crc=True) == (None, 0)
    assert log.valid_end(0) == victim.phy_offset


def test_entry_at_the_wrong_position_is_invalid(tmp_path):
    log = _log(tmp_path, size=1 << 16)
    req = _append(log, batch([b"a"]))
    mapped = log.queue.find(0)
    mapped.write_at(28, (struct.pack(">q", 999),), 8)  # PHYSICALOFFSET no longer matches
    assert log.decode(req.phy_offset, check_crc=False) == (None, 0)


def test_zeros_after_the_end_read_as_unwritten(tmp_path):
    log = _log(tmp_path, size=1 << 16)
    req = _append(log, batch([b"a"]))
    assert log.unwritten_at(req.phy_offset + req.size)
    assert not log.unwritten_at(req.phy_offset)


@settings(max_examples=50, deadline=None)
@given(topic=st.text("abcXYZ09._-", min_size=1, max_size=249), partition=st.integers(0, 2**31 - 1),
       offset=st.integers(0, 2**62), count=st.integers(1, 10_000), max_ts=st.integers(-1, 2**62),
       payload=st.binary(max_size=3000))
def test_entry_encode_decode_round_trip(tmp_path_factory, topic, partition, offset, count,
                                        max_ts, payload):
    log = _log(tmp_path_factory.mktemp("cl"), size=1 << 16)  # written by the C helper if built
    body = batch([payload])
    req = DispatchRequest(topic, partition, offset, count, 0, 0, max_ts, 77, 5)
    log.append(req, body, topic_trailer(topic), born_host=0, store_host=0)
    decoded, size = log.decode(req.phy_offset, check_crc=True)
    assert decoded == req and size == req.size
    log.queue.close()


def test_c_and_python_writers_store_identical_bytes(tmp_path, monkeypatch):
    c_helper("engine._commit_log")
    images = []
    for name in ("c", "python"):
        if name == "python":
            monkeypatch.setattr(commit_log, "_write_entry", None)
        (tmp_path / name).mkdir()
        log = _log(tmp_path / name, size=1 << 14)
        for i, payload in enumerate([b"a", b"b" * 3000, b"", b"c" * 9000, b"d" * 6000]):
            req = DispatchRequest("topic.x", 7 + i, 2**40 + i, 3, 0, 0, -1, 2**41, 0x55)
            log.append(req, batch([payload]), topic_trailer("topic.x", b"p"), born_host=2**33,
                       store_host=-5)
        log.flush()
        images.append([(tmp_path / name / f.path.name).read_bytes() for f in log.queue.files])
        log.queue.close()
    assert len(images[0]) == 2  # the last entry rolled to a second segment
    assert images[0] == images[1]


def test_c_writer_reports_a_failed_write_with_the_segment_file(tmp_path):
    c_helper("engine._commit_log")
    log = _log(tmp_path)
    mapped = log.queue.last_for_append()
    os.close(mapped.fileno())
    read_only = os.open(mapped.path, os.O_RDONLY)  # takes the closed descriptor's number
    try:
        assert read_only == mapped.fileno()
        with pytest.raises(OSError) as failure:
            _append(log, batch([b"x"]))
    finally:
        os.close(read_only)
        mapped._fd = -1
    assert failure.value.errno == errno.EBADF and str(mapped.path) in str(failure.value)
    assert mapped.wrote_position == 0
    with pytest.raises(ValueError, match="passes the segment end"):
        commit_log._write_entry(b"x" * 5000, b"", 0, 0, 4096, 0, *[0] * 9)
