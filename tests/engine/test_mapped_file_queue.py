"""MappedFileQueue: naming, lookup by offset, rolls, pre-allocation, load, truncate, deletion."""
from __future__ import annotations

import pytest

from commitgate.engine.allocate_mapped_file_service import AllocateMappedFileService
from commitgate.engine.mapped_file_queue import MappedFileQueue, StoreDamaged
from commitgate.engine.paths import offset_file_name


def _fill(queue: MappedFileQueue, files: int) -> None:
    for _ in range(files):
        mapped = queue.last_for_append()
        mapped.append((b"z" * mapped.free_bytes,), mapped.free_bytes)


def test_segments_are_named_by_start_offset_and_found_by_arithmetic(tmp_path):
    queue = MappedFileQueue(tmp_path, 1024)
    _fill(queue, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        offset_file_name(0), offset_file_name(1024), offset_file_name(2048)]
    assert queue.find(0).start_offset == 0
    assert queue.find(1500).start_offset == 1024
    assert queue.find(3072) is None
    assert queue.max_offset == 3072
    queue.close()


def test_preallocation_prepares_the_next_segment_in_background(tmp_path):
    allocator = AllocateMappedFileService(warm_up=False)
    queue = MappedFileQueue(tmp_path, 4096,
                            lambda path, start, nxt: allocator.get(path, start, 4096, nxt))
    queue.last_for_append()
    allocator._executor.submit(lambda: None).result()  # let the background request finish
    assert (tmp_path / offset_file_name(4096)).exists()  # made before anyone asked for it
    _fill(queue, 2)
    assert [m.start_offset for m in queue.files] == [0, 4096]
    queue.close()
    allocator.shutdown()
    assert not (tmp_path / offset_file_name(8192)).exists()  # an untaken spare is removed


def test_load_reopens_segments_and_set_write_end(tmp_path):
    queue = MappedFileQueue(tmp_path, 1024)
    _fill(queue, 2)
    queue.close()
    again = MappedFileQueue(tmp_path, 1024)
    again.load()
    again.set_write_end(1500)
    assert [m.wrote_position for m in again.files] == [1024, 476]
    assert again.max_offset == 1500
    again.close()


def test_load_refuses_a_gap_between_segments(tmp_path):
    queue = MappedFileQueue(tmp_path, 1024)
    _fill(queue, 3)
    queue.close()
    (tmp_path / offset_file_name(1024)).unlink()
    with pytest.raises(StoreDamaged, match="gap"):
        MappedFileQueue(tmp_path, 1024).load()


def test_load_refuses_a_resized_segment(tmp_path):
    queue = MappedFileQueue(tmp_path, 1024)
    _fill(queue, 1)
    queue.close()
    with open(tmp_path / offset_file_name(0), "r+b") as fh:
        fh.truncate(100)
    with pytest.raises(StoreDamaged, match="size"):
        MappedFileQueue(tmp_path, 1024).load()


def test_truncate_cuts_inside_a_segment_and_removes_later_ones(tmp_path):
    queue = MappedFileQueue(tmp_path, 1024)
    _fill(queue, 3)
    queue.truncate(1100)
    assert [m.start_offset for m in queue.files] == [0, 1024]
    assert queue.max_offset == 1100
    assert bytes(queue.find(1100).read(76, 10)) == bytes(10)
    assert not (tmp_path / offset_file_name(2048)).exists()
    queue.close()


def test_delete_files_below_keeps_the_last_segment(tmp_path):
    queue = MappedFileQueue(tmp_path, 1024)
    _fill(queue, 3)
    gone = queue.delete_files_below(10_000)
    assert [m.start_offset for m in gone] == [0, 1024]
    assert queue.min_offset == 2048
    for mapped in gone:
        mapped.destroy()
    queue.close()


def test_flush_returns_the_flushed_end(tmp_path):
    queue = MappedFileQueue(tmp_path, 1024)
    _fill(queue, 1)
    queue.last_for_append().append((b"abc",), 3)
    assert queue.flush() == 1027
    assert queue.flushed_offset == 1027
    queue.close()
