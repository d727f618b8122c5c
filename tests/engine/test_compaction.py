"""Log compaction (cleanup.policy=compact): the last record of every key stays, offsets never
change, tombstones go after delete.retention.ms, the old entries' segments are freed."""
from __future__ import annotations

import random
import shutil

from commitgate.engine import StoreStatus
from commitgate.protocol.record_batch import decode_records, read_header
from tests.engine.conftest import batch, open_store

KEEP_TOMBSTONES = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                   "delete.retention.ms": str(10**15)}


def _produce(store, topic, batches):
    """Append batches of (key, value) records; returns the model: every record by offset."""
    model = {}
    for records in batches:
        keys = [key for key, _ in records]
        body = batch([value for _, value in records], keys=keys)
        result = store.append(topic, 0, body, offset_count=len(records), max_timestamp=1_000)
        assert result.status is StoreStatus.OK
        for i, record in enumerate(records):
            model[result.base_offset + i] = record
    return model


def _read_all(store, topic, offset=0):
    """(offset, key, value) of every record from ``offset``, as a consumer sees them."""
    out, end = [], store.log_end_offset(topic, 0)
    while offset < end:
        result = store.read(topic, 0, offset, 1 << 20)
        assert result.status is StoreStatus.OK and result.buffers, (offset, end)
        for buffer in result.buffers:
            out += [(r.offset, r.key, r.value) for r in decode_records(buffer) if r.offset >= offset]
        offset = result.next_offset
    return out


def _expected(model, *, tombstones=True):
    """The last record of every key, in offset order. The last batch is never cleaned, so
    the tests end with a batch whose key is new."""
    last = {}
    for offset, (key, value) in sorted(model.items()):
        last[key] = (offset, key, value)
    return sorted(v for v in last.values() if tombstones or v[2] is not None)


def _workload(rng, batches=300, keys=40):
    out = []
    for _ in range(batches):
        records = []
        for _ in range(rng.randint(1, 5)):
            key = f"k{rng.randrange(keys)}".encode()
            value = None if rng.random() < 0.1 else rng.randbytes(rng.randint(10, 400))
            records.append((key, value))
        out.append(records)
    return out


def _table(store, seed):
    """Topic "c" with a random workload ending in a batch of a new key; returns the model."""
    store.create_topic("c", 1, dict(KEEP_TOMBSTONES))
    model = _produce(store, "c", _workload(random.Random(seed)))
    model.update(_produce(store, "c", [[(b"last", b"v")]]))
    return model


def test_compaction_keeps_the_last_record_of_every_key_at_its_offset(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            model = _table(store, seed=1)
            segments = len(store.commit_log.queue.files)
            await store.retention.run_once()
            compactor = store.retention.compactor
            assert compactor.cleaned_partitions == 1 and compactor.rewritten_batches > 0
            assert _read_all(store, "c") == _expected(model)
            assert store.log_start_offset("c", 0) == 0
            assert len(store.commit_log.queue.files) < segments  # old entries' segments freed
            # a fetch at a removed offset returns the next record kept
            removed = min(set(model) - {o for o, _, _ in _expected(model)})
            assert _read_all(store, "c", removed)[0][0] > removed
            # producing and cleaning again keeps exactly the same view
            model.update(_produce(store, "c", _workload(random.Random(2), batches=100)))
            model.update(_produce(store, "c", [[(b"last2", b"w")]]))
            await store.retention.run_once()
            assert _read_all(store, "c") == _expected(model)
    run(body())


def test_tombstones_go_after_delete_retention_ms(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("c", 1, dict(KEEP_TOMBSTONES))
            model = _produce(store, "c", [[(b"a", b"1"), (b"b", b"1")], [(b"a", None)],
                                          [(b"c", b"1")], [(b"z", b"end")]])
            await store.retention.run_once()
            assert _read_all(store, "c") == _expected(model)  # the tombstone of "a" stays
            store.alter_topic_configs("c", {"delete.retention.ms": "0"})
            model.update(_produce(store, "c", [[(b"b", b"2")], [(b"z2", b"end")]]))
            await store.retention.run_once()
            assert _read_all(store, "c") == _expected(model, tombstones=False)
    run(body())


def test_a_compacted_partition_reads_the_same_after_restart_and_rebuild(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            model = _table(store, seed=3)
            await store.retention.run_once()
            await store.retention.run_once()
            view = _read_all(store, "c")
            assert view == _expected(model)
            directory = store.paths.consumequeue_dir("c", 0)
        async with open_store(tmp_path) as store:
            assert _read_all(store, "c") == view
        shutil.rmtree(directory)
        async with open_store(tmp_path) as store:  # rebuilt from the CommitLog
            # records a cleaning removed may come back from entries not yet deleted, each at
            # its own offset; the rebuilt partition is all dirty, and the next cleaning
            # removes them again
            rebuilt = _read_all(store, "c")
            assert set(view) <= set(rebuilt)
            assert all(model[offset] == (key, value) for offset, key, value in rebuilt)
            assert [offset for offset, _, _ in rebuilt] == sorted({o for o, _, _ in rebuilt})
            assert store.log_start_offset("c", 0) == 0
            await store.retention.run_once()
            assert _read_all(store, "c") == view
            assert store.log_end_offset("c", 0) == max(model) + 1
    run(body())


def test_producer_fields_and_offsets_of_a_rewritten_batch_survive(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("c", 1, dict(KEEP_TOMBSTONES))
            _produce(store, "c", [[(b"a", b"1"), (b"b", b"1"), (b"a", b"2")], [(b"z", b"z")]])
            await store.retention.run_once()
            first = store.read("c", 0, 0, 1 << 20).buffers[0]
            header = read_header(first)
            assert header.base_offset == 0 and header.last_offset_delta == 2
            assert header.record_count == 2
            assert [r.offset for r in decode_records(first)] == [1, 2]
    run(body())


def test_compact_and_delete_applies_retention_bytes_over_removed_offsets(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("c", 1, {**KEEP_TOMBSTONES, "cleanup.policy": "compact,delete",
                                        "retention.ms": "-1"})
            model = _produce(store, "c", [[(b"a", b"x" * 200)] for _ in range(30)] +
                             [[(b"b", b"y" * 200)], [(b"end", b"z")]])
            await store.retention.run_once()  # "a" keeps only its last record, at 29
            assert _read_all(store, "c") == _expected(model)
            queue = store.queues.get("c", 0)
            last_three = store.logs.bytes_between(queue, 29, 32)  # "a" at 29, "b", "end"
            store.alter_topic_configs("c", {"retention.bytes": str(last_three)})
            await store.retention.run_once()  # offsets 0-28 were removed: they weigh nothing
            assert store.log_start_offset("c", 0) == 29
            assert [offset for offset, _, _ in _read_all(store, "c", 29)] == [29, 30, 31]
    run(body())


def test_max_compaction_lag_cleans_below_the_dirty_ratio(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            model = _table(store, seed=4)
            await store.retention.run_once()  # all dirty: cleaned
            compactor = store.retention.compactor
            assert compactor.cleaned_partitions == 1
            store.alter_topic_configs("c", {"min.cleanable.dirty.ratio": "0.99"})
            model.update(_produce(store, "c", [[(b"k1", b"new")], [(b"end", b"z")]]))
            await store.retention.run_once()  # a small dirty share: not due
            assert compactor.cleaned_partitions == 1
            # the records carry timestamp 1000 (1970): older than any lag
            store.alter_topic_configs("c", {"max.compaction.lag.ms": "60000"})
            await store.retention.run_once()
            assert compactor.cleaned_partitions == 2
            assert _read_all(store, "c") == _expected(model)
    run(body())

