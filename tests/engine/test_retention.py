"""Retention: retention.ms / retention.bytes move log starts; unused segments are deleted."""
from __future__ import annotations

from engine import StoreStatus
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
            store.retention.run_once(now_ms=10_130)  # keep ts >= 10030
            assert store.log_start_offset("t", 0) == 30
            assert store.read("t", 0, 29, 100).status is StoreStatus.OFFSET_OUT_OF_RANGE
    run(body())


def test_retention_bytes_keeps_at_most_the_limit(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1, {"retention.bytes": "10000", "retention.ms": "-1"})
            _fill(store, "t", 1, 40)
            size = store.queues.get("t", 0).get(0)[1]
            store.retention.run_once()
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
            assert store.retention.run_once() == 0  # "a" still starts at offset 0
            store.delete_records("a", 0, 150)
            store.delete_records("b", 0, 5)
            deleted = store.retention.run_once()
            assert deleted == segments - 1  # the active segment always stays
            assert store.commit_log.min_offset == store.commit_log.queue.files[0].start_offset
            assert store.read("a", 0, 150, 100).status is StoreStatus.OK
            _fill(store, "a", 1, 3)
            assert store.read("a", 0, 150, 1 << 20).next_offset == 153
    run(body())


def test_deleted_segment_moves_starts_of_partitions_that_lived_there(tmp_path, run):
    async def body():
        async with open_store(tmp_path, disk_max_used_space_ratio=0.0) as store:
            store.create_topic("t", 2, {"retention.ms": "-1"})
            _fill(store, "t", 2, 200)  # every segment over the ratio: all but the active go
            deleted = store.retention.run_once()
            assert deleted >= 2
            for partition in range(2):
                start = store.log_start_offset("t", partition)
                assert start > 0
                assert store.read("t", partition, start, 1 << 20).status is StoreStatus.OK
                phy = store.queues.get("t", partition).get(start)[0]
                assert phy >= store.commit_log.min_offset
    run(body())


def test_file_reserved_time_deletes_old_segments(tmp_path, run):
    async def body():
        async with open_store(tmp_path, file_reserved_time_ms=0) as store:
            store.create_topic("t", 1, {"retention.ms": "-1"})
            _fill(store, "t", 1, 150)
            segments = len(store.commit_log.queue.files)
            assert store.retention.run_once(now_ms=2**62) == segments - 1
            assert store.log_start_offset("t", 0) > 0
    run(body())
