"""Retention: retention.ms / retention.bytes move log starts; unused segments are deleted."""
from __future__ import annotations

import shutil
import time

from commitgate.engine import StoreStatus
from tests.engine.conftest import batch, open_store


def _fill(store, topic, partitions, count, size=900, ts=1_000):
    for i in range(count):
        body = batch([b"x" * size], ts=ts + i)
        result = store.append(topic, i % partitions, body, offset_count=1, max_timestamp=ts + i)
        assert result.status is StoreStatus.OK


def test_retention_ms_moves_the_log_start_by_timestamp(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1, {"retention.ms": "100"})
            _fill(store, "t", 1, 50, ts=10_000)  # timestamps 10000..10049
            await store.retention.run_once(now_ms=10_130)  # keep ts >= 10030
            assert store.log_start_offset("t", 0) == 30
            assert store.read("t", 0, 29, 100).status is StoreStatus.OFFSET_OUT_OF_RANGE
    run(body())


def test_retention_bytes_keeps_at_most_the_limit(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1, {"retention.bytes": "10000", "retention.ms": "-1"})
            _fill(store, "t", 1, 40)
            size = store.queues.get("t", 0).get(0)[1]
            await store.retention.run_once()
            start = store.log_start_offset("t", 0)
            assert (40 - start) * size <= 10_000 < (41 - start) * size
    run(body())


def test_segments_below_every_log_start_are_deleted(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("a", 1, {"retention.ms": "-1"})
            store.create_topic("b", 1, {"retention.ms": "-1"})
            _fill(store, "a", 1, 150)  # ~150 KB: three 64 KiB segments
            _fill(store, "b", 1, 5)
            segments = len(store.commit_log.queue.files)
            assert segments >= 3
            assert await store.retention.run_once() == 0  # "a" still starts at offset 0
            store.delete_records("a", 0, 150)
            store.delete_records("b", 0, 5)
            deleted = await store.retention.run_once()
            assert deleted == segments - 1  # the active segment always stays
            assert store.commit_log.min_offset == store.commit_log.queue.files[0].start_offset
            assert store.read("a", 0, 150, 100).status is StoreStatus.OK
            _fill(store, "a", 1, 3)
            assert store.read("a", 0, 150, 1 << 20).next_offset == 153
    run(body())


def _contents(store, topic, partition):
    """Every batch of a partition from its log start: (offset after it, bytes)."""
    out, offset = [], store.log_start_offset(topic, partition)
    while offset < store.log_end_offset(topic, partition):
        result = store.read(topic, partition, offset, 1)
        assert result.status is StoreStatus.OK
        out.append((result.next_offset, bytes(result.buffers[0])))
        offset = result.next_offset
    return out


def _on_disk(store):
    return len(store.commit_log.queue.files) * store.config.commitlog_segment_bytes


def test_relocation_frees_segments_a_long_lived_partition_pins(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("keep", 2, {"retention.ms": "-1"})
            store.create_topic("short", 1, {"retention.ms": "-1"})
            for round_ in range(10):  # the long-lived batches are spread over every segment
                _fill(store, "keep", 2, 2, ts=round_ * 10)
                _fill(store, "short", 1, 30)
            kept = {p: _contents(store, "keep", p) for p in range(2)}
            assert len(store.commit_log.queue.files) >= 4
            assert await store.retention.run_once() == 0  # everything is live
            store.delete_records("short", 0, -1)
            await store.retention.run_once()
            stats = store.retention.cleaner.stats
            assert stats.relocated_entries > 0 and stats.deleted_segments >= 3
            live = sum(len(data) for p in range(2) for _, data in kept[p])
            assert _on_disk(store) <= 2 * live + 3 * store.config.commitlog_segment_bytes
            for partition in range(2):
                assert _contents(store, "keep", partition) == kept[partition]
                assert store.log_start_offset("keep", partition) == 0
    run(body())


def test_relocated_batches_survive_restarts_and_a_queue_rebuild(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("keep", 1, {"retention.ms": "-1"})
            store.create_topic("short", 1, {"retention.ms": "-1"})
            for round_ in range(8):
                _fill(store, "keep", 1, 3, ts=round_ * 10)
                _fill(store, "short", 1, 40)
            store.delete_records("short", 0, -1)
            await store.retention.run_once()
            await store.retention.run_once()  # copies of copies: still the same batches
            assert store.retention.cleaner.stats.relocated_entries > 0
            _fill(store, "keep", 1, 2, ts=500)
            kept = _contents(store, "keep", 0)
        async with open_store(tmp_path) as store:  # clean start
            assert _contents(store, "keep", 0) == kept
            consumequeue = store.paths.consumequeue_dir("keep", 0)
        shutil.rmtree(consumequeue)
        async with open_store(tmp_path) as store:  # the queue is rebuilt from the CommitLog
            assert _contents(store, "keep", 0) == kept
            _fill(store, "keep", 1, 1, ts=900)
            assert store.log_end_offset("keep", 0) == kept[-1][0] + 1
    run(body())


def test_deleting_a_topic_frees_its_segments(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("offsets", 1, {"retention.ms": "-1"})
            store.create_topic("gone", 1, {"retention.ms": "-1"})
            _fill(store, "offsets", 1, 1)
            _fill(store, "gone", 1, 300)
            assert len(store.commit_log.queue.files) >= 4
            store.delete_topic("gone")
            await store.retention.run_once()
            assert len(store.commit_log.queue.files) <= 2
            assert len(_contents(store, "offsets", 0)) == 1
    run(body())


def test_a_full_disk_relocates_the_oldest_segment_with_garbage(tmp_path, run):
    async def body():
        # factor 100: only the pressure of a full disk makes the cleaner copy
        async with open_store(tmp_path, cleaner_garbage_factor=100.0) as store:
            store.create_topic("keep", 1, {"retention.ms": "-1"})
            store.create_topic("short", 1, {"retention.ms": "-1"})
            _fill(store, "keep", 1, 5)
            _fill(store, "short", 1, 100)
            store.delete_records("short", 0, 30)  # the oldest segment about half live
            assert await store.retention.run_once() == 0
            assert await store.retention.run_once(pressure=True) >= 1
            assert len(_contents(store, "keep", 0)) == 5
    run(body())


def test_the_ledger_counts_what_died_as_a_walk_finds_it(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("keep", 2, {"retention.ms": "-1"})
            store.create_topic("short", 2, {"retention.ms": "-1"})
            store.create_topic("table", 1, {"cleanup.policy": "compact",
                                            "min.cleanable.dirty.ratio": "0.01"})
            cleaner = store.retention.cleaner
            for round_ in range(6):
                _fill(store, "keep", 2, 3, ts=round_)
                _fill(store, "short", 2, 40)
                for i in range(5):
                    key = f"k{(round_ * 5 + i) % 7}".encode()
                    result = store.append("table", 0, batch([b"v" * 300], keys=[key]),
                                          offset_count=1, max_timestamp=1_000)
                    assert result.status is StoreStatus.OK
                for partition in range(2):
                    store.delete_records("short", partition,
                                         store.log_end_offset("short", partition) - 5)
                await store.retention.run_once()
                assert store.commit_log.ledger.valid
                walked = await cleaner._walk_all()
                for mapped in store.commit_log.queue.files:
                    assert cleaner._live_estimate(mapped) == walked[mapped.start_offset][1], (
                        round_, mapped.path)
            assert cleaner.stats.relocated_entries > 0
            assert store.retention.compactor.rewritten_batches + \
                store.retention.compactor.dropped_batches > 0
    run(body())


def test_a_rebuilt_partition_with_every_batch_gone_keeps_its_end(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1, {"retention.ms": "-1"})
            _fill(store, "t", 1, 50)
            store.delete_records("t", 0, -1)
            directory = store.paths.consumequeue_dir("t", 0)
        shutil.rmtree(directory)
        for _ in range(2):  # the rebuild, then a start that loads the empty queue lazily
            async with open_store(tmp_path) as store:
                assert (store.log_start_offset("t", 0), store.log_end_offset("t", 0)) == (50, 50)
        async with open_store(tmp_path) as store:
            _fill(store, "t", 1, 1)
            assert (store.log_start_offset("t", 0), store.log_end_offset("t", 0)) == (50, 51)
            assert store.read("t", 0, 50, 1 << 20).next_offset == 51
    run(body())


def test_a_mostly_dead_oldest_segment_is_relocated_whatever_the_totals(tmp_path, run):
    async def body():
        # factor 100: only the oldest's small live share makes the cleaner copy it
        async with open_store(tmp_path, cleaner_garbage_factor=100.0) as store:
            store.create_topic("offsets", 1, {"retention.ms": "-1"})
            store.create_topic("short", 1, {"retention.ms": "-1"})
            for round_ in range(4):  # a commit or two in every segment
                _fill(store, "offsets", 1, 1, ts=round_)
                _fill(store, "short", 1, 70)
            store.delete_records("short", 0, -1)
            await store.retention.run_once()
            assert len(store.commit_log.queue.files) <= 2
            assert len(_contents(store, "offsets", 0)) == 4
    run(body())


def test_log_start_moves_between_two_passes_are_all_counted(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1, {"retention.ms": "-1"})
            _fill(store, "t", 1, 200)
            await store.retention.run_once()  # the ledger is walked once
            store.queues.drain()  # the units in files (50 a file), not in memory
            for before in (60, 120, 180):  # each move deletes the queue files below it
                store.delete_records("t", 0, before)
            await store.retention.run_once()
            walked = await store.retention.cleaner._walk_all()
            for mapped in store.commit_log.queue.files:
                assert store.retention.cleaner._live_estimate(mapped) == \
                    walked[mapped.start_offset][1]
            assert store.read("t", 0, 180, 1 << 20).next_offset == 200
    run(body())


def test_the_cleaner_keeps_its_io_rate(tmp_path, run):
    async def body():
        rate = 40 * 1024
        async with open_store(tmp_path, cleaner_io_max_bytes_per_second=rate) as store:
            store.create_topic("keep", 1, {"retention.ms": "-1"})
            store.create_topic("short", 1, {"retention.ms": "-1"})
            for round_ in range(5):
                _fill(store, "keep", 1, 40, ts=round_)  # 40 KB live in each segment
                _fill(store, "short", 1, 40)
            store.delete_records("short", 0, -1)
            started = time.monotonic()
            await store.retention.run_once()
            moved = store.retention.cleaner.stats.relocated_bytes
            assert moved > rate  # more than a second's worth was copied...
            assert time.monotonic() - started >= moved / rate  # ...and no faster
    run(body())
