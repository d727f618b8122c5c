"""ConsumeQueueWriter: pages of units are written on its thread, readable meanwhile, pinned
against the handle cache, kept pending when a write fails; a synchronous drain waits for it."""
from __future__ import annotations

import asyncio
import threading

import pytest

from engine.consume_queue import CQ_UNIT, PENDING_BYTES, UNIT_SIZE
from engine.consume_queue_store import ConsumeQueueStore
from engine.file_handle_cache import FileHandleCache
from engine.mapped_file import MappedFile
from engine.paths import StorePaths

PAGE_UNITS = PENDING_BYTES // UNIT_SIZE + 1  # the fewest units that make a page


def _store(tmp_path, capacity: int = 64, per_file: int = 1000) -> ConsumeQueueStore:
    store = ConsumeQueueStore(StorePaths(tmp_path), per_file, FileHandleCache(capacity))
    store.create_dirs("t", range(2))
    return store


def test_a_page_is_written_on_the_writers_thread_and_stays_readable_until_then(tmp_path,
                                                                              monkeypatch):
    threads, release = [], threading.Event()
    real_write = MappedFile.write_at

    def held_write(mapped, pos, buffers, length):
        threads.append((threading.current_thread().name, length))
        release.wait(10)  # the page stays in flight until the test lets it go
        real_write(mapped, pos, buffers, length)
    monkeypatch.setattr(MappedFile, "write_at", held_write)

    async def scenario() -> None:
        store = _store(tmp_path)
        store.start_writer(asyncio.get_running_loop())
        queue = store.get("t", 0)
        queue.put(0, PAGE_UNITS, phy=0, size=10, timestamp=1)  # a page: handed over
        queue.put(PAGE_UNITS, 3, phy=10, size=10, timestamp=2)  # waits behind it
        assert queue.writing == PAGE_UNITS * UNIT_SIZE
        assert queue.get(0) == (0, 10, 1) and queue.get(PAGE_UNITS + 2) == (10, 10, 2)
        release.set()
        for _ in range(500):  # the outcome reaches the loop through call_soon_threadsafe
            if not queue.writing:
                break
            await asyncio.sleep(0.01)
        assert queue.writing == 0 and queue.pending_from == PAGE_UNITS
        assert len(queue.pending) == 3 * UNIT_SIZE
        assert queue.units(2, PAGE_UNITS - 2) == CQ_UNIT.pack(0, 10, 1) * 2  # the file's
        store.close()

    asyncio.run(scenario())
    # The page on the writer's thread; the 3 units left at close by the closing thread.
    assert threads == [("consumequeue-writer", PAGE_UNITS * UNIT_SIZE),
                       ("MainThread", 3 * UNIT_SIZE)]
    reopened = _store(tmp_path).get("t", 0)
    assert reopened.max_offset == PAGE_UNITS + 3 and reopened.get(PAGE_UNITS + 2) == (10, 10, 2)


def test_a_failed_page_stays_pending_and_the_drain_writes_it(tmp_path, monkeypatch, caplog):
    real_write = MappedFile.write_at
    failures = []

    def full_disk_once(mapped, pos, buffers, length):
        if not failures:
            failures.append(pos)
            raise OSError(28, "No space left on device")
        real_write(mapped, pos, buffers, length)
    monkeypatch.setattr(MappedFile, "write_at", full_disk_once)

    async def scenario() -> None:
        store = _store(tmp_path)
        store.start_writer(asyncio.get_running_loop())
        queue = store.get("t", 1)
        queue.put(0, PAGE_UNITS + 1, phy=0, size=10, timestamp=1)
        store.writer.wait()
        assert failures and queue.writing == 0
        assert queue.pending_from == 0 and len(queue.pending) == (PAGE_UNITS + 1) * UNIT_SIZE
        assert store.drain()  # the thorough flush's write-out: now it succeeds
        assert queue.pending == bytearray() and queue.get(PAGE_UNITS) == (0, 10, 1)
        store.close()

    asyncio.run(scenario())
    assert "kept in memory for a retry" in caplog.text and "t-1" in caplog.text


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
def test_cutting_a_queue_waits_for_its_page_in_flight(tmp_path, cut):
    async def scenario() -> None:
        store = _store(tmp_path, per_file=PAGE_UNITS)  # the page fills file 0 exactly
        store.start_writer(asyncio.get_running_loop())
        queue = store.get("t", 0)
        queue.put(0, PAGE_UNITS, phy=0, size=10, timestamp=1)
        queue.put(PAGE_UNITS, 5, phy=10, size=10, timestamp=2)
        if cut == "truncate":
            queue.truncate_offset(PAGE_UNITS + 2)  # after the page came back, not under it
            assert queue.writing == 0 and queue.max_offset == PAGE_UNITS + 2
            assert queue.get(PAGE_UNITS - 1) == (0, 10, 1)
        else:
            store.delete_topic("t")
            assert queue.writing == 0 and not (tmp_path / "consumequeue" / "t").exists()
        store.close()

    asyncio.run(scenario())
