"""FileHandleCache: LRU of open ConsumeQueue files; dirtiness read from the files' positions."""
from __future__ import annotations

from engine.file_handle_cache import FileHandleCache
from engine.mapped_file import MappedFile


def _opener(tmp_path, name: str):
    return lambda: MappedFile(tmp_path / name, 0, 4096, create=True, reserve=False)


def test_dirty_files_are_those_written_past_their_flush_and_evicted_ones_retire(tmp_path):
    cache = FileHandleCache(2)
    written = cache.get("a", _opener(tmp_path, "a"))
    written.write_at(0, (b"unit",), 4)
    written.wrote_position = 4
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
