"""Query by key against a real store: the IndexFiles point at the batches, and only those
CommitLog entries are read (counted by wrapping the CommitLog's readers)."""
from __future__ import annotations

import time

from commitgate.engine import StoreStatus
from commitgate.protocol.record_batch import decode_records
from tests.engine.conftest import batch, open_store

BATCHES = 3_000
RECORDS = 4


class ReadCounter:
    """Counts the CommitLog entries read: ``decode`` (the header) and ``entry`` (the bytes)."""

    def __init__(self, commit_log) -> None:
        self.decoded = self.entries = 0
        decode, entry = commit_log.decode, commit_log.entry

        def counted_decode(phy, **kw):
            self.decoded += 1
            return decode(phy, **kw)

        def counted_entry(phy, size):
            self.entries += 1
            return entry(phy, size)

        commit_log.decode, commit_log.entry = counted_decode, counted_entry


def _fill(store) -> None:
    """Topic t over 2 partitions: batch i holds keys k<i>-0 .. k<i>-3; every 1000th batch also
    holds "rare" (three batches in all)."""
    store.create_topic("t", 2)
    for i in range(BATCHES):
        keys = [b"k%d-%d" % (i, j) for j in range(RECORDS)]
        if i % 1000 == 7:
            keys[2] = b"rare"
        body = batch([b"v%d" % i] * RECORDS, keys=keys)
        result = store.append("t", i % 2, body, offset_count=RECORDS, max_timestamp=1_003)
        assert result.status is StoreStatus.OK


def test_reads_are_bounded_by_the_hits_not_the_partition(tmp_path, run):
    async def body():
        async with open_store(tmp_path, commitlog_segment_bytes=1 << 20,
                              index_hash_slots=4096, index_max_entries=20_000) as store:
            _fill(store)
            await store.index.catch_up(store.dispatcher.dispatched_offset)
            counter = ReadCounter(store.commit_log)
            found = await store.key_batches("t", b"rare", 0, 2**62, 100)
            assert [(b.partition, b.base_offset) for b in found.batches] == \
                [(1, 2007 // 2 * RECORDS), (1, 1007 // 2 * RECORDS), (1, 7 // 2 * RECORDS)]
            assert found.index_hits == found.entries_read == 3
            assert counter.decoded == counter.entries == 3  # of 3,000 batches stored
            records = [r for b in found.batches for r in decode_records(b.body)
                       if r.key == b"rare"]
            assert [r.offset for r in records] == [4014, 2014, 14]

            counter.decoded = counter.entries = 0
            absent = await store.key_batches("t", b"never-produced", 0, 2**62, 100)
            assert absent.batches == [] and counter.decoded == absent.index_hits == 0
            assert (await store.key_batches("u", b"rare", 0, 2**62, 100)).batches == []
    run(body())


def test_max_and_the_store_time_range(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            before = int(time.time() * 1000)
            _fill(store)
            after = int(time.time() * 1000)
            found = await store.key_batches("t", b"rare", before, after, 100)
            assert len(found.batches) == 3
            assert all(before <= b.store_timestamp <= after for b in found.batches)
            newest = await store.key_batches("t", b"rare", 0, 2**62, 1)
            assert [b.base_offset for b in newest.batches] == [found.batches[0].base_offset]
            # stored before the range: the IndexFiles' time filter leaves nothing to read
            counter = ReadCounter(store.commit_log)
            later = await store.key_batches("t", b"rare", after + 60_000, 2**62, 100)
            assert later.batches == [] and counter.decoded == 0
            # the header's store time is exact where the IndexFile keeps whole seconds
            earlier = await store.key_batches("t", b"rare", 0, before - 1, 100)
            assert earlier.batches == [] and counter.decoded <= 3
    run(body())


def test_records_below_the_log_start_and_a_recreated_topic_are_not_found(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            _fill(store)
            assert store.delete_records("t", 1, 1007 // 2 * RECORDS + RECORDS)[0] \
                is StoreStatus.OK
            found = await store.key_batches("t", b"rare", 0, 2**62, 100)
            assert [b.base_offset for b in found.batches] == [2007 // 2 * RECORDS]
            assert store.delete_topic("t").status is StoreStatus.OK
            store.create_topic("t", 2)
            assert (await store.key_batches("t", b"rare", 0, 2**62, 100)).batches == []
    run(body())
