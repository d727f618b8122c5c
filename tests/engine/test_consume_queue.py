"""ConsumeQueue: units per offset, file boundaries, load, time search, truncation, deletion;
the store of all queues."""
from __future__ import annotations

import asyncio
import errno
import os
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commitgate.engine import queue_writer
from commitgate.engine.consume_queue import (
    CQ_UNIT,
    PENDING_BYTES,
    PENDING_CAPACITY,
    UNIT_SIZE,
    ConsumeQueue,
    UnitReader,
)
from commitgate.engine.consume_queue_store import DRAIN_BATCH, ConsumeQueueStore
from commitgate.engine.file_handle_cache import FileHandleCache
from commitgate.engine.mapped_file import MappedFile
from commitgate.engine.mapped_file_queue import StoreDamaged
from commitgate.engine.paths import StorePaths, offset_file_name
from commitgate.engine.queue_core import tail_writes as py_tail_writes
from commitgate.engine.queue_writer import PARALLEL_FROM
from tests.c_and_python import implementations

TAIL_WRITES = implementations("engine._queue_core", "tail_writes", py_tail_writes)


def _queue(tmp_path, per_file=10, capacity=16) -> ConsumeQueue:
    queue = ConsumeQueue("t", 0, tmp_path / "t" / "0", per_file, FileHandleCache(capacity))
    queue.load()
    return queue


def test_every_offset_of_a_batch_points_at_the_batch(tmp_path):
    queue = _queue(tmp_path)
    queue.put(0, 3, phy=100, size=50, timestamp=7)
    queue.put(3, 1, phy=150, size=60, timestamp=9)
    assert [queue.get(o) for o in range(4)] == [(100, 50, 7)] * 3 + [(150, 60, 9)]
    assert (queue.min_offset, queue.max_offset, queue.max_phy_end) == (0, 4, 210)


def test_batch_crossing_a_file_boundary_is_split(tmp_path):
    queue = _queue(tmp_path, per_file=10)
    queue.put(0, 8, phy=0, size=10, timestamp=1)
    queue.put(8, 5, phy=10, size=10, timestamp=2)
    queue.drain()
    assert queue.file_indexes == [0, 1]
    assert queue.get(9) == queue.get(12) == (10, 10, 2)
    files = sorted(p.name for p in (tmp_path / "t" / "0").iterdir())
    assert files == [offset_file_name(0), offset_file_name(10 * UNIT_SIZE)]


def test_tags_code_is_a_running_max_of_batch_timestamps(tmp_path):
    queue = _queue(tmp_path)
    for offset, ts in enumerate([10, 30, 20, 40]):
        queue.put(offset, 1, phy=offset * 10, size=10, timestamp=ts)
    assert [queue.get(o)[2] for o in range(4)] == [10, 30, 30, 40]
    assert queue.search_offset(lambda unit: unit[2] >= 25, 0) == 1
    assert queue.search_offset(lambda unit: unit[2] >= 41, 0) == 4


def test_load_finds_the_end_by_binary_search(tmp_path):
    queue = _queue(tmp_path, per_file=100)
    for offset in range(37):
        queue.put(offset, 1, phy=offset * 10 + 5, size=10, timestamp=offset)
    queue.drain()
    queue._handles.close_all()
    again = _queue(tmp_path, per_file=100)
    assert (again.min_offset, again.max_offset) == (0, 37)
    assert (again.last_tags, again.max_phy_end) == (36, 375)


def test_queue_rebuilt_mid_log_starts_at_its_first_offset(tmp_path):
    queue = _queue(tmp_path, per_file=100)
    queue.put(42, 3, phy=5000, size=70, timestamp=1)
    assert queue.min_offset == 42
    queue.drain()
    queue._handles.close_all()
    again = _queue(tmp_path, per_file=100)
    assert (again.min_offset, again.max_offset) == (42, 45)


def test_truncate_phy_drops_units_past_the_commitlog_end(tmp_path):
    queue = _queue(tmp_path, per_file=4)
    for offset in range(10):
        queue.put(offset, 1, phy=offset * 100, size=100, timestamp=offset)
    queue.drain()
    queue.truncate_phy(550)  # entries at phy 600.. are gone; 500 ends past 550 but starts before
    assert queue.max_offset == 6
    assert queue.file_indexes == [0, 1]
    assert queue.max_phy_end == 600
    queue.put(6, 1, phy=550, size=10, timestamp=99)
    assert queue.get(6) == (550, 10, 99)


def test_delete_files_below_keeps_the_last_file(tmp_path):
    queue = _queue(tmp_path, per_file=4)
    for offset in range(10):
        queue.put(offset, 1, phy=offset, size=1, timestamp=0)
    queue.drain()
    assert queue.delete_files_below(9) == 2
    assert queue.file_indexes == [2]
    assert queue.min_offset == 8
    assert queue.delete_files_below(100) == 0


def test_missing_middle_file_is_damage(tmp_path):
    queue = _queue(tmp_path, per_file=2)
    for offset in range(6):
        queue.put(offset, 1, phy=offset, size=1, timestamp=0)
    queue.drain()
    queue._handles.close_all()
    (tmp_path / "t" / "0" / offset_file_name(2 * UNIT_SIZE)).unlink()
    with pytest.raises(StoreDamaged, match="missing"):
        _queue(tmp_path, per_file=2)


def test_evicted_dirty_file_is_retired_for_the_flusher(tmp_path):
    handles = FileHandleCache(1)
    queue = ConsumeQueue("t", 0, tmp_path, 2, handles)
    queue.put(0, 4, phy=0, size=1, timestamp=0)
    queue.drain()  # two files, capacity one
    files, retired = handles.take_flush_work()
    assert len(retired) == 1 and retired[0] in files
    for mapped in files:
        mapped.flush()
    handles.finish_flush(retired)
    assert queue.get(0) == (0, 1, 0)  # reopened on demand


@given(st.integers(0, 2**62), st.integers(0, 2**31 - 1), st.integers(-1, 2**62))
def test_unit_encoding_round_trips(phy, size, tags):
    assert CQ_UNIT.unpack(CQ_UNIT.pack(phy, size, tags)) == (phy, size, tags)
    assert CQ_UNIT.size == 20


def test_store_keeps_queues_per_topic_and_partition_and_refuses_negative_partitions(tmp_path):
    store = ConsumeQueueStore(StorePaths(tmp_path), 10, FileHandleCache(16))
    far, near = store.get("t", 7), store.get("t", 2)
    assert (far.partition, near.partition) == (7, 2) and store.get("t", 7) is far
    assert store.get("u", 7) is not far
    assert sorted((q.topic, q.partition) for q in store.loaded()) == [("t", 2), ("t", 7), ("u", 7)]
    with pytest.raises(ValueError):
        store.get("t", -1)
    store.drop("t", 7)
    assert store.get("t", 7) is not far
    store.delete_topic("t")
    assert [(q.topic, q.partition) for q in store.loaded()] == [("u", 7)]
    store.close()


def test_unit_reader_reads_blocks_that_stop_at_the_file_end_and_the_queue_end(tmp_path,
                                                                             monkeypatch):
    queue = _queue(tmp_path, per_file=10)
    for offset in range(0, 24, 3):  # batches of three records over three files
        queue.put(offset, 3, phy=offset * 100, size=300, timestamp=offset)
        if offset == 12:
            queue.drain()  # offsets 0-14 in the files, 15-23 pending
    monkeypatch.setattr(UnitReader, "BLOCK_UNITS", 4)
    reader = UnitReader(queue)
    assert [reader.get(offset) for offset in range(24)] == \
        [queue.get(offset) for offset in range(24)]
    assert len(queue.units(256, 8)) == 2 * UNIT_SIZE  # file 0 ends at offset 10
    assert len(queue.units(256, 22)) == 2 * UNIT_SIZE  # the queue ends at offset 24


def test_units_wait_in_memory_readable_until_a_page_gathers_or_a_drain(tmp_path):
    queue = _queue(tmp_path, per_file=1000)
    queue.put(0, 3, phy=0, size=100, timestamp=5)
    assert queue.file_indexes == [] and queue.get(2) == (0, 100, 5)
    per_page = PENDING_BYTES // UNIT_SIZE
    queue.put(3, per_page, phy=100, size=100, timestamp=6)  # a page's worth: written out
    assert queue.file_indexes == [0] and queue.pending_units == 0
    queue.put(3 + per_page, 2, phy=200, size=100, timestamp=7)
    queue.truncate_offset(4 + per_page)  # cuts the pending units
    assert (queue.max_offset, queue.get(3 + per_page)) == (4 + per_page, (200, 100, 7))
    queue.drain()
    queue._handles.close_all()
    again = _queue(tmp_path, per_file=1000)
    assert (again.max_offset, again.get(3 + per_page)) == (4 + per_page, (200, 100, 7))


def test_the_pending_buffer_is_reused_grown_for_a_big_batch_and_given_back(tmp_path):
    queue = _queue(tmp_path, per_file=10_000)
    queue.put(0, 3, phy=0, size=100, timestamp=5)
    buffer = queue.pending
    assert len(buffer) == PENDING_CAPACITY
    big = PENDING_CAPACITY // UNIT_SIZE  # more units than the buffer holds: a new, larger one
    queue.put(3, big, phy=100, size=200, timestamp=6)
    assert queue.pending is not buffer and queue.pending_units == 0  # and written out
    assert [queue.get(o) for o in (2, 3, 2 + big)] == [(0, 100, 5), (100, 200, 6), (100, 200, 6)]
    grown = queue.pending
    queue.put(3 + big, 2, phy=300, size=50, timestamp=7)
    assert queue.pending is grown  # written units stop a read at the pending ones
    assert queue.units(10, 2 + big) == CQ_UNIT.pack(100, 200, 6)
    assert queue.units(10, 3 + big) == CQ_UNIT.pack(300, 50, 7) * 2
    queue.drain(release_idle=True)
    assert queue.pending is grown and queue.pending_units == 0  # it had units: in use
    queue.drain(release_idle=True)
    assert queue.pending == bytearray()  # nothing since the last round: idle
    queue.put(5 + big, 1, phy=350, size=50, timestamp=8)
    assert len(queue.pending) == PENDING_CAPACITY and queue.get(5 + big) == (350, 50, 8)


def test_the_store_drain_gives_back_the_buffers_of_idle_queues(tmp_path):
    store = ConsumeQueueStore(StorePaths(tmp_path), 1000, FileHandleCache(16))
    for partition in range(3):
        store.get("t", partition).put(0, 2, phy=partition * 10, size=10, timestamp=1)
    assert store.drain()
    store.get("t", 1).put(2, 1, phy=30, size=10, timestamp=1)
    assert store.drain()
    assert [len(queue.pending) for queue in store.loaded()] == [0, PENDING_CAPACITY, 0]
    assert [store.get("t", p).get(1) for p in range(3)] == [(0, 10, 1), (10, 10, 1), (20, 10, 1)]


def test_a_failed_drain_keeps_the_units_pending_and_readable(tmp_path, monkeypatch):
    queue = _queue(tmp_path)
    queue.put(0, 2, phy=0, size=10, timestamp=1)

    def full_disk(*_args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(MappedFile, "write_at", full_disk)  # the real case: test_disk_full
    with pytest.raises(OSError):
        queue.drain()
    assert queue.get(1) == (0, 10, 1) and queue.pending_units == 2
    monkeypatch.undo()
    queue.drain()
    assert queue.pending_units == 0 and queue.get(1) == (0, 10, 1)


def test_verify_checks_the_files_without_loading(tmp_path):
    queue = _queue(tmp_path, per_file=10)
    queue.put(0, 22, phy=0, size=10, timestamp=1)
    queue.drain()
    fresh = ConsumeQueue("t", 0, tmp_path / "t" / "0", 10, FileHandleCache(4))
    fresh.verify(22)
    fresh.verify(0)  # no recorded end: only the files' shape is checked
    with pytest.raises(StoreDamaged, match="offset 22"):
        fresh.verify(23)  # a hole in the last file
    (tmp_path / "t" / "0" / offset_file_name(10 * UNIT_SIZE)).unlink()
    with pytest.raises(StoreDamaged, match="missing files"):
        fresh.verify(22)
    (tmp_path / "t" / "0" / offset_file_name(20 * UNIT_SIZE)).write_bytes(b"short")
    with pytest.raises(StoreDamaged, match="size 5"):
        fresh.verify(22)
    assert fresh.file_indexes == [] and fresh.max_offset == 0  # nothing was loaded


@pytest.mark.parametrize("batch", [1, DRAIN_BATCH])  # with no time to spend, one a batch
def test_a_gradual_drain_lets_the_loop_run_and_notes_each_queue_end(tmp_path, batch):
    store = ConsumeQueueStore(StorePaths(tmp_path), 1000, FileHandleCache(16))
    for partition in range(4):
        store.get("t", partition).put(0, partition + 1, phy=partition * 10, size=10, timestamp=1)
    store.get("u", 0).put(0, 2, phy=50, size=10, timestamp=1)
    turns = []

    async def meanwhile():
        while len(turns) < 100:
            turns.append(sum(queue.pending_units for queue in store.loaded()))
            if len(turns) == 2:  # the loop's turn between two queues: a topic goes
                store.delete_topic("u")
            await asyncio.sleep(0)

    async def body():
        task = asyncio.create_task(meanwhile())
        assert await store.drain_gradually(slice_s=0, batch=batch)  # a turn after every queue
        task.cancel()

    asyncio.run(body())
    # 12 units pending; the loop ran after each queue written (1, 2, 3, 4 units); u's 2 went
    # with the topic at the second turn, and its queue, still in the drain's list, was skipped
    assert turns[:4] == [11, 9, 4, 0]
    assert store.ends_table() == {"t": [1, 2, 3, 4]}  # none for the deleted topic
    assert [store.get("t", p).pending_units for p in range(4)] == [0, 0, 0, 0]


def test_a_store_drain_writes_many_queues_on_two_threads_and_keeps_failed_ones_pending(
        tmp_path, monkeypatch):
    """Past PARALLEL_FROM writes a batch runs on two threads; units crossing a file boundary
    make two writes, files evicted by the small cache stay open until written, and a write
    that fails leaves its queue's units pending (and readable) while the rest are written."""
    store = ConsumeQueueStore(StorePaths(tmp_path), 10, FileHandleCache(8))
    for partition in range(3 * PARALLEL_FROM):
        queue = store.get("t", partition)
        queue.put(0, 8, phy=partition * 100, size=100, timestamp=partition)
        queue.drain()
        queue.put(8, 5, phy=partition * 100 + 100, size=50, timestamp=partition)  # 8..12
    _fill_the_disk_of(store.get("t", 5), monkeypatch)
    helpers_before = threading.active_count()
    assert not store.drain()
    assert threading.active_count() == helpers_before + 1  # the writer's helper thread
    assert store.get("t", 5).pending_units == 5 and store.get("t", 5).get(12) == (600, 50, 5)
    assert store.ends_table()["t"][4:7] == [13, 0, 13]
    assert store.handles.pinned == set()
    monkeypatch.undo()
    assert store.drain() and store.ends_table()["t"][5] == 13
    assert store.close()
    reopened = ConsumeQueueStore(StorePaths(tmp_path), 10, FileHandleCache(8))
    for partition in range(3 * PARALLEL_FROM):
        queue = reopened.get("t", partition)
        assert (queue.min_offset, queue.max_offset) == (0, 13)
        assert queue.units(3, 7) == CQ_UNIT.pack(partition * 100, 100, partition) + \
            CQ_UNIT.pack(partition * 100 + 100, 50, partition) * 2
        assert queue.units(10, 10) == CQ_UNIT.pack(partition * 100 + 100, 50, partition) * 3
    reopened.close()


@pytest.mark.parametrize("tail_writes", TAIL_WRITES)
def test_tail_writes_prepares_the_queues_with_one_write_to_an_open_file(tmp_path, tail_writes):
    """Queues 0, 1 and 3 have units for their open last file; 2 has none pending, 4's file was
    closed by the cache, 5's units cross into its next file: each of those stops the call."""
    handles = FileHandleCache(16)
    queues = [ConsumeQueue("t", p, tmp_path / "t" / str(p), 10, handles) for p in range(6)]
    for partition, queue in enumerate(queues):
        queue.load()
        queue.put(0, 4, phy=partition * 100, size=10, timestamp=1)
        queue.drain()  # the first file exists and is open
        if partition != 2:
            queue.put(4, 8 if partition == 5 else 3, phy=partition * 100 + 10, size=10,
                      timestamp=2)
    handles.forget((queues[4]._key, 0)).close()
    pinned: set = set()
    fds: list = []
    buffers: list = []
    offsets: list = []
    files: list = []

    def call(start: int) -> int:
        return tail_writes(queues, start, handles.open_files, pinned, fds, buffers, offsets,
                           files)

    assert call(0) == 2 and call(3) == 4 and call(4) == 4 and call(5) == 5 and call(6) == 6
    taken = [queues[0], queues[1], queues[3]]
    assert files == [handles.open_files[(queue._key, 0)] for queue in taken]
    assert pinned == set(files) and fds == [mapped.fileno() for mapped in files]
    assert offsets == [4 * UNIT_SIZE] * 3
    assert [bytes(view) for view in buffers] == [
        CQ_UNIT.pack(p * 100 + 10, 10, 2) * 3 for p in (0, 1, 3)]
    with pytest.raises(ValueError):
        call(-1)


@pytest.mark.parametrize("tail_writes", TAIL_WRITES)
def test_a_store_drain_gives_the_same_files_either_way(tmp_path, monkeypatch, tail_writes):
    """tail_writes in C or in Python: a drain of queues in every case (one write, a new file,
    units crossing files, none pending) leaves the same bytes."""
    monkeypatch.setattr("commitgate.engine.consume_queue_store.tail_writes", tail_writes)
    store = ConsumeQueueStore(StorePaths(tmp_path), 10, FileHandleCache(8))
    for partition in range(3 * PARALLEL_FROM):
        queue = store.get("t", partition)
        queue.put(0, partition % 7, phy=partition * 100, size=100, timestamp=partition)
        if partition % 3:
            queue.drain()
            queue.put(partition % 7, partition % 5 + 1, phy=partition * 100 + 100, size=50,
                      timestamp=partition)
    expected = {p: [store.get("t", p).get(o) for o in range(store.get("t", p).max_offset)]
                for p in range(3 * PARALLEL_FROM)}
    assert store.drain()
    assert not store.handles.pinned
    assert all(store.get("t", p).pending_units == 0 for p in expected)
    assert store.close()
    again = ConsumeQueueStore(StorePaths(tmp_path), 10, FileHandleCache(8))
    for partition, units in expected.items():
        queue = again.get("t", partition)
        assert queue.max_offset == len(units), partition
        assert [queue.get(o) for o in range(len(units))] == units, partition
    again.close()


def test_a_failed_tail_write_leaves_its_queue_pending_and_the_others_written(
        tmp_path, monkeypatch):
    store = ConsumeQueueStore(StorePaths(tmp_path), 100, FileHandleCache(64))
    for partition in range(2 * PARALLEL_FROM):
        queue = store.get("t", partition)
        queue.put(0, 2, phy=partition * 100, size=100, timestamp=1)
        queue.drain()  # the file is open: the next units take tail_writes's way
        queue.put(2, 3, phy=partition * 100 + 100, size=50, timestamp=2)
    _fill_the_disk_of(store.get("t", 7), monkeypatch)
    assert not store.drain()
    assert not store.handles.pinned
    assert [p for p in range(2 * PARALLEL_FROM) if store.get("t", p).pending_units] == [7]
    assert store.get("t", 7).get(4) == (800, 50, 2)  # still readable from memory
    assert store.ends_table()["t"][6] == 5 and store.ends_table()["t"][7] == 0  # not noted


def _fill_the_disk_of(queue: ConsumeQueue, monkeypatch) -> None:
    """From now on the QueueWriter's writes into ``queue``'s files fail with ENOSPC."""
    pwrite_all = queue_writer.pwrite_all

    def full_disk_for_one_queue(fds, buffers, offsets):
        errors = pwrite_all(fds, buffers, offsets)
        paths = [os.readlink(f"/proc/self/fd/{fd}") for fd in fds]
        return [errno.ENOSPC if Path(path).parent == queue.directory else error
                for path, error in zip(paths, errors)]
    monkeypatch.setattr(queue_writer, "pwrite_all", full_disk_for_one_queue)
