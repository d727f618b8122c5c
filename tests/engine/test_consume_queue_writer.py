"""ConsumeQueueWriter and its C thread: pages of units are written off the appending thread,
readable meanwhile, pinned against the handle cache, kept pending when a write fails; cutting
or draining a queue waits for its page in flight."""
from __future__ import annotations

import errno
import os

import pytest

from engine import _write_thread as write_thread  # built by pip install (setup.py)
from engine.consume_queue import CQ_UNIT, PENDING_BYTES, UNIT_SIZE
from engine.consume_queue_store import ConsumeQueueStore
from engine.file_handle_cache import FileHandleCache
from engine.mapped_file import MappedFile
from engine.paths import StorePaths

PAGE_UNITS = PENDING_BYTES // UNIT_SIZE + 1  # the fewest units that make a page


def _store(tmp_path, capacity: int = 64, per_file: int = 1000) -> ConsumeQueueStore:
    store = ConsumeQueueStore(StorePaths(tmp_path), per_file, FileHandleCache(capacity))
    store.create_dirs("t", range(2))
    store.start_writer()
    assert store.writer is not None
    return store


def test_write_thread_writes_in_order_and_reports_each_jobs_errno(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(bytes(8))
    writable = os.open(path, os.O_RDWR)
    read_only = os.open(path, os.O_RDONLY)
    thread = write_thread.WriteThread()
    try:
        thread.submit(1, [(writable, 0, b"ab"), (writable, 6, memoryview(b"yz"))])
        thread.submit(2, [(read_only, 2, b"no")])
        thread.submit(3, [(writable, 2, bytearray(b"cd"))])
        thread.wait()
        assert thread.finished() == [(1, 0), (2, errno.EBADF), (3, 0)]
        assert thread.finished() == []
        assert path.read_bytes() == b"abcd\0\0yz"
        thread.close()
        with pytest.raises(ValueError, match="stopped"):
            thread.submit(4, [(writable, 0, b"x")])
    finally:
        os.close(writable)
        os.close(read_only)


def test_a_page_goes_to_the_writer_and_stays_readable_until_applied(tmp_path):
    store = _store(tmp_path)
    queue = store.get("t", 0)
    queue.put(0, PAGE_UNITS, phy=0, size=10, timestamp=1)  # a page: handed over
    assert queue.writing == PAGE_UNITS * UNIT_SIZE and queue.pending_from == 0
    queue.put(PAGE_UNITS, 3, phy=10, size=10, timestamp=2)  # waits in pending behind it
    assert queue.get(0) == (0, 10, 1) and queue.get(PAGE_UNITS + 2) == (10, 10, 2)
    store.writer.wait()
    assert queue.writing == 0 and queue.pending_from == PAGE_UNITS
    assert len(queue.pending) == 3 * UNIT_SIZE
    assert queue.units(2, PAGE_UNITS - 2) == CQ_UNIT.pack(0, 10, 1) * 2  # now from the file
    store.close()
    reopened = _store(tmp_path).get("t", 0)
    assert reopened.max_offset == PAGE_UNITS + 3 and reopened.get(PAGE_UNITS + 2) == (10, 10, 2)


def test_a_failed_page_stays_pending_the_next_append_fails_and_the_drain_heals(tmp_path,
                                                                              caplog):
    store = _store(tmp_path)
    queue = store.get("t", 1)
    queue.put(0, 1, phy=0, size=10, timestamp=1)
    queue.drain()  # opens file 0
    mapped = queue._file(0)
    writable = os.dup(mapped.fileno())
    read_only = os.open(mapped.path, os.O_RDONLY)
    os.dup2(read_only, mapped.fileno())  # the file's descriptor now refuses writes
    try:
        queue.put(1, PAGE_UNITS, phy=10, size=10, timestamp=2)
        store.writer.wait()
        assert queue.write_failed and queue.writing == 0 and queue.pending_from == 1
        with pytest.raises(OSError):  # the next page is written inline: the append fails
            queue.put(1 + PAGE_UNITS, PAGE_UNITS, phy=20, size=10, timestamp=3)
        assert queue.get(PAGE_UNITS) == (10, 10, 2)  # still readable from memory
        os.dup2(writable, mapped.fileno())
        assert store.drain()
        assert not queue.write_failed and queue.pending == bytearray()
    finally:
        os.close(writable)
        os.close(read_only)
    assert "kept in memory for a retry" in caplog.text and "t-1" in caplog.text
    store.close()
    assert _store(tmp_path).get("t", 1).get(PAGE_UNITS) == (10, 10, 2)


def test_files_in_flight_are_not_closed_by_eviction_or_a_flush_round(tmp_path):
    handles = FileHandleCache(2)  # one open file, one retired
    first = handles.get("a", lambda: MappedFile(tmp_path / "a", 0, 4096, create=True,
                                                reserve=False))
    first.wrote_position = first.flushed_position = 100  # clean: normally closed on eviction
    first.in_flight = 1
    handles.get("b", lambda: MappedFile(tmp_path / "b", 0, 4096, create=True, reserve=False))
    assert handles.retired == [first] and first.fileno() >= 0
    _files, retired = handles.take_flush_work()
    handles.finish_flush(retired)
    assert handles.retired == [first] and first.fileno() >= 0  # still written: kept
    first.in_flight = 0
    _files, retired = handles.take_flush_work()
    handles.finish_flush(retired)
    assert handles.retired == [] and first.fileno() == -1
    handles.close_all()


@pytest.mark.parametrize("cut", ["truncate", "destroy"])
def test_cutting_a_queue_applies_its_page_in_flight_first(tmp_path, cut):
    store = _store(tmp_path, per_file=PAGE_UNITS)  # the page fills file 0 exactly
    queue = store.get("t", 0)
    queue.put(0, PAGE_UNITS, phy=0, size=10, timestamp=1)
    queue.put(PAGE_UNITS, 5, phy=10, size=10, timestamp=2)
    assert queue.writing
    if cut == "truncate":
        queue.truncate_offset(PAGE_UNITS + 2)
        assert queue.writing == 0 and queue.max_offset == PAGE_UNITS + 2
        assert queue.pending_from == PAGE_UNITS and queue.get(PAGE_UNITS - 1) == (0, 10, 1)
    else:
        store.delete_topic("t")
        assert queue.writing == 0 and not (tmp_path / "consumequeue" / "t").exists()
    store.close()


def test_closing_with_a_page_in_flight_and_another_gathered_writes_both(tmp_path):
    store = _store(tmp_path)
    queue = store.get("t", 0)
    queue.put(0, PAGE_UNITS, phy=0, size=10, timestamp=1)
    queue.put(PAGE_UNITS, PAGE_UNITS, phy=10, size=10, timestamp=2)  # a page, held back
    assert queue.writing == PAGE_UNITS * UNIT_SIZE
    store.close()
    reopened = _store(tmp_path).get("t", 0)
    assert reopened.max_offset == 2 * PAGE_UNITS
    assert reopened.get(2 * PAGE_UNITS - 1) == (10, 10, 2)
