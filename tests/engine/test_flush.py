"""Flush services: SYNC_FLUSH group commit shares fsyncs; ASYNC_FLUSH answers at once."""
from __future__ import annotations

import asyncio

from commitgate.engine import StoreStatus
from tests.engine.conftest import batch, open_store


def test_sync_flush_group_commit_covers_many_appends_with_one_fsync(tmp_path, run):
    async def body():
        async with open_store(tmp_path, flush_disk_type="SYNC_FLUSH",
                              commitlog_segment_bytes=1 << 20) as store:
            store.create_topic("t", 1)

            async def writer(n: int) -> list[int]:
                ends = []
                for _ in range(5):
                    result = store.append("t", 0, batch([b"w%d" % n]), offset_count=1,
                                          max_timestamp=0)
                    assert await store.wait_durable(result.phy_end) is StoreStatus.OK
                    assert store.flush_service.flushed_offset >= result.phy_end
                    assert store.checkpoint.value.commitlog_flushed >= result.phy_end
                    ends.append(result.phy_end)
                return ends

            await asyncio.gather(*(writer(n) for n in range(64)))
            service = store.flush_service
            assert service.requests == 320
            assert service.syncs < service.requests / 4  # one fsync served many waiters
            assert store.log_end_offset("t", 0) == 320
    run(body())


def test_sync_flush_wait_for_already_durable_offset_returns_at_once(tmp_path, run):
    async def body():
        async with open_store(tmp_path, flush_disk_type="SYNC_FLUSH") as store:
            store.create_topic("t", 1)
            result = store.append("t", 0, batch([b"a"]), offset_count=1, max_timestamp=0)
            assert await store.wait_durable(result.phy_end) is StoreStatus.OK
            syncs = store.flush_service.syncs
            assert await store.wait_durable(result.phy_end) is StoreStatus.OK
            assert store.flush_service.syncs == syncs
    run(body())


def test_async_flush_answers_at_once_and_the_timer_flushes(tmp_path, run):
    async def body():
        async with open_store(tmp_path, flush_interval_ms=20, flush_least_pages=1) as store:
            store.create_topic("t", 1)
            result = store.append("t", 0, batch([b"x" * 5000]), offset_count=1, max_timestamp=0)
            assert await store.wait_durable(result.phy_end) is StoreStatus.OK
            for _ in range(200):  # bounded: the 20 ms timer needs a few turns at most
                if store.flush_service.flushed_offset >= result.phy_end:
                    break
                await asyncio.sleep(0.01)
            assert store.flush_service.flushed_offset >= result.phy_end
    run(body())


def test_consumequeue_flush_advances_the_checkpoint(tmp_path, run):
    async def body():
        async with open_store(tmp_path, consumequeue_flush_interval_ms=20,
                              consumequeue_flush_thorough_interval_ms=20) as store:
            store.create_topic("t", 100)
            for p in range(100):  # more dirty files than the per-file threshold: one syncfs
                store.append("t", p, batch([b"v"]), offset_count=1, max_timestamp=0)
            end = store.commit_log.max_offset
            for _ in range(200):
                if store.checkpoint.value.consumequeue_flushed >= end:
                    break
                await asyncio.sleep(0.01)
            assert store.checkpoint.value.consumequeue_flushed >= end
            assert not store.handles.dirty
    run(body())


def test_consumequeue_flush_leaves_lightly_dirty_files_until_a_thorough_round(tmp_path, run):
    async def body():
        async with open_store(tmp_path, consumequeue_flush_interval_ms=20,
                              consumequeue_flush_thorough_interval_ms=3_600_000,
                              consumequeue_entries_per_file=1_000) as store:
            store.create_topic("t", 3)
            for _ in range(1_000):  # fills partition 2's first file with single units
                store.append("t", 2, batch([b"v"]), offset_count=1, max_timestamp=0)
            for _ in range(2 * 4096 // 20 + 1):  # two pages of 20-byte units in partition 0
                store.append("t", 0, batch([b"v"]), offset_count=1, max_timestamp=0)
            store.append("t", 1, batch([b"v"]), offset_count=1, max_timestamp=0)
            store.append("t", 2, batch([b"v"]), offset_count=1, max_timestamp=0)
            store.queues.drain()  # units wait in memory until a page gathers: write them all
            await store.consumequeue_flush_service.flush(thorough=False)
            dirty = {(m.path.parent.name, m.path.name) for m in store.handles.dirty}
            assert dirty == {("1", f"{0:020d}"), ("2", f"{20_000:020d}")}, dirty
            assert store.checkpoint.value.consumequeue_flushed == 0
            await store.consumequeue_flush_service.flush(thorough=True)
            assert not store.handles.dirty
            assert store.checkpoint.value.consumequeue_flushed == store.commit_log.max_offset
    run(body())
