"""FileHandleCache: LRU of open ConsumeQueue files; dirtiness read from the files' positions;
the descriptor budget holds, retired files and reads included."""
from __future__ import annotations

import os

from commitgate.engine.consume_queue_store import ConsumeQueueStore
from commitgate.engine.file_handle_cache import FileHandleCache
from commitgate.engine.mapped_file import MappedFile
from commitgate.engine.paths import StorePaths


def _opener(tmp_path, name: str):
    return lambda: MappedFile(tmp_path / name, 0, 4096, create=True, reserve=False)


def _dirty(cache: FileHandleCache, tmp_path, name: str) -> MappedFile:
    mapped = cache.get(name, _opener(tmp_path, name))
    mapped.write_at(0, (b"unit",), 4)
    mapped.wrote_position = 4
    return mapped


def test_dirty_files_are_those_written_past_their_flush_and_evicted_ones_retire(tmp_path):
    cache = FileHandleCache(3)  # two open, one retired
    written = _dirty(cache, tmp_path, "a")
    clean = cache.get("b", _opener(tmp_path, "b"))
    assert cache.dirty == [written]
    cache.get("a", _opener(tmp_path, "a"))  # a is now the most recent: b goes first
    cache.get("c", _opener(tmp_path, "c"))
    assert clean._fd < 0 and cache.retired == []
    cache.get("d", _opener(tmp_path, "d"))  # evicts a, dirty: handed to the flush service
    assert cache.retired == [written] and cache.dirty == []
    files, retired = cache.take_flush_work()
    assert files == [written] and retired == [written]
    written.flush()
    cache.finish_flush(retired)
    assert written._fd < 0 and written.flushed_position == 4
    cache.close_all()


def test_a_dirty_file_evicted_with_the_retired_share_full_is_synced_and_closed_at_once(tmp_path):
    cache = FileHandleCache(3)
    first = _dirty(cache, tmp_path, "a")
    second = _dirty(cache, tmp_path, "b")
    cache.get("c", _opener(tmp_path, "c"))  # a retires (the one retired slot)
    cache.get("d", _opener(tmp_path, "d"))  # b: no slot left, synced inline
    assert cache.retired == [first]
    assert second._fd < 0 and second.flushed_position == 4
    assert first._fd >= 0 and first.flushed_position == 0
    cache.close_all()


def test_a_file_being_synced_is_never_closed_under_the_flush_thread(tmp_path):
    cache = FileHandleCache(3)
    _dirty(cache, tmp_path, "x")
    syncing = _dirty(cache, tmp_path, "a")
    files, retired = cache.take_flush_work()
    assert syncing in files
    for name in "bcd":  # evicts x (retired), then a, being synced
        cache.get(name, _opener(tmp_path, name))
    assert syncing._fd >= 0 and syncing in cache.retired
    cache.finish_flush(retired)
    cache.close_all()


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_reading_queues_holds_one_descriptor_per_file_within_the_budget(tmp_path):
    """Queue reads use pread: a mapping would hold a duplicate descriptor (the EMFILE once seen
    with 10,000 partitions fetched), and the cache would count one where two are open."""
    capacity = 64
    store = ConsumeQueueStore(StorePaths(tmp_path), 10, FileHandleCache(capacity))
    before = _open_descriptors()
    for partition in range(40):
        queue = store.get("t", partition)
        queue.put(0, 3, phy=partition * 100, size=100, timestamp=partition)
        queue.drain()  # units wait in memory until written out; this opens the file
        assert queue.get(2) == (partition * 100, 100, partition)
    assert _open_descriptors() - before == 40
    for partition in range(40, 200):  # past the budget: the oldest files close or retire
        queue = store.get("t", partition)
        queue.put(0, 3, phy=partition * 100, size=100, timestamp=partition)
        queue.drain()
        assert queue.get(0)[0] == partition * 100
        assert _open_descriptors() - before <= capacity
    assert store.get("t", 7).get(1) == (700, 100, 7)  # reopened from disk
    store.close()
    assert _open_descriptors() == before
