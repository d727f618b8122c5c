"""engine.store_inspect / engine.store_verify on a data directory a real broker wrote (see
tests/engine/store_data.py), each test on its own copy damaged by hand."""
from __future__ import annotations

import shutil
from itertools import pairwise
from pathlib import Path

import pytest

from commitgate.engine.checkpoint import Checkpoint
from commitgate.engine.paths import StorePaths
from commitgate.engine.queue_core import CQ_UNIT
from commitgate.engine.store_files import NotAStore
from commitgate.engine.store_inspect import ERROR, WARNING, StoreReport, inspect_store
from commitgate.engine.store_verify import verify_store
from commitgate.launcher import BrokerProcess
from commitgate.protocol.record_batch import KafkaBodyFormat
from tests.engine.store_data import (
    BROKER_OVERRIDES,
    PARTITIONS,
    QUEUE_ENTRIES_PER_FILE,
    RECORDS,
    SEGMENT_BYTES,
    TOPIC,
    VALUE_BYTES,
    Produced,
    copy_store,
    flip_byte,
    segment_of,
    unit,
    value_byte,
    write_store,
)


@pytest.fixture(scope="module")
def produced(tmp_path_factory) -> Produced:
    return write_store(tmp_path_factory.mktemp("store"))


@pytest.fixture
def copy(produced: Produced, tmp_path: Path) -> Path:
    return copy_store(produced.data_dir, tmp_path / "copy")


def findings(report: StoreReport, severity: str) -> list[str]:
    return [f"{f.file} @{f.offset}: {f.message}" for f in report.findings
            if f.severity == severity]


def test_clean_store_is_reported_whole(produced: Produced, copy: Path) -> None:
    report = inspect_store(copy)
    assert report.findings == []
    assert report.in_use_by is None and not report.abort_present
    queues = {q.partition: q for q in report.queues if q.topic == TOPIC}
    assert {p: q.end_offset for p, q in queues.items()} == produced.ends
    for queue in queues.values():
        assert queue.first_offset == 0 and queue.units == queue.end_offset
        assert len(queue.files) == -(-queue.end_offset // QUEUE_ENTRIES_PER_FILE)
    written = [s for s in report.segments if s.written_bytes]
    assert len(written) >= 3  # the data spans several segments
    assert all(s.written_bytes == SEGMENT_BYTES for s in written[:-1])
    assert report.commitlog_end == written[-1].start_offset + written[-1].written_bytes
    assert report.checkpoint is not None
    assert report.checkpoint.commitlog_flushed == report.commitlog_end
    assert sum(f.keys for f in report.index_files) == produced.keys
    assert [(t.name, t.partitions) for t in report.topics] == [(TOPIC, PARTITIONS)]


def test_clean_store_verifies_with_every_entry(copy: Path) -> None:
    calls: list[tuple[int, int]] = []
    result = verify_store(copy, KafkaBodyFormat(), lambda done, total: calls.append((done,
                                                                                    total)))
    assert result.clean, result.mismatches
    assert result.entries == RECORDS  # one batch a record, one entry a batch
    assert result.end_offset == inspect_store(copy).commitlog_end
    # entries and the BLANK fillers closing full segments
    assert RECORDS * VALUE_BYTES < result.bytes <= result.end_offset - result.first_offset
    assert calls[-1] == (result.end_offset - result.first_offset,) * 2
    assert all(a[0] <= b[0] for a, b in pairwise(calls))


def test_verify_names_the_entry_of_a_flipped_byte(copy: Path) -> None:
    segment, pos, phy = value_byte(copy, 1, 40)
    flip_byte(segment, pos)
    result = verify_store(copy, KafkaBodyFormat())
    assert result.entries == RECORDS
    [mismatch] = result.mismatches
    assert (mismatch.segment, mismatch.file_offset, mismatch.commitlog_offset) == \
        (str(segment), phy % SEGMENT_BYTES, phy)
    assert "body CRC mismatch" in mismatch.problem


def test_verify_notices_a_bodycrc_flip(copy: Path) -> None:
    _queue, _pos, phy, _size = unit(copy, 0, 7)
    segment, pos = segment_of(copy, phy)
    flip_byte(segment, pos + 8)  # BODYCRC, a copy of the batch's CRC outside it
    [mismatch] = verify_store(copy, KafkaBodyFormat()).mismatches
    assert mismatch.commitlog_offset == phy and "BODYCRC" in mismatch.problem


def test_verify_walks_on_past_a_damaged_header(copy: Path) -> None:
    _queue, _pos, phy, size = unit(copy, 2, 10)
    segment, pos = segment_of(copy, phy)
    flip_byte(segment, pos + 1)  # TOTALSIZE: the walk cannot step over this entry
    result = verify_store(copy, KafkaBodyFormat())
    [mismatch] = result.mismatches
    assert (mismatch.segment, mismatch.file_offset) == (str(segment), pos)
    assert mismatch.skipped_bytes == size  # it found the next entry
    assert result.entries == RECORDS - 1


def test_inspect_reports_a_queue_deleted_by_hand(copy: Path) -> None:
    directory = StorePaths(copy).consumequeue_dir(TOPIC, 1)
    shutil.rmtree(directory)
    report = inspect_store(copy)
    [error] = findings(report, ERROR)
    assert error.startswith(f"{directory} @None") and "directory is missing" in error
    assert f"{TOPIC}-1" in error


def test_inspect_reports_units_past_the_end_and_into_a_missing_segment(copy: Path) -> None:
    end = inspect_store(copy).commitlog_end
    queue_file, pos, _phy, size = unit(copy, 0, 5)
    with open(queue_file, "r+b") as file:
        file.seek(pos)
        file.write(CQ_UNIT.pack(end, size, 0))
    first_segment, _ = segment_of(copy, 0)
    first_segment.unlink()  # the oldest segment goes: every unit pointing into it dangles
    report = inspect_store(copy)
    errors = findings(report, ERROR)
    assert any(e.startswith(f"{queue_file} @{pos}") and "past the CommitLog's written end" in e
               and "the first at offset 5" in e for e in errors), errors
    assert any("into a missing CommitLog segment" in e and "the first at offset 0" in e
               for e in errors), errors


def test_inspect_reports_a_gap_in_segment_names(copy: Path) -> None:
    middle, _ = segment_of(copy, SEGMENT_BYTES)
    middle.unlink()
    errors = findings(inspect_store(copy), ERROR)
    assert any(e.startswith(f"{segment_of(copy, 2 * SEGMENT_BYTES)[0]} @None: gap") and
               f"[{SEGMENT_BYTES}, {2 * SEGMENT_BYTES})" in e for e in errors), errors
    result = verify_store(copy, KafkaBodyFormat())
    assert any("no segment file" in m.problem for m in result.mismatches)


def test_inspect_reports_a_checkpoint_ahead_and_an_unclean_stop(copy: Path) -> None:
    paths = StorePaths(copy)
    end = inspect_store(copy).commitlog_end
    value = Checkpoint.decode(paths.checkpoint.read_bytes())
    value.commitlog_flushed = end + 4096
    paths.checkpoint.write_bytes(value.encode())
    paths.abort.touch()
    report = inspect_store(copy)
    assert any("checkpoint ahead of the disk: commitlog_flushed" in e
               for e in findings(report, ERROR))
    assert any(w.startswith(f"{paths.abort} @None") and "uncleanly" in w
               for w in findings(report, WARNING))


def test_tools_never_write_and_say_when_a_broker_holds_the_store(copy: Path) -> None:
    before = _tree(copy)
    assert inspect_store(copy).in_use_by is None
    assert verify_store(copy, KafkaBodyFormat()).clean
    assert _tree(copy) == before  # nothing written, created or removed
    broker = BrokerProcess(copy, BROKER_OVERRIDES).start()
    try:
        assert inspect_store(copy).in_use_by == broker.process.pid
        assert verify_store(copy, KafkaBodyFormat()).in_use_by == broker.process.pid
    finally:
        assert broker.stop() == 0, broker.log_tail()


def test_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(NotAStore):
        inspect_store(tmp_path)
    with pytest.raises(NotAStore):
        verify_store(tmp_path / "absent", KafkaBodyFormat())


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}

