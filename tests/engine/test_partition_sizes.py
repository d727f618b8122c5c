"""PartitionSizes: DescribeLogDirs sizes kept as counters, equal to a walk of the batches."""
from __future__ import annotations

import pytest

import commitgate.engine.partition_sizes as partition_sizes_module
from commitgate.engine import StoreStatus
from tests.engine.conftest import batch, open_store


def _fill(store, topic, partition, count, *, records=1, size=300):
    for _ in range(count):
        body = batch([b"x" * size] * records)
        result = store.append(topic, partition, body, offset_count=records, max_timestamp=1_000)
        assert result.status is StoreStatus.OK


def _walked(store, topic, partition):
    """The size by a walk of every batch from the one holding the log start."""
    queue = store.queues.get(topic, partition)
    return store.logs.bytes_between(queue, store.log_start_offset(topic, partition),
                                    queue.max_offset)


def _no_walks(store, monkeypatch):
    """Fail the test if the store walks a partition's batches."""
    def walk(*args):
        raise AssertionError("a counted partition was walked")
    monkeypatch.setattr(store.logs, "batch_entries", walk)


@pytest.fixture
def small_marks(monkeypatch):
    monkeypatch.setattr(partition_sizes_module, "MARK_BYTES", 2_000)


def test_sizes_are_counted_after_the_first_walk(tmp_path, run, monkeypatch, small_marks):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 2)
            _fill(store, "t", 0, 30, records=3)
            assert await store.partition_size("t", 0) == _walked(store, "t", 0) > 0
            assert await store.partition_size("t", 1) == 0
            _fill(store, "t", 0, 40, records=2)
            _fill(store, "t", 1, 5)
            expected = {p: _walked(store, "t", p) for p in (0, 1)}
            with monkeypatch.context() as patch:
                _no_walks(store, patch)
                assert {p: await store.partition_size("t", p) for p in (0, 1)} == expected
            assert await store.partition_size("t", 2) == -1
            assert await store.partition_size("nope", 0) == -1
    run(body())


def test_a_moved_log_start_is_subtracted(tmp_path, run, monkeypatch, small_marks):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1, {"retention.ms": "-1"})
            _fill(store, "t", 0, 60, records=3)  # offsets 0..179
            assert await store.partition_size("t", 0) == _walked(store, "t", 0)
            for start in (1, 3, 4, 50, 51, 120, 180):  # mid-batch, at a boundary, the end
                assert store.delete_records("t", 0, start)[0] is StoreStatus.OK
                expected = _walked(store, "t", 0)
                with monkeypatch.context() as patch:  # from the units, not the entries
                    _no_walks(store, patch)
                    assert await store.partition_size("t", 0) == expected, start
            assert await store.partition_size("t", 0) == 0
            _fill(store, "t", 0, 2)
            assert await store.partition_size("t", 0) == _walked(store, "t", 0) > 0
    run(body())


def test_retention_deleting_segments_shrinks_the_size(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1, {"retention.ms": "-1"})
            _fill(store, "t", 0, 400, size=900)  # several 64 KiB segments
            full = await store.partition_size("t", 0)
            assert full == _walked(store, "t", 0) > 5 * 64 * 1024
            store.delete_records("t", 0, 390)
            assert await store.retention.run_once() > 0  # segments deleted
            # counted when the log start moved, before the cleaner deleted the entries
            assert await store.partition_size("t", 0) == 10 * store.queues.get("t", 0).get(395)[1]
    run(body())


def test_sizes_are_right_after_a_restart(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 3)
            for partition in range(3):
                _fill(store, "t", partition, 10 * (partition + 1), records=2)
            store.delete_records("t", 2, 7)
            before = {p: await store.partition_size("t", p) for p in range(3)}
        async with open_store(tmp_path) as store:
            after = {p: await store.partition_size("t", p) for p in range(3)}
            assert after == before == {p: _walked(store, "t", p) for p in range(3)}
    run(body())


def test_a_recreated_topic_starts_from_nothing(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            _fill(store, "t", 0, 10)
            assert await store.partition_size("t", 0) > 0
            assert (await store.delete_topic_off_loop("t")).status is StoreStatus.OK
            assert await store.partition_size("t", 0) == -1
            assert (await store.create_topic_off_loop("t", 1)).status is StoreStatus.OK
            assert await store.partition_size("t", 0) == 0
            _fill(store, "t", 0, 2)
            assert await store.partition_size("t", 0) == _walked(store, "t", 0) > 0
    run(body())


def test_a_compaction_is_counted_again(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1, {"cleanup.policy": "compact",
                                        "min.cleanable.dirty.ratio": "0.01"})
            for i in range(200):
                body = batch([b"v" * 200], keys=[f"k{i % 5}".encode()])
                store.append("t", 0, body, offset_count=1, max_timestamp=1_000)
            store.append("t", 0, batch([b"last"], keys=[b"new"]), offset_count=1,
                         max_timestamp=1_000)
            full = await store.partition_size("t", 0)
            await store.retention.run_once()
            assert store.table.get("t").cleaned_offsets  # it was compacted
            size = await store.partition_size("t", 0)
            assert size == _walked(store, "t", 0) < full
    run(body())
